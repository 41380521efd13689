/* test_data.c - the data pipeline on pictures made here: JPEG decoding
 * (colours, grey, DCT scaling, CMYK and damaged files), the transforms,
 * ImageFolder scanning and its errors, and the loader (same batches for 1
 * and 4 threads, the shards of a data-parallel run equal to one process's
 * batches, an evaluation pass that visits each image once, unreadable
 * images skipped, a FIFO named x.jpg among them).  Usage: data_test_data WORKDIR */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* Picture i of a set: G is 10 * i + 5 everywhere (its identity), R rises
 * left to right and B top to bottom. */
static void picture(uint8_t *px, int w, int h, int i) {
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      uint8_t *p = px + ((size_t)y * w + x) * 3;
      p[0] = (uint8_t)(x * 255 / (w - 1)), p[1] = (uint8_t)(10 * i + 5), p[2] = (uint8_t)(y * 255 / (h - 1));
    }
}

static int near(int a, int b, int tol) { return abs(a - b) <= tol; }

static void test_decode(void) {
  static uint8_t px[300 * 200 * 4];
  for (int y = 0; y < 200; y++)
    for (int x = 0; x < 300; x++) {
      uint8_t *p = px + ((size_t)y * 300 + x) * 3;
      p[0] = x < 150 ? 220 : 20, p[1] = 100, p[2] = x < 150 ? 30 : 200;
    }
  CHECK(jt_write(at("rgb.jpg"), px, 300, 200, 3, 95) == 0, "write rgb.jpg");
  char err[1024];
  RtImage im;
  CHECK(rt_jpeg_decode_file(at("rgb.jpg"), 0, &im, err, sizeof err) == RT_JPEG_OK, "%s", err);
  CHECK(im.w == 300 && im.h == 200, "size %dx%d", im.w, im.h);
  if (im.px) {
    const uint8_t *l = im.px + (100 * 300 + 40) * 3, *r = im.px + (100 * 300 + 260) * 3;
    CHECK(near(l[0], 220, 3) && near(l[1], 100, 3) && near(l[2], 30, 3), "left %d %d %d", l[0], l[1], l[2]);
    CHECK(near(r[0], 20, 3) && near(r[1], 100, 3) && near(r[2], 200, 3), "right %d %d %d", r[0], r[1], r[2]);
  }
  rt_image_free(&im);
  /* shorter side 200: 50 allows 1/4 (75x50), 51 only 1/2 (150x100) */
  CHECK(rt_jpeg_decode_file(at("rgb.jpg"), 50, &im, err, sizeof err) == RT_JPEG_OK, "%s", err);
  CHECK(im.w == 75 && im.h == 50 && im.full_w == 300, "scaled 1/4: %dx%d of %d", im.w, im.h, im.full_w);
  if (im.px) CHECK(near(im.px[(25 * 75 + 10) * 3], 220, 4), "scaled left R %d", im.px[(25 * 75 + 10) * 3]);
  rt_image_free(&im);
  CHECK(rt_jpeg_decode_file(at("rgb.jpg"), 51, &im, err, sizeof err) == RT_JPEG_OK && im.w == 150 && im.h == 100,
        "scaled 1/2: %dx%d", im.w, im.h);
  rt_image_free(&im);

  /* grey: expanded to R = G = B */
  for (int i = 0; i < 64 * 48; i++) px[i] = (uint8_t)(i % 64 < 32 ? 40 : 180);
  CHECK(jt_write(at("grey.jpg"), px, 64, 48, 1, 95) == 0, "write grey.jpg");
  CHECK(rt_jpeg_decode_file(at("grey.jpg"), 0, &im, err, sizeof err) == RT_JPEG_OK, "%s", err);
  if (im.px) {
    const uint8_t *p = im.px + (10 * 64 + 50) * 3;
    CHECK(im.w == 64 && im.h == 48 && p[0] == p[1] && p[1] == p[2] && near(p[0], 180, 3), "grey %d %d %d", p[0], p[1],
          p[2]);
  }
  rt_image_free(&im);

  /* CMYK, truncated, garbage, missing: errors naming the file */
  memset(px, 90, 16 * 16 * 4);
  CHECK(jt_write(at("cmyk.jpg"), px, 16, 16, 4, 90) == 0, "write cmyk.jpg");
  CHECK(rt_jpeg_decode_file(at("cmyk.jpg"), 0, &im, err, sizeof err) == RT_JPEG_ERR_FORMAT && strstr(err, "CMYK") &&
            strstr(err, "cmyk.jpg"),
        "cmyk: %s", err);
  FILE *f = fopen(at("rgb.jpg"), "rb");
  static uint8_t bytes[1 << 20];
  size_t n = f ? fread(bytes, 1, sizeof bytes, f) : 0;
  if (f) fclose(f);
  CHECK(rt_jpeg_decode_mem(bytes, n, "rgb.jpg", 0, &im, err, sizeof err) == RT_JPEG_OK, "from memory: %s", err);
  rt_image_free(&im);
  CHECK(rt_jpeg_decode_mem(bytes, n / 2, "half.jpg", 0, &im, err, sizeof err) == RT_JPEG_ERR_FORMAT &&
            strstr(err, "half.jpg: truncated"),
        "truncated: %s", err);
  CHECK(im.px == NULL, "no picture after a failure");
  for (int i = 0; i < 500; i++) bytes[i] = (uint8_t)(i * 7 + 3);
  CHECK(rt_jpeg_decode_mem(bytes, 500, "junk.jpg", 0, &im, err, sizeof err) == RT_JPEG_ERR_FORMAT &&
            strstr(err, "junk.jpg: not a readable JPEG"),
        "garbage: %s", err);
  CHECK(rt_jpeg_decode_file(at("none.jpg"), 0, &im, err, sizeof err) == RT_JPEG_ERR_IO && strstr(err, "none.jpg"),
        "missing: %s", err);
  f = fopen(at("empty.jpg"), "wb");
  if (f) fclose(f);
  CHECK(rt_jpeg_decode_file(at("empty.jpg"), 0, &im, err, sizeof err) == RT_JPEG_ERR_FORMAT, "empty: %s", err);
}

static void test_augment(void) {
  RtAugKind k;
  CHECK(rt_augment_parse("pad_crop", &k) == 0 && k == RT_AUG_PAD_CROP, "parse pad_crop");
  CHECK(rt_augment_parse("crop", &k) == -1, "parse crop");
  CHECK(rt_augment_resolve(RT_AUG_AUTO, 32, 32) == RT_AUG_PAD_CROP &&
            rt_augment_resolve(RT_AUG_AUTO, 224, 224) == RT_AUG_RRC,
        "auto by size");
  CHECK(rt_augment_min_short(RT_AUG_AUTO, 0, 224, 224) == 256 && rt_augment_min_short(RT_AUG_AUTO, 1, 224, 224) == 448,
        "min short side");

  /* a 32x32 picture: evaluation is the identity (HWC -> CHW) */
  static uint8_t px[300 * 200 * 3], out[3 * 224 * 224], out2[3 * 224 * 224];
  picture(px, 32, 32, 3);
  RtImage im = {px, 32, 32, 32, 32};
  rt_augment_eval(&im, 32, 32, out);
  int same = 1;
  for (int p = 0; p < 32 * 32; p++)
    for (int c = 0; c < 3; c++) same &= out[c * 1024 + p] == px[p * 3 + c];
  CHECK(same, "32x32 evaluation is the identity");
  /* plain resize 32 -> 16: G stays, R still rises left to right */
  rt_augment_eval(&im, 16, 16, out);
  CHECK(out[256 + 5 * 16 + 7] == 35 && out[5 * 16 + 1] < out[5 * 16 + 14], "resize: G %d, R %d..%d",
        out[256 + 5 * 16 + 7], out[5 * 16 + 1], out[5 * 16 + 14]);
  /* none: the same as evaluation; flip mirrors it */
  rt_augment_train(&im, RT_AUG_NONE, 7, 32, 32, out2);
  rt_augment_eval(&im, 32, 32, out);
  CHECK(memcmp(out, out2, 3 * 1024) == 0, "none = evaluation");
  int flipped = 0, kept = 0;
  for (uint64_t s = 0; s < 20; s++) {
    rt_augment_train(&im, RT_AUG_FLIP, s, 32, 32, out2);
    flipped += out2[0] == out[31] && out2[31] == out[0] && out[0] != out[31];
    kept += memcmp(out, out2, 3 * 1024) == 0;
  }
  CHECK(flipped + kept == 20 && flipped > 3 && kept > 3, "flip: %d flipped, %d kept of 20", flipped, kept);
  /* pad_crop: shifted by at most 4 with zero fill, seeded */
  int zeros = 0, border = 0;
  for (uint64_t s = 0; s < 20; s++) {
    rt_augment_train(&im, RT_AUG_PAD_CROP, s, 32, 32, out2);
    rt_augment_train(&im, RT_AUG_PAD_CROP, s, 32, 32, out + 3 * 1024);
    CHECK(memcmp(out2, out + 3 * 1024, 3 * 1024) == 0, "pad_crop seed %d repeats", (int)s);
    int z = 0, inside = 0;
    for (int p = 0; p < 1024; p++) {
      int x = p % 32, y = p / 32;
      z += out2[1024 + p] == 0;
      inside += out2[1024 + p] == 0 && x >= 4 && x < 28 && y >= 4 && y < 28;
    }
    zeros += z > 0, border += inside == 0;
  }
  CHECK(zeros >= 10 && border == 20, "pad_crop: %d of 20 with a zero border, %d with zeros only within 4 of the edge",
        zeros, border);

  /* 300x200 for a 224 input: evaluation resizes the shorter side to 256 and
   * cuts the centre: R at the centre is the picture's centre's */
  picture(px, 300, 200, 2);
  im = (RtImage){px, 300, 200, 300, 200};
  rt_augment_eval(&im, 224, 224, out);
  int mid = out[112 * 224 + 112], left = out[112 * 224];
  /* the crop spans 224/256 of 200 = 175 source pixels around x = 150 */
  CHECK(near(mid, 128, 3) && near(left, (int)((150 - 87.5) * 255 / 299), 4), "centre crop R: mid %d left %d", mid,
        left);
  CHECK(out[224 * 224 + 1000] == 25, "centre crop G %d", out[224 * 224 + 1000]);
  /* rrc: seeded, different per seed, crops within the picture */
  rt_augment_train(&im, RT_AUG_RRC, 11, 224, 224, out);
  rt_augment_train(&im, RT_AUG_RRC, 11, 224, 224, out2);
  CHECK(memcmp(out, out2, sizeof out) == 0, "rrc repeats for a seed");
  rt_augment_train(&im, RT_AUG_RRC, 12, 224, 224, out2);
  CHECK(memcmp(out, out2, sizeof out) != 0, "rrc differs between seeds");
  CHECK(rt_augment_seed(1, 0, 5) != rt_augment_seed(1, 1, 5) && rt_augment_seed(1, 0, 5) != rt_augment_seed(1, 0, 6),
        "seeds differ by epoch and position");
}

static void mk(const char *rel) { mkdir(at(rel), 0755); }

static void write_picture(const char *rel, int w, int h, int i) {
  static uint8_t px[64 * 64 * 3];
  picture(px, w, h, i);
  CHECK(jt_write(at(rel), px, w, h, 3, 95) == 0, "write %s", rel);
}

static void test_folder(void) {
  char err[1024];
  RtFolder f;
  CHECK(rt_folder_scan(at("nothere"), 0, &f, err, sizeof err) == RT_FOLDER_ERR_IO && strstr(err, "nothere: no such"),
        "missing root: %s", err);
  mk("noclass");
  write_picture("noclass/a.jpg", 8, 8, 0);
  CHECK(rt_folder_scan(at("noclass"), 0, &f, err, sizeof err) == RT_FOLDER_ERR_LAYOUT && strstr(err, "no class"),
        "no class folders: %s", err);
  mk("emptycls"), mk("emptycls/a"), mk("emptycls/b");
  write_picture("emptycls/a/x.jpg", 8, 8, 0);
  FILE *t = fopen(at("emptycls/b/notes.txt"), "w");
  if (t) fclose(t);
  CHECK(rt_folder_scan(at("emptycls"), 0, &f, err, sizeof err) == RT_FOLDER_ERR_LAYOUT &&
            strstr(err, "emptycls/b: no images"),
        "empty class: %s", err);

  /* set/: classes c, a, b (7 pictures each, 40x30), sorted to a, b, c */
  mk("set");
  const char *cls[] = {"c", "a", "b"};
  int id = 0;
  for (int c = 0; c < 3; c++) {
    char rel[256];
    snprintf(rel, sizeof rel, "set/%s", cls[c]);
    mk(rel);
    for (int i = 6; i >= 0; i--) {
      snprintf(rel, sizeof rel, "set/%s/%02d.%s", cls[c], i, i % 3 == 0 ? "JPEG" : i % 3 == 1 ? "jpeg" : "jpg");
      write_picture(rel, 40, 30, 0);
      id++;
    }
  }
  CHECK(rt_folder_scan(at("set"), 2, &f, err, sizeof err) == RT_FOLDER_ERR_LAYOUT && strstr(err, "model has 2"),
        "too many classes: %s", err);
  CHECK(rt_folder_scan(at("set"), 10, &f, err, sizeof err) == RT_FOLDER_OK, "%s", err);
  CHECK(f.nclass == 3 && f.n == 21 && !strcmp(f.classes[0], "a") && !strcmp(f.classes[2], "c"), "classes");
  CHECK(f.n == 21 && strstr(f.paths[0], "set/a/00.JPEG") && strstr(f.paths[8], "set/b/01.jpeg") && f.labels[8] == 1 &&
            f.labels[20] == 2,
        "sorted files: %s", f.n == 21 ? f.paths[8] : "");
  rt_folder_free(&f);
  rt_folder_free(&f);
}

/* Writes ids/<class>/NN.jpg: picture id (0..20) in class id % 3. */
static void make_ids(void) {
  mk("ids"), mk("ids/k0"), mk("ids/k1"), mk("ids/k2");
  remove(at("ids/k2/junk.jpg")); /* left by an earlier run in this WORKDIR */
  remove(at("ids/k2/fifo.jpg"));
  for (int i = 0; i < 21; i++) {
    char rel[256];
    snprintf(rel, sizeof rel, "ids/k%d/%02d.jpg", i % 3, i);
    write_picture(rel, 40, 30, i);
  }
}

/* All batches of `epochs` training epochs, concatenated (NULL on failure). */
static uint8_t *train_bytes(const RtFolder *f, int workers, int epochs, RtAugKind aug, int64_t *size) {
  RtLoaderConfig c = {
      .set = f, .batch = 4, .H = 16, .W = 16, .train = 1, .augment = aug, .seed = 9, .workers = workers};
  RtLoader *l = NULL;
  char err[1024];
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_OK, "%s", err);
  if (!l) return NULL;
  int64_t per = 4 * (3 * 256 + 8), nb = rt_loader_batches(l);
  uint8_t *all = calloc((size_t)(epochs * nb * per), 1);
  int64_t used = 0;
  for (int e = 0; e < epochs && all; e++) {
    rt_loader_start(l, e);
    RtLoaderBatch b;
    int got;
    while ((got = rt_loader_next(l, &b, err, sizeof err)) == 1) {
      CHECK(b.n == 4, "training batch of %lld", (long long)b.n);
      memcpy(all + used, b.images, (size_t)(b.n * 3 * 256));
      memcpy(all + used + b.n * 3 * 256, b.labels, (size_t)(b.n * 8));
      used += per;
    }
    CHECK(got == 0, "epoch end: %s", err);
  }
  CHECK(used == epochs * nb * per, "%lld of %lld bytes", (long long)used, (long long)(epochs * nb * per));
  *size = used;
  rt_loader_free(l);
  return all;
}

/* Every batch of epoch `epoch` of a loader made from c: images (3 * H * W
 * bytes each) and labels, in order, into fresh buffers; the batches'
 * lengths into len (at most cap); how many batches (-1 on failure). */
static int epoch_batches(const RtLoaderConfig *c, int epoch, uint8_t **images, int64_t **labels, int64_t *len,
                         int cap) {
  RtLoader *l = NULL;
  char err[1024];
  *images = NULL, *labels = NULL;
  CHECK(rt_loader_new(c, &l, err, sizeof err) == RT_LOADER_OK, "rank %d of %d: %s", c->rank, c->world, err);
  if (!l) return -1;
  int64_t S = 3 * (int64_t)c->H * c->W, most = rt_loader_batches(l) * c->batch;
  *images = malloc((size_t)(most * S + 1)), *labels = malloc(sizeof **labels * (size_t)(most + 1));
  int nb = 0, got;
  int64_t at = 0;
  rt_loader_start(l, epoch);
  RtLoaderBatch b;
  while (*images && *labels && (got = rt_loader_next(l, &b, err, sizeof err)) == 1 && nb < cap) {
    memcpy(*images + at * S, b.images, (size_t)(b.n * S));
    memcpy(*labels + at, b.labels, sizeof **labels * (size_t)b.n);
    len[nb++] = b.n, at += b.n;
  }
  rt_loader_free(l);
  return nb;
}

/* A data-parallel run's loaders (rank r of 3, batch 2; evaluation: of 2,
 * batch 4) serve the batches of one loader with batch 6 (evaluation: 4)
 * between them: the same images, transforms and labels, byte for byte. */
static void test_shards(const RtFolder *f) {
  enum { CAP = 16, S = 3 * 16 * 16 };
  int64_t len1[CAP], lenr[CAP];
  uint8_t *one, *part;
  int64_t *lab1, *labr;
  for (int e = 0; e < 2; e++) {
    RtLoaderConfig c = {
        .set = f, .batch = 6, .H = 16, .W = 16, .train = 1, .augment = RT_AUG_RRC, .seed = 9, .workers = 2};
    int nb1 = epoch_batches(&c, e, &one, &lab1, len1, CAP), same = nb1 == 3;
    for (int r = 0; r < 3; r++) {
      c.batch = 2, c.rank = r, c.world = 3;
      int nbr = epoch_batches(&c, e, &part, &labr, lenr, CAP);
      same &= nbr == nb1;
      for (int b = 0; same && b < nbr; b++)
        same &= lenr[b] == 2 && !memcmp(part + (b * 2) * S, one + (b * 6 + r * 2) * S, 2 * S) &&
                !memcmp(labr + b * 2, lab1 + b * 6 + r * 2, 2 * sizeof *labr);
      free(part), free(labr);
    }
    CHECK(same, "epoch %d: 3 ranks' training batches of 2 are one loader's batches of 6", e);
    free(one), free(lab1);
  }
  RtLoaderConfig c = {.set = f, .batch = 4, .H = 16, .W = 16, .workers = 2};
  int nb1 = epoch_batches(&c, 0, &one, &lab1, len1, CAP), same = nb1 == 6, total = 0;
  for (int r = 0; r < 2; r++) {
    c.rank = r, c.world = 2;
    int nbr = epoch_batches(&c, 0, &part, &labr, lenr, CAP);
    same &= nbr == 3;
    for (int b = 0, at = 0; same && b < nbr; at += (int)lenr[b], b++) {
      int g = b * 2 + r; /* the whole epoch's batch */
      same &= lenr[b] == len1[g] && !memcmp(part + at * S, one + g * 4 * S, (size_t)lenr[b] * S) &&
              !memcmp(labr + at, lab1 + g * 4, (size_t)lenr[b] * sizeof *labr);
      total += (int)lenr[b];
    }
    free(part), free(labr);
  }
  CHECK(same && total == 21, "evaluation batches go round 2 ranks, each image once (%d of 21)", total);
  free(one), free(lab1);
  RtLoader *l = NULL;
  char err[1024];
  c = (RtLoaderConfig){.set = f, .batch = 4, .H = 16, .W = 16, .train = 1, .rank = 0, .world = 6};
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_ERR_DATA && strstr(err, "on each of 6 processes"),
        "21 images, 6 ranks of 4: %s", err);
  c.rank = 6;
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_ERR_ARG && strstr(err, "rank 6 of a world of 6"),
        "rank 6 of 6: %s", err);
}

static void test_loader(void) {
  make_ids();
  char err[1024];
  RtFolder f;
  CHECK(rt_folder_scan(at("ids"), 0, &f, err, sizeof err) == RT_FOLDER_OK && f.n == 21, "%s", err);
  if (f.n != 21) {
    rt_folder_free(&f);
    return;
  }
  /* 21 images in batches of 4: 5 per training epoch; the same for 1 and 4 threads */
  int64_t n1 = 0, n4 = 0;
  uint8_t *a = train_bytes(&f, 1, 2, RT_AUG_RRC, &n1), *b = train_bytes(&f, 4, 2, RT_AUG_RRC, &n4);
  CHECK(a && b && n1 == n4 && n1 > 0 && memcmp(a, b, (size_t)n1) == 0, "1 and 4 threads give the same batches");
  int64_t half = n1 / 2;
  CHECK(a && memcmp(a, a + half, (size_t)half) != 0, "epochs differ");
  free(a), free(b);
  test_shards(&f);

  /* evaluation: every picture once, in order, last batch partial */
  RtLoaderConfig c = {.set = &f, .batch = 4, .H = 16, .W = 16, .workers = 3};
  RtLoader *l = NULL;
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_OK, "%s", err);
  for (int pass = 0; l && pass < 2; pass++) {
    int seen[21] = {0}, batches = 0, last = 0, order_ok = 1, prev = -1;
    rt_loader_start(l, pass);
    RtLoaderBatch bt;
    while (rt_loader_next(l, &bt, err, sizeof err) == 1) {
      batches++, last = (int)bt.n;
      for (int64_t i = 0; i < bt.n; i++) {
        long g = 0;
        for (int p = 0; p < 256; p++) g += bt.images[i * 768 + 256 + p];
        int id = (int)((g / 256 - 5 + 5) / 10);
        if (id >= 0 && id < 21) seen[id]++;
        /* sorted order: k0/00 k0/03 ... k1/01 ...; label = id % 3 */
        order_ok &= bt.labels[i] == id % 3 && (prev < 0 || bt.labels[i] > prev % 3 || id > prev);
        prev = id;
      }
    }
    int once = 1;
    for (int i = 0; i < 21; i++) once &= seen[i] == 1;
    CHECK(once && batches == 6 && last == 1 && order_ok, "pass %d: each once %d, %d batches, last %d, order %d", pass,
          once, batches, last, order_ok);
  }
  rt_loader_free(l);
  rt_folder_free(&f);

  /* unreadable pictures: counted, named, replaced (training) or left out (evaluation) */
  FILE *o = fopen(at("ids/k1/04.jpg"), "rb");
  static uint8_t bytes[1 << 16];
  size_t n = o ? fread(bytes, 1, sizeof bytes, o) : 0;
  if (o) fclose(o);
  o = fopen(at("ids/k1/04.jpg"), "wb");
  if (o) fwrite(bytes, 1, n / 2, o), fclose(o);
  o = fopen(at("ids/k2/junk.jpg"), "wb");
  if (o) fputs("this is not a picture", o), fclose(o);
  /* a FIFO named like a picture, with no writer: unreadable ("not a regular file"), never waited on */
  CHECK(mkfifo(at("ids/k2/fifo.jpg"), 0644) == 0 || errno == EEXIST, "mkfifo");
  CHECK(rt_folder_scan(at("ids"), 0, &f, err, sizeof err) == RT_FOLDER_OK && f.n == 23, "%s", err);
  RtLoaderConfig tc = {.set = &f, .batch = 4, .H = 16, .W = 16, .train = 1, .seed = 3, .workers = 2};
  CHECK(rt_loader_new(&tc, &l, err, sizeof err) == RT_LOADER_OK, "%s", err);
  for (int e = 0; l && e < 3; e++) {
    rt_loader_start(l, e);
    RtLoaderBatch bt;
    int full = 1, nb = 0;
    while (rt_loader_next(l, &bt, err, sizeof err) == 1) full &= bt.n == 4, nb++;
    CHECK(full && nb == 5, "epoch %d: %d full batches", e, nb);
  }
  char names[1024];
  int64_t bad = l ? rt_loader_unreadable(l, names, sizeof names) : 0;
  CHECK(bad == 3 && strstr(names, "k1/04.jpg: ") && strstr(names, "junk.jpg") &&
            strstr(names, "fifo.jpg: not a regular file (a FIFO)"),
        "unreadable %lld: %s", (long long)bad, names);
  rt_loader_free(l);
  c.set = &f;
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_OK, "%s", err);
  if (l) {
    rt_loader_start(l, 0);
    RtLoaderBatch bt;
    int64_t total = 0;
    while (rt_loader_next(l, &bt, err, sizeof err) == 1) total += bt.n;
    CHECK(total == 20 && rt_loader_unreadable(l, NULL, 0) == 3, "evaluation read %lld of 23", (long long)total);
  }
  rt_loader_free(l);
  rt_folder_free(&f);

  /* nothing readable: an error, not a hang */
  mk("allbad"), mk("allbad/x");
  for (int i = 0; i < 5; i++) {
    char rel[256];
    snprintf(rel, sizeof rel, "allbad/x/%d.jpg", i);
    o = fopen(at(rel), "wb");
    if (o) fputs("junk", o), fclose(o);
  }
  CHECK(rt_folder_scan(at("allbad"), 0, &f, err, sizeof err) == RT_FOLDER_OK, "%s", err);
  tc.set = &f;
  CHECK(rt_loader_new(&tc, &l, err, sizeof err) == RT_LOADER_OK, "%s", err);
  if (l) {
    rt_loader_start(l, 0);
    RtLoaderBatch bt;
    CHECK(rt_loader_next(l, &bt, err, sizeof err) == -1 && strstr(err, "none of the 5 images"), "all bad: %s", err);
  }
  rt_loader_free(l);
  tc.batch = 6;
  CHECK(rt_loader_new(&tc, &l, err, sizeof err) == RT_LOADER_ERR_DATA && strstr(err, "fewer than one batch"),
        "small set: %s", err);
  rt_folder_free(&f);
}

/* bytes of a file, at most cap */
static size_t slurp(const char *rel, uint8_t *buf, size_t cap) {
  FILE *o = fopen(at(rel), "rb");
  size_t n = o ? fread(buf, 1, cap, o) : 0;
  if (o) fclose(o);
  return n;
}

static void spill(const char *rel, const uint8_t *buf, size_t n) {
  FILE *o = fopen(at(rel), "wb");
  CHECK(o && fwrite(buf, 1, n, o) == n && fclose(o) == 0, "write %s", rel);
}

/* Files a photo collection may hold under a .jpg name: a JPEG cut short, a
 * PNG, an empty file, and a header claiming 30000x30000 pixels (over
 * RT_JPEG_MAX_PIXELS, refused before any pixel memory is asked for) --
 * each an error naming the file, in a decode, in the header read of the
 * GPU decoder's path, and in a loader's epoch, which reports and skips
 * them. */
static void test_hostile(void) {
  static uint8_t good[1 << 16], buf[1 << 16];
  char err[1024];
  mk("hostile"), mk("hostile/a"), mk("hostile/b");
  for (int i = 0; i < 6; i++) {
    char rel[64];
    snprintf(rel, sizeof rel, "hostile/%s/%d.jpg", i % 2 ? "b" : "a", i);
    write_picture(rel, 24, 20, i);
  }
  size_t n = slurp("hostile/a/0.jpg", good, sizeof good);
  CHECK(n > 100, "a picture of %zu bytes", n);
  spill("hostile/a/cut.jpg", good, n * 2 / 3);
  static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I',  'H',  'D',  'R', 0,
                                0,    0,   16,  0,   0,    0,    16,   8,    2, 0, 0, 0,  0x90, 0x91, 0x68, 0x36};
  spill("hostile/b/png.jpg", png, sizeof png);
  spill("hostile/b/empty.jpg", png, 0);
  /* the SOF marker (FF C0..C2): length, precision, then height and width */
  memcpy(buf, good, n);
  size_t sof = 0;
  for (size_t i = 2; i + 9 < n && !sof; i++)
    if (buf[i] == 0xff && buf[i + 1] >= 0xc0 && buf[i + 1] <= 0xc2) sof = i;
  CHECK(sof > 0, "no SOF marker in the picture");
  buf[sof + 5] = buf[sof + 7] = 30000 >> 8, buf[sof + 6] = buf[sof + 8] = 30000 & 0xff;
  spill("hostile/a/huge.jpg", buf, n);

  RtImage im;
  CHECK(rt_jpeg_decode_file(at("hostile/a/huge.jpg"), 0, &im, err, sizeof err) == RT_JPEG_ERR_FORMAT &&
            strstr(err, "huge.jpg: a 30000x30000 JPEG: 900000000 pixels, over the limit") && !im.px,
        "huge: %s", err);
  int w, h, gpu_ok;
  CHECK(rt_jpeg_header(buf, n, "huge.jpg", &w, &h, &gpu_ok, err, sizeof err) == RT_JPEG_ERR_FORMAT &&
            strstr(err, "huge.jpg: a 30000x30000 JPEG"),
        "huge header: %s", err);
  CHECK(rt_jpeg_decode_part(buf, n, "huge.jpg", 16, (const int[4]){0, 0, 3, 3}, &im, err, sizeof err) ==
                RT_JPEG_ERR_FORMAT &&
            strstr(err, "over the limit"),
        "huge part: %s", err);
  CHECK(rt_jpeg_decode_file(at("hostile/b/png.jpg"), 0, &im, err, sizeof err) == RT_JPEG_ERR_FORMAT &&
            strstr(err, "png.jpg: not a readable JPEG"),
        "png: %s", err);
  CHECK(rt_jpeg_header(png, sizeof png, "png.jpg", &w, &h, &gpu_ok, err, sizeof err) == RT_JPEG_ERR_FORMAT &&
            strstr(err, "png.jpg: not a readable JPEG"),
        "png header: %s", err);
  CHECK(rt_jpeg_decode_file(at("hostile/a/cut.jpg"), 0, &im, err, sizeof err) == RT_JPEG_ERR_FORMAT &&
            strstr(err, "cut.jpg: "),
        "cut: %s", err);
  CHECK(rt_jpeg_decode_file(at("hostile/b/empty.jpg"), 0, &im, err, sizeof err) == RT_JPEG_ERR_FORMAT &&
            strstr(err, "empty.jpg: "),
        "empty: %s", err);

  RtFolder f;
  CHECK(rt_folder_scan(at("hostile"), 0, &f, err, sizeof err) == RT_FOLDER_OK && f.n == 10, "%s", err);
  for (int train = 1; train >= 0; train--) {
    RtLoaderConfig c = {.set = &f, .batch = 2, .H = 16, .W = 16, .train = train, .seed = 9, .workers = 2};
    RtLoader *l = NULL;
    CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_OK, "%s", err);
    if (!l) continue;
    rt_loader_start(l, 0);
    RtLoaderBatch bt;
    int64_t got = 0;
    int r;
    while ((r = rt_loader_next(l, &bt, err, sizeof err)) == 1) got += bt.n;
    char names[2048];
    int64_t bad = rt_loader_unreadable(l, names, sizeof names);
    /* training replaces the 4 unreadable images (5 full batches), evaluation leaves them out (the 6 good) */
    CHECK(r == 0 && got == (train ? 10 : 6) && bad == 4, "%s: %lld images, %lld unreadable, end %d: %s",
          train ? "training" : "evaluation", (long long)got, (long long)bad, r, err);
    CHECK(
        strstr(names, "huge.jpg") || strstr(names, "cut.jpg") || strstr(names, "png.jpg") || strstr(names, "empty.jpg"),
        "names: %s", names);
    rt_loader_free(l);
  }
  rt_folder_free(&f);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: data_test_data WORKDIR\n");
    return 2;
  }
  snprintf(work, sizeof work, "%s", argv[1]);
  mkdir(work, 0755);
  test_decode();
  test_augment();
  test_folder();
  test_loader();
  test_hostile();
  return check_report();
}
