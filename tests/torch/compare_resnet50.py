"""compare_resnet50.py - netc against PyTorch on one ResNet-50 training step.

Builds torchvision's resnet50 (weights=None, seeded; with --init perturbed,
the default, batch-norm parameters and running statistics perturbed so that
none is trivially 0 or 1), a batch of N random images and labels, and runs
the same SGD step in each implementation:

  PyTorch   on the GPU when there is one (else the CPU), FP32 with TF32 off:
            SGD(lr, momentum 0.9, weight_decay 1e-4, nesterov False),
            CrossEntropyLoss(label_smoothing 0.1) -- models/resnet50.net's
            train section.  Also with autocast fp16 (loss scaled, unscaled
            before the step) for the mixed-precision row.
  PyTorch   in float64 on the CPU: the reference both FP32 results are
            measured against.
  netc      `netrun step models/resnet50.net --device D` (the CPU
            executor, or with --device gpu the GPU executor: cuDNN
            convolutions, generated kernels, the step as a CUDA graph; after
            the whole pipeline: autodiff, fuse, layout, precision, memplan)
            with --precision fp32 (no TF32 anywhere) and fp16.

With --curve S (0: off), also S SGD steps on S batches of --curve-batch
images cycled from 5 distinct ones, in PyTorch FP32 and AMP fp16 on the
GPU and in netc fp32 and fp16 (`netrun step --steps S --curve`), printed
side by side, at lr 0.01 * batch / 16 (--curve-lr to set it).  Training-mode batch norm on small batches makes the
trajectory chaotic (a 1e-6 change of the images moves later losses by
percents), so further PyTorch FP32 curves on nudged images (--curve-nudges,
each with its own 1e-6 relative noise; the drift of a window is the largest
of theirs, one sample alone underestimating the spread) measure how far
two equally valid runs drift apart.  Judged per pair (netc fp32 against
PyTorch FP32, netc fp16 against PyTorch AMP) on the mean loss of each
window of 10 steps (two passes over the 5 batches, which averages out
which batch a step saw): each window's relative difference within 3x
PyTorch's own drift in that window or 2% (fp32) / 5% (fp16), whichever is
larger -- for fp16 the drift is also PyTorch AMP's own distance from
PyTorch FP32 in that window, when larger, since fp16 rounding perturbs the
trajectory far more than the 1e-6 nudge -- and both curves ending below 80% of where they started.  The
worst single step is printed for information: on this chaotic problem
PyTorch drifts from itself by several percent at single steps.

Every tensor is compared by ||netc - torch|| / ||torch||: loss, logits, each
parameter's gradient, each parameter after the step and its change (w' - w),
each momentum buffer, each running statistic and its change.  Two rows are
information only: PyTorch's own amp against its FP32, and PyTorch FP32 on
images changed by 1e-6 relative (how far the step itself amplifies
rounding-sized differences: at initialization, in training-mode batch norm
at N=4, the gradients are ill-conditioned).  The verdict: netc FP32
against float64 within the criterion or within 3x PyTorch FP32's own error
against float64, and netc fp16 likewise against PyTorch amp's error.
The worst few
are listed, then one table (last) with the worst error per group against
its criterion.  Exit status: 0 all criteria met, 1 some missed, 77 skipped
(no torch; "skipped: no torch").  See docs/correctness.md.

usage: compare_resnet50.py [--netrun PATH] [--root DIR] [--work DIR] [--batch N] [--init perturbed|default]
                          [--device cpu|gpu] [--cache DIR] [--curve S] [--curve-batch N]
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

FORMAT_VERSION = 1
LR, MOMENTUM, WEIGHT_DECAY, SMOOTHING = 0.1, 0.9, 1e-4, 0.1
FP16_LOSS_SCALE = 1024.0
# group -> (fp32 criterion, fp16 criterion); fp16 is measured against PyTorch FP32
CRITERIA = {
    "loss": (1e-4, 1e-2),
    "logits": (1e-4, 1e-2),
    "grad": (1e-4, 5e-2),
    "param after": (1e-4, 5e-2),
    "param change": (1e-4, 5e-2),
    "momentum buffer": (1e-4, 5e-2),
    "running stat": (1e-4, 5e-2),
    "running change": (1e-4, 5e-2),
}


def tensor_bytes(t):
    t = t.detach().to("cpu").contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


def save(path, tensors):
    """{name: torch tensor} -> safetensors (F32 / I64), by hand."""
    import torch
    names = {torch.float32: "F32", torch.int64: "I64", torch.int32: "I32"}
    st_io.write(path, {k: (names[v.dtype], list(v.shape), tensor_bytes(v)) for k, v in tensors.items()},
                {"format": "pt", "netc_compare_version": str(FORMAT_VERSION)})


def load(path):
    import torch
    out = {}
    for name, (dtype, shape, data) in st_io.read(path).items():
        if dtype != "F32":
            raise ValueError(f"{path}: {name} is {dtype}, expected F32")
        out[name] = torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(shape) if data else \
            torch.zeros(shape)
    return out


def rel(a, b):
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    nb = float(b.norm())
    d = float((a - b).norm())
    return d / nb if nb > 0 else d


def torch_setup(model_state, device, lr, f64=False):
    """torchvision's resnet50 with model_state on device in training mode, its SGD and loss."""
    import torch
    import torchvision
    model = torchvision.models.resnet50(weights=None)
    model.load_state_dict(model_state)
    model.to(device).train()
    if f64:
        model.double()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY, nesterov=False)
    return model, opt, torch.nn.CrossEntropyLoss(label_smoothing=SMOOTHING)


def torch_backward(model, crit, x, y, amp):
    """Forward and backward of one batch (gradients unscaled); returns (logits, loss)."""
    import torch
    if amp:
        with torch.autocast(device_type=x.device.type, dtype=torch.float16):
            logits = model(x)
        loss = crit(logits.float(), y)
        (loss * FP16_LOSS_SCALE).backward()
        for p in model.parameters():
            p.grad.div_(FP16_LOSS_SCALE)
    else:
        logits = model(x)
        loss = crit(logits, y)
        loss.backward()
    return logits, loss


def torch_step(model_state, images, labels, device, amp, f64=False):
    """One SGD step from model_state; returns {name: tensor} as netrun writes.
    f64: in float64 (the reference both FP32 implementations are measured against)."""
    model, opt, crit = torch_setup(model_state, device, LR, f64)
    if f64:
        images = images.double()
    x, y = images.to(device), labels.to(device)
    opt.zero_grad(set_to_none=True)
    logits, loss = torch_backward(model, crit, x, y, amp)
    out = {"loss": loss.detach().float().reshape([]), "logits": logits.detach().float()}
    params = dict(model.named_parameters())
    for name, p in params.items():
        out[name + ".grad"] = p.grad.detach().clone()
    opt.step()
    for name, p in params.items():
        out[name] = p.detach().clone()
        out[name + ".momentum_buffer"] = opt.state[p]["momentum_buffer"].detach().clone()
    for name, b in model.named_buffers():
        if not name.endswith("num_batches_tracked"):
            out[name] = b.detach().clone()
    return {k: v.float().cpu() for k, v in out.items()}


def netc_step(args, weights, inputs, precision, scale, steps=1, lr=LR):
    out = os.path.join(args.work, f"netc_{precision}_{steps}.safetensors")
    cmd = [args.netrun, "step", os.path.join(args.root, "models/resnet50.net"), "--weights", weights,
           "--inputs", inputs, "--out", out, "--lr", str(lr), "--loss-scale", str(scale),
           "--precision", precision, "--device", args.device]
    if args.cache:
        cmd += ["--cache", args.cache]
    if steps > 1:
        cmd += ["--steps", str(steps), "--curve", out + ".csv"]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(f"$ {' '.join(cmd)}\n{r.stdout.strip()}{r.stderr.strip()}  [{time.time() - t0:.1f} s]", flush=True)
    if r.returncode != 0:
        raise RuntimeError(f"netrun step --precision {precision} exited {r.returncode}")
    if steps > 1:
        with open(out + ".csv") as f:
            rows = [line.split(",") for line in f.readlines()[1:]]
        args.scales[precision] = [float(r[2]) for r in rows]
        return [float(r[1]) for r in rows]
    return load(out)


def torch_curve(model_state, images, labels, device, amp, lr):
    """Losses of len(images) SGD steps, one batch each, as netc's --curve."""
    model, opt, crit = torch_setup(model_state, device, lr)
    losses = []
    for x, y in zip(images, labels):
        opt.zero_grad(set_to_none=True)
        _, loss = torch_backward(model, crit, x.to(device), y.to(device), amp)
        opt.step()
        losses.append(float(loss.detach()))
    return losses


CURVE_LR = 0.01  # at --curve-batch 16; scaled linearly with the batch (the usual rule)
CURVE_CRITERIA = (2e-2, 5e-2)  # floor of the allowed relative difference: fp32, fp16


def curve_diff(a, b):
    """(worst relative step difference, [relative difference of each 10-step window's mean])."""
    worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
    windows = []
    for i in range(0, len(a), 10):
        ma, mb = sum(a[i:i + 10]) / len(a[i:i + 10]), sum(b[i:i + 10]) / len(b[i:i + 10])
        windows.append(abs(ma - mb) / abs(mb))
    return worst, windows


def curves(args, state, weights, device):
    """The --curve comparison; True when both criteria are met."""
    import torch
    S, N = args.curve, args.curve_batch
    lr = args.curve_lr if args.curve_lr else CURVE_LR * N / 16
    gen = torch.Generator().manual_seed(args.seed + 2)
    distinct = [torch.randn(N, 3, 224, 224, generator=gen) for _ in range(5)]
    dlabels = [torch.randint(0, 1000, (N,), generator=gen, dtype=torch.int64) for _ in range(5)]
    images = [distinct[i % 5] for i in range(S)]
    labels = [dlabels[i % 5] for i in range(S)]
    inputs = os.path.join(args.work, "curve_inputs.safetensors")
    save(inputs, {"image": torch.cat(images), "label": torch.cat(labels)})
    t32 = torch_curve(state, images, labels, device, False, lr)
    t16 = torch_curve(state, images, labels, device, True, lr)
    nudge = torch.Generator().manual_seed(args.seed + 3)
    drift, t32n = (0.0, [0.0] * ((S + 9) // 10)), None
    for k in range(max(1, args.curve_nudges)):
        tk = torch_curve(state, [x * (1 + 1e-6 * torch.randn(x.shape, generator=nudge)) for x in images], labels,
                         device, False, lr)
        dk = curve_diff(tk, t32)
        print(f"curve torch fp32, nudge {k + 1}          10-step windows "
              + " ".join(f"{x:8.2e}" for x in dk[1]) + "  (info)")
        drift = (max(drift[0], dk[0]), [max(a, b) for a, b in zip(drift[1], dk[1])])
        t32n = t32n or tk
    n32 = netc_step(args, weights, inputs, "fp32", 1.0, S, lr)
    n16 = netc_step(args, weights, inputs, "fp16", FP16_LOSS_SCALE, S, lr)
    print(f"\nloss curves: {S} SGD steps (lr {lr:g}, batch {N}, 5 distinct batches cycled)")
    print(f"{'step':>4s} {'torch fp32':>11s} {'netc fp32':>11s} {'torch amp16':>11s} {'netc fp16':>11s} "
          f"{'torch nudged':>12s} {'netc fp16 scale':>15s}")
    sc = args.scales.get("fp16", [])
    for i in range(S):
        if i < 5 or i % 5 == 4 or i == S - 1:
            print(f"{i + 1:4d} {t32[i]:11.6f} {n32[i]:11.6f} {t16[i]:11.6f} {n16[i]:11.6f} {t32n[i]:12.6f} "
                  f"{sc[i] if i < len(sc) else 0:15g}")
    skipped = sum(1 for a, b in zip(sc, sc[1:]) if b < a)
    print(f"netc fp16: {skipped} step(s) skipped for overflow (the dynamic loss scale backed off)")
    fmt = lambda xs: " ".join(f"{x:8.2e}" for x in xs)
    print(f"curve torch fp32, images+1e-6 (max of {args.curve_nudges}) 10-step windows {fmt(drift[1])}  "
          f"worst step {drift[0]:8.2e}  (info)")
    amp_vs_fp32 = curve_diff(t16, t32)
    print(f"curve torch amp16 vs torch fp32   10-step windows {fmt(amp_vs_fp32[1])}  worst step {amp_vs_fp32[0]:8.2e}  "
          f"(info)")
    ok = True
    # fp16's own rounding perturbs far more than a 1e-6 nudge: its allowance also
    # counts how far PyTorch AMP itself lands from PyTorch FP32
    fp16_drift = [max(d, e) for d, e in zip(drift[1], amp_vs_fp32[1])]
    for title, a, b, floor, spread in (("netc fp32 vs torch fp32", n32, t32, CURVE_CRITERIA[0], drift[1]),
                                       ("netc fp16 vs torch amp16", n16, t16, CURVE_CRITERIA[1], fp16_drift)):
        worst, windows = curve_diff(a, b)
        crit = [max(floor, 3 * d) for d in spread]
        falls = a[-1] < 0.8 * a[0] and b[-1] < 0.8 * b[0]
        passed = all(w <= c for w, c in zip(windows, crit)) and falls
        ok = ok and passed
        print(f"curve {title:26s} 10-step windows {fmt(windows)} (crit {fmt(crit)})  worst step {worst:8.2e}  "
              f"first {a[0]:.4f} last {a[-1]:.4f}  {'pass' if passed else 'FAIL'}")
    return ok


def compare(ref, got, start):
    """{group: [(rel err, name)]}; every tensor ref has must be in got."""
    groups = {g: [] for g in CRITERIA}
    for name, b in ref.items():
        if name not in got:
            groups.setdefault("missing", []).append((float("inf"), name))
            continue
        a = got[name]
        if list(a.shape) != list(b.shape):
            groups.setdefault("missing", []).append((float("inf"), f"{name} {list(a.shape)} vs {list(b.shape)}"))
            continue
        if name in ("loss", "logits"):
            group = name
        elif name.endswith(".grad"):
            group = "grad"
        elif name.endswith(".momentum_buffer"):
            group = "momentum buffer"
        elif name.endswith("running_mean") or name.endswith("running_var"):
            group = "running stat"
            groups["running change"].append((rel(a - start[name], b - start[name]), name))
        else:
            group = "param after"
            groups["param change"].append((rel(a - start[name], b - start[name]), name))
        groups[group].append((rel(a, b), name))
    return groups


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("--netrun", default=None, help="netrun binary (default ROOT/build/netrun)")
    ap.add_argument("--work", default=None)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worst", type=int, default=4)
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu", help="where netc runs")
    ap.add_argument("--cache", default=None, help="netrun's NVRTC kernel cache")
    ap.add_argument("--curve", type=int, default=0, help="SGD steps of the loss-curve comparison (0: off)")
    ap.add_argument("--curve-batch", type=int, default=16)
    ap.add_argument("--curve-lr", type=float, default=0, help="SGD lr of the curves (default 0.01 * batch / 16)")
    ap.add_argument("--curve-nudges", type=int, default=3, help="nudged PyTorch FP32 curves measuring the drift")
    ap.add_argument("--init", choices=["perturbed", "default"], default="perturbed",
                    help="batch-norm parameters: perturbed (none 0 or 1) or torchvision's default")
    args = ap.parse_args()
    try:
        import torch
        import torchvision
    except ImportError:
        print("skipped: no torch")
        return 77
    args.netrun = args.netrun or os.path.join(args.root, "build", "netrun")
    args.scales = {}
    args.work = args.work or tempfile.mkdtemp(prefix="netc-compare-")
    os.makedirs(args.work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gpu = torch.cuda.get_device_name(0) if device.type == "cuda" else "none (PyTorch on the CPU)"
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, device {gpu}, batch {args.batch}")

    torch.manual_seed(args.seed)
    model = torchvision.models.resnet50(weights=None)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d) and args.init == "perturbed":
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    images = torch.randn(args.batch, 3, 224, 224)
    labels = torch.randint(0, 1000, (args.batch,), dtype=torch.int64)
    weights = os.path.join(args.work, "weights.safetensors")
    inputs = os.path.join(args.work, "inputs.safetensors")
    save(weights, state)
    save(inputs, {"image": images, "label": labels})
    start = {k: v.float() for k, v in state.items()}

    t0 = time.time()
    ref32 = torch_step(state, images, labels, device, amp=False)
    ref16 = torch_step(state, images, labels, device, amp=True)
    # the problem's own sensitivity: the same FP32 step on images changed by 1e-6 relative
    gen = torch.Generator().manual_seed(args.seed + 1)
    nudged = images * (1 + 1e-6 * torch.randn(images.shape, generator=gen))
    ref32n = torch_step(state, nudged, labels, device, amp=False)
    ref64 = torch_step(state, images, labels, torch.device("cpu"), amp=False, f64=True)
    print(f"PyTorch steps: {time.time() - t0:.1f} s", flush=True)
    net32 = netc_step(args, weights, inputs, "fp32", 1.0)
    net16 = netc_step(args, weights, inputs, "fp16", FP16_LOSS_SCALE)

    runs = [("netc fp32 vs torch fp32", compare(ref32, net32, start), 0),
            ("netc fp16 vs torch fp32", compare(ref32, net16, start), 1),
            ("netc fp16 vs torch amp16", compare(ref16, net16, start), 1),
            ("torch amp16 vs torch fp32", compare(ref32, ref16, start), 1),
            ("torch fp32, image+1e-6", compare(ref32, ref32n, start), 0),
            ("netc fp32 vs torch f64", compare(ref64, net32, start), 0),
            ("torch fp32 vs torch f64", compare(ref64, ref32, start), 0),
            ("netc fp16 vs torch f64", compare(ref64, net16, start), 1),
            ("torch amp16 vs torch f64", compare(ref64, ref16, start), 1)]
    # Against float64, netc's FP32 must be about as accurate as PyTorch's own FP32:
    # within the fixed criterion, or within 3x PyTorch's error where the problem
    # itself is that sensitive (see the image+1e-6 row).
    torch_err = {g: max(errs)[0] for g, errs in runs[-3][1].items() if errs}
    amp_err = {g: max(errs)[0] for g, errs in runs[-1][1].items() if errs}
    for title, groups, _ in runs[:3]:
        print(f"\n{title}: worst tensors")
        for group, errs in groups.items():
            worst = sorted(errs, reverse=True)[:args.worst]
            print(f"  {group:16s} " + ", ".join(f"{n} {e:.2e}" for e, n in worst))
    ok = True
    rows = []
    for title, groups, col in runs:
        for group, errs in groups.items():
            if not errs:
                continue
            e, n = max(errs)
            med = sorted(x for x, _ in errs)[len(errs) // 2]
            crit = CRITERIA.get(group, (0, 0))[col]
            judged = title.startswith("netc") and not title.endswith("amp16")
            if title == "netc fp32 vs torch f64":
                crit = max(crit, 3 * torch_err.get(group, 0))
            elif title == "netc fp16 vs torch f64":
                crit = max(crit, 3 * amp_err.get(group, 0))
            elif title in ("netc fp32 vs torch fp32", "netc fp16 vs torch fp32"):
                judged = False  # judged through the f64 rows instead
            passed = e <= crit
            if judged and not passed:
                ok = False
            verdict = ("pass" if passed else "FAIL") if judged else "(info)"
            rows.append((title, group, len(errs), e, med, n, crit, verdict))
    print(f"\n{'comparison':26s} {'group':16s} {'n':>4s} {'worst':>9s} {'median':>9s} {'crit':>7s}  verdict  worst tensor")
    for title, group, n, e, med, name, crit, verdict in rows:
        print(f"{title:26s} {group:16s} {n:4d} {e:9.2e} {med:9.2e} {crit:7.0e}  {verdict:7s}  {name}")
    where = "GPU executor" if args.device == "gpu" else "CPU executor"
    if args.curve > 0:
        ok = curves(args, state, weights, device) and ok
    print(f"\n{'PASS' if ok else 'FAIL'}: netc ({where}) against PyTorch on resnet50, batch {args.batch}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
