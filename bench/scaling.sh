#!/usr/bin/env bash
# bench/scaling.sh: issue 20's data-parallel table on a machine with several
# GPUs -- netc's weak scaling beside PyTorch DDP in the same call, and the
# check that N GPUs train what one GPU trains with N times the batch.
#
#   NETC_BUILD=build/p1 OUT=... bash bench/scaling.sh
#
# Scaling: for each N of GPUS (those above the machine's count are left
# out), `netrun bench MODEL --gpus N --batch BATCH` (the training step, each
# rank's images/s; their sum is the run's), then `torchrun --standalone
# --nproc_per_node N bench/torch_ddp.py` for each of TORCH_CONFIGS
# (bf16_compile, the fastest on one H200, by default), each REPEATS times,
# the best kept.  Efficiency is images/s at N over N times images/s at 1.
#
# Equivalence (EQUIV=1, the default, for each N > 1 run): `netrun train
# EQUIV_MODEL --synthetic --gpus N --batch EQUIV_BATCH --sync-bn --precision
# fp32 --steps EQUIV_STEPS --export` against one GPU with batch N x
# EQUIV_BATCH, deterministic cuDNN engines in both: every rank takes its
# share of the same global batches, synchronized batch norm normalizes by
# the whole batch, and the gradients' mean is the whole batch's, so the two
# exports differ only by the order of the sums.  Each tensor's largest
# difference relative to its largest magnitude is held to EQUIV_TOL.
#
# Settings (environment): NETC_BUILD (build/release), MODEL
# (models/resnet50.net), BATCH (256 a GPU), STEPS (30), GPUS ("1 2 4 8"),
# TORCH_CONFIGS ("bf16_compile"; also fp16_compile, amp_fp16; "" for none),
# REPEATS (1), EQUIV (1), EQUIV_MODEL (models/resnet50.net), EQUIV_BATCH
# (32), EQUIV_STEPS (4), EQUIV_TOL (1e-3), CACHE (netrun's kernel cache),
# PYTHON (python3), TORCHRUN (torchrun), RUN_TIMEOUT (600 s a run).  Logs go
# to $OUT; PyTorch runs with LD_LIBRARY_PATH unset (the machine's system
# cuDNN breaks torch's own).  The table comes last.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

die() { echo "scaling.sh: error: $*" >&2; exit 2; }
case "${1:-}" in -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
[ $# -eq 0 ] || die "takes no arguments (settings are environment variables: see --help)"

build=${NETC_BUILD:-build/release}
netrun=$build/netrun
[ -x "$netrun" ] || die "$netrun: not found or not executable (ninja -C $build netrun)"
"$netrun" --version >/dev/null 2>&1 || die "$netrun does not run (LD_LIBRARY_PATH? on the GPU machine: /tmp/lib)"
model=${MODEL:-models/resnet50.net} batch=${BATCH:-256} steps=${STEPS:-30} repeats=${REPEATS:-1}
configs=${TORCH_CONFIGS-bf16_compile}
equiv=${EQUIV:-1} emodel=${EQUIV_MODEL:-models/resnet50.net} ebatch=${EQUIV_BATCH:-32} esteps=${EQUIV_STEPS:-4}
etol=${EQUIV_TOL:-1e-3}
py=${PYTHON:-python3} torchrun=${TORCHRUN:-torchrun} tmo=${RUN_TIMEOUT:-600}
for f in "$model" "$emodel"; do [ -f "$f" ] || die "$f: no such file"; done
num() { [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || die "$1=$2 must be a whole number of 1 or more"; }
num BATCH "$batch"; num STEPS "$steps"; num REPEATS "$repeats"; num EQUIV_BATCH "$ebatch"; num EQUIV_STEPS "$esteps"
for c in $configs; do case $c in bf16_compile | fp16_compile | amp_fp16) ;; *) die "TORCH_CONFIGS: '$c' is unknown" ;; esac; done
have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "$have" -ge 1 ] || die "no GPU (nvidia-smi lists none)"
gpus=()
for n in ${GPUS:-1 2 4 8}; do
  num GPUS "$n"
  if [ "$n" -le "$have" ]; then gpus+=("$n"); else echo "scaling.sh: $n GPUs left out: the machine has $have"; fi
done
[ "${#gpus[@]}" -ge 1 ] || die "no GPU count of GPUS fits the machine's $have"
out=${OUT:-$(mktemp -d /tmp/scaling.XXXXXX)}
mkdir -p "$out" || die "cannot make OUT=$out"
cache=()
[ -n "${CACHE:-}" ] && cache=(--cache "$CACHE")
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee "$out/gpus.txt"

declare -A netc torch tconf peak tpeak
best() { awk -v a="${1:-0}" -v b="$2" 'BEGIN { print (b > a ? b : a) }'; }
for n in "${gpus[@]}"; do
  for r in $(seq 1 "$repeats"); do
    log=$out/netc_${n}_$r.log
    timeout "$tmo" "$netrun" bench "$model" --gpus "$n" --batch "$batch" --steps "$steps" "${cache[@]}" >"$log" 2>&1 ||
      echo "netc on $n GPUs failed (run $r): $(tail -2 "$log" | tr '\n' ' ')"
    # each rank prints its own line; a run of one prints one without a rank
    sum=$(grep -E 'bench .* images/s' "$log" | sed -E 's/.* ([0-9.]+) images\/s.*/\1/' | awk '{s += $1} END {print s + 0}')
    gib=$(grep -E 'peak device memory' "$log" | sed -E 's/.*peak device memory ([0-9.]+) GiB.*/\1/' | sort -g | tail -1)
    [ "$(grep -cE 'bench .* images/s' "$log")" -eq "$n" ] || sum=0
    netc[$n]=$(best "${netc[$n]:-}" "$sum")
    peak[$n]=${gib:-?}
    for c in $configs; do
      tlog=$out/torch_${c}_${n}_$r.log
      timeout "$tmo" env -u LD_LIBRARY_PATH "$torchrun" --standalone --nproc_per_node "$n" bench/torch_ddp.py \
        --config "$c" --batch "$batch" --steps "$steps" >"$tlog" 2>&1 ||
        echo "PyTorch $c on $n GPUs failed (run $r): $(tail -2 "$tlog" | tr '\n' ' ')"
      line=$(grep -E '^\{"config"' "$tlog" | tail -1)
      rate=$(echo "$line" | sed -nE 's/.*"images_per_s": ([0-9.]+).*/\1/p')
      if [ -n "$rate" ] && [ "$(best "${torch[$n]:-}" "$rate")" = "$rate" ]; then
        torch[$n]=$rate tconf[$n]=$c tpeak[$n]=$(echo "$line" | sed -nE 's/.*"peak_gib": ([0-9.]+).*/\1/p')
      fi
    done
  done
done

# N GPUs against one with N times the batch, synchronized batch norm, fp32
declare -A eqres
cmp_py='
import array, json, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__" or v["dtype"] != "F32":
            continue
        s, e = v["data_offsets"]
        out[k] = array.array("f", b[8 + n + s:8 + n + e])
    return out
a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
worst, name = 0.0, ""
if set(a) != set(b):
    sys.exit("the exports hold other tensors")
for k in a:
    if len(a[k]) != len(b[k]):
        sys.exit("%s: %d against %d values" % (k, len(a[k]), len(b[k])))
    if not a[k]:
        continue
    big = max(max(abs(x) for x in b[k]), 1e-30)
    d = max(abs(x - y) for x, y in zip(a[k], b[k])) / big
    if d > worst:
        worst, name = d, k
print("%.3g %s %s" % (worst, name, "ok" if worst <= tol else "FAILED"))
'
if [ "$equiv" = 1 ]; then
  for n in "${gpus[@]}"; do
    [ "$n" -gt 1 ] || continue
    # the same images in both (the synthetic set's default size follows the batch a process is given)
    eo=(--synthetic --train-images $((16 * n * ebatch)) --sync-bn --precision fp32 --steps "$esteps" "${cache[@]}")
    rm -f "$out/equiv_${n}gpus.safetensors" "$out/equiv_1gpu_x$n.safetensors"
    NETC_CUDNN_DETERMINISTIC=1 timeout "$tmo" "$netrun" train "$emodel" --gpus "$n" --batch "$ebatch" "${eo[@]}" \
      --export "$out/equiv_${n}gpus.safetensors" >"$out/equiv_${n}gpus.log" 2>&1
    rc1=$?
    NETC_CUDNN_DETERMINISTIC=1 timeout "$tmo" "$netrun" train "$emodel" --batch $((n * ebatch)) "${eo[@]}" \
      --export "$out/equiv_1gpu_x$n.safetensors" >"$out/equiv_1gpu_x$n.log" 2>&1
    rc2=$?
    if [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ]; then
      eqres[$n]=$(env -u LD_LIBRARY_PATH "$py" -c "$cmp_py" "$out/equiv_${n}gpus.safetensors" \
        "$out/equiv_1gpu_x$n.safetensors" "$etol" 2>&1 | tail -1)
    else
      eqres[$n]="FAILED: a run failed (exit $rc1 on $n GPUs, $rc2 on one; logs $out/equiv_*)"
    fi
  done
fi

echo
echo "=== data-parallel scaling: $model, batch $batch a GPU, $steps steps (best of $repeats)"
printf '%5s %12s %7s %8s | %12s %-13s %7s %8s | %6s\n' GPUs "netc img/s" eff GiB "torch img/s" config eff GiB ratio
one=${netc[${gpus[0]}]:-0} tone=${torch[${gpus[0]}]:-0}
[ "${gpus[0]}" = 1 ] || { one=0 tone=0; }
for n in "${gpus[@]}"; do
  a=${netc[$n]:-0} t=${torch[$n]:-0}
  awk -v n="$n" -v a="$a" -v t="$t" -v one="$one" -v tone="$tone" -v g="${peak[$n]:-?}" -v tg="${tpeak[$n]:-?}" \
    -v c="${tconf[$n]:--}" 'BEGIN {
      e = one > 0 ? sprintf("%.1f%%", 100 * a / (n * one)) : "-"
      te = tone > 0 && t > 0 ? sprintf("%.1f%%", 100 * t / (n * tone)) : "-"
      r = t > 0 ? sprintf("%.2fx", a / t) : "-"
      printf "%5d %12.0f %7s %8s | %12.0f %-13s %7s %8s | %6s\n", n, a, e, g, t, c, te, tg, r }'
done
if [ "$equiv" = 1 ]; then
  echo
  echo "=== $emodel: N GPUs of batch $ebatch (--sync-bn) against one GPU of N x $ebatch, fp32, $esteps steps"
  for n in "${gpus[@]}"; do [ "$n" -gt 1 ] && echo "  $n GPUs: worst relative difference ${eqres[$n]:-not run} (tol $etol)"; done
fi
echo "logs: $out"
