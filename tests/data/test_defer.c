/* test_defer.c - the loader's RT_LOADER_DEFER mode on a set made here:
 * baseline 4:2:0 and grey files travel as JPEG items with the sizes of
 * their headers, progressive and RGB-coded ones as RGB pixels decoded on
 * the workers; every item's window is the one the DECODE mode used for the
 * same seed and position (an item decoded and windowed here gives the
 * DECODE mode's bytes); items are the same for 1 and 3 threads; corrupt
 * files are counted and replaced (training) or left out (evaluation);
 * small inputs and pad_crop are refused.  Usage: data_test_defer WORKDIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "jpegtest.h"
#include "rt_augment.h"
#include "rt_folder.h"
#include "rt_jpeg.h"
#include "rt_loader.h"

static char work[2048];

static const char *at(const char *rel) {
  static char buf[4][4096];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", work, rel);
  return buf[k];
}

enum { B = 3, HW = 64, SEED = 17, EPOCHS = 2, MAXN = 16 };

/* The set: (name, w, h, components, sub, progressive, rgb); the kind an
 * item of it must have follows from the last two. */
typedef struct File {
  const char *rel;
  int w, h, comps, sub, prog, rgb;
} File;

static const File FILES[] = {
    {"k0/a_base.jpg", 120, 90, 3, 1, 0, 0},  {"k0/b_prog.jpg", 100, 130, 3, 1, 1, 0},
    {"k0/c_grey.jpg", 90, 70, 1, 0, 0, 0},   {"k0/d_444.jpg", 333, 251, 3, 0, 0, 0},
    {"k1/e_rgb.jpg", 140, 100, 3, 0, 0, 1},  {"k1/f_base.jpg", 200, 150, 3, 1, 0, 0},
    {"k1/g_base.jpg", 77, 65, 3, 1, 0, 0},   {"k1/h_prog.jpg", 160, 96, 1, 0, 1, 0},
    {"k1/i_base.jpg", 512, 384, 3, 1, 0, 0}, {"k1/j_base.jpg", 96, 200, 3, 1, 0, 0},
};
enum { NF = sizeof FILES / sizeof FILES[0] };

static const File *file_of(const char *path) {
  for (int i = 0; i < NF; i++)
    if (strstr(path, FILES[i].rel)) return &FILES[i];
  return NULL;
}

static void make_set(void) {
  mkdir(at("dset"), 0755), mkdir(at("dset/k0"), 0755), mkdir(at("dset/k1"), 0755);
  remove(at("dset/k1/z_trunc.jpg")), remove(at("dset/k1/z_junk.jpg")); /* from an earlier run */
  static uint8_t px[512 * 384 * 3];
  for (int i = 0; i < NF; i++) {
    const File *f = &FILES[i];
    uint64_t s = (uint64_t)i * 977 + 1;
    for (int p = 0; p < f->w * f->h * f->comps; p++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      int x = (p / f->comps) % f->w;
      px[p] = (uint8_t)(x * 180 / f->w + (int)(s >> 58));
    }
    char rel[256];
    snprintf(rel, sizeof rel, "dset/%s", f->rel);
    CHECK(jt_write_as(at(rel), px, f->w, f->h, f->comps, 90, f->sub, f->prog, f->rgb) == 0, "write %s", rel);
  }
}

/* What one epoch position gave: an item (its data copied) or the bytes. */
typedef struct Rec {
  RtLoaderItem it;
  uint8_t *data;
  uint8_t img[3 * HW * HW];
  int64_t label;
} Rec;

static int share; /* RtLoaderConfig.cpu_share of run's loaders */

/* Every position of `epochs` epochs (training) or one pass (evaluation). */
static int64_t run(const RtFolder *set, RtLoaderDecode mode, int train, RtAugKind aug, int workers, int epochs,
                   Rec *out, int64_t cap) {
  RtLoaderConfig c = {.set = set,
                      .batch = B,
                      .H = HW,
                      .W = HW,
                      .train = train,
                      .augment = aug,
                      .seed = SEED,
                      .workers = workers,
                      .decode = mode,
                      .cpu_share = share};
  RtLoader *l = NULL;
  char err[1024];
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_OK, "%s", err);
  if (!l) return 0;
  int64_t n = 0;
  for (int e = 0; e < epochs; e++) {
    rt_loader_start(l, e);
    RtLoaderBatch b;
    while (rt_loader_next(l, &b, err, sizeof err) == 1) {
      CHECK(mode == RT_LOADER_DEFER ? b.items && !b.images : b.images && !b.items, "a batch of its mode");
      for (int64_t i = 0; i < b.n && n < cap; i++, n++) {
        Rec *r = &out[n];
        memset(r, 0, sizeof *r);
        r->label = b.labels[i];
        if (mode == RT_LOADER_DECODE) {
          memcpy(r->img, b.images + i * 3 * HW * HW, sizeof r->img);
          continue;
        }
        r->it = b.items[i];
        r->data = malloc(r->it.len);
        if (r->data) memcpy(r->data, r->it.data, r->it.len);
      }
    }
  }
  rt_loader_free(l);
  return n;
}

/* Field by field: a struct's padding is not its value. */
static int same_win(const RtAugWindow *a, const RtAugWindow *b) {
  return a->x0 == b->x0 && a->y0 == b->y0 && a->cw == b->cw && a->ch == b->ch && a->flip == b->flip;
}

static void free_recs(Rec *r, int64_t n) {
  for (int64_t i = 0; i < n; i++) free(r[i].data);
}

/* An item decoded and windowed here, as a GPU decoder would (which
 * decodes JPEG items at full size: the same bytes as the DECODE mode need
 * the same DCT scale, so decode at the window's and map the window). */
static int apply_item(const Rec *r, int train, RtAugKind aug, uint8_t *dst) {
  if (r->it.kind == RT_ITEM_RGB) { /* its part put back in place in a picture of its size */
    const RtLoaderItem *it = &r->it;
    uint8_t *px = calloc((size_t)it->w * (size_t)it->h, 3);
    if (!px || it->bx < 0 || it->by < 0 || it->bx + it->bw > it->w || it->by + it->bh > it->h ||
        it->len != (size_t)it->bw * (size_t)it->bh * 3)
      return free(px), -1;
    for (int y = 0; y < it->bh; y++)
      memcpy(px + ((size_t)(it->by + y) * (size_t)it->w + (size_t)it->bx) * 3, r->data + (size_t)y * it->bw * 3,
             (size_t)it->bw * 3);
    RtImage im = {px, it->w, it->h, it->w, it->h};
    rt_augment_apply(&im, &it->win, HW, HW, dst);
    free(px);
    return 0;
  }
  RtImage im;
  char err[512];
  int m = rt_augment_window_min_short(&r->it.win, r->it.w, r->it.h, HW, HW);
  if (rt_jpeg_decode_mem(r->data, r->it.len, "item", m, &im, err, sizeof err) != RT_JPEG_OK) return -1;
  RtAugWindow s = rt_augment_window_scaled(&r->it.win, r->it.w, r->it.h, im.w, im.h);
  rt_augment_apply(&im, &s, HW, HW, dst);
  rt_image_free(&im);
  return 0;
}

static void check_mode(const RtFolder *set, int train, RtAugKind aug) {
  static Rec one[64], three[64], dec[64];
  int epochs = train ? EPOCHS : 1;
  int64_t n1 = run(set, RT_LOADER_DEFER, train, aug, 1, epochs, one, 64);
  int64_t n3 = run(set, RT_LOADER_DEFER, train, aug, 3, epochs, three, 64);
  int64_t nd = run(set, RT_LOADER_DECODE, train, aug, 2, epochs, dec, 64);
  int64_t want = train ? (int64_t)EPOCHS * (NF / B) * B : NF;
  CHECK(n1 == want && n3 == want && nd == want, "%s: %lld, %lld, %lld items of %lld", rt_augment_name(aug),
        (long long)n1, (long long)n3, (long long)nd, (long long)want);
  int same = 0, kinds = 0, sizes = 0, windows = 0, decoded = 0, rgb = 0;
  uint8_t img[3 * HW * HW];
  for (int64_t p = 0; p < n1 && p < n3 && p < nd; p++) {
    const Rec *a = &one[p], *b = &three[p];
    same += a->it.kind == b->it.kind && a->it.len == b->it.len && a->it.w == b->it.w && a->it.h == b->it.h &&
            same_win(&a->it.win, &b->it.win) && a->label == b->label && a->data && b->data &&
            !memcmp(a->data, b->data, a->it.len) && !strcmp(a->it.name, b->it.name);
    const File *f = file_of(a->it.name);
    if (!f) continue;
    int want_rgb = f->prog || f->rgb;
    kinds += a->it.kind == (want_rgb ? RT_ITEM_RGB : RT_ITEM_JPEG);
    rgb += a->it.kind == RT_ITEM_RGB;
    int min_short = rt_augment_min_short(aug, train, HW, HW), sw, sh;
    rt_jpeg_scaled_size(f->w, f->h, min_short, &sw, &sh);
    sizes += want_rgb ? a->it.w == sw && a->it.h == sh && a->it.len == (size_t)(sw * sh * 3)
                      : a->it.w == f->w && a->it.h == f->h;
    /* the window drawn on the full size from the position's seed */
    int64_t e = p / (want / epochs), pos = p % (want / epochs);
    RtAugWindow w;
    rt_augment_window(aug, train, train ? rt_augment_seed(SEED, e, pos) : 0, f->w, f->h, HW, HW, &w);
    if (want_rgb) w = rt_augment_window_scaled(&w, f->w, f->h, sw, sh);
    windows += same_win(&w, &a->it.win);
    decoded += apply_item(a, train, aug, img) == 0 && !memcmp(img, dec[p].img, sizeof img) && a->label == dec[p].label;
  }
  CHECK(same == want, "%s: 1 and 3 threads give the same items in %d of %lld", rt_augment_name(aug), same,
        (long long)want);
  CHECK(kinds == want && rgb > 0 && rgb < want, "%s: %d of %lld items of the right kind (%d RGB)", rt_augment_name(aug),
        kinds, (long long)want, rgb);
  CHECK(sizes == want, "%s: %d of %lld sizes right", rt_augment_name(aug), sizes, (long long)want);
  CHECK(windows == want, "%s: %d of %lld windows drawn on the full size", rt_augment_name(aug), windows,
        (long long)want);
  CHECK(decoded == want, "%s: %d of %lld items give the DECODE mode's bytes", rt_augment_name(aug), decoded,
        (long long)want);
  free_recs(one, n1), free_recs(three, n3);
}

/* cpu_share: that percentage of the positions a GPU decoder could take
 * decoded here instead, evenly spread, each an RGB item of the part its
 * window reads that applies to the DECODE mode's bytes; the same items
 * from 1 and 3 threads; set_cpu_share takes effect at the next start. */
static void check_share(const RtFolder *set) {
  static Rec half[64], dec[64], three[64];
  share = 50;
  int64_t n = run(set, RT_LOADER_DEFER, 1, RT_AUG_RRC, 1, EPOCHS, half, 64);
  int64_t n3 = run(set, RT_LOADER_DEFER, 1, RT_AUG_RRC, 3, EPOCHS, three, 64);
  share = 0;
  int64_t nd = run(set, RT_LOADER_DECODE, 1, RT_AUG_RRC, 2, EPOCHS, dec, 64);
  int parts = 0, whole = 0, bytes = 0, same = 0, jpeg_ok = 0;
  uint8_t img[3 * HW * HW];
  for (int64_t p = 0; p < n && p < nd && p < n3; p++) {
    const File *f = file_of(half[p].it.name);
    if (!f || f->prog || f->rgb) continue; /* those are RGB items at any share */
    jpeg_ok++;
    if (half[p].it.kind == RT_ITEM_RGB) {
      parts++;
      whole += half[p].it.bw == half[p].it.w && half[p].it.bh == half[p].it.h;
      bytes += apply_item(&half[p], 1, RT_AUG_RRC, img) == 0 && !memcmp(img, dec[p].img, sizeof img);
    }
    same += half[p].it.kind == three[p].it.kind && half[p].it.len == three[p].it.len &&
            !memcmp(half[p].data, three[p].data, half[p].it.len);
  }
  CHECK(parts > jpeg_ok / 4 && parts < 3 * jpeg_ok / 4, "cpu_share 50: %d of %d baseline files decoded here", parts,
        jpeg_ok);
  CHECK(whole < parts, "cpu_share: %d of %d parts are whole pictures (a crop reads less)", whole, parts);
  CHECK(bytes == parts, "cpu_share: %d of %d parts give the DECODE mode's bytes", bytes, parts);
  CHECK(same == jpeg_ok, "cpu_share: 1 and 3 threads agree on %d of %d", same, jpeg_ok);
  free_recs(half, n), free_recs(three, n3);
  RtLoaderConfig c = {.set = set, .batch = B, .H = HW, .W = HW, .train = 1, .seed = SEED, .decode = RT_LOADER_DEFER};
  RtLoader *l = NULL;
  char err[512];
  if (rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_OK) {
    rt_loader_set_cpu_share(l, 130);
    CHECK(rt_loader_cpu_share(l) == 0, "set_cpu_share waits for the next start");
    rt_loader_start(l, 0);
    CHECK(rt_loader_cpu_share(l) == 100, "set_cpu_share clamps to 100: %d", rt_loader_cpu_share(l));
  }
  rt_loader_free(l);
}

/* rt_loader_best_share: the share where the GPU's and the threads' rates
 * meet, against the model solved by hand; a GPU that cannot help leaves it
 * all to the threads; an unmeasured rate gives -1.  The rates are the
 * H100's of 2026-12-07 (nvJPEG's engines about 3,000 JPEGs/s of 500x375,
 * 16 threads decoding 6,300/s and handing on 30,000/s). */
static void check_best_share(void) {
  double most = -1, g = 3000, h = 30000, c = 6300;
  int p = rt_loader_best_share(g, h, c, &most);
  /* the threads' 1 / ((1 - s) / h + s / c) = g / (1 - s), solved by bisection */
  double lo = 0, hi = 1;
  for (int i = 0; i < 60; i++) {
    double s = (lo + hi) / 2;
    if (1 / ((1 - s) / h + s / c) > g / (1 - s))
      lo = s;
    else
      hi = s;
  }
  CHECK(fabs(p - 100 * lo) <= 1, "best share %d%%, the rates meet at %.2f%%", p, 100 * lo);
  CHECK(fabs(most - g / (1 - lo)) < 0.02 * most, "best rate %.0f, %.0f where the rates meet", most, g / (1 - lo));
  CHECK(most > c && most > g, "the two together (%.0f) beat either alone (%.0f, %.0f)", most, c, g);
  /* the decoder's rate over every item of a batch at share 50% (its pictures and the threads') is twice
   * its JPEG rate: balanced by that, the share falls and the pipeline is the GPU's alone */
  int wrong = rt_loader_best_share(2 * g, h, c, &most);
  CHECK(wrong < p, "an overstated GPU rate gives a smaller share (%d%% < %d%%)", wrong, p);
  CHECK(rt_loader_best_share(1, h, c, &most) == 100 && fabs(most - c) < 1, "a slow GPU: 100%% (%.0f)", most);
  CHECK(rt_loader_best_share(1e9, h, c, &most) == 0 && fabs(most - h) < 1, "a fast GPU: 0%% (%.0f)", most);
  CHECK(rt_loader_best_share(0, h, c, &most) == -1 && most == 0, "an unmeasured GPU rate");
  CHECK(rt_loader_best_share(g, h, NAN, &most) == -1, "an unmeasured thread rate");
}

/* rt_loader_start_at(e, k): the batches k.. of epoch e a start at 0
 * gives, in both modes, training and evaluation; k past the end is an
 * empty epoch. */
static void check_start_at(const RtFolder *set) {
  for (int mode = 0; mode < 2; mode++)
    for (int train = 0; train < 2; train++) {
      RtLoaderConfig c = {.set = set,
                          .batch = B,
                          .H = HW,
                          .W = HW,
                          .train = train,
                          .seed = SEED,
                          .workers = 2,
                          .decode = mode ? RT_LOADER_DEFER : RT_LOADER_DECODE};
      RtLoader *full = NULL, *part = NULL;
      char err[512];
      if (rt_loader_new(&c, &full, err, sizeof err) || rt_loader_new(&c, &part, err, sizeof err)) {
        CHECK(0, "start_at: loaders: %s", err);
        rt_loader_free(full), rt_loader_free(part);
        continue;
      }
      rt_loader_start(full, 1);
      rt_loader_start_at(part, 1, 2);
      RtLoaderBatch a, b;
      int64_t k = 0, same = 0, compared = 0;
      while (rt_loader_next(full, &a, err, sizeof err) == 1) {
        if (k++ < 2) continue;
        CHECK(rt_loader_next(part, &b, err, sizeof err) == 1, "start_at: batch %lld missing", (long long)k - 1);
        compared++;
        int ok = a.n == b.n && !memcmp(a.labels, b.labels, sizeof *a.labels * (size_t)a.n);
        for (int64_t i = 0; ok && i < a.n; i++)
          ok = mode ? a.items[i].len == b.items[i].len && !memcmp(a.items[i].data, b.items[i].data, a.items[i].len)
                    : !memcmp(a.images + i * 3 * HW * HW, b.images + i * 3 * HW * HW, 3 * HW * HW);
        same += ok;
      }
      CHECK(rt_loader_next(part, &b, err, sizeof err) == 0, "start_at: no batch after the epoch's last");
      CHECK(compared > 0 && same == compared, "start_at (%s, %s): %lld of %lld batches as a start at 0 gives",
            mode ? "defer" : "decode", train ? "training" : "evaluation", (long long)same, (long long)compared);
      rt_loader_start_at(part, 0, 1000);
      CHECK(rt_loader_next(part, &b, err, sizeof err) == 0, "start_at past the end: an empty epoch");
      rt_loader_free(full), rt_loader_free(part);
    }
}

static void test_refused(const RtFolder *set) {
  char err[1024];
  RtLoader *l = NULL;
  RtLoaderConfig c = {.set = set, .batch = B, .H = 32, .W = 32, .train = 1, .decode = RT_LOADER_DEFER};
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_ERR_ARG && !l && strstr(err, "one window") &&
            strstr(err, "32x32"),
        "32x32: %s", err);
  c.train = 0;
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_ERR_ARG && !l, "32x32 evaluation: %s", err);
  c.H = c.W = HW, c.train = 1, c.augment = RT_AUG_PAD_CROP;
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_ERR_ARG && !l && strstr(err, "pad_crop"), "pad_crop: %s",
        err);
  c.augment = RT_AUG_NONE;
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_OK, "none at 64: %s", err);
  rt_loader_free(l);
  c.decode = (RtLoaderDecode)7;
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_ERR_ARG, "decode 7: %s", err);
  /* workers 0: every processor online */
  c.decode = RT_LOADER_DECODE, c.workers = 0;
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_OK, "%s", err);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  CHECK(l && rt_loader_workers(l) == (online < 1 ? 1 : (int)online), "%d workers, %ld online",
        l ? rt_loader_workers(l) : -1, online);
  rt_loader_free(l);
}

/* A truncated baseline file (its header reads) and a garbage one. */
static void test_unreadable(void) {
  FILE *f = fopen(at("dset/k0/a_base.jpg"), "rb");
  static uint8_t bytes[1 << 16];
  size_t n = f ? fread(bytes, 1, sizeof bytes, f) : 0;
  if (f) fclose(f);
  f = fopen(at("dset/k1/z_trunc.jpg"), "wb");
  if (f) fwrite(bytes, 1, n / 2, f), fclose(f);
  f = fopen(at("dset/k1/z_junk.jpg"), "wb");
  if (f) fputs("no picture here", f), fclose(f);
  RtFolder set;
  char err[1024];
  CHECK(rt_folder_scan(at("dset"), 0, &set, err, sizeof err) == RT_FOLDER_OK && set.n == NF + 2, "%s", err);
  for (int train = 0; train < 2; train++) {
    RtLoaderConfig c = {
        .set = &set, .batch = B, .H = HW, .W = HW, .train = train, .seed = 1, .workers = 2, .decode = RT_LOADER_DEFER};
    RtLoader *l = NULL;
    CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_OK, "%s", err);
    if (!l) continue;
    int64_t total = 0, full = 1, named = 1;
    for (int e = 0; e < 2; e++) {
      rt_loader_start(l, e);
      RtLoaderBatch b;
      while (rt_loader_next(l, &b, err, sizeof err) == 1) {
        total += b.n, full &= !train || b.n == B;
        for (int64_t i = 0; i < b.n; i++) named &= file_of(b.items[i].name) != NULL;
      }
    }
    char names[1024];
    int64_t bad = rt_loader_unreadable(l, names, sizeof names);
    int64_t want = train ? 2 * ((NF + 2) / B) * B : 2 * NF;
    CHECK(total == want && full && named && bad == 2 && strstr(names, "z_trunc.jpg: truncated") &&
              strstr(names, "z_junk.jpg"),
          "%s: %lld of %lld items, full %d, good files only %d, %lld unreadable: %s", train ? "training" : "evaluation",
          (long long)total, (long long)want, (int)full, (int)named, (long long)bad, names);
    rt_loader_free(l);
  }
  rt_folder_free(&set);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: data_test_defer WORKDIR\n");
    return 2;
  }
  snprintf(work, sizeof work, "%s", argv[1]);
  mkdir(work, 0755);
  make_set();
  RtFolder set;
  char err[1024];
  CHECK(rt_folder_scan(at("dset"), 0, &set, err, sizeof err) == RT_FOLDER_OK && set.n == NF, "%s", err);
  if (set.n == NF) {
    check_mode(&set, 1, RT_AUG_RRC);
    check_mode(&set, 1, RT_AUG_FLIP);
    check_mode(&set, 0, RT_AUG_AUTO);
    check_share(&set);
    check_best_share();
    check_start_at(&set);
    test_refused(&set);
  }
  rt_folder_free(&set);
  test_unreadable();
  return check_report();
}
