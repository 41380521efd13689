/* test_gpu_accum.c - gradient accumulation on the GPU executor
 * (rt_gpu_accum.c) against the CPU executor (rt_cpu_accum.c, the
 * reference), through the API (docs/training.md).
 *
 *  1. smallcnn, fp32 and fp16 (dynamic loss scale): one update of 3
 *     micro-batches on both executors from the same weights; every
 *     tensor's change (parameters, momentum buffers, running statistics)
 *     agrees within the dtype's tolerance, relative to the tensor's
 *     largest change.
 *  2. fp16: an overflow in one micro-batch skips the whole update on the
 *     GPU (weights bit for bit unchanged) and halves the scale.
 *  3. net_train with accum_steps 2 for 3 steps: GPU and CPU end close.
 * Exits 77 ("skipped: ...") without a GPU.
 *
 *   test_gpu_accum SOURCE_DIR WORK_DIR KERNEL_CACHE */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "net.h"
#include "net_impl.h"
#include "rt_safetensors.h"

enum { B = 16, S = 784, C = 10, K = 3 };

static char src[4096], work[4096], cache[4096];

static NetStatus load(const char *device, const char *precision, NetModel **m) {
  char path[4200];
  snprintf(path, sizeof path, "%s/models/smallcnn.net", src);
  NetLoadOpts o = {.device = device, .seed = 5, .batch = B, .precision = precision, .cache_dir = cache};
  return net_load(path, &o, m);
}

static RtStFile *saved(NetModel *m, const char *name) {
  char path[4300], err[512];
  snprintf(path, sizeof path, "%s/%s", work, name);
  CHECK(net_weights_save(m, path) == NET_OK, "save %s: %s", path, net_last_error());
  RtStFile *f = NULL;
  CHECK(rt_st_open(path, &f, err, sizeof err) == RT_ST_OK, "%s", err);
  return f;
}

static const float *floats(const RtStFile *f, const char *name) {
  const RtStTensor *t = f ? rt_st_find(f, name) : NULL;
  return t && t->dtype == RT_ST_F32 ? t->data : NULL;
}

/* Largest difference of the changes (after - before) of GPU and CPU, over
 * every tensor relative to that tensor's largest CPU change. */
static double change_diff(const RtStFile *before, const RtStFile *gpu, const RtStFile *cpu, char *which, size_t len) {
  double worst = 0;
  for (size_t i = 0; before && gpu && cpu && i < rt_st_count(before); i++) {
    const RtStTensor *t = rt_st_tensor(before, i);
    const float *w0 = t->data, *g = floats(gpu, t->name), *c = floats(cpu, t->name);
    if (!g || !c) {
      snprintf(which, len, "%s (missing)", t->name);
      return INFINITY;
    }
    double big = 0, d = 0;
    for (int64_t k = 0; k < t->numel; k++) big = fmax(big, fabs((double)c[k] - w0[k]));
    for (int64_t k = 0; k < t->numel; k++) d = fmax(d, fabs(((double)g[k] - w0[k]) - ((double)c[k] - w0[k])));
    double rel = big > 0 ? d / big : d > 0 ? INFINITY : 0;
    if (!(rel <= worst)) worst = isnan(rel) ? INFINITY : rel, snprintf(which, len, "%s", t->name);
  }
  return worst;
}

static void make_batch(unsigned seed, uint8_t *u8, int64_t *lab) {
  for (int64_t i = 0; i < B * S; i++) u8[i] = (uint8_t)((seed = seed * 1103515245u + 12345u) >> 20);
  for (int64_t i = 0; i < B; i++) lab[i] = (int64_t)((seed = seed * 1103515245u + 12345u) >> 16) % C;
}

/* 1: one accumulated update on both executors. */
static void one_update(NetModel *g, NetModel *c, const char *precision, double tol) {
  static uint8_t u8[K][B * S];
  static int64_t lab[K][B];
  for (int k = 0; k < K; k++) make_batch(300u + (unsigned)k, u8[k], lab[k]);
  RtStFile *before = saved(c, "before.safetensors");
  char path[4300];
  snprintf(path, sizeof path, "%s/before.safetensors", work);
  CHECK(net_weights_load(g, path) == NET_OK, "%s", net_last_error());
  NetModel *m[2] = {g, c};
  for (int e = 0; e < 2; e++)
    CHECK(net_exec_accum_set(m[e]->xt, K, net_err_buf(), NET_ERRMAX) == NET_OK, "%s", net_last_error());
  for (int k = 0; k < K; k++) {
    NetBatch b = {.n = B, .images_u8 = u8[k], .mean = 0.286f, .std = 0.353f, .labels = lab[k], .lr = 0.05f};
    NetStepOut og = {0}, oc = {0};
    CHECK(net_step(g, &b, &og) == NET_OK, "gpu micro-step %d: %s", k, net_last_error());
    CHECK(net_step(c, &b, &oc) == NET_OK, "cpu micro-step %d: %s", k, net_last_error());
    CHECK_CLOSE(og.loss, oc.loss, 2e-2, "micro-batch loss");
  }
  for (int e = 0; e < 2; e++)
    CHECK(net_exec_accum_set(m[e]->xt, 1, net_err_buf(), NET_ERRMAX) == NET_OK, "%s", net_last_error());
  RtStFile *fg = saved(g, "gpu.safetensors"), *fc = saved(c, "cpu.safetensors");
  char which[256] = "";
  double d = change_diff(before, fg, fc, which, sizeof which);
  printf("%s: one update of %d micro-batches, GPU vs CPU: worst change difference %.3g (of the largest change) in %s\n",
         precision, K, d, which);
  CHECK(d <= tol, "%s: the GPU's accumulated update differs from the CPU's in %s by %.3g", precision, which, d);
  rt_st_close(before), rt_st_close(fg), rt_st_close(fc);
}

/* 2: an overflow in the first micro-batch skips the GPU's update. */
static void overflow(NetModel *g) {
  static uint8_t u8[2][B * S];
  static int64_t lab[2][B];
  const float scales[2] = {1e30f, 1024};
  RtStFile *before = saved(g, "ov_before.safetensors");
  CHECK(net_exec_accum_set(g->xt, 2, net_err_buf(), NET_ERRMAX) == NET_OK, "%s", net_last_error());
  for (int k = 0; k < 2; k++) {
    make_batch(400u + (unsigned)k, u8[k], lab[k]);
    NetBatch b = {.n = B, .images_u8 = u8[k], .mean = 0.286f, .std = 0.353f, .labels = lab[k]};
    CHECK(net_loss_scale_set(g, scales[k]) == NET_OK, "%s", net_last_error());
    CHECK(net_step(g, &b, NULL) == NET_OK, "micro-step %d: %s", k, net_last_error());
  }
  CHECK(net_exec_accum_set(g->xt, 1, net_err_buf(), NET_ERRMAX) == NET_OK, "%s", net_last_error());
  RtStFile *after = saved(g, "ov_after.safetensors");
  int changed = 0;
  for (size_t i = 0; before && after && i < rt_st_count(before); i++) {
    const RtStTensor *a = rt_st_tensor(before, i), *b = rt_st_find(after, a->name);
    if (strstr(a->name, "running_") || strstr(a->name, "loss_scale") || strstr(a->name, "num_batches")) continue;
    changed += !b || b->nbytes != a->nbytes || memcmp(a->data, b->data, a->nbytes) != 0;
  }
  const float *scale = floats(after, "loss_scale");
  printf("fp16 overflow in micro-batch 1 of 2: %d tensors changed, scale %g\n", changed, scale ? *scale : -1.0);
  CHECK(changed == 0, "an overflow in one micro-batch, yet %d tensors changed on the GPU", changed);
  CHECK(scale && *scale == 512, "scale %g after the skipped update, want 512", scale ? *scale : -1.0);
  rt_st_close(before), rt_st_close(after);
}

/* 3: the training loop with accumulation on both executors. */
static void train(NetModel *g, NetModel *c) {
  char path[4300];
  snprintf(path, sizeof path, "%s/train_before.safetensors", work);
  CHECK(net_weights_save(c, path) == NET_OK, "%s", net_last_error());
  CHECK(net_weights_load(g, path) == NET_OK, "%s", net_last_error());
  RtStFile *before = saved(c, "train_before2.safetensors");
  NetTrainConfig cfg = {.data = NET_DATA_SYNTHETIC, .synthetic_n = 8 * B, .steps = 3, .seed = 7, .accum_steps = 2};
  NetTrainResult rg, rc;
  cfg.result = &rg;
  CHECK(net_train(g, &cfg) == NET_OK, "gpu: %s", net_last_error());
  cfg.result = &rc;
  CHECK(net_train(c, &cfg) == NET_OK, "cpu: %s", net_last_error());
  CHECK(rg.steps == 3 && rc.steps == 3, "steps %lld, %lld", (long long)rg.steps, (long long)rc.steps);
  CHECK_CLOSE(rg.loss_last, rc.loss_last, 3e-2, "mean loss of the run");
  RtStFile *fg = saved(g, "train_gpu.safetensors"), *fc = saved(c, "train_cpu.safetensors");
  char which[256] = "";
  double d = change_diff(before, fg, fc, which, sizeof which);
  printf("net_train, 3 steps of 2 x %d: losses %.5f (GPU) %.5f (CPU), worst change difference %.3g in %s\n", B,
         rg.loss_last, rc.loss_last, d, which);
  CHECK(d <= 0.1, "after 3 accumulated steps the GPU differs from the CPU in %s by %.3g", which, d);
  rt_st_close(before), rt_st_close(fg), rt_st_close(fc);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: test_gpu_accum SOURCE_DIR WORK_DIR KERNEL_CACHE\n");
    return 2;
  }
  snprintf(src, sizeof src, "%s", argv[1]);
  snprintf(work, sizeof work, "%s", argv[2]);
  snprintf(cache, sizeof cache, "%s", argv[3]);
  mkdir(work, 0755);
  static const char *const PRECISION[2] = {"fp32", "fp16"};
  static const double TOL[2] = {2e-2, 5e-2};
  for (int p = 0; p < 2; p++) {
    NetModel *g = NULL, *c = NULL;
    NetStatus s = load("gpu", PRECISION[p], &g);
    if (s == NET_ERR_NO_GPU) return check_skip(net_last_error());
    CHECK(s == NET_OK, "gpu load: %s", net_last_error());
    CHECK(load("cpu", PRECISION[p], &c) == NET_OK, "cpu load: %s", net_last_error());
    if (g && c) {
      one_update(g, c, PRECISION[p], TOL[p]);
      if (p == 1) overflow(g);
      if (p == 0) train(g, c);
    }
    net_free(g);
    net_free(c);
  }
  return check_report();
}
