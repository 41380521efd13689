#!/usr/bin/env bash
# check_netrun.sh NETRUN SOURCE_DIR WORKDIR: netrun's exit codes and messages,
# and a short real training run (mlp on Fashion-MNIST) that must report an
# accuracy well above chance.
set -uo pipefail
netrun=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../../expect.sh"
expect 0 "usage: netrun train" "$netrun" --help
expect 2 "usage: netrun" "$netrun"
expect 0 "^netrun [0-9]+\.[0-9]+\.[0-9]+$" "$netrun" --version
expect 0 "^netrun [0-9]+\.[0-9]+\.[0-9]+$" "$netrun" -V
expect 0 "-V, --version" "$netrun" --help
expect 2 "unknown command 'fly'" "$netrun" fly
expect 2 "train takes one MODEL" "$netrun" train
expect 2 "--epochs must be an integer" "$netrun" train "$src/models/mlp.net" --epochs 0
expect 2 "--device must be cpu, gpu or auto" "$netrun" train "$src/models/mlp.net" --device tpu
# forced GPU with a driver that cannot exist: a clear "no GPU" and exit 1; bench refuses the CPU unless asked for it
nodrv=/nonexistent/libcuda-netc-test.so.1
expect 1 "no GPU: " env NETC_CUDA_DRIVER=$nodrv "$netrun" train "$src/models/mlp.net" --device gpu
expect 1 "no GPU: " env NETC_CUDA_DRIVER=$nodrv "$netrun" bench "$src/models/mlp.net" --device gpu
expect 1 "bench: no GPU .*give --device cpu" env NETC_CUDA_DRIVER=$nodrv "$netrun" bench "$src/models/mlp.net" --batch 8 \
  --steps 3
expect 0 "on the CPU.*images/s" env NETC_CUDA_DRIVER=$nodrv "$netrun" bench "$src/models/mlp.net" --batch 8 --steps 3 \
  --device cpu
# a warm-up as long as the run is shortened, with one warning, and the run goes on
expect 0 "warning: the train section's warm-up of 1 epochs is not shorter than this 1-epoch run" \
  "$netrun" train "$src/models/resnet20.net" --steps 2 --synthetic --device cpu --batch 8
# a switch with a bad value fails the load, naming the variable (compiler/opts.c)
expect 1 "NETC_CUDA_GRAPH=2: expected 0 or 1" env NETC_CUDA_GRAPH=2 "$netrun" bench "$src/models/mlp.net" --device cpu \
  --batch 8 --steps 2
expect 2 "bench does not take '--epochs'" "$netrun" bench "$src/models/mlp.net" --epochs 2
expect 2 "give --data or --synthetic" "$netrun" train "$src/models/mlp.net" --synthetic --data /tmp
expect 2 "--every needs --checkpoint" "$netrun" train "$src/models/mlp.net" --every 3
expect 2 "infer takes one MODEL and --weights" "$netrun" infer "$src/models/mlp.net"
# synthetic training with a log, a checkpoint, then inference and a step from it
expect 0 "test accuracy [0-9.]+%$" env NETC_CUDA_DRIVER=$nodrv "$netrun" train "$src/models/smallcnn.net" --synthetic \
  --batch 16 --steps 12 --train-images 320 --log "$work/log.jsonl" --checkpoint "$work/ck.safetensors" --every 5
if [ "$(grep -c '"step"' "$work/log.jsonl" 2>/dev/null)" = 12 ] && grep -q '"test_accuracy"' "$work/log.jsonl"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: log.jsonl lacks 12 step lines and an epoch line"
fi
python3 - "$work" <<'PY' && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: could not write the batch file"; }
import json, struct, sys
work = sys.argv[1]
n = 4
img = struct.pack("<%df" % (n * 784), *[((i * 37) % 255) / 255.0 - 0.5 for i in range(n * 784)])
lab = struct.pack("<%dq" % n, *[i % 10 for i in range(n)])
hdr = {"image": {"dtype": "F32", "shape": [n, 1, 28, 28], "data_offsets": [0, len(img)]},
       "label": {"dtype": "I64", "shape": [n], "data_offsets": [len(img), len(img) + len(lab)]}}
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(work + "/batch.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + img + lab)
PY
expect 0 "logits of 4 images" "$netrun" infer "$src/models/smallcnn.net" --device cpu --weights "$work/ck.safetensors" \
  --inputs "$work/batch.safetensors" --out "$work/logits.safetensors"
# --precision fp32 for infer: the f32 graph's logits, not the default f16 one's
expect 0 "logits of 4 images" "$netrun" infer "$src/models/smallcnn.net" --device cpu --weights "$work/ck.safetensors" \
  --inputs "$work/batch.safetensors" --out "$work/logits32.safetensors" --precision fp32
if ! cmp -s "$work/logits.safetensors" "$work/logits32.safetensors"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: infer --precision fp32 gave the default precision's logits"
fi
expect 0 "one step of .* on the CPU \(batch 4" "$netrun" step "$src/models/smallcnn.net" --device cpu \
  --weights "$work/ck.safetensors" --inputs "$work/batch.safetensors" --out "$work/step.safetensors"
expect 1 "does not fit the model's input" "$netrun" infer "$src/models/resnet20.net" --device cpu \
  --weights "$work/ck.safetensors" --inputs "$work/batch.safetensors" --out "$work/x.safetensors"
expect 1 "missing.safetensors" "$netrun" infer "$src/models/smallcnn.net" --device cpu \
  --weights "$work/missing.safetensors" --inputs "$work/batch.safetensors" --out "$work/x.safetensors"
# safetensors SRC DST [NAME=INDEX:VALUE | +NAME]...: SRC with element INDEX of F32 tensor NAME set to
# VALUE (nan, inf, -0.5), or with an extra F32 [1] tensor NAME; metadata kept
cat >"$work/modify.py" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack_from("<Q", raw, 0)
hdr = json.loads(raw[8:8 + n])
base = 8 + n
meta = hdr.pop("__metadata__", None)
data = {k: bytearray(raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]]) for k, v in hdr.items()}
for arg in sys.argv[3:]:
    if arg.startswith("+"):
        hdr[arg[1:]] = {"dtype": "F32", "shape": [1]}
        data[arg[1:]] = bytearray(struct.pack("<f", 1.0))
        continue
    name, rest = arg.split("=")
    i, v = rest.split(":")
    assert hdr[name]["dtype"] == "F32"
    struct.pack_into("<f", data[name], 4 * int(i), float(v))
out, at = {}, 0
if meta is not None:
    out["__metadata__"] = meta
for k in hdr:
    out[k] = {"dtype": hdr[k]["dtype"], "shape": hdr[k]["shape"], "data_offsets": [at, at + len(data[k])]}
    at += len(data[k])
h = json.dumps(out).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + b"".join(data[k] for k in hdr))
PY
# weights and checkpoints with a NaN, an infinity or a negative running variance: refused by every command
# that loads them, the file, the tensor and its first bad element named (docs/safetensors.md, "Values")
python3 "$work/modify.py" "$work/ck.safetensors" "$work/nan_ck.safetensors" conv2.weight=17:nan
python3 "$work/modify.py" "$work/ck.safetensors" "$work/var_ck.safetensors" bn1.running_var=2:-0.5
python3 "$work/modify.py" "$work/ck.safetensors" "$work/inf_ck.safetensors" fc.bias=3:-inf
bad_w="nan_ck.safetensors: tensor 'conv2.weight': element 17 is NaN"
expect 1 "$bad_w" "$netrun" step "$src/models/smallcnn.net" --device cpu --weights "$work/nan_ck.safetensors" \
  --inputs "$work/batch.safetensors" --out "$work/x.safetensors"
expect 1 "$bad_w" "$netrun" infer "$src/models/smallcnn.net" --device cpu --weights "$work/nan_ck.safetensors" \
  --inputs "$work/batch.safetensors" --out "$work/x.safetensors"
expect 1 "$bad_w" "$netrun" export "$src/models/smallcnn.net" --weights "$work/nan_ck.safetensors" \
  --out "$work/x.safetensors"
expect 1 "$bad_w" "$netrun" train "$src/models/smallcnn.net" --device cpu --synthetic --batch 16 --steps 1 \
  --train-images 32 --weights "$work/nan_ck.safetensors"
expect 1 "$bad_w" "$netrun" train "$src/models/smallcnn.net" --device cpu --synthetic --batch 16 --steps 13 \
  --train-images 320 --resume "$work/nan_ck.safetensors"
expect 1 "var_ck.safetensors: tensor 'bn1.running_var': element 2 is -0.5, a variance below 0" "$netrun" infer \
  "$src/models/smallcnn.net" --device cpu --weights "$work/var_ck.safetensors" --inputs "$work/batch.safetensors" \
  --out "$work/x.safetensors"
expect 1 "inf_ck.safetensors: tensor 'fc.bias': element 3 is -inf" "$netrun" step "$src/models/smallcnn.net" \
  --device cpu --weights "$work/inf_ck.safetensors" --inputs "$work/batch.safetensors" --out "$work/x.safetensors"
# --inputs with a NaN or an infinity: refused by step and infer the same way
python3 "$work/modify.py" "$work/batch.safetensors" "$work/nan_batch.safetensors" image=17:nan
python3 "$work/modify.py" "$work/batch.safetensors" "$work/inf_batch.safetensors" image=3000:inf
for cmd in step infer; do
  expect 1 "nan_batch.safetensors: tensor 'image': element 17 is NaN" "$netrun" $cmd "$src/models/smallcnn.net" \
    --device cpu --weights "$work/ck.safetensors" --inputs "$work/nan_batch.safetensors" --out "$work/x.safetensors"
  expect 1 "inf_batch.safetensors: tensor 'image': element 3000 is inf" "$netrun" $cmd "$src/models/smallcnn.net" \
    --device cpu --weights "$work/ck.safetensors" --inputs "$work/inf_batch.safetensors" --out "$work/x.safetensors"
done
# tensors a command does not know: step and infer refuse the same ones, named -- in --inputs (anything but
# 'image' and 'label') and in --weights (anything the model lacks but a checkpoint's optimizer state)
python3 "$work/modify.py" "$work/batch.safetensors" "$work/extra_batch.safetensors" +mask +weights
python3 "$work/modify.py" "$work/ck.safetensors" "$work/extra_ck.safetensors" +junk
for cmd in step infer; do
  expect 1 "extra_batch.safetensors: unknown tensor 'mask', 'weights' \(an inputs file holds 'image' and 'label'" \
    "$netrun" $cmd "$src/models/smallcnn.net" --device cpu --weights "$work/ck.safetensors" \
    --inputs "$work/extra_batch.safetensors" --out "$work/x.safetensors"
  expect 1 "extra_ck.safetensors: extra 'junk' \(not in graph 'smallcnn'\)" "$netrun" $cmd "$src/models/smallcnn.net" \
    --device cpu --weights "$work/extra_ck.safetensors" --inputs "$work/batch.safetensors" --out "$work/x.safetensors"
  expect 1 "extra 'loss' \(not in graph 'smallcnn'\); extra 'logits'" "$netrun" $cmd "$src/models/smallcnn.net" --device cpu \
    --weights "$work/step.safetensors" --inputs "$work/batch.safetensors" --out "$work/x.safetensors"
done
[ ! -e "$work/x.safetensors" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: a refused load wrote --out"; }
# export without --weights: the initialization a run of that --seed starts from (a comparison from the same
# weights): training from it gives that run's losses bit for bit
expect 0 "the initialization of seed 3 .*num_batches_tracked 0" "$netrun" export "$src/models/smallcnn.net" --seed 3 \
  --out "$work/init3.safetensors"
for w in seeded exported; do
  extra=()
  [ $w = exported ] && extra=(--weights "$work/init3.safetensors")
  "$netrun" train "$src/models/smallcnn.net" --device cpu --synthetic --seed 3 --steps 3 --batch 16 \
    --train-images 64 --log "$work/init_$w.jsonl" "${extra[@]}" >/dev/null 2>&1
done
a=$(grep -o '"loss": [^,]*' "$work/init_seeded.jsonl") b=$(grep -o '"loss": [^,]*' "$work/init_exported.jsonl")
if [ -n "$a" ] && [ "$a" = "$b" ]; then pass=$((pass + 1)); else
  fail=$((fail + 1)); echo "FAIL: training from the exported initialization: $b, not the seeded run's $a"
fi
# export: the checkpoint as a strict PyTorch state_dict (12 steps: num_batches_tracked 12), the same logits
expect 0 "num_batches_tracked 12\) to" "$netrun" export "$src/models/smallcnn.net" --weights "$work/ck.safetensors" \
  --out "$work/export.safetensors"
expect 0 "logits of 4 images" "$netrun" infer "$src/models/smallcnn.net" --device cpu \
  --weights "$work/export.safetensors" --inputs "$work/batch.safetensors" --out "$work/logits_export.safetensors"
if cmp -s "$work/logits.safetensors" "$work/logits_export.safetensors"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: the exported weights give other logits than the checkpoint"
fi
python3 - "$work/export.safetensors" <<'PY' && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: export keys"; }
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
h.pop("__metadata__", None)
bad = [k for k in h if k.endswith(".momentum_buffer") or k.startswith("loss_scale")]
assert not bad, f"optimizer state in the export: {bad}"
means = [k[: -len(".running_mean")] for k in h if k.endswith(".running_mean")]
assert means, "no batch norm"
for bn in means:
    t = h[bn + ".num_batches_tracked"]
    a, b = t["data_offsets"]
    assert t["dtype"] == "I64" and t["shape"] == [], t
    assert struct.unpack("<q", raw[8 + n + a:8 + n + b]) == (12,), bn
PY
expect 0 "num_batches_tracked 3\) to" "$netrun" export "$src/models/smallcnn.net" --weights "$work/ck.safetensors" \
  --out "$work/export3.safetensors" --batches-tracked 3
expect 0 "\(weights, num_batches_tracked 0\)" "$netrun" export "$src/models/smallcnn.net" \
  --weights "$work/export.safetensors" --out "$work/export0.safetensors"
expect 2 "export takes one MODEL and --out" "$netrun" export "$src/models/smallcnn.net" \
  --weights "$work/ck.safetensors"
expect 2 "--batches-tracked must be" "$netrun" export "$src/models/smallcnn.net" --weights "$work/ck.safetensors" \
  --out "$work/x.safetensors" --batches-tracked -1
expect 1 "missing.safetensors" "$netrun" export "$src/models/smallcnn.net" --weights "$work/missing.safetensors" \
  --out "$work/x.safetensors"
expect 1 "missing 'layer1.0.conv1.weight'" "$netrun" export "$src/models/resnet20.net" --weights "$work/ck.safetensors" \
  --out "$work/x.safetensors"
# train --export: the same bytes as exporting the run's checkpoint (3 steps of 2 batches: 6 tracked)
expect 0 "exported the trained weights \(num_batches_tracked 6\)" "$netrun" train "$src/models/smallcnn.net" \
  --device cpu --synthetic --batch 8 --steps 3 --accum 2 --train-images 64 --test-images 8 \
  --checkpoint "$work/ck_acc.safetensors" --export "$work/trained.safetensors"
expect 0 "num_batches_tracked 6\) to" "$netrun" export "$src/models/smallcnn.net" \
  --weights "$work/ck_acc.safetensors" --out "$work/trained2.safetensors"
if cmp -s "$work/trained.safetensors" "$work/trained2.safetensors"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: train --export and export of its checkpoint differ"
fi
expect 1 "cannot open '$work/missing.net'" "$netrun" train "$work/missing.net"
printf 'network n {\n  input x : f32[4]\n  a = relu(y)\n}\n' >"$work/bad.net"
expect 1 "bad.net:3:12: error: undefined name 'y'" "$netrun" train "$work/bad.net"
expect 1 "$work/nodata" "$netrun" train "$src/models/mlp.net" --data "$work/nodata"
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  out=$("$netrun" train "$src/models/mlp.net" --epochs 1 --train-images 10000 --test-images 2000 2>&1)
  acc=$(grep -oE 'test accuracy [0-9.]+%$' <<<"$out" | tail -1 | grep -oE '[0-9.]+')
  if [ -n "$acc" ] && awk "BEGIN{exit !($acc >= 70)}"; then
    pass=$((pass + 1)); echo "mlp: test accuracy $acc%"
  else
    fail=$((fail + 1)); echo "FAIL: mlp training reported '${acc:-nothing}' (want >= 70%):"; echo "$out" | tail -5
  fi
else
  echo "skipped: the training run (dataset-fashion-mnist is not installed)"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
