#!/usr/bin/env bash
# check_same.sh NETC MODEL.net MODEL.onnx TRAIN_FILE WORKDIR [netc options]:
# the ONNX model compiles to the IR of its twin in the language: the same
# ops, counted op by op, after every pass (--dump-ir), and the same
# --summary totals.  TRAIN_FILE ("": the default train section) is the
# ONNX model's --train.  Layer and value names may differ (ONNX node names).
set -uo pipefail
netc=$1 net=$2 onnx=$3 train=$4 work=$5
shift 5
rm -rf "$work" && mkdir -p "$work/net" "$work/onnx"
"$netc" "$@" --dump-ir="$work/net" "$net" || { echo "netc failed on $net"; exit 1; }
"$netc" "$@" ${train:+--train="$train"} --dump-ir="$work/onnx" "$onnx" || { echo "netc failed on $onnx"; exit 1; }
status=0
ops() { sed -nE 's/^ *(%[0-9]+(, %[0-9]+)* = )?([a-z0-9_]+)\(.*/\3/p' "$1" | sort | uniq -c; }
n=0
for f in "$work"/net/*.ir; do
  g=$work/onnx/$(basename "$f")
  [ -f "$g" ] || { echo "no $(basename "$f") for $onnx"; status=1; continue; }
  if ! diff <(ops "$f") <(ops "$g") >"$work/diff"; then
    echo "$(basename "$f"): op counts differ (< $net, > $onnx):"
    cat "$work/diff"
    status=1
  fi
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "no IR dumps in $work/net"; status=1; }
totals() { "$netc" "$@" --summary | grep -E '^(params|macs): '; }
a=$(totals "$net") b=$(totals ${train:+--train="$train"} "$onnx")
[ "$a" = "$b" ] || { echo "--summary totals differ: $net: $a; $onnx: $b"; status=1; }
[ -n "$a" ] || { echo "no totals from --summary"; status=1; }
[ $status -eq 0 ] && echo "$onnx: the IR of $net after $n passes ($(tr '\n' ' ' <<<"$a"))"
exit $status
