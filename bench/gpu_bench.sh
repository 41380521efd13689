#!/usr/bin/env bash
# bench/gpu_bench.sh [BUILD] [TORCH_BASELINE]: netc's ResNet-50 throughput
# beside PyTorch's, in the same call, on a machine with a GPU.
#
# Run from the repo root with BUILD (default: build) configured and built on
# a development machine (flex and bison are not needed here) and its kernel
# cache filled without a GPU:
#   build/tests/gpu_exec/bench_gpu_resnet50 --precompile . build/kcache
# TORCH_BASELINE is the PyTorch reference benchmark (torch_baseline.py,
# shipped beside the project in shared/bench/).  Prints both benchmarks'
# lines, then one table: images/s of netc and of PyTorch's configurations at
# batch 256 and their ratios.  Logs go to $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
baseline=${2:-../shared/bench/torch_baseline.py}
out=${OUT:-$(mktemp -d)}
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu:$PWD/$build/hostlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "=== netc: bench_gpu_resnet50"
"$build/tests/gpu_exec/bench_gpu_resnet50" . "$build/kcache" 2>&1 | tee "$out/netc_bench.log"
echo "=== PyTorch: $baseline (batch 256)"
env -u LD_LIBRARY_PATH BS=256 OUT=$out python3 "$baseline" amp_fp16_cl compile_fp16_cl infer_fp16_cl 2>&1 | tee "$out/torch_baseline.log"

netc_ips() { # mode batch
  grep -E "^resnet50 $1 +fp16 batch +$2 " "$out/netc_bench.log" | tail -1 | grep -oE '[0-9]+ images/s' | grep -oE '[0-9]+'
}
torch_ips() { # config
  grep -F "\"config\": \"$1\"" "$out/torch_baseline.log" | grep -oE '"img_s": [0-9.]+' | grep -oE '[0-9.]+$'
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk "BEGIN{printf \"%.2f\", $1 / $2}" || echo "-"; }

train=$(netc_ips training 256) infer=$(netc_ips inference 256)
amp=$(torch_ips amp_fp16_cl) comp=$(torch_ips compile_fp16_cl) tinf=$(torch_ips infer_fp16_cl)
echo
echo "=== ResNet-50, batch 256, images/s (same call)"
printf '%-44s %10s %8s\n' "configuration" "img/s" "netc/x"
printf '%-44s %10s %8s\n' "netc training (fp16, CUDA graph)" "${train:--}" ""
printf '%-44s %10s %8s\n' "PyTorch AMP fp16 channels_last" "${amp:--}" "$(ratio "$train" "$amp")"
printf '%-44s %10s %8s\n' "PyTorch torch.compile fp16 channels_last" "${comp:--}" "$(ratio "$train" "$comp")"
printf '%-44s %10s %8s\n' "netc inference (fp16)" "${infer:--}" ""
printf '%-44s %10s %8s\n' "PyTorch inference fp16 channels_last" "${tinf:--}" "$(ratio "$infer" "$tinf")"
