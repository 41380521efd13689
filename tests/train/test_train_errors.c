/* test_train_errors.c - the training loop of the public API (net_train on
 * the CPU) on synthetic data: it learns, it is deterministic, and every
 * misuse returns its status and a message.  Usage: train_test_train_errors WORKDIR
 *
 * The data: 4x4 images whose class (0..2) is the row lit at 200 over a
 * dim noisy background, handed over as NET_DATA_MEMORY.  A conv +
 * batchnorm + linear net must classify a separate test set almost
 * perfectly after two epochs -- which also shows that the inference graph
 * received the trained parameters and running statistics (left at their
 * initial values it would predict one class for everything).  The nets are
 * written as .net files into WORKDIR and loaded with net_load.  A run whose
 * every update dynamic loss scaling skipped is an error, not a success. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "net.h"

enum { SIDE = 4, NTRAIN = 240, NTEST = 60, CLASSES = 3, BATCH = 8 };

static const char *const NET = "network syn {\n"
                               "  input image : f32[1, 4, 4]\n"
                               "  input label : i32[]\n"
                               "  c    = conv2d(image, 4, k=3, p=1, bias=false)\n"
                               "  bn   = batchnorm(c)\n"
                               "  r    = relu(bn)\n"
                               "  flat = flatten(r)\n"
                               "  fc   = linear(flat, 3)\n"
                               "  loss = softmax_cross_entropy(fc, label)\n"
                               "}\n"
                               "train {\n"
                               "  batch     = 8\n"
                               "  %s\n"
                               "  optimizer = sgd(lr=%s, momentum=0.9)\n"
                               "  schedule  = cosine()\n"
                               "}\n";

static char work[2048];
static uint8_t train_img[NTRAIN * SIDE * SIDE], train_lab[NTRAIN];
static uint8_t test_img[NTEST * SIDE * SIDE], test_lab[NTEST];

static void make_set(uint8_t *img, uint8_t *lab, int n, uint32_t seed) {
  for (int i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    lab[i] = (uint8_t)((seed >> 16) % CLASSES);
    for (int p = 0; p < SIDE * SIDE; p++) {
      seed = seed * 1664525u + 1013904223u;
      img[i * SIDE * SIDE + p] = p / SIDE == lab[i] ? 200 : (uint8_t)((seed >> 24) & 63);
    }
  }
}

static const char *at(const char *rel) {
  static char buf[4][4096];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", work, rel);
  return buf[k];
}

/* Writes the synthetic net (train-section line, lr) to WORKDIR/name. */
static const char *net_file(const char *name, const char *epochs_line, const char *lr) {
  const char *path = at(name);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL, "cannot write %s", path);
  if (!f) return path;
  fprintf(f, NET, epochs_line, lr);
  fclose(f);
  return path;
}

static NetModel *load(const char *path, uint64_t seed, int inference_only) {
  NetLoadOpts o = {.device = "cpu", .seed = seed, .inference_only = inference_only};
  NetModel *m = NULL;
  NetStatus s = net_load(path, &o, &m);
  CHECK(s == NET_OK && m, "net_load %s: %s: %s", path, net_status_name(s), net_last_error());
  return m;
}

static NetTrainConfig cfg_base(NetTrainResult *res) {
  return (NetTrainConfig){.data = NET_DATA_MEMORY,
                          .images = train_img,
                          .labels = train_lab,
                          .n = NTRAIN,
                          .test_images = test_img,
                          .test_labels = test_lab,
                          .test_n = NTEST,
                          .mean = 0.2f,
                          .std = 0.3f,
                          .seed = 5,
                          .result = res};
}

/* Loads `path` with `seed`, trains it with cfg (its seed set to `seed`). */
static NetStatus train_fresh(const char *path, uint64_t seed, NetTrainConfig cfg) {
  NetModel *m = load(path, seed, 0);
  if (!m) return NET_ERR_MODEL;
  cfg.seed = seed;
  NetStatus s = net_train(m, &cfg);
  net_free(m);
  return s;
}

static int stop_now(const NetEpochInfo *e, void *user) {
  *(int *)user += 1;
  return e->epoch == 0;
}

static void test_learns(const char *syn) {
  NetTrainResult r1, r2, r3;
  NetStatus st = train_fresh(syn, 5, cfg_base(&r1));
  CHECK(st == NET_OK, "synthetic training: %s", net_last_error());
  printf("synthetic: %lld steps, loss %.4f -> %.4f, accuracy %.3f\n", (long long)r1.steps, r1.loss_first, r1.loss_last,
         r1.test_accuracy);
  CHECK(r1.epochs == 2 && r1.steps == 2 * (NTRAIN / BATCH), "2 epochs of %d steps, got %lld steps", NTRAIN / BATCH,
        (long long)r1.steps);
  CHECK(r1.test_accuracy >= 0.95, "synthetic accuracy %.3f", r1.test_accuracy);
  CHECK(r1.loss_last < 0.5 * r1.loss_first, "loss %.4f -> %.4f", r1.loss_first, r1.loss_last);
  st = train_fresh(syn, 5, cfg_base(&r2));
  CHECK(st == NET_OK && r2.loss_last == r1.loss_last && r2.test_accuracy == r1.test_accuracy,
        "the same seed gives the same run (%.9g vs %.9g)", r2.loss_last, r1.loss_last);
  st = train_fresh(syn, 6, cfg_base(&r3));
  CHECK(st == NET_OK && r3.loss_last != r1.loss_last, "another seed gives another run");
  NetTrainConfig c = cfg_base(&r3);
  c.steps = 6;
  st = train_fresh(syn, 5, c);
  CHECK(st == NET_OK && r3.steps == 6 && r3.epochs == 1, "steps bounds the run: %lld steps in %lld epochs",
        (long long)r3.steps, (long long)r3.epochs);
  c.steps = 35;
  st = train_fresh(syn, 5, c);
  CHECK(st == NET_OK && r3.steps == 35 && r3.epochs == 2, "steps across epochs: %lld steps in %lld epochs",
        (long long)r3.steps, (long long)r3.epochs);
}

static void expect(NetStatus st, NetStatus want, const char *needle, const char *what) {
  CHECK(st == want, "%s: %s, want %s (%s)", what, net_status_name(st), net_status_name(want), net_last_error());
  CHECK(strstr(net_last_error(), needle) != NULL, "%s: message '%s' says '%s'", what, net_last_error(), needle);
}

static void put_be32(FILE *f, uint32_t v) {
  uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
  fwrite(b, 1, 4, f);
}

/* WORKDIR/dir with uncompressed IDX files of n images of rows x cols. */
static const char *idx_dir(const char *dir, int n, int rows, int cols) {
  const char *path = at(dir);
  mkdir(path, 0777);
  static const char *const PREFIX[] = {"train", "t10k"};
  for (int p = 0; p < 2; p++) {
    char name[4096];
    snprintf(name, sizeof name, "%s/%s-images-idx3-ubyte", path, PREFIX[p]);
    FILE *f = fopen(name, "wb");
    CHECK(f != NULL, "cannot write %s", name);
    if (!f) continue;
    put_be32(f, 0x803), put_be32(f, (uint32_t)n), put_be32(f, (uint32_t)rows), put_be32(f, (uint32_t)cols);
    for (int i = 0; i < n * rows * cols; i++) fputc(i & 0xff, f);
    fclose(f);
    snprintf(name, sizeof name, "%s/%s-labels-idx1-ubyte", path, PREFIX[p]);
    f = fopen(name, "wb");
    CHECK(f != NULL, "cannot write %s", name);
    if (!f) continue;
    put_be32(f, 0x801), put_be32(f, (uint32_t)n);
    for (int i = 0; i < n; i++) fputc(i % CLASSES, f);
    fclose(f);
  }
  return path;
}

static void test_errors(const char *syn) {
  NetTrainResult res;
  NetModel *m = load(syn, 5, 0);
  if (!m) return;

  int calls = 0;
  NetTrainConfig c = cfg_base(&res);
  c.on_epoch = stop_now, c.user = &calls;
  expect(net_train(m, &c), NET_STOPPED, "stopped", "callback");
  CHECK(calls == 1 && res.epochs == 1, "stopped after one epoch (%d calls, %lld epochs)", calls, (long long)res.epochs);

  /* in memory an image is C*H*W bytes by definition; an IDX set carries its own size */
  c = cfg_base(&res);
  c.data = NET_DATA_IDX, c.idx_dir = idx_dir("idx_3x5", 20, 3, 5);
  expect(net_train(m, &c), NET_ERR_DATA, "images of 3x5 do not fit", "sample size");
  uint8_t labels[NTEST];
  memcpy(labels, test_lab, sizeof labels);
  labels[7] = 3;
  c = cfg_base(&res);
  c.test_labels = labels;
  expect(net_train(m, &c), NET_ERR_DATA, "label 3 of image 7", "label range");
  c = cfg_base(&res);
  c.n = 5;
  expect(net_train(m, &c), NET_ERR_DATA, "smaller than one batch", "tiny set");
  c = cfg_base(&res);
  c.std = -0.3f;
  expect(net_train(m, &c), NET_ERR_ARG, "std", "normalization");
  net_free(m);

  NetModel *inf = load(syn, 5, 1);
  if (inf) {
    c = cfg_base(&res);
    expect(net_train(inf, &c), NET_ERR_ARG, "inference only", "an inference-only model trained");
    net_free(inf);
  }
  NetModel *noep = load(net_file("noep.net", "seed = 1", "0.05"), 5, 0);
  if (noep) {
    c = cfg_base(&res);
    expect(net_train(noep, &c), NET_ERR_ARG, "epoch", "no epochs anywhere");
    net_free(noep);
  }
  NetModel *wild = load(net_file("wild.net", "epochs = 2", "1e30"), 5, 0);
  if (wild) {
    c = cfg_base(&res);
    expect(net_train(wild, &c), NET_ERR_DIVERGED, "loss is", "lr 1e30");
    net_free(wild);
  }
}

/* Dynamic loss scaling from a scale so large that the gradients are not
 * finite for many halvings: a run whose every update was skipped fails
 * NET_ERR_DIVERGED, saying so, and counts them; one that skips its first
 * few and then trains succeeds, with the skips counted. */
static void test_all_skipped(void) {
  NetTrainResult r;
  NetTrainConfig c = cfg_base(&r);
  c.steps = 4;
  const char *huge =
      net_file("huge_scale.net", "epochs = 1\n  precision = f16\n  loss_scale = dynamic(init=1e30)", "0.05");
  NetStatus st = train_fresh(huge, 5, c);
  expect(st, NET_ERR_DIVERGED, "every one of the 4 steps skipped its update", "every update skipped");
  CHECK(r.skipped_steps == 4, "%lld of 4 steps skipped", (long long)r.skipped_steps);
  /* 1e6 halves to a scale the fp16 gradients take within a few steps */
  const char *high =
      net_file("high_scale.net", "epochs = 1\n  precision = f16\n  loss_scale = dynamic(init=1e6)", "0.05");
  c.steps = 25;
  st = train_fresh(high, 5, c);
  CHECK(st == NET_OK && r.skipped_steps > 0 && r.skipped_steps < 25, "some skipped: %s, %lld of 25 (%s)",
        net_status_name(st), (long long)r.skipped_steps, st ? net_last_error() : "");
  st = train_fresh(net_file("syn_static.net", "epochs = 1", "0.05"), 5, c);
  CHECK(st == NET_OK && r.skipped_steps == 0, "a static scale skips nothing: %lld", (long long)r.skipped_steps);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: train_test_train_errors WORKDIR\n");
    return 2;
  }
  snprintf(work, sizeof work, "%s", argv[1]);
  mkdir(work, 0777);
  make_set(train_img, train_lab, NTRAIN, 11);
  make_set(test_img, test_lab, NTEST, 12);
  char syn[4096];
  snprintf(syn, sizeof syn, "%s", net_file("syn.net", "epochs = 2", "0.05"));
  test_learns(syn);
  test_errors(syn);
  test_all_skipped();
  return check_report();
}
