#!/usr/bin/env bash
# dev/stage_gpu.sh [BUILD]: stages a build made on this (GPU-less) machine
# for the GPU machine, whose image lacks flex and bison and some of the
# libraries netc links: into .x/ (kept out of git through
# .git/info/exclude), from BUILD (default build/release, built first):
#   .x/bin/          netrun, netc and the GPU test programs
#   .x/lib.tar.xz    lib/ with the shared libraries the binaries need that
#                    a bare CUDA machine may lack (the real files, links
#                    followed), compressed to stay inside the 64 MiB a
#                    command may carry
# Then on the GPU machine, from the repository root (carry .x):
#   tar xJf .x/lib.tar.xz -C /tmp
#   export LD_LIBRARY_PATH=/tmp/lib:/usr/lib/x86_64-linux-gnu
#   .x/bin/netrun bench models/resnet50.net ...   (NETC_BUILD=.x/bin for bench/*.sh)
# PyTorch there runs with LD_LIBRARY_PATH unset.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
[ -x "$build/netrun" ] || { echo "stage_gpu: no $build/netrun: build first (ninja -C $build)" >&2; exit 1; }
progs=(netrun netc tests/gpu/exec/test_gpu_exec tests/gpu/nccl/test_gpu_allreduce tests/gpu/nccl/test_nccl
       tests/codegen/kernels/test_kernels_gpu tests/gpu/cudnn/test_cudnn_conv tests/gpu/jpeg/test_exec_jpeg
       tests/gpu/jpeg/test_gpu_nvjpeg)
mkdir -p .x/bin
for p in "${progs[@]}"; do
  if [ -x "$build/$p" ]; then cp "$build/$p" .x/bin/; else echo "stage_gpu: $build/$p not built: skipped" >&2; fi
done
# the libraries of netrun and netc outside glibc and the CUDA driver's own
libs=$(ldd .x/bin/netrun .x/bin/netc | awk '/=> \// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda)\.so' || true)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lib"
for l in $libs; do cp -L "$l" "$tmp/lib/"; done
tar cJf .x/lib.tar.xz -C "$tmp" lib
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '.x/' "$exclude" 2>/dev/null || echo '.x/' >>"$exclude"
echo "stage_gpu: .x/bin ($(ls .x/bin | wc -l) programs), .x/lib.tar.xz ($(tar tJf .x/lib.tar.xz | grep -c '\.so') libraries," \
  "$(du -k .x/lib.tar.xz | cut -f1) KiB); .x/ is excluded from git"
