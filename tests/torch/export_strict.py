"""export_strict.py - `netrun export` against PyTorch: what netc exports
loads into torchvision's model with load_state_dict(..., strict=True).

For ResNet-50 and ResNeXt-50: torchvision's state_dict, made non-trivial
(random running statistics, num_batches_tracked 7), is written as
safetensors with tests/torch/st_io.py (a torchvision-style file, with
num_batches_tracked, which netc reads and ignores); `netrun export` writes it
back out; the export is read with st_io (no safetensors package needed) and
must load into a fresh torchvision model with strict=True, every tensor
equal to the original and num_batches_tracked the count netrun was given.
Then a ResNet-18 checkpoint from `netrun train --accum 2` (2 steps): strict
loading refuses the checkpoint itself, takes its export, with the
checkpoint's tensors and num_batches_tracked 4.

Usage: export_strict.py --netrun NETRUN --root SOURCE_DIR [--work DIR]
Exit status: 0 passed, 1 failed, 77 skipped (no torch or torchvision).
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

MODELS = (("resnet50", "models/resnet50.net"), ("resnext50_32x4d", "models/resnext50_32x4d.net"))
BATCHES = 7


def to_bytes(t):
    """The raw little-endian bytes of tensor t (contiguous, on the CPU)."""
    t = t.detach().cpu().contiguous()
    try:
        return t.numpy().tobytes()
    except (RuntimeError, TypeError):  # torch without numpy
        fmt = "f" if t.dtype.is_floating_point else "q"
        return struct.pack("<%d%s" % (t.numel(), fmt), *t.flatten().tolist())


def from_st(torch, dtype, shape, data):
    kinds = {"F32": torch.float32, "I64": torch.int64}
    if dtype not in kinds:
        raise ValueError(f"dtype {dtype}: an export holds F32 and I64 only")
    return torch.frombuffer(bytearray(data), dtype=kinds[dtype]).reshape(shape).clone()


def check(torch, torchvision, netrun, root, work, arch, model):
    torch.manual_seed(0)
    ref = getattr(torchvision.models, arch)(weights=None)
    with torch.no_grad():
        for name, buf in ref.named_buffers():
            if name.endswith("running_mean"):
                buf.normal_()
            elif name.endswith("running_var"):
                buf.uniform_(0.5, 2.0)
            elif name.endswith("num_batches_tracked"):
                buf.fill_(3)
    sd = ref.state_dict()
    src = os.path.join(work, f"{arch}_torch.safetensors")
    out = os.path.join(work, f"{arch}_netc.safetensors")
    tensors = {}
    for k, v in sd.items():
        dtype = "I64" if v.dtype == torch.int64 else "F32"
        tensors[k] = (dtype, list(v.shape), to_bytes(v if dtype == "I64" else v.float()))
    st_io.write(src, tensors)
    cmd = [netrun, "export", os.path.join(root, model), "--weights", src, "--out", out,
           "--batches-tracked", str(BATCHES)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"FAIL {arch}: {' '.join(cmd)} exited {run.returncode}:\n{run.stderr}")
        return False
    loaded = {k: from_st(torch, *v) for k, v in st_io.read(out).items()}
    fresh = getattr(torchvision.models, arch)(weights=None)
    try:
        fresh.load_state_dict(loaded, strict=True)
    except RuntimeError as e:
        print(f"FAIL {arch}: load_state_dict(strict=True): {e}")
        return False
    bad = []
    for k, v in fresh.state_dict().items():
        want = torch.full_like(v, BATCHES) if k.endswith("num_batches_tracked") else sd[k]
        if v.dtype != want.dtype or not torch.equal(v, want):
            bad.append(k)
    if bad:
        print(f"FAIL {arch}: {len(bad)} tensors differ after the round trip, first {bad[:3]}")
        return False
    print(f"{arch}: {len(loaded)} tensors load with strict=True, equal to torchvision's")
    return True


def check_checkpoint(torch, torchvision, netrun, root, work):
    """A checkpoint of two accumulated ResNet-18 steps (2 x 2 batches): its
    optimizer state and missing counters make strict=True refuse it; its
    export loads, num_batches_tracked 4 (steps times accumulation)."""
    ck = os.path.join(work, "resnet18_ckpt.safetensors")
    out = os.path.join(work, "resnet18_netc.safetensors")
    cmds = [[netrun, "train", os.path.join(root, "models/resnet18.net"), "--device", "cpu", "--synthetic",
             "--steps", "2", "--accum", "2", "--batch", "2", "--train-images", "8", "--test-images", "2",
             "--checkpoint", ck],
            [netrun, "export", os.path.join(root, "models/resnet18.net"), "--weights", ck, "--out", out]]
    for cmd in cmds:
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAIL resnet18: {' '.join(cmd)} exited {run.returncode}:\n{run.stderr}")
            return False
    ckpt = {k: from_st(torch, *v) for k, v in st_io.read(ck).items()}
    try:
        torchvision.models.resnet18(weights=None).load_state_dict(ckpt, strict=True)
        print("FAIL resnet18: strict=True took the checkpoint itself (optimizer state, no counters)")
        return False
    except RuntimeError:
        pass
    model = torchvision.models.resnet18(weights=None)
    try:
        model.load_state_dict({k: from_st(torch, *v) for k, v in st_io.read(out).items()}, strict=True)
    except RuntimeError as e:
        print(f"FAIL resnet18: load_state_dict(strict=True) of the export: {e}")
        return False
    bad = [k for k, v in model.state_dict().items()
           if not torch.equal(v, torch.full_like(v, 4) if k.endswith("num_batches_tracked") else ckpt[k])]
    if bad:
        print(f"FAIL resnet18: {len(bad)} tensors differ from the checkpoint's, first {bad[:3]}")
        return False
    print("resnet18: a checkpoint's export loads with strict=True (num_batches_tracked 4); the checkpoint does not")
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--netrun", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--work")
    a = ap.parse_args()
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"skipped: {e}")
        return 77
    work = a.work or tempfile.mkdtemp(prefix="netc_export_")
    os.makedirs(work, exist_ok=True)
    ok = all([check(torch, torchvision, a.netrun, a.root, work, arch, model) for arch, model in MODELS] +
             [check_checkpoint(torch, torchvision, a.netrun, a.root, work)])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
