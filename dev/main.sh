#!/usr/bin/env bash
# dev/main.sh: the main job from a fresh clone: install what is missing,
# build, compile ResNet-50 (summary and IR dumps under out/resnet50-ir).
set -euo pipefail
cd "$(dirname "$0")/.."
bash dev/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)"
mkdir -p out
build/release/netc models/resnet50.net --summary --dump-ir=out/resnet50-ir | tail -n 12
echo "IR dumps: $(ls out/resnet50-ir | tr '\n' ' ')"
