#!/bin/sh
# check_nvcc.sh EMIT BUILDDIR - the generated eltwise kernels compile with
# nvcc for sm_90 as well as with NVRTC: EMIT (netc-gpu-emit) writes them to
# BUILDDIR/nvcc, and each must compile with `nvcc -arch=sm_90 -c` without
# a warning (and, where cuobjdump exists, hold the kernel's sm_90 code).
# Exits 77 (skipped) when no nvcc is found on PATH or in /usr/local/cuda.
emit=$1
dir=$2/nvcc
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "skipped: no nvcc (not on PATH, not in /usr/local/cuda/bin)"
  exit 77
fi
rm -rf "$dir" && mkdir -p "$dir" || exit 1
"$emit" "$dir" || exit 1
# compile in parallel (one job per core), then judge each result in order
jobs=$(nproc 2>/dev/null || echo 2)
ls "$dir"/*.cu | xargs -P "$jobs" -I{} sh -c \
  '"$1" -arch=sm_90 -c "$2" -o "${2%.cu}.o" >"${2%.cu}.log" 2>&1 || rm -f "${2%.cu}.o"' \
  sh "$nvcc" {}
cuobjdump=$(dirname "$nvcc")/cuobjdump
n=0
fail=0
for src in "$dir"/*.cu; do
  n=$((n + 1))
  obj=${src%.cu}.o
  kernel=$(basename "${src%.cu}")
  if [ ! -f "$obj" ]; then
    echo "FAIL: $nvcc -arch=sm_90 -c $src"
    cat "${src%.cu}.log"
    fail=$((fail + 1))
  elif grep -q -i warning "${src%.cu}.log"; then
    echo "FAIL: nvcc warned on $src"
    cat "${src%.cu}.log"
    fail=$((fail + 1))
  elif [ -x "$cuobjdump" ] && ! "$cuobjdump" -sass "$obj" | grep -q "Function : $kernel\$"; then
    echo "FAIL: $obj has no sm_90 code for $kernel"
    fail=$((fail + 1))
  fi
done
[ "$n" -gt 0 ] || { echo "FAIL: netc-gpu-emit wrote nothing"; exit 1; }
echo "nvcc: $((n - fail)) of $n kernels compiled for sm_90"
[ "$fail" -eq 0 ]
