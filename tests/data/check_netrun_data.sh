#!/usr/bin/env bash
# check_netrun_data.sh NETRUN SOURCE_DIR DATA: `netrun train --data DATA` on
# an ImageFolder set (DATA/train, DATA/test: a CIFAR-10 subset): the
# progress, epoch and final lines and the JSON log carry top-5 and the data
# wait; an unreadable image is warned about once, not fatal; option errors.
set -uo pipefail
netrun=$1 src=$2 data=$3
work=$(dirname "$data")
. "$(dirname "$0")/../expect.sh"
model=$src/models/resnet20.net
expect 2 "--workers must be an integer" "$netrun" train "$model" --data "$data" --workers 0
expect 2 "--augment must be auto, rrc" "$netrun" train "$model" --data "$data" --augment zoom
expect 2 "need an ImageFolder" "$netrun" train "$model" --data "$work" --workers 2
expect 2 "--decoder must be auto, gpu" "$netrun" train "$model" --data "$data" --decoder nvjpeg
expect 2 "need an ImageFolder" "$netrun" train "$model" --data "$work" --decoder cpu
expect 2 "--cpu-share must be an integer in 0..100" "$netrun" train "$model" --data "$data" --cpu-share 101
expect 2 "need an ImageFolder" "$netrun" train "$model" --data "$work" --cpu-share 20
expect 1 "decoder gpu: the model runs on the CPU" "$netrun" train "$model" --device cpu --data "$data" --decoder gpu
printf 'not a jpeg' > "$data/train/cat/zz_broken.jpg"
out=$(timeout 300 "$netrun" train "$model" --device cpu --data "$data" --batch 16 --epochs 2 --workers 2 \
  --augment pad_crop --log "$work/log.jsonl" 2>&1)
rc=$?
check() { # description grep-pattern
  if grep -qE -- "$2" <<<"$out"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi
}
if [ $rc != 0 ]; then fail=$((fail + 1)); echo "FAIL: train exited $rc"; echo "$out" | tail -5; fi
check "progress line" "^step [0-9]+/12 .*images/s  ETA [0-9]+ s  data wait [0-9]+%  input cpu [0-9]+/s, step [0-9]+/s: (input|step)-bound$"
check "epoch line" "^epoch 2: 6 steps, loss [0-9.]+, [0-9]+ images/s, data wait [0-9.]+ s, test accuracy [0-9.]+% \(top-5 [0-9.]+%\) on 100 images$"
check "final line" "data wait [0-9.]+ s, test top-5 [0-9.]+%, test accuracy [0-9.]+%$"
check "one warning" "warning: 1 unreadable images skipped so far: .*zz_broken.jpg: not a readable JPEG"
[ "$(grep -c 'warning: ' <<<"$out")" = 1 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: warned more than once"; }
if [ "$(grep -c '"data_wait_s"' "$work/log.jsonl" 2>/dev/null)" = 14 ] && grep -q '"test_top5"' "$work/log.jsonl"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: log.jsonl lacks data_wait_s on 14 lines or test_top5"
fi
if grep -q '"decoder": "cpu", "input_images_per_s": [0-9.]*, "step_images_per_s": [0-9.]*, "bound": "' "$work/log.jsonl" &&
  grep -q '^{"run": "done", "steps": 12, .*"decoder": "cpu", "gpu_start": {}, "gpu_end": {}}$' "$work/log.jsonl"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: log.jsonl lacks the decoder, the input and step rates, or the run record"
fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]
