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

python3 bench/epoch_table.py "$out/netc_cifar10.jsonl" "$out/torch_cifar10.jsonl" netc torch \
  "CIFAR-10, ResNet-20, one recipe: netc vs PyTorch (test top-1 on 10,000 images)" 1
