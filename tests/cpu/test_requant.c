/* test_requant.c - pass requant on the CPU executor: INT8 inference (every
 * convolution but the first in i8, every i8 layer's input at a calibrated
 * step) with and without the pass.
 *
 * 1. tests/passes/requant/bottleneck.net: conv1 and conv2 (no residual,
 *    read only by the next layer's cast) write i8 themselves, two casts
 *    fewer; conv3 (into the pool) keeps its f16 result.  With f32 as the
 *    default dtype the unfused cast reads the same f32 result the fused
 *    convolution quantizes: the logits agree bit for bit; with f16 (the
 *    unfused graph rounds to f16 first) to 1e-2 of the largest.
 * 2. ResNet-20: every block's conv1, and the two block outputs that only
 *    convolutions read (layer1.2's and layer2.2's: the next stage's conv1
 *    and its downsample, no shortcut): 11 requantized, 11 casts fewer.  A
 *    block output that the next block's shortcut reads keeps the default
 *    dtype, so, as for the bottleneck, the logits agree bit for bit in f32
 *    and to the f16 rounding in f16.
 * 3. The verifier refuses an i8 y_dtype without y_scale, a y_scale of 0,
 *    and a y_scale on a convolution whose result is f16. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "exectest.h"
#include "int8_scales.h"
#include "pipeline.h"

enum { BATCH = 4 };

/* Every layer of resnet20 but the stem at step 0.05 (activations of a
 * random network on random images are O(1): +-6.35 holds them). */
static const char *LAYERS[] = {
    "layer1.0.conv1", "layer1.0.conv2", "layer1.1.conv1", "layer1.1.conv2",        "layer1.2.conv1",
    "layer1.2.conv2", "layer2.0.conv1", "layer2.0.conv2", "layer2.1.conv1",        "layer2.1.conv2",
    "layer2.2.conv1", "layer2.2.conv2", "layer3.0.conv1", "layer3.0.conv2",        "layer3.1.conv1",
    "layer3.1.conv2", "layer3.2.conv1", "layer3.2.conv2", "layer2.0.downsample.0", "layer3.0.downsample.0",
    "conv1",          "conv2",          "conv3"};
enum { NLAYERS = sizeof LAYERS / sizeof LAYERS[0] };

static IrGraph *compile(Arena *a, const char *root, const char *model, IrDtype precision, int requant,
                        const Int8Scales *scales) {
  return exectest_compile(a, root, model,
                          (PassCtx){.inference = 1,
                                    .precision = precision,
                                    .precision_set = 1,
                                    .batch = BATCH,
                                    .int8_layers = "all",
                                    .int8_scales = scales,
                                    .disabled = requant ? 0 : pipeline_bit("requant")});
}

/* Convolutions writing a requantized i8 result, and casts reading one. */
static void count_requant(const IrGraph *g, int *convs, int *casts_of_i8) {
  *convs = *casts_of_i8 = 0;
  for (int n = 0; n < g->nnode; n++) {
    const IrNode *node = &g->node[n];
    if (ir_attr_find(node, "y_scale")) ++*convs;
    if (node->op == IR_OP_CAST && g->val[node->in[0]].type.dtype == IR_DT_I8) ++*casts_of_i8;
  }
}

/* The logits of g on the seeded image and weights into out (BATCH rows of
 * *classes); 0, or -1 when it does not run. */
static int logits(const IrGraph *g, float *out, int *classes) {
  RtCpu *x = exectest_new(g, BATCH);
  if (!x) return -1;
  uint64_t seed = 11;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT || rt_cpu_is_int(x, v)) continue;
    int bn_var = val->name && strstr(val->name, "running_var");
    exectest_fill(x, v, &seed, bn_var ? 0.5f : -0.5f, bn_var ? 1.5f : 0.5f);
  }
  int rc = exectest_run(x);
  *classes = (int)(rt_cpu_numel(x, g->output[0]) / BATCH);
  if (!rc) memcpy(out, rt_cpu_data(x, g->output[0]), sizeof(float) * (size_t)rt_cpu_numel(x, g->output[0]));
  rt_cpu_free(x);
  return rc;
}

static int argmax(const float *v, int n) {
  int k = 0;
  for (int i = 1; i < n; i++) k = v[i] > v[k] ? i : k;
  return k;
}

/* model in INT8 with and without the pass at precision: `want` requantized
 * convolutions and as many casts fewer; the logits within tol of the
 * largest (0: bit for bit) and every prediction the same. */
static void compare(const char *root, const char *model, const Int8Scales *scales, IrDtype precision, int want,
                    double tol) {
  Arena aa, ab;
  arena_init(&aa);
  arena_init(&ab);
  IrGraph *fused = compile(&aa, root, model, precision, 1, scales);
  IrGraph *plain = compile(&ab, root, model, precision, 0, scales);
  const char *pn = ir_dtype_name(precision);
  CHECK(fused && plain, "%s int8 compiles with and without requant (%s)", model, pn);
  if (fused && plain) {
    int convs, casts, convs0, casts0;
    count_requant(fused, &convs, &casts);
    count_requant(plain, &convs0, &casts0);
    CHECK(convs == want && casts == 0, "%s %s: %d requantized convolutions (got %d), no cast of one (got %d)", model,
          pn, want, convs, casts);
    CHECK(convs0 == 0, "without the pass none (got %d)", convs0);
    CHECK(plain->nnode - fused->nnode == want, "%d casts fewer (%d nodes against %d)", want, fused->nnode,
          plain->nnode);
    float a[BATCH * 16], b[BATCH * 16];
    int ca = 0, cb = 0;
    if (logits(fused, a, &ca) == 0 && logits(plain, b, &cb) == 0 && ca == cb && ca <= 16) {
      int same = !memcmp(a, b, sizeof(float) * BATCH * (size_t)ca), agree = 0;
      for (int i = 0; i < BATCH; i++) agree += argmax(a + i * ca, ca) == argmax(b + i * ca, ca);
      double e = exectest_compare("logits", a, b, BATCH * ca, tol);
      printf("%s %s: requantized logits %s the plain graph's (max difference %.3g of the largest), %d of %d "
             "predictions agree\n",
             model, pn, same ? "equal" : "differ from", e, agree, BATCH);
      if (tol == 0) CHECK(same, "%s %s: the logits agree bit for bit", model, pn);
      CHECK(e <= tol && agree == BATCH, "%s %s: the logits agree (%.3g), the predictions too", model, pn, e);
    } else {
      CHECK(0, "%s: both graphs run", model);
    }
  }
  arena_free(&aa);
  arena_free(&ab);
}

/* The verifier's refusals of bad requantized convolutions. */
static void refusals(const char *root, const Int8Scales *scales) {
  static const struct {
    const char *what, *key;
    int dtype;    /* y_dtype to set, or -1 */
    double scale; /* y_scale to set, or 0 to drop it */
    const char *msg;
  } BAD[] = {
      {"no y_scale", "y_scale", IR_DT_I8, 0, "an i8 y_dtype needs y_scale"},
      {"y_scale 0", "y_scale", IR_DT_I8, -1, "y_scale must be a finite number above 0"},
      {"y_scale on f16", "y_scale", IR_DT_F16, 0.5, "y_scale is for an i8 y_dtype"},
  };
  for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
    Arena a;
    arena_init(&a);
    IrGraph *g = compile(&a, root, "models/resnet20.net", IR_DT_F16, 1, scales);
    int n = 0;
    while (g && n < g->nnode && !ir_attr_find(&g->node[n], "y_scale")) n++;
    CHECK(g && n < g->nnode, "%s: a requantized convolution to break", BAD[k].what);
    if (!g || n == g->nnode) {
      arena_free(&a);
      continue;
    }
    IrNode *node = &g->node[n];
    IrAttr *yd = (IrAttr *)ir_attr_find(node, "y_dtype"), *ys = (IrAttr *)ir_attr_find(node, BAD[k].key);
    yd->i[0] = BAD[k].dtype;
    if (BAD[k].scale == 0)
      node->nattr--; /* y_scale is last */
    else
      ys->f = BAD[k].scale < 0 ? 0 : BAD[k].scale;
    if (BAD[k].dtype == IR_DT_F16) g->val[node->out[0]].type.dtype = IR_DT_F16;
    char buf[8192];
    int bad = exectest_verify_msg(g, "requant", buf, sizeof buf);
    CHECK(bad && strstr(buf, BAD[k].msg), "%s: refused with \"%s\" (got: %s)", BAD[k].what, BAD[k].msg, buf);
    arena_free(&a);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) return check_skip("usage: test_requant SOURCE_DIR");
  double steps[NLAYERS];
  for (int i = 0; i < NLAYERS; i++) steps[i] = 0.05;
  Int8Scales scales = {.layer = LAYERS, .scale = steps, .n = NLAYERS};
  compare(argv[1], "tests/passes/requant/bottleneck.net", &scales, IR_DT_F32, 2, 0);
  compare(argv[1], "tests/passes/requant/bottleneck.net", &scales, IR_DT_F16, 2, 1e-2);
  compare(argv[1], "models/resnet20.net", &scales, IR_DT_F32, 11, 0);
  compare(argv[1], "models/resnet20.net", &scales, IR_DT_F16, 11, 1e-2);
  refusals(argv[1], &scales);
  return check_report();
}
