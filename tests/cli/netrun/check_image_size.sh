#!/usr/bin/env bash
# check_image_size.sh NETRUN NETC SOURCE_DIR WORKDIR: a network at another
# image size than its file declares (netc and netrun --image-size, resize.h).
# The resized graph must be the one a file declaring that size compiles to,
# after every pass, and train to the same losses bit for bit; ResNet-50's
# shapes at the sizes progressive-resizing recipes use; a network that cannot
# take a size, a model.so compiled for another and bad values refused.
# CPU only, a few seconds.
set -uo pipefail
netrun=$1 netc=$2 src=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../../expect.sh"
export NETC_CUDA_DRIVER=/nonexistent/libcuda-netc-test.so.1 # no GPU, as in CI

# --- resized = declared: the IR after every pass, training and inference ----
r20=$src/models/resnet20.net
sed 's/f32\[3, 32, 32\]/f32[3, 24, 40]/' "$r20" >"$work/r20_24x40.net"
grep -q 'f32\[3, 24, 40\]' "$work/r20_24x40.net" || bad "resnet20.net no longer declares f32[3, 32, 32]"
for mode in "" --inference; do
  "$netc" "$work/r20_24x40.net" $mode --no-loc --dump-ir="$work/declared$mode" >/dev/null 2>&1
  "$netc" "$r20" $mode --no-loc --image-size=24x40 --dump-ir="$work/resized$mode" >/dev/null 2>&1
  n=$(ls "$work/declared$mode" 2>/dev/null | wc -l)
  if [ "$n" -ge 9 ] && diff -r "$work/declared$mode" "$work/resized$mode" >/dev/null; then ok; else
    bad "resnet20 at 24x40${mode:+ ($mode)}: $n dumps, the resized graph differs from the declared one"
  fi
done
# the same training run from either
run=(--device cpu --synthetic --batch 8 --steps 3 --train-images 24 --test-images 8 --seed 5)
"$netrun" train "$work/r20_24x40.net" "${run[@]}" --log "$work/declared.jsonl" >/dev/null 2>&1
"$netrun" train "$r20" "${run[@]}" --image-size 24x40 --log "$work/resized.jsonl" >/dev/null 2>&1
losses() { grep -oE '"loss": [0-9.e+-]+' "$1"; }
if [ "$(losses "$work/declared.jsonl" | wc -l)" -ge 3 ] &&
  [ "$(losses "$work/declared.jsonl")" = "$(losses "$work/resized.jsonl")" ]; then ok; else
  bad "train --image-size 24x40 gave other losses than the file declaring 24x40"
fi

# --- ResNet-50 at the sizes of progressive resizing ---------------------------
# conv1 halves the size, the max pool and layers 2-4 halve it again; the
# classifier reads the global pool, so the logits stay [N,1000]
for s in 128 160 192 224 288; do
  ir=$("$netc" "$src/models/resnet50.net" --image-size=$s --no-loc --print-after=parse 2>&1)
  q=$((s / 32))
  if grep -q "input %0 image : f32\[N,3,$s,$s\]" <<<"$ir" && grep -qE "# layer4.2.conv3$" <<<"$(grep -E "f32\[N,2048,$q,$q\]" <<<"$ir")" &&
    grep -qE "= linear\(.*: f32\[N,1000\]" <<<"$ir"; then ok; else
    bad "resnet50 at $s: the input, layer4 ($q x $q) or the logits' shape is wrong"
  fi
done
# the multiply-accumulates scale with the pixels: 4,089,184,256 at 224 (torchvision's)
macs() { "$netc" "$src/models/resnet50.net" --image-size=$1 --summary 2>&1 | sed -n 's/^macs: //p'; }
[ "$(macs 224)" = 4089184256 ] && ok || bad "resnet50 at 224: macs $(macs 224), not 4089184256"
m128=$(macs 128)
# 128 = 4 x 32: every layer's pixels (16/49 of 224's) but the stem's odd ones
python3 -c "import sys; r = $m128 / 4089184256; sys.exit(0 if abs(r - (128 / 224) ** 2) < 0.01 else 1)" && ok ||
  bad "resnet50 at 128: macs $m128 do not scale with the pixels"

# --- refusals ------------------------------------------------------------------
expect 1 "at image size 32x32 \(the file says 28x28\): linear 'hidden.fc'" "$netc" "$src/models/mlp.net" --image-size=32
expect 2 "--image-size takes S or HxW" "$netc" "$r20" --image-size=0
expect 2 "--image-size takes S or HxW" "$netc" "$r20" --image-size=32x
expect 2 "--image-size takes S or HxW" "$netc" "$r20" --image-size=99999
expect 2 "--image-size takes S or HxW" "$netrun" train "$r20" --image-size 12x-3
expect 2 "export does not take '--image-size'" "$netrun" export "$r20" --weights x --out y --image-size 24
expect 1 "at image size 32x32 \(the file says 28x28\)" "$netrun" train "$src/models/mlp.net" "${run[@]}" --image-size 32
# a model.so keeps the size it was compiled for
"$netc" "$r20" --image-size=24 -o "$work/r20_24.so" >/dev/null 2>&1
expect 0 "test accuracy" "$netrun" train "$work/r20_24.so" "${run[@]}"
expect 0 "test accuracy" "$netrun" train "$work/r20_24.so" "${run[@]}" --image-size 24x24
expect 1 "compiled for 24x24 images; the image size is chosen when a model.so is compiled" \
  "$netrun" train "$work/r20_24.so" "${run[@]}" --image-size 32
# inference at the model's size; an input of another is refused
"$netrun" train "$r20" "${run[@]}" --image-size 24 --checkpoint "$work/ck.safetensors" >/dev/null 2>&1
python3 - "$work" <<'PY'
import json, struct, sys
work = sys.argv[1]
for name, hw in (("b24", 24), ("b32", 32)):
    n = 2
    img = struct.pack("<%df" % (n * 3 * hw * hw), *([0.25] * (n * 3 * hw * hw)))
    hdr = {"image": {"dtype": "F32", "shape": [n, 3, hw, hw], "data_offsets": [0, len(img)]}}
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    open(f"{work}/{name}.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + img)
PY
expect 0 "logits of 2 images" "$netrun" infer "$r20" --device cpu --image-size 24 --weights "$work/ck.safetensors" \
  --inputs "$work/b24.safetensors" --out "$work/l24.safetensors"
expect 1 "does not fit the model's input" "$netrun" infer "$r20" --device cpu --image-size 24 \
  --weights "$work/ck.safetensors" --inputs "$work/b32.safetensors" --out "$work/l32.safetensors"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
