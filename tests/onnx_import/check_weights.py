"""check_weights.py NETC NETRUN MODELS SRCDIR WORK: --weights-out, end to end.

small_w.onnx and small_reshape_w.onnx (onnx_make.c, with_data) hold the same
weights, the second's fc weight as MatMul's transposed fc.weight_t.  Their
--weights-out files must hold the IR's names and shapes with the values
onnx_make wrote (wval; fc.weight_t transposed back), and `netrun infer` must
give the same logits for: small.net with the first file, small_w.onnx's
model.so with it, small_reshape_w.onnx's model.so with the second, and
small_w.onnx written as a .net file (--emit-net) with the first, its
parameters loaded by name.  small_x.onnx, small_w's model with its values in
small_x.onnx.data (external data), must write the first file byte for byte.
"""
import json
import os
import struct
import subprocess
import sys


def wval(name, j):
    h = 0
    for c in name.encode():
        h = (h * 31 + c) & 0xFFFFFFFF
    v = (((h + j * 7) & 0xFFFFFFFF) % 17 - 8) / 16.0
    return abs(v) + 0.5 if "running_var" in name else v


def read_st(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    hdr = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = (v["dtype"], v["shape"], list(struct.unpack("<%df" % ((b - a) // 4), body[a:b])))
    return out


def write_st(path, tensors):
    hdr, body = {}, b""
    for name, (shape, vals) in tensors.items():
        raw = struct.pack("<%df" % len(vals), *vals)
        hdr[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + body)


def run(*args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        print(" ".join(args), "failed:", r.stdout, r.stderr)
        sys.exit(1)
    return r.stdout


def main():
    netc, netrun, models, src, work = sys.argv[1:6]
    os.makedirs(work, exist_ok=True)
    train = os.path.join(src, "small.train")
    w1, w2 = os.path.join(work, "w1.safetensors"), os.path.join(work, "w2.safetensors")
    run(netc, "--weights-out=" + w1, os.path.join(models, "small_w.onnx"))
    run(netc, "--weights-out=" + w2, os.path.join(models, "small_reshape_w.onnx"))
    a, b = read_st(w1), read_st(w2)
    status = 0
    # small_x.onnx keeps small_w's values in small_x.onnx.data (external data)
    w3 = os.path.join(work, "w3.safetensors")
    run(netc, "--weights-out=" + w3, os.path.join(models, "small_x.onnx"))
    with open(w1, "rb") as f1, open(w3, "rb") as f3:
        if f1.read() != f3.read():
            print("small_x.onnx (external data): --weights-out differs from small_w.onnx's")
            status = 1
    # the IR's names and shapes, in order (small.net's parameters and state)
    ir = run(netc, "--no-loc", "--print-after=parse", os.path.join(src, "small.net"))
    want = []
    for line in ir.splitlines():
        p = line.split()
        if len(p) >= 4 and p[0] in ("param", "state"):
            want.append((p[1][1:], [int(x) for x in p[3].split("[")[1].rstrip("]").split(",")]))
    got = [(k, v[1]) for k, v in a.items()]
    if got != want:
        print("names and shapes differ:\n  want", want, "\n  got ", got)
        status = 1
    for k, (dt, shape, vals) in a.items():
        if dt != "F32" or vals != [wval(k, j) for j in range(len(vals))]:
            print(k, ": values differ from onnx_make's")
            status = 1
    if b.get("fc.weight_t", (None, None, None))[1:] != a["fc.weight"][1:]:
        print("fc.weight_t (MatMul's weight, transposed back) differs from fc.weight")
        status = 1
    # the same logits three ways
    n = 4
    image = [((i * 13) % 29) / 29.0 - 0.5 for i in range(n * 28 * 28)]
    inputs = os.path.join(work, "batch.safetensors")
    write_st(inputs, {"image": ([n, 1, 28, 28], image)})
    m1, m2 = os.path.join(work, "m1.so"), os.path.join(work, "m2.so")
    run(netc, "--train=" + train, "-o", m1, os.path.join(models, "small_w.onnx"))
    run(netc, "--train=" + train, "-o", m2, os.path.join(models, "small_reshape_w.onnx"))
    logits = []
    # small_w.onnx written as a .net file: the same weights load by name
    emitted = os.path.join(work, "small_w.net")
    run(netc, "--emit-net=" + emitted, os.path.join(models, "small_w.onnx"))
    for model, w in ((os.path.join(src, "small.net"), w1), (m1, w1), (m2, w2), (emitted, w1)):
        out = os.path.join(work, "out%d.safetensors" % len(logits))
        run(netrun, "infer", model, "--device", "cpu", "--weights", w, "--inputs", inputs, "--out", out)
        o = read_st(out)
        logits.append(o[sorted(o)[0]][2] if "logits" not in o else o["logits"][2])
    for i in (1, 2, 3):
        d = max(abs(x - y) for x, y in zip(logits[0], logits[i]))
        if len(logits[i]) != len(logits[0]) or not d <= 1e-5:
            print("logits %d differ from small.net's by %g" % (i, d))
            status = 1
    if status == 0:
        print("%d tensors with onnx_make's values; the same %d logits from small.net, small_w.onnx, "
              "small_reshape_w.onnx and small_w.onnx written as a .net file" % (len(a), len(logits[0])))
    sys.exit(status)


main()
