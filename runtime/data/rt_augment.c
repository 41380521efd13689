/* rt_augment.c - crops, resizes and flips from an RGB picture into u8 CHW.
 *
 * Every transform of large inputs is one window (rt_augment_window) and
 * one call of rt_augment_apply: the picture region (x0, y0, cw, ch) in
 * source pixels -- fractional for the centre crop -- resized to HxW with
 * bilinear weights, optionally mirrored.  The window is drawn on the
 * picture's size in the file and mapped onto the picture as decoded
 * (DCT-scaled, rt_augment_window_scaled), so a decoder that works at full
 * size crops the same region.  pad_crop is a resize to HxW (often the
 * identity) then an integer shift with zero fill.  The random numbers come from splitmix64 seeded per image, so a
 * transform depends only on (seed, epoch, position), never on which
 * thread ran it. */
#include "rt_augment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PAD = 4, LARGE = 64 };

static const char *const NAMES[] = {"auto", "rrc", "pad_crop", "flip", "none"};

int rt_augment_parse(const char *name, RtAugKind *kind) {
  if (!name) {
    *kind = RT_AUG_AUTO;
    return 0;
  }
  for (int k = 0; k < (int)(sizeof NAMES / sizeof NAMES[0]); k++)
    if (strcmp(name, NAMES[k]) == 0) {
      *kind = (RtAugKind)k;
      return 0;
    }
  return -1;
}

const char *rt_augment_name(RtAugKind kind) { return kind >= RT_AUG_AUTO && kind <= RT_AUG_NONE ? NAMES[kind] : "?"; }

RtAugKind rt_augment_resolve(RtAugKind kind, int H, int W) {
  if (kind != RT_AUG_AUTO) return kind;
  return H >= LARGE && W >= LARGE ? RT_AUG_RRC : RT_AUG_PAD_CROP;
}

int rt_augment_min_short(RtAugKind kind, int train, int H, int W) {
  int side = H > W ? H : W;
  if (train && rt_augment_resolve(kind, H, W) == RT_AUG_RRC) return 2 * side;
  return side >= LARGE ? side * 256 / 224 : side;
}

int rt_augment_window_min_short(const RtAugWindow *win, int w, int h, int H, int W) {
  int shorter = w < h ? w : h;
  double f = fmax((double)W / win->cw, (double)H / win->ch); /* output pixels per picture pixel */
  if (!(f * shorter < shorter)) return shorter;              /* 1 or more (or NaN): no scaling */
  return (int)ceil(f * shorter);
}

static uint64_t next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return (double)(next(s) >> 11) * (1.0 / 9007199254740992.0); }

uint64_t rt_augment_seed(uint64_t seed, int64_t epoch, int64_t position) {
  uint64_t s = seed ^ 0x6a09e667f3bcc909ull;
  uint64_t a = next(&s) ^ (uint64_t)epoch;
  s = a;
  uint64_t b = next(&s) ^ (uint64_t)position;
  s = b;
  return next(&s);
}

/* The source coordinate of output pixel i of n along one axis: the window
 * starts at o and is len long, in a picture of `size` pixels; pixel
 * centres, clamped to the picture. */
static double coord(double o, double len, int n, int i, int size) {
  double f = o + (i + 0.5) * (len / n) - 0.5;
  if (f < 0) f = 0;
  if (f > size - 1) f = size - 1;
  return f;
}

/* One source row interpolated across: for each output column, in the order
 * it is stored (mirrored when the window flips), the row's value there, a
 * plane of W floats per channel. */
static void across(const uint8_t *row, const int *xi, const float *xf, int W, int flip, float *out) {
  float *o0 = out, *o1 = out + W, *o2 = out + 2 * W;
  ptrdiff_t step = 1;
  if (flip) o0 += W - 1, o1 += W - 1, o2 += W - 1, step = -1;
  for (int x = 0; x < W; x++, o0 += step, o1 += step, o2 += step) {
    const uint8_t *l = row + xi[2 * x], *r = row + xi[2 * x + 1];
    float wx = xf[x];
    *o0 = l[0] + wx * (float)(r[0] - l[0]);
    *o1 = l[1] + wx * (float)(r[1] - l[1]);
    *o2 = l[2] + wx * (float)(r[2] - l[2]);
  }
}

/* Bilinear: each output pixel interpolates across its two source rows,
 * then between them.  The rows interpolated across are kept (two of them),
 * since neighbouring output rows share source rows; the arithmetic per
 * pixel is the same as doing it all at once, so the result is too. */
void rt_augment_apply(const RtImage *src, const RtAugWindow *win, int H, int W, uint8_t *dst) {
  size_t plane = (size_t)H * (size_t)W;
  int *xi = malloc(sizeof(int) * 2 * (size_t)W);
  float *xf = malloc(sizeof(float) * (size_t)W), *rows = malloc(sizeof(float) * 6 * (size_t)W);
  if (!xi || !xf || !rows) {
    /* a shortage of a few KiB: give a black picture rather than crash */
    memset(dst, 0, 3 * plane);
    free(xi), free(xf), free(rows);
    return;
  }
  for (int x = 0; x < W; x++) {
    double fx = coord(win->x0, win->cw, W, x, src->w);
    int a = (int)fx;
    xi[2 * x] = 3 * a, xi[2 * x + 1] = 3 * (a + 1 < src->w ? a + 1 : a); /* byte offsets in a row */
    xf[x] = (float)(fx - a);
  }
  int key[2] = {-1, -1}; /* the source row each of the two kept rows holds */
  size_t stride = (size_t)src->w * 3;
  for (int y = 0; y < H; y++) {
    double fy = coord(win->y0, win->ch, H, y, src->h);
    int a = (int)fy, b = a + 1 < src->h ? a + 1 : a;
    float wy = (float)(fy - a);
    int sa = key[0] == a ? 0 : key[1] == a ? 1 : -1;
    if (sa < 0) {
      sa = key[0] == b ? 1 : 0; /* keep b's row if it is held */
      across(src->px + (size_t)a * stride, xi, xf, W, win->flip, rows + (size_t)sa * 3 * W);
      key[sa] = a;
    }
    int sb = key[sa] == b ? sa : key[1 - sa] == b ? 1 - sa : -1;
    if (sb < 0) {
      sb = 1 - sa;
      across(src->px + (size_t)b * stride, xi, xf, W, win->flip, rows + (size_t)sb * 3 * W);
      key[sb] = b;
    }
    for (int c = 0; c < 3; c++) {
      const float *top = rows + ((size_t)sa * 3 + c) * W, *bot = rows + ((size_t)sb * 3 + c) * W;
      uint8_t *o = dst + c * plane + (size_t)y * W;
      for (int x = 0; x < W; x++) o[x] = (uint8_t)(top[x] + wy * (bot[x] - top[x]) + 0.5f);
    }
  }
  free(xi), free(xf), free(rows);
}

void rt_augment_footprint(const RtAugWindow *win, int w, int h, int H, int W, int box[4]) {
  /* coord() rises with the output index: the first and last samples bound
   * every one, and each reads its pixel and the next */
  int x0 = (int)coord(win->x0, win->cw, W, 0, w), x1 = (int)coord(win->x0, win->cw, W, W - 1, w) + 1;
  int y0 = (int)coord(win->y0, win->ch, H, 0, h), y1 = (int)coord(win->y0, win->ch, H, H - 1, h) + 1;
  box[0] = x0, box[1] = y0, box[2] = x1 < w ? x1 : w - 1, box[3] = y1 < h ? y1 : h - 1;
}

/* Resize(H*256/224) + CenterCrop(HxW) of a w x h picture, in its pixels. */
static RtAugWindow centre(int w, int h, int H, int W) {
  double shorter = w < h ? w : h;
  double scale = (double)(H * 256 / 224) / shorter; /* resized pixels per source pixel */
  double cw = W / scale, ch = H / scale;
  return (RtAugWindow){(w - cw) / 2, (h - ch) / 2, cw, ch, 0};
}

/* torchvision's RandomResizedCrop.get_params on a w x h picture: ten tries
 * at a random area and ratio, then the whole picture's centre at the
 * nearest allowed ratio.  The region is whole pixels. */
static RtAugWindow rrc_region(int pw, int ph, uint64_t *rng) {
  double area = (double)pw * ph, lo = log(3.0 / 4.0), hi = log(4.0 / 3.0);
  for (int t = 0; t < 10; t++) {
    double target = area * (0.08 + 0.92 * uniform(rng));
    double ratio = exp(lo + (hi - lo) * uniform(rng));
    int w = (int)lround(sqrt(target * ratio)), h = (int)lround(sqrt(target / ratio));
    if (w > 0 && h > 0 && w <= pw && h <= ph) {
      int x0 = (int)(next(rng) % (uint64_t)(pw - w + 1));
      int y0 = (int)(next(rng) % (uint64_t)(ph - h + 1));
      return (RtAugWindow){x0, y0, w, h, 0};
    }
  }
  double in_ratio = (double)pw / ph;
  int w = pw, h = ph;
  if (in_ratio < 3.0 / 4.0)
    h = (int)lround(w / (3.0 / 4.0));
  else if (in_ratio > 4.0 / 3.0)
    w = (int)lround(h * (4.0 / 3.0));
  return (RtAugWindow){(pw - w) / 2, (ph - h) / 2, w, h, 0};
}

/* The window of a transform that is one, at any input size: rrc always,
 * flip and none and evaluation only for large inputs.  -1 otherwise. */
static int window(RtAugKind kind, int train, uint64_t seed, int w, int h, int H, int W, RtAugWindow *win) {
  uint64_t rng = seed;
  int large = H >= LARGE && W >= LARGE;
  if (!train) {
    if (!large) return -1;
    *win = centre(w, h, H, W);
    return 0;
  }
  switch (rt_augment_resolve(kind, H, W)) {
  case RT_AUG_RRC:
    *win = rrc_region(w, h, &rng);
    win->flip = (int)(next(&rng) & 1);
    return 0;
  case RT_AUG_FLIP:
    if (!large) return -1;
    *win = centre(w, h, H, W);
    win->flip = (int)(next(&rng) & 1);
    return 0;
  case RT_AUG_NONE:
    if (!large) return -1;
    *win = centre(w, h, H, W);
    return 0;
  default: return -1;
  }
}

int rt_augment_window(RtAugKind kind, int train, uint64_t seed, int w, int h, int H, int W, RtAugWindow *win) {
  if (H < LARGE || W < LARGE || w < 1 || h < 1) return -1;
  return window(kind, train, seed, w, h, H, W, win);
}

/* libjpeg's DCT scaling by 1/d makes ceil(w / d) pixels, each covering d
 * pixels of the full picture (the last one partly outside it): the exact
 * map is 1/d, not sw / w.  Other sizes are a plain resize. */
RtAugWindow rt_augment_window_scaled(const RtAugWindow *win, int w, int h, int sw, int sh) {
  double fx = (double)sw / w, fy = (double)sh / h;
  for (int d = 1; d <= 8; d *= 2)
    if ((w + d - 1) / d == sw && (h + d - 1) / d == sh) {
      fx = fy = 1.0 / d;
      break;
    }
  return (RtAugWindow){win->x0 * fx, win->y0 * fy, win->cw * fx, win->ch * fy, win->flip};
}

/* A window drawn on the picture's size in the file, applied to it as
 * decoded (perhaps DCT-scaled). */
static int full_w(const RtImage *src) { return src->full_w > 0 ? src->full_w : src->w; }
static int full_h(const RtImage *src) { return src->full_h > 0 ? src->full_h : src->h; }

static void apply_full(const RtImage *src, const RtAugWindow *win, int H, int W, uint8_t *dst) {
  RtAugWindow s = rt_augment_window_scaled(win, full_w(src), full_h(src), src->w, src->h);
  rt_augment_apply(src, &s, H, W, dst);
}

void rt_augment_eval(const RtImage *src, int H, int W, uint8_t *dst) {
  RtAugWindow win;
  if (window(RT_AUG_NONE, 0, 0, full_w(src), full_h(src), H, W, &win) == 0) {
    apply_full(src, &win, H, W, dst);
    return;
  }
  if (src->w == W && src->h == H) {
    size_t plane = (size_t)H * (size_t)W;
    for (size_t p = 0; p < plane; p++)
      for (int c = 0; c < 3; c++) dst[c * plane + p] = src->px[p * 3 + (size_t)c];
    return;
  }
  rt_augment_apply(src, &(RtAugWindow){0, 0, src->w, src->h, 0}, H, W, dst);
}

static void pad_crop(uint8_t *img, int H, int W, int dx, int dy, int flip) {
  size_t plane = (size_t)H * (size_t)W;
  uint8_t *tmp = malloc(plane);
  if (!tmp) return;
  for (int c = 0; c < 3; c++) {
    uint8_t *p = img + (size_t)c * plane;
    memcpy(tmp, p, plane);
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) {
        int sx = (flip ? W - 1 - x : x) + dx, sy = y + dy;
        p[(size_t)y * W + x] = sx >= 0 && sx < W && sy >= 0 && sy < H ? tmp[(size_t)sy * W + sx] : 0;
      }
  }
  free(tmp);
}

void rt_augment_train(const RtImage *src, RtAugKind kind, uint64_t seed, int H, int W, uint8_t *dst) {
  RtAugWindow win;
  if (window(kind, 1, seed, full_w(src), full_h(src), H, W, &win) == 0) {
    apply_full(src, &win, H, W, dst);
    return;
  }
  uint64_t rng = seed;
  switch (rt_augment_resolve(kind, H, W)) {
  case RT_AUG_PAD_CROP: {
    rt_augment_eval(src, H, W, dst);
    int dx = (int)(next(&rng) % (2 * PAD + 1)) - PAD, dy = (int)(next(&rng) % (2 * PAD + 1)) - PAD;
    pad_crop(dst, H, W, dx, dy, (int)(next(&rng) & 1));
    return;
  }
  case RT_AUG_FLIP:
    rt_augment_eval(src, H, W, dst);
    if (next(&rng) & 1) pad_crop(dst, H, W, 0, 0, 1);
    return;
  default: rt_augment_eval(src, H, W, dst);
  }
}
