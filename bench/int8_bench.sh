#!/usr/bin/env bash
# bench/int8_bench.sh [NETRUN] [TORCH_BASELINE] [CACHE]: ResNet-50 inference
# in f16 and in INT8 beside PyTorch's inference, in one call on a machine
# with a GPU (issue 19's benchmark; issue 18's inference target).
#
#   1. weights: `netrun export models/resnet50.net --seed 1` (the model's
#      initialization: there are no trained ImageNet weights on the GPU
#      machine; the speed does not depend on them);
#   2. a calibration batch of CALIB_IMAGES (default 64) images of
#      normalized-looking pseudo-random pixels, written as safetensors by
#      python3's standard library;
#   3. `netrun calibrate --inputs` on the CPU (the default method, entropy,
#      batch CALIB_BATCH, default 32): the scales of every convolution's
#      input but the first's, as a user's calibration makes them;
#   4. `netc -o` of the f16 model and of `--int8=all --int8-scales`;
#   5. REPEATS times (default 1), alternating: `netrun bench M.so --inference
#      --batch B` for both models at each of BATCHES (default 256), then
#      torch_baseline.py's eager fp16 channels_last inference and, with
#      AUTOTUNE=1 (the default), torch.compile mode="max-autotune-no-cudagraphs"
#      (several minutes of autotuning a batch: AUTOTUNE=0 leaves it out);
#   6. one table last: images/s of each, netc INT8 / netc f16, and each
#      netc model against PyTorch's best inference configuration; the
#      best run of each.
#
# NETRUN (default build/release/netrun) and netc beside it (NETC to name
# another) are built on a development machine (tests/api/api_precompile
# fills CACHE, the NVRTC kernel cache, without a GPU).  Logs, weights,
# scales and models go to $OUT when set.  PyTorch runs with LD_LIBRARY_PATH
# unset: a system cuDNN older than its wheel's breaks it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
netrun=${1:-build/release/netrun}
baseline=${2:-../shared/bench/torch_baseline.py}
cache=${3:-}
netc=${NETC:-$(dirname "$netrun")/netc}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
batches=${BATCHES:-256}
repeats=${REPEATS:-1}
calib=${CALIB_IMAGES:-64}
calib_batch=${CALIB_BATCH:-32}
autotune=${AUTOTUNE:-1}
model=models/resnet50.net
cache_opt=()
[ -n "$cache" ] && cache_opt=(--cache "$cache")
fail() {
  echo "int8_bench: $*" >&2
  exit 1
}

weights=$out/resnet50_seed1.safetensors batch=$out/calibration.safetensors scales=$out/resnet50.scales
"$netrun" export "$model" --seed 1 --out "$weights" || fail "netrun export failed"
python3 - "$batch" "$calib" <<'PY' || fail "could not write the calibration batch"
import json, random, struct, sys
path, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
count = n * 3 * 224 * 224
img = struct.pack("<%df" % count, *[rng.gauss(0.0, 1.0) for _ in range(count)])
lab = struct.pack("<%dq" % n, *[i % 1000 for i in range(n)])
hdr = {"image": {"dtype": "F32", "shape": [n, 3, 224, 224], "data_offsets": [0, len(img)]},
       "label": {"dtype": "I64", "shape": [n], "data_offsets": [len(img), len(img) + len(lab)]}}
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(path, "wb").write(struct.pack("<Q", len(h)) + h + img + lab)
PY
"$netrun" calibrate "$model" --weights "$weights" --inputs "$batch" --batch "$calib_batch" --out "$scales" 2>&1 |
  tee "$out/calibrate.log"
[ -s "$scales" ] || fail "netrun calibrate wrote no scales"
"$netc" "$model" -o "$out/f16.so" > "$out/netc_f16.log" 2>&1 || fail "netc -o f16.so failed ($out/netc_f16.log)"
"$netc" "$model" --int8=all --int8-scales="$scales" -o "$out/int8.so" > "$out/netc_int8.log" 2>&1 ||
  fail "netc -o int8.so failed ($out/netc_int8.log)"

torch_configs=(infer_fp16_cl)
[ "$autotune" = 1 ] && torch_configs+=(compile_infer_fp16_cl)
for b in $batches; do
  for r in $(seq "$repeats"); do
    for m in f16 int8; do
      echo "=== netc $m: netrun bench $m.so --inference --batch $b (run $r)"
      "$netrun" bench "$out/$m.so" --device gpu --inference --batch "$b" --steps 50 "${cache_opt[@]}" 2>&1 |
        tee -a "$out/netc_${m}_$b.log"
    done
    echo "=== PyTorch: $baseline ${torch_configs[*]} (batch $b, run $r)"
    env -u LD_LIBRARY_PATH BS="$b" OUT="$out" python3 "$baseline" "${torch_configs[@]}" 2>&1 | tee -a "$out/torch_$b.log"
  done
done

best() { sort -g | tail -1; } # the largest of the numbers on stdin
netc_ips() { [ -f "$out/netc_$1_$2.log" ] && grep -oE '[0-9.]+ images/s' "$out/netc_$1_$2.log" | grep -oE '^[0-9.]+' | best; }
torch_ips() {
  [ -f "$out/torch_$2.log" ] || return 0
  grep -F "\"config\": \"$1\"" "$out/torch_$2.log" | grep -oE '"img_s": [0-9.]+' | grep -oE '[0-9.]+$' | best
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk "BEGIN{printf \"%.2f\", $1 / $2}" || echo "-"; }

echo
echo "=== ResNet-50 inference images/s, same call, best of $repeats" \
  "($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null))"
row='%-6s %10s %10s %10s %15s %-22s %11s %11s\n'
# shellcheck disable=SC2059
printf "$row" batch "netc f16" "netc INT8" "INT8/f16" "torch eager" "best PyTorch" "f16/best" "INT8/best"
for b in $batches; do
  f=$(netc_ips f16 "$b") i=$(netc_ips int8 "$b")
  bc=- bv=
  for c in "${torch_configs[@]}"; do
    v=$(torch_ips "$c" "$b")
    if [ -n "$v" ] && { [ -z "$bv" ] || awk "BEGIN{exit !($v > $bv)}"; }; then bc=$c bv=$v; fi
  done
  # shellcheck disable=SC2059
  printf "$row" "$b" "${f:--}" "${i:--}" "$(ratio "$i" "$f")" "$(torch_ips infer_fp16_cl "$b")" "$bc ${bv:--}" \
    "$(ratio "$f" "$bv")" "$(ratio "$i" "$bv")"
done
[ "$autotune" = 1 ] ||
  echo "(AUTOTUNE=0: torch.compile max-autotune, PyTorch's fastest inference, was not run; the ratios are to eager)"
