#!/usr/bin/env bash
# check_summary.sh NETC MODEL.net PARAMS MACS: `netc --summary` prints the
# expected totals (torchvision's figures for the ResNets at 224x224).
set -uo pipefail
netc=$1 model=$2 want_params=$3 want_macs=$4
out=$("$netc" --summary "$model") || { echo "netc failed on $model"; exit 1; }
got_params=$(grep -E '^params: ' <<<"$out" | awk '{print $2}')
got_macs=$(grep -E '^macs: ' <<<"$out" | awk '{print $2}')
status=0
[ "$got_params" = "$want_params" ] || { echo "$model: params $got_params, want $want_params"; status=1; }
[ "$got_macs" = "$want_macs" ] || { echo "$model: macs $got_macs, want $want_macs"; status=1; }
[ $status -eq 0 ] && echo "$model: params $got_params macs $got_macs"
exit $status
