#!/bin/sh
# golden.sh - compares what a command prints on stderr with a golden file.
#
#   sh tests/golden.sh EXPECTED.stderr COMMAND [ARGS...]
#
# Runs COMMAND in the current folder and diffs its stderr against
# EXPECTED.stderr (a missing file reads as empty).  With UPDATE_GOLDEN=1 in
# the environment the golden file is rewritten instead, and the change is
# reviewed in the diff like code.  GOLDEN_STREAM=stdout compares stdout
# instead (for IR dumps; the command must then exit 0).  Fails also when the command crashed
# (exit status above 1, or a sanitizer report) or when it exited 0 although
# the golden file holds an error.
set -u
if [ $# -lt 2 ]; then
  echo "usage: golden.sh EXPECTED.stderr COMMAND [ARGS...]" >&2
  exit 2
fi
expected=$1
shift
got=$(mktemp) || exit 2
trap 'rm -f "$got"' EXIT
if [ "${GOLDEN_STREAM:-stderr}" = stdout ]; then
  "$@" >"$got"
  rc=$?
  [ "$rc" -eq 0 ] || { echo "golden.sh: '$*' exited $rc, expected 0" >&2; exit 1; }
else
  "$@" 2>"$got" >/dev/null
  rc=$?
fi
if [ "$rc" -gt 1 ] || grep -q -e 'Sanitizer' -e 'runtime error:' "$got"; then
  echo "golden.sh: '$*' crashed (exit status $rc):" >&2
  cat "$got" >&2
  exit 1
fi
if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then
  cp "$got" "$expected" || exit 1
  echo "golden.sh: wrote $expected"
  exit 0
fi
[ -f "$expected" ] || expected=/dev/null
if ! diff -u "$expected" "$got"; then
  echo "golden.sh: stderr of '$*' differs from $expected (UPDATE_GOLDEN=1 rewrites it)" >&2
  exit 1
fi
if [ "$rc" -eq 0 ] && grep -q ': error: ' "$expected"; then
  echo "golden.sh: '$*' reported errors but exited 0" >&2
  exit 1
fi
if [ "$rc" -ne 0 ] && ! grep -q 'error: ' "$expected"; then
  echo "golden.sh: '$*' exited $rc but the golden file has no error" >&2
  exit 1
fi
exit 0
