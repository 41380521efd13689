#!/usr/bin/env bash
# dev/setup_tests.sh: install what the test suite (dev/test.sh) adds to the
# main job's packages (dev/setup.sh, run first), when it is missing, on
# Debian or Ubuntu: clang and its sanitizer/libFuzzer runtime for the fuzz
# build, protobuf-c and ONNX's proto file and conformance data for the ONNX
# tests, Python for the command-line tests, pkg-config.  Safe to run again:
# it prints and installs nothing when everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."
. dev/lib.sh

PACKAGES=(
  clang                                           # the libFuzzer build (CC=clang)
  protobuf-c-compiler libprotobuf-c-dev libonnx-dev # reading ONNX conformance tests
  libonnx-testdata                                # the ONNX operator tests themselves
  python3                                         # command-line tests
  "pkg-config|pkgconf"                            # the install test
  clang-format                                    # the one style (tests/layout, .clang-format)
)
apt_need "${PACKAGES[@]}" || echo "setup: the tests that need them will fail or be skipped" >&2

# clang's runtime (libFuzzer, the sanitizers): libclang-rt-dev follows the
# default clang (Debian 12: 14, Ubuntu 24.04: 18); where there is none, the
# versioned package of the installed clang, or (Ubuntu 22.04) clang's own
# libclang-common, which clang already pulled in.
v=$(clang -dumpversion 2>/dev/null || true)
v=${v%%.*}
if [ -n "$v" ] && ! apt_installed libclang-rt-dev && ! apt_installed "libclang-rt-$v-dev"; then
  apt_update_once
  if apt_known libclang-rt-dev || apt_known "libclang-rt-$v-dev"; then
    apt_need "libclang-rt-dev|libclang-rt-$v-dev"
  elif ! apt_installed "libclang-common-$v-dev"; then
    echo "setup: no clang runtime package (libclang-rt-dev, libclang-rt-$v-dev, libclang-common-$v-dev):" \
      "the fuzz build will not link" >&2
  fi
fi
