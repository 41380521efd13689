#!/usr/bin/env bash
# run_fuzz.sh FUZZER SECONDS SOURCE_DIR WORK_DIR [SEED_MAKER]: a bounded
# libFuzzer run seeded with every model and every golden error case, or,
# with SEED_MAKER, with what `SEED_MAKER DIR` writes (onnx_make's models).
set -euo pipefail
fuzzer=$1 seconds=$2 src=$3 work=$4 maker=${5:-}
rm -rf "$work/corpus" "$work/seeds" && mkdir -p "$work/corpus" "$work/seeds"
if [ -n "$maker" ]; then
  "$maker" "$work/seeds"
else
  cp "$src"/models/*.net "$work/seeds/"
  find "$src/tests" -name '*.net' -exec cp {} "$work/seeds/" \;
fi
cd "$work"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
  -print_final_stats=1 "$work/corpus" "$work/seeds"
