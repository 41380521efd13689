#!/usr/bin/env bash
# check_train.sh NETC NETRUN MODEL.onnx TRAIN_FILE WORKDIR: an ONNX model
# trains end to end on the CPU: netc -o writes its model.so, netrun trains
# it 40 steps on Fashion-MNIST, and the loss goes down; netrun also takes
# the .onnx file itself (the default train section).  Skipped (77) without
# the data set.
set -uo pipefail
netc=$1 netrun=$2 onnx=$3 train=$4 work=$5
data=/usr/share/datasets/fashion-mnist
[ -e "$data/train-images-idx3-ubyte.gz" ] || [ -e "$data/train-images-idx3-ubyte" ] ||
  { echo "no Fashion-MNIST in $data: skipped"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
"$netc" --train="$train" -o "$work/model.so" "$onnx" || { echo "netc -o failed on $onnx"; exit 1; }
out=$("$netrun" train "$work/model.so" --device cpu --steps 40 --data "$data" 2>&1) || { echo "$out"; exit 1; }
line=$(grep -E '^netrun: 40 steps, loss ' <<<"$out") || { echo "$out"; echo "no summary line"; exit 1; }
echo "$line"
read -r first last < <(sed -E 's/.*loss ([0-9.]+) -> ([0-9.]+).*/\1 \2/' <<<"$line")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || { echo "the loss did not go down ($first -> $last)"; exit 1; }
out=$("$netrun" train "$onnx" --device cpu --steps 3 --data "$data" 2>&1) || { echo "$out"; echo "netrun train $onnx failed"; exit 1; }
grep -E '^netrun: 3 steps, loss ' <<<"$out" || { echo "$out"; echo "netrun train $onnx: no summary line"; exit 1; }
# a model whose image input keeps another name ("input", as exporters write it): netrun feeds it all the same
other=$(dirname "$onnx")/folded.onnx
out=$("$netrun" train "$other" --device cpu --synthetic --steps 2 --batch 4 --train-images 8 --test-images 4 2>&1) ||
  { echo "$out"; echo "netrun train $other (input 'input') failed"; exit 1; }
grep -E '^netrun: 2 steps, loss ' <<<"$out" || { echo "$out"; echo "netrun train $other: no summary line"; exit 1; }
