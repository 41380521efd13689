#!/usr/bin/env bash
# with_cifar.sh SOURCE_DIR WORKDIR PATTERN... -- COMMAND...: extracts the
# files of shared/data/cifar10-jpeg.tar.gz that match the tar wildcards
# PATTERN into WORKDIR/cifar (anew each time), then runs COMMAND with
# WORKDIR/cifar appended.  Without the tarball (../shared/data beside the
# source tree, else /work/shared/data) it says so and exits 77: skipped.
set -uo pipefail
src=$1 work=$2
shift 2
pats=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do pats+=("$1"); shift; done
shift
tarball=""
for d in "$src/../shared/data" /work/shared/data; do
  [ -f "$d/cifar10-jpeg.tar.gz" ] && { tarball="$d/cifar10-jpeg.tar.gz"; break; }
done
if [ -z "$tarball" ]; then
  echo "skipped: no cifar10-jpeg.tar.gz in $src/../shared/data or /work/shared/data"
  exit 77
fi
rm -rf "$work/cifar" && mkdir -p "$work/cifar" || exit 1
tar xzf "$tarball" -C "$work/cifar" --wildcards "${pats[@]}" || { echo "cannot extract $tarball"; exit 1; }
exec "$@" "$work/cifar"
