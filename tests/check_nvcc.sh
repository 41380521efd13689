#!/bin/sh
# check_nvcc.sh [--kernel-per-file] BUILDDIR EMIT [ARG...] - generated CUDA
# sources compile with nvcc for sm_90 as well as with NVRTC.  `EMIT ARG...
# BUILDDIR/nvcc` writes .cu files there (tests/gpu's netc-gpu-emit: one
# eltwise kernel a file, named after it; tests/codegen/kernels' netc-kern-emit:
# every node kernel of a graph a file), and each must compile with
# `nvcc -arch=sm_90 -c` without a warning.  With --kernel-per-file, where
# cuobjdump exists, each object must also hold sm_90 code for the kernel
# its file is named after.  Exits 77 (skipped) when no nvcc is found on
# PATH or in /usr/local/cuda.
per_file=0
[ "$1" = --kernel-per-file ] && { per_file=1; shift; }
dir=$1/nvcc
shift
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "skipped: no nvcc (not on PATH, not in /usr/local/cuda/bin)"
  exit 77
fi
rm -rf "$dir" && mkdir -p "$dir" || exit 1
"$@" "$dir" || exit 1
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
    head -50 "${src%.cu}.log"
    fail=$((fail + 1))
  elif grep -q -i warning "${src%.cu}.log"; then
    echo "FAIL: nvcc warned on $src"
    head -50 "${src%.cu}.log"
    fail=$((fail + 1))
  elif [ "$per_file" -eq 1 ] && [ -x "$cuobjdump" ] && ! "$cuobjdump" -sass "$obj" | grep -q "Function : $kernel\$"; then
    echo "FAIL: $obj has no sm_90 code for $kernel"
    fail=$((fail + 1))
  elif [ "$per_file" -eq 0 ]; then
    echo "ok: $(basename "$src") ($(grep -c '__global__' "$src") kernels)"
  fi
done
[ "$n" -gt 0 ] || { echo "FAIL: $1 wrote nothing"; exit 1; }
echo "nvcc: $((n - fail)) of $n files compiled for sm_90"
[ "$fail" -eq 0 ]
