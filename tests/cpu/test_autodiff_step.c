/* test_autodiff_step.c - models/smallcnn.net compiled through the whole
 * pipeline (autodiff included) and trained on the CPU executor.
 *
 * With lr = 0 the step is a function of the parameters, so the gradients the
 * autodiff pass wired up (read from the executor by node name) are checked
 * against central finite differences of the loss for a few parameters; the
 * loss scale (1024) must be folded in.  Then with lr = 0.05 the first step
 * must move fc.bias by exactly PyTorch's SGD step, and ten steps on one fixed
 * batch must bring the loss down. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ast.h"
#include "check.h"
#include "exectest.h"
#include "pipeline.h"

enum { BATCH = 4 };
static const float SCALE = 1024;
/* Finite-difference step: larger steps cross relu/maxpool kinks somewhere in
 * a 28x28 network.  The loss is a float, so a difference cannot resolve
 * gradients finer than about ulp(loss) / (2 * STEP): that much is allowed on
 * top of the relative tolerance. */
static const float STEP = 1e-3f;

static float *node_out(RtCpu *x, const IrGraph *g, const char *name, int k) {
  for (int i = 0; i < g->nnode; i++)
    if (g->node[i].name && strcmp(g->node[i].name, name) == 0 && k < g->node[i].nout)
      return rt_cpu_data(x, g->node[i].out[k]);
  fprintf(stderr, "no node %s\n", name);
  return NULL;
}

static float loss_of(RtCpu *x, const IrGraph *g) {
  exectest_run(x);
  return *(float *)rt_cpu_data(x, g->output[0]);
}

/* Gradient `grad` (scaled by SCALE) of parameter `param` against central
 * differences at up to `count` elements. */
static void check_fd(RtCpu *x, const IrGraph *g, const char *param, const float *grad, int count) {
  float *p = exectest_f(x, param);
  if (!p || !grad) {
    CHECK(0, "no parameter or gradient for %s", param);
    return;
  }
  int64_t n = rt_cpu_numel(x, rt_cpu_find(x, param));
  if (count > n) count = (int)n;
  double worst = 0, scale = 1e-3, loss = loss_of(x, g);
  static float want[64], got[64];
  for (int j = 0; j < count; j++) {
    int64_t i = j * n / count;
    float keep = p[i], h = STEP;
    p[i] = keep + h;
    double up = loss_of(x, g);
    p[i] = keep - h;
    double down = loss_of(x, g);
    p[i] = keep;
    want[j] = (float)((up - down) / (2 * h));
    got[j] = grad[i] / SCALE;
    if (fabs(want[j]) > scale) scale = fabs(want[j]);
  }
  for (int j = 0; j < count; j++)
    if (fabs(got[j] - want[j]) > worst) worst = fabs(got[j] - want[j]);
  double noise = 2 * FLT_EPSILON * fabs(loss) / (2 * STEP);
  printf("%-14s %2d elements: max |autodiff - fd| = %.2e, max |fd| = %.2e, resolution %.1e\n", param, count, worst,
         scale, noise);
  CHECK(worst <= 2e-2 * scale + noise, "%s gradient off by %.3g (max |fd| %.3g)", param, worst, scale);
}

int main(int argc, char **argv) {
  if (argc < 2) return check_skip("usage: exec_test_autodiff_step SOURCE_DIR");
  Arena arena;
  arena_init(&arena);
  IrGraph *g =
      exectest_compile(&arena, argv[1], "models/smallcnn.net", (PassCtx){.disabled = pipeline_mask_after("autodiff")});
  CHECK(g != NULL, "smallcnn compiles");
  RtCpu *x = g ? exectest_new(g, BATCH) : NULL;
  CHECK(x != NULL, "executor for the training graph");
  if (!x) {
    arena_free(&arena);
    return check_report();
  }
  uint64_t seed = 77;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT || rt_cpu_is_int(x, v)) continue;
    if (val->kind == IR_VAL_PARAM && val->type.rank >= 2) {
      float r = 1.0f / sqrtf((float)(rt_cpu_numel(x, v) / val->type.dim[0]));
      exectest_fill(x, v, &seed, -r, r);
    } else if (val->kind == IR_VAL_PARAM && strstr(val->name, "bn") && strstr(val->name, ".weight")) {
      exectest_fill(x, v, &seed, 0.8f, 1.2f);
    } else if (val->kind == IR_VAL_PARAM) {
      exectest_fill(x, v, &seed, -0.1f, 0.1f);
    }
  }
  exectest_fill(x, exectest_val(x, "image"), &seed, 0, 1);
  int64_t *label = rt_cpu_data(x, exectest_val(x, "label"));
  for (int i = 0; i < BATCH; i++) label[i] = (i * 3) % 10;
  float *lr = exectest_f(x, "lr"), *ls = exectest_f(x, "loss_scale");
  CHECK(lr && ls, "lr and loss_scale inputs");
  if (!lr || !ls) goto done;

  *lr = 0, *ls = SCALE;
  CHECK(exectest_run(x) == 0, "training step runs");
  static float gfc[10], gbn[16], gconv[144], gconv3b[32];
  const float *p;
  if ((p = node_out(x, g, "fc.bgrad", 0))) memcpy(gfc, p, sizeof gfc);
  if ((p = node_out(x, g, "bn2.bwd", 1))) memcpy(gbn, p, sizeof gbn);
  if ((p = node_out(x, g, "conv1.wgrad", 0))) memcpy(gconv, p, sizeof gconv);
  if ((p = node_out(x, g, "conv3.bgrad", 0))) memcpy(gconv3b, p, sizeof gconv3b);
  check_fd(x, g, "fc.bias", gfc, 10);
  check_fd(x, g, "bn2.weight", gbn, 16);
  check_fd(x, g, "conv1.weight", gconv, 12);
  check_fd(x, g, "conv3.bias", gconv3b, 8);

  /* One real step: fc.bias moves by lr * (g / scale + wd * w) (first step: buf = d). */
  float *buf = exectest_f(x, "fc.bias.momentum_buffer"), *fcb = exectest_f(x, "fc.bias");
  memset(buf, 0, 10 * sizeof(float));
  float before[10], grad[10];
  memcpy(before, fcb, sizeof before);
  *lr = 0.05f;
  float first = loss_of(x, g);
  memcpy(grad, node_out(x, g, "fc.bgrad", 0), sizeof grad);
  for (int i = 0; i < 10; i++) {
    double want = before[i] - 0.05 * (grad[i] / SCALE + 0.0001 * before[i]);
    CHECK_CLOSE(fcb[i], want, 1e-6, "fc.bias after one step");
  }
  float last = first;
  for (int step = 1; step < 10; step++) last = loss_of(x, g);
  printf("loss on one fixed batch: step 0 %.5f, step 9 %.5f\n", first, last);
  CHECK(isfinite(last) && last < first * 0.9, "ten steps lower the loss (%g -> %g)", first, last);
done:
  rt_cpu_free(x);
  arena_free(&arena);
  return check_report();
}
