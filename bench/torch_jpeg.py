#!/usr/bin/env python3
"""bench/torch_jpeg.py - PyTorch's usual input path from JPEG files, timed.

    python3 bench/torch_jpeg.py DIR [--mode train|loader] [--arch resnet50]
        [--batch 256] [--epochs 3] [--workers N] [--classes 1000]
        [--device cuda|cpu] [--no-compile] [--max-steps N]

DIR is an ImageFolder (DIR/<class>/*.JPEG, or DIR/train/<class>/...).  The
input pipeline is torchvision's ImageNet training recipe: ImageFolder (PIL
decoding) + DataLoader (--workers processes, default all cores, pin_memory,
persistent workers, drop_last, shuffle) with RandomResizedCrop(224),
RandomHorizontalFlip, ToTensor and Normalize(ImageNet's mean and std).

--mode train: torchvision's --arch trained with the fastest PyTorch
configuration measured on the H200 (shared/GPU.md): torch.compile, bf16
autocast, channels_last, SGD momentum 0.9 (lr 0.1, weight decay 1e-4, not
fused), cross-entropy.  --mode loader: the same DataLoader alone, each batch
copied to the device (non_blocking) and nothing else: the input pipeline's
own rate.

Prints one JSON line per epoch ({"mode", "epoch", "steps", "seconds",
"img_s"}), then a summary line with "steady_img_s": the images of epochs 2
and later over their seconds (epoch 1 holds the workers' start and the
compile).  With one epoch the summary is epoch 1's rate.
"""
import argparse
import json
import os
import sys
import time


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", help="ImageFolder root (DIR/train is used when it exists)")
    p.add_argument("--mode", choices=("train", "loader"), default="train")
    p.add_argument("--arch", default="resnet50", help="a torchvision classification model (default resnet50)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="DataLoader workers (default: all cores)")
    p.add_argument("--classes", type=int, default=1000, help="the model's classes (default 1000, as netc's ResNet-50)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--no-compile", action="store_true", help="eager mode (AMP bf16, channels_last)")
    p.add_argument("--max-steps", type=int, default=0, help="stop each epoch after N steps (0: the whole epoch)")
    a = p.parse_args(argv)
    for name in ("batch", "epochs", "workers", "classes"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be at least 1, not {getattr(a, name)}")
    root = os.path.join(a.dir, "train") if os.path.isdir(os.path.join(a.dir, "train")) else a.dir
    if not os.path.isdir(root):
        p.error(f"{a.dir}: not a folder")
    a.root = root
    return a


def main(argv=None):
    a = parse(argv)
    import torch
    import torchvision
    from torchvision import transforms as T

    if not callable(getattr(torchvision.models, a.arch, None)):
        sys.exit(f"torch_jpeg.py: error: torchvision has no model '{a.arch}' (--arch)")
    torch.backends.cudnn.benchmark = True
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_jpeg.py: error: --device cuda but torch sees no GPU")
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
    ds = torchvision.datasets.ImageFolder(a.root, transform=tf)
    if len(ds) < a.batch:
        sys.exit(f"torch_jpeg.py: error: {a.root}: {len(ds)} images, fewer than one batch of {a.batch}")
    if len(ds.classes) > a.classes:
        sys.exit(f"torch_jpeg.py: error: {a.root}: {len(ds.classes)} classes, more than --classes {a.classes}")
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                                     pin_memory=dev.type == "cuda", persistent_workers=True, drop_last=True,
                                     prefetch_factor=4)
    info = {"torch": torch.__version__, "torchvision": torchvision.__version__, "mode": a.mode, "arch": a.arch,
            "batch": a.batch, "workers": a.workers, "images": len(ds), "classes": len(ds.classes),
            "steps_per_epoch": len(dl), "compile": a.mode == "train" and not a.no_compile}
    if dev.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
    print(json.dumps(info), flush=True)

    step = None
    if a.mode == "train":
        torch.manual_seed(0)
        model = getattr(torchvision.models, a.arch)(num_classes=a.classes).to(dev).to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        crit = torch.nn.CrossEntropyLoss()
        fwd = model if a.no_compile else torch.compile(model)

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                loss = crit(fwd(x), y)
            loss.backward()
            opt.step()
            return loss

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    steady_imgs, steady_s, last = 0, 0.0, None
    for epoch in range(1, a.epochs + 1):
        t0, steps, loss = time.time(), 0, None
        for x, y in dl:
            x = x.to(dev, non_blocking=True).contiguous(memory_format=torch.channels_last)
            y = y.to(dev, non_blocking=True)
            if step:
                loss = step(x, y)
            steps += 1
            if a.max_steps and steps >= a.max_steps:
                break
        sync()
        dt = time.time() - t0
        r = {"mode": a.mode, "epoch": epoch, "steps": steps, "seconds": round(dt, 3),
             "img_s": round(steps * a.batch / dt, 1)}
        if loss is not None:
            r["loss_last"] = round(float(loss), 4)
        print(json.dumps(r), flush=True)
        last = r
        if epoch >= 2:
            steady_imgs, steady_s = steady_imgs + steps * a.batch, steady_s + dt
    steady = round(steady_imgs / steady_s, 1) if steady_s > 0 else last["img_s"]
    out = {"mode": a.mode, "summary": True, "steady_img_s": steady, "epochs_timed": max(a.epochs - 1, 1)}
    if dev.type == "cuda":
        out["peak_GiB"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
