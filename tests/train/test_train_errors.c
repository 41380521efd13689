/* test_train_errors.c - the training loop on synthetic data: it learns,
 * it is deterministic, and every misuse returns its status and a message.
 *
 * The data: 4x4 images whose class (0..2) is the row lit at 200 over a
 * dim noisy background.  A conv + batchnorm + linear net must classify a
 * separate test set almost perfectly after two epochs -- which also shows
 * that the inference graph received the trained parameters and running
 * statistics (left at zero it would predict one class for everything). */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rt_train_cpu.h"
#include "traintest.h"

enum { SIDE = 4, NTRAIN = 240, NTEST = 60, CLASSES = 3 };

static const char *const NET =
    "network syn {\n"
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

static IrGraph *net(Arena *a, const char *epochs_line, const char *lr, int inference) {
  char src[1024];
  snprintf(src, sizeof src, NET, epochs_line, lr);
  IrGraph *g = traintest_compile_text(a, src, inference);
  CHECK(g != NULL, "synthetic net compiles (%s, lr %s)", epochs_line, lr);
  return g;
}

static RtTrainData train_set(void) { return (RtTrainData){train_img, train_lab, NTRAIN, SIDE * SIDE}; }
static RtTrainData test_set(void) { return (RtTrainData){test_img, test_lab, NTEST, SIDE * SIDE}; }
static RtTrainCfg cfg_base(void) { return (RtTrainCfg){.seed = 5, .init = 1, .mean = 0.2f, .std = 0.3f}; }

static int stop_now(const RtTrainEpoch *e, void *user) {
  *(int *)user += 1;
  return e->epoch == 0;
}

static void test_learns(const IrGraph *gt, const IrGraph *gi) {
  RtTrainData tr = train_set(), te = test_set();
  RtTrainCfg cfg = cfg_base();
  RtTrainResult r1, r2, r3;
  char err[RT_TRAIN_ERRMAX];
  RtTrainStatus st = rt_train_cpu(gt, gi, &tr, &te, &cfg, &r1, err, sizeof err);
  CHECK(st == RT_TRAIN_OK, "synthetic training: %s", err);
  printf("synthetic: %lld steps, loss %.4f -> %.4f, accuracy %.3f\n", (long long)r1.steps, r1.loss_first,
         r1.loss_last, r1.test_accuracy);
  CHECK(r1.epochs == 2 && r1.steps == 2 * (NTRAIN / 8), "2 epochs of %d steps, got %lld steps", NTRAIN / 8,
        (long long)r1.steps);
  CHECK(r1.test_accuracy >= 0.95, "synthetic accuracy %.3f", r1.test_accuracy);
  CHECK(r1.loss_last < 0.5 * r1.loss_first, "loss %.4f -> %.4f", r1.loss_first, r1.loss_last);
  st = rt_train_cpu(gt, gi, &tr, &te, &cfg, &r2, err, sizeof err);
  CHECK(st == RT_TRAIN_OK && r2.loss_last == r1.loss_last && r2.test_accuracy == r1.test_accuracy,
        "the same seed gives the same run (%.9g vs %.9g)", r2.loss_last, r1.loss_last);
  cfg.seed = 6;
  st = rt_train_cpu(gt, gi, &tr, &te, &cfg, &r3, err, sizeof err);
  CHECK(st == RT_TRAIN_OK && r3.loss_last != r1.loss_last, "another seed gives another run");
  cfg.seed = 5;
  cfg.steps_per_epoch = 3;
  st = rt_train_cpu(gt, gi, &tr, &te, &cfg, &r3, err, sizeof err);
  CHECK(st == RT_TRAIN_OK && r3.steps == 6, "steps_per_epoch bounds the run: %lld steps", (long long)r3.steps);
}

static void expect(RtTrainStatus st, RtTrainStatus want, const char *err, const char *needle, const char *what) {
  CHECK(st == want, "%s: status %d, want %d (%s)", what, (int)st, (int)want, err);
  CHECK(strstr(err, needle) != NULL, "%s: message '%s' says '%s'", what, err, needle);
}

static void test_errors(Arena *a, const IrGraph *gt, const IrGraph *gi) {
  RtTrainData tr = train_set(), te = test_set();
  RtTrainCfg cfg = cfg_base();
  RtTrainResult res;
  char err[RT_TRAIN_ERRMAX];

  int calls = 0;
  cfg.on_epoch = stop_now, cfg.user = &calls;
  expect(rt_train_cpu(gt, gi, &tr, &te, &cfg, &res, err, sizeof err), RT_TRAIN_STOPPED, err, "stopped", "callback");
  CHECK(calls == 1 && res.epochs == 1, "stopped after one epoch (%d calls)", calls);
  cfg.on_epoch = NULL;

  RtTrainData bad = tr;
  bad.sample_bytes = 15;
  expect(rt_train_cpu(gt, gi, &bad, &te, &cfg, &res, err, sizeof err), RT_TRAIN_ERR_DATA, err, "15 bytes per image",
         "sample size");
  uint8_t labels[NTEST];
  memcpy(labels, test_lab, sizeof labels);
  labels[7] = 3;
  bad = te;
  bad.labels = labels;
  expect(rt_train_cpu(gt, gi, &tr, &bad, &cfg, &res, err, sizeof err), RT_TRAIN_ERR_DATA, err,
         "label 3 of image 7", "label range");
  bad = tr;
  bad.n = 5;
  expect(rt_train_cpu(gt, gi, &bad, &te, &cfg, &res, err, sizeof err), RT_TRAIN_ERR_DATA, err, "smaller than one batch",
         "tiny set");
  expect(rt_train_cpu(gi, gi, &tr, &te, &cfg, &res, err, sizeof err), RT_TRAIN_ERR_GRAPH, err, "'lr'",
         "inference graph for training");
  cfg.std = 0;
  expect(rt_train_cpu(gt, gi, &tr, &te, &cfg, &res, err, sizeof err), RT_TRAIN_ERR_CONFIG, err, "std",
         "normalization");
  cfg = cfg_base();

  IrGraph *noep = net(a, "seed = 1", "0.05", 0);
  if (noep)
    expect(rt_train_cpu(noep, gi, &tr, &te, &cfg, &res, err, sizeof err), RT_TRAIN_ERR_CONFIG, err, "epoch",
           "no epochs anywhere");
  IrGraph *wild = net(a, "epochs = 2", "1e30", 0);
  if (wild) {
    RtTrainStatus st = rt_train_cpu(wild, gi, &tr, &te, &cfg, &res, err, sizeof err);
    expect(st, RT_TRAIN_ERR_DIVERGED, err, "loss is", "lr 1e30");
  }
  IrGraph *other = net(a, "epochs = 2", "0.05", 0);
  if (other) { /* a graph without batch norm cannot serve as the inference twin of one with it */
    const char *mlp = "network syn {\n  input image : f32[1, 4, 4]\n  input label : i32[]\n"
                      "  flat = flatten(image)\n  fc = linear(flat, 3)\n  loss = softmax_cross_entropy(fc, label)\n}\n";
    IrGraph *gm = traintest_compile_text(a, mlp, 1);
    CHECK(gm != NULL, "mlp compiles");
    if (gm)
      expect(rt_train_cpu(other, gm, &tr, &te, &cfg, &res, err, sizeof err), RT_TRAIN_ERR_GRAPH, err,
             "@fc.weight is f32[3,16] for inference but f32[3,64]", "mismatched twin");
  }
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  make_set(train_img, train_lab, NTRAIN, 11);
  make_set(test_img, test_lab, NTEST, 12);
  Arena a;
  arena_init(&a);
  IrGraph *gt = net(&a, "epochs = 2", "0.05", 0), *gi = net(&a, "epochs = 2", "0.05", 1);
  if (gt && gi) {
    test_learns(gt, gi);
    test_errors(&a, gt, gi);
  }
  arena_free(&a);
  return check_report();
}
