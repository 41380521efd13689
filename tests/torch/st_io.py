"""st_io.py - safetensors files in plain Python (json + struct), for the
tests under tests/torch/ on machines without the `safetensors` package or
numpy.

A tensor is a (dtype, shape, data) triple: dtype a safetensors name ("F32",
"I64"), shape a list of ints, data the raw little-endian bytes.  `floats`
and `pack` convert between the bytes and Python lists.  Writes go to a
temporary file that is renamed over the target.
"""
import json
import math
import os
import struct

FORMATS = {"F32": "f", "F64": "d", "F16": "e", "I64": "q", "I32": "i", "U8": "B", "I8": "b"}
SIZES = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "U8": 1, "I8": 1, "BOOL": 1}


def numel(shape):
    return math.prod(shape) if shape else 1


def read(path):
    """{name: (dtype, shape, bytes)} of the file at path (metadata dropped)."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + hlen])
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = (info["dtype"], list(info["shape"]), raw[base + a:base + b])
    return out


def write(path, tensors, metadata=None):
    """Writes {name: (dtype, shape, bytes)} to path, atomically."""
    header = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    offset = 0
    names = sorted(tensors)
    for name in names:
        dtype, shape, data = tensors[name]
        if len(data) != numel(shape) * SIZES[dtype]:
            raise ValueError(f"{name}: {len(data)} bytes for {dtype}{shape}")
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    hbytes = json.dumps(header, separators=(",", ":")).encode()
    hbytes += b" " * (-len(hbytes) % 8)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for name in names:
            f.write(tensors[name][2])
    os.replace(tmp, path)


def pack(dtype, values):
    """Bytes of a list of numbers as dtype (not BF16)."""
    return struct.pack(f"<{len(values)}{FORMATS[dtype]}", *values)


def floats(tensor):
    """The elements of a (dtype, shape, bytes) tensor as a list."""
    dtype, shape, data = tensor
    if dtype == "BF16":
        return [struct.unpack("<f", b"\0\0" + data[i:i + 2])[0] for i in range(0, len(data), 2)]
    return list(struct.unpack(f"<{numel(shape)}{FORMATS[dtype]}", data))
