#!/usr/bin/env bash
# check_runs.sh NETRUN SOURCE_DIR WORKDIR: runs that keep their state (issue 22,
# deliverable 6): train --weights starts from them, SIGINT and SIGTERM end a
# run with a resumable checkpoint, a whole log and the resume command, plot
# skips a torn last line, bench refuses the CPU unless asked, and a CPU plan
# larger than the machine is refused up front.  CPU only, a few seconds.
set -uo pipefail
netrun=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../../expect.sh"
export NETC_CUDA_DRIVER=/nonexistent/libcuda-netc-test.so.1 # no GPU, as in CI
export LSAN_OPTIONS=suppressions=$src/tests/cli/plot/lsan.supp   # cairo's font cache (a sanitizer build)
m=$src/models/smallcnn.net
run=(--device cpu --synthetic --batch 16 --train-images 320 --test-images 32)
step1_loss() { grep -m1 '"step": 1,' "$1" | grep -oE '"loss": [0-9.e+-]+' | grep -oE '[0-9.e+-]+$'; }

# --- train --weights: the run starts from them ------------------------------
expect 0 "test accuracy" "$netrun" train "$m" "${run[@]}" --steps 60 --checkpoint "$work/trained.safetensors" \
  --log "$work/fresh.jsonl"
expect 0 "test accuracy" "$netrun" train "$m" "${run[@]}" --steps 2 --weights "$work/trained.safetensors" \
  --log "$work/tuned.jsonl"
fresh=$(step1_loss "$work/fresh.jsonl") tuned=$(step1_loss "$work/tuned.jsonl")
# a fresh smallcnn starts near ln 10 = 2.3; from 60 trained steps far below
if [ -n "$fresh" ] && [ -n "$tuned" ] && awk "BEGIN{exit !($tuned < 0.7 * $fresh)}"; then ok; else
  bad "train --weights: step 1 loss $tuned, not well below a fresh run's $fresh"
fi
expect 2 "give --weights .* or --resume .*, not both" "$netrun" train "$m" "${run[@]}" --steps 2 \
  --weights "$work/trained.safetensors" --resume "$work/trained.safetensors"
expect 1 "missing.safetensors" "$netrun" train "$m" "${run[@]}" --steps 2 --weights "$work/missing.safetensors"
# every option does something: --test-images with --synthetic is the size of its test set
expect 0 "test accuracy .* on 48 images" "$netrun" train "$m" "${run[@]}" --steps 1 --test-images 48
expect 2 "export does not take '--precision'" "$netrun" export "$m" --weights "$work/trained.safetensors" \
  --out "$work/x.safetensors" --precision fp32

# --- SIGINT: the step in flight ends, the checkpoint, the log, the command -----
# interrupt SIG LINES OUT ARGS...: netrun ARGS... in the background in $work, sent SIG once
# run.jsonl has LINES step lines (waiting at most 30 s)
interrupt() {
  local sig=$1 lines=$2 out=$3
  shift 3
  (cd "$work" && exec "$netrun" "$@") >"$out" 2>&1 &
  local pid=$! i n
  for i in $(seq 1 300); do
    n=$(grep -c '"step"' "$work/run.jsonl" 2>/dev/null)
    [ "${n:-0}" -ge "$lines" ] && break
    sleep 0.1
  done
  kill -"$sig" $pid
  wait $pid
}
interrupt INT 25 "$work/int.txt" train "$m" "${run[@]}" --steps 100000 --log run.jsonl --checkpoint ck.safetensors
rc=$?
[ $rc = 130 ] && ok || bad "SIGINT: exit $rc, want 130: $(tail -3 "$work/int.txt")"
grep -qE "^netrun: interrupted \(SIGINT\) after step [0-9]+; checkpoint ck.safetensors$" "$work/int.txt" && ok ||
  bad "SIGINT: no interruption line: $(tail -3 "$work/int.txt")"
resume=$(grep -E '^netrun: resume with: netrun train ' "$work/int.txt" | sed 's/^netrun: resume with: netrun //')
[ -n "$resume" ] && grep -q -- "--resume ck.safetensors$" <<<"$resume" && ok || bad "SIGINT: no resume command"
at=$(grep -oE 'after step [0-9]+' "$work/int.txt" | grep -oE '[0-9]+$')
# a whole log: every line JSON, the last one the run's, its steps those of the checkpoint
python3 - "$work/run.jsonl" "${at:-0}" <<'PY' && ok || bad "SIGINT: the log is not whole"
import json, sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "", "no newline at the end"
recs = [json.loads(l) for l in lines[:-1]]
assert recs[-1]["run"] == "interrupted" and recs[-1]["steps"] == int(sys.argv[2]), recs[-1]
steps = [r["step"] for r in recs if "step" in r]
assert steps == list(range(1, int(sys.argv[2]) + 1)), steps[-3:]
PY
# the printed command resumes: the log goes on from the next step, 1, 2, ... with no gap
read -r -a words <<<"$resume"
interrupt INT $((${at:-0} + 10)) "$work/resumed.txt" "${words[@]}"
rc=$?
[ $rc = 130 ] && grep -q "^netrun: interrupted (SIGINT)" "$work/resumed.txt" && ok ||
  bad "resume: exit $rc: $(tail -3 "$work/resumed.txt")"
python3 - "$work/run.jsonl" "${at:-0}" <<'PY' && ok || bad "resume: the log does not go on from step $at"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["step"] for r in recs if "step" in r]
assert len(steps) > int(sys.argv[2]) + 5 and steps == list(range(1, len(steps) + 1)), steps[-3:]
PY
# SIGTERM without --checkpoint: MODEL-interrupted.ckpt.safetensors in the current directory, never replaced
rm -f "$work/run.jsonl"
interrupt TERM 25 "$work/term.txt" train "$m" "${run[@]}" --steps 100000 --log run.jsonl
rc=$?
[ $rc = 143 ] && [ -f "$work/smallcnn-interrupted.ckpt.safetensors" ] && ok ||
  bad "SIGTERM: exit $rc (want 143) or no smallcnn-interrupted.ckpt.safetensors: $(tail -3 "$work/term.txt")"
rm -f "$work/run.jsonl"
interrupt TERM 25 "$work/term2.txt" train "$m" "${run[@]}" --steps 100000 --log run.jsonl
grep -q "checkpoint smallcnn-interrupted-2.ckpt.safetensors$" "$work/term2.txt" && ok ||
  bad "SIGTERM again: not smallcnn-interrupted-2: $(tail -3 "$work/term2.txt")"
# --- plot: a torn last line is skipped with a warning; elsewhere it is an error --
if "$netrun" plot "$work/fresh.jsonl" "$work/fresh.png" >/dev/null 2>&1; then
  { cat "$work/fresh.jsonl"; printf '{"step": 61, "epo'; } >"$work/torn.jsonl"
  expect 0 "warning: .*torn.jsonl:[0-9]+: the last line is torn" "$netrun" plot "$work/torn.jsonl" "$work/torn.png"
  [ -s "$work/torn.png" ] && ok || bad "plot of a torn log drew nothing"
  { printf '{"step": 1, "epo\n'; cat "$work/fresh.jsonl"; } >"$work/torn_mid.jsonl"
  expect 1 "torn_mid.jsonl:1: not a JSON object" "$netrun" plot "$work/torn_mid.jsonl" "$work/x.png"
else
  echo "skipped: plot (no cairo)"
fi

# --- no silent CPU: bench without a GPU, a plan larger than the machine -------
expect 1 "bench: no GPU .*give --device cpu" "$netrun" bench "$m" --batch 8 --steps 2
expect 0 "on the CPU.*images/s" "$netrun" bench "$m" --batch 8 --steps 2 --device cpu
expect 1 "the CPU plan needs [0-9.]+ GiB, more than this machine's" "$netrun" bench "$src/models/resnet20.net" \
  --device cpu --batch 1048576
expect 1 "the CPU plan needs [0-9.]+ GiB, more than this machine's" "$netrun" train "$src/models/resnet20.net" \
  --device cpu --synthetic --batch 1048576
# every update skipped by dynamic loss scaling: an error, not a success; some skipped: a warning
sed 's/dynamic(init=1024, growth_interval=100)/dynamic(init=1e30, growth_interval=100)/' "$src/models/smallcnn.net" \
  >"$work/huge_scale.net"
expect 1 "error: .*every one of the 3 steps skipped its update: the gradients were not finite at any loss scale from \
1e\+30 down to 1.25e\+29" "$netrun" train "$work/huge_scale.net" --device cpu --synthetic --batch 8 --steps 3 \
  --train-images 64
sed 's/dynamic(init=1024, growth_interval=100)/dynamic(init=1e6, growth_interval=100)/' "$src/models/smallcnn.net" \
  >"$work/high_scale.net"
expect 0 "warning: [0-9]+ steps skipped their update" "$netrun" train "$work/high_scale.net" --device cpu --synthetic \
  --batch 8 --steps 20 --train-images 64
# synthetic images of a 1000-class model carry every class, not a byte's worth (a 16-bit label each): 2048 images
# draw about 870 distinct ones; the checkpoint names how many the run trained on
"$netrun" train "$src/models/resnet18.net" --device cpu --synthetic --batch 4 --steps 1 --image-size 32 \
  --train-images 2048 --precision fp32 --checkpoint "$work/syn1000.safetensors" >"$work/syn1000.log" 2>&1
classes=$(grep -ao "synthetic, 2048 training images in [0-9]* classes" "$work/syn1000.safetensors" | grep -o "[0-9]* classes")
if [ "${classes% classes}" -gt 800 ] 2>/dev/null; then ok; else bad "synthetic labels of 1000 classes: ${classes:-none}"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
