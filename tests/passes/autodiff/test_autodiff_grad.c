/* test_autodiff_grad.c - the autodiff pass's training graphs compute true
 * gradients: a finite-difference check on the CPU executor.
 *
 *   test_autodiff_grad TEST_DIR MODELS_DIR
 *
 * Each net (tiny.net, residual.net, models/smallcnn.net, models/mlp.net) is
 * compiled through the whole pipeline for training and run at batch 4 with
 * random parameters and inputs, lr = 0 (the weights stay put) and a loss
 * scale of 4.  The gradient each sgd_update receives, divided by the scale,
 * must match central differences of the loss (output 0), got by re-running
 * the same training graph with one parameter element moved.  A difference is
 * trusted only when steps h and h/2 agree: a step across relu or maxpool
 * kinks is skipped and counted (at most half of the samples; a wrong rule
 * is off by far more than the 5% allowed, on every sample). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"
#include "rt_cpu.h"

enum { BATCH = 4, SAMPLES = 8 };
static const float SCALE = 4;

static IrGraph *compile(Arena *a, const char *path) {
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .out = stdout, .disabled = pipeline_mask_after("autodiff")};
  return compile_file(a, &d, path, &cx);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static float uniform(float lo, float hi) {
  rng = rng * 6364136223846793005u + 1442695040888963407u;
  return lo + (hi - lo) * (float)((rng >> 40) / (double)(1u << 24));
}

static double loss_now(RtCpu *x, const IrGraph *g) {
  char err[256];
  if (rt_cpu_run(x, err, sizeof err)) {
    fprintf(stderr, "run: %s\n", err);
    return NAN;
  }
  return ((float *)rt_cpu_data(x, g->output[0]))[0];
}

static double central(RtCpu *x, const IrGraph *g, float *p, int64_t i, float h) {
  float keep = p[i];
  p[i] = keep + h;
  double up = loss_now(x, g);
  p[i] = keep - h;
  double down = loss_now(x, g);
  p[i] = keep;
  return (up - down) / (2.0 * h);
}

static void check_net(const char *path) {
  Arena a;
  arena_init(&a);
  IrGraph *g = compile(&a, path);
  CHECK(g != NULL, "%s compiles for training", path);
  RtCpu *x = NULL;
  char err[256];
  if (!g || rt_cpu_new(g, BATCH, &x, err, sizeof err)) {
    CHECK(0, "%s: executor: %s", path, g ? err : "no graph");
    arena_free(&a);
    return;
  }
  /* PyTorch's default ranges: weights within 1/sqrt(fan in), batchnorm scales
   * near 1; inputs in [-1, 1]; state zero. */
  char *bn_scale = calloc((size_t)g->nval + 1, 1);
  for (int i = 0; bn_scale && i < g->nnode; i++)
    if (g->node[i].op == IR_OP_BATCHNORM_TRAIN) bn_scale[g->node[i].in[1]] = 1;
  for (int v = 0; bn_scale && v < g->nval; v++) {
    IrValueKind kind = g->val[v].kind;
    if ((kind != IR_VAL_INPUT && kind != IR_VAL_PARAM) || rt_cpu_is_int(x, v)) continue;
    float *p = rt_cpu_data(x, v);
    int64_t n = rt_cpu_numel(x, v);
    const IrType *t = &g->val[v].type;
    float lo = -1, hi = 1;
    if (bn_scale[v])
      lo = 0.5f, hi = 1.5f;
    else if (kind == IR_VAL_PARAM && t->rank >= 2)
      hi = (float)(1 / sqrt((double)n / (double)t->dim[0])), lo = -hi;
    else if (kind == IR_VAL_PARAM)
      lo = -0.5f, hi = 0.5f;
    for (int64_t i = 0; i < n; i++) p[i] = uniform(lo, hi);
  }
  free(bn_scale);
  int classes = (int)g->val[g->output[1]].type.dim[1];
  int64_t *label = rt_cpu_data(x, g->node[g->val[g->output[0]].def].in[1]); /* the loss's labels */
  for (int i = 0; i < BATCH; i++) label[i] = (i * 7 + 3) % classes;
  ((float *)rt_cpu_data(x, rt_cpu_find(x, "lr")))[0] = 0;
  ((float *)rt_cpu_data(x, rt_cpu_find(x, "loss_scale")))[0] = SCALE;
  double loss = loss_now(x, g);
  CHECK(isfinite(loss) && loss > 0, "%s: loss %g", path, loss);
  /* The analytic gradients, copied out before the differences re-run the graph. */
  int nupd = 0, checked = 0;
  for (int i = 0; i < g->nnode; i++) nupd += g->node[i].op == IR_OP_SGD_UPDATE;
  float **grads = calloc((size_t)nupd + 1, sizeof *grads);
  int *param = calloc((size_t)nupd + 1, sizeof *param);
  for (int i = 0, k = 0; grads && param && i < g->nnode; i++) {
    const IrNode *n = &g->node[i];
    if (n->op != IR_OP_SGD_UPDATE) continue;
    int64_t cnt = rt_cpu_numel(x, n->in[1]);
    param[k] = n->in[0];
    grads[k] = malloc(sizeof(float) * (size_t)cnt);
    if (grads[k]) memcpy(grads[k], rt_cpu_data(x, n->in[1]), sizeof(float) * (size_t)cnt);
    k++;
  }
  for (int k = 0; grads && param && k < nupd; k++) {
    float *p = rt_cpu_data(x, param[k]);
    int64_t n = rt_cpu_numel(x, param[k]);
    int skipped = 0, samples = n < SAMPLES ? (int)n : SAMPLES;
    for (int s = 0; s < samples && grads[k]; s++) {
      int64_t i = s == 0 ? 0 : (int64_t)(uniform(0, 1) * (float)n) % n;
      double fa = central(x, g, p, i, 1e-3f), fb = central(x, g, p, i, 5e-4f);
      if (!(fabs(fa - fb) <= 2e-4 + 0.03 * fabs(fb))) {
        skipped++;
        continue;
      }
      double an = grads[k][i] / SCALE;
      checked++;
      CHECK(fabs(an - fb) <= 5e-4 + 0.05 * fabs(fb), "%s: d loss / d %s[%lld]: analytic %.6g, finite difference %.6g",
            path, g->val[param[k]].name, (long long)i, an, fb);
    }
    CHECK(skipped * 2 <= samples, "%s: %d of %d samples of %s at kinks", path, skipped, samples, g->val[param[k]].name);
    CHECK(fabs(loss_now(x, g) - loss) < 1e-6, "%s: lr = 0 leaves the weights (and so the loss) unchanged", path);
  }
  printf("%s: loss %.6f, %d parameters, %d gradient elements checked\n", path, loss, nupd, checked);
  CHECK(checked >= nupd, "%s: too few elements checked (%d)", path, checked);
  for (int k = 0; grads && k < nupd; k++) free(grads[k]);
  free(grads);
  free(param);
  rt_cpu_free(x);
  arena_free(&a);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_autodiff_grad TEST_DIR MODELS_DIR\n");
    return 2;
  }
  char path[4096];
  static const char *const nets[][2] = {{"0", "tiny"}, {"0", "residual"}, {"1", "smallcnn"}, {"1", "mlp"}};
  for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
    snprintf(path, sizeof path, "%s/%s.net", nets[i][0][0] == '0' ? argv[1] : argv[2], nets[i][1]);
    check_net(path);
  }
  return check_report();
}
