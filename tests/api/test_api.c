/* test_api.c - the public API (runtime/net.h) on the CPU: load a .net, a
 * step, inference, a weights round trip, short training runs (synthetic
 * data; Fashion-MNIST when installed) and the error statuses with their
 * messages.  Usage: test_api SOURCE_DIR WORKDIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "net.h"

#define FMNIST "/usr/share/datasets/fashion-mnist"

static char root[2048], work[2048];

static const char *at(const char *dir, const char *rel) {
  static char buf[4][4096];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, rel);
  return buf[k];
}

static void fill(float *img, int64_t *lab, int64_t n, int64_t sample, int64_t classes, unsigned seed) {
  for (int64_t i = 0; i < n * sample; i++)
    img[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 1023) / 512 - 1;
  for (int64_t i = 0; i < n; i++) lab[i] = (int64_t)(((seed = seed * 1103515245u + 12345u) >> 16) % (unsigned)classes);
}

static NetModel *load_cpu(const char *model, int64_t batch, int keep_grads) {
  NetLoadOpts o = {.device = "cpu", .batch = batch, .seed = 7, .keep_grads = keep_grads};
  NetModel *m = NULL;
  NetStatus s = net_load(at(root, model), &o, &m);
  CHECK(s == NET_OK && m, "net_load %s: %s: %s", model, net_status_name(s), net_last_error());
  return m;
}

static void test_step_infer_weights(void) {
  NetModel *m = load_cpu("models/smallcnn.net", 8, 1);
  if (!m) return;
  CHECK(strcmp(net_device(m), "cpu") == 0, "device %s", net_device(m));
  int64_t chw[3];
  CHECK(net_image_numel(m, chw) == 784 && chw[0] == 1 && chw[1] == 28 && chw[2] == 28, "image dims");
  CHECK(net_classes(m) == 10 && net_batch(m) == 8, "classes %lld batch %lld", (long long)net_classes(m),
        (long long)net_batch(m));
  float img[8 * 784], logits[8 * 10], logits2[8 * 10], before[8 * 10];
  int64_t lab[8];
  fill(img, lab, 8, 784, 10, 3);
  CHECK(net_infer(m, img, 8, before) == NET_OK, "infer: %s", net_last_error());
  NetBatch b = {.n = 8, .images = img, .labels = lab};
  NetStepOut out = {.logits = logits};
  float first = 0;
  for (int i = 0; i < 5; i++) {
    NetStatus s = net_step(m, &b, &out);
    CHECK(s == NET_OK, "step %d: %s", i, net_last_error());
    if (i == 0) first = out.loss;
  }
  CHECK(first > 1.5f && first < 3.5f, "first loss %g (about ln 10)", first);
  CHECK(out.loss < first, "5 steps on one batch must lower the loss: %g -> %g", first, out.loss);
  CHECK(out.lr > 0.049f && out.lr < 0.051f && out.loss_scale >= 1.0f, "lr %g scale %g", out.lr, out.loss_scale);
  CHECK(net_step_save(m, at(work, "step.safetensors")) == NET_OK, "step_save: %s", net_last_error());
  CHECK(net_infer(m, img, 8, logits) == NET_OK, "infer: %s", net_last_error());
  int changed = 0;
  for (int i = 0; i < 80; i++) changed |= logits[i] != before[i];
  CHECK(changed, "inference does not see the trained parameters");
  /* 3 images: one partial chunk, the same rows */
  float three[3 * 10];
  CHECK(net_infer(m, img, 3, three) == NET_OK && memcmp(three, logits, sizeof three) == 0, "partial chunk differs");

  /* round trip: a fresh model with these weights infers the same */
  CHECK(net_weights_save(m, at(work, "w.safetensors")) == NET_OK, "save: %s", net_last_error());
  NetModel *m2 = load_cpu("models/smallcnn.net", 8, 0);
  if (m2) {
    CHECK(net_infer(m2, img, 8, logits2) == NET_OK, "infer m2");
    CHECK(memcmp(logits, logits2, sizeof logits) != 0, "another seed's model must differ before loading");
    CHECK(net_weights_load(m2, at(work, "w.safetensors")) == NET_OK, "load: %s", net_last_error());
    CHECK(net_infer(m2, img, 8, logits2) == NET_OK && memcmp(logits, logits2, sizeof logits) == 0,
          "logits after a weights round trip differ");
    /* another batch rebuilds the executor and keeps the parameters */
    NetBatch b4 = {.n = 4, .images = img, .labels = lab, .lr = 0.01f};
    CHECK(net_step(m2, &b4, &out) == NET_OK && net_batch(m2) == 4, "batch 4 step: %s", net_last_error());
    CHECK(net_infer(m2, img, 8, logits2) == NET_OK, "infer after rebatch: %s", net_last_error());
    net_free(m2);
  }
  /* an inference-only model takes a training save (momentum buffers, loss scale) and refuses what a
     training model refuses: step.safetensors' loss, logits and gradients are extra for both */
  NetLoadOpts io = {.device = "cpu", .batch = 8, .inference_only = 1};
  NetModel *mi = NULL;
  CHECK(net_load(at(root, "models/smallcnn.net"), &io, &mi) == NET_OK, "inference-only: %s", net_last_error());
  if (mi) {
    float want[8 * 10]; /* m holds w.safetensors' weights (`logits` took m2's step) */
    CHECK(net_infer(m, img, 8, want) == NET_OK, "infer: %s", net_last_error());
    CHECK(net_weights_load(mi, at(work, "w.safetensors")) == NET_OK, "inference-only load: %s", net_last_error());
    CHECK(net_infer(mi, img, 8, logits2) == NET_OK && memcmp(want, logits2, sizeof want) == 0,
          "an inference-only model's logits differ");
    NetStatus s = net_weights_load(mi, at(work, "step.safetensors"));
    CHECK(s == NET_ERR_WEIGHTS && strstr(net_last_error(), "extra 'loss'") &&
              strstr(net_last_error(), "extra 'conv1.weight.grad'"),
          "inference-only: a step's results are not weights: %s %s", net_status_name(s), net_last_error());
    net_free(mi);
  }
  NetStatus s = net_weights_load(m, at(work, "step.safetensors"));
  CHECK(s == NET_ERR_WEIGHTS && strstr(net_last_error(), "extra 'loss'"), "training: %s %s", net_status_name(s),
        net_last_error());
  net_free(m);
}

static int on_step(const NetStepInfo *s, void *user) {
  (*(int *)user)++;
  return s->step >= 1;
}
static int on_ckpt(int64_t step, const char *path, void *user) {
  (void)path;
  ((int *)user)[1] = (int)step;
  return 0;
}

static int log_all(const NetStepInfo *s, void *user) {
  int *u = user;
  u[0]++;
  return s->loss != s->loss;
}

static int raise_at_3(const NetStepInfo *s, void *user) {
  if (s->step == 3) *(volatile int *)user = 1;
  return 0;
}

static void test_train_synthetic(void) {
  NetModel *m = load_cpu("models/mlp.net", 32, 0);
  if (!m) return;
  NetTrainResult r;
  int calls[2] = {0, 0};
  NetTrainConfig c = {.data = NET_DATA_SYNTHETIC,
                      .synthetic_n = 3200,
                      .epochs = 2,
                      .seed = 1,
                      .result = &r,
                      .on_step = log_all,
                      .user = calls,
                      .checkpoint = at(work, "ckpt.safetensors"),
                      .checkpoint_every = 25,
                      .on_checkpoint = on_ckpt};
  NetStatus s = net_train(m, &c);
  CHECK(s == NET_OK, "train: %s", net_last_error());
  CHECK(r.steps == 200 && r.epochs == 2 && calls[0] == 200, "steps %lld epochs %lld calls %d", (long long)r.steps,
        (long long)r.epochs, calls[0]);
  CHECK(r.test_accuracy > 0.3, "synthetic accuracy %.3f (chance 0.1)", r.test_accuracy);
  CHECK(r.loss_last < r.loss_first, "loss %g -> %g", r.loss_first, r.loss_last);
  CHECK(calls[1] == 200, "last checkpoint at step %d", calls[1]);
  struct stat st;
  CHECK(stat(at(work, "ckpt.safetensors"), &st) == 0 && net_weights_load(m, at(work, "ckpt.safetensors")) == NET_OK,
        "checkpoint: %s", net_last_error());
  /* a callback that stops */
  int n = 0;
  NetTrainConfig stop = {.data = NET_DATA_SYNTHETIC, .steps = 10, .on_step = on_step, .user = &n};
  CHECK(net_train(m, &stop) == NET_STOPPED && n == 1, "stop: %s (%d calls)", net_status_name(net_train(m, &stop)), n);
  /* NetTrainConfig.stop, raised at step 3 (as a signal handler would), polled at every step although
   * on_step comes every 3: the step in flight (4) ends the run, saved to stop_checkpoint */
  volatile int flag = 0;
  NetTrainState st4 = {0};
  NetTrainConfig flagged = {.data = NET_DATA_SYNTHETIC,
                            .steps = 100,
                            .on_step = raise_at_3,
                            .log_every = 3,
                            .user = (void *)&flag,
                            .result = &r,
                            .stop = &flag,
                            .stop_checkpoint = at(work, "stopped.safetensors")};
  s = net_train(m, &flagged);
  CHECK(s == NET_STOPPED && r.steps == 4, "stop flag: %s after %lld steps", net_status_name(s), (long long)r.steps);
  CHECK(net_checkpoint_info(at(work, "stopped.safetensors"), &st4) == NET_OK && st4.step == 4,
        "stop_checkpoint: step %lld: %s", (long long)st4.step, net_last_error());
  net_free(m);

  /* smallcnn, a few steps */
  m = load_cpu("models/smallcnn.net", 16, 0);
  if (!m) return;
  NetTrainConfig c2 = {.data = NET_DATA_SYNTHETIC, .steps = 6, .result = &r};
  CHECK(net_train(m, &c2) == NET_OK && r.steps == 6 && r.test_accuracy >= 0, "smallcnn: %s", net_last_error());
  net_free(m);
}

static void test_train_fmnist(void) {
  FILE *f = fopen(FMNIST "/train-images-idx3-ubyte.gz", "rb");
  if (!f) {
    printf("skipped: the Fashion-MNIST run (dataset-fashion-mnist is not installed)\n");
    return;
  }
  fclose(f);
  NetModel *m = load_cpu("models/mlp.net", 64, 0);
  if (!m) return;
  NetTrainResult r;
  NetTrainConfig c = {
      .data = NET_DATA_IDX, .idx_dir = FMNIST, .train_limit = 6400, .test_limit = 1000, .epochs = 1, .result = &r};
  CHECK(net_train(m, &c) == NET_OK, "fmnist: %s", net_last_error());
  CHECK(r.steps == 100 && r.test_accuracy > 0.6, "fmnist: %lld steps, accuracy %.3f", (long long)r.steps,
        r.test_accuracy);
  printf("mlp on 6400 Fashion-MNIST images: accuracy %.1f%%\n", 100 * r.test_accuracy);
  net_free(m);
}

static void expect_err(NetStatus got, NetStatus want, const char *needle, const char *what) {
  CHECK(got == want, "%s: %s, want %s (%s)", what, net_status_name(got), net_status_name(want), net_last_error());
  CHECK(strstr(net_last_error(), needle), "%s: message '%s' lacks '%s'", what, net_last_error(), needle);
}

static void test_errors(void) {
  NetModel *m = (NetModel *)1;
  expect_err(net_load(at(work, "missing.net"), NULL, &m), NET_ERR_IO, "missing.net", "missing file");
  CHECK(m == NULL, "*out must be NULL after a failure");
  FILE *f = fopen(at(work, "bad.net"), "w");
  if (f) fputs("network n {\n  input x : f32[4]\n  a = relu(y)\n}\n", f), fclose(f);
  expect_err(net_load(at(work, "bad.net"), NULL, &m), NET_ERR_MODEL, "bad.net:3:12: error: undefined name 'y'",
             "compile error");
  expect_err(net_load(at(work, "missing.so"), NULL, &m), NET_ERR_IO, "missing.so", "missing model.so");
  expect_err(net_load(NULL, NULL, &m), NET_ERR_ARG, "path is NULL", "NULL path");
  NetLoadOpts o = {.device = "tpu"};
  expect_err(net_load(at(root, "models/mlp.net"), &o, &m), NET_ERR_ARG, "not 'tpu'", "bad device");
  o = (NetLoadOpts){.batch = -3};
  expect_err(net_load(at(root, "models/mlp.net"), &o, &m), NET_ERR_ARG, "batch", "negative batch");
  o = (NetLoadOpts){.device = "cpu", .precision = "fp4"};
  expect_err(net_load(at(root, "models/mlp.net"), &o, &m), NET_ERR_ARG, "fp4", "bad precision");

  expect_err(net_step(NULL, NULL, NULL), NET_ERR_ARG, "the model is NULL", "NULL model");
  expect_err(net_infer(NULL, NULL, 1, NULL), NET_ERR_ARG, "NULL", "NULL infer");
  expect_err(net_weights_save(NULL, "x"), NET_ERR_ARG, "NULL", "NULL weights");
  expect_err(net_train(NULL, NULL), NET_ERR_ARG, "NULL", "NULL train");
  net_free(NULL);

  m = load_cpu("models/mlp.net", 4, 0);
  if (!m) return;
  float img[4 * 784] = {0}, lg[40];
  int64_t lab[4] = {0, 1, 2, 3};
  NetBatch b = {.n = 0, .images = img, .labels = lab};
  expect_err(net_step(m, &b, NULL), NET_ERR_ARG, "batch of 0 images", "batch 0");
  expect_err(net_infer(m, img, 0, lg), NET_ERR_ARG, "0 images", "infer 0");
  b.n = 4, lab[2] = 10;
  expect_err(net_step(m, &b, NULL), NET_ERR_DATA, "label 10 of image 2", "bad label");
  expect_err(net_step_save(m, at(work, "s.safetensors")), NET_ERR_ARG, "no step has run", "step_save first");
  expect_err(net_weights_load(m, at(work, "missing.safetensors")), NET_ERR_IO, "missing.safetensors", "no weights");
  f = fopen(at(work, "junk.safetensors"), "w");
  if (f) fputs("this is not a safetensors file", f), fclose(f);
  expect_err(net_weights_load(m, at(work, "junk.safetensors")), NET_ERR_IO, "junk.safetensors", "junk weights");
  expect_err(net_weights_load(m, at(work, "w.safetensors")), NET_ERR_WEIGHTS, "fc", "smallcnn weights into mlp");
  NetTrainConfig c = {.data = NET_DATA_IDX, .idx_dir = at(work, "nodata"), .steps = 1};
  expect_err(net_train(m, &c), NET_ERR_DATA, "nodata", "no data");
  NetTrainConfig c2 = {.data = NET_DATA_MEMORY, .images = (const uint8_t *)img, .labels = (const uint8_t *)lab, .n = 2};
  expect_err(net_train(m, &c2), NET_ERR_DATA, "smaller than one batch", "tiny set");
  net_free(m);
  char *drv = getenv("NETC_CUDA_DRIVER");
  if (drv && strstr(drv, "nonexistent")) {
    o = (NetLoadOpts){.device = "gpu"};
    expect_err(net_load(at(root, "models/mlp.net"), &o, &m), NET_ERR_NO_GPU, "no GPU: ", "forced gpu without one");
    o = (NetLoadOpts){.device = "auto", .batch = 2};
    CHECK(net_load(at(root, "models/mlp.net"), &o, &m) == NET_OK && strcmp(net_device(m), "cpu") == 0,
          "auto without a GPU: %s", net_last_error());
    net_free(m);
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_api SOURCE_DIR WORKDIR\n");
    return 2;
  }
  snprintf(root, sizeof root, "%s", argv[1]);
  snprintf(work, sizeof work, "%s", argv[2]);
  mkdir(work, 0777);
  test_step_infer_weights();
  test_train_synthetic();
  test_errors();
  test_train_fmnist();
  return check_report();
}
