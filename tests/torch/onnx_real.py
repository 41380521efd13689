"""onnx_real.py - netc's ONNX front end on files PyTorch's own exporter writes.

For torchvision's ResNet-18, ResNet-50 and ResNeXt-50 (random weights, random
running statistics, so that every batch norm matters): torch.onnx.export in
training mode (the TorchScript exporter, opset 17, as docs/onnx.md says), then
  netc FILE.onnx --summary            torchvision's parameter count
  tests/onnx_import/check_same.sh     the op counts of every pass's IR and the totals
                                      of the shipped models/MODEL.net (its train section)
  netc FILE.onnx --emit-net OUT.net   the network in the language: blocks (in under
                                      half the lines of one per layer), the IR of the
                                      shipped models/MODEL.net again (check_same.sh)
  netc FILE.onnx --weights-out W      the file's weights by state_dict name
  netrun infer FILE.onnx --weights W  the logits of 8 random images, and those of
  netrun infer OUT.net --weights W    the written-out network
and the logits must equal the eval-mode PyTorch model's on the same images
(relative L2 error 1e-4 in f32 on each device asked for).

The rest of torchvision's ResNet family (ResNet-34 to -152, the ResNeXt-101s,
the Wide ResNets; files up to 508 MB) is exported and checked the same way
but for the logits.

And what torch.onnx.export writes by default (the dynamo exporter, where
onnxscript is installed): ResNet-18 in eval mode, its batch norms folded into
the convolutions.  netc must say so (a warning, as docs/onnx.md shows) and
infer the exported network's logits all the same.

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

ARCHS = ("resnet18", "resnet50", "resnext50_32x4d")
# the rest of the family: the export compiles to its models/*.net twin (no logits: the CPU would take long)
FAMILY = ("resnet34", "resnet101", "resnet152", "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2",
          "wide_resnet101_2")
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


def random_model(torch, torchvision, arch, seed):
    """torchvision's ARCH with random weights and random running statistics,
    so that every batch norm matters."""
    torch.manual_seed(seed)
    model = getattr(torchvision.models, arch)(weights=None)
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name.endswith("running_mean"):
                buf.normal_(0, 0.1)
            elif name.endswith("running_var"):
                buf.uniform_(0.5, 2.0)
    return model


def check(torch, torchvision, args, arch, devices, logits=True):
    model = random_model(torch, torchvision, arch, 1)
    with torch.no_grad():
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
    same = os.path.join(args.root, "tests/onnx_import/check_same.sh")
    sh(["bash", same, args.netc, net, onnx_path, train, os.path.join(args.work, f"same_{arch}")])
    emitted = emit_net(args, arch, onnx_path, train)
    sh(["bash", same, args.netc, net, emitted, "", os.path.join(args.work, f"same_emitted_{arch}")])
    if not logits:
        os.remove(onnx_path)  # up to 508 MB
        return 0.0
    weights = os.path.join(args.work, f"{arch}.safetensors")
    sh([args.netc, onnx_path, "--weights-out=" + weights])
    worst = 0.0
    for what, path in (("onnx", onnx_path), ("emitted", emitted)):
        worst = max(worst, compare_logits(torch, args, model, f"{arch} {what}", path, weights, devices))
    return worst


def emit_net(args, arch, onnx_path, train):
    """netc --emit-net on the export: the file must use blocks (the export's
    module paths name its layers), its network section under half as long
    as the plain one-line-per-layer file's."""
    def network_lines(path):
        with open(path) as f:
            text = f.read()
        m = re.search(r"^network .*?^\}", text, re.S | re.M)
        body = m.group(0).splitlines() if m else []
        return text, sum(1 for ln in body if "=" in ln)
    emitted = os.path.join(args.work, f"{arch}.emitted.net")
    plain = os.path.join(args.work, f"{arch}.plain.net")
    sh([args.netc, onnx_path, "--train=" + train, "--emit-net=" + emitted])
    sh([args.netc, onnx_path, "--train=" + train, "--emit-net-plain=" + plain])
    text, n = network_lines(emitted)
    n_plain = network_lines(plain)[1]
    blocks = len(re.findall(r"^block ", text, re.M))
    loops = len(re.findall(r"^\s*for i in ", text, re.M))
    print(f"{arch}: --emit-net: {blocks} blocks, {loops} loops, a network of {n} layer lines ({n_plain} plain)",
          flush=True)
    if blocks < 2 or 2 * n >= n_plain:
        raise RuntimeError(f"{emitted}: {blocks} blocks, {n} layer lines ({n_plain} plain); the export's blocks repeat")
    return emitted


def compare_logits(torch, args, model, what, path, weights, devices, extra=()):
    """netrun infer PATH on 8 random images against the eval-mode model."""
    x = torch.randn(BATCH, 3, 224, 224)
    with torch.no_grad():
        ref = model(x).double()
    tag = re.sub(r"[^A-Za-z0-9_.]", "_", what)
    inputs = os.path.join(args.work, f"{tag}.inputs.safetensors")
    st_io.write(inputs, {"image": ("F32", list(x.shape), to_bytes(x))})
    worst = 0.0
    for dev in devices:
        out = os.path.join(args.work, f"{tag}.{dev}.logits.safetensors")
        sh([args.netrun, "infer", path, *(["--weights", weights] if weights else []), "--inputs", inputs,
            "--out", out, "--batch", str(BATCH), "--device", dev, "--precision", "fp32", *extra])
        got = st_io.read(out)
        logits = [t for t in got.values() if t[1] == [BATCH, 1000]]
        if len(logits) != 1:
            raise RuntimeError(f"{out}: no single [{BATCH}, 1000] tensor in {sorted(got)}")
        g = torch.tensor(st_io.floats(logits[0]), dtype=torch.float64).reshape(BATCH, 1000)
        err = float((g - ref).norm() / ref.norm())
        same = int((g.argmax(1) == ref.argmax(1)).sum())
        print(f"{what} {dev}: rel L2 {err:.2e}, top-1 agrees on {same}/{BATCH}", flush=True)
        worst = max(worst, err)
    return worst


def check_dynamo(torch, torchvision, args, devices):
    """The default exporter's eval-mode ResNet-18; None where it cannot run."""
    try:
        import onnxscript  # noqa: F401 - the dynamo exporter needs it
    except ImportError:
        print("resnet18 dynamo: not run (no onnxscript, which torch.onnx.export's default exporter needs)")
        return None
    model = random_model(torch, torchvision, "resnet18", 2)
    model.eval()
    onnx_path = os.path.join(args.work, "resnet18.dynamo.onnx")
    torch.onnx.export(model, (torch.randn(2, 3, 224, 224),), onnx_path, input_names=["image"])
    summary = sh([args.netc, onnx_path, "--summary"])
    if "folded into the convolutions" not in summary:
        print(summary)
        raise RuntimeError(f"{onnx_path}: netc did not warn that the batch norms are folded")
    weights = os.path.join(args.work, "resnet18.dynamo.safetensors")
    sh([args.netc, onnx_path, "--weights-out=" + weights])
    return compare_logits(torch, args, model, "resnet18 dynamo", onnx_path, weights, devices)


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
    for arch in FAMILY:
        try:
            check(torch, torchvision, args, arch, devices, logits=False)
            print(f"{arch}: passed (the IR of models/{arch}.net)", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{arch}: FAILED: {e}")
            failed += 1
    try:
        err = check_dynamo(torch, torchvision, args, devices)
    except Exception as e:  # noqa: BLE001
        print(f"resnet18 dynamo: FAILED: {e}")
        err, failed = None, failed + 1
    if err is not None:
        ok = err <= TOL
        print(f"resnet18 dynamo: {'passed' if ok else 'FAILED'} (worst rel L2 {err:.2e}, allowed {TOL:.0e})")
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
