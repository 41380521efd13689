/* test_fmnist.c - train a model on Fashion-MNIST on the CPU and require it
 * to learn.
 *
 * Usage: train_test_fmnist SOURCE_DIR DATA_DIR MODEL TRAIN_IMAGES TEST_IMAGES EPOCHS MIN_ACCURACY
 *
 * Compiles MODEL for training and for inference, trains on the first
 * TRAIN_IMAGES of the training set (full batches only) for EPOCHS epochs
 * with the model's train section (batch, optimizer, schedule), evaluates on
 * the first TEST_IMAGES of the test set, and requires the test accuracy to
 * reach MIN_ACCURACY (chance is 0.1) and the loss of the last steps to be
 * below that of the first.  NETC_TRAIN_IMAGES and NETC_TEST_IMAGES in the
 * environment override the sizes (to shrink a slow build's run).  Exits 77
 * when the data set is not installed (Debian: dataset-fashion-mnist). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "rt_idx.h"
#include "rt_train_cpu.h"
#include "traintest.h"

static const float FMNIST_MEAN = 0.2860f, FMNIST_STD = 0.3530f;

static int64_t size_arg(const char *env, const char *arg) {
  const char *s = getenv(env);
  return atoll(s && *s ? s : arg);
}

static int on_epoch(const RtTrainEpoch *e, void *user) {
  const char *model = user;
  printf("%s epoch %lld: %lld steps, loss %.4f (first %.4f, last %.4f), lr %.4g, test accuracy %.4f on %lld, "
         "%.1f s, %.0f images/s, eval %.1f s\n",
         model, (long long)e->epoch, (long long)e->steps, e->loss_mean, e->loss_head, e->loss_tail, e->lr_last,
         e->test_accuracy, (long long)e->test_n, e->train_seconds, e->images_per_s, e->eval_seconds);
  fflush(stdout);
  return 0;
}

static int load(const char *dir, const char *prefix, RtIdxSet *set) {
  char img[4096], lab[4096], err[RT_IDX_ERRMAX];
  snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
  snprintf(lab, sizeof lab, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
  if (access(img, R_OK) || access(lab, R_OK)) return 77;
  if (rt_idx_load(img, lab, set, err, sizeof err) != RT_IDX_OK) {
    CHECK(0, "loading %s: %s", prefix, err);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 8) return check_skip("usage: train_test_fmnist SOURCE_DIR DATA_DIR MODEL TRAIN TEST EPOCHS MIN_ACC");
  const char *root = argv[1], *dir = argv[2], *model = argv[3];
  int64_t ntrain = size_arg("NETC_TRAIN_IMAGES", argv[4]), ntest = size_arg("NETC_TEST_IMAGES", argv[5]);
  int64_t epochs = atoll(argv[6]);
  double min_acc = atof(argv[7]);
  RtIdxSet train = {0}, test = {0};
  int rc = load(dir, "train", &train);
  if (rc == 0) rc = load(dir, "t10k", &test);
  if (rc == 77) {
    rt_idx_free(&train);
    return check_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
  }
  Arena a;
  arena_init(&a);
  IrGraph *gt = rc ? NULL : traintest_compile(&a, root, model, 0);
  IrGraph *gi = rc ? NULL : traintest_compile(&a, root, model, 1);
  CHECK(rc || (gt && gi), "%s compiles for training and inference", model);
  if (gt && gi) {
    if (ntrain > train.n) ntrain = train.n;
    if (ntest > test.n) ntest = test.n;
    int64_t sample = (int64_t)train.rows * train.cols;
    RtTrainData dtrain = {train.images, train.labels, ntrain, sample};
    RtTrainData dtest = {test.images, test.labels, ntest, sample};
    RtTrainCfg cfg = {.epochs = epochs, .seed = 1, .init = 1, .mean = FMNIST_MEAN, .std = FMNIST_STD,
                      .eval_batch = 100, .on_epoch = on_epoch, .user = (void *)model};
    RtTrainResult res;
    char err[RT_TRAIN_ERRMAX];
    RtTrainStatus st = rt_train_cpu(gt, gi, &dtrain, &dtest, &cfg, &res, err, sizeof err);
    CHECK(st == RT_TRAIN_OK, "training %s: status %d: %s", model, (int)st, err);
    printf("%s: %lld images, %lld epochs, %lld steps, loss %.4f -> %.4f, test accuracy %.4f (need %.2f), "
           "%.0f images/s\n",
           model, (long long)ntrain, (long long)res.epochs, (long long)res.steps, res.loss_first, res.loss_last,
           res.test_accuracy, min_acc, res.images_per_s);
    CHECK(res.epochs == epochs, "ran %lld of %lld epochs", (long long)res.epochs, (long long)epochs);
    CHECK(res.test_accuracy >= min_acc, "test accuracy %.4f below %.2f", res.test_accuracy, min_acc);
    CHECK(res.loss_last < res.loss_first, "loss did not fall: %.4f -> %.4f", res.loss_first, res.loss_last);
    CHECK(res.images_per_s > 0, "throughput measured");
  }
  arena_free(&a);
  rt_idx_free(&train);
  rt_idx_free(&test);
  return check_report();
}
