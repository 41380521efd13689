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
images cycled from 5 distinct ones, at lr 0.01 * batch / 16 (--curve-lr to
set it), in PyTorch FP32 and AMP fp16 on the GPU and in netc fp32 and fp16
(`netrun step --steps S --curve`), each --curve-runs times (default 3): on
the images as they are, then each time on its own 1e-6 relative nudge of
them, the same nudged images on both sides.  Training-mode batch norm on
small batches makes the trajectory chaotic (a 1e-6 change moves later
losses by percents, and so does run-to-run summation order), so each side
is judged as an ensemble (curve_verdict.py): per window of 10 steps, the
difference of the two sides' mean losses within 2% (fp32) / 5% (fp16) or
twice the largest distance of any single run from its side's mean,
whichever is larger; the reference's mean loss falling below 80% of its
start (one that does not fall fails the configuration), and netc's falling
by at least 80% as much as the reference's.

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
                          [--device cpu|gpu] [--cache DIR] [--curve S] [--curve-batch N] [--curve-lr LR]
                          [--curve-runs K]
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import curve_verdict  # noqa: E402
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


def netc_step(args, weights, inputs, precision, scale, steps=1, lr=LR, tag=""):
    out = os.path.join(args.work, f"netc_{precision}_{steps}{tag}.safetensors")
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
        args.scales[precision + tag] = [float(r[2]) for r in rows]
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


def curves(args, state, weights, device):
    """The --curve comparison (curve_verdict.py); True when both verdicts pass."""
    import torch
    S, N, K = args.curve, args.curve_batch, max(1, args.curve_runs)
    lr = args.curve_lr if args.curve_lr else CURVE_LR * N / 16
    gen = torch.Generator().manual_seed(args.seed + 2)
    distinct = [torch.randn(N, 3, 224, 224, generator=gen) for _ in range(5)]
    dlabels = [torch.randint(0, 1000, (N,), generator=gen, dtype=torch.int64) for _ in range(5)]
    labels = [dlabels[i % 5] for i in range(S)]
    # run 0 on the images as they are, run k on its own 1e-6 relative nudge of them (both sides the same)
    nudge = torch.Generator().manual_seed(args.seed + 3)
    sets = [[distinct[i % 5] for i in range(S)]]
    for _ in range(1, K):
        moved = [x * (1 + 1e-6 * torch.randn(x.shape, generator=nudge)) for x in distinct]
        sets.append([moved[i % 5] for i in range(S)])
    runs = {"torch fp32": [], "torch amp16": [], "netc fp32": [], "netc fp16": []}
    for k, images in enumerate(sets):
        inputs = os.path.join(args.work, f"curve_inputs_{k}.safetensors")
        save(inputs, {"image": torch.cat(images), "label": torch.cat(labels)})
        runs["torch fp32"].append(torch_curve(state, images, labels, device, False, lr))
        runs["torch amp16"].append(torch_curve(state, images, labels, device, True, lr))
        runs["netc fp32"].append(netc_step(args, weights, inputs, "fp32", 1.0, S, lr, tag=f"_{k}"))
        runs["netc fp16"].append(netc_step(args, weights, inputs, "fp16", FP16_LOSS_SCALE, S, lr, tag=f"_{k}"))
    print(f"\nloss curves: {S} SGD steps (lr {lr:g}, batch {N}, 5 distinct batches cycled), {K} run(s) a side: "
          "the images as they are, then each with its own 1e-6 nudge")
    names = list(runs)
    print(f"{'step':>4s} " + " ".join(f"{n:>12s}" for n in names) + f" {'netc fp16 scale':>15s}  (run 1 of each)")
    sc = args.scales.get("fp16_0", [])
    for i in range(S):
        if i < 5 or i % 5 == 4 or i == S - 1:
            print(f"{i + 1:4d} " + " ".join(f"{runs[n][0][i]:12.6f}" for n in names) +
                  f" {sc[i] if i < len(sc) else 0:15g}")
    skipped = sum(1 for a, b in zip(sc, sc[1:]) if b < a)
    print(f"netc fp16 run 1: {skipped} step(s) skipped for overflow (the dynamic loss scale backed off)")
    fmt = lambda xs: " ".join(f"{x:8.2e}" for x in xs)
    amp = curve_verdict.ensemble(runs["torch amp16"])[1]
    f32 = curve_verdict.ensemble(runs["torch fp32"])[1]
    print(f"curve torch amp16 vs torch fp32 (means)  10-step windows "
          f"{fmt([abs(a - b) / abs(b) for a, b in zip(amp, f32)])}  (info)")
    ok = True
    for title, net, ref, floor in (("netc fp32 vs torch fp32", "netc fp32", "torch fp32", CURVE_CRITERIA[0]),
                                   ("netc fp16 vs torch amp16", "netc fp16", "torch amp16", CURVE_CRITERIA[1])):
        v = curve_verdict.verdict(runs[net], runs[ref], floor)
        ok = ok and v["pass"]
        print(f"curve {title:26s} 10-step windows {fmt(v['diff'])} (crit {fmt(v['crit'])})  "
              f"netc {v['net_mean'][0]:.4f} -> {v['net_mean'][-1]:.4f}, ref {v['ref_mean'][0]:.4f} -> "
              f"{v['ref_mean'][-1]:.4f}  {'pass' if v['pass'] else 'FAIL: ' + v['why']}")
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
    ap.add_argument("--curve-runs", type=int, default=3,
                    help="curves a side and precision: the images as they are, then each on its own 1e-6 nudge")
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
