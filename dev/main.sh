#!/usr/bin/env bash
# dev/main.sh: the main job from a fresh clone: install what is missing,
# build, compile ResNet-50 (layer table, memory plan, IR dumps under
# out/resnet50-ir), then train on Fashion-MNIST (Debian's
# dataset-fashion-mnist, installed by dev/setup.sh) and report the test
# accuracy: ResNet-50's body (models/resnet50_fmnist.net) on the GPU when
# one is present (`netrun info`), else a small residual network
# (models/smallcnn.net) on the CPU executor.  NETC_EPOCHS overrides the
# epochs; NETC_DEVICE=cpu forces the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash dev/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)"
mkdir -p out
echo "=== netc models/resnet50.net --summary --dump-ir=out/resnet50-ir"
build/release/netc models/resnet50.net --summary --dump-ir=out/resnet50-ir | tail -n 6
echo "IR dumps: $(ls out/resnet50-ir | tr '\n' ' ')"
if [ "${NETC_DEVICE:-auto}" != cpu ] && build/release/netrun info; then
  echo "=== netrun train models/resnet50_fmnist.net (Fashion-MNIST, GPU)"
  build/release/netrun train models/resnet50_fmnist.net --device gpu --epochs "${NETC_EPOCHS:-3}" \
    --log out/resnet50_fmnist.jsonl
else
  echo "=== netrun train models/smallcnn.net (Fashion-MNIST, CPU)"
  build/release/netrun train models/smallcnn.net --device cpu --epochs "${NETC_EPOCHS:-1}" --log out/smallcnn.jsonl
fi
