"""train_cifar10.py - PyTorch's side of the CIFAR-10 convergence comparison.

Trains the network of models/resnet20.net -- a 3x3 stem of 16 channels,
three stages of three basic blocks at 16, 32 and 64 channels (the first
block of stages 2 and 3 with stride 2 and a 1x1 convolution + batch norm
shortcut), global average pooling and a linear classifier -- with the
recipe of its train section, which is what `netrun train` uses:

  initialization  torchvision's: convolutions kaiming_normal(fan_out, relu),
                  batch norm weight 1 / bias 0, linear layer PyTorch's default
  optimizer       SGD lr 0.1, momentum 0.9, nesterov, weight decay 5e-4 on
                  every parameter, batch 128, the last partial batch dropped
  schedule        per step: linear warm-up over the first epoch
                  (lr * (t+1) / W), then cosine to 0 at the end of the run
  augmentation    4-pixel zero padding + random 32x32 crop + horizontal flip
  input           x/255 normalized by CIFAR-10's per-channel mean and std
  precision       AMP fp16 with channels_last (the usual fast PyTorch setup)

The images are the ImageFolder JPEG files (root/train/<class>/*.jpg,
root/test/<class>/*.jpg), decoded once with PIL into memory; the
augmentation runs on the GPU.  Prints one JSON line per epoch (epoch,
loss_mean, test_accuracy, seconds) and a final summary line.

usage: train_cifar10.py ROOT [--epochs N] [--seed S] [--log FILE.jsonl]
"""
import argparse
import json
import math
import os
import sys
import time

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def load_split(root, split):
    import numpy as np
    from PIL import Image
    classes = sorted(d for d in os.listdir(os.path.join(root, split))
                     if os.path.isdir(os.path.join(root, split, d)))
    images, labels = [], []
    for label, c in enumerate(classes):
        folder = os.path.join(root, split, c)
        for f in sorted(os.listdir(folder)):
            if f.lower().endswith((".jpg", ".jpeg")):
                with Image.open(os.path.join(folder, f)) as im:
                    images.append(np.asarray(im.convert("RGB"), dtype=np.uint8))
                labels.append(label)
    return np.stack(images), np.array(labels, dtype=np.int64), classes


def resnet20(torch):
    nn = torch.nn

    class Basic(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.downsample = None
            if stride != 1 or cin != width:
                self.downsample = nn.Sequential(nn.Conv2d(cin, width, 1, stride, bias=False), nn.BatchNorm2d(width))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.downsample is None else self.downsample(x)))

    class ResNet20(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            stages, cin = [], 16
            for width, stride in ((16, 1), (32, 2), (64, 2)):
                blocks = []
                for i in range(3):
                    blocks.append(Basic(cin, width, stride if i == 0 else 1))
                    cin = width
                stages.append(nn.Sequential(*blocks))
            self.layer1, self.layer2, self.layer3 = stages
            self.fc = nn.Linear(64, 10)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)

        def forward(self, x):
            x = torch.relu(self.bn1(self.conv1(x)))
            x = self.layer3(self.layer2(self.layer1(x)))
            return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))

    return ResNet20()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("skipped: no torch")
        return 77
    if not torch.cuda.is_available():
        print("skipped: no GPU for PyTorch")
        return 77
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    t0 = time.time()
    xtr, ytr, classes = load_split(args.root, "train")
    xte, yte, _ = load_split(args.root, "test")
    print(f"loaded {len(xtr)} training and {len(xte)} test images of {len(classes)} classes "
          f"in {time.time() - t0:.1f} s", flush=True)
    mean = torch.tensor(MEAN, device=dev).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=dev).view(1, 3, 1, 1)
    xtr = torch.from_numpy(xtr).to(dev).permute(0, 3, 1, 2).contiguous()
    ytr = torch.from_numpy(ytr).to(dev)
    xte = ((torch.from_numpy(xte).to(dev).permute(0, 3, 1, 2).float() / 255 - mean) / std)
    xte = xte.contiguous(memory_format=torch.channels_last)
    yte = torch.from_numpy(yte).to(dev)

    model = resnet20(torch).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    crit = torch.nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler("cuda")
    B, n = args.batch, len(xtr)
    spe = n // B
    total, warm = spe * args.epochs, spe * 1

    def lr_at(t):
        if t < warm:
            return 0.1 * (t + 1) / warm
        return 0.1 * (1 + math.cos(math.pi * (t - warm) / (total - warm))) / 2

    log = open(args.log, "w") if args.log else None
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    t, acc = 0, 0.0
    train_start = time.time()
    for epoch in range(args.epochs):
        model.train()
        e0 = time.time()
        order = torch.randperm(n, device=dev, generator=gen)
        loss_sum = torch.zeros((), device=dev)
        for b in range(spe):
            idx = order[b * B:(b + 1) * B]
            x = torch.nn.functional.pad(xtr[idx], (4, 4, 4, 4))
            dy = torch.randint(0, 9, (B,), device=dev, generator=gen)
            dx = torch.randint(0, 9, (B,), device=dev, generator=gen)
            rows = (dy.view(B, 1) + torch.arange(32, device=dev).view(1, 32))
            cols = (dx.view(B, 1) + torch.arange(32, device=dev).view(1, 32))
            x = x[torch.arange(B, device=dev).view(B, 1, 1, 1), torch.arange(3, device=dev).view(1, 3, 1, 1),
                  rows.view(B, 1, 32, 1), cols.view(B, 1, 1, 32)]
            flip = torch.rand(B, device=dev, generator=gen) < 0.5
            x = torch.where(flip.view(B, 1, 1, 1), x.flip(3), x)
            x = ((x.float() / 255 - mean) / std).contiguous(memory_format=torch.channels_last)
            for g in opt.param_groups:
                g["lr"] = lr_at(t)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = crit(model(x).float(), ytr[idx])
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            loss_sum += loss.detach()
            t += 1
        model.eval()
        right = 0
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
            for i in range(0, len(xte), 1000):
                right += int((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum())
        acc = right / len(xte)
        rec = {"epoch": epoch + 1, "steps": spe, "loss_mean": float(loss_sum) / spe, "test_accuracy": acc,
               "seconds": round(time.time() - e0, 2)}
        print(json.dumps(rec), flush=True)
        if log:
            log.write(json.dumps(rec) + "\n")
    if log:
        log.close()
    print(f"pytorch resnet20: {args.epochs} epochs, {t} steps, test accuracy {100 * acc:.2f}%, "
          f"{time.time() - train_start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
