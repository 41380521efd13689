#!/usr/bin/env bash
# bench/repeatability.sh: is netc's training step bitwise repeatable?  Runs
# bench/divergence.sh's netc half (ResNet-50's recipe on the synthetic
# images, no PyTorch) RUNS times with the same seed and settings, each
# with the executor switches of SWITCHES, and compares the per-step losses:
# how many steps agree (to the 6 digits the log keeps), and the first that
# does not.
#
#   NETC_BUILD=build/release OUT=... bash bench/repeatability.sh
#
# Issue 16's divergence check found two netc fp32 runs with the same seed
# parting widely.  With SWITCHES="NETC_BRANCHES=0 NETC_CUDNN_DETERMINISTIC=1"
# (the default: no side stream for the weight gradients, only engines cuDNN
# marks deterministic) the step should be deterministic; if those runs still
# differ, something in the step races.  SWITCHES="" repeats the default
# configuration.
#
# Settings (environment): NETC_BUILD, RUNS (2), SWITCHES (above), and
# bench/divergence.sh's MODEL, EPOCHS (2 here), WARMUP, BATCH, N, SEED,
# PRECISION (fp32 here), DEVICE, CACHE.  Logs go to $OUT/runK/.  The last
# lines printed are the comparison.
set -uo pipefail
cd "$(dirname "$0")/.."
die() { echo "repeatability.sh: error: $*" >&2; exit 2; }
case "${1:-}" in -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
[ $# -eq 0 ] || die "takes no arguments (settings are environment variables: see --help)"
runs=${RUNS:-2}
[[ "$runs" =~ ^[0-9]+$ ]] && [ "$runs" -ge 2 ] || die "RUNS=$runs must be an integer >= 2"
switches=${SWITCHES-NETC_BRANCHES=0 NETC_CUDNN_DETERMINISTIC=1}
for s in $switches; do [[ "$s" =~ ^NETC_[A-Z0-9_]+=[^[:space:]]*$ ]] || die "SWITCHES: '$s' is not NETC_NAME=VALUE"; done
out=${OUT:-$(mktemp -d /tmp/repeatability.XXXXXX)}
mkdir -p "$out" || die "cannot make OUT=$out"
for k in $(seq 1 "$runs"); do
  echo "=== run $k of $runs: ${switches:-(default switches)}"
  # shellcheck disable=SC2086 # SWITCHES is a list of assignments
  env $switches EPOCHS="${EPOCHS:-2}" PRECISION="${PRECISION:-fp32}" TORCH_AMPS= OUT="$out/run$k" \
    bash bench/divergence.sh >"$out/run$k.log" 2>&1 || echo "=== run $k failed (log $out/run$k.log)"
done
python3 - "$out" "$runs" <<'EOF'
import json, os, sys
out, runs = sys.argv[1], int(sys.argv[2])
def steps(path):
    d = {}
    if os.path.exists(path):
        for line in open(path):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "step" in r and "loss" in r:
                d[r["step"]] = r["loss"]
    return d
curves = [steps(os.path.join(out, f"run{k}", "netc.jsonl")) for k in range(1, runs + 1)]
base = curves[0]
print(f"\n=== repeatability: {runs} runs, {len(base)} steps in run 1")
for k, c in enumerate(curves[1:], 2):
    common = sorted(t for t in base if t in c)
    same = sum(1 for t in common if base[t] == c[t])
    first = next((t for t in common if base[t] != c[t]), None)
    worst = max((abs(base[t] - c[t]) for t in common), default=0.0)
    print(f"run {k} against run 1: {same} of {len(common)} steps equal"
          + (f", first difference at step {first} ({base[first]!r} vs {c[first]!r})" if first else "")
          + f", largest difference {worst:.4g}")
EOF
echo "logs: $out"
