#!/usr/bin/env bash
# check_int8.sh NETRUN SOURCE_DIR WORKDIR: INT8 from netrun (--int8, the
# CPU executor's simulation) and `infer --report`: a trained smallcnn's
# logits with --int8 all differ from the f16 ones yet agree on most top-1
# classes, the report's numbers are its own (recomputed here from the two
# logits files) with its table of layers, calibrate and infer read an IDX
# folder with --data, and the misuses are refused.  CPU only, a few seconds.
set -uo pipefail
netrun=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../../expect.sh"
export NETC_CUDA_DRIVER=/nonexistent/libcuda-netc-test.so.1 # no GPU, as in CI
m=$src/models/smallcnn.net
run=(--device cpu --synthetic --batch 16 --train-images 320 --test-images 32)
expect 0 "test accuracy" "$netrun" train "$m" "${run[@]}" --steps 60 --checkpoint "$work/ck.safetensors"
# 64 labelled images (the pattern of the synthetic set is the label's, plus noise)
python3 - "$work/batch.safetensors" <<'PY'
import json, random, struct, sys
random.seed(3)
n = 64
labels = [i % 10 for i in range(n)]
img = []
for l in labels:
    img += [((p * 7 + l * 13) % 29) / 29.0 - 0.5 + random.gauss(0, 0.3) for p in range(28 * 28)]
ib = struct.pack("<%df" % len(img), *img)
lb = struct.pack("<%dq" % n, *labels)
hdr = {"image": {"dtype": "F32", "shape": [n, 1, 28, 28], "data_offsets": [0, len(ib)]},
       "label": {"dtype": "I64", "shape": [n], "data_offsets": [len(ib), len(ib) + len(lb)]}}
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + ib + lb)
del hdr["label"]
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1].replace(".safetensors", "_unlabelled.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + ib)
PY
inf=("$netrun" infer "$m" --device cpu --weights "$work/ck.safetensors" --inputs "$work/batch.safetensors")
expect 0 "logits of 64 images" "${inf[@]}" --out "$work/f16.safetensors"
out=$("${inf[@]}" --out "$work/i8.safetensors" --int8 all --report 2>&1)
rc=$?
echo "$out" | tail -4
if [ $rc = 0 ] && grep -qE "^  without --int8 +top-1 +[0-9.]+%  top-5 +[0-9.]+%$" <<<"$out" &&
  grep -qE "^  --int8 all +top-1 +[0-9.]+%  top-5 +[0-9.]+%$" <<<"$out"; then ok; else
  bad "infer --report: exit $rc, no report lines"
fi
# the layer table: conv2 and conv3 (conv1 stays f32), each with its errors
if grep -qE "^  the 2 of 2 quantized layers whose error grows most" <<<"$out" &&
  grep -qE "^    conv2 +[0-9.e-]+ +[0-9.e-]+ +[0-9.e-]+ +[0-9.e-]+ +[-+][0-9.e-]+$" <<<"$out" &&
  grep -qE "^    conv3 +[0-9.e-]+ +[0-9.e-]+ +[0-9.e-]+ +[0-9.e-]+ +[-+][0-9.e-]+$" <<<"$out"; then ok; else
  bad "infer --report: no layer table for conv2 and conv3"
fi
# the report against the two logits files, recomputed
python3 - "$work" <<PY && ok || bad "the report's numbers are not the logits files'"
import json, struct, sys
def read(p):
    raw = open(p, "rb").read()
    (n,) = struct.unpack_from("<Q", raw)
    h = json.loads(raw[8:8 + n])["logits"]
    a, b = h["data_offsets"]
    v = struct.unpack("<%df" % ((b - a) // 4), raw[8 + n + a:8 + n + b])
    c = h["shape"][1]
    return [v[i:i + c] for i in range(0, len(v), c)]
w = sys.argv[1]
f, q = read(w + "/f16.safetensors"), read(w + "/i8.safetensors")
labels = [i % 10 for i in range(64)]
top = lambda r: max(range(len(r)), key=lambda c: (r[c], -c))
agree = sum(top(a) == top(b) for a, b in zip(f, q))
t1 = [sum(top(r) == l for r, l in zip(x, labels)) for x in (f, q)]
out = """$out"""
want = "top-1 agreement %.2f%% (%d of 64)" % (100 * agree / 64, agree)
assert want in out, (want, out)
for name, k in (("without --int8", 0), ("--int8 all", 1)):
    line = [l for l in out.splitlines() if l.strip().startswith(name)][0]
    assert ("top-1 %6.2f%%" % (100 * t1[k] / 64)) in line, (line, t1[k])
assert f != q, "int8 gave the f16 logits"
assert agree >= 48, f"int8 and f16 agree on only {agree} of 64"
PY
# calibration: every method's scales for the i8 layers (conv2, conv3: conv1 is precision=f32, fc a linear);
# no threshold above the largest magnitude, so max's scale is the largest; the IR and the logits use them
cal=("$netrun" calibrate "$m" --weights "$work/ck.safetensors" --inputs "$work/batch.safetensors" --batch 16)
for meth in max percentile mse entropy; do
  expect 0 "int8 scales of .* from 64 images by $meth; wrote" "${cal[@]}" --method "$meth" --out "$work/$meth.scales"
done
# without --method: entropy, the same scales as --method entropy
expect 0 "int8 scales of .* from 64 images by entropy; wrote" "${cal[@]}" --out "$work/default.scales"
if diff <(grep -v '^#' "$work/default.scales") <(grep -v '^#' "$work/entropy.scales") >/dev/null; then ok; else
  bad "calibrate's default scales differ from --method entropy's"
fi
python3 - "$work" <<'PY' && ok || bad "calibrate's scale files"
import sys
w = sys.argv[1]
def read(m):
    rows = [l.split() for l in open(f"{w}/{m}.scales") if l.strip() and not l.startswith("#")]
    return {a: float(b) for a, b in rows}
mx = read("max")
assert sorted(mx) == ["conv2", "conv3"], mx
for m in ("percentile", "mse", "entropy"):
    s = read(m)
    assert sorted(s) == ["conv2", "conv3"], (m, s)
    for k in s:
        assert 0 < s[k] <= mx[k] * (1 + 1e-6), (m, k, s[k], mx[k])
assert "# method max over 64 images" in open(f"{w}/max.scales").read()
PY
scale=$(awk '$1 == "conv2" {print $2}' "$work/max.scales")
netc=$(dirname "$netrun")/netc
ir=$("$netc" "$m" --inference --int8=all --int8-scales="$work/max.scales" --no-loc --print-after=precision 2>&1)
if grep -qE "cast\(%[0-9]+\) \{to=i8 scale=$scale\}" <<<"$ir"; then ok; else bad "the IR lacks conv2's input cast with scale=$scale"; fi
out=$("${inf[@]}" --out "$work/i8s.safetensors" --int8 all --int8-scales "$work/mse.scales" --report 2>&1)
agree=$(sed -n 's/.*top-1 agreement [0-9.]*% (\([0-9]*\) of 64).*/\1/p' <<<"$out")
if [ -n "$agree" ] && [ "$agree" -ge 48 ] && ! cmp -s "$work/i8s.safetensors" "$work/i8.safetensors"; then ok; else
  bad "calibrated int8 (mse): agreement '${agree}' of 64, or the logits of the dynamic scales"
fi
# an error the table cannot tell apart (a layer whose input the layer before requantized) is "-" and said why,
# never "nan"
if grep -qiE "(^|[[:space:]])[-+]?nan([[:space:]]|$)" <<<"$out"; then
  bad "the layer table prints nan"
elif ! grep -qE "^    conv3 +[0-9.e+-]+ +- " <<<"$out" || ! grep -q 'input q "-": the layer before wrote' <<<"$out"; then
  bad "the layer table lacks conv3's \"-\" (its input requantized by conv2) or the line that says why"
else ok; fi
# a model.so compiled with the scales carries them: the same logits as the .net with --int8-scales
"$netc" "$m" --int8=all --int8-scales="$work/mse.scales" -o "$work/q.so" >/dev/null 2>&1
expect 0 "logits of 64 images" "$netrun" infer "$work/q.so" --device cpu --weights "$work/ck.safetensors" \
  --inputs "$work/batch.safetensors" --out "$work/q.safetensors"
cmp -s "$work/q.safetensors" "$work/i8s.safetensors" && ok || bad "the model.so's embedded scales give other logits"
# --data DIR: the same images as an IDX folder (train-* for calibrate, t10k-* for infer), read and
# normalized by netrun as training would
python3 - "$work/idx" <<'PY'
import os, random, struct, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
random.seed(3)
for prefix, n in (("train", 96), ("t10k", 80)):
    labels = [i % 10 for i in range(n)]
    px = bytes(max(0, min(255, int(((p * 7 + l * 13) % 29) * 8 + random.gauss(0, 20)))) for l in labels for p in range(784))
    open(f"{d}/{prefix}-images-idx3-ubyte", "wb").write(struct.pack(">IIII", 2051, n, 28, 28) + px)
    open(f"{d}/{prefix}-labels-idx1-ubyte", "wb").write(struct.pack(">II", 2049, n) + bytes(labels))
PY
expect 0 "int8 scales of .* from 64 images of $work/idx by max; wrote" "$netrun" calibrate "$m" --weights "$work/ck.safetensors" \
  --data "$work/idx" --images 64 --batch 16 --method max --out "$work/data.scales"
out=$("$netrun" infer "$m" --device cpu --weights "$work/ck.safetensors" --data "$work/idx" --int8 all \
  --int8-scales "$work/data.scales" --report --out "$work/d.safetensors" 2>&1)
rc=$?
if [ $rc = 0 ] && grep -q "report on 80 labelled images" <<<"$out" && grep -qE "^    conv3 " <<<"$out"; then ok; else
  echo "$out"
  bad "infer --report --data: exit $rc"
fi
expect 0 "report on 32 labelled images" "$netrun" infer "$m" --device cpu --weights "$work/ck.safetensors" \
  --data "$work/idx" --images 32 --int8 all --report --out "$work/d.safetensors"
expect 2 "--images N is for --data DIR" "${inf[@]}" --out "$work/x.safetensors" --images 5
expect 2 "takes --inputs or --data, not both" "${inf[@]}" --out "$work/x.safetensors" --data "$work/idx"
expect 1 "$work/nodata: " "$netrun" calibrate "$m" --weights "$work/ck.safetensors" --data "$work/nodata" \
  --out "$work/x.scales"
expect 2 "--mean and --std go together" "$netrun" calibrate "$m" --weights "$work/ck.safetensors" --data "$work/idx" \
  --mean 0.5 --out "$work/x.scales"
expect 2 "calibrate runs on the CPU" "${cal[@]}" --out "$work/x.scales" --device gpu
expect 2 "--method must be" "${cal[@]}" --out "$work/x.scales" --method kl
expect 2 "--percentile" "${cal[@]}" --out "$work/x.scales" --percentile 101
expect 1 "fewer than one batch of 128" "$netrun" calibrate "$m" --weights "$work/ck.safetensors" \
  --inputs "$work/batch.safetensors" --out "$work/x.scales" --batch 128
printf 'conv2 -1\n' >"$work/bad.scales"
expect 1 "bad.scales:1: layer 'conv2': the scale -1 is not a positive number" "${inf[@]}" --out "$work/x.safetensors" \
  --int8 all --int8-scales "$work/bad.scales"
"$netc" "$m" -o "$work/m.so" >/dev/null 2>&1
expect 1 "int8 layers and scales are chosen when a model.so is compiled" "$netrun" infer "$work/m.so" --device cpu \
  --weights "$work/ck.safetensors" --inputs "$work/batch.safetensors" --out "$work/x.safetensors" \
  --int8 all --int8-scales "$work/max.scales"
expect 2 "infer --report compares a model with --int8" "${inf[@]}" --out "$work/x.safetensors" --report
expect 1 "needs tensors 'image' and 'label'" "$netrun" infer "$m" --device cpu --weights "$work/ck.safetensors" \
  --inputs "$work/batch_unlabelled.safetensors" --out "$work/x.safetensors" --int8 all --report
expect 1 "--int8: no conv2d or linear layer named 'nosuch'" "${inf[@]}" --out "$work/x.safetensors" --int8 nosuch
expect 2 "export does not take '--int8'" "$netrun" export "$m" --weights "$work/ck.safetensors" --out "$work/e" --int8 all
# FP8 (the CPU executor's simulation): --precision fp8 trains, its loss falling; precision=f8 on one layer
out=$("$netrun" train "$m" "${run[@]}" --steps 60 --precision fp8 2>&1)
if [ $? = 0 ] && python3 -c "
import re, sys
a, b = map(float, re.search(r'loss ([0-9.]+) -> ([0-9.]+)', sys.argv[1]).groups())
sys.exit(0 if b < 0.8 * a else 1)" "$out"; then ok; else
  echo "$out" | tail -3
  bad "train --precision fp8: the loss did not fall"
fi
out=$("${inf[@]}" --out "$work/f8.safetensors" --precision fp8 --report 2>&1)
if [ $? = 0 ] && grep -qE "^  fp16 +top-1" <<<"$out" && grep -qE "^  --precision fp8 +top-1" <<<"$out" &&
  grep -qE "^  the 2 of 2 quantized layers" <<<"$out"; then ok; else
  echo "$out"
  bad "infer --precision fp8 --report: fp8 against fp16, with its layer table"
fi
sed 's/conv3 = conv2d(\([^)]*\))/conv3 = conv2d(\1, precision=f8)/' "$m" >"$work/f8layer.net"
ir=$("$netc" "$work/f8layer.net" --no-loc --print-after=precision 2>&1)
if grep -qE "cast\(@conv3.weight(, @conv3.weight.f8e4m3.amax_history)?\) \{to=f8e4m3\}" <<<"$ir" &&
  ! grep -qE "cast\(@conv2.weight[,)].*\{to=f8e4m3\}" <<<"$ir"; then ok; else
  bad "precision=f8 on conv3 alone: no f8e4m3 cast of its weight, or one of conv2's"
fi
# and its backward in FP8 (an f8e5m2 gradient, the forward's f8e4m3 casts, f32 results), conv2's not
if grep -qE "conv2d_bwd_data[a-z_]*\(%[0-9]+, %[0-9]+.*precision=f8e5m2\} : f32.*# conv3.dgrad" <<<"$ir" &&
  grep -qE "conv2d_bwd_weight\(.*precision=f8e5m2\} : f32.*# conv3.wgrad" <<<"$ir" &&
  grep -qE "cast\(.*\) \{to=f8e5m2\}" <<<"$ir" && ! grep -qE "precision=f8e5m2.*# conv2\." <<<"$ir"; then ok; else
  grep -E "dgrad|wgrad" <<<"$ir"
  bad "precision=f8 on conv3 alone: its data and weight gradients not in FP8 (f8e5m2 gradient, f32 result), or conv2's too"
fi
expect 2 "--precision must be fp32, fp16, bf16 or fp8, not 'fp4'" "$netc" "$m" --precision fp4
echo "$pass passed, $fail failed"
[ $fail = 0 ]
