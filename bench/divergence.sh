#!/usr/bin/env bash
# bench/divergence.sh: issue 16's divergence check -- netc and PyTorch train
# ResNet-50 with the same recipe on the same synthetic data; the two loss
# curves side by side.
#
#   NETC_BUILD=build/p1 OUT=... bash bench/divergence.sh
#
# netc: `netrun train MODEL' --synthetic --epochs EPOCHS --batch BATCH --seed
# SEED --log ...`, where MODEL' is a copy of MODEL (models/resnet50.net) with
# its schedule's warmup_epochs set to WARMUP (1; the file says 5): netrun has
# no option for the warm-up.  PyTorch: bench/divergence.py (torchvision's
# ResNet-50, the same data byte for byte, the same order of batches, the same
# learning rate at every step, momentum, weight decay on every parameter,
# label smoothing 0.1 and initial distributions; see its opening comment),
# once per entry of TORCH_AMPS ("bf16 fp16": bf16 autocast, and fp16 autocast
# with a dynamic GradScaler as netc's fp16 default; fp32 also possible).
# Prints every step's learning rate and losses in columns, then each epoch's
# mean loss, then the largest step loss of each run.
#
# Settings (environment): NETC_BUILD (build/release), MODEL, EPOCHS (3),
# WARMUP (1), BATCH (256), N (training images; default netrun's 16 * batch),
# SEED (1), PRECISION (netrun --precision; default the model's, fp16),
# DEVICE (gpu), TORCH_AMPS ("bf16 fp16"; "" skips PyTorch), TORCH_DEVICE
# (cuda), PYTHON (python3), CACHE (netrun's kernel cache), SAME_INIT (1:
# PyTorch starts from netc's initial weights, `netrun export --seed`; default
# 0: each draws its own from the same distributions), EVERY (print every
# k-th step, 1).  Logs (JSON lines) go to $OUT.  About 2 minutes on the H200
# (netrun's compile when its kernels are not cached, ~10 s of data
# generation, 48 steps each).
set -uo pipefail
cd "$(dirname "$0")/.."

die() { echo "divergence.sh: error: $*" >&2; exit 2; }
case "${1:-}" in -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
[ $# -eq 0 ] || die "takes no arguments (settings are environment variables: see --help)"

build=${NETC_BUILD:-build/release}
netrun=$build/netrun
[ -d "$build" ] || die "NETC_BUILD=$build: no such folder"
[ -x "$netrun" ] || die "$netrun: not found or not executable (ninja -C $build netrun)"
"$netrun" --version >/dev/null 2>&1 || die "$netrun does not run (LD_LIBRARY_PATH? on the GPU machine: /tmp/lib)"
model=${MODEL:-models/resnet50.net}
[ -f "$model" ] || die "MODEL=$model: no such file"
num() { [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] || die "$1=$2 must be an integer >= $3"; }
epochs=${EPOCHS:-3} warmup=${WARMUP:-1} batch=${BATCH:-256} n=${N:-0} seed=${SEED:-1} every=${EVERY:-1}
num EPOCHS "$epochs" 1; num WARMUP "$warmup" 0; num BATCH "$batch" 1; num N "$n" 0; num SEED "$seed" 1
num EVERY "$every" 1
py=${PYTHON:-python3}
amps=${TORCH_AMPS-bf16 fp16}
for a in $amps; do case $a in bf16 | fp16 | fp32) ;; *) die "TORCH_AMPS: '$a' is not bf16, fp16 or fp32" ;; esac; done
out=${OUT:-$(mktemp -d /tmp/divergence.XXXXXX)}
mkdir -p "$out" || die "cannot make OUT=$out"
tmp=$(mktemp -d /tmp/divergence_tmp.XXXXXX) || die "cannot make a temporary folder"
trap 'rm -rf "$tmp"' EXIT

# The model with the warm-up asked (the copy keeps the file's name: netrun
# prints it, and a model's name is its network's, not its file's).
grep -qE 'warmup_epochs *= *[0-9]+' "$model" || die "$model: its train section has no warmup_epochs to set"
mkdir -p "$tmp/model"
net=$tmp/model/$(basename "$model")
sed -E "s/warmup_epochs *= *[0-9]+/warmup_epochs=$warmup/" "$model" >"$net"
echo "=== $model with warmup_epochs=$warmup: $(grep -E '^\s*(optimizer|schedule|label_smoothing|loss_scale|batch)\b' "$net" | tr -s ' ' | tr '\n' ';')"

opt=(--device "${DEVICE:-gpu}" --batch "$batch" --seed "$seed" --epochs "$epochs")
[ "$n" -gt 0 ] && opt+=(--train-images "$n")
[ -n "${PRECISION:-}" ] && opt+=(--precision "$PRECISION")
[ -n "${CACHE:-}" ] && opt+=(--cache "$CACHE")
echo "=== netc: $netrun train $net --synthetic ${opt[*]} --log $out/netc.jsonl"
"$netrun" train "$net" --synthetic "${opt[@]}" --log "$out/netc.jsonl" 2>&1 | tee "$out/netc.log"
netc_rc=${PIPESTATUS[0]}
[ "$netc_rc" -eq 0 ] || echo "=== netc: failed (exit $netc_rc); its steps so far are in $out/netc.jsonl"

# SAME_INIT=1: PyTorch starts from netc's own initial weights (netrun export without --weights: the
# initialization of --seed), so the two runs differ in their arithmetic alone
init=()
if [ "${SAME_INIT:-0}" = 1 ]; then
  "$netrun" export "$net" --seed "$seed" --out "$tmp/init.safetensors" || die "netrun export of the initialization failed"
  init=(--init "$tmp/init.safetensors")
fi

runs=(netc)
for a in $amps; do
  echo "=== PyTorch, $a: bench/divergence.py --amp $a"
  env -u LD_LIBRARY_PATH "$py" bench/divergence.py --epochs "$epochs" --warmup "$warmup" --batch "$batch" \
    --n "$n" --seed "$seed" --amp "$a" --device "${TORCH_DEVICE:-cuda}" --data-cache "$tmp/data.npz" \
    --log "$out/torch_$a.jsonl" "${init[@]}" >"$out/torch_$a.log" 2>&1
  rc=$?
  tail -3 "$out/torch_$a.log"
  [ "$rc" -eq 0 ] || echo "=== PyTorch $a: failed (exit $rc; log $out/torch_$a.log)"
  runs+=("torch_$a")
done

# The curves side by side (python3 without torch is enough).
env -u LD_LIBRARY_PATH "$py" - "$out" "$every" "${runs[@]}" <<'EOF'
import json, os, sys
out, every, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
steps, epochs = {}, {}
for r in runs:
    steps[r], epochs[r] = {}, {}
    path = os.path.join(out, r + ".jsonl")
    if not os.path.exists(path):
        continue
    for line in open(path):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "step" in d and "loss" in d:
            steps[r][d["step"]] = d
        elif "epoch" in d and "loss_mean" in d:
            epochs[r][d["epoch"]] = d["loss_mean"]
fmt = lambda v: f"{v:10.4f}" if isinstance(v, (int, float)) else f"{'-':>10}"
names = [r.replace("torch_", "torch ") for r in runs]
print("\n=== loss per step (lr: netc's, then PyTorch's first run's)")
print(f"{'step':>5} {'epoch':>5} {'lr netc':>10} {'lr torch':>10} " + " ".join(f"{n:>10}" for n in names))
last = max([max(s) for s in steps.values() if s] or [0])
tr = next((r for r in runs[1:] if steps[r]), None)
for t in range(1, last + 1):
    if t % every and t != last:
        continue
    rows = [steps[r].get(t, {}) for r in runs]
    ep = next((d["epoch"] for d in rows if "epoch" in d), "-")
    lt = steps[tr].get(t, {}).get("lr") if tr else None
    print(f"{t:>5} {ep:>5} {fmt(rows[0].get('lr'))} {fmt(lt)} " + " ".join(fmt(d.get("loss")) for d in rows))
print("\n=== mean loss per epoch")
print(f"{'epoch':>5} " + " ".join(f"{n:>10}" for n in names))
for e in sorted(set().union(*[set(v) for v in epochs.values()])):
    print(f"{e:>5} " + " ".join(fmt(epochs[r].get(e)) for r in runs))
print("\n=== largest step loss (step)")
for r, nm in zip(runs, names):
    if steps[r]:
        t, d = max(steps[r].items(), key=lambda kv: kv[1]["loss"])
        print(f"{nm:>10}: {d['loss']:.4f} at step {t} (epoch {d.get('epoch')}); last {steps[r][max(steps[r])]['loss']:.4f}")
    else:
        print(f"{nm:>10}: no steps")
EOF
echo "logs: $out"
