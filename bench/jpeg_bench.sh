#!/usr/bin/env bash
# bench/jpeg_bench.sh: issue 16's benchmark -- ResNet-50 training from JPEG
# files, netc's input pipeline beside PyTorch's, in one call on the GPU machine.
#
#   NETC_BUILD=build/p1 OUT=... bash bench/jpeg_bench.sh
#
# Makes an ImageNet-like ImageFolder (bench/make_jpeg_folder.py: N images of
# ~105 KiB in CLASSES classes plus a VAL split, in a temporary folder removed
# at the end) unless DIR names one, then runs, each logged to $OUT/NAME.log:
#   bench       netrun bench MODEL --batch B          the training step alone, inputs on the device
#   synthetic   netrun train MODEL --synthetic        the training loop, inputs made in memory
#   data        netrun train MODEL --data DIR         JPEG files, netrun's default decoder
#   data_gpu    ... --data DIR --decoder gpu          "n/a" while netrun has no --decoder
#   data_cpu    ... --data DIR --decoder cpu --workers NPROC   (all cores; without --decoder
#               while netrun has none: its only decoder is the CPU's)
#   torch       bench/torch_jpeg.py: ImageFolder + DataLoader (WORKERS processes, pin_memory,
#               persistent workers; RandomResizedCrop(224), flip, ToTensor, Normalize)
#               training torchvision's ResNet-50 with torch.compile, bf16 autocast, channels_last
#   torch_load  the same DataLoader alone (batches copied to the GPU, no model)
# and prints a table: images/s (train runs: epochs 2 and later, so the first
# epoch's compile, graph capture and workers' start stay out), the data wait
# netrun reports, the input pipeline's own rate at the run's end (`input
# cap`: the progress line's `input ... N/s`; with short epochs the loader's
# threads fill their ring during each evaluation and start the next epoch
# ahead, so a run's images/s can exceed what a long epoch sustains -- the
# lesser of this and the step's rate is the steady one), and each rate's
# ratio to `netrun bench` and to PyTorch's DataLoader training.  PyTorch runs with LD_LIBRARY_PATH unset (the GPU
# machine's system cuDNN is older than the one torch's wheel bundles).
#
# Settings (environment): NETC_BUILD (build/release: holds netrun), MODEL
# (models/resnet50.net), BATCH (256), EPOCHS (3; at least 2 for a steady
# rate), BENCH_STEPS (30), N (6400: 25 steps an epoch at 256), CLASSES (100),
# VAL (500), DIR (an existing folder with train/ and val/ or test/: not made,
# not removed), WORKERS (all cores: netrun's --decoder cpu and PyTorch's
# DataLoader), CACHE (netrun's kernel cache; default netrun's own, shared by
# the runs, so only the first pays NVRTC), DEVICE (gpu; cpu for a trial
# here with a small MODEL), TORCH (1; 0 skips PyTorch), TORCH_DEVICE (cuda),
# TORCH_ARCH (the torchvision model PyTorch trains: MODEL's name, resnet50),
# PYTHON (python3), RUN_TIMEOUT (seconds a run may take, 600), ONLY (the
# run names to do, e.g. "bench data torch"; default all).  About 5-7 minutes
# on the H200 with the defaults (the first netrun compiles, torch.compile
# ~1 min, the folder ~20 s on 16 cores).
set -uo pipefail
cd "$(dirname "$0")/.."

die() { echo "jpeg_bench.sh: error: $*" >&2; exit 2; }
case "${1:-}" in -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
[ $# -eq 0 ] || die "takes no arguments (settings are environment variables: see --help)"

build=${NETC_BUILD:-build/release}
netrun=$build/netrun
[ -d "$build" ] || die "NETC_BUILD=$build: no such folder (build netc there, or point NETC_BUILD at its build folder)"
[ -x "$netrun" ] || die "$netrun: not found or not executable (ninja -C $build netrun)"
"$netrun" --version >/dev/null 2>&1 || die "$netrun does not run (LD_LIBRARY_PATH? on the GPU machine: /tmp/lib): $("$netrun" --version 2>&1 | head -1)"
model=${MODEL:-models/resnet50.net}
[ -f "$model" ] || die "MODEL=$model: no such file"
num() { [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] || die "$1=$2 must be an integer >= $3"; }
batch=${BATCH:-256} epochs=${EPOCHS:-3} bench_steps=${BENCH_STEPS:-30} n=${N:-6400} classes=${CLASSES:-100}
val=${VAL:-500} workers=${WORKERS:-$(nproc)} device=${DEVICE:-gpu} run_timeout=${RUN_TIMEOUT:-600}
num BATCH "$batch" 1; num EPOCHS "$epochs" 1; num BENCH_STEPS "$bench_steps" 1; num N "$n" 1
num CLASSES "$classes" 1; num VAL "$val" 1; num WORKERS "$workers" 1; num RUN_TIMEOUT "$run_timeout" 1
[ "$n" -ge "$batch" ] || die "N=$n is less than one batch of $batch"
py=${PYTHON:-python3}
torch=${TORCH:-1} torch_device=${TORCH_DEVICE:-cuda} torch_arch=${TORCH_ARCH:-$(basename "$model" .net)}
only=" ${ONLY:-bench synthetic data data_gpu data_cpu torch torch_load} "
out=${OUT:-$(mktemp -d /tmp/jpeg_bench.XXXXXX)}
mkdir -p "$out" || die "cannot make OUT=$out"
cache_opt=()
[ -n "${CACHE:-}" ] && cache_opt=(--cache "$CACHE")
[ "$epochs" -ge 2 ] || echo "jpeg_bench.sh: warning: EPOCHS=1: the train rates include the first epoch's start-up" >&2

# The data: DIR as given, else made here and removed at the end.
made=
if [ -n "${DIR:-}" ]; then
  dir=$DIR
  [ -d "$dir/train" ] || die "DIR=$dir has no train/ folder"
  [ -d "$dir/val" ] || [ -d "$dir/test" ] || die "DIR=$dir has no val/ or test/ folder (netrun train --data needs one)"
else
  made=$(mktemp -d /tmp/jpeg_folder.XXXXXX) || die "cannot make a temporary folder"
  trap '[ -n "$made" ] && rm -rf "$made"' EXIT
  dir=$made
  echo "=== making $n + $val JPEGs in $classes classes under $dir"
  env -u LD_LIBRARY_PATH "$py" bench/make_jpeg_folder.py "$dir" --n "$n" --classes "$classes" --val "$val" 2>&1 |
    tee "$out/make_jpeg_folder.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || die "bench/make_jpeg_folder.py failed (see above)"
fi
echo "=== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1) ; $(nproc) cores;" \
  "$("$netrun" --version); commit $(git rev-parse --short HEAD 2>/dev/null)"

# Does this netrun take --decoder?  (An unknown option is a usage error
# before --help is looked at; a known one lets --help print and exit 0.)
has_decoder=0
"$netrun" train --decoder cpu --help >/dev/null 2>&1 && has_decoder=1

declare -A rc_of
run() { # NAME CMD...: runs CMD (unless ONLY leaves NAME out), output to the screen and $out/NAME.log
  local name=$1
  shift
  case "$only" in *" $name "*) ;; *) return 0 ;; esac
  echo "=== $name: $*"
  timeout "$run_timeout" "$@" 2>&1 | tee "$out/$name.log"
  rc_of[$name]=${PIPESTATUS[0]}
  [ "${rc_of[$name]}" -eq 0 ] || echo "=== $name: failed (exit ${rc_of[$name]}; log $out/$name.log)"
}

common=(--device "$device" --batch "$batch" "${cache_opt[@]}")
train=("$netrun" train "$model" "${common[@]}" --epochs "$epochs")
run bench "$netrun" bench "$model" "${common[@]}" --steps "$bench_steps"
run synthetic "${train[@]}" --synthetic --train-images "$n" --log "$out/synthetic.jsonl"
run data "${train[@]}" --data "$dir" --log "$out/data.jsonl"
if [ "$has_decoder" = 1 ]; then
  run data_gpu "${train[@]}" --data "$dir" --decoder gpu --log "$out/data_gpu.jsonl"
  run data_cpu "${train[@]}" --data "$dir" --decoder cpu --workers "$workers" --log "$out/data_cpu.jsonl"
else
  echo "=== data_gpu: n/a ($netrun takes no --decoder)"
  run data_cpu "${train[@]}" --data "$dir" --workers "$workers" --log "$out/data_cpu.jsonl"
fi
if [ "$torch" = 1 ]; then
  tj=(env -u LD_LIBRARY_PATH "$py" bench/torch_jpeg.py "$dir" --batch "$batch" --epochs "$epochs"
    --workers "$workers" --device "$torch_device" --arch "$torch_arch")
  run torch "${tj[@]}" --mode train
  run torch_load "${tj[@]}" --mode loader
fi

# --- the table ---------------------------------------------------------------

# netrun train's steady rate: epochs 2.. (all when there is one), from its
# lines "epoch E: S steps, loss L, R images/s, data wait W s"; prints "R W%".
train_rate() {
  [ -f "$out/$1.log" ] && [ "${rc_of[$1]:-1}" -eq 0 ] || return 0
  awk -v B="$batch" -v E="$epochs" '
    /^epoch [0-9]+: [0-9]+ steps, / {
      e = $2 + 0; s = $3; r = $0; sub(/ images\/s.*/, "", r); sub(/.* /, "", r)
      w = $0; sub(/.*data wait /, "", w); sub(/ s.*/, "", w)
      if (E > 1 && e < 2) next
      if (r + 0 > 0) { img += s * B; sec += s * B / r; wait += w }
    }
    END { if (sec > 0) printf "%.0f %.0f%%\n", img / sec, 100 * wait / sec }' "$out/$1.log"
}
input_cap() { # the last progress line's input pipeline rate, images/s
  [ -f "$out/$1.log" ] && [ "${rc_of[$1]:-1}" -eq 0 ] || return 0
  grep -oE '  input [^,]* [0-9]+/s' "$out/$1.log" | tail -1 | grep -oE '[0-9]+/s$' | tr -d '/s'
}
bench_rate() {
  [ -f "$out/bench.log" ] && [ "${rc_of[bench]:-1}" -eq 0 ] || return 0
  grep -oE '[0-9.]+ images/s' "$out/bench.log" | tail -1 | grep -oE '^[0-9.]+' | awk '{printf "%.0f\n", $1}'
}
torch_rate() {
  [ -f "$out/$1.log" ] && [ "${rc_of[$1]:-1}" -eq 0 ] || return 0
  grep -F '"summary": true' "$out/$1.log" | grep -oE '"steady_img_s": [0-9.]+' | grep -oE '[0-9.]+$' |
    awk '{printf "%.0f\n", $1}'
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && [[ "$1" =~ ^[0-9.]+$ ]] && awk "BEGIN{printf \"%.2f\", $1 / $2}" || echo "-"; }

declare -A ips wait label cap
ips[bench]=$(bench_rate)
for r in synthetic data data_gpu data_cpu; do
  read -r ips[$r] wait[$r] <<<"$(train_rate $r)"
  cap[$r]=$(input_cap $r)
done
[ "$has_decoder" = 1 ] || ips[data_gpu]=n/a
ips[torch]=$(torch_rate torch)
ips[torch_load]=$(torch_rate torch_load)
label[bench]="netrun bench (step alone, inputs on the device)"
label[synthetic]="netrun train --synthetic"
label[data]="netrun train --data (default decoder)"
label[data_gpu]="netrun train --data --decoder gpu"
label[data_cpu]="netrun train --data$([ "$has_decoder" = 1 ] && echo " --decoder cpu") --workers $workers"
label[torch]="PyTorch DataLoader + $torch_arch (compile, bf16, cl)"
label[torch_load]="PyTorch DataLoader alone ($workers workers)"

echo
if [ -n "$made" ]; then data="$n JPEGs ($(grep -oE 'mean [0-9.]+ KiB' "$out/make_jpeg_folder.log"))"; else data="DIR=$dir"; fi
echo "=== $(basename "$model" .net) batch $batch, $data, epochs $epochs (rates: epochs $([ "$epochs" -gt 1 ] && echo "2..$epochs" || echo 1))"
printf '%-54s %10s %10s %10s %10s %12s\n' run images/s "data wait" "input cap" "/ bench" "/ torch"
for r in bench synthetic data data_gpu data_cpu torch torch_load; do
  case "$only" in *" $r "*) ;; *) continue ;; esac
  v=${ips[$r]:-}
  [ -z "$v" ] && v=failed
  [ "$r" = data_gpu ] && [ "$has_decoder" = 0 ] && v=n/a
  [ "$r" = torch ] || [ "$r" = torch_load ] && [ "$torch" != 1 ] && v=skipped
  printf '%-54s %10s %10s %10s %10s %12s\n' "${label[$r]}" "$v" "${wait[$r]:--}" "${cap[$r]:--}" \
    "$(ratio "$v" "${ips[bench]:-}")" \
    "$(ratio "$v" "${ips[torch]:-}")"
done
echo "logs: $out"
