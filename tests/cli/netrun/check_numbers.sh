#!/usr/bin/env bash
# check_numbers.sh NETRUN SOURCE_DIR: every numeric option of netrun goes
# through one strict parser (netrun_opt.c): nothing before or after the
# number, no value clamped, cast down or replaced -- bench's --steps
# 4294967297 is not 1 step, --lr 1e-46 is not the default -- and the
# message names the option, its range and the value.
set -uo pipefail
netrun=$1 src=$2
. "$(dirname "$0")/../../expect.sh"
mlp=$src/models/mlp.net
int="must be an integer in"
expect 2 "--steps $int 1..2147483647, not '4294967297'" "$netrun" bench "$mlp" --device cpu --steps 4294967297
expect 2 "--steps $int 1..1099511627776, not '99999999999999999999'" "$netrun" train "$mlp" --steps 99999999999999999999
expect 2 "--steps $int .*, not '9223372036854775808'" "$netrun" train "$mlp" --steps 9223372036854775808
expect 2 "--steps $int .*, not ' 5'" "$netrun" train "$mlp" --steps " 5"
expect 2 "--steps $int .*, not '5x'" "$netrun" train "$mlp" --steps 5x
expect 2 "--steps $int .*, not ''" "$netrun" train "$mlp" --steps ""
expect 2 "--epochs $int 1..100000, not '1e3'" "$netrun" train "$mlp" --epochs 1e3
expect 2 "--batch $int 1..1048576, not '-1'" "$netrun" train "$mlp" --batch -1
expect 2 "--seed $int .*, not '0x10'" "$netrun" train "$mlp" --seed 0x10
expect 2 "--seed $int .*, not '0'" "$netrun" train "$mlp" --seed 0
expect 2 "--workers $int 1..256, not '257'" "$netrun" train "$mlp" --workers 257
expect 2 "--cpu-share $int 0..100, not '50.5'" "$netrun" train "$mlp" --cpu-share 50.5
expect 2 "--every $int .*, not '0'" "$netrun" train "$mlp" --every 0 --checkpoint /tmp/x
expect 2 "--accum $int 1..1048576, not '2097152'" "$netrun" train "$mlp" --accum 2097152
expect 2 "--train-images $int .*, not '1.5'" "$netrun" train "$mlp" --train-images 1.5
expect 2 "--test-images $int .*, not '-3'" "$netrun" train "$mlp" --test-images -3
expect 2 "--batches-tracked $int .*, not '-1'" "$netrun" export "$mlp" --weights a --out b --batches-tracked -1
expect 2 "--reps $int 1..1000, not '4294967297'" "$netrun" profile "$mlp" --reps 4294967297
expect 2 "--top $int .*, not '1k'" "$netrun" profile "$mlp" --top 1k
step=("$netrun" step "$mlp" --weights w --inputs b --out o)
real="must be a positive number from 1.17549e-38 to 1e\+30 \(a normal float\)"
expect 2 "--lr $real, not '1e-46'" "${step[@]}" --lr 1e-46
expect 2 "--lr $real, not '1e-40'" "${step[@]}" --lr 1e-40
expect 2 "--lr $real, not '1e300'" "${step[@]}" --lr 1e300
expect 2 "--lr $real, not 'nan'" "${step[@]}" --lr nan
expect 2 "--lr $real, not '0'" "${step[@]}" --lr 0
expect 2 "--lr $real, not ' 0.1'" "${step[@]}" --lr " 0.1"
expect 2 "--loss-scale $real, not 'inf'" "${step[@]}" --loss-scale inf
expect 2 "--loss-scale $real, not '1e-300'" "${step[@]}" --loss-scale 1e-300
expect 2 "--std takes R,G,B .*, not '1e-46'" "$netrun" train "$mlp" --synthetic --mean 0 --std 1e-46
expect 2 "--std takes R,G,B .*, not '1,1e-40,1'" "$netrun" train "$mlp" --synthetic --mean 0 --std 1,1e-40,1
expect 2 "--mean takes R,G,B .*, not '1e39'" "$netrun" train "$mlp" --synthetic --mean 1e39 --std 1
expect 2 "--mean takes R,G,B .*, not '0,,0'" "$netrun" train "$mlp" --synthetic --mean 0,,0 --std 1
# kept as given: a small normal rate is not the default
expect 1 "b: cannot open" "${step[@]}" --device cpu --lr 1e-30
echo "$pass passed, $fail failed"
[ $fail = 0 ]
