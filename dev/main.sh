#!/usr/bin/env bash
# dev/main.sh: the main job from a fresh clone: install what is missing
# (dev/setup.sh: on a GPU machine without the CUDA headers, NVRTC or cuDNN,
# NVIDIA's wheels from PyPI into .whl/), build into build/release, compile
# ResNet-50 (layer table, memory plan, IR dumps under out/resnet50-ir), then
# train on Fashion-MNIST (Debian's dataset-fashion-mnist) and report the test
# accuracy: ResNet-50's body (models/resnet50_fmnist.net) on the GPU when one
# is present (`netrun info`), else a small residual network
# (models/smallcnn.net) on the CPU executor.
# On a machine with a GPU it stops, saying why, rather than train on the CPU
# when the GPU back end cannot be built or the GPU cannot be used.
# NETC_EPOCHS overrides the epochs; NETC_DEVICE=cpu trains on the CPU anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
bash dev/setup.sh
. dev/lib.sh
gpu_env # the wheels' NVRTC and cuDNN, when dev/setup.sh fetched them

device=${NETC_DEVICE:-auto}
gpu=0
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && gpu=1
# With a GPU, CMake stops (NETC_GPU=ON) when the GPU back end cannot be built.
want=AUTO
[ "$gpu" = 1 ] && [ "$device" != cpu ] && want=ON
if ! cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DNETC_GPU=$want >/dev/null; then
  [ "$want" = ON ] && banner "This machine has a GPU ($(nvidia-smi -L | head -n 1))," \
    "but the GPU back end cannot be built: CMake's message above says what is missing." \
    "NETC_DEVICE=cpu bash dev/main.sh builds and trains on the CPU instead."
  exit 1
fi
cmake --build build/release -j "$(nproc)"
if ! grep -q "^NETC_GPU_BUILT:INTERNAL=TRUE" build/release/CMakeCache.txt; then
  if [ "$gpu" = 1 ]; then
    banner "GPU back end NOT built (NETC_DEVICE=cpu), although this machine has a GPU:" \
      "netc and netrun in build/release run on the CPU only."
  else
    echo "main: the GPU back end is not built (CMake said why): netc and netrun run on the CPU only"
  fi
fi

mkdir -p out
echo "=== netc models/resnet50.net --summary --dump-ir=out/resnet50-ir"
build/release/netc models/resnet50.net --summary --dump-ir=out/resnet50-ir | tail -n 6
echo "IR dumps: $(ls out/resnet50-ir | tr '\n' ' ')"

if [ "$device" != cpu ]; then
  if info=$(build/release/netrun info 2>&1); then
    echo "$info"
    device=gpu
  elif [ "$gpu" = 1 ] || [ "$device" = gpu ]; then
    banner "A GPU is here, but netrun cannot use it:" "$info" \
      "NETC_DEVICE=cpu bash dev/main.sh trains on the CPU instead."
    exit 1
  else
    echo "$info"
    device=cpu
  fi
fi
if [ "$device" = gpu ]; then
  echo "=== netrun train models/resnet50_fmnist.net (Fashion-MNIST, GPU)"
  build/release/netrun train models/resnet50_fmnist.net --device gpu --epochs "${NETC_EPOCHS:-3}" \
    --log out/resnet50_fmnist.jsonl
else
  echo "=== netrun train models/smallcnn.net (Fashion-MNIST, CPU)"
  build/release/netrun train models/smallcnn.net --device cpu --epochs "${NETC_EPOCHS:-1}" --log out/smallcnn.jsonl
fi
