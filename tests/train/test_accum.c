/* test_accum.c - gradient accumulation on the CPU executor
 * (NetTrainConfig.accum_steps, net_exec_accum_set; docs/training.md).
 *
 *  1. mlp in fp32, one update of 4 accumulated batches of 8 equals one step
 *     of a batch of 32 on the same images (net_train; tight tolerance).
 *  2. smallcnn in fp32 (batch norm: statistics per micro-batch): one update
 *     of 3 micro-batches equals plain C applying SGD to the mean of the
 *     gradients each micro-batch gives alone (net_step_save), and the
 *     running statistics are those of 3 steps that do not move the weights.
 *  3. smallcnn in fp16 with its dynamic loss scale: an overflow in either
 *     micro-batch skips the whole update (weights bit for bit unchanged) and
 *     halves the scale; without one the update happens.
 *  4. A stopped and resumed accumulation run (smallcnn fp16, net_train with
 *     checkpoints) ends bit for bit where the straight run ends; its checkpoint
 *     refuses a resume that accumulates another number of batches.
 *  5. Bad accum_steps and an epoch shorter than one update are refused.
 *
 *   test_accum SOURCE_DIR WORK_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "net.h"
#include "net_impl.h"
#include "rt_safetensors.h"

enum { S = 784, C = 10 };

static char src[4096], work[4096];

static NetModel *load(const char *model, int64_t batch, const char *precision) {
  char path[4200];
  snprintf(path, sizeof path, "%s/models/%s.net", src, model);
  NetLoadOpts o = {.device = "cpu", .seed = 3, .batch = batch, .precision = precision};
  NetModel *m = NULL;
  CHECK(net_load(path, &o, &m) == NET_OK, "net_load %s: %s", path, net_last_error());
  return m;
}

/* WORK_DIR/name, in one of 8 buffers used in turn. */
static const char *file(const char *name) {
  static char buf[8][4300];
  static int at;
  at = (at + 1) % 8;
  snprintf(buf[at], sizeof buf[at], "%s/%s", work, name);
  return buf[at];
}

static RtStFile *open_st(const char *path) {
  char err[512];
  RtStFile *f = NULL;
  CHECK(rt_st_open(path, &f, err, sizeof err) == RT_ST_OK, "%s", err);
  return f;
}

/* Tensor `name` of f as floats (F32 files), or NULL. */
static const float *floats(const RtStFile *f, const char *name, int64_t *n) {
  const RtStTensor *t = f ? rt_st_find(f, name) : NULL;
  CHECK(t && t->dtype == RT_ST_F32, "tensor %s missing or not F32", name);
  if (!t || t->dtype != RT_ST_F32) return NULL;
  *n = t->numel;
  return t->data;
}

/* Largest |a - b| / (atol + rtol |b|) over the tensors of b (skipping names
 * that contain `skip`, may be NULL), with the worst tensor's name. */
static double worst(const RtStFile *a, const RtStFile *b, double atol, double rtol, const char *skip, char *which) {
  double w = 0;
  for (size_t i = 0; a && b && i < rt_st_count(b); i++) {
    const RtStTensor *tb = rt_st_tensor(b, i);
    if (skip && strstr(tb->name, skip)) continue;
    int64_t n = 0;
    const float *x = floats(a, tb->name, &n), *y = tb->data;
    for (int64_t k = 0; x && k < n && k < tb->numel; k++) {
      double e = fabs((double)x[k] - y[k]) / (atol + rtol * fabs(y[k]));
      if (!(e <= w)) w = isnan(e) ? INFINITY : e, snprintf(which, 256, "%s[%lld]", tb->name, (long long)k);
    }
  }
  return w;
}

/* 1. accumulation = the concatenated batch, through net_train. */
static void concat_equivalence(void) {
  NetModel *acc = load("mlp", 8, "fp32"), *big = load("mlp", 32, "fp32");
  if (!acc || !big) return;
  CHECK(net_weights_save(acc, file("init.safetensors")) == NET_OK, "%s", net_last_error());
  NetTrainConfig c = {.data = NET_DATA_SYNTHETIC, .synthetic_n = 32, .steps = 1, .seed = 9, .accum_steps = 4};
  NetTrainResult ra, rb;
  c.result = &ra;
  CHECK(net_train(acc, &c) == NET_OK, "accumulated: %s", net_last_error());
  c.accum_steps = 0, c.result = &rb;
  CHECK(net_train(big, &c) == NET_OK, "batch 32: %s", net_last_error());
  CHECK(ra.steps == 1 && rb.steps == 1, "steps %lld and %lld, not 1", (long long)ra.steps, (long long)rb.steps);
  CHECK_CLOSE(ra.loss_last, rb.loss_last, 1e-5, "mean loss of the 4 micro-batches vs the batch of 32");
  CHECK(net_weights_save(acc, file("acc.safetensors")) == NET_OK, "%s", net_last_error());
  CHECK(net_weights_save(big, file("big.safetensors")) == NET_OK, "%s", net_last_error());
  RtStFile *fa = open_st(file("acc.safetensors")), *fb = open_st(file("big.safetensors")),
           *f0 = open_st(file("init.safetensors"));
  char w1[256] = "", w2[256] = "";
  double e = worst(fa, fb, 1e-7, 1e-5, NULL, w1), moved = worst(f0, fb, 1e-7, 1e-5, "momentum", w2);
  printf("concatenated batch: worst difference %.3g of tolerance at %s; the update moved the weights %.3g of it\n", e,
         w1, moved);
  CHECK(e <= 1, "4 x 8 accumulated differs from one batch of 32 at %s (%.3g of tolerance)", w1, e);
  CHECK(moved > 100, "the update hardly moved the weights (%.3g of tolerance): the comparison proves nothing", moved);
  rt_st_close(fa), rt_st_close(fb), rt_st_close(f0);
  net_free(acc);
  net_free(big);
}

static void make_batch(unsigned seed, uint8_t *u8, int64_t *lab, int64_t n) {
  for (int64_t i = 0; i < n * S; i++) u8[i] = (uint8_t)((seed = seed * 1103515245u + 12345u) >> 20);
  for (int64_t i = 0; i < n; i++) lab[i] = (int64_t)((seed = seed * 1103515245u + 12345u) >> 16) % C;
}

enum { BN_B = 8, BN_K = 3 };

/* 2. smallcnn fp32 against plain C over the micro-batches' own gradients. */
static void batchnorm_reference(void) {
  static uint8_t u8[BN_K][BN_B * S];
  static int64_t lab[BN_K][BN_B];
  for (int k = 0; k < BN_K; k++) make_batch(100u + (unsigned)k, u8[k], lab[k], BN_B);
  const float lr = 0.05f, wd = 0.0001f; /* smallcnn's weight decay */
  NetModel *m = load("smallcnn", BN_B, "fp32"), *r = load("smallcnn", BN_B, "fp32");
  if (!m || !r) return;
  char w0[4300]; /* file()'s buffers are reused */
  snprintf(w0, sizeof w0, "%s", file("bn_init.safetensors"));
  CHECK(net_weights_save(m, w0) == NET_OK, "%s", net_last_error());
  /* each micro-batch's gradient alone, from the same weights */
  RtStFile *g[BN_K];
  for (int k = 0; k < BN_K; k++) {
    char name[64];
    snprintf(name, sizeof name, "bn_grad%d.safetensors", k);
    NetBatch b = {.n = BN_B, .images_u8 = u8[k], .labels = lab[k], .lr = lr};
    CHECK(net_weights_load(r, w0) == NET_OK, "%s", net_last_error());
    CHECK(net_step(r, &b, NULL) == NET_OK, "reference step: %s", net_last_error());
    CHECK(net_step_save(r, file(name)) == NET_OK, "%s", net_last_error());
    g[k] = open_st(file(name));
  }
  /* running statistics: 3 steps that leave the weights as they are */
  CHECK(net_weights_load(r, w0) == NET_OK, "%s", net_last_error());
  for (int k = 0; k < BN_K; k++) {
    NetBatch b = {.n = BN_B, .images_u8 = u8[k], .labels = lab[k], .lr = 1e-30f};
    CHECK(net_step(r, &b, NULL) == NET_OK, "statistics step: %s", net_last_error());
  }
  CHECK(net_weights_save(r, file("bn_stats.safetensors")) == NET_OK, "%s", net_last_error());
  /* the accumulated update */
  CHECK(net_exec_accum_set(m->xt, BN_K, net_err_buf(), NET_ERRMAX) == NET_OK, "%s", net_last_error());
  for (int k = 0; k < BN_K; k++) {
    NetBatch b = {.n = BN_B, .images_u8 = u8[k], .labels = lab[k], .lr = lr};
    CHECK(net_exec_accum_pending(m->xt) == k, "pending %d before micro-batch %d", net_exec_accum_pending(m->xt), k);
    CHECK(net_step(m, &b, NULL) == NET_OK, "micro-step %d: %s", k, net_last_error());
  }
  CHECK(net_exec_accum_pending(m->xt) == 0, "the update did not end (%d pending)", net_exec_accum_pending(m->xt));
  CHECK(net_exec_accum_set(m->xt, 1, net_err_buf(), NET_ERRMAX) == NET_OK, "%s", net_last_error());
  CHECK(net_weights_save(m, file("bn_acc.safetensors")) == NET_OK, "%s", net_last_error());
  RtStFile *f0 = open_st(w0), *fa = open_st(file("bn_acc.safetensors")), *fs = open_st(file("bn_stats.safetensors"));
  int params = 0;
  double e = 0;
  char at[400] = "";
  for (size_t i = 0; f0 && fa && i < rt_st_count(f0); i++) {
    const RtStTensor *t = rt_st_tensor(f0, i);
    char gname[300], bname[300];
    snprintf(gname, sizeof gname, "%s.grad", t->name);
    if (!g[0] || !rt_st_find(g[0], gname)) continue;
    params++;
    snprintf(bname, sizeof bname, "%s.momentum_buffer", t->name);
    int64_t n = 0, nb = 0, ng = 0;
    const float *w = t->data, *got = floats(fa, t->name, &n), *buf = floats(fa, bname, &nb);
    for (int64_t j = 0; got && buf && j < t->numel; j++) {
      double mean = 0;
      for (int k = 0; k < BN_K; k++) {
        const float *gk = floats(g[k], gname, &ng);
        mean += gk ? gk[j] : NAN;
      }
      mean /= BN_K;
      double d = mean + wd * w[j], want = w[j] - lr * d; /* momentum buffer starts at 0: buf = d */
      double eg = fabs(got[j] - want) / (1e-7 + 1e-5 * fabs(want)), eb = fabs(buf[j] - d) / (1e-7 + 1e-4 * fabs(d));
      if (!(eg <= e)) e = isnan(eg) ? INFINITY : eg, snprintf(at, sizeof at, "%s[%lld]", t->name, (long long)j);
      if (!(eb <= e)) e = isnan(eb) ? INFINITY : eb, snprintf(at, sizeof at, "%s[%lld]", bname, (long long)j);
    }
  }
  printf("batch norm: %d parameters against plain C, worst %.3g of tolerance at %s\n", params, e, at);
  CHECK(params == 10, "%d parameters with gradients, smallcnn has 10", params);
  CHECK(e <= 1, "the accumulated update differs from plain C at %s (%.3g of tolerance)", at, e);
  double es = 0;
  char st[256] = "";
  int moved = 0;
  for (int k = 0; fs && fa && k < 2; k++) {
    static const char *const STATS[2][2] = {{"bn1.running_mean", "bn1.running_var"},
                                            {"bn2.running_mean", "bn2.running_var"}};
    for (int j = 0; j < 2; j++) {
      int64_t n = 0, n2 = 0;
      const float *x = floats(fa, STATS[k][j], &n), *y = floats(fs, STATS[k][j], &n2),
                  *z = floats(f0, STATS[k][j], &n2);
      for (int64_t i = 0; x && y && z && i < n; i++) {
        moved += x[i] != z[i];
        double d = fabs(x[i] - y[i]) / (1e-6 + 1e-5 * fabs(y[i]));
        if (d > es) es = d, snprintf(st, sizeof st, "%s[%lld]", STATS[k][j], (long long)i);
      }
    }
  }
  printf("batch norm: running statistics worst %.3g of tolerance at %s\n", es, st);
  CHECK(moved > 0, "the running statistics did not change");
  CHECK(es <= 1, "running statistics differ from 3 plain steps at %s (%.3g of tolerance)", st, es);
  for (int k = 0; k < BN_K; k++) rt_st_close(g[k]);
  rt_st_close(f0), rt_st_close(fa), rt_st_close(fs);
  net_free(m);
  net_free(r);
}

/* 3. dynamic loss scaling: scales[k] for micro-batch k of 2. */
static void overflow_case(const float scales[2], int expect_skip) {
  static uint8_t u8[2][BN_B * S];
  static int64_t lab[2][BN_B];
  for (int k = 0; k < 2; k++) make_batch(200u + (unsigned)k, u8[k], lab[k], BN_B);
  NetModel *m = load("smallcnn", BN_B, NULL);
  if (!m) return;
  CHECK(net_weights_save(m, file("ls_before.safetensors")) == NET_OK, "%s", net_last_error());
  CHECK(net_exec_accum_set(m->xt, 2, net_err_buf(), NET_ERRMAX) == NET_OK, "%s", net_last_error());
  for (int k = 0; k < 2; k++) {
    NetBatch b = {.n = BN_B, .images_u8 = u8[k], .labels = lab[k]};
    CHECK(net_loss_scale_set(m, scales[k]) == NET_OK, "%s", net_last_error());
    CHECK(net_step(m, &b, NULL) == NET_OK, "micro-step %d: %s", k, net_last_error());
  }
  CHECK(net_weights_save(m, file("ls_after.safetensors")) == NET_OK, "%s", net_last_error());
  RtStFile *f0 = open_st(file("ls_before.safetensors")), *f1 = open_st(file("ls_after.safetensors"));
  int64_t n;
  const float *scale = floats(f1, "loss_scale", &n), *good = floats(f1, "loss_scale_good_steps", &n);
  int changed = 0;
  for (size_t i = 0; f0 && f1 && i < rt_st_count(f0); i++) {
    const RtStTensor *a = rt_st_tensor(f0, i), *b = rt_st_find(f1, a->name);
    if (strstr(a->name, "running_") || strstr(a->name, "loss_scale") || strstr(a->name, "num_batches")) continue;
    changed += !b || b->nbytes != a->nbytes || memcmp(a->data, b->data, a->nbytes) != 0;
  }
  printf("scales %g, %g: %d parameter/momentum tensors changed, scale now %g\n", scales[0], scales[1], changed,
         scale ? *scale : -1.0);
  if (expect_skip) {
    CHECK(changed == 0, "an overflow in one micro-batch, yet %d tensors changed", changed);
    CHECK(scale && *scale == scales[1] * 0.5f, "scale %g, want %g (halved)", scale ? *scale : -1.0, scales[1] * 0.5);
    CHECK(good && *good == 0, "good steps %g, want 0", good ? *good : -1.0);
  } else {
    CHECK(changed > 0, "no overflow, yet the update did not happen");
    CHECK(scale && *scale == scales[1], "scale %g, want %g", scale ? *scale : -1.0, (double)scales[1]);
    CHECK(good && *good == 1, "good steps %g, want 1", good ? *good : -1.0);
  }
  rt_st_close(f0), rt_st_close(f1);
  net_free(m);
}

/* 4. resume: as tests/train/test_resume.c, with accumulation. */
static int stop_at(const NetStepInfo *s, void *user) {
  (void)user;
  return s->step == 4;
}

static void same_files(const char *a, const char *b) {
  RtStFile *fa = open_st(a), *fb = open_st(b);
  int differ = 0;
  for (size_t i = 0; fa && fb && i < rt_st_count(fa); i++) {
    const RtStTensor *ta = rt_st_tensor(fa, i), *tb = rt_st_find(fb, ta->name);
    if ((!tb || tb->nbytes != ta->nbytes || memcmp(ta->data, tb->data, ta->nbytes)) && differ++ < 5)
      CHECK(0, "tensor %s differs between the straight and the resumed run", ta->name);
  }
  CHECK(fa && fb && rt_st_count(fa) == rt_st_count(fb) && differ == 0, "%d tensors differ", differ);
  rt_st_close(fa), rt_st_close(fb);
}

static void resume(void) {
  const char *straight = file("straight.safetensors"), *stopped = file("stopped.safetensors");
  NetTrainConfig c = {.data = NET_DATA_SYNTHETIC, .synthetic_n = 96, .epochs = 3, .seed = 5, .accum_steps = 2};
  NetTrainResult r;
  NetModel *m = load("smallcnn", 16, NULL);
  if (!m) return;
  c.checkpoint = straight, c.result = &r;
  CHECK(net_train(m, &c) == NET_OK, "straight run: %s", net_last_error());
  CHECK(r.steps == 9, "3 epochs of 96 images, batch 16, 2 batches a step are 9 steps, not %lld", (long long)r.steps);
  net_free(m);

  m = load("smallcnn", 16, NULL);
  c.checkpoint = stopped, c.on_step = stop_at;
  CHECK(net_train(m, &c) == NET_STOPPED, "stopped run: %s", net_last_error());
  net_free(m);
  NetTrainState st = {0};
  if ((m = load("smallcnn", 16, NULL))) {
    CHECK(net_checkpoint_load(m, stopped, &st) == NET_OK, "%s", net_last_error());
    CHECK(st.step == 4 && st.epoch == 1 && st.batch_in_epoch == 1, "stopped at step %lld, epoch %lld, step %lld of it",
          (long long)st.step, (long long)st.epoch, (long long)st.batch_in_epoch);
    net_free(m);
  }
  m = load("smallcnn", 16, NULL);
  if (!m) return;
  c.on_step = NULL, c.resume = stopped, c.accum_steps = 1, c.checkpoint = NULL;
  CHECK(net_train(m, &c) == NET_ERR_ARG && strstr(net_last_error(), "accumulating 2 batches per step"),
        "a checkpoint of an accumulating run resumed without accumulation: %s", net_last_error());
  c.accum_steps = 2, c.checkpoint = stopped;
  CHECK(net_train(m, &c) == NET_OK, "resumed run: %s", net_last_error());
  CHECK(r.steps == 9, "the resumed run ended at step %lld", (long long)r.steps);
  net_free(m);
  same_files(straight, stopped);
}

/* 5. errors. */
static void errors(void) {
  NetModel *m = load("mlp", 32, "fp32");
  if (!m) return;
  NetTrainConfig c = {.data = NET_DATA_SYNTHETIC, .synthetic_n = 64, .steps = 1, .seed = 1, .accum_steps = -2};
  CHECK(net_train(m, &c) == NET_ERR_ARG, "accum_steps -2 accepted");
  CHECK(strstr(net_last_error(), "accum_steps -2") != NULL, "message: %s", net_last_error());
  c.accum_steps = 4;
  CHECK(net_train(m, &c) == NET_ERR_DATA, "4 accumulated batches of 32 from 64 images accepted");
  CHECK(strstr(net_last_error(), "less than one step of 4 accumulated batches") != NULL, "message: %s",
        net_last_error());
  CHECK(net_exec_accum_set(m->xt, 0, net_err_buf(), NET_ERRMAX) == NET_ERR_ARG, "k = 0 accepted");
  c.accum_steps = 2; /* after the refusals a run still works */
  CHECK(net_train(m, &c) == NET_OK, "%s", net_last_error());
  net_free(m);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_accum SOURCE_DIR WORK_DIR\n");
    return 2;
  }
  snprintf(src, sizeof src, "%s", argv[1]);
  snprintf(work, sizeof work, "%s", argv[2]);
  mkdir(work, 0755);
  concat_equivalence();
  batchnorm_reference();
  overflow_case((const float[2]){1e30f, 1024}, 1);
  overflow_case((const float[2]){1024, 1e30f}, 1);
  overflow_case((const float[2]){1024, 1024}, 0);
  resume();
  errors();
  return check_report();
}
