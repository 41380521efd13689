/* test_fmnist.c - train a model on Fashion-MNIST on the CPU through the
 * public API (net_load, net_train) and require it to learn.
 *
 * Usage: train_test_fmnist SOURCE_DIR DATA_DIR MODEL TRAIN_IMAGES TEST_IMAGES EPOCHS MIN_ACCURACY
 *
 * Loads MODEL on the CPU (seed 1), trains on the first TRAIN_IMAGES of the
 * training set (full batches only) for EPOCHS epochs with the model's train
 * section (batch, optimizer, schedule) and the API's Fashion-MNIST
 * normalization, evaluates on the first TEST_IMAGES of the test set after
 * every epoch, and requires the test accuracy to reach MIN_ACCURACY (chance
 * is 0.1) and the loss of the last steps to be below that of the first.
 * NETC_TRAIN_IMAGES and NETC_TEST_IMAGES in the environment override the
 * sizes (to shrink a slow build's run).  Exits 77 when the data set is not
 * installed (Debian: dataset-fashion-mnist). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "net.h"

enum { FMNIST_TRAIN = 60000, FMNIST_TEST = 10000 };

typedef struct Run {
  const char *model;
  int64_t epochs_seen, test_n_expected, test_n_wrong;
} Run;

static int64_t size_arg(const char *env, const char *arg) {
  const char *s = getenv(env);
  return atoll(s && *s ? s : arg);
}

static int on_epoch(const NetEpochInfo *e, void *user) {
  Run *r = user;
  printf("%s epoch %lld: %lld steps, loss %.4f (first %.4f, last %.4f), lr %.4g, test accuracy %.4f on %lld, "
         "%.1f s, %.0f images/s, eval %.1f s\n",
         r->model, (long long)e->epoch, (long long)e->steps, e->loss_mean, e->loss_first, e->loss_last, e->lr_last,
         e->test_accuracy, (long long)e->test_n, e->train_seconds, e->images_per_s, e->eval_seconds);
  fflush(stdout);
  r->epochs_seen++;
  r->test_n_wrong += e->test_n != r->test_n_expected;
  return 0;
}

/* DIR/PREFIX-{images-idx3,labels-idx1}-ubyte, gzipped or not (what net_train reads). */
static int have_set(const char *dir, const char *prefix) {
  char img[4096], lab[4096];
  for (int gz = 0; gz < 2; gz++) {
    snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte%s", dir, prefix, gz ? ".gz" : "");
    snprintf(lab, sizeof lab, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gz ? ".gz" : "");
    if (!access(img, R_OK) && !access(lab, R_OK)) return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 8) return check_skip("usage: train_test_fmnist SOURCE_DIR DATA_DIR MODEL TRAIN TEST EPOCHS MIN_ACC");
  const char *root = argv[1], *dir = argv[2], *model = argv[3];
  int64_t ntrain = size_arg("NETC_TRAIN_IMAGES", argv[4]), ntest = size_arg("NETC_TEST_IMAGES", argv[5]);
  int64_t epochs = atoll(argv[6]);
  double min_acc = atof(argv[7]);
  if (!have_set(dir, "train") || !have_set(dir, "t10k"))
    return check_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
  if (ntrain > FMNIST_TRAIN) ntrain = FMNIST_TRAIN;
  if (ntest > FMNIST_TEST) ntest = FMNIST_TEST;

  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, model);
  NetLoadOpts o = {.device = "cpu", .seed = 1};
  NetModel *m = NULL;
  NetStatus st = net_load(path, &o, &m);
  CHECK(st == NET_OK, "%s loads on the CPU: %s: %s", model, net_status_name(st), net_last_error());
  if (m) {
    Run run = {.model = model, .test_n_expected = ntest};
    NetTrainResult res;
    NetTrainConfig cfg = {.data = NET_DATA_IDX,
                          .idx_dir = dir,
                          .train_limit = ntrain,
                          .test_limit = ntest,
                          .epochs = epochs,
                          .seed = 1,
                          .on_epoch = on_epoch,
                          .user = &run,
                          .result = &res};
    st = net_train(m, &cfg);
    CHECK(st == NET_OK, "training %s: %s: %s", model, net_status_name(st), net_last_error());
    int64_t batch = net_batch(m);
    printf("%s: %lld images, %lld epochs, %lld steps, loss %.4f -> %.4f, test accuracy %.4f (need %.2f), "
           "%.0f images/s\n",
           model, (long long)ntrain, (long long)res.epochs, (long long)res.steps, res.loss_first, res.loss_last,
           res.test_accuracy, min_acc, res.images_per_s);
    CHECK(res.epochs == epochs && run.epochs_seen == epochs, "ran %lld of %lld epochs (%lld reported)",
          (long long)res.epochs, (long long)epochs, (long long)run.epochs_seen);
    CHECK(res.steps == epochs * (ntrain / batch), "%lld steps, want %lld epochs of %lld full batches of %lld",
          (long long)res.steps, (long long)epochs, (long long)(ntrain / batch), (long long)batch);
    CHECK(run.test_n_wrong == 0, "every epoch evaluated the first %lld test images", (long long)ntest);
    CHECK(res.test_accuracy >= min_acc, "test accuracy %.4f below %.2f", res.test_accuracy, min_acc);
    CHECK(res.loss_last < res.loss_first, "loss did not fall: %.4f -> %.4f", res.loss_first, res.loss_last);
    CHECK(res.images_per_s > 0, "throughput measured");
    net_free(m);
  }
  return check_report();
}
