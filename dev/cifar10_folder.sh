#!/usr/bin/env bash
# dev/cifar10_folder.sh CIFAR OUT: CIFAR-10 in the ImageFolder layout that
# `netrun train --data OUT` reads: OUT/train/<class>/NNNN.jpg (50,000) and
# OUT/test/<class>/NNNN.jpg (10,000).  CIFAR is the dataset's "binary
# version", cifar-10-binary.tar.gz (162 MB, from the CIFAR-10 page), or the
# cifar-10-batches-bin/ folder it holds.  Builds dev/cifar10_folder.c (C and
# libjpeg, which dev/setup.sh installs) in a temporary folder and runs it.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: bash dev/cifar10_folder.sh cifar-10-binary.tar.gz|cifar-10-batches-bin/ OUT" >&2
  exit 2
fi
src=$1 out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -f "$src" ]; then
  tar xzf "$src" -C "$tmp"
  meta=$(find "$tmp" -name batches.meta.txt -print -quit)
  [ -n "$meta" ] || { echo "cifar10_folder: no batches.meta.txt in $src (not the binary version?)" >&2; exit 1; }
  dir=$(dirname "$meta")
else
  dir=$src
fi
"${CC:-cc}" -O2 -std=c11 -Wall -o "$tmp/cifar10_folder" "$(dirname "$0")/cifar10_folder.c" -ljpeg
"$tmp/cifar10_folder" "$dir" "$out"
