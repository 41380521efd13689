#!/usr/bin/env bash
# check_cli.sh NETC SOURCE_DIR WORKDIR: exit codes and messages of the CLI.
set -uo pipefail
netc=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
EXPECT_TIMEOUT=20
. "$(dirname "$0")/../expect.sh"
expect 0 "usage: netc" "$netc" --help
expect 0 "^netc [0-9]+\.[0-9]+" "$netc" --version
expect 2 "no input file" "$netc"
expect 2 "unknown option '--bogus'" "$netc" --bogus "$src/models/mlp.net"
expect 2 "more than one input" "$netc" "$src/models/mlp.net" "$src/models/mlp.net"
expect 2 "unknown pass 'nope'" "$netc" --print-after=nope "$src/models/mlp.net"
expect 2 "unknown flag '-fno-nope'" "$netc" -fno-nope "$src/models/mlp.net"
expect 2 "needs a value" "$netc" "$src/models/mlp.net" --dump-ir
expect 2 "--emit-net-plain needs a value, but what follows it is the option '--emit-net=$work/x.net'" "$netc" "$src/models/mlp.net" --emit-net-plain --emit-net="$work/x.net"
expect 2 "-o needs a value, but what follows it is the option '--summary'" "$netc" "$src/models/mlp.net" -o --summary
expect 1 "cannot open '$work/missing.net': No such file" "$netc" "$work/missing.net"
expect 1 "'$work': not a regular file \(a directory\)" "$netc" "$work"
# only regular files are read, a FIFO with no writer without blocking; no output overwrites the input
mkfifo "$work/fifo.net"
expect 1 "'$work/fifo.net': not a regular file \(a FIFO\)" "$netc" "$work/fifo.net"
expect 1 "'/dev/zero': not a regular file \(a character device\)" "$netc" /dev/zero
cp "$src/models/mlp.net" "$work/self.net"
sum=$(cksum <"$work/self.net")
expect 2 "self.net: is the same file as the input .*self.net \(refusing to overwrite it\)" "$netc" "$work/self.net" \
  -o "$work/self.net"
mkdir -p "$work/cu" && cp "$src/models/mlp.net" "$work/cu/train.cu"
expect 2 "train.cu: is the same file as the input" "$netc" "$work/cu/train.cu" --emit-cuda="$work/cu"
mkdir -p "$work/ir" && cp "$src/models/mlp.net" "$work/ir/01-dce.ir"
expect 2 "01-dce.ir: is the same file as the input" "$netc" "$work/ir/01-dce.ir" --dump-ir="$work/ir"
if [ "$sum" = "$(cksum <"$work/self.net")" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: -o overwrote the input"; fi
expect 0 "^graph mlp" "$netc" --print-after=parse "$src/models/mlp.net"
expect 0 "^params: 101770$" "$netc" --summary "$src/models/mlp.net"
expect 0 "" "$netc" -fno-dce --dump-ir="$work/dumps" "$src/models/mlp.net"
[ -f "$work/dumps/00-parse.ir" ] && [ ! -f "$work/dumps/01-dce.ir" ] || { echo "FAIL: -fno-dce still dumped dce"; fail=$((fail + 1)); }
expect 1 "cannot create dump directory" "$netc" --dump-ir=/proc/nonexistent/dir "$src/models/mlp.net"
expect 0 "" "$netc" --dump-ir="$work/a/b/dumps" "$src/models/mlp.net"
[ -f "$work/a/b/dumps/00-parse.ir" ] || { echo "FAIL: --dump-ir did not create its parents"; fail=$((fail + 1)); }
expect 1 "cannot create dump directory '$work/dumps/00-parse.ir': Not a directory" \
  "$netc" --dump-ir="$work/dumps/00-parse.ir/x" "$src/models/mlp.net"
# --emit-cuda makes its folder with the parents (code generation needs no
# CUDA toolkit, so every build has it).
expect 0 "" "$netc" --emit-cuda="$work/c/d/cuda" "$src/models/mlp.net"
[ -s "$work/c/d/cuda/train.cu" ] && [ -s "$work/c/d/cuda/infer.cu" ] ||
  { echo "FAIL: --emit-cuda did not write $work/c/d/cuda/{train,infer}.cu"; fail=$((fail + 1)); }
# a code switch with a bad value is refused, naming the variable (compiler/opts.c)
expect 1 "NETC_S2D=maybe: expected one of 0|1|all" env NETC_S2D=maybe "$netc" --emit-cuda="$work/e" "$src/models/mlp.net"
# A run that writes nothing says what it compiled, on stderr, and exits 0.
said="^netc: $src/models/mlp.net: compiled the %s graph \\([0-9]+ ops after [0-9]+ passes\\); nothing written \\(use -o model.so"
expect 0 "$(printf "$said" inference)" "$netc" --inference "$src/models/mlp.net"
expect 0 "$(printf "$said" training)" "$netc" "$src/models/mlp.net"
npasses() { "$netc" "$@" "$src/models/mlp.net" 2>&1 | sed -nE 's/.* after ([0-9]+) passes.*/\1/p'; }
all=$(npasses) nofuse=$(npasses -fno-fuse)
[ -n "$all" ] && [ "$nofuse" = $((all - 1)) ] || { echo "FAIL: -fno-fuse ran $nofuse passes of $all"; fail=$((fail + 1)); }
out=$("$netc" --inference "$src/models/mlp.net" 2>/dev/null)
[ -z "$out" ] || { echo "FAIL: the nothing-written note went to stdout"; fail=$((fail + 1)); }
out=$("$netc" --summary "$src/models/mlp.net" 2>&1 >/dev/null)
[ -z "$out" ] || { echo "FAIL: --summary also printed '$out'"; fail=$((fail + 1)); }
expect 2 "--precision must be fp32, fp16, bf16 or fp8, not 'fp4'" "$netc" --precision=fp4 "$src/models/mlp.net"
expect 2 "--batch must be an integer" "$netc" --batch=0 "$src/models/mlp.net"
expect 2 "--batch must be an integer" "$netc" --batch=12x "$src/models/mlp.net"
expect 0 "" "$netc" --precision=bf16 --batch=8 "$src/models/mlp.net"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
