#!/usr/bin/env bash
# bench/zoo_bench.sh: the ResNet family, netc beside the best PyTorch, in one
# call on the GPU machine (issue 17's zoo benchmark).
#
#   NETC_BUILD=build/p1 OUT=... bash bench/zoo_bench.sh
#
# For every model of MODELS: `netrun bench models/MODEL.net` training at fp16
# and bf16 and inference (fp16), then shared/bench/torch_baseline.py with
# ARCH=MODEL: torch.compile fp16 (GradScaler) and bf16, eager AMP fp16, all
# channels_last, and fp16 inference (eager; torch.compile max-autotune with
# TORCH_INFER_COMPILE=1, about 4 minutes a model).  Every benchmark runs
# REPEATS times, alternating netc and PyTorch, and the table keeps each one's
# best.  The table, printed last: per model and mode, netc's images/s and
# peak GiB, the best PyTorch configuration with its images/s and peak GiB, and
# netc's ratio to it (training: to the best of the three training
# configurations; bf16: to torch.compile bf16, and to netc fp16).  Logs go to
# $OUT (NAME_MODE_RUN.log, torch_MODEL_RUN.log); PyTorch runs with
# LD_LIBRARY_PATH unset (the machine's system cuDNN breaks torch's own).
#
# Settings (environment): NETC_BUILD (build/release), MODELS (resnet50
# resnext50_32x4d resnext101_32x8d resnext101_64x4d wide_resnet50_2
# wide_resnet101_2), BATCH (256), STEPS (30), REPEATS (1), DEVICE (gpu; cpu
# for a trial of the script here, with TORCH=0 and a small MODELS such as
# smallcnn), TORCH (1; 0: netc only), BASELINE (../shared/bench/
# torch_baseline.py), CACHE (netrun's kernel cache), PYTHON (python3),
# RUN_TIMEOUT (seconds a run may take, 600).  With the defaults and REPEATS=1
# about 25 minutes on the H200 (each torch.compile takes about a minute):
# give MODELS a few at a time to stay inside one 10-minute call.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${NETC_BUILD:-build/release}
netrun=$build/netrun
models=${MODELS:-resnet50 resnext50_32x4d resnext101_32x8d resnext101_64x4d wide_resnet50_2 wide_resnet101_2}
batch=${BATCH:-256}
steps=${STEPS:-30}
repeats=${REPEATS:-1}
device=${DEVICE:-gpu}
torch=${TORCH:-1}
baseline=${BASELINE:-../shared/bench/torch_baseline.py}
python=${PYTHON:-python3}
limit=${RUN_TIMEOUT:-600}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
cache_opt=()
[ -n "${CACHE:-}" ] && cache_opt=(--cache "$CACHE")
train_cfgs="compile_bf16_cl compile_fp16_cl amp_fp16_cl"
infer_cfg=infer_fp16_cl
[ "${TORCH_INFER_COMPILE:-0}" = 1 ] && infer_cfg=compile_infer_fp16_cl

if [ ! -x "$netrun" ]; then
  echo "zoo_bench: no $netrun (set NETC_BUILD to a build folder)" >&2
  exit 1
fi
if [ "$torch" = 1 ] && [ ! -f "$baseline" ]; then
  echo "zoo_bench: no $baseline (set BASELINE, or TORCH=0)" >&2
  exit 1
fi
for m in $models; do
  [ -f "models/$m.net" ] || { echo "zoo_bench: no models/$m.net" >&2; exit 1; }
done

# netc MODEL MODE RUN: one netrun bench, logged to $out/MODEL_MODE_RUN.log
netc() {
  local flag=()
  case $2 in
  bf16) flag=(--precision bf16) ;;
  inference) flag=(--inference) ;;
  esac
  echo "=== netc: netrun bench models/$1.net --batch $batch ${flag[*]} (run $3)"
  timeout "$limit" "$netrun" bench "models/$1.net" --device "$device" --batch "$batch" --steps "$steps" \
    "${flag[@]}" "${cache_opt[@]}" >"$out/$1_$2_$3.log" 2>&1
  tail -1 "$out/$1_$2_$3.log"
}

for m in $models; do
  for r in $(seq "$repeats"); do
    for mode in fp16 bf16 inference; do netc "$m" "$mode" "$r"; done
    if [ "$torch" = 1 ]; then
      echo "=== PyTorch: ARCH=$m $baseline $train_cfgs $infer_cfg (run $r)"
      # shellcheck disable=SC2086
      env -u LD_LIBRARY_PATH ARCH="$m" BS="$batch" ITERS="$steps" timeout "$((limit * 2))" "$python" "$baseline" \
        $train_cfgs $infer_cfg >"$out/torch_${m}_$r.log" 2>&1
      grep -E '"config"' "$out/torch_${m}_$r.log"
    fi
  done
done

best() { sort -g | tail -1; } # the largest of the numbers on stdin
netc_field() {                # model mode ips|GiB: the best run's images/s, the largest peak
  cat "$out/$1_$2_"*.log 2>/dev/null | if [ "$3" = ips ]; then
    grep -oE '[0-9.]+ images/s' | grep -oE '^[0-9.]+' | best
  else
    grep -oE 'peak device memory [0-9.]+' | grep -oE '[0-9.]+$' | best
  fi
}
torch_field() { # model config img_s|peak_GiB: the largest over the runs
  cat "$out/torch_$1_"*.log 2>/dev/null | grep -F "\"config\": \"$2\"" | grep -oE "\"$3\": [0-9.]+" |
    grep -oE '[0-9.]+$' | best
}
torch_best() { # model configs...: "config img_s" of the fastest
  local m=$1 c v bc="" bv=""
  shift
  for c in "$@"; do
    v=$(torch_field "$m" "$c" img_s)
    if [ -n "$v" ] && { [ -z "$bv" ] || awk "BEGIN{exit !($v > $bv)}"; }; then bc=$c bv=$v; fi
  done
  echo "$bc $bv"
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk "BEGIN{printf \"%.2f\", $1 / $2}" || echo "-"; }

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
echo
echo "=== the ResNet family, batch $batch, images/s, same call, best of $repeats (${gpu:-$device})"
row='%-18s %-9s %9s %7s  %-16s %9s %7s %7s %s\n'
# shellcheck disable=SC2059
printf "$row" model mode netc "GiB" "best PyTorch" "img/s" "GiB" ratio note
for m in $models; do
  f16=$(netc_field "$m" fp16 ips)
  for mode in fp16 bf16 inference; do
    ips=$(netc_field "$m" "$mode" ips) gib=$(netc_field "$m" "$mode" GiB) note=""
    # shellcheck disable=SC2086
    case $mode in
    fp16) read -r cfg tips <<<"$(torch_best "$m" $train_cfgs)" ;;
    bf16)
      read -r cfg tips <<<"$(torch_best "$m" compile_bf16_cl)"
      note="netc bf16/fp16 $(ratio "$ips" "$f16")"
      ;;
    inference) read -r cfg tips <<<"$(torch_best "$m" "$infer_cfg")" ;;
    esac
    tgib=$([ -n "${cfg:-}" ] && torch_field "$m" "$cfg" peak_GiB)
    # shellcheck disable=SC2059
    printf "$row" "$m" "$mode" "${ips:--}" "${gib:--}" "${cfg:--}" "${tips:--}" "${tgib:--}" \
      "$(ratio "$ips" "$tips")" "$note"
  done
done
