#!/usr/bin/env bash
# run_fuzz_model.sh FUZZER SECONDS NETC SOURCE_DIR WORK_DIR: a bounded
# libFuzzer run of the model.so loader, seeded with the blob of smallcnn's
# model.so as netc writes it (found through its seal: cg_model.h).
set -euo pipefail
fuzzer=$1 seconds=$2 netc=$3 src=$4 work=$5
rm -rf "$work/model_corpus" "$work/model_seeds" && mkdir -p "$work/model_corpus" "$work/model_seeds"
"$netc" "$src/models/smallcnn.net" -o "$work/model_seeds.so"
read -r off len < <(tail -c 64 "$work/model_seeds.so" | od -A n -t u8 -j 8 -N 16)
tail -c +$((off + 1)) "$work/model_seeds.so" | head -c "$len" >"$work/model_seeds/smallcnn.blob"
rm -f "$work/model_seeds.so"
cd "$work"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=$((len + 4096)) \
  -print_final_stats=1 "$work/model_corpus" "$work/model_seeds"
