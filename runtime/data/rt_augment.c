/* rt_augment.c - crops, resizes and flips from an RGB picture into u8 CHW.
 *
 * Every transform is one call of sample(): the picture region (x0, y0,
 * cw, ch) in source pixels -- fractional for the centre crop -- resized
 * to HxW with bilinear weights, optionally mirrored.  pad_crop is a
 * resize to HxW (often the identity) then an integer shift with zero
 * fill.  The random numbers come from splitmix64 seeded per image, so a
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

/* Bilinear resize of region (x0, y0, cw, ch) of src to HxW into CHW dst. */
static void sample(const RtImage *src, double x0, double y0, double cw, double ch, int H, int W, int flip,
                   uint8_t *dst) {
  size_t plane = (size_t)H * (size_t)W;
  double sx = cw / W, sy = ch / H;
  int *xi = malloc(sizeof(int) * 2 * (size_t)W);
  float *xf = malloc(sizeof(float) * (size_t)W);
  if (!xi || !xf) {
    /* a shortage of a few KiB: give a black picture rather than crash */
    memset(dst, 0, 3 * plane);
    free(xi), free(xf);
    return;
  }
  for (int x = 0; x < W; x++) {
    double fx = x0 + (x + 0.5) * sx - 0.5;
    if (fx < 0) fx = 0;
    if (fx > src->w - 1) fx = src->w - 1;
    int a = (int)fx;
    xi[2 * x] = a, xi[2 * x + 1] = a + 1 < src->w ? a + 1 : a;
    xf[x] = (float)(fx - a);
  }
  for (int y = 0; y < H; y++) {
    double fy = y0 + (y + 0.5) * sy - 0.5;
    if (fy < 0) fy = 0;
    if (fy > src->h - 1) fy = src->h - 1;
    int a = (int)fy, b = a + 1 < src->h ? a + 1 : a;
    float wy = (float)(fy - a);
    const uint8_t *r0 = src->px + (size_t)a * (size_t)src->w * 3, *r1 = src->px + (size_t)b * (size_t)src->w * 3;
    for (int x = 0; x < W; x++) {
      int l = xi[2 * x] * 3, r = xi[2 * x + 1] * 3;
      float wx = xf[x];
      size_t at = (size_t)y * (size_t)W + (size_t)(flip ? W - 1 - x : x);
      for (int c = 0; c < 3; c++) {
        float top = r0[l + c] + wx * (float)(r0[r + c] - r0[l + c]);
        float bot = r1[l + c] + wx * (float)(r1[r + c] - r1[l + c]);
        dst[c * plane + at] = (uint8_t)(top + wy * (bot - top) + 0.5f);
      }
    }
  }
  free(xi), free(xf);
}

void rt_augment_eval(const RtImage *src, int H, int W, uint8_t *dst) {
  if (H >= LARGE && W >= LARGE) {
    double shorter = src->w < src->h ? src->w : src->h;
    double scale = (double)(H * 256 / 224) / shorter; /* resized pixels per source pixel */
    double cw = W / scale, ch = H / scale;
    sample(src, (src->w - cw) / 2, (src->h - ch) / 2, cw, ch, H, W, 0, dst);
    return;
  }
  if (src->w == W && src->h == H) {
    size_t plane = (size_t)H * (size_t)W;
    for (size_t p = 0; p < plane; p++)
      for (int c = 0; c < 3; c++) dst[c * plane + p] = src->px[p * 3 + (size_t)c];
    return;
  }
  sample(src, 0, 0, src->w, src->h, H, W, 0, dst);
}

/* torchvision's RandomResizedCrop.get_params: ten tries at a random area
 * and ratio, then the whole picture's centre at the nearest allowed ratio. */
static void rrc_region(const RtImage *src, uint64_t *rng, int *x0, int *y0, int *cw, int *ch) {
  double area = (double)src->w * src->h, lo = log(3.0 / 4.0), hi = log(4.0 / 3.0);
  for (int t = 0; t < 10; t++) {
    double target = area * (0.08 + 0.92 * uniform(rng));
    double ratio = exp(lo + (hi - lo) * uniform(rng));
    int w = (int)lround(sqrt(target * ratio)), h = (int)lround(sqrt(target / ratio));
    if (w > 0 && h > 0 && w <= src->w && h <= src->h) {
      *x0 = (int)(next(rng) % (uint64_t)(src->w - w + 1));
      *y0 = (int)(next(rng) % (uint64_t)(src->h - h + 1));
      *cw = w, *ch = h;
      return;
    }
  }
  double in_ratio = (double)src->w / src->h;
  int w = src->w, h = src->h;
  if (in_ratio < 3.0 / 4.0)
    h = (int)lround(w / (3.0 / 4.0));
  else if (in_ratio > 4.0 / 3.0)
    w = (int)lround(h * (4.0 / 3.0));
  *cw = w, *ch = h, *x0 = (src->w - w) / 2, *y0 = (src->h - h) / 2;
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
  uint64_t rng = seed;
  switch (rt_augment_resolve(kind, H, W)) {
  case RT_AUG_RRC: {
    int x0, y0, cw, ch;
    rrc_region(src, &rng, &x0, &y0, &cw, &ch);
    int flip = (int)(next(&rng) & 1);
    sample(src, x0, y0, cw, ch, H, W, flip, dst);
    return;
  }
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
