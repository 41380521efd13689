#!/usr/bin/env bash
# check_netrun.sh NETRUN SOURCE_DIR WORKDIR: netrun's exit codes and messages,
# and a short real training run (mlp on Fashion-MNIST) that must report an
# accuracy well above chance.
set -uo pipefail
netrun=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail=0 pass=0
expect() { # want-status grep-pattern command...
  local want=$1 pat=$2
  shift 2
  local out
  out=$(timeout 300 "$@" 2>&1)
  local got=$?
  if [ "$got" != "$want" ] || ! grep -qE -- "$pat" <<<"$out"; then
    echo "FAIL: $* -> exit $got (want $want), output:"; echo "$out" | tail -5; fail=$((fail + 1))
  else
    pass=$((pass + 1))
  fi
}
expect 0 "usage: netrun train" "$netrun" --help
expect 2 "usage: netrun" "$netrun"
expect 2 "unknown command 'fly'" "$netrun" fly
expect 2 "train takes one MODEL.net" "$netrun" train
expect 2 "--epochs must be an integer" "$netrun" train "$src/models/mlp.net" --epochs 0
expect 2 "--device must be cpu or gpu" "$netrun" train "$src/models/mlp.net" --device tpu
expect 1 "GPU back end is not built yet" "$netrun" train "$src/models/mlp.net" --device gpu
expect 1 "cannot open '$work/missing.net'" "$netrun" train "$work/missing.net"
printf 'network n {\n  input x : f32[4]\n  a = relu(y)\n}\n' >"$work/bad.net"
expect 1 "bad.net:3:12: error: undefined name 'y'" "$netrun" train "$work/bad.net"
expect 1 "$work/nodata" "$netrun" train "$src/models/mlp.net" --data "$work/nodata"
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  out=$("$netrun" train "$src/models/mlp.net" --epochs 1 --train-images 10000 --test-images 2000 2>&1)
  acc=$(grep -oE 'test accuracy [0-9.]+%$' <<<"$out" | tail -1 | grep -oE '[0-9.]+')
  if [ -n "$acc" ] && awk "BEGIN{exit !($acc >= 70)}"; then
    pass=$((pass + 1)); echo "mlp: test accuracy $acc%"
  else
    fail=$((fail + 1)); echo "FAIL: mlp training reported '${acc:-nothing}' (want >= 70%):"; echo "$out" | tail -5
  fi
else
  echo "skipped: the training run (dataset-fashion-mnist is not installed)"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
