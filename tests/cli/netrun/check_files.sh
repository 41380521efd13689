#!/usr/bin/env bash
# check_files.sh NETRUN SOURCE_DIR WORKDIR: only regular files are read
# (a device, FIFO or directory is "not a regular file", never waited on),
# no output overwrites an input (refused before any work, exit 2, the input
# unchanged), outputs are checked before training, log write errors fail.
set -uo pipefail
netrun=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
EXPECT_TIMEOUT=60
. "$(dirname "$0")/../../expect.sh"
model=$src/models/smallcnn.net
run=(--device cpu --synthetic --batch 8 --steps 2 --train-images 32 --test-images 8)
expect 0 "test accuracy" "$netrun" train "$model" "${run[@]}" --checkpoint "$work/ck.safetensors"
python3 - "$work" <<'PY' && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: could not write the batch file"; }
import json, struct, sys
n = 4
img = struct.pack("<%df" % (n * 784), *[((i * 37) % 255) / 255.0 - 0.5 for i in range(n * 784)])
lab = struct.pack("<%dq" % n, *[i % 10 for i in range(n)])
hdr = {"image": {"dtype": "F32", "shape": [n, 1, 28, 28], "data_offsets": [0, len(img)]},
       "label": {"dtype": "I64", "shape": [n], "data_offsets": [len(img), len(img) + len(lab)]}}
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1] + "/batch.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + img + lab)
PY
ck=$work/ck.safetensors batch=$work/batch.safetensors
step=("$netrun" step "$model" --device cpu)
# non-regular inputs: a device, a FIFO with no writer, a directory
mkfifo "$work/fifo"
expect 1 "/dev/zero: not a regular file \(a character device\)" "${step[@]}" --weights /dev/zero --inputs "$batch" \
  --out "$work/o.safetensors"
expect 1 "fifo: not a regular file \(a FIFO\)" "${step[@]}" --weights "$work/fifo" --inputs "$batch" \
  --out "$work/o.safetensors"
expect 1 "fifo: not a regular file \(a FIFO\)" "${step[@]}" --weights "$ck" --inputs "$work/fifo" \
  --out "$work/o.safetensors"
expect 1 "$work: not a regular file \(a directory\)" "${step[@]}" --weights "$ck" --inputs "$work" \
  --out "$work/o.safetensors"
expect 1 "fifo: not a regular file \(a FIFO\)" "$netrun" train "$work/fifo" "${run[@]}"
expect 1 "fifo: not a regular file \(a FIFO\)" "$netrun" train "$model" "${run[@]}" --resume "$work/fifo"
mkfifo "$work/model.so"
expect 1 "model.so: not a regular file \(a FIFO\)" "$netrun" bench "$work/model.so" --device cpu
expect 1 "fifo: cannot open the log: not a regular file \(a FIFO\)" "$netrun" plot "$work/fifo" "$work/p.png"
echo '{"step": 1, "loss": 1.0}' >"$work/l.jsonl"
expect 1 "l.jsonl: is the same file as the input" "$netrun" plot "$work/l.jsonl" "$work/l.jsonl"
expect 1 "/dev/urandom: not a regular file \(a character device\)" "${step[@]}" --weights "$ck" --inputs /dev/urandom \
  --out "$work/o.safetensors"
mkdir -p "$work/idx" && mkfifo "$work/idx/train-images-idx3-ubyte"
touch "$work/idx/train-labels-idx1-ubyte" "$work/idx/t10k-images-idx3-ubyte" "$work/idx/t10k-labels-idx1-ubyte"
expect 1 "train-images-idx3-ubyte: not a regular file \(a FIFO\)" "$netrun" train "$src/models/mlp.net" --device cpu \
  --data "$work/idx" --steps 1
# an output that is an input: refused, the input unchanged
sum=$(cksum <"$ck")
expect 2 "ck.safetensors: is the same file as the input .*ck.safetensors \(refusing to overwrite it\)" \
  "${step[@]}" --weights "$ck" --inputs "$batch" --out "$ck"
expect 2 "is the same file as the input" "$netrun" infer "$model" --device cpu --weights "$ck" --inputs "$batch" \
  --out "$batch"
expect 2 "is the same file as the input" "$netrun" export "$model" --weights "$ck" --out "$ck"
# two outputs at one path, before either exists (by two spellings): refused before any work
rm -f "$work/new.out"
expect 2 "new.out: is the same file as the output .*new.out \(give each output its own file\)" \
  "$netrun" train "$model" "${run[@]}" --checkpoint "$work/new.out" --log "$work/./new.out"
[ ! -e "$work/new.out" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: new.out was written"; }
ln -sf "$ck" "$work/link.safetensors"
expect 2 "link.safetensors: is the same file as the input" "${step[@]}" --weights "$ck" --inputs "$batch" \
  --out "$work/link.safetensors"
expect 2 "ck.safetensors: is the same file as the input" "$netrun" train "$model" "${run[@]}" --resume "$ck" \
  --log "$ck"
cp "$model" "$work/m.net"
expect 2 "m.net: is the same file as the input" "$netrun" train "$work/m.net" "${run[@]}" --log "$work/m.net"
expect 2 "m.net: is the same file as the input" "$netrun" train "$work/m.net" "${run[@]}" --checkpoint "$work/m.net"
expect 2 "m.net: is the same file as the input" "$netrun" profile "$work/m.net" --trace "$work/m.net"
if [ "$sum" = "$(cksum <"$ck")" ] && cmp -s "$model" "$work/m.net"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: an input was changed"
fi
# outputs checked before the work: a missing directory, a device to replace; log write errors fail the run
expect 2 "/nonexistent/dir/c.st: cannot write there: directory /nonexistent/dir" "$netrun" train "$model" "${run[@]}" \
  --checkpoint /nonexistent/dir/c.st
expect 2 "/dev/null: not a regular file \(a character device\): refusing to replace it" "${step[@]}" --weights "$ck" \
  --inputs "$batch" --out /dev/null
if [ -w /dev/full ]; then
  expect 1 "/dev/full: cannot write the log" "$netrun" train "$model" "${run[@]}" --log /dev/full
fi
# the atomic writer follows a symlink: the target replaced, the link kept
ln -sf "$work/target.safetensors" "$work/out_link.safetensors"
expect 0 "wrote" "${step[@]}" --weights "$ck" --inputs "$batch" --out "$work/out_link.safetensors"
if [ -L "$work/out_link.safetensors" ] && [ -s "$work/target.safetensors" ]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: writing through a symlink did not replace its target"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
