#!/usr/bin/env bash
# bench/flags_bench.sh NETRUN DIR [BATCH]: what each optimization is worth.
# ResNet-50's training step time with the optimizations on, then with each
# one turned off by its own flag, on a machine with a GPU.
#
# DIR holds model.so files made beforehand by netc (no GPU needed; the
# GPU machine needs neither flex nor bison), all at batch BATCH (default 256):
#   resnet50.so         netc models/resnet50.net --batch=B -o DIR/resnet50.so
#   resnet50_nofuse.so  the same with -fno-fuse
#   resnet50_noprologue.so  the same with -fno-prologue
#   resnet50_nooverlap.so   the same with -fno-overlap
#   resnet50_f16stem.so the same from a copy of models/resnet50.net whose first
#                       convolution says precision=f16 (what the design's FP32
#                       first convolution costs)
#   resnet50_fp32.so    the same with --precision=fp32
#   resnet50_nopbb.so   netc run with NETC_PBB=0 (the stem's batch-norm
#                       backward gathering its gradient pixel by pixel)
#   resnet50_nopooltile.so  netc run with NETC_POOL_TILE=0
#   resnet50_linearcu.so    netc run with NETC_LINEAR_CUDNN=0 (linear.cu)
# A missing file leaves its row out.  Each row is one `netrun bench`
# (3 warm-up steps, STEPS timed, default 30); the table comes last, with
# the step time and the change against the first row.  Logs go to $OUT
# when set.
set -uo pipefail
cd "$(dirname "$0")/.."
netrun=${1:?usage: bench/flags_bench.sh NETRUN DIR [BATCH]}
dir=${2:?usage: bench/flags_bench.sh NETRUN DIR [BATCH]}
batch=${3:-256}
steps=${STEPS:-30}
out=${OUT:-$(mktemp -d)}

# label | environment (VAR=value, or -) | netrun option (or -) | model file
rows=(
  "all on|-|-|resnet50.so"
  "no CUDA graph (NETC_CUDA_GRAPH=0)|NETC_CUDA_GRAPH=0|-|resnet50.so"
  "no conv+statistics fusion (NETC_GENSTATS=0)|NETC_GENSTATS=0|-|resnet50.so"
  "prologue by a kernel, not cuDNN (NETC_PROLOGUE=0)|NETC_PROLOGUE=0|-|resnet50.so"
  "prologue fused everywhere, not timed (NETC_FUSION_PICK=0)|NETC_FUSION_PICK=0|-|resnet50.so"
  "no prologue pass (netc -fno-prologue)|-|-|resnet50_noprologue.so"
  "no overlap pass (netc -fno-overlap)|-|-|resnet50_nooverlap.so"
  "epilogues by a kernel, not cuDNN (NETC_EPILOGUE=0)|NETC_EPILOGUE=0|-|resnet50.so"
  "batch-norm backward by kernels, not with the data gradient (NETC_DBN=0)|NETC_DBN=0|-|resnet50.so"
  "stem convolution not folded (NETC_S2D=0)|NETC_S2D=0|-|resnet50.so"
  "weight gradients on the main stream (NETC_BRANCHES=0)|NETC_BRANCHES=0|-|resnet50.so"
  "optimizer per tensor (NETC_MULTI_TENSOR=0)|NETC_MULTI_TENSOR=0|-|resnet50.so"
  "stem backward gathered pixel by pixel (netc with NETC_PBB=0)|-|-|resnet50_nopbb.so"
  "max pool without shared-memory tiles (netc with NETC_POOL_TILE=0)|-|-|resnet50_nopooltile.so"
  "classifier on linear.cu, not cuDNN (netc with NETC_LINEAR_CUDNN=0)|-|-|resnet50_linearcu.so"
  "first convolution in f16, not FP32 (precision=f16 on conv1)|-|-|resnet50_f16stem.so"
  "no fuse pass (netc -fno-fuse)|-|-|resnet50_nofuse.so"
  "no mixed precision (netc --precision=fp32)|-|-|resnet50_fp32.so"
  "cuDNN workspace capped (NETC_CUDNN_WORKSPACE_MB=256)|NETC_CUDNN_WORKSPACE_MB=256|-|resnet50.so"
  "cuDNN engines tuned (netrun --tune)|-|--tune|resnet50.so"
)

table=()
base=
for i in "${!rows[@]}"; do
  IFS='|' read -r label envset opt model <<<"${rows[$i]}"
  [ -f "$dir/$model" ] || { echo "=== $label: $dir/$model missing, skipped"; continue; }
  envv=()
  [ "$envset" != - ] && envv=("$envset")
  optv=()
  [ "$opt" != - ] && optv=("$opt")
  echo "=== $label: ${envv[*]} $netrun bench $dir/$model --device gpu --batch $batch --steps $steps ${optv[*]}"
  env "${envv[@]}" "$netrun" bench "$dir/$model" --device gpu --batch "$batch" --steps "$steps" "${optv[@]}" 2>&1 |
    tee "$out/flags_$i.log"
  ms=$(grep -oE '[0-9.]+ ms/step' "$out/flags_$i.log" | tail -1 | grep -oE '^[0-9.]+')
  gib=$(grep -oE 'peak device memory [0-9.]+' "$out/flags_$i.log" | tail -1 | grep -oE '[0-9.]+$')
  [ -z "$base" ] && [ -n "$ms" ] && base=$ms
  change=-
  [ -n "$ms" ] && [ -n "$base" ] && change=$(awk "BEGIN{printf \"%+.1f%%\", 100 * ($ms - $base) / $base}")
  table+=("$(printf '%-52s %10s %9s %9s' "$label" "${ms:-failed}" "$change" "${gib:--}")")
done

echo
echo "=== ResNet-50 training step, batch $batch, one optimization off per row" \
  "($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null))"
printf '%-52s %10s %9s %9s\n' "configuration" "ms/step" "change" "peak GiB"
printf '%s\n' "${table[@]}"
