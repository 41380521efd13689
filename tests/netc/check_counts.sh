#!/usr/bin/env bash
# check_counts.sh NETC MODEL.net WORKDIR OP=COUNT...: the first IR dump
# (00-parse.ir) holds exactly COUNT ops named OP; OP:ATTR=COUNT counts only
# those with attribute ATTR (e.g. conv2d:groups=32=16).
set -uo pipefail
netc=$1 model=$2 work=$3
shift 3
rm -rf "$work" && mkdir -p "$work"
"$netc" --dump-ir="$work" "$model" || { echo "netc failed on $model"; exit 1; }
status=0
for pair in "$@"; do
  op=${pair%=*} want=${pair##*=} attr=
  case $op in *:*) attr=${op#*:} op=${op%%:*} ;; esac
  pat='.'
  [ -n "$attr" ] && pat="[{ ]$attr[ }]"
  got=$(grep -E "^ *%[0-9]+ = $op\(" "$work/00-parse.ir" | grep -cE "$pat")
  op=$op${attr:+ with $attr}
  if [ "$got" = "$want" ]; then echo "$op: $got"; else echo "$op: $got, want $want"; status=1; fi
done
exit $status
