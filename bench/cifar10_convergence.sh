#!/usr/bin/env bash
# bench/cifar10_convergence.sh [NETRUN] [EPOCHS] [CACHE]: netc and PyTorch
# trained side by side on CIFAR-10 with one recipe, on a machine with a GPU.
#
# The recipe is models/resnet20.net's train section (SGD lr 0.1, momentum
# 0.9, nesterov, weight decay 5e-4, batch 128, one warm-up epoch then cosine,
# fp16 with dynamic loss scaling), EPOCHS epochs (default 15) for both,
# 4-pixel pad + random crop + flip, CIFAR-10's per-channel mean and std.
# netc: `netrun train --data DIR` (ImageFolder JPEGs decoded by its thread
# pool); PyTorch: tests/torch/train_cifar10.py (the same network and
# initialization, AMP fp16 channels_last).  The data come from
# shared/data/cifar10-jpeg.tar.gz (CIFAR10_TAR to override), extracted
# into $CIFAR_DIR (default /tmp/cifar10) when missing.  Prints both runs'
# lines, then one table last: per-epoch loss and top-1 of each, and the
# final difference in percentage points.  Logs and netc's plot go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/cifar10_setup.sh
source bench/cifar10_setup.sh "$@"

echo "=== netc: netrun train models/resnet20.net --data $dir --epochs $epochs"
"$netrun" train models/resnet20.net --data "$dir" --epochs "$epochs" --augment pad_crop --mean $mean --std $std \
  --seed 1 --log "$out/netc_cifar10.jsonl" --plot "$out/netc_cifar10.png" "${cache_opt[@]}" 2>&1 |
  tee "$out/netc_cifar10.log"
echo "=== PyTorch: tests/torch/train_cifar10.py $dir --epochs $epochs"
env -u LD_LIBRARY_PATH python3 tests/torch/train_cifar10.py "$dir" --epochs "$epochs" --seed 1 \
  --log "$out/torch_cifar10.jsonl" 2>&1 | tee "$out/torch_cifar10.log"

python3 - "$out/netc_cifar10.jsonl" "$out/torch_cifar10.jsonl" <<'EOF'
import json, sys
def epochs(path):
    rows = {}
    try:
        for line in open(path):
            r = json.loads(line)
            if "epoch" in r and "test_accuracy" in r and "loss_mean" in r:
                rows[r["epoch"]] = r
    except OSError:
        pass
    return rows
n, t = epochs(sys.argv[1]), epochs(sys.argv[2])
print("\n=== CIFAR-10, ResNet-20, one recipe: netc vs PyTorch (test top-1 on 10,000 images)")
print(f"{'epoch':>5s} {'netc loss':>10s} {'torch loss':>10s} {'netc top-1':>10s} {'torch top-1':>11s}")
for e in sorted(set(n) | set(t)):
    a, b = n.get(e, {}), t.get(e, {})
    f = lambda r, k, m=1: f"{r[k] * m:.4f}" if k in r else "-"
    print(f"{e:5d} {f(a, 'loss_mean'):>10s} {f(b, 'loss_mean'):>10s} {f(a, 'test_accuracy', 100):>10s} "
          f"{f(b, 'test_accuracy', 100):>11s}")
if n and t:
    a, b = n[max(n)]["test_accuracy"] * 100, t[max(t)]["test_accuracy"] * 100
    print(f"final: netc {a:.2f}%, PyTorch {b:.2f}%, difference {a - b:+.2f} points "
          f"({'within' if abs(a - b) <= 1 else 'NOT within'} one point)")
EOF
