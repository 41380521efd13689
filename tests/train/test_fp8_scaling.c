/* test_fp8_scaling.c - FP8's delayed scaling through net_train on the CPU
 * (the precision pass's amax histories, the CPU executor's cast):
 *   - smallcnn with --precision fp8 keeps an amax history of 16 steps per
 *     FP8 cast (activations, weights, gradients), as state that starts at
 *     0 and that net_weights_save writes;
 *   - after one step every history holds one amax; for conv2's weight it
 *     is exactly the largest |w| of the initial weights; after two steps
 *     (the same seed, so the same first step) the first amax moved one
 *     place older and the new one is the largest |w| after step 1, the
 *     rest still 0;
 *   - the histories are training state: net_weights_export (PyTorch's
 *     state_dict) leaves them out;
 *   - `fp8_scaling = current()` in the train section keeps none, and
 *     `delayed(history = 4)` keeps 4 steps;
 *   - weights load whatever their histories: FP8's into an fp16 run,
 *     fp16's (none) into an FP8 run, a 4-step history into a 16-step run
 *     (not loaded: the histories stay 0).
 *
 *   train_test_fp8_scaling SOURCE_DIR WORK_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "net.h"
#include "rt_safetensors.h"

static const char *ROOT, *WORK;

/* model trained `steps` steps (0: none) from seed 3, its weights saved to out. */
static int train_save(const char *model, int steps, const char *out) {
  NetLoadOpts o = {.device = "cpu", .seed = 3, .batch = 16, .precision = "fp8"};
  NetModel *m = NULL;
  NetStatus s = net_load(model, &o, &m);
  CHECK(s == NET_OK, "net_load %s: %s", model, net_last_error());
  if (s) return -1;
  if (steps > 0) {
    NetTrainConfig c = {.data = NET_DATA_SYNTHETIC, .synthetic_n = 64, .test_limit = 16, .steps = steps, .seed = 5};
    s = net_train(m, &c);
    CHECK(s == NET_OK, "%d steps: %s", steps, net_last_error());
  }
  if (!s) {
    s = net_weights_save(m, out);
    CHECK(s == NET_OK, "net_weights_save %s: %s", out, net_last_error());
  }
  net_free(m);
  return s ? -1 : 0;
}

static RtStFile *open_st(const char *path) {
  RtStFile *f = NULL;
  char err[512];
  int bad = rt_st_open(path, &f, err, sizeof err);
  CHECK(!bad, "%s", err);
  return bad ? NULL : f;
}

static const float *floats(const RtStFile *f, const char *name, int64_t *n) {
  const RtStTensor *t = f ? rt_st_find(f, name) : NULL;
  CHECK(t && t->dtype == RT_ST_F32, "%s: no f32 tensor", name);
  *n = t ? t->numel : 0;
  return t ? t->data : NULL;
}

static float amax_of(const RtStFile *f, const char *name) {
  int64_t n;
  const float *x = floats(f, name, &n);
  float m = 0;
  for (int64_t i = 0; x && i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
  return m;
}

/* The histories in f, by counting: how many, each of length H, and how
 * many of their entries are nonzero in total. */
static int histories(const RtStFile *f, int64_t H, int64_t *nonzero) {
  int count = 0;
  *nonzero = 0;
  for (size_t i = 0; f && i < rt_st_count(f); i++) {
    const RtStTensor *t = rt_st_tensor(f, i);
    size_t len = strlen(t->name);
    if (len < 13 || strcmp(t->name + len - 13, ".amax_history") != 0) continue;
    count++;
    CHECK(t->dtype == RT_ST_F32 && t->ndim == 1 && t->numel == H, "%s: not f32[%lld]", t->name, (long long)H);
    for (int64_t k = 0; t->dtype == RT_ST_F32 && k < t->numel; k++) *nonzero += ((const float *)t->data)[k] != 0;
  }
  return count;
}

static void path_of(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", WORK, name); }

/* smallcnn with line added to its train section, written into WORK. */
static void variant(char *out, size_t cap, const char *name, const char *line) {
  char src[4096];
  snprintf(src, sizeof src, "%s/models/smallcnn.net", ROOT);
  path_of(out, cap, name);
  FILE *in = fopen(src, "r"), *o = fopen(out, "w");
  CHECK(in && o, "cannot copy %s to %s", src, out);
  char buf[512];
  while (in && o && fgets(buf, sizeof buf, in)) {
    fputs(buf, o);
    if (strncmp(buf, "train {", 7) == 0) fprintf(o, "  %s\n", line);
  }
  if (in) fclose(in);
  if (o) fclose(o);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s SOURCE_DIR WORK_DIR\n", argv[0]);
    return 2;
  }
  ROOT = argv[1], WORK = argv[2];
  mkdir(WORK, 0777);
  char model[4096], p0[4096], p1[4096], p2[4096], pe[4096];
  snprintf(model, sizeof model, "%s/models/smallcnn.net", ROOT);
  path_of(p0, sizeof p0, "f8_init.safetensors");
  path_of(p1, sizeof p1, "f8_step1.safetensors");
  path_of(p2, sizeof p2, "f8_step2.safetensors");
  path_of(pe, sizeof pe, "f8_export.safetensors");
  if (train_save(model, 0, p0) || train_save(model, 1, p1) || train_save(model, 2, p2)) return check_report();
  RtStFile *f0 = open_st(p0), *f1 = open_st(p1), *f2 = open_st(p2);
  int64_t nz0, nz1, nz2;
  int n0 = histories(f0, 16, &nz0), n1 = histories(f1, 16, &nz1), n2 = histories(f2, 16, &nz2);
  /* conv2 and conv3: input and weight forward, the gradient of each backward */
  CHECK(n0 == 6 && n1 == 6 && n2 == 6, "%d, %d, %d amax histories (6 expected: 2 FP8 convolutions x 3)", n0, n1, n2);
  CHECK(nz0 == 0 && nz1 == n1 && nz2 == 2 * n2, "nonzero entries: %lld at the start, %lld after 1 step, %lld after 2",
        (long long)nz0, (long long)nz1, (long long)nz2);
  const char *h = "conv2.weight.f8e4m3.amax_history";
  int64_t n;
  const float *a1 = floats(f1, h, &n), *a2 = floats(f2, h, &n);
  float w0 = amax_of(f0, "conv2.weight"), w1 = amax_of(f1, "conv2.weight");
  if (a1 && a2) {
    CHECK(a1[0] == w0, "after 1 step: %s[0] = %.9g, the initial weight's largest |w| %.9g", h, a1[0], w0);
    CHECK(a2[1] == w0 && a2[0] == w1 && w1 != w0, "after 2 steps: %s = [%.9g, %.9g, ...], want [%.9g, %.9g, ...]", h,
          a2[0], a2[1], w1, w0);
  }
  /* the same first step in both runs: every history's amax of step 1 moved one place */
  for (size_t i = 0; f1 && f2 && i < rt_st_count(f1); i++) {
    const RtStTensor *t = rt_st_tensor(f1, i), *u = rt_st_find(f2, t->name);
    size_t len = strlen(t->name);
    if (len < 13 || strcmp(t->name + len - 13, ".amax_history") != 0 || !u) continue;
    const float *x = t->data, *y = u->data;
    CHECK(x[0] > 0 && y[1] == x[0] && y[0] > 0, "%s: step 1's amax %.9g, after step 2 [%.9g, %.9g]", t->name, x[0],
          y[0], y[1]);
  }
  printf("  conv2.weight's history after 2 steps: [%.6g, %.6g, 0, ...] (largest |w| after step 1, initially)\n",
         a2 ? a2[0] : 0, a2 ? a2[1] : 0);
  /* PyTorch's state_dict has no place for them */
  NetLoadOpts o = {.device = "cpu", .seed = 3, .batch = 16, .precision = "fp8"};
  NetModel *m = NULL;
  if (net_load(model, &o, &m) == NET_OK && net_weights_load(m, p2) == NET_OK) {
    CHECK(net_weights_export(m, pe, 2) == NET_OK, "net_weights_export: %s", net_last_error());
    RtStFile *fe = open_st(pe);
    int64_t nze;
    CHECK(fe && histories(fe, 16, &nze) == 0 && rt_st_find(fe, "conv2.weight"),
          "the export holds amax histories (or lacks conv2.weight)");
    rt_st_close(fe);
  } else {
    CHECK(0, "reloading %s: %s", p2, net_last_error());
  }
  net_free(m);
  rt_st_close(f0), rt_st_close(f1), rt_st_close(f2);
  /* the train section's choice */
  char cur[4096], four[4096], pc[4096], p4[4096];
  variant(cur, sizeof cur, "current.net", "fp8_scaling = current()");
  variant(four, sizeof four, "four.net", "fp8_scaling = delayed(history=4)");
  path_of(pc, sizeof pc, "f8_current.safetensors");
  path_of(p4, sizeof p4, "f8_four.safetensors");
  if (!train_save(cur, 1, pc) && !train_save(four, 3, p4)) {
    RtStFile *fc = open_st(pc), *f4 = open_st(p4);
    int64_t nzc, nz4;
    CHECK(histories(fc, 16, &nzc) == 0, "fp8_scaling = current(): amax histories kept");
    int k4 = histories(f4, 4, &nz4);
    CHECK(k4 == 6 && nz4 == 3 * 6, "delayed(history=4): %d histories, %lld nonzero entries after 3 steps", k4,
          (long long)nz4);
    rt_st_close(fc), rt_st_close(f4);
    /* weights move between runs whatever their histories: FP8's into fp16, fp16's (none) into FP8, and a
       history of another length, which is not loaded */
    struct {
      const char *model, *precision, *file;
    } mv[] = {{model, "fp16", p2}, {model, "fp8", pc}, {model, "fp8", p4}};
    for (size_t k = 0; k < sizeof mv / sizeof mv[0]; k++) {
      NetLoadOpts lo = {.device = "cpu", .seed = 3, .batch = 16, .precision = mv[k].precision};
      NetModel *mm = NULL;
      NetStatus st = net_load(mv[k].model, &lo, &mm);
      if (!st) st = net_weights_load(mm, mv[k].file);
      CHECK(st == NET_OK, "%s weights into a %s run: %s", mv[k].file, mv[k].precision, st ? net_last_error() : "");
      char back[4096];
      path_of(back, sizeof back, "f8_back.safetensors");
      if (!st && k == 2 && net_weights_save(mm, back) == NET_OK) {
        RtStFile *fb = open_st(back);
        int64_t nzb;
        CHECK(histories(fb, 16, &nzb) == 6 && nzb == 0, "a 4-step history was loaded into 16 steps (%lld nonzero)",
              (long long)nzb);
        rt_st_close(fb);
      }
      net_free(mm);
    }
  }
  return check_report();
}
