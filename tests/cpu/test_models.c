/* test_models.c - forward of the real models on the CPU executor.
 *
 * models/smallcnn.net and models/resnet20.net go through the front end
 * (compile_file, no passes), get seeded random parameters (weights scaled by
 * 1/sqrt(fan-in), batchnorm statistics around 0 and 1) and a batch of 2
 * random images; the loss must be finite and positive, the logits finite,
 * and a second run must give the same loss (inference batchnorm changes no
 * state).  The same graph with every NCHW activation made NHWC and every
 * KCRS filter KRSC, given the transposed data, must give the same loss and
 * logits. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "exectest.h"
#include "rt_ref.h"

enum { BATCH = 2 };

/* Rewrites g in place to NHWC activations and KRSC filters. */
static void make_nhwc(IrGraph *g) {
  for (int v = 0; v < g->nval; v++) {
    IrType *t = &g->val[v].type;
    if (t->rank != 4 || (t->layout != IR_LAYOUT_NCHW && t->layout != IR_LAYOUT_KCRS)) continue;
    int64_t c = t->dim[1];
    t->dim[1] = t->dim[2], t->dim[2] = t->dim[3], t->dim[3] = c;
    t->layout = t->layout == IR_LAYOUT_NCHW ? IR_LAYOUT_NHWC : IR_LAYOUT_KRSC;
  }
}

/* Seeded parameters and inputs for the NCHW executor a. */
static void fill(RtCpu *a, const IrGraph *g, uint64_t *seed) {
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT) continue;
    const char *name = val->name;
    size_t len = strlen(name);
    if (rt_cpu_is_int(a, v)) {
      int64_t *lab = rt_cpu_data(a, v);
      for (int64_t i = 0; i < rt_cpu_numel(a, v); i++) lab[i] = (int64_t)exectest_rand(seed, 0, 10);
    } else if (len > 12 && strcmp(name + len - 12, ".running_var") == 0) {
      exectest_fill(a, v, seed, 0.5f, 1.5f);
    } else if (val->type.rank >= 2 && val->kind == IR_VAL_PARAM) {
      int64_t fan_in = rt_cpu_numel(a, v) / val->type.dim[0];
      float r = 1.0f / sqrtf((float)fan_in);
      exectest_fill(a, v, seed, -r, r);
    } else if (len > 7 && strcmp(name + len - 7, ".weight") == 0) {
      exectest_fill(a, v, seed, 0.8f, 1.2f);
    } else {
      exectest_fill(a, v, seed, -0.2f, 0.2f);
    }
  }
}

/* Copies every input/param/state of a into b, transposing 4-d tensors. */
static void copy_nhwc(RtCpu *a, const IrGraph *ga, RtCpu *b) {
  for (int v = 0; v < ga->nval; v++) {
    const IrType *t = &ga->val[v].type;
    if (ga->val[v].kind == IR_VAL_ACT) continue;
    if (t->rank == 4) {
      int64_t n = t->dim[0] == IR_DIM_N ? BATCH : t->dim[0];
      rt_ref_nchw_to_nhwc((int)n, (int)t->dim[1], (int)t->dim[2], (int)t->dim[3], rt_cpu_data(a, v), rt_cpu_data(b, v));
    } else {
      memcpy(rt_cpu_data(b, v), rt_cpu_data(a, v),
             (size_t)rt_cpu_numel(a, v) * (rt_cpu_is_int(a, v) ? sizeof(int64_t) : sizeof(float)));
    }
  }
}

static void test_model(const char *root, const char *rel) {
  Arena arena;
  arena_init(&arena);
  IrGraph *g = exectest_model(&arena, root, rel);
  IrGraph *gh = g ? ir_graph_clone(g) : NULL;
  CHECK(g && gh, "%s lowers", rel);
  if (gh) make_nhwc(gh);
  RtCpu *a = g ? exectest_new(g, BATCH) : NULL, *b = gh ? exectest_new(gh, BATCH) : NULL;
  CHECK(a && b, "%s: executors for NCHW and NHWC", rel);
  if (a && b) {
    uint64_t seed = 42;
    fill(a, g, &seed);
    copy_nhwc(a, g, b);
    CHECK(exectest_run(a) == 0, "%s NCHW runs", rel);
    CHECK(exectest_run(b) == 0, "%s NHWC runs", rel);
    float loss = *(float *)rt_cpu_data(a, g->output[0]);
    const float *logits = rt_cpu_data(a, g->output[1]);
    int64_t nl = rt_cpu_numel(a, g->output[1]);
    printf("%s: loss %.6f at batch %d\n", rel, loss, BATCH);
    CHECK(isfinite(loss) && loss > 0, "%s loss %g", rel, loss);
    CHECK(!rt_ref_has_nonfinite(nl, logits), "%s logits finite", rel);
    float again[64];
    memcpy(again, logits, sizeof(float) * (size_t)(nl < 64 ? nl : 64));
    CHECK(exectest_run(a) == 0, "%s second run", rel);
    CHECK(*(float *)rt_cpu_data(a, g->output[0]) == loss, "%s: same loss on a second run", rel);
    CHECK(memcmp(again, logits, sizeof(float) * (size_t)(nl < 64 ? nl : 64)) == 0, "%s: same logits", rel);
    float lh = *(float *)rt_cpu_data(b, gh->output[0]);
    CHECK_CLOSE(lh, loss, 1e-5, "NHWC loss");
    double e = exectest_compare("NHWC logits", rt_cpu_data(b, gh->output[1]), logits, nl, 1e-5);
    CHECK(e <= 1e-5, "%s NHWC logits differ by %.3g", rel, e);
  }
  rt_cpu_free(a);
  rt_cpu_free(b);
  arena_free(&arena);
}

int main(int argc, char **argv) {
  if (argc < 2) return check_skip("usage: exec_test_models SOURCE_DIR");
  test_model(argv[1], "models/smallcnn.net");
  test_model(argv[1], "models/resnet20.net");
  return check_report();
}
