#!/usr/bin/env bash
# check_summary.sh NETC MODELS_DIR: `netc --summary` ends its totals with
#   activation memory: N bytes (batch B, lower bound M bytes)
#   parameter and state memory: P bytes
# B is --batch (else the train section's batch), M <= N < 1.3 M, N is the
# plan line of the memplan dump, P is the byte count of the dumped params and
# state; the params:/macs: lines stay; -fno-memplan says there is no plan.
set -uo pipefail
netc=$1 models=$2
status=0
fail() { echo "FAIL: $*"; status=1; }

# bytes of the param/state declarations of a dump (f32/i32 4, f16/bf16 2, ...)
weight_bytes() {
  awk '/^  (param|state) @/ {
         t = $4; dt = t; sub(/\[.*/, "", dt); d = t; sub(/^[^[]*\[/, "", d); sub(/\].*/, "", d)
         n = (dt == "f32" || dt == "i32") ? 4 : (dt == "f16" || dt == "bf16") ? 2 : (dt == "i64") ? 8 : 1
         k = split(d, dims, ","); for (i = 1; i <= k; i++) n *= dims[i]; s += n }
       END { printf "%d\n", s }'
}

check() { # MODEL WANT_BATCH [FLAGS...]
  local model=$1 want_batch=$2
  shift 2
  local out dump
  out=$("$netc" --summary "$models/$model.net" "$@") || { fail "$model $*: netc failed"; return; }
  dump=$("$netc" --no-loc --print-after=memplan "$models/$model.net" "$@") || { fail "$model $*: dump failed"; return; }
  grep -qE '^params: [0-9]+$' <<<"$out" || fail "$model: params line missing"
  grep -qE '^macs: [0-9]+$' <<<"$out" || fail "$model: macs line missing"
  local line
  line=$(grep -E '^activation memory: ' <<<"$out")
  if [[ ! $line =~ ^activation\ memory:\ ([0-9]+)\ bytes\ \(batch\ ([0-9]+),\ lower\ bound\ ([0-9]+)\ bytes\)$ ]]; then
    fail "$model $*: bad line '$line'"
    return
  fi
  local n=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]} m=${BASH_REMATCH[3]}
  [ "$b" = "$want_batch" ] || fail "$model $*: batch $b, want $want_batch"
  [ "$m" -gt 0 ] && [ "$m" -le "$n" ] && [ $((n * 10)) -lt $((m * 13)) ] || fail "$model $*: $n bytes vs lower bound $m"
  grep -qx "  plan bytes=$n batch=$b" <<<"$dump" || fail "$model $*: the dump's plan line differs from $n/$b"
  [ "$(grep -cE '^(params|macs|activation memory|parameter and state memory): ' <<<"$out")" = 4 ] ||
    fail "$model $*: totals lines"
  local p want_p
  p=$(grep -E '^parameter and state memory: ' <<<"$out" | sed -E 's/^parameter and state memory: ([0-9]+) bytes$/\1/')
  want_p=$(weight_bytes <<<"$dump")
  [ "$p" = "$want_p" ] || fail "$model $*: parameter and state memory '$p', the dump holds $want_p"
  echo "$model $*: activation memory $n bytes (batch $b, lower bound $m), params+state $p bytes"
}

check resnet50 256 --batch=256
check resnet50 32 --batch=32
check smallcnn 64
check smallcnn 64 --inference
check smallcnn 3 --batch=3 -fno-fuse -fno-layout -fno-precision

out=$("$netc" --summary -fno-memplan "$models/smallcnn.net") || fail "-fno-memplan: netc failed"
grep -qx 'activation memory: not planned (memplan is off)' <<<"$out" || fail "-fno-memplan: no 'not planned' line"
dump=$("$netc" --no-loc --print-after=autodiff -fno-memplan "$models/smallcnn.net")
grep -q ' @[0-9]' <<<"$dump" && fail "-fno-memplan: offsets printed"
grep -q '^  plan ' <<<"$dump" && fail "-fno-memplan: plan line printed"
exit $status
