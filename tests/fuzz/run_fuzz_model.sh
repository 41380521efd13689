#!/usr/bin/env bash
# run_fuzz_model.sh FUZZER SECONDS NETC SOURCE_DIR WORK_DIR: a bounded
# libFuzzer run of the model.so loader, seeded with the blob of smallcnn's
# model.so as netc writes it (found through its seal: cg_model.h).
set -euo pipefail
fuzzer=$1 seconds=$2 netc=$3 src=$4 work=$5
rm -rf "$work/model_corpus" "$work/model_seeds" && mkdir -p "$work/model_corpus" "$work/model_seeds"
"$netc" "$src/models/smallcnn.net" -o "$work/model_seeds.so"
read -r off len < <(tail -c 64 "$work/model_seeds.so" | od -A n -t u8 -j 8 -N 16)
# dd, not `tail | head`: head exits after len bytes, and tail's SIGPIPE
# failed the whole script under pipefail (silently, now and then)
dd if="$work/model_seeds.so" of="$work/model_seeds/smallcnn.blob" iflag=skip_bytes,count_bytes skip="$off" \
  count="$len" bs=64K status=none
[ "$(stat -c %s "$work/model_seeds/smallcnn.blob")" = "$len" ] || { echo "run_fuzz_model: no $len-byte blob at $off" >&2; exit 1; }
rm -f "$work/model_seeds.so"
cd "$work"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=$((len + 4096)) \
  -print_final_stats=1 "$work/model_corpus" "$work/model_seeds"
