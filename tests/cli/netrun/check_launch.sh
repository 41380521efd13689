#!/usr/bin/env bash
# check_launch.sh NETRUN SOURCE_DIR WORKDIR: data-parallel runs from the
# command line on the CPU (netrun_launch.h): `--nproc N` starts N ranks that
# train together, rank 0 alone printing and saving; the torchrun environment
# (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) starts ranks by hand; ranks
# that disagree are refused by name; Ctrl-C reaches every rank and they stop
# after the same step with rank 0's checkpoint; the bad uses of --gpus and
# --nproc are usage errors.  A few seconds.
set -uo pipefail
netrun=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../../expect.sh"
export NETC_CUDA_DRIVER=/nonexistent/libcuda-netc-test.so.1 # no GPU, as in CI
m=$src/models/mlp.net
run=(--device cpu --synthetic --precision fp32 --batch 16 --train-images 640 --test-images 64)

# --- --nproc 2: one run, rank 0 speaks and saves ------------------------------
out=$(timeout 120 "$netrun" train "$m" "${run[@]}" --steps 8 --nproc 2 --checkpoint "$work/two.safetensors" \
  --log "$work/two.jsonl" 2>&1)
rc=$?
[ $rc = 0 ] && ok || bad "--nproc 2: exit $rc: $(tail -3 <<<"$out")"
grep -q "batch 16 on each of 2 ranks" <<<"$out" && ok || bad "--nproc 2: no ranks in the first line"
# the run's warnings are said once, by rank 0 (resnet20's warm-up of 1 epoch over a 1-epoch run)
out1=$(timeout 120 "$netrun" train "$src/models/resnet20.net" --device cpu --synthetic --batch 8 --epochs 1 \
  --train-images 64 --test-images 8 --nproc 2 2>&1)
[ "$(grep -c 'warning: the train section' <<<"$out1")" = 1 ] && ok || bad "--nproc 2: the warning not once: $out1"
[ "$(grep -c '^netrun: 8 steps' <<<"$out")" = 1 ] && ok || bad "--nproc 2: not one summary line: $out"
[ "$(grep -c '"step"' "$work/two.jsonl")" = 8 ] && ok || bad "--nproc 2: the log has not 8 steps (one writer)"
grep -aq '"netc.world":"2"' "$work/two.safetensors" && ok || bad "--nproc 2: the checkpoint does not say world 2"
# every logged step has both ranks' own step rates and names the slower
[ "$(grep -cE '"rank_step_images_per_s": \[[0-9.]+, [0-9.]+\], "slowest_rank": [01]' "$work/two.jsonl")" = 8 ] && ok ||
  bad "--nproc 2: the log lacks the ranks' step rates: $(head -1 "$work/two.jsonl")"

# --- the launcher's environment, by hand: two ranks, the same run -------------
port=$((20000 + RANDOM % 20000))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "$netrun" train "$m" "${run[@]}" \
    --steps 4 >"$work/env$r.txt" 2>&1 &
done
wait %1; rc0=$?
wait %2; rc1=$?
[ $rc0 = 0 ] && [ $rc1 = 0 ] && ok || bad "RANK/WORLD_SIZE: exits $rc0 $rc1: $(tail -2 "$work/env0.txt" "$work/env1.txt")"
grep -q "on each of 2 ranks" "$work/env0.txt" && [ ! -s "$work/env1.txt" ] && ok ||
  bad "RANK/WORLD_SIZE: rank 0 should speak, rank 1 be quiet: $(cat "$work/env1.txt")"

# WORLD_SIZE=1 (torchrun with one process) is a plain run: nothing to meet, no port needed
expect 0 "netrun: 2 steps" env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 "$netrun" train "$m" "${run[@]}" --steps 2

# --- ranks that disagree: other weights (seeds) -------------------------------
port=$((20000 + RANDOM % 20000))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 MASTER_PORT=$port timeout 120 "$netrun" train "$m" "${run[@]}" --steps 4 --seed $((r + 1)) \
    >"$work/seed$r.txt" 2>&1 &
done
wait %1; rc0=$?
wait %2; rc1=$?
[ $rc0 = 1 ] && [ $rc1 = 1 ] && grep -q "start from different weights" "$work/seed0.txt" "$work/seed1.txt" && ok ||
  bad "other seeds: exits $rc0 $rc1: $(cat "$work/seed0.txt" "$work/seed1.txt")"

# --- Ctrl-C: every rank stops after the same step, rank 0 saves ----------------
rm -f "$work/int.jsonl"
setsid "$netrun" train "$m" "${run[@]}" --steps 100000 --train-images 6400 --nproc 2 --log "$work/int.jsonl" \
  --checkpoint "$work/int.safetensors" >"$work/int.txt" 2>&1 &
pid=$!
for i in $(seq 1 300); do
  n=$(grep -c '"step"' "$work/int.jsonl" 2>/dev/null)
  [ "${n:-0}" -ge 20 ] && break
  sleep 0.1
done
kill -INT -- -"$pid" # the terminal's Ctrl-C: the whole process group
wait $pid
rc=$?
[ $rc = 130 ] && grep -qE "^netrun: interrupted \(SIGINT\) after step [0-9]+; checkpoint" "$work/int.txt" && ok ||
  bad "Ctrl-C: exit $rc: $(tail -4 "$work/int.txt")"
at=$(grep -oE 'after step [0-9]+' "$work/int.txt" | grep -oE '[0-9]+$')
grep -aq "\"netc.step\":\"${at:-x}\"" "$work/int.safetensors" && ok || bad "Ctrl-C: the checkpoint is not step $at"
# and the printed command resumes it on the same two ranks
resume=$(grep -E '^netrun: resume with: netrun train ' "$work/int.txt" | sed 's/^netrun: resume with: netrun //')
grep -q -- "--nproc 2" <<<"$resume" && ok || bad "Ctrl-C: the resume command lost --nproc: $resume"

# --- bench on 2 ranks: each times the step with the all-reduce, and says which it is --
out=$(timeout 120 "$netrun" bench "$m" --device cpu --precision fp32 --batch 16 --steps 5 --nproc 2 2>&1)
rc=$?
[ $rc = 0 ] && grep -q "rank 0 of 2: bench" <<<"$out" && grep -q "rank 1 of 2: bench" <<<"$out" && ok ||
  bad "bench --nproc 2: exit $rc: $out"

# --- usage ------------------------------------------------------------------------
expect 2 "--gpus runs one process per GPU" "$netrun" train "$m" "${run[@]}" --gpus 2
expect 1 "--gpus 2: .*the driver sees 0 GPUs" "$netrun" train "$m" --synthetic --gpus 2
expect 2 "--nproc must be" "$netrun" train "$m" "${run[@]}" --nproc 0
expect 2 "give --gpus or --nproc once" "$netrun" train "$m" "${run[@]}" --nproc 2 --gpus 2
expect 2 "inside a rank of a run already" env WORLD_SIZE=2 "$netrun" train "$m" "${run[@]}" --nproc 2
expect 2 "step does not take|unrecognized|unknown" "$netrun" step "$m" --nproc 2
# one process is no data-parallel run: it trains as usual
expect 0 "netrun: 2 steps" "$netrun" train "$m" "${run[@]}" --steps 2 --nproc 1

echo "check_launch: $pass passed, $fail failed"
[ "$fail" = 0 ]
