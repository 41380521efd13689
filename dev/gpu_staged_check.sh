#!/usr/bin/env bash
# dev/gpu_staged_check.sh [SCALES]: on the GPU machine, from the repository
# root, with .x/ staged by dev/stage_gpu.sh on the build machine (the GPU
# machine lacks flex, bison and some libraries, so no build folder is
# carried): the GPU tests the staged programs hold, then ResNet-50's
# inference at batch 256 in f16, INT8 and INT8 with calibrated steps, and a
# short table last.  Logs go to $OUT (default: a fresh folder).
#   - gpu_cudnn.conv (test_cudnn_conv with its bench), gpu_exec.models
#     (test_gpu_exec), gpu_nccl.step (test_gpu_allreduce, one rank) and
#     gpu_kernels.gpu (test_kernels_gpu), at once, each under a time limit;
#   - `netrun bench --inference --batch 256` of models/resnet50.net
#     compiled three ways: f16, --int8=all (each input quantized by its own
#     maximum) and --int8=all --int8-scales SCALES (SCALES: a scales file,
#     default every layer at step 0.01, made here; the steps change no
#     speed, only which casts pass requant folds).
# The GPU is shared by the four tests, so their timings are not
# benchmarks; the three benches run alone, one after the other.
# LIMIT (seconds, default 280) bounds the two long tests, the others and each
# bench get less.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
bin=.x/bin
[ -x "$bin/netrun" ] || { echo "gpu_staged_check: no $bin/netrun: run dev/stage_gpu.sh first" >&2; exit 1; }
if [ -f .x/lib.tar.xz ] && [ ! -d /tmp/lib ]; then tar xJf .x/lib.tar.xz -C /tmp; fi
export LD_LIBRARY_PATH=/tmp/lib:/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1
limit=${LIMIT:-280}
t0=$(date +%s)
(timeout "$limit" "$bin/test_cudnn_conv" > "$out/cudnn.log" 2>&1; echo "rc=$?" >> "$out/cudnn.log") &
(timeout "$limit" "$bin/test_gpu_exec" . /tmp/kc_ge > "$out/exec.log" 2>&1; echo "rc=$?" >> "$out/exec.log") &
(timeout $((limit / 2)) "$bin/test_gpu_allreduce" . /tmp/kc_ar > "$out/allreduce.log" 2>&1; echo "rc=$?" >> "$out/allreduce.log") &
(timeout $((limit / 2)) "$bin/test_kernels_gpu" . > "$out/kernels.log" 2>&1; echo "rc=$?" >> "$out/kernels.log") &
wait
echo "tests: $(($(date +%s) - t0)) s"

scales=${1:-}
if [ -z "$scales" ]; then
  scales=$out/uniform.scales
  "$bin/netc" models/resnet50.net --inference --int8=all --print-after=precision --no-loc 2>/dev/null |
    grep 'precision=i8' | sed 's/.*# //' | awk '{print $1, 0.01}' > "$scales"
fi
declare -A flags=([f16]="" [int8]="--int8=all" [int8_calibrated]="--int8=all --int8-scales $scales")
for m in f16 int8 int8_calibrated; do
  # shellcheck disable=SC2086
  "$bin/netc" models/resnet50.net ${flags[$m]} -o "$out/r50_$m.so" > "$out/netc_$m.log" 2>&1 ||
    echo "netc $m failed: $(tail -1 "$out/netc_$m.log")"
  timeout $((limit / 3)) "$bin/netrun" bench "$out/r50_$m.so" --inference --batch 256 --cache /tmp/kc_bench > "$out/bench_$m.log" 2>&1
done

echo
echo "=== results (logs in $out)"
for t in cudnn exec allreduce kernels; do
  printf '%-10s %s  %s\n' "$t" "$(grep -E '^rc=' "$out/$t.log" | tail -1)" "$(grep -E 'passed|failed' "$out/$t.log" | tail -1)"
done
grep -E 'check failed' "$out"/*.log | head -10
grep -E 'fp8|e4m3|weighted' "$out/cudnn.log" | tail -4
for m in f16 int8 int8_calibrated; do
  printf '%-16s %s\n' "$m" "$(grep -E 'images/s' "$out/bench_$m.log" | tail -1)"
done
