#!/usr/bin/env bash
# check_layouts.sh NETRUN SOURCE_DIR WORKDIR: `netrun train --data DIR` on
# folders that are no data set (empty, train/ without test/ or val/, a
# symlink loop, missing, an IDX folder missing files) says which layouts it
# tried and what DIR lacks for each; ImageFolder trees without class
# folders or with a class folder holding no images name that folder.
set -uo pipefail
netrun=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../expect.sh"
mlp=$src/models/mlp.net
cat >"$work/rgb.net" <<'NET'
network tiny {
  input image : f32[3, 16, 16]
  input label : i32[]
  c1   = conv2d(image, 8, k=3, p=1)
  gap  = global_avgpool(relu(c1))
  fc   = linear(flatten(gap), 2)
  loss = softmax_cross_entropy(fc, label)
}
train {
  batch     = 2
  epochs    = 1
  optimizer = sgd(lr=0.1)
}
NET
rgb=$work/rgb.net
tried="not a data set netrun reads; tried"
mkdir -p "$work/empty"
expect 1 "empty: $tried" "$netrun" train "$mlp" --device cpu --data "$work/empty"
expect 1 "ImageFolder .*: no train/ folder and no test/ or val/ folder" "$netrun" train "$mlp" --device cpu \
  --data "$work/empty"
expect 1 "IDX .*: no train-images-idx3-ubyte\[.gz\], train-labels-idx1-ubyte\[.gz\], t10k-images-idx3-ubyte\[.gz\], t10k-labels-idx1-ubyte\[.gz\]$" \
  "$netrun" train "$mlp" --device cpu --data "$work/empty"
mkdir -p "$work/trainonly/train/cat"
expect 1 "ImageFolder .*: no test/ or val/ folder$" "$netrun" train "$rgb" --device cpu --data "$work/trainonly"
mkdir -p "$work/testonly/val"
expect 1 "ImageFolder .*: no train/ folder$" "$netrun" train "$rgb" --device cpu --data "$work/testonly"
ln -s loop "$work/loop"
expect 1 "loop: Too many levels of symbolic links; --data takes a folder holding an ImageFolder .* or a Fashion-MNIST IDX" \
  "$netrun" train "$mlp" --device cpu --data "$work/loop"
mkdir -p "$work/looped" && ln -s train "$work/looped/train" && mkdir -p "$work/looped/test"
expect 1 "no train/ folder \(Too many levels of symbolic links\)" "$netrun" train "$rgb" --device cpu --data "$work/looped"
expect 1 "nowhere: no such folder; --data takes" "$netrun" train "$mlp" --device cpu --data "$work/nowhere"
touch "$work/afile"
expect 1 "afile: not a folder; --data takes" "$netrun" train "$mlp" --device cpu --data "$work/afile"
# IDX with two of the four files (one of them gzipped): the other two named
mkdir -p "$work/idx" && touch "$work/idx/train-images-idx3-ubyte" "$work/idx/t10k-labels-idx1-ubyte.gz"
expect 1 "IDX .*: no train-labels-idx1-ubyte\[.gz\], t10k-images-idx3-ubyte\[.gz\]$" "$netrun" train "$mlp" \
  --device cpu --data "$work/idx"
# ImageFolder trees that are there but hold no images
mkdir -p "$work/nocls/train" "$work/nocls/test" && touch "$work/nocls/train/x.jpg"
expect 1 "nocls/train: no class folders \(expected ROOT/<class>/<image>.jpg\); 1 other entry, such as 'x.jpg'" \
  "$netrun" train "$rgb" --device cpu --data "$work/nocls"
mkdir -p "$work/bare/train" "$work/bare/test"
expect 1 "bare/train: no class folders .*: it is empty" "$netrun" train "$rgb" --device cpu --data "$work/bare"
mkdir -p "$work/emptycls/train/cat" "$work/emptycls/train/dog" "$work/emptycls/test/cat" "$work/emptycls/test/dog"
expect 1 "emptycls/train/cat: no images in the class folder \(.jpg, .jpeg, .JPEG, .JPG\): it is empty" \
  "$netrun" train "$rgb" --device cpu --data "$work/emptycls"
touch "$work/emptycls/train/cat/a.png" "$work/emptycls/train/cat/b.txt"
expect 1 "emptycls/train/cat: no images in the class folder .*; 2 other entries, such as '(a.png|b.txt)'" \
  "$netrun" train "$rgb" --device cpu --data "$work/emptycls"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
