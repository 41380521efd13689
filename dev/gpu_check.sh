#!/usr/bin/env bash
# dev/gpu_check.sh [BUILD]: the GPU checks on a machine with a GPU, from
# the repo root, with BUILD (default: build) built elsewhere beforehand.
#   1. netc-gpu-info: the device, the driver, NVRTC (or "no GPU")
#   2. ctest -R gpu --output-on-failure in BUILD
#   3. a summary table: device, each test's result, each kernel's timing
#      (test_gpu_eltwise writes BUILD/tests/gpu/gpu_eltwise.tsv)
# Exit status: ctest's.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
info=$build/tests/gpu/netc-gpu-info
tsv=$build/tests/gpu/gpu_eltwise.tsv
if [ ! -x "$info" ]; then
  echo "gpu_check: no $info: configure and build $build first" >&2
  exit 1
fi

echo "=== netc-gpu-info ==="
info_out=$("$info" 2>&1)
echo "$info_out"

echo "=== ctest -R gpu ==="
rm -f "$tsv"
log=$(mktemp)
(cd "$build" && ctest -R gpu --output-on-failure) 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

echo
echo "=== summary ==="
device=$(echo "$info_out" | sed -n 's/^gpu 0: //p')
cc=$(echo "$info_out" | sed -n 's/^  compute capability: .*(\(sm_[0-9]*\))/\1/p' | head -1)
sms=$(echo "$info_out" | sed -n 's/^  SMs: \([0-9]*\).*/\1/p' | head -1)
mem=$(echo "$info_out" | sed -n 's/^  memory: \([0-9.]* GiB\).*/\1/p' | head -1)
drv=$(echo "$info_out" | sed -n 's/^  driver: //p' | head -1)
if [ -n "$device" ]; then
  printf '%-14s %s, %s, %s SMs, %s, %s\n' device "$device" "$cc" "$sms" "$mem" "$drv"
else
  printf '%-14s %s\n' device "$(echo "$info_out" | grep '^no GPU' || echo unknown)"
fi
printf '%-14s %s\n' nvrtc "$(echo "$info_out" | sed -n 's/^nvrtc: //p')"
printf '%-14s %s\n' test result
sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) [ .*]*\([A-Za-z][A-Za-z ()]*[A-Za-z)]\) *\([0-9.]* sec\).*/\1 \2 \3/p' "$log" |
  while read -r name result rest; do printf '%-14s %-12s %s\n' "$name" "$result" "$rest"; done
if [ -s "$tsv" ]; then
  printf '\n%-24s %10s %10s %10s %9s\n' kernel elements "max diff" ms GB/s
  while IFS=$'\t' read -r k n d ms gbs; do
    printf '%-24s %10s %10s %10s %9s\n' "$k" "$n" "$d" "$ms" "$gbs"
  done <"$tsv"
else
  echo "(no kernel timings: gpu.eltwise did not run)"
fi
rm -f "$log"
exit "$rc"
