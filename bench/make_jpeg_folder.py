#!/usr/bin/env python3
"""bench/make_jpeg_folder.py - an ImageNet-like ImageFolder of generated JPEGs.

    python3 bench/make_jpeg_folder.py DIR [--n 6400] [--classes 100] [--val 0]
                                          [--seed 1] [--quality 90] [--jobs N]

Writes DIR/train/n00000/..., one folder per class (n00000, n00001, ...), the
--n training images dealt round-robin over the classes, and with --val M a
DIR/val/ split of M more images in the same class folders (netrun train
--data needs DIR/train and DIR/val or DIR/test; torchvision's ImageFolder
needs only the train folder).  Nothing here is committed: the folder is made
where the benchmark runs (bench/jpeg_bench.sh).

What the files look like, to make a decoder work as hard as on ImageNet's
training set (mean ~110 KB, 500x375 typical):
  - sizes: ~60% landscape 500 x 375 or 333 (or 334..499), ~25% portrait
    375|333 x 500, ~15% anything from 333 to 500 on each side;
  - content: a smooth colour field (a few random colours upsampled), mid-
    frequency texture (noise upsampled 2-8x), hard-edged shapes (ellipses,
    rectangles, polygons, lines) and fine per-pixel noise; the amounts vary
    per image, so the file sizes spread as photos' do; the class tints the
    colours slightly (so a model could learn something, not much);
  - encoding: baseline JPEG, quality --quality (90), 4:2:0 chroma, standard
    Huffman tables, like most of ImageNet; 1% progressive; 0.5% greyscale.
Deterministic: image i of a split depends only on (--seed, split, i) and the
options, never on --jobs.  Prints the count, the mean and spread of the file
sizes, the share of each kind and the time taken.
"""
import argparse
import math
import multiprocessing as mp
import os
import sys
import time

try:
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter  # noqa: F401 (ImageFilter: Pillow present in full)
except ImportError as e:  # pragma: no cover
    sys.exit(f"make_jpeg_folder.py: error: needs numpy and Pillow ({e}); pip install numpy pillow")

SPLITS = {"train": 0, "val": 1}
PROGRESSIVE_SHARE = 0.01
GREY_SHARE = 0.005
TEX, CHROMA, GRAIN, SHAPES = 34.0, 6.0, 16.0, (30, 80)  # tuned: ~105 KiB mean at --detail 1


def image_size(rng):
    """(width, height) drawn like ImageNet's: mostly 500 x 375/333, some portrait."""
    u = rng.random()
    if u < 0.60:
        h = rng.choice([375, 375, 375, 333, int(rng.integers(334, 500))])
        return 500, int(h)
    if u < 0.85:
        return int(rng.choice([375, 375, 333])), 500
    return int(rng.integers(333, 501)), int(rng.integers(333, 501))


def upsampled(rng, w, h, cells_w, cells_h, channels, resample):
    """Random values on a coarse grid (cells_w x cells_h), upsampled to w x h:
    float32 [h, w, channels], zero mean, about unit spread."""
    small = rng.standard_normal((cells_h, cells_w, channels)).astype(np.float32)
    out = np.empty((h, w, channels), np.float32)
    for c in range(channels):
        im = Image.fromarray(small[:, :, c], mode="F").resize((w, h), resample)
        out[:, :, c] = np.asarray(im)
    return out


def class_tint(label, classes):
    """An RGB offset per class (a hue around the colour wheel), +-12 levels."""
    a = 2 * math.pi * label / max(classes, 1)
    return np.array([math.cos(a), math.cos(a - 2.094), math.cos(a + 2.094)], np.float32) * 12


def draw_shapes(rng, w, h, count):
    """An RGB layer of random hard-edged shapes and its mask (L, 0/255)."""
    layer = Image.new("RGB", (w, h))
    mask = Image.new("L", (w, h), 0)
    dl, dm = ImageDraw.Draw(layer), ImageDraw.Draw(mask)
    for _ in range(count):
        col = tuple(int(v) for v in rng.integers(0, 256, 3))
        cx, cy = rng.integers(0, w), rng.integers(0, h)
        sx, sy = (int(v) for v in np.exp(rng.uniform(math.log(6), math.log(w / 2), 2)))
        box = [int(cx - sx / 2), int(cy - sy / 2), int(cx + sx / 2), int(cy + sy / 2)]
        kind = rng.integers(0, 4)
        if kind == 0:
            dl.ellipse(box, fill=col)
            dm.ellipse(box, fill=255)
        elif kind == 1:
            dl.rectangle(box, fill=col)
            dm.rectangle(box, fill=255)
        elif kind == 2:
            pts = [(int(cx + sx * math.cos(t)), int(cy + sy * math.sin(t)))
                   for t in np.sort(rng.random(int(rng.integers(3, 7)))) * 2 * math.pi]
            dl.polygon(pts, fill=col)
            dm.polygon(pts, fill=255)
        else:
            pts = [tuple(int(v) for v in (rng.integers(0, w), rng.integers(0, h))) for _ in range(2)]
            width = int(rng.integers(2, 12))
            dl.line(pts, fill=col, width=width)
            dm.line(pts, fill=255, width=width)
    return np.asarray(layer, np.float32), np.asarray(mask, np.float32)[:, :, None] / 255.0


def make_image(rng, label, classes, detail):
    """One picture as uint8 [h, w, 3]; `detail` scales the texture and noise."""
    w, h = image_size(rng)
    base = upsampled(rng, w, h, int(rng.integers(2, 6)), int(rng.integers(2, 6)), 3, Image.BICUBIC)
    img = 128 + 45 * base + class_tint(label, classes)
    # mid-frequency texture: two scales, luminance-heavy as in photos
    amp = detail * float(np.exp(rng.normal(0, 0.3)))  # how busy this picture is
    k = int(rng.integers(2, 5))
    tex = upsampled(rng, w, h, max(w // k, 2), max(h // k, 2), 1, Image.BILINEAR)
    tex2 = upsampled(rng, w, h, max(w // (3 * k), 2), max(h // (3 * k), 2), 3, Image.BICUBIC)
    shapes, mask = draw_shapes(rng, w, h, int(rng.integers(SHAPES[0], SHAPES[1])))
    shade = 1 + 0.25 * upsampled(rng, w, h, 3, 3, 1, Image.BICUBIC)
    img = img * (1 - mask) + shapes * shade * mask
    img += amp * (TEX * tex + CHROMA * tex2)  # over the shapes too: surfaces have texture
    # fine noise (sensor grain, fine detail), mostly in the luminance
    grain = rng.standard_normal((h, w, 1), np.float32) + 0.3 * rng.standard_normal((h, w, 3), np.float32)
    img += amp * GRAIN * grain
    return np.clip(img, 0, 255).astype(np.uint8)


def work(job):
    """Writes one image; returns (bytes, progressive, grey)."""
    path, seed, split, i, label, classes, quality, detail = job
    rng = np.random.default_rng([seed, SPLITS[split], i])
    kind = rng.random()
    progressive, grey = kind < PROGRESSIVE_SHARE, PROGRESSIVE_SHARE <= kind < PROGRESSIVE_SHARE + GREY_SHARE
    im = Image.fromarray(make_image(rng, label, classes, detail), "RGB")
    if grey:
        im = im.convert("L")
    tmp = path + ".tmp"
    im.save(tmp, "JPEG", quality=quality, subsampling=2, optimize=False, progressive=progressive)
    os.replace(tmp, path)
    return os.path.getsize(path), progressive, grey


def jobs_for(root, split, n, classes, seed, quality, detail):
    out = []
    for c in range(classes):
        os.makedirs(os.path.join(root, split, f"n{c:05d}"), exist_ok=True)
    for i in range(n):
        c = i % classes
        name = os.path.join(root, split, f"n{c:05d}", f"n{c:05d}_{i:08d}.JPEG")
        out.append((name, seed, split, i, c, classes, quality, detail))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="output folder (made; its train/ and val/ must not hold other files)")
    p.add_argument("--n", type=int, default=6400, help="training images (default 6400)")
    p.add_argument("--classes", type=int, default=100, help="class folders (default 100)")
    p.add_argument("--val", type=int, default=0, help="images in DIR/val (default 0: no val split)")
    p.add_argument("--seed", type=int, default=1, help="seed (default 1)")
    p.add_argument("--quality", type=int, default=90, help="JPEG quality (default 90)")
    p.add_argument("--detail", type=float, default=1.0,
                   help="texture and noise amount (default 1.0: ~105 KiB mean at ImageNet's sizes)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    a = p.parse_args(argv)
    for name, v, lo in (("--n", a.n, 1), ("--classes", a.classes, 1), ("--val", a.val, 0), ("--jobs", a.jobs, 1),
                        ("--seed", a.seed, 0)):
        if v < lo:
            p.error(f"{name} must be at least {lo}, not {v}")
    if not 1 <= a.quality <= 100:
        p.error(f"--quality must be 1..100, not {a.quality}")
    if not a.detail >= 0:
        p.error(f"--detail must be >= 0, not {a.detail}")
    if a.classes > a.n:
        p.error(f"--classes {a.classes} is more than --n {a.n}: some class folders would be empty")
    if a.val and a.val < a.classes:
        p.error(f"--val {a.val} is less than --classes {a.classes}: some val class folders would be empty")
    if os.path.exists(a.dir) and not os.path.isdir(a.dir):
        p.error(f"{a.dir} exists and is not a folder")
    t0 = time.time()
    jobs = jobs_for(a.dir, "train", a.n, a.classes, a.seed, a.quality, a.detail)
    if a.val:
        jobs += jobs_for(a.dir, "val", a.val, a.classes, a.seed, a.quality, a.detail)
    with mp.Pool(min(a.jobs, len(jobs))) as pool:
        res = pool.map(work, jobs, chunksize=max(1, len(jobs) // (8 * a.jobs)))
    sizes = np.array([r[0] for r in res], np.float64)
    prog, grey = sum(r[1] for r in res), sum(r[2] for r in res)
    dt = time.time() - t0
    print(f"make_jpeg_folder: {a.n} train + {a.val} val images in {a.classes} classes under {a.dir}: "
          f"mean {sizes.mean() / 1024:.1f} KiB (p10 {np.percentile(sizes, 10) / 1024:.0f}, "
          f"p90 {np.percentile(sizes, 90) / 1024:.0f}), total {sizes.sum() / 2**20:.0f} MiB, "
          f"{prog} progressive, {grey} grey; {dt:.1f} s with {a.jobs} processes "
          f"({len(jobs) / dt:.0f} images/s)", flush=True)


if __name__ == "__main__":
    main()
