#!/usr/bin/env bash
# bench/fp8_convergence.sh [NETRUN] [EPOCHS] [CACHE]: netc's ResNet-20 trained
# on CIFAR-10 in fp16 and in FP8 with one recipe, one after the other,
# and the final test top-1 of the two compared against issue 18's
# allowance (FP8 within 0.5 point of fp16).
#
# The recipe is bench/cifar10_convergence.sh's (models/resnet20.net's train
# section, EPOCHS epochs, default 15, pad-crop and flip, CIFAR-10's mean and
# std, seed 1); the only difference between the two runs is --precision
# (fp8: every convolution but the first in FP8 with delayed scaling, E5M2
# gradients; f16 elsewhere).  The data come from
# shared/data/cifar10-jpeg.tar.gz (CIFAR10_TAR to override), extracted
# into $CIFAR_DIR (default /tmp/cifar10) when missing.  Prints both runs'
# progress, then one table last: per-epoch loss and top-1 of each and the
# final difference.  Logs and plots go to $OUT.  A GPU makes this minutes;
# on the CPU executor an epoch of ResNet-20 takes about ten (a trial on a
# small ImageFolder: CIFAR_DIR=DIR bench/fp8_convergence.sh NETRUN 1).
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/cifar10_setup.sh
source bench/cifar10_setup.sh "$@"

for p in fp16 fp8; do
  echo "=== netc $p: netrun train models/resnet20.net --precision $p --data $dir --epochs $epochs"
  "$netrun" train models/resnet20.net --precision "$p" --data "$dir" --epochs "$epochs" --augment pad_crop \
    --mean $mean --std $std --seed 1 --log "$out/netc_$p.jsonl" --plot "$out/netc_$p.png" "${cache_opt[@]}" 2>&1 |
    tee "$out/netc_$p.log"
done

python3 - "$out/netc_fp16.jsonl" "$out/netc_fp8.jsonl" <<'EOF'
import json, sys
def epochs(path):
    rows = {}
    try:
        for line in open(path):
            r = json.loads(line)
            if "epoch" in r and "test_accuracy" in r and "loss_mean" in r:
                rows[r["epoch"]] = r
    except (OSError, ValueError):
        pass
    return rows
h, q = epochs(sys.argv[1]), epochs(sys.argv[2])
print("\n=== CIFAR-10, ResNet-20, one recipe: netc fp16 vs FP8 (test top-1)")
print(f"{'epoch':>5s} {'fp16 loss':>10s} {'fp8 loss':>10s} {'fp16 top-1':>10s} {'fp8 top-1':>10s}")
for e in sorted(set(h) | set(q)):
    a, b = h.get(e, {}), q.get(e, {})
    f = lambda r, k, m=1: f"{r[k] * m:.4f}" if k in r else "-"
    print(f"{e:5d} {f(a, 'loss_mean'):>10s} {f(b, 'loss_mean'):>10s} {f(a, 'test_accuracy', 100):>10s} "
          f"{f(b, 'test_accuracy', 100):>10s}")
if not h or not q:
    print("a run did not finish: no comparison")
    sys.exit(1)
a, b = h[max(h)]["test_accuracy"] * 100, q[max(q)]["test_accuracy"] * 100
print(f"final: fp16 {a:.2f}%, FP8 {b:.2f}%, FP8 - fp16 {b - a:+.2f} points "
      f"({'within' if b - a >= -0.5 else 'NOT within'} issue 18's 0.5 point)")
EOF
