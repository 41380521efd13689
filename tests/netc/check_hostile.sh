#!/usr/bin/env bash
# check_hostile.sh NETC WORKDIR: netc refuses hostile input cleanly: exit 1,
# a message naming the file, no crash or sanitizer report, within seconds.
set -uo pipefail
netc=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
python3 - <<'PY'
import os, random
random.seed(7)
cases = {
    "empty.net": b"",
    "comment_only.net": b"# nothing here\n",
    "garbage.net": bytes(random.randrange(256) for _ in range(100000)),
    "nul_bytes.net": b"network n {\x00\x00 input x : f32[3]\n}\n",
    "bad_utf8.net": b"network n\xff\xfe {\n  input x : f32[3]\n}\n",
    "nested.net": b"network n {\n a = " + b"(" * 200000 + b"1" + b")" * 200000 + b"\n}\n",
    "long_line.net": b"network n { a = " + b"1 + " * 1300000 + b"1 }\n",
    "many_lines.net": b"network n {\n" + b"  a = 1\n" * 2000000 + b"}\n",
    "huge_number.net": b"network n {\n input x : f32[" + b"9" * 5000 + b"]\n}\n",
    "huge_float.net": b"network n {\n a = 1e999999\n}\n",
    "deep_blocks.net": b"".join(b"block b%d(x) { return b%d(x) }\n" % (i, i + 1) for i in range(500))
        + b"block b500(x) { return relu(x) }\nnetwork n {\n input x : f32[3,4,4]\n input y : i32[]\n a = b0(x)\n}\n",
    "big_loop.net": b"network n {\n input x : f32[3,4,4]\n input y : i32[]\n for i in 0..100000000 { x = relu(x) }\n}\n",
    "huge_layer.net": b"network n {\n input x : f32[3,1024,1024]\n input y : i32[]\n a = conv2d(x, 1048576, k=1)\n}\n",
}
for name, data in cases.items():
    open(name, "wb").write(data)
os.mkdir("a_directory.net")
PY
pass=0 fail=0
for f in *.net; do
  start=$(date +%s)
  out=$(timeout 60 "$netc" "$f" 2>&1 >/dev/null)
  rc=$?
  secs=$(( $(date +%s) - start ))
  why=""
  [ $rc -eq 1 ] || why="exit $rc, want 1"
  grep -q -- "$f" <<<"$out" || why="$why; message does not name $f"
  grep -q -e Sanitizer -e 'runtime error' <<<"$out" && why="$why; sanitizer report"
  [ $secs -le 45 ] || why="$why; took ${secs}s"
  if [ -n "$why" ]; then
    echo "FAIL $f: $why"; head -c 600 <<<"$out"; echo; fail=$((fail + 1))
  else
    echo "ok   $f (${secs}s): $(head -n 1 <<<"$out" | cut -c1-110)"; pass=$((pass + 1))
  fi
done
# Not hostile but huge: a valid network of 100,000 layers compiles in
# seconds (name lookup and memory planning were quadratic: over 120 s).
python3 -c '
n = 100000
print("network deep {\n  input image : f32[3, 8, 8]\n  input label : i32[]\n  x0 = conv2d(image, 4, k=1, bias=false)")
for i in range(1, n): print("  x%d = relu(x%d)" % (i, i - 1))
print("  gap = global_avgpool(x%d)\n  flat = flatten(gap)\n  fc = linear(flat, 3)" % (n - 1))
print("  loss = softmax_cross_entropy(fc, label)\n}")' >deep100k.net
start=$(date +%s)
out=$(timeout 120 "$netc" deep100k.net --summary 2>&1)
rc=$? secs=$(( $(date +%s) - start ))
if [ $rc -eq 0 ] && [ $secs -le 30 ] && grep -q "activation memory" <<<"$out"; then
  echo "ok   deep100k.net (${secs}s): $(grep "activation memory" <<<"$out")"; pass=$((pass + 1))
else
  echo "FAIL deep100k.net: exit $rc after ${secs}s (want 0 within 30 s)"; head -c 600 <<<"$out"; echo; fail=$((fail + 1))
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
