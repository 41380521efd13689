/* test_cifar.c - the data pipeline on CIFAR-10 JPEGs (extracted by
 * with_cifar.sh; the last argument is their folder, with train/ and test/).
 *
 *   data_test_cifar loader DIR
 *     the same batches for 1 and 4 threads; the evaluation pass visits each
 *     test image once, in order, bytes as decoded; the decoded training
 *     set's mean RGB is CIFAR-10's published 0.4913/0.4821/0.4465; prints
 *     the loader's images/s with 1 and 2 threads (measured, not asserted).
 *   data_test_cifar train SOURCE_DIR TRAIN_IMAGES TEST_IMAGES EPOCHS MIN_ACCURACY DIR
 *     models/resnet20.net on the CPU through net_train on NET_DATA_FOLDER:
 *     the loss falls and the test accuracy beats chance (10%) by MIN_ACCURACY. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "net.h"
#include "rt_folder.h"
#include "rt_jpeg.h"
#include "rt_loader.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One training epoch's bytes with this many threads. */
static uint8_t *epoch_bytes(const RtFolder *f, int workers, int64_t limit, int64_t *size, double *per_s) {
  RtLoaderConfig c = {
      .set = f, .limit = limit, .batch = 64, .H = 32, .W = 32, .train = 1, .seed = 5, .workers = workers};
  RtLoader *l = NULL;
  char err[1024];
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_OK, "%s", err);
  if (!l) return NULL;
  int64_t per = 64 * 3072, nb = rt_loader_batches(l);
  uint8_t *all = malloc((size_t)(nb * (per + 64 * 8)));
  int64_t used = 0;
  double t0 = now_s();
  rt_loader_start(l, 3);
  RtLoaderBatch b;
  while (all && rt_loader_next(l, &b, err, sizeof err) == 1) {
    memcpy(all + used, b.images, (size_t)per);
    memcpy(all + used + per, b.labels, 64 * 8);
    used += per + 64 * 8;
  }
  *per_s = (double)(nb * 64) / (now_s() - t0);
  *size = used;
  rt_loader_free(l);
  return all;
}

static int test_loader(const char *dir) {
  char root[4096], err[1024];
  RtFolder tr, te;
  snprintf(root, sizeof root, "%s/train", dir);
  CHECK(rt_folder_scan(root, 10, &tr, err, sizeof err) == RT_FOLDER_OK, "%s", err);
  snprintf(root, sizeof root, "%s/test", dir);
  CHECK(rt_folder_scan(root, 10, &te, err, sizeof err) == RT_FOLDER_OK, "%s", err);
  if (tr.n < 1000 || te.n < 100) return check_report();
  CHECK(tr.nclass == 10 && !strcmp(tr.classes[0], "airplane") && !strcmp(tr.classes[9], "truck"), "classes");

  int64_t n1 = 0, n4 = 0;
  double r1, r4;
  uint8_t *a = epoch_bytes(&tr, 1, 2048, &n1, &r1), *b = epoch_bytes(&tr, 4, 2048, &n4, &r4);
  CHECK(a && b && n1 == n4 && n1 > 0 && memcmp(a, b, (size_t)n1) == 0, "1 and 4 threads: the same %lld bytes",
        (long long)n1);
  free(a), free(b);

  /* evaluation: every test image once, in sorted order, as decoded */
  RtLoaderConfig c = {.set = &te, .batch = 96, .H = 32, .W = 32, .workers = 2};
  RtLoader *l = NULL;
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_OK, "%s", err);
  if (l) {
    rt_loader_start(l, 0);
    RtLoaderBatch bt;
    int64_t seen = 0, per_class[10] = {0}, same = 0;
    int sorted = 1;
    while (rt_loader_next(l, &bt, err, sizeof err) == 1) {
      for (int64_t i = 0; i < bt.n; i++, seen++) {
        per_class[bt.labels[i]]++;
        sorted &= bt.labels[i] == te.labels[seen];
        if (seen % 97) continue;
        RtImage im;
        if (rt_jpeg_decode_file(te.paths[seen], 0, &im, err, sizeof err) != RT_JPEG_OK) continue;
        int eq = im.w == 32 && im.h == 32;
        for (int p = 0; eq && p < 1024; p++)
          for (int ch = 0; ch < 3; ch++) eq &= im.px[p * 3 + ch] == bt.images[i * 3072 + ch * 1024 + p];
        same += eq;
        rt_image_free(&im);
      }
    }
    int64_t want = te.n / 10;
    int even = 1;
    for (int k = 0; k < 10; k++) even &= per_class[k] == want;
    CHECK(seen == te.n && sorted && even, "evaluation: %lld of %lld images, sorted %d, %lld per class", (long long)seen,
          (long long)te.n, sorted, (long long)per_class[0]);
    CHECK(same == (te.n + 96) / 97, "evaluation bytes as decoded: %lld of %lld", (long long)same,
          (long long)(te.n + 96) / 97);
  }
  rt_loader_free(l);

  /* the decoded training set's mean RGB */
  c = (RtLoaderConfig){.set = &tr, .limit = 5000, .batch = 100, .H = 32, .W = 32, .workers = 2};
  CHECK(rt_loader_new(&c, &l, err, sizeof err) == RT_LOADER_OK, "%s", err);
  if (l) {
    double sum[3] = {0};
    int64_t n = 0;
    rt_loader_start(l, 0);
    RtLoaderBatch bt;
    while (rt_loader_next(l, &bt, err, sizeof err) == 1)
      for (int64_t i = 0; i < bt.n; i++, n++)
        for (int ch = 0; ch < 3; ch++)
          for (int p = 0; p < 1024; p++) sum[ch] += bt.images[i * 3072 + ch * 1024 + p];
    const double want[3] = {0.4913, 0.4821, 0.4465};
    for (int ch = 0; ch < 3; ch++) {
      double m = sum[ch] / (255.0 * 1024.0 * (double)n);
      printf("mean %c over %lld training images: %.4f (CIFAR-10: %.4f)\n", "RGB"[ch], (long long)n, m, want[ch]);
      CHECK(m > want[ch] - 0.012 && m < want[ch] + 0.012, "mean channel %d: %.4f, want %.4f", ch, m, want[ch]);
    }
  }
  rt_loader_free(l);

  int64_t sz;
  double s1 = 0, s2 = 0;
  free(epoch_bytes(&tr, 1, 0, &sz, &s1));
  free(epoch_bytes(&tr, 2, 0, &sz, &s2));
  printf("loader, %lld CIFAR training images, pad_crop + flip: %.0f images/s with 1 thread, %.0f with 2\n",
         (long long)tr.n, s1, s2);
  rt_folder_free(&tr);
  rt_folder_free(&te);
  return check_report();
}

static int on_epoch(const NetEpochInfo *e, void *user) {
  (void)user;
  printf("epoch %lld: loss %.4f (%.4f -> %.4f), top-1 %.3f, top-5 %.3f on %lld, %.0f images/s, data wait %.2f s\n",
         (long long)e->epoch + 1, e->loss_mean, e->loss_first, e->loss_last, e->test_accuracy, e->test_top5,
         (long long)e->test_n, e->images_per_s, e->data_wait_seconds);
  return 0;
}

static int test_train(char **argv) {
  char model[4096], tr[4096], te[4096];
  snprintf(model, sizeof model, "%s/models/resnet20.net", argv[2]);
  snprintf(tr, sizeof tr, "%s/train", argv[7]);
  snprintf(te, sizeof te, "%s/test", argv[7]);
  NetLoadOpts o = {.device = "cpu", .batch = 32, .seed = 1};
  NetModel *m = NULL;
  NetStatus s = net_load(model, &o, &m);
  CHECK(s == NET_OK, "net_load: %s", net_last_error());
  if (s) return check_report();
  NetTrainResult r = {0};
  NetTrainConfig c = {.data = NET_DATA_FOLDER,
                      .train_dir = tr,
                      .test_dir = te,
                      .train_limit = atoll(argv[3]),
                      .test_limit = atoll(argv[4]),
                      .epochs = atoll(argv[5]),
                      .seed = 2,
                      .workers = 2,
                      .mean3 = {0.4914f, 0.4822f, 0.4465f},
                      .std3 = {0.2470f, 0.2435f, 0.2616f},
                      .on_epoch = on_epoch,
                      .result = &r};
  double t0 = now_s();
  s = net_train(m, &c);
  CHECK(s == NET_OK, "net_train: %s: %s", net_status_name(s), net_last_error());
  double min_acc = atof(argv[6]);
  printf("resnet20: %lld steps in %.1f s, loss %.4f -> %.4f, test top-1 %.3f top-5 %.3f, data wait %.2f s\n",
         (long long)r.steps, now_s() - t0, r.loss_first, r.loss_last, r.test_accuracy, r.test_top5,
         r.data_wait_seconds);
  /* MIN_ACCURACY 0 (the sanitizer build): too few steps to ask for learning */
  if (min_acc > 0) {
    CHECK(r.loss_last < r.loss_first, "loss %.4f -> %.4f", r.loss_first, r.loss_last);
    CHECK(r.test_accuracy > min_acc, "test accuracy %.3f, want above %.2f", r.test_accuracy, min_acc);
    CHECK(r.test_top5 > 0.5, "top-5 %.3f", r.test_top5);
  }
  CHECK(r.steps == c.epochs * (c.train_limit / 32) && r.test_top5 >= r.test_accuracy && r.test_accuracy >= 0,
        "%lld steps, top-1 %.3f, top-5 %.3f", (long long)r.steps, r.test_accuracy, r.test_top5);
  CHECK(r.unreadable == 0 && r.data_wait_seconds >= 0 && r.data_wait_seconds < r.train_seconds, "data wait %.3f",
        r.data_wait_seconds);
  /* errors: a test set whose classes differ, an unknown augmentation */
  c.test_dir = tr;
  c.augment = "zoom";
  CHECK(net_train(m, &c) == NET_ERR_ARG && strstr(net_last_error(), "zoom"), "augment: %s", net_last_error());
  c.augment = NULL;
  c.train_dir = "/nonexistent/netc-data";
  CHECK(net_train(m, &c) == NET_ERR_DATA && strstr(net_last_error(), "/nonexistent/netc-data: no such folder"),
        "missing: %s", net_last_error());
  net_free(m);
  return check_report();
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "loader")) return test_loader(argv[2]);
  if (argc == 8 && !strcmp(argv[1], "train")) return test_train(argv);
  fprintf(stderr, "usage: data_test_cifar loader DIR | train SOURCE_DIR TRAIN TEST EPOCHS MIN_ACCURACY DIR\n");
  return 2;
}
