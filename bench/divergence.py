#!/usr/bin/env python3
"""bench/divergence.py - PyTorch on netc's synthetic data with netc's recipe.

    python3 bench/divergence.py [--epochs 3] [--warmup 1] [--batch 256]
        [--n 0 (16 * batch)] [--seed 1] [--amp bf16|fp16|fp32]
        [--log FILE.jsonl] [--data-cache FILE.npz] [--device cuda] [--check]

Issue 16: "ResNet-50 at the model's recipe with a one-epoch warm-up went from
loss 6.9 to 13 in its second epoch on synthetic data.  Find out whether
PyTorch with the same recipe and data does the same."  This script is the
PyTorch half (bench/divergence.sh runs both and prints them side by side).

Reproduced exactly from netc (runtime/api/net_train.c, runtime/train/):
  - the data: `netrun train --synthetic` makes n = 16 * batch training
    images (--train-images N changes it) and n / 10 test images from one
    splitmix64 stream seeded with seed * 0x2545f4914f6cdd1d + 7: per image a
    label (mix() % classes), then C*H*W bytes, each 200 + (r>>16) % 56 when
    (r & 0xffff) < (label + 0.5) / classes * 65536, else (r>>16) % 56;
    normalized as byte / (255 * 0.5) - 0.5 / 0.5 (synthetic data's default);
  - the order: every epoch (the first too) a Fisher-Yates shuffle of the
    training set from splitmix64 seeded with seed ^ 0x5f3759df2545f491, the
    one generator carried across epochs; batch b is order[b*B : (b+1)*B];
    the partial last batch dropped;
  - the recipe (models/resnet50.net's train section): SGD lr 0.1, momentum
    0.9, no Nesterov, weight decay 1e-4 on every parameter (batch-norm
    weights and biases too), label smoothing 0.1, the learning rate of
    rt_sched_lr: linear warm-up lr * (t + 1) / warmup_steps over --warmup
    epochs, then cosine to 0 over the rest of THIS run's epochs (a warm-up
    not shorter than the run is cut to half of it, as netc does);
  - the initialization: torchvision's default is netc's (rt_init.c): conv
    kaiming-normal fan_out, batch norm 1 / 0, linear weight and bias
    uniform +-1/sqrt(fan_in); no zero-initialized residual gammas.
Differences that remain: the random values of the initial weights (same
distributions, other draws), and the arithmetic: netc trains in fp16 with a
dynamic loss scale (init 65536, growth every 2000 steps) by default; --amp
picks bf16 autocast (default), fp16 autocast with GradScaler(65536, growth
2000) as netc's, or fp32 (TF32 off).  channels_last throughout.

Prints per step "step epoch lr loss" and per epoch the mean loss, as JSON
lines; --log writes the same lines to a file.  --data-cache keeps the
generated images (4096 x 150528 bytes at batch 256) for the next run.
--check compares the generator with a C transcription of netc's (needs cc).
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
G, M1, M2 = np.uint64(GOLDEN), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def mix_py(state):
    """splitmix64 as net_train.c's mix(): returns (output, new state)."""
    state = (state + GOLDEN) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31), state


def mix_at(s0, k):
    """The k-th output (k = 1, 2, ... as uint64 array) of mix() from state s0."""
    z = np.uint64(s0) + k * G
    z = (z ^ (z >> np.uint64(30))) * M1
    z = (z ^ (z >> np.uint64(27))) * M2
    return z ^ (z >> np.uint64(31))


def image_bytes(args):
    """Images [i0, i1) of the stream: (uint8 [k, sample], labels int64 [k])."""
    s0, i0, i1, sample, classes = args
    imgs = np.empty((i1 - i0, sample), np.uint8)
    labels = np.empty(i1 - i0, np.int64)
    with np.errstate(over="ignore"):
        for i in range(i0, i1):
            base = np.uint64(i * (sample + 1))  # calls before image i's label
            lab = int(mix_at(s0, base + np.uint64(1))) % classes
            bright = np.uint64(int((lab + 0.5) / classes * 65536.0))
            r = mix_at(s0, base + np.uint64(2) + np.arange(sample, dtype=np.uint64))
            hi = ((r >> np.uint64(16)) % np.uint64(56)).astype(np.uint8)
            imgs[i - i0] = np.where((r & np.uint64(0xFFFF)) < bright, hi + np.uint8(200), hi)
            labels[i - i0] = lab
    return imgs, labels


def synthetic(n, sample, classes, seed, jobs):
    """netc's synthetic training images 0..n-1 (the test images after them
    are not needed): uint8 [n, sample] NCHW, labels int64 [n]."""
    s0 = (seed * 0x2545F4914F6CDD1D + 7) & MASK
    chunk = 16
    parts = [(s0, i, min(i + chunk, n), sample, classes) for i in range(0, n, chunk)]
    if jobs > 1:
        import multiprocessing as mp

        with mp.Pool(jobs) as pool:
            res = pool.map(image_bytes, parts)
    else:
        res = [image_bytes(p) for p in parts]
    return np.concatenate([r[0] for r in res]), np.concatenate([r[1] for r in res])


class Order:
    """net_train.c's per-epoch Fisher-Yates shuffle, one generator for the run."""

    def __init__(self, n, seed):
        self.order = list(range(n))
        self.rng = (seed ^ 0x5F3759DF2545F491) & MASK

    def shuffle(self):
        o = self.order
        for i in range(len(o) - 1, 0, -1):
            r, self.rng = mix_py(self.rng)
            j = r % (i + 1)
            o[i], o[j] = o[j], o[i]
        return o


def sched_lr(lr, t, spe, epochs, warmup_epochs):
    """rt_sched_lr for cosine(warmup_epochs) over epochs * spe steps."""
    total = epochs * spe
    warm = warmup_epochs * spe
    if warmup_epochs > 0 and warmup_epochs >= epochs:
        warm = total // 2
    t = min(max(t, 0), total - 1)
    if t < warm:
        return lr * (t + 1) / warm
    return lr * 0.5 * (1.0 + math.cos(math.pi * (t - warm) / (total - warm)))


C_CHECK = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
int main(int argc, char **argv) { /* seed total sample classes: label and checksum of each image */
  uint64_t seed = strtoull(argv[1], 0, 10); int64_t total = atoll(argv[2]), sample = atoll(argv[3]), classes = atoll(argv[4]);
  uint64_t s = seed * 0x2545f4914f6cdd1dull + 7;
  for (int64_t i = 0; i < total; i++) {
    int lab = (int)(mix(&s) % (uint64_t)classes);
    uint64_t bright = (uint64_t)(((double)lab + 0.5) / (double)classes * 65536.0), sum = 0;
    for (int64_t p = 0; p < sample; p++) {
      uint64_t r = mix(&s);
      uint8_t v = (uint8_t)((r & 0xffff) < bright ? 200 + (r >> 16) % 56 : (r >> 16) % 56);
      sum = sum * 31 + v;
    }
    printf("%d %llu\n", lab, (unsigned long long)sum);
  }
  uint64_t o = seed ^ 0x5f3759df2545f491ull; /* the shuffle's first draws */
  for (int k = 0; k < 5; k++) printf("%llu\n", (unsigned long long)(mix(&o) % 1000));
  return 0;
}
"""


def check(seed):
    """The generator against a C transcription of net_train.c's synthetic()."""
    import subprocess
    import tempfile

    total, sample, classes = 6, 3 * 8 * 8, 10
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "c.c"), os.path.join(d, "c")
        open(src, "w").write(C_CHECK)
        subprocess.run(["cc", "-O1", "-o", exe, src], check=True)
        lines = subprocess.run([exe, str(seed), str(total), str(sample), str(classes)], check=True,
                               capture_output=True, text=True).stdout.split("\n")
    imgs, labels = synthetic(total, sample, classes, seed, 1)
    ok = True
    for i in range(total):
        s = 0
        for v in imgs[i]:
            s = (s * 31 + int(v)) & MASK
        lab, want = lines[i].split()
        ok &= int(lab) == labels[i] and int(want) == s
    rng = (seed ^ 0x5F3759DF2545F491) & MASK
    for k in range(5):
        r, rng = mix_py(rng)
        ok &= int(lines[total + k]) == r % 1000
    print(f"divergence.py: generator {'matches' if ok else 'DIFFERS FROM'} netc's synthetic() (seed {seed})")
    return ok


def read_safetensors(path):
    """The tensors of a safetensors file (F32, F16, BF16 as float32; I64) by name, without the package."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    head = json.loads(raw[8:8 + n])
    head.pop("__metadata__", None)
    kinds = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}
    out = {}
    for name, t in head.items():
        a, b = t["data_offsets"]
        buf = raw[8 + n + a:8 + n + b]
        if t["dtype"] == "BF16":
            v = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif t["dtype"] in kinds:
            v = np.frombuffer(buf, kinds[t["dtype"]]).astype(np.float32 if t["dtype"] == "F16" else kinds[t["dtype"]])
        else:
            sys.exit(f"divergence.py: error: {path}: {name} is {t['dtype']}")
        out[name] = v.reshape(t["shape"]).copy()
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1, help="warm-up epochs (default 1; resnet50.net says 5)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--n", type=int, default=0, help="training images (default 16 * batch, as netrun --synthetic)")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--image", type=int, default=224, help="image side (default 224)")
    p.add_argument("--seed", type=int, default=1, help="netrun's --seed (default 1)")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--amp", choices=("bf16", "fp16", "fp32"), default="bf16")
    p.add_argument("--arch", default="resnet50")
    p.add_argument("--device", default="cuda")
    p.add_argument("--log", help="write the JSON lines here too")
    p.add_argument("--data-cache", help="a .npz to keep the generated images in (made when absent)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes for the generator")
    p.add_argument("--torch-seed", type=int, default=0, help="torch.manual_seed for the initial weights")
    p.add_argument("--init", help="start from this state_dict (safetensors: netrun export's, e.g. netc's "
                   "initialization), loaded strictly, instead of torch's own draw")
    p.add_argument("--check", action="store_true", help="check the generator against C, then exit")
    a = p.parse_args(argv)
    if a.check:
        return 0 if check(a.seed) else 1
    for name in ("epochs", "batch", "classes", "image", "jobs", "seed"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.warmup < 0 or a.n < 0:
        p.error("--warmup and --n must not be negative")
    n = a.n or 16 * a.batch
    if n < a.batch:
        p.error(f"--n {n} is less than one batch of {a.batch}")
    spe = n // a.batch
    sample = 3 * a.image * a.image

    t0 = time.time()
    if a.data_cache and os.path.exists(a.data_cache):
        z = np.load(a.data_cache)
        imgs, labels = z["images"], z["labels"]
        if imgs.shape != (n, sample) or int(z["seed"]) != a.seed or int(z["classes"]) != a.classes:
            sys.exit(f"divergence.py: error: {a.data_cache} holds other data ({imgs.shape}, seed {int(z['seed'])}); "
                     "remove it")
    else:
        imgs, labels = synthetic(n, sample, a.classes, a.seed, a.jobs)
        if a.data_cache:
            np.savez(a.data_cache, images=imgs, labels=labels, seed=a.seed, classes=a.classes)
    gen_s = time.time() - t0

    import torch
    import torchvision

    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("divergence.py: error: --device cuda but torch sees no GPU")
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    log = open(a.log, "w") if a.log else None

    def emit(d):
        line = json.dumps(d)
        print(line, flush=True)
        if log:
            log.write(line + "\n")
            log.flush()

    emit({"what": "torch", "amp": a.amp, "torch": torch.__version__, "n": n, "steps_per_epoch": spe,
          "epochs": a.epochs, "warmup_epochs": a.warmup, "batch": a.batch, "seed": a.seed,
          "label_mean": round(float(labels.mean()), 2), "generate_s": round(gen_s, 1)})
    x_all = torch.from_numpy(imgs).view(n, 3, a.image, a.image).to(dev)  # bytes on the device: 0.6 GB at 256
    y_all = torch.from_numpy(labels).to(dev)
    torch.manual_seed(a.torch_seed)
    model = getattr(torchvision.models, a.arch)(num_classes=a.classes)
    if a.init:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in read_safetensors(a.init).items()}, strict=True)
    model = model.to(dev).to(memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay,
                          nesterov=False)
    crit = torch.nn.CrossEntropyLoss(label_smoothing=a.label_smoothing)
    scaler = torch.amp.GradScaler("cuda", init_scale=65536.0, growth_interval=2000) if a.amp == "fp16" else None
    adtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.amp)
    order = Order(n, a.seed)
    t = 0
    for e in range(a.epochs):
        o = torch.tensor(order.shuffle(), device=dev)
        losses = []
        for b in range(spe):
            idx = o[b * a.batch:(b + 1) * a.batch]
            x = (x_all[idx].float() * (1.0 / (255.0 * 0.5)) - 1.0).contiguous(memory_format=torch.channels_last)
            y = y_all[idx]
            lr = sched_lr(a.lr, t, spe, a.epochs, a.warmup)
            for g in opt.param_groups:
                g["lr"] = lr
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=adtype, enabled=adtype is not None):
                loss = crit(model(x), y)
            if scaler:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            t += 1
            lv = float(loss)
            losses.append(lv)
            rec = {"step": t, "epoch": e + 1, "lr": round(lr, 6), "loss": round(lv, 5)}
            if scaler:
                rec["loss_scale"] = scaler.get_scale()
            emit(rec)
        emit({"epoch": e + 1, "steps": spe, "loss_mean": round(sum(losses) / len(losses), 5)})
    if log:
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
