/* test_idx_fashion.c - load Debian's Fashion-MNIST (dataset-fashion-mnist)
 * and check what is known about it: 10000 test and 60000 training images
 * of 28x28, labels 0..9 in exactly equal numbers, the first test labels,
 * and the test set's pixel total.  Skipped when the package is absent. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "rt_idx.h"

static void path_of(char *buf, size_t cap, const char *file) { snprintf(buf, cap, "%s/%s", NETC_FASHION_DIR, file); }

static void check_counts(const RtIdxSet *s, int64_t per_class) {
  int64_t count[256] = {0};
  for (int64_t i = 0; i < s->n; i++) count[s->labels[i]]++;
  for (int c = 0; c < 10; c++)
    CHECK(count[c] == per_class, "class %d has %lld labels, want %lld", c, (long long)count[c], (long long)per_class);
  int64_t other = 0;
  for (int c = 10; c < 256; c++) other += count[c];
  CHECK(other == 0, "%lld labels outside 0..9", (long long)other);
}

int main(void) {
  char img[512], lab[512], trimg[512], trlab[512], err[RT_IDX_ERRMAX];
  path_of(img, sizeof img, "t10k-images-idx3-ubyte.gz");
  path_of(lab, sizeof lab, "t10k-labels-idx1-ubyte.gz");
  path_of(trimg, sizeof trimg, "train-images-idx3-ubyte.gz");
  path_of(trlab, sizeof trlab, "train-labels-idx1-ubyte.gz");
  if (access(img, R_OK) != 0 || access(lab, R_OK) != 0 || access(trimg, R_OK) != 0 || access(trlab, R_OK) != 0)
    return check_skip("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");

  RtIdxSet test;
  RtIdxStatus st = rt_idx_load(img, lab, &test, err, sizeof err);
  CHECK(st == RT_IDX_OK, "load test set: %s", err);
  if (st == RT_IDX_OK) {
    CHECK(test.n == 10000 && test.rows == 28 && test.cols == 28, "test set is %lldx%dx%d", (long long)test.n, test.rows,
          test.cols);
    check_counts(&test, 1000);
    /* Ankle boot, pullover, trouser, trouser, shirt, trouser, coat, shirt,
     * sandal, sneaker: the first ten test labels. */
    static const uint8_t first[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    CHECK(memcmp(test.labels, first, 10) == 0, "first labels %d %d %d ...", test.labels[0], test.labels[1],
          test.labels[2]);
    uint64_t sum = 0, first_sum = 0;
    int zero_border = 1;
    for (int64_t i = 0; i < test.n * 28 * 28; i++) sum += test.images[i];
    for (int i = 0; i < 28 * 28; i++) first_sum += test.images[i];
    for (int i = 0; i < 28; i++) zero_border &= test.images[i] == 0; /* image 0's top row is background */
    /* Totals from an independent decode (Python gzip + struct). */
    CHECK(sum == 573469082u, "pixel sum %llu", (unsigned long long)sum);
    CHECK(first_sum == 33456u, "first image sum %llu", (unsigned long long)first_sum);
    CHECK(zero_border, "first image's top row is not background");
  }

  RtIdxSet train;
  st = rt_idx_load(trimg, trlab, &train, err, sizeof err);
  CHECK(st == RT_IDX_OK, "load training set: %s", err);
  if (st == RT_IDX_OK) {
    CHECK(train.n == 60000 && train.rows == 28 && train.cols == 28, "train set is %lld", (long long)train.n);
    check_counts(&train, 6000);
  }

  /* Mixing the sets' files is refused: the counts disagree. */
  RtIdxSet mixed;
  st = rt_idx_load(img, trlab, &mixed, err, sizeof err);
  CHECK(st == RT_IDX_ERR_FORMAT && mixed.images == NULL && mixed.labels == NULL, "mixed: %d", st);
  CHECK(strstr(err, trlab) && strstr(err, "has 60000 labels but") && strstr(err, "10000 images"), "mixed: %s", err);

  rt_idx_free(&test);
  rt_idx_free(&train);
  rt_idx_free(NULL);
  return check_report();
}
