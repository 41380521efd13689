#!/usr/bin/env bash
# check_emit.sh NETC MODEL WORKDIR [netc options for MODEL]: `netc MODEL
# --emit-net=OUT.net` writes a network that netc reads back to the same
# forward IR: the first IR dumps (--print-after=parse --no-loc: values,
# parameter names in order, shapes, ops, attributes, layer names, the train
# section) are equal, and so are the --summary totals.  The inputs and the
# network renamed with a warning ("input 'input' is written as 'input_'")
# are renamed in MODEL's dump before comparing.  Writing OUT.net out again
# gives the same text (but for its first comment line, naming the source).
# --emit-net-plain (one line per layer) gives the same IR too.  With
# EMIT_BLOCKS=yes OUT.net must call blocks (a `block ` line), with
# EMIT_BLOCKS=half and be at most half as long as the plain text; with
# EMIT_BLOCKS=no it must have no block.
set -uo pipefail
netc=$1 model=$2 work=$3
shift 3
rm -rf "$work" && mkdir -p "$work"
out=$work/emitted.net
if ! "$netc" "$@" --emit-net="$out" "$model" 2>"$work/emit.err"; then
  cat "$work/emit.err"
  echo "netc --emit-net failed on $model"
  exit 1
fi
[ -s "$work/emit.err" ] && cat "$work/emit.err"
[ -s "$out" ] || { echo "no $out"; exit 1; }
# the renames the warnings announce, as sed commands on MODEL's dump
esc() { sed 's/[.[\*^$/]/\\&/g' <<<"$1"; }
script=""
while IFS= read -r line; do
  if [[ $line =~ warning:\ (input|network)\ \'([^\']*)\'\ is\ written\ as\ \'([^\']*)\' ]]; then
    from=$(esc "${BASH_REMATCH[2]}") to=${BASH_REMATCH[3]}
    if [ "${BASH_REMATCH[1]}" = input ]; then
      script+="s/^  input (%[0-9]+) $from :/  input \\1 $to :/;"
    else
      script+="s/^graph $from \\{/graph $to {/;"
    fi
  fi
done <"$work/emit.err"
"$netc" "$@" --no-loc --print-after=parse "$model" 2>/dev/null | sed -E "$script" >"$work/source.ir"
"$netc" --no-loc --print-after=parse "$out" >"$work/emitted.ir" 2>"$work/reread.err" ||
  { cat "$work/reread.err"; echo "netc cannot read back $out"; exit 1; }
status=0
if ! diff -u "$work/source.ir" "$work/emitted.ir" >"$work/ir.diff"; then
  echo "the forward IR differs (--- $model, +++ $out):"
  head -n 40 "$work/ir.diff"
  status=1
fi
[ -s "$work/source.ir" ] || { echo "no IR dump of $model"; status=1; }
totals() { "$netc" "$@" --summary 2>/dev/null | grep -E '^(params|macs): '; }
a=$(totals "$@" "$model") b=$(totals "$out")
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "--summary totals differ: $model: $a; $out: $b"; status=1; }
"$netc" --emit-net="$work/again.net" "$out" 2>/dev/null || { echo "netc --emit-net fails on its own $out"; status=1; }
if [ -f "$work/again.net" ] && ! diff <(tail -n +2 "$out") <(tail -n +2 "$work/again.net") >"$work/again.diff"; then
  echo "$out written out again differs:"
  head -n 20 "$work/again.diff"
  status=1
fi
# the plain form: the same IR, and the blocks (or none) as EMIT_BLOCKS says
plain=$work/plain.net
if "$netc" "$@" --emit-net-plain="$plain" "$model" 2>/dev/null; then
  "$netc" --no-loc --print-after=parse "$plain" >"$work/plain.ir" 2>/dev/null || true
  diff -q "$work/source.ir" "$work/plain.ir" >/dev/null || { echo "$plain does not give the forward IR"; status=1; }
  grep -q '^block ' "$plain" && { echo "$plain has a block"; status=1; }
else
  echo "netc --emit-net-plain failed on $model"
  status=1
fi
lines=$(wc -l <"$out") plain_lines=$(wc -l <"$plain" 2>/dev/null || echo 0)
case ${EMIT_BLOCKS:-} in
yes | half)
  grep -q '^block ' "$out" || { echo "$out has no block"; status=1; }
  [ "$EMIT_BLOCKS" = yes ] || [ $((2 * lines)) -le "$plain_lines" ] ||
    { echo "$out has $lines lines, more than half of the plain $plain_lines"; status=1; }
  ;;
no) grep -q '^block ' "$out" && { echo "$out has a block: it should be plain"; status=1; } ;;
esac
nparam=$(grep -cE '^  (param|state) ' "$work/emitted.ir")
[ $status -eq 0 ] && echo "$model -> $out: the same forward IR ($(grep -cE '^  %' "$work/emitted.ir") ops, $nparam parameters and state by name; $(tr '\n' ' ' <<<"$a"); $(grep -c '^block ' "$out") blocks, $lines lines, plain $plain_lines)"
exit $status
