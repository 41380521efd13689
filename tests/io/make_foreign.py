"""Writes a safetensors file with only struct and json, the way a writer
other than netc's would (unsorted keys, default json spacing, \\u escapes,
no padding), for test_st_roundtrip.c.  Usage: make_foreign.py OUT"""
import json
import struct
import sys

tensors = [  # name, dtype, shape, raw bytes
    ("fc.weight", "BF16", [1, 2], bytes([0x80, 0x3F, 0x80, 0xBF])),
    ("layer1.0.bn1.num_batches_tracked", "I64", [], struct.pack("<q", 1234567890123)),
    ("caf\u00e9.bias", "F64", [3], struct.pack("<3d", 1 / 3, 1 / 4, 1 / 5)),
    ("empty", "U8", [4, 0], b""),
    ("layer1.0.conv1.weight", "F32", [2, 3, 1, 1], struct.pack("<6f", *[i * 0.5 - 1 for i in range(6)])),
]
header, data = {"__metadata__": {"format": "pt"}}, b""
for name, dtype, shape, raw in tensors:
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
text = json.dumps(header).encode("ascii")
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
