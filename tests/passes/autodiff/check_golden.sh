#!/usr/bin/env bash
# check_golden.sh NETC EXPECTED FILE.net [FLAGS...]
# The IR after the autodiff pass (--no-loc) must equal EXPECTED byte for byte;
# with UPDATE_GOLDEN=1 the dump replaces EXPECTED instead (review the diff).
set -u
netc=$1 expected=$2
shift 2
got=$(mktemp)
trap 'rm -f "$got"' EXIT
if ! "$netc" --no-loc --print-after=autodiff "$@" >"$got"; then
  echo "netc failed: $netc --no-loc --print-after=autodiff $*"
  exit 1
fi
if [ -n "${UPDATE_GOLDEN:-}" ]; then
  cp "$got" "$expected"
  echo "updated $expected"
  exit 0
fi
diff -u "$expected" "$got" && echo "ok: $(basename "$expected")"
