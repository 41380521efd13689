"""Reads a safetensors file written by netc with only struct and json, the
way PyTorch's loader sees it, and checks the layout rules every reader
applies; prints "name dtype shape v0 v1 ..." (values of F32/I64 tensors)
for test_st_roundtrip.c to compare.  Usage: read_netc.py FILE"""
import json
import struct
import sys

raw = open(sys.argv[1], "rb").read()
(hlen,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8 : 8 + hlen].decode("utf-8"))
data = raw[8 + hlen :]
meta = header.pop("__metadata__", {})
assert all(isinstance(v, str) for v in meta.values()), "metadata must be strings"
spans = sorted((t["data_offsets"][0], t["data_offsets"][1], name) for name, t in header.items())
at = 0
for begin, end, name in spans:
    assert begin == at, f"{name}: begins at {begin}, expected {at}"
    at = end
assert at == len(data), f"data section {len(data)} bytes, tensors end at {at}"
for name in ("conv1.weight", "layer1.0.bn2.num_batches_tracked"):
    t = header[name]
    begin, end = t["data_offsets"]
    fmt = {"F32": "f", "I64": "q"}[t["dtype"]]
    vals = struct.unpack("<%d%s" % ((end - begin) // struct.calcsize(fmt), fmt), data[begin:end])
    print(name, t["dtype"], t["shape"], *(str(v) if fmt == "q" else "%.9g" % v for v in vals))
print("meta", meta.get("format"))
