#!/usr/bin/env bash
# check_memory_limit.sh NETRUN SOURCE_DIR WORKDIR: netrun --memory-limit
# (NetLoadOpts.memory_limit, memory_fraction) on the CPU executor: a batch
# whose plan does not fit is refused before any step, naming the largest
# batch that would; that batch trains and the next one up is refused (the
# training and the inference executor counted together); a percentage of the
# machine's memory; bad values.  A few seconds.
set -uo pipefail
netrun=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../../expect.sh"
export NETC_CUDA_DRIVER=/nonexistent/libcuda-netc-test.so.1 # no GPU, as in CI
m=$src/models/resnet20.net
run=(--device cpu --synthetic --steps 1 --train-images 16 --test-images 8)

out=$("$netrun" train "$m" "${run[@]}" --batch 128 --memory-limit 0.05 2>&1)
rc=$?
fits=$(sed -n 's/.*the largest batch that fits is \([0-9]*\)$/\1/p' <<<"$out")
if [ $rc = 1 ] && grep -qE "graph resnet20 at batch 128 needs 0\.[0-9]+ GiB for its values and the inference graph's 0\.[0-9]+ GiB, more than the memory limit of 0\.05 GiB" <<<"$out" &&
  [ -n "$fits" ] && [ "$fits" -gt 1 ] && [ "$fits" -lt 128 ]; then ok; else
  bad "batch 128 under 0.05 GiB: exit $rc, $out"
fi
if [ -n "$fits" ]; then
  expect 0 "test accuracy" "$netrun" train "$m" "${run[@]}" --batch "$fits" --memory-limit 0.05
  expect 1 "the largest batch that fits is $fits\$" "$netrun" train "$m" "${run[@]}" --batch $((fits + 1)) --memory-limit 0.05
fi
# inference alone has only its own graph to fit
expect 1 "graph resnet20 at batch 4096 needs [0-9.]+ GiB for its values, more than the memory limit of 0\.10 GiB: the largest batch that fits is [0-9]+$" \
  "$netrun" bench "$m" --device cpu --inference --batch 4096 --memory-limit 0.1
expect 1 "not even batch 1 fits" "$netrun" train "$m" "${run[@]}" --batch 8 --memory-limit 0.0001
# a share of the machine's memory: 100% lets a small run through
expect 0 "test accuracy" "$netrun" train "$m" "${run[@]}" --batch 8 --memory-limit 100%
expect 1 "more than the memory limit of" "$netrun" train "$m" "${run[@]}" --batch 8 --memory-limit 0.0000001%
for v in 0 -1 101% abc 5GB %; do
  expect 2 "--memory-limit takes GiB \(40\) or a share of the device's memory \(50%\), not '$v'" \
    "$netrun" train "$m" "${run[@]}" --memory-limit "$v"
done
expect 2 "export does not take '--memory-limit'" "$netrun" export "$m" --weights x --out y --memory-limit 1
echo "$pass passed, $fail failed"
[ $fail = 0 ]
