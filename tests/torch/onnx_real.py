"""onnx_real.py - netc's ONNX front end on files PyTorch's own exporter writes.

For torchvision's ResNet-50 and ResNeXt-50 (random weights, random running
statistics, so that every batch norm matters): torch.onnx.export in training
mode (the TorchScript exporter, opset 17, as docs/onnx.md says), then
  netc FILE.onnx --summary            torchvision's parameter count
  tests/onnx_import/check_same.sh     the op counts of every pass's IR and the totals
                                      of the shipped models/MODEL.net (its train section)
  netc FILE.onnx --weights-out W      the file's weights by state_dict name
  netrun infer FILE.onnx --weights W  the logits of 8 random images
and the logits must equal the eval-mode PyTorch model's on the same images
(relative L2 error 1e-4 in f32 on each device asked for).

Usage: onnx_real.py --netc NETC --netrun NETRUN --root SOURCE_DIR [--work DIR] [--device cpu,gpu]
Exit status: 0 passed, 1 failed, 77 skipped (no torch, torchvision or exporter).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

ARCHS = ("resnet50", "resnext50_32x4d")
BATCH = 8
TOL = 1e-4


def to_bytes(t):
    import ctypes
    t = t.detach().cpu().contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


class NoOnnx(Exception):
    """netc was built without the ONNX front end."""


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(f"$ {' '.join(cmd)}  -> {r.returncode}", flush=True)
    if r.returncode != 0 and "without ONNX support" in r.stderr:
        raise NoOnnx(r.stderr.strip())
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        raise RuntimeError(f"{cmd[0]} exited {r.returncode}")
    return r.stdout + r.stderr


def check(torch, torchvision, args, arch, devices):
    torch.manual_seed(1)
    model = getattr(torchvision.models, arch)(weights=None)
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name.endswith("running_mean"):
                buf.normal_(0, 0.1)
            elif name.endswith("running_var"):
                buf.uniform_(0.5, 2.0)
        for name, p in model.named_parameters():
            if name.endswith("bn3.weight"):  # torchvision zero-inits none; keep residuals alive anyway
                p.uniform_(0.5, 1.5)
    onnx_path = os.path.join(args.work, f"{arch}.onnx")
    model.train()
    torch.onnx.export(model, torch.randn(2, 3, 224, 224), onnx_path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "N"}, "logits": {0: "N"}}, dynamo=False)
    model.eval()
    summary = sh([args.netc, onnx_path, "--summary"])
    params = sum(p.numel() for p in model.parameters())
    m = re.search(r"params:\s*(\d+)", summary)
    if not m or int(m.group(1)) != params:
        print(summary)
        raise RuntimeError(f"{arch}: netc counts {m.group(1) if m else '?'} parameters, torchvision {params}")
    net = os.path.join(args.root, "models", f"{arch}.net")
    with open(net) as f:
        src = f.read()
    m = re.search(r"^train \{.*?^\}", src, re.S | re.M)
    if not m:
        raise RuntimeError(f"{net}: no train section")
    train = os.path.join(args.work, f"{arch}.train")
    with open(train, "w") as f:
        f.write(m.group(0) + "\n")
    sh(["bash", os.path.join(args.root, "tests/onnx_import/check_same.sh"), args.netc, net, onnx_path, train,
        os.path.join(args.work, f"same_{arch}")])
    weights = os.path.join(args.work, f"{arch}.safetensors")
    sh([args.netc, onnx_path, "--weights-out=" + weights])
    x = torch.randn(BATCH, 3, 224, 224)
    with torch.no_grad():
        ref = model(x).double()
    inputs = os.path.join(args.work, f"{arch}.inputs.safetensors")
    st_io.write(inputs, {"image": ("F32", list(x.shape), to_bytes(x))})
    worst = 0.0
    for dev in devices:
        out = os.path.join(args.work, f"{arch}.{dev}.logits.safetensors")
        sh([args.netrun, "infer", onnx_path, "--weights", weights, "--inputs", inputs, "--out", out,
            "--batch", str(BATCH), "--device", dev, "--precision", "fp32"])
        got = st_io.read(out)
        logits = [t for t in got.values() if t[1] == [BATCH, 1000]]
        if len(logits) != 1:
            raise RuntimeError(f"{out}: no single [{BATCH}, 1000] tensor in {sorted(got)}")
        g = torch.tensor(st_io.floats(logits[0]), dtype=torch.float64).reshape(BATCH, 1000)
        err = float((g - ref).norm() / ref.norm())
        same = int((g.argmax(1) == ref.argmax(1)).sum())
        print(f"{arch} {dev}: rel L2 {err:.2e}, top-1 agrees on {same}/{BATCH}", flush=True)
        worst = max(worst, err)
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--netc", required=True)
    ap.add_argument("--netrun", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--work")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    try:
        import torch
        import torchvision
        import torch.onnx  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e}")
        return 77
    args.work = args.work or tempfile.mkdtemp(prefix="onnx_real.")
    os.makedirs(args.work, exist_ok=True)
    devices = args.device.split(",")
    failed = 0
    for arch in ARCHS:
        try:
            err = check(torch, torchvision, args, arch, devices)
        except NoOnnx as e:
            print(f"skipped: {e}")
            return 77
        except Exception as e:  # noqa: BLE001 - every model is tried, each failure reported
            print(f"{arch}: FAILED: {e}")
            failed += 1
            continue
        ok = err <= TOL
        print(f"{arch}: {'passed' if ok else 'FAILED'} (worst rel L2 {err:.2e}, allowed {TOL:.0e})")
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
