#!/usr/bin/env bash
# check_bad.sh NETC MODELS SRCDIR WORKDIR: broken ONNX models (onnx_make.c's
# bad_*.onnx, a truncated and a non-protobuf file), wrong --train uses and
# models --emit-net cannot write are each refused: exit status 1 (2 for usage errors), no crash, and each
# expected message on stderr.  For bad_ops.onnx every problem is listed.
set -uo pipefail
netc=$1 models=$2 src=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
head -c 1500 "$models/small.onnx" >"$work/truncated.onnx"
printf 'network x {}\n' >"$work/text.onnx"
printf 'network x { input a : f32[1] }\ntrain { batch = 1 }\n' >"$work/net.train"
printf 'train { batch = 8 }\n' >"$work/nobatch.train"
status=0
# expect NAME STATUS PATTERN... -- NETC ARGS...
expect() {
  local name=$1 want=$2
  shift 2
  local pats=()
  while [ "$1" != "--" ]; do pats+=("$1"); shift; done
  shift
  "$netc" "$@" >"$work/$name.out" 2>"$work/$name.err"
  local got=$?
  local ok=1
  [ "$got" = "$want" ] || { echo "$name: exit status $got, want $want"; ok=0; }
  for p in "${pats[@]}"; do
    grep -qE -- "$p" "$work/$name.err" || { echo "$name: no message matching '$p'"; ok=0; }
  done
  if grep -qE 'Sanitizer|Segmentation|Aborted' "$work/$name.err"; then echo "$name: crashed"; ok=0; fi
  if [ $ok = 1 ]; then
    echo "$name: refused ($(head -n 1 "$work/$name.err"))"
  else
    sed 's/^/  | /' "$work/$name.err"
    status=1
  fi
}
expect truncated 1 "truncated\.onnx: error: not an ONNX model: the protobuf does not parse" -- "$work/truncated.onnx"
expect text 1 "text\.onnx: error: not an ONNX model" -- "$work/text.onnx"
expect cycle 1 "node 4 '/conv2/Conv' \(Conv\): reads '/res/Add_output_0', which node 6 makes later: the graph has a cycle" \
  -- "$models/bad_cycle.onnx"
expect missing_init 1 "node 4 '/conv2/Conv' \(Conv\): input 'conv2.weight_missing' is not .* initializer" \
  -- "$models/bad_missing_init.onnx"
expect shapes 1 "node 5 '/bn2/BatchNormalization' \(BatchNormalization\): initializer 'bn2.running_mean' has shape \[8\]; this node needs \[16\]" \
  -- "$models/bad_shapes.onnx"
expect ops 1 "node 2 '/relu1/Relu' \(LeakyRelu\): op LeakyRelu is not supported" \
  "node 3 '/pool1/MaxPool' \(MaxPool\): auto_pad=SAME_UPPER is not supported" \
  "node 4 '/conv2/Conv' \(Conv\): attribute 'foo' is not supported" \
  "node 7 '/res/Relu' \(Softmax\): op Softmax is not supported" -- "$models/bad_ops.onnx"
n=$(grep -c 'error:' "$work/ops.err")
[ "$n" = 4 ] || { echo "ops: $n errors, want the 4 listed at once"; status=1; }
expect data 1 "node 0 '/conv1/Conv' \(Conv\): initializer 'conv1.weight' holds 10 values; its shape \[16,1,3,3\] needs 144" \
  -- "$models/bad_data.onnx"
expect opset 1 "bad_opset\.onnx: error: opset 99: netc knows ai.onnx opsets" -- "$models/bad_opset.onnx"
expect reshape 1 "node 19 '/Reshape' \(Reshape\): reshape of f32\[N,32,1,1\] NCHW to \[N,7\]" -- "$models/bad_reshape.onnx"
# initializers kept in a data file beside the model (external data), broken three ways
expect external_short 1 "node 13 '/fc/Gemm' \(Gemm\): initializer 'fc.bias' keeps its values at bytes [0-9]+\.\.[0-9]+ of 'bad_external_short\.onnx\.data', which holds [0-9]+ bytes \(truncated\?\)" \
  -- "$models/bad_external_short.onnx"
expect external_outside 1 "initializer 'conv1.weight' keeps its values in '\.\./bad_external_outside\.onnx\.data', outside the model's folder" \
  -- "$models/bad_external_outside.onnx"
# its data file a FIFO with no writer (no hang) or a directory
mkdir -p "$work/fifo" "$work/dir/small_x.onnx.data"
cp "$models/small_x.onnx" "$work/fifo/" && cp "$models/small_x.onnx" "$work/dir/" && mkfifo "$work/fifo/small_x.onnx.data"
expect external_fifo 1 "keeps its values in '.*/fifo/small_x\.onnx\.data' \(external data\), which cannot be opened: not a regular file" \
  -- "$work/fifo/small_x.onnx"
expect external_dir 1 "keeps its values in '.*/dir/small_x\.onnx\.data' \(external data\), which cannot be opened: not a regular file" \
  -- "$work/dir/small_x.onnx"
expect external_missing 1 "initializer 'conv1.weight' keeps its values in '.*/bad_external_missing\.onnx\.data' \(external data\), which cannot be opened: No such file" \
  -- "$models/bad_external_missing.onnx"
expect train_for_net 2 "--train is for .onnx models" -- --train="$src/small.train" "$src/small.net"
expect train_with_network 1 "holds a network or blocks; a --train file holds only a train section" \
  -- --train="$work/net.train" "$models/small.onnx"
expect train_incomplete 1 "the train section needs 'optimizer'" -- --train="$work/nobatch.train" "$models/small.onnx"
expect train_missing 1 "cannot open '$work/none.train'" -- --train="$work/none.train" "$models/small.onnx"
# an eval-mode or dynamo export (batch norms folded) compiles, with a
# warning, its onnx::Conv_N weights renamed onnx__Conv_N
out=$("$netc" --no-loc --print-after=parse "$models/folded.onnx" 2>/dev/null) || { echo "folded: netc failed"; status=1; }
for f in folded folded_dynamo; do
  "$netc" --summary "$models/$f.onnx" >/dev/null 2>"$work/$f.err" || { echo "$f: netc failed"; cat "$work/$f.err"; status=1; }
  grep -q "warning: 1 convolution has weights named onnx::Conv_\* or biases named WEIGHT_bias, and the graph has no BatchNormalization: the model looks exported with its batch norms folded" "$work/$f.err" ||
    { echo "$f: no warning"; cat "$work/$f.err"; status=1; }
done
grep -q "param @onnx__Conv_5 : f32\[8,3,3,3\]" <<<"$out" || { echo "folded: no param onnx__Conv_5"; status=1; }
# --emit-net refuses what the language cannot express, naming the node,
# and writes nothing: an eval-mode export's weights, MatMul's fc.weight_t
expect emit_folded 1 "folded\.onnx: error: node 0 'conv1' \(conv2d\): cannot be written as a \.net file: its parameter 'onnx__Conv_5' would be named 'conv1\.weight'.*eval-mode export" \
  -- --emit-net="$work/folded.net" "$models/folded.onnx"
expect emit_folded_dynamo 1 "folded_dynamo\.onnx: error: node 0 'conv1' \(conv2d\): cannot be written as a \.net file: its parameter 'conv1\.weight_bias' would be named 'conv1\.bias'.*the dynamo exporter folded in" \
  -- --emit-net="$work/folded_dynamo.net" "$models/folded_dynamo.onnx"
expect emit_matmul 1 "node 21 'fc' \(linear\): cannot be written as a \.net file: its parameter 'fc\.weight_t' would be named 'fc\.weight'" \
  -- --emit-net="$work/matmul.net" "$models/small_reshape.onnx"
for f in folded folded_dynamo matmul; do [ ! -e "$work/$f.net" ] || { echo "emit_$f: $work/$f.net written"; status=1; }; done
cp "$src/small.net" "$work/self.net"
expect emit_self 2 "is the same file as the input" -- --emit-net="$work/self.net" "$work/self.net"
cmp -s "$src/small.net" "$work/self.net" || { echo "emit_self: the input was overwritten"; status=1; }
# the default train section compiles
"$netc" --summary "$models/small.onnx" >"$work/default.out" 2>&1 || { echo "default train section: netc failed"; cat "$work/default.out"; status=1; }
exit $status
