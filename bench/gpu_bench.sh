#!/usr/bin/env bash
# bench/gpu_bench.sh [NETRUN] [TORCH_BASELINE] [CACHE]: netc's ResNet-50
# throughput beside PyTorch's, in the same call, on a machine with a GPU.
#
# NETRUN is a netrun binary (default build/release/netrun) built on a
# development machine (the GPU machine needs neither flex nor bison), CACHE
# its NVRTC kernel cache (filled beforehand without a GPU to skip about 60 s
# of NVRTC per program: tests/api/api_precompile . CACHE
# models/resnet50.net:256:fp16 ...), TORCH_BASELINE PyTorch's reference
# benchmark (torch_baseline.py, shipped beside the project in shared/bench/).
# BATCHES (default "64 128 256") picks the batch sizes; REPEATS (default 1)
# runs every benchmark, netc's and PyTorch's, that many times, alternating,
# and the table takes each one's best run: one slow call of either side does
# not make the ratio.
#
# For each batch: `netrun bench` training and inference (fp16), then
# torch_baseline.py's AMP fp16 channels_last, torch.compile fp16 and bf16 and
# inference configurations at the same batch.  Prints every benchmark's own
# line, then one table last: images/s, netc's ratio to the best PyTorch
# training configuration (torch.compile bf16 on the H200) and to eager AMP,
# peak GPU memory.  bench/zoo_bench.sh does the same for the whole ResNet
# family.  Logs go
# to $OUT when set.  PyTorch runs with LD_LIBRARY_PATH unset: a system
# cuDNN older than the one its wheel bundles breaks it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
netrun=${1:-build/release/netrun}
baseline=${2:-../shared/bench/torch_baseline.py}
cache=${3:-}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
batches=${BATCHES:-64 128 256}
repeats=${REPEATS:-1}
cache_opt=()
[ -n "$cache" ] && cache_opt=(--cache "$cache")

for b in $batches; do
  for r in $(seq "$repeats"); do
    for mode in training inference; do
      flag=()
      [ "$mode" = inference ] && flag=(--inference)
      echo "=== netc: netrun bench models/resnet50.net --batch $b ${flag[*]} (run $r)"
      "$netrun" bench models/resnet50.net --device gpu --batch "$b" --steps 30 "${flag[@]}" "${cache_opt[@]}" 2>&1 |
        tee -a "$out/netc_${mode}_$b.log"
    done
    echo "=== PyTorch: $baseline (batch $b, run $r)"
    env -u LD_LIBRARY_PATH BS="$b" OUT="$out" python3 "$baseline" amp_fp16_cl compile_fp16_cl compile_bf16_cl infer_fp16_cl 2>&1 |
      tee -a "$out/torch_$b.log"
  done
done

best() { sort -g | tail -1; } # the largest of the numbers on stdin
netc_field() { # mode batch field(images/s | GiB): the best run's images/s, the largest peak
  local f="$out/netc_$1_$2.log"
  [ -f "$f" ] || return 0
  if [ "$3" = ips ]; then grep -oE '[0-9.]+ images/s' "$f" | grep -oE '^[0-9.]+' | best
  else grep -oE 'peak device memory [0-9.]+' "$f" | grep -oE '[0-9.]+$' | best; fi
}
torch_field() { # config batch field(img_s | peak_GiB): the largest over the runs
  [ -f "$out/torch_$2.log" ] || return 0
  grep -F "\"config\": \"$1\"" "$out/torch_$2.log" | grep -oE "\"$3\": [0-9.]+" | grep -oE '[0-9.]+$' | best
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk "BEGIN{printf \"%.2f\", $1 / $2}" || echo "-"; }

echo
echo "=== ResNet-50 images/s, same call, best of $repeats ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null))"
row='%-6s %-10s %9s %10s %13s %13s %-16s %9s %9s %9s\n'
# shellcheck disable=SC2059
printf "$row" batch mode netc "torch AMP" "compile fp16" "compile bf16" "best PyTorch" "netc/best" "netc GiB" \
  "torch GiB"
for b in $batches; do
  tr=$(netc_field training "$b" ips) ti=$(netc_field inference "$b" ips)
  amp=$(torch_field amp_fp16_cl "$b" img_s) c16=$(torch_field compile_fp16_cl "$b" img_s)
  cbf=$(torch_field compile_bf16_cl "$b" img_s) inf=$(torch_field infer_fp16_cl "$b" img_s)
  bc=- bv=
  for c in amp_fp16_cl:$amp compile_fp16_cl:$c16 compile_bf16_cl:$cbf; do
    v=${c#*:}
    if [ -n "$v" ] && { [ -z "$bv" ] || awk "BEGIN{exit !($v > $bv)}"; }; then bc=${c%%:*} bv=$v; fi
  done
  # shellcheck disable=SC2059
  printf "$row" "$b" training "${tr:--}" "${amp:--}" "${c16:--}" "${cbf:--}" "$bc" "$(ratio "$tr" "$bv")" \
    "$(netc_field training "$b" GiB)" "$([ "$bc" != - ] && torch_field "$bc" "$b" peak_GiB)"
  # shellcheck disable=SC2059
  printf "$row" "$b" inference "${ti:--}" "-" "-" "-" infer_fp16_cl "$(ratio "$ti" "$inf")" \
    "$(netc_field inference "$b" GiB)" "$(torch_field infer_fp16_cl "$b" peak_GiB)"
done
