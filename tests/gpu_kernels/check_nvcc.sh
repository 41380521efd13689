#!/bin/sh
# check_nvcc.sh EMIT ROOT BUILDDIR - the generated kernels compile with nvcc
# for sm_90 as well as with NVRTC: EMIT (netc-kern-emit) writes one file per
# kerntest graph holding every kind of node's kernels to BUILDDIR/nvcc, and
# each must compile with `nvcc -arch=sm_90 -c` without a warning.  Exits 77
# (skipped) when no nvcc is found on PATH or in /usr/local/cuda.
emit=$1
root=$2
dir=$3/nvcc
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "skipped: no nvcc (not on PATH, not in /usr/local/cuda/bin)"
  exit 77
fi
rm -rf "$dir" && mkdir -p "$dir" || exit 1
"$emit" "$root" "$dir" || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
ls "$dir"/*.cu | xargs -P "$jobs" -I{} sh -c \
  '"$1" -arch=sm_90 -c "$2" -o "${2%.cu}.o" >"${2%.cu}.log" 2>&1 || rm -f "${2%.cu}.o"' \
  sh "$nvcc" {}
n=0
fail=0
for src in "$dir"/*.cu; do
  n=$((n + 1))
  obj=${src%.cu}.o
  if [ ! -f "$obj" ]; then
    echo "FAIL: $nvcc -arch=sm_90 -c $src"
    head -50 "${src%.cu}.log"
    fail=$((fail + 1))
  elif grep -q -i warning "${src%.cu}.log"; then
    echo "FAIL: nvcc warned on $src"
    head -50 "${src%.cu}.log"
    fail=$((fail + 1))
  else
    echo "ok: $(basename "$src") ($(grep -c '__global__' "$src") kernels)"
  fi
done
[ "$n" -gt 0 ] || { echo "FAIL: netc-kern-emit wrote nothing"; exit 1; }
echo "nvcc: $((n - fail)) of $n files compiled for sm_90"
[ "$fail" -eq 0 ]
