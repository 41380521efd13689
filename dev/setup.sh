#!/usr/bin/env bash
# dev/setup.sh: install what the main job (dev/main.sh) needs, when it is
# missing, on Debian or Ubuntu.  Safe to run again: it prints and installs
# nothing when everything is present.
#   1. packages: the compiler, CMake and ninja, flex and bison, the runtime's
#      libraries (zlib, cJSON, OpenBLAS, nettle, cairo, libjpeg), protobuf-c
#      and onnx.proto (the ONNX front end, `netc FILE.onnx`), and
#      Fashion-MNIST (dataset-fashion-mnist)
#   2. on a machine with an NVIDIA GPU whose CUDA 13 headers, NVRTC or cuDNN 9
#      are missing, or with NETC_GPU_SETUP=1: NVIDIA's CUDA and cuDNN wheels
#      from PyPI (headers and libraries, about 900 MB), unpacked into .whl/,
#      where CMake finds the headers and dev/main.sh the libraries.
#      NETC_GPU_SETUP=0 never fetches them; NETC_CUDA_WHEELS replaces the list.
# dev/setup_tests.sh adds what only the tests need.
set -euo pipefail
cd "$(dirname "$0")/.."
. dev/lib.sh

PACKAGES=(
  gcc libc6-dev make cmake ninja-build  # the C compiler (netc -o runs it too), the build
  flex bison                            # the grammar
  zlib1g-dev libcjson-dev libopenblas-dev # gzip, safetensors headers, BLAS
  nettle-dev libcairo2-dev              # checkpoint fingerprints (SHA-256), plots
  "libjpeg-dev|libjpeg62-turbo-dev|libjpeg-turbo8-dev" # ImageFolder JPEGs (runtime/data)
  protobuf-c-compiler libprotobuf-c-dev libonnx-dev # the ONNX front end (netc FILE.onnx)
  dataset-fashion-mnist                 # the main job's data
)
apt_need "${PACKAGES[@]}"

# The versions of the CUDA 13.0 toolkit the development machines build with.
# (cuDNN's wheel asks for cuBLAS; NVRTC's headers and libraries come with it.)
wheels=(nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88 nvidia-cuda-nvrtc==13.0.88
        nvidia-nvtx==13.0.85 nvidia-cudnn-cu13==9.19.0.56 nvidia-cublas==13.1.0.3)
[ -z "${NETC_CUDA_WHEELS:-}" ] || read -r -a wheels <<<"$NETC_CUDA_WHEELS"
marker=$WHL/netc-wheels.txt
case ${NETC_GPU_SETUP:-auto} in
  0) exit 0 ;;
  1) [ "$(cat "$marker" 2>/dev/null)" != "${wheels[*]}" ] || exit 0 ;;
  *) gpu_present && ! gpu_stack_found || exit 0 ;;
esac

if [ "${NETC_GPU_SETUP:-auto}" = 1 ]; then
  echo "setup: NETC_GPU_SETUP=1:"
else
  echo "setup: this machine has a GPU, but no $(gpu_stack_missing | tr '\n' ' ' | sed 's/ $//'):"
fi
echo "setup: fetching ${wheels[*]} from PyPI into $WHL"
python3 -m pip --version >/dev/null 2>&1 || apt_need python3-pip
rm -rf "$WHL/download" "$marker"
mkdir -p "$WHL/download"
python3 -m pip download --disable-pip-version-check -q --no-deps --only-binary=:all: \
  -d "$WHL/download" "${wheels[@]}"
for w in "$WHL"/download/*.whl; do python3 -m zipfile -e "$w" "$WHL"; done
rm -rf "$WHL/download"
left=$(gpu_stack_missing whl | tr '\n' ' ')
if [ -n "$left" ]; then
  echo "setup: still missing after the wheels: $left" >&2
  exit 1
fi
echo "${wheels[*]}" >"$marker"
echo "setup: CUDA headers in $WHL/nvidia/cu13/include, cuDNN in $WHL/nvidia/cudnn"
