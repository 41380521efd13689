#!/usr/bin/env bash
# dev/main.sh: the main job from a fresh clone: install what is missing,
# build, compile ResNet-50 (layer table, memory plan, IR dumps under
# out/resnet50-ir), then train a small residual network on Fashion-MNIST and
# report its test accuracy.  Training runs on the CPU executor: the GPU back
# end is not built yet (docs/STATUS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash dev/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)"
mkdir -p out
echo "=== netc models/resnet50.net --summary --dump-ir=out/resnet50-ir"
build/release/netc models/resnet50.net --summary --dump-ir=out/resnet50-ir | tail -n 6
echo "IR dumps: $(ls out/resnet50-ir | tr '\n' ' ')"
echo "=== netrun train models/smallcnn.net (Fashion-MNIST, CPU)"
build/release/netrun train models/smallcnn.net --epochs "${NETC_EPOCHS:-1}"
