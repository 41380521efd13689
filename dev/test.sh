#!/usr/bin/env bash
# dev/test.sh: the whole test suite, from a fresh clone.
#   1. install missing packages: the main job's (dev/setup.sh) and the
#      tests' (dev/setup_tests.sh)
#   2. Release build with -Werror, every ctest
#   3. AddressSanitizer + UndefinedBehaviorSanitizer build, every ctest
#   4. clang libFuzzer build of the front ends (.net, ONNX), the model.so
#      loader and the safetensors reader, a bounded fuzz run of each
# Tests that need a GPU report themselves skipped on machines without one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash dev/setup.sh
bash dev/setup_tests.sh
. dev/lib.sh
gpu_env # the wheels' NVRTC and cuDNN, when dev/setup.sh fetched them

jobs=$(nproc)
run_suite() { # name build-dir ctest-filter cmake-args...
  local name=$1 dir=$2 filter=$3
  shift 3
  echo "=== $name ==="
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  # TARGET: the targets to build, space-separated (default all)
  # shellcheck disable=SC2086
  cmake --build "$dir" -j "$jobs" --target ${TARGET:-all}
  (cd "$dir" && ctest --output-on-failure -j "$jobs" -R "$filter") || rerun_tracer_crashes "$dir"
}

# LeakSanitizer's exit-time check runs in a tracer thread that stops the
# process; that tracer itself sometimes dies with SIGSEGV ("Tracer caught
# signal 11", then "LeakSanitizer has encountered a fatal error") after the
# test has passed. That crash is the sanitizer's, not a result: tests whose
# only failure is that crash run once more; any other failure fails at once.
rerun_tracer_crashes() { # build-dir
  local dir=$1 log=$1/Testing/Temporary/LastTest.log failed=$1/Testing/Temporary/LastTestsFailed.log
  [ -f "$failed" ] && [ -f "$log" ] || return 1
  local crashed
  crashed=$(python3 - "$log" "$failed" <<'PY'
import re, sys
log, failed = open(sys.argv[1], errors="replace").read(), open(sys.argv[2]).read().split()
names = [f.split(":", 1)[1] for f in failed]
# LastTest.log holds one block per test: 'N/M Testing: NAME' ... '"NAME" end time'
for name in names:
    m = re.search(r"Testing: %s\n(.*?)\"%s\" end time" % (re.escape(name), re.escape(name)), log, re.S)
    if not m or "LeakSanitizer has encountered a fatal error" not in m.group(1):
        sys.exit(1)
print(" ".join(names))
PY
  ) || return 1
  banner "LeakSanitizer's tracer crashed at exit in: $crashed" "running those tests once more"
  (cd "$dir" && ctest --output-on-failure --rerun-failed)
}

run_suite "release build" build/release . -DCMAKE_BUILD_TYPE=Release -DNETC_WERROR=ON
# One BLAS thread under the sanitizers: LeakSanitizer's exit-time check stops
# every thread of the process, and OpenBLAS's idle workers have made that
# check itself crash (rarely) on 2-core machines; ctest runs tests in parallel.
OPENBLAS_NUM_THREADS=1 run_suite "asan+ubsan build" build/asan . -DCMAKE_BUILD_TYPE=Debug -DNETC_WERROR=ON -DNETC_SANITIZE=ON
CC=clang TARGET="fuzz_frontend fuzz_model fuzz_safetensors fuzz_st_seed fuzz_onnx onnx_make netc" run_suite "fuzz build" build/fuzz "^fuzz_" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNETC_FUZZ=ON \
  -DNETC_FUZZ_SECONDS="${NETC_FUZZ_SECONDS:-60}" -DBUILD_TESTING=ON
echo "all suites passed"
