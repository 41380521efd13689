/* test_window.c - the one-window transforms and the partial decode on
 * pictures made here: rt_augment_apply against the bilinear sampler it
 * replaced (a copy below, bit for bit), the windows of rrc and the
 * evaluation against the transforms as they were before windows were drawn
 * on the full size, RandomResizedCrop's limits, rt_augment_window_scaled,
 * DCT-scaled crops of the same region of the scene, rt_jpeg_header, and
 * rt_jpeg_decode_part against a full decode (baseline 4:4:4 and 4:2:0,
 * progressive, grey, every DCT scale).  Usage: data_test_window WORKDIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "jpegtest.h"
#include "rt_augment.h"
#include "rt_jpeg.h"

static char work[2048];

static const char *at(const char *rel) {
  static char buf[4][4096];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", work, rel);
  return buf[k];
}

/* --- the transforms before windows (rt_augment.c as it was) ------------- */

static uint64_t old_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double old_uniform(uint64_t *s) { return (double)(old_next(s) >> 11) * (1.0 / 9007199254740992.0); }

static void old_sample(const RtImage *src, double x0, double y0, double cw, double ch, int H, int W, int flip,
                       uint8_t *dst) {
  size_t plane = (size_t)H * (size_t)W;
  double sx = cw / W, sy = ch / H;
  static int xi[2 * 1024];
  static float xf[1024];
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
      size_t o = (size_t)y * (size_t)W + (size_t)(flip ? W - 1 - x : x);
      for (int c = 0; c < 3; c++) {
        float top = r0[l + c] + wx * (float)(r0[r + c] - r0[l + c]);
        float bot = r1[l + c] + wx * (float)(r1[r + c] - r1[l + c]);
        dst[c * plane + o] = (uint8_t)(top + wy * (bot - top) + 0.5f);
      }
    }
  }
}

static void old_eval(const RtImage *src, int H, int W, uint8_t *dst) {
  double shorter = src->w < src->h ? src->w : src->h;
  double scale = (double)(H * 256 / 224) / shorter;
  double cw = W / scale, ch = H / scale;
  old_sample(src, (src->w - cw) / 2, (src->h - ch) / 2, cw, ch, H, W, 0, dst);
}

static void old_rrc(const RtImage *src, uint64_t seed, int H, int W, uint8_t *dst) {
  uint64_t rng = seed;
  double area = (double)src->w * src->h, lo = log(3.0 / 4.0), hi = log(4.0 / 3.0);
  int x0 = -1, y0 = 0, cw = 0, ch = 0;
  for (int t = 0; t < 10 && x0 < 0; t++) {
    double target = area * (0.08 + 0.92 * old_uniform(&rng));
    double ratio = exp(lo + (hi - lo) * old_uniform(&rng));
    int w = (int)lround(sqrt(target * ratio)), h = (int)lround(sqrt(target / ratio));
    if (w > 0 && h > 0 && w <= src->w && h <= src->h) {
      x0 = (int)(old_next(&rng) % (uint64_t)(src->w - w + 1));
      y0 = (int)(old_next(&rng) % (uint64_t)(src->h - h + 1));
      cw = w, ch = h;
    }
  }
  if (x0 < 0) {
    double in_ratio = (double)src->w / src->h;
    int w = src->w, h = src->h;
    if (in_ratio < 3.0 / 4.0)
      h = (int)lround(w / (3.0 / 4.0));
    else if (in_ratio > 4.0 / 3.0)
      w = (int)lround(h * (4.0 / 3.0));
    cw = w, ch = h, x0 = (src->w - w) / 2, y0 = (src->h - h) / 2;
  }
  int flip = (int)(old_next(&rng) & 1);
  old_sample(src, x0, y0, cw, ch, H, W, flip, dst);
}

/* --------------------------------------------------------------------------- */

/* Noise over smooth gradients: JPEG data like a photo's, no flat blocks. */
static void photo(uint8_t *px, int w, int h, int components, uint64_t seed) {
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < components; c++) {
        int v = (x * 200 / w + y * 50 / h + c * 40) + (int)(old_next(&seed) % 48);
        px[((size_t)y * w + x) * components + c] = (uint8_t)(v > 255 ? 255 : v);
      }
}

static int read_all(const char *path, uint8_t **buf) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *buf = malloc((size_t)n + 1);
  size_t got = *buf ? fread(*buf, 1, (size_t)n, f) : 0;
  fclose(f);
  return (long)got == n ? (int)n : -1;
}

static void test_apply(void) {
  /* random windows, inside and past the border, flipped or not */
  enum { PW = 97, PH = 61 };
  static uint8_t px[PW * PH * 3], a[3 * 80 * 72], b[3 * 80 * 72];
  photo(px, PW, PH, 3, 1);
  RtImage im = {px, PW, PH, PW, PH};
  uint64_t rng = 5;
  int same = 0;
  for (int t = 0; t < 200; t++) {
    int H = 1 + (int)(old_next(&rng) % 72), W = 1 + (int)(old_next(&rng) % 80);
    RtAugWindow win = {old_uniform(&rng) * 120 - 10, old_uniform(&rng) * 80 - 10, 0.5 + old_uniform(&rng) * 110,
                       0.5 + old_uniform(&rng) * 70, (int)(t & 1)};
    rt_augment_apply(&im, &win, H, W, a);
    old_sample(&im, win.x0, win.y0, win.cw, win.ch, H, W, win.flip, b);
    same += memcmp(a, b, (size_t)(3 * H * W)) == 0;
  }
  CHECK(same == 200, "rt_augment_apply equals the old sampler in %d of 200 windows", same);

  /* the footprint holds every pixel apply reads: poison the rest */
  static uint8_t poisoned[PW * PH * 3];
  int fine = 0;
  for (int t = 0; t < 100; t++) {
    RtAugWindow win = {old_uniform(&rng) * 90, old_uniform(&rng) * 55, 1 + old_uniform(&rng) * 40,
                       1 + old_uniform(&rng) * 30, (int)(t & 1)};
    int box[4];
    rt_augment_footprint(&win, PW, PH, 64, 64, box);
    for (int y = 0; y < PH; y++)
      for (int x = 0; x < PW; x++)
        for (int c = 0; c < 3; c++) {
          size_t i = ((size_t)y * PW + x) * 3 + c;
          poisoned[i] = x >= box[0] && x <= box[2] && y >= box[1] && y <= box[3] ? px[i] : (uint8_t)(255 - px[i]);
        }
    RtImage pim = {poisoned, PW, PH, PW, PH};
    rt_augment_apply(&im, &win, 64, 64, a);
    rt_augment_apply(&pim, &win, 64, 64, b);
    fine += memcmp(a, b, 3 * 64 * 64) == 0 && box[0] >= 0 && box[2] < PW && box[1] >= 0 && box[3] < PH;
  }
  CHECK(fine == 100, "footprint covers what apply reads in %d of 100", fine);
}

static void test_windows(void) {
  /* at full size the transforms are the old ones, bit for bit */
  enum { PW = 300, PH = 200 };
  static uint8_t px[PW * PH * 3], a[3 * 96 * 96], b[3 * 96 * 96];
  photo(px, PW, PH, 3, 2);
  RtImage im = {px, PW, PH, PW, PH};
  int rrc = 0;
  for (uint64_t s = 0; s < 100; s++) {
    rt_augment_train(&im, RT_AUG_RRC, s, 96, 80, a);
    old_rrc(&im, s, 96, 80, b);
    rrc += memcmp(a, b, 3 * 96 * 80) == 0;
  }
  CHECK(rrc == 100, "rrc as before in %d of 100 seeds", rrc);
  rt_augment_eval(&im, 96, 80, a);
  old_eval(&im, 96, 80, b);
  CHECK(memcmp(a, b, 3 * 96 * 80) == 0, "evaluation as before");

  /* RandomResizedCrop's limits on the full size: whole pixels inside the
   * picture, 8-100% of the area, ratio 3/4..4/3 (within rounding) */
  int inside = 0, flips = 0, small = 0, large = 0;
  for (uint64_t s = 0; s < 2000; s++) {
    RtAugWindow w;
    if (rt_augment_window(RT_AUG_RRC, 1, s, 500, 375, 224, 224, &w)) continue;
    double area = w.cw * w.ch / (500.0 * 375.0), ratio = w.cw / w.ch;
    int whole = w.x0 == floor(w.x0) && w.y0 == floor(w.y0) && w.cw == floor(w.cw) && w.ch == floor(w.ch);
    inside += whole && w.x0 >= 0 && w.y0 >= 0 && w.x0 + w.cw <= 500 && w.y0 + w.ch <= 375 && area >= 0.079 &&
              area <= 1 && ratio >= 0.74 && ratio <= 1.35;
    flips += w.flip, small += area<0.15, large += area> 0.85;
  }
  CHECK(inside == 2000 && flips > 900 && flips < 1100 && small > 50 && large > 20,
        "rrc limits: %d of 2000 inside, %d flipped, %d small, %d large", inside, flips, small, large);
  /* 2000x50: no try fits, so the centre at ratio 4/3 */
  int centred = 0;
  for (uint64_t s = 0; s < 50; s++) {
    RtAugWindow w;
    centred += rt_augment_window(RT_AUG_RRC, 1, s, 2000, 50, 64, 64, &w) == 0 && w.cw == 67 && w.ch == 50 &&
               w.x0 == 966 && w.y0 == 0;
  }
  CHECK(centred == 50, "2000x50: the centre %d of 50 times", centred);
  RtAugWindow w;
  CHECK(rt_augment_window(RT_AUG_NONE, 0, 0, 300, 200, 224, 224, &w) == 0 && fabs(w.ch - 175) < 1e-9 &&
            fabs(w.x0 - 62.5) < 1e-9 && !w.flip,
        "evaluation window %g %g %g %g", w.x0, w.y0, w.cw, w.ch);
  CHECK(rt_augment_window(RT_AUG_PAD_CROP, 1, 0, 300, 200, 224, 224, &w) == -1 &&
            rt_augment_window(RT_AUG_AUTO, 1, 0, 32, 32, 32, 32, &w) == -1 &&
            rt_augment_window(RT_AUG_NONE, 0, 0, 32, 32, 32, 32, &w) == -1,
        "pad_crop and small inputs are not one window");

  /* DCT scaling by 1/d maps by 1/d (300 -> 38 at 1/8, not 38/300); other sizes by the ratio */
  RtAugWindow v = {40, 24, 160, 120, 1};
  RtAugWindow s8 = rt_augment_window_scaled(&v, 300, 200, 38, 25);
  CHECK(s8.x0 == 5 && s8.y0 == 3 && s8.cw == 20 && s8.ch == 15 && s8.flip, "1/8: %g %g %g %g", s8.x0, s8.y0, s8.cw,
        s8.ch);
  RtAugWindow r = rt_augment_window_scaled(&v, 300, 200, 150, 50);
  CHECK(r.x0 == 20 && r.y0 == 6 && r.cw == 80 && r.ch == 30, "resize: %g %g %g %g", r.x0, r.y0, r.cw, r.ch);

  /* the same seed crops the same region of the scene at 1/1 and 1/4: a
   * gradient picture, decoded both ways, gives nearly the same bytes */
  for (int y = 0; y < 480; y++)
    for (int x = 0; x < 640; x++) {
      static uint8_t g[640 * 480 * 3];
      uint8_t *p = g + ((size_t)y * 640 + x) * 3;
      p[0] = (uint8_t)(x * 255 / 639), p[1] = (uint8_t)(y * 255 / 479), p[2] = (uint8_t)((x + y) * 255 / 1118);
      if (x == 639 && y == 479) CHECK(jt_write(at("scene.jpg"), g, 640, 480, 3, 95) == 0, "write scene.jpg");
    }
  RtImage full, quarter;
  char err[512];
  CHECK(rt_jpeg_decode_file(at("scene.jpg"), 0, &full, err, sizeof err) == RT_JPEG_OK, "%s", err);
  CHECK(rt_jpeg_decode_file(at("scene.jpg"), 120, &quarter, err, sizeof err) == RT_JPEG_OK && quarter.w == 160,
        "1/4: %s %d", err, quarter.w);
  double worst = 0;
  for (uint64_t s = 0; full.px && quarter.px && s < 20; s++) {
    rt_augment_train(&full, RT_AUG_RRC, s, 64, 64, a);
    rt_augment_train(&quarter, RT_AUG_RRC, s, 64, 64, b);
    double d = 0;
    for (int i = 0; i < 3 * 64 * 64; i++) d += abs(a[i] - b[i]);
    d /= 3 * 64 * 64;
    if (d > worst) worst = d;
  }
  CHECK(worst < 2.5, "1/1 and 1/4 crops differ by %.2f levels on average (same region)", worst);
  rt_augment_eval(&full, 64, 64, a);
  rt_augment_eval(&quarter, 64, 64, b);
  int far = 0;
  for (int i = 0; i < 3 * 64 * 64; i++) far += abs(a[i] - b[i]) > 4;
  CHECK(far == 0, "evaluation at 1/1 and 1/4: %d bytes differ by more than 4", far);
  rt_image_free(&full), rt_image_free(&quarter);
}

static void test_header(void) {
  static uint8_t px[333 * 251 * 4];
  photo(px, 333, 251, 3, 3);
  CHECK(jt_write_as(at("base.jpg"), px, 333, 251, 3, 90, 1, 0, 0) == 0, "write base.jpg");
  CHECK(jt_write_as(at("prog.jpg"), px, 333, 251, 3, 90, 1, 1, 0) == 0, "write prog.jpg");
  CHECK(jt_write_as(at("rgb.jpg"), px, 333, 251, 3, 90, 0, 0, 1) == 0, "write rgb.jpg");
  CHECK(jt_write_as(at("grey.jpg"), px, 333, 251, 1, 90, 0, 0, 0) == 0, "write grey.jpg");
  CHECK(jt_write(at("cmyk.jpg"), px, 40, 30, 4, 90) == 0, "write cmyk.jpg");
  const char *names[] = {"base.jpg", "prog.jpg", "rgb.jpg", "grey.jpg"};
  const int gpu[] = {1, 0, 0, 1};
  char err[512];
  for (int i = 0; i < 4; i++) {
    uint8_t *buf = NULL;
    int n = read_all(at(names[i]), &buf), w, h, ok;
    CHECK(n > 0 && rt_jpeg_header(buf, (size_t)n, names[i], &w, &h, &ok, err, sizeof err) == RT_JPEG_OK && w == 333 &&
              h == 251 && ok == gpu[i],
          "%s: %dx%d gpu %d (%s)", names[i], w, h, ok, err);
    /* cut in the scan: the header still parses, but the file is incomplete */
    CHECK(n > 0 && rt_jpeg_header(buf, (size_t)n * 2 / 3, names[i], &w, &h, &ok, err, sizeof err) == RT_JPEG_OK &&
              ok == 0,
          "%s truncated: gpu %d", names[i], ok);
    free(buf);
  }
  uint8_t *buf = NULL;
  int n = read_all(at("cmyk.jpg"), &buf), w, h, ok;
  CHECK(rt_jpeg_header(buf, (size_t)n, "cmyk.jpg", &w, &h, &ok, err, sizeof err) == RT_JPEG_ERR_FORMAT &&
            strstr(err, "cmyk.jpg: a CMYK"),
        "cmyk: %s", err);
  free(buf);
  uint8_t junk[300];
  for (int i = 0; i < 300; i++) junk[i] = (uint8_t)(i * 13 + 1);
  CHECK(rt_jpeg_header(junk, sizeof junk, "junk.jpg", &w, &h, &ok, err, sizeof err) == RT_JPEG_ERR_FORMAT &&
            strstr(err, "junk.jpg: not a readable JPEG"),
        "junk: %s", err);
  CHECK(rt_jpeg_header(junk, 0, "empty.jpg", &w, &h, &ok, err, sizeof err) == RT_JPEG_ERR_FORMAT, "empty: %s", err);
}

/* The box of a partial decode equals a full decode's pixels there, and the
 * window's output is the same bytes. */
static void test_partial(void) {
  const char *names[] = {"base.jpg", "prog.jpg", "rgb.jpg", "grey.jpg", "b444.jpg", "big.jpg"};
  static uint8_t px[1000 * 700 * 3], a[3 * 224 * 224], b[3 * 224 * 224];
  photo(px, 333, 251, 3, 3);
  CHECK(jt_write_as(at("b444.jpg"), px, 333, 251, 3, 90, 0, 0, 0) == 0, "write b444.jpg");
  photo(px, 1000, 700, 3, 4);
  CHECK(jt_write_as(at("big.jpg"), px, 1000, 700, 3, 85, 1, 0, 0) == 0, "write big.jpg");
  const int min_shorts[] = {0, 100, 60, 30, 448, 256};
  char err[512];
  int cases = 0, equal = 0, same_box = 0, sized = 0;
  for (int f = 0; f < 6; f++) {
    uint8_t *buf = NULL;
    int n = read_all(at(names[f]), &buf), w = 0, h = 0, ok;
    if (n <= 0 || rt_jpeg_header(buf, (size_t)n, names[f], &w, &h, &ok, err, sizeof err) != RT_JPEG_OK) {
      CHECK(0, "%s: %s", names[f], err);
      free(buf);
      continue;
    }
    for (int m = 0; m < 6; m++) {
      RtImage full;
      if (rt_jpeg_decode_mem(buf, (size_t)n, names[f], min_shorts[m], &full, err, sizeof err) != RT_JPEG_OK) {
        CHECK(0, "%s: %s", names[f], err);
        continue;
      }
      int sw, sh;
      rt_jpeg_scaled_size(w, h, min_shorts[m], &sw, &sh);
      sized += sw == full.w && sh == full.h;
      for (uint64_t s = 0; s < 12; s++) {
        int H = s % 3 == 0 ? 224 : 64, W = s % 4 == 0 ? 96 : 64;
        RtAugWindow win;
        rt_augment_window(s == 11 ? RT_AUG_NONE : RT_AUG_RRC, s != 11, s * 7 + (uint64_t)m, w, h, H, W, &win);
        RtAugWindow sc = rt_augment_window_scaled(&win, w, h, sw, sh);
        int box[4];
        rt_augment_footprint(&sc, sw, sh, H, W, box);
        RtImage part;
        if (rt_jpeg_decode_part(buf, (size_t)n, names[f], min_shorts[m], box, &part, err, sizeof err) != RT_JPEG_OK) {
          CHECK(0, "%s part: %s", names[f], err);
          continue;
        }
        int rows = 1;
        for (int y = box[1]; y <= box[3] && part.w == full.w; y++) {
          size_t o = ((size_t)y * full.w + box[0]) * 3;
          rows &= memcmp(part.px + o, full.px + o, (size_t)(box[2] - box[0] + 1) * 3) == 0;
        }
        same_box += rows && part.w == full.w && part.h == full.h;
        rt_augment_apply(&full, &sc, H, W, a);
        rt_augment_apply(&part, &sc, H, W, b);
        equal += memcmp(a, b, (size_t)(3 * H * W)) == 0;
        /* the loader's way equals rt_augment_train on the full decode */
        if (s != 11) {
          rt_augment_train(&full, RT_AUG_RRC, s * 7 + (uint64_t)m, H, W, a);
          equal += memcmp(a, b, (size_t)(3 * H * W)) == 0;
          cases++;
        }
        cases++;
        rt_image_free(&part);
      }
      rt_image_free(&full);
    }
    /* a truncated file fails even when the box is near the top */
    RtImage part;
    int box[4] = {0, 0, 20, 10};
    CHECK(rt_jpeg_decode_part(buf, (size_t)n * 3 / 4, names[f], 0, box, &part, err, sizeof err) == RT_JPEG_ERR_FORMAT &&
              strstr(err, "truncated") && !part.px,
          "%s truncated: %s", names[f], err);
    free(buf);
  }
  CHECK(sized == 36, "rt_jpeg_scaled_size is the decoded size in %d of 36", sized);
  CHECK(cases == 6 * 6 * 23 && equal == cases && same_box == 6 * 6 * 12,
        "partial decodes: %d of %d outputs equal, %d boxes equal", equal, cases, same_box);
}

/* The DCT scale per window: the scaled window covers the output (to within
 * a pixel of libjpeg's rounding), and the next scale down would not. */
static void test_window_scale(void) {
  uint64_t rng = 11;
  int cases = 0, covers = 0, largest = 0, scaled = 0;
  for (int t = 0; t < 2000; t++) {
    int w = 64 + (int)(old_next(&rng) % 4000), h = 64 + (int)(old_next(&rng) % 3000);
    int H = t % 3 ? 224 : 32 + (int)(old_next(&rng) % 300), W = t % 5 ? H : 32 + (int)(old_next(&rng) % 300);
    RtAugWindow win;
    if (rt_augment_window(t % 7 ? RT_AUG_RRC : RT_AUG_NONE, t % 7 != 0, (uint64_t)t, w, h, H, W, &win)) continue;
    int m = rt_augment_window_min_short(&win, w, h, H, W), sw, sh;
    rt_jpeg_scaled_size(w, h, m, &sw, &sh);
    RtAugWindow sc = rt_augment_window_scaled(&win, w, h, sw, sh);
    int d = (w + sw - 1) / sw; /* the scale chosen: w / d rounded up is sw */
    /* (a window smaller than the output is sampled up whatever the scale: then the scale is 1) */
    covers += (sc.cw >= W - 1 && sc.ch >= H - 1) || (d == 1 && (win.cw < W || win.ch < H));
    scaled += d > 1;
    if (d >= 8) {
      largest++;
    } else {
      int nw = (w + 2 * d - 1) / (2 * d), nh = (h + 2 * d - 1) / (2 * d); /* the next scale's size */
      largest += win.cw * nw / w < W || win.ch * nh / h < H;
    }
    cases++;
  }
  CHECK(cases > 1500 && covers == cases && largest == cases && scaled > cases / 10,
        "window scales: %d windows, %d covered the output, %d at the largest scale that does, %d scaled", cases, covers,
        largest, scaled);
  /* the evaluation window asks for what the evaluation transform did: 256 for 224 */
  RtAugWindow ev;
  rt_augment_window(RT_AUG_NONE, 0, 0, 1200, 900, 224, 224, &ev);
  int m = rt_augment_window_min_short(&ev, 1200, 900, 224, 224);
  CHECK(m == rt_augment_min_short(RT_AUG_NONE, 0, 224, 224), "evaluation window's min_short %d", m);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: data_test_window WORKDIR\n");
    return 2;
  }
  snprintf(work, sizeof work, "%s", argv[1]);
  mkdir(work, 0755);
  test_apply();
  test_windows();
  test_window_scale();
  test_header();
  test_partial();
  return check_report();
}
