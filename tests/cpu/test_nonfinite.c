/* test_nonfinite.c - NaN and infinity go through netc's whole pipeline as
 * they go through PyTorch: relu(NaN) = NaN, a NaN in a max-pool window wins,
 * a batch norm of a channel with a NaN is NaN.
 *
 * models/smallcnn.net and models/resnet20.net are compiled by the whole
 * pipeline (fused, NHWC/KRSC, the default precision, memplan), for training
 * and for inference, and run on the CPU executor with seeded parameters
 * (weights scaled by 1/sqrt(fan-in), batch-norm statistics around 0 and 1)
 * and images.  With finite values the loss and the logits are finite.  Then:
 *
 * - one element of the first convolution's filter NaN (then +inf): every
 *   logit of the training step is NaN (infinite or NaN for +inf), and so is
 *   the loss.  Before relu kept NaN, the NaN channel became 0 at the first
 *   relu and the loss stayed finite.
 * - one pixel of image 0 NaN: in training, batch statistics spread it to
 *   the whole batch (every logit NaN, as PyTorch's training-mode batch
 *   norm); in inference, where batch norm uses the running statistics, only
 *   image 0's logits are NaN and the other images' stay finite; in INT8
 *   inference (--int8=all) every logit is NaN (the batch shares one scale). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "compile.h"
#include "diag.h"
#include "exectest.h"
#include "rt_ref.h"

enum { BATCH = 4 };

static IrGraph *compile_model(Arena *a, const char *path, int inference, const char *int8) {
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .out = stdout, .inference = inference, .batch = BATCH, .int8_layers = int8};
  return compile_file(a, &d, path, &cx);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Seeded parameters, statistics and inputs for x of g (momentum zero);
 * labels below `classes`. */
static void fill(RtCpu *x, const IrGraph *g, int64_t classes) {
  uint64_t seed = 7;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT) continue;
    if (rt_cpu_is_int(x, v)) {
      int64_t *lab = rt_cpu_data(x, v);
      for (int64_t i = 0; i < rt_cpu_numel(x, v); i++) lab[i] = (i * 7 + 3) % classes;
    } else if (strcmp(val->name, "image") == 0) {
      exectest_fill(x, v, &seed, 0, 1);
    } else if (strcmp(val->name, "lr") == 0) {
      *(float *)rt_cpu_data(x, v) = 0.1f;
    } else if (strcmp(val->name, "loss_scale") == 0) {
      *(float *)rt_cpu_data(x, v) = 1;
    } else if (ends_with(val->name, ".momentum_buffer") || val->kind == IR_VAL_INPUT) {
      memset(rt_cpu_data(x, v), 0, sizeof(float) * (size_t)rt_cpu_numel(x, v));
    } else if (ends_with(val->name, ".running_var")) {
      exectest_fill(x, v, &seed, 0.5f, 1.5f);
    } else if (val->type.rank >= 2 && val->kind == IR_VAL_PARAM) {
      float r = 1.0f / sqrtf((float)(rt_cpu_numel(x, v) / val->type.dim[0]));
      exectest_fill(x, v, &seed, -r, r);
    } else if (ends_with(val->name, ".weight")) {
      exectest_fill(x, v, &seed, 0.8f, 1.2f);
    } else {
      exectest_fill(x, v, &seed, -0.2f, 0.2f);
    }
  }
}

/* The first 4-d parameter in value order: the first convolution's filter. */
static int first_filter(const IrGraph *g) {
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_PARAM && g->val[v].type.rank == 4) return v;
  return -1;
}

/* How many of the n logits from `from` are NaN and how many are finite. */
static void count(const float *logits, int64_t from, int64_t n, int64_t *nan, int64_t *finite) {
  *nan = *finite = 0;
  for (int64_t i = from; i < from + n; i++) *nan += isnan(logits[i]) != 0, *finite += isfinite(logits[i]) != 0;
}

/* A fresh training executor of g with seeded values, the first filter's
 * element 0 set to w (if poison) and image 0's first pixel to px (if
 * poison_px); runs one step; its loss and logits counts. */
static void train_case(const IrGraph *g, const char *what, int poison, float w, int poison_px, float px,
                       int want_nan_only) {
  RtCpu *x = exectest_new(g, BATCH);
  CHECK(x != NULL, "%s: executor", what);
  if (!x) return;
  int64_t classes = g->val[g->output[1]].type.dim[1];
  fill(x, g, classes);
  int f = first_filter(g);
  CHECK(f >= 0, "%s: a filter", what);
  if (poison && f >= 0) ((float *)rt_cpu_data(x, f))[0] = w;
  if (poison_px) exectest_f(x, "image")[0] = px;
  CHECK(exectest_run(x) == 0, "%s: the step runs", what);
  float loss = *(float *)rt_cpu_data(x, g->output[0]);
  int64_t n = rt_cpu_numel(x, g->output[1]), nan, finite;
  count(rt_cpu_data(x, g->output[1]), 0, n, &nan, &finite);
  printf("%s: loss %g, %lld of %lld logits NaN, %lld finite\n", what, loss, (long long)nan, (long long)n,
         (long long)finite);
  if (!poison && !poison_px) {
    CHECK(isfinite(loss) && finite == n, "%s: finite loss %g and logits", what, loss);
  } else {
    CHECK(!isfinite(loss), "%s: the loss is %g, not NaN or infinite", what, loss);
    if (want_nan_only)
      CHECK(nan == n, "%s: %lld of %lld logits NaN", what, (long long)nan, (long long)n);
    else
      CHECK(finite == 0, "%s: %lld of %lld logits finite", what, (long long)finite, (long long)n);
  }
  rt_cpu_free(x);
}

/* Inference with a NaN pixel in image 0: image 0's logits NaN, the rest
 * finite. */
static void infer_case(const IrGraph *g, const char *rel) {
  RtCpu *x = exectest_new(g, BATCH);
  CHECK(x != NULL, "%s inference: executor", rel);
  if (!x) return;
  const float *logits = rt_cpu_data(x, g->output[g->noutput - 1]);
  int64_t classes = g->val[g->output[g->noutput - 1]].type.dim[1];
  fill(x, g, classes);
  exectest_f(x, "image")[5] = NAN;
  CHECK(exectest_run(x) == 0, "%s inference runs", rel);
  int64_t nan0, fin0, nan_rest, fin_rest;
  count(logits, 0, classes, &nan0, &fin0);
  count(logits, classes, (BATCH - 1) * classes, &nan_rest, &fin_rest);
  printf("%s inference, NaN pixel in image 0: %lld of %lld logits NaN in image 0, %lld of %lld finite in the "
         "others\n",
         rel, (long long)nan0, (long long)classes, (long long)fin_rest, (long long)((BATCH - 1) * classes));
  CHECK(nan0 == classes, "%s inference: image 0's logits NaN (%lld of %lld)", rel, (long long)nan0, (long long)classes);
  CHECK(fin_rest == (BATCH - 1) * classes, "%s inference: the other images' logits finite", rel);
  rt_cpu_free(x);
}

/* INT8 inference (--int8=all: activations quantized by their tensor's
 * maximum) with a NaN pixel in image 0: the maximum, the scale and so
 * every quantized value are NaN -- every image's logits, as per-tensor
 * quantization shares one scale over the batch (PyTorch's observers take
 * torch.max, which is NaN too); never finite logits, never a refusal. */
static void int8_case(const IrGraph *g, const char *rel) {
  RtCpu *x = exectest_new(g, BATCH);
  CHECK(x != NULL, "%s int8: executor", rel);
  if (!x) return;
  int64_t classes = g->val[g->output[g->noutput - 1]].type.dim[1], nan, finite;
  fill(x, g, classes);
  CHECK(exectest_run(x) == 0, "%s int8 runs", rel);
  count(rt_cpu_data(x, g->output[g->noutput - 1]), 0, BATCH * classes, &nan, &finite);
  CHECK(finite == BATCH * classes, "%s int8: finite logits from finite images (%lld)", rel, (long long)finite);
  exectest_f(x, "image")[5] = NAN;
  CHECK(exectest_run(x) == 0, "%s int8 runs with a NaN pixel", rel);
  count(rt_cpu_data(x, g->output[g->noutput - 1]), 0, BATCH * classes, &nan, &finite);
  printf("%s int8 inference, NaN pixel in image 0: %lld of %lld logits NaN\n", rel, (long long)nan,
         (long long)(BATCH * classes));
  CHECK(nan == BATCH * classes, "%s int8: every logit NaN (%lld of %lld)", rel, (long long)nan,
        (long long)(BATCH * classes));
  rt_cpu_free(x);
}

static void test_model(const char *root, const char *rel) {
  char path[4096], what[256];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  Arena arena;
  arena_init(&arena);
  IrGraph *gt = compile_model(&arena, path, 0, NULL), *gi = compile_model(&arena, path, 1, NULL);
  IrGraph *g8 = compile_model(&arena, path, 1, "all");
  CHECK(gt && gi && g8, "%s compiles (whole pipeline, training, inference, int8 inference)", rel);
  if (gt && gi) {
    snprintf(what, sizeof what, "%s finite", rel);
    train_case(gt, what, 0, 0, 0, 0, 0);
    snprintf(what, sizeof what, "%s, NaN in the first filter", rel);
    train_case(gt, what, 1, NAN, 0, 0, 1);
    snprintf(what, sizeof what, "%s, +inf in the first filter", rel);
    train_case(gt, what, 1, INFINITY, 0, 0, 0);
    snprintf(what, sizeof what, "%s, a NaN pixel in image 0", rel);
    train_case(gt, what, 0, 0, 1, NAN, 1);
    infer_case(gi, rel);
    if (g8) int8_case(g8, rel);
  }
  arena_free(&arena);
}

int main(int argc, char **argv) {
  if (argc < 2) return check_skip("usage: exec_test_nonfinite SOURCE_DIR");
  test_model(argv[1], "models/smallcnn.net");
  test_model(argv[1], "models/resnet20.net");
  return check_report();
}
