#!/bin/sh
# golden.sh EXPECTED COMMAND [ARGS...]: runs COMMAND and compares what it
# writes to stderr (or stdout with GOLDEN_STREAM=stdout) with the file
# EXPECTED.  The command must exit 0 for stdout goldens and non-zero for
# stderr goldens (a golden error that stops being an error is a failure).
# UPDATE_GOLDEN=1 rewrites EXPECTED instead of comparing.
expected=$1
shift
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
if [ "${GOLDEN_STREAM:-stderr}" = stdout ]; then
  "$@" >"$tmp" 2>/dev/null
  status=$?
  [ $status -eq 0 ] || { echo "golden: '$*' exited $status, expected 0" >&2; exit 1; }
else
  "$@" 2>"$tmp" >/dev/null
  status=$?
  [ $status -ne 0 ] || { echo "golden: '$*' exited 0, expected an error" >&2; exit 1; }
  [ $status -lt 128 ] || { echo "golden: '$*' died with status $status" >&2; exit 1; }
fi
if [ -n "${UPDATE_GOLDEN:-}" ]; then
  cp "$tmp" "$expected" && echo "golden: wrote $expected"
  exit 0
fi
if [ ! -f "$expected" ]; then
  echo "golden: $expected is missing; run with UPDATE_GOLDEN=1 to create it" >&2
  cat "$tmp" >&2
  exit 1
fi
if ! diff -u "$expected" "$tmp"; then
  echo "golden: output differs from $expected (UPDATE_GOLDEN=1 rewrites it after review)" >&2
  exit 1
fi
