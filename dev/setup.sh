#!/usr/bin/env bash
# dev/setup.sh: install what netc needs to build and test, from Debian's
# packages, when it is missing.  Safe to run again: it installs nothing when
# everything is present.
set -euo pipefail

PACKAGES=(
  gcc make cmake ninja-build clang libclang-rt-14-dev   # compilers; clang for the fuzzer
  flex bison                                            # the grammar
  zlib1g-dev libcjson-dev libopenblas-dev               # runtime: gzip, safetensors headers, BLAS
  nettle-dev libcairo2-dev                              # checkpoint fingerprints (SHA-256), plots
  protobuf-c-compiler libprotobuf-c-dev libonnx-dev     # reading ONNX conformance tests
  libonnx-testdata dataset-fashion-mnist                # test data
  libjpeg62-turbo-dev                                   # ImageFolder JPEG data (runtime/rt_jpeg.c)
  python3
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
