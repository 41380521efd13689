/* test_requant.c - pass requant on the CPU executor: ResNet-20's INT8
 * inference (every convolution but the first in i8, every i8 layer's input
 * at a calibrated scale) with and without the pass.
 *
 * 1. The pass fires where it should: each basic block's conv1 (read only
 *    by its conv2's cast) writes i8 with that cast's scale, nine of them;
 *    no cast of a requantized result is left; conv2 (its result read by the
 *    residual add) and the stem keep theirs.
 * 2. With f32 as the default dtype the unfused cast reads the same f32
 *    result the fused convolution quantizes: the logits agree bit for bit.
 * 3. With f16 the unfused graph rounds that result to f16 before the cast;
 *    the fused one does not: the logits agree to a few quantization steps
 *    and the predictions agree.
 * 4. The verifier refuses an i8 y_dtype without y_scale, a y_scale of 0,
 *    and a y_scale on a convolution whose result is f16. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "exectest.h"
#include "int8_scales.h"
#include "pipeline.h"

enum { BATCH = 4, CLASSES = 10 };

/* Every layer of resnet20 but the stem at step 0.05 (activations of a
 * random network on random images are O(1): +-6.35 holds them). */
static const char *LAYERS[] = {"layer1.0.conv1", "layer1.0.conv2", "layer1.1.conv1",        "layer1.1.conv2",
                               "layer1.2.conv1", "layer1.2.conv2", "layer2.0.conv1",        "layer2.0.conv2",
                               "layer2.1.conv1", "layer2.1.conv2", "layer2.2.conv1",        "layer2.2.conv2",
                               "layer3.0.conv1", "layer3.0.conv2", "layer3.1.conv1",        "layer3.1.conv2",
                               "layer3.2.conv1", "layer3.2.conv2", "layer2.0.downsample.0", "layer3.0.downsample.0"};
enum { NLAYERS = sizeof LAYERS / sizeof LAYERS[0] };

static IrGraph *compile(Arena *a, const char *root, IrDtype precision, int requant, const Int8Scales *scales) {
  IrGraph *g = exectest_model(a, root, "models/resnet20.net");
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d,
                .out = stdout,
                .inference = 1,
                .precision = precision,
                .precision_set = 1,
                .batch = BATCH,
                .int8_layers = "all",
                .int8_scales = scales,
                .disabled = requant ? 0 : pipeline_bit("requant")};
  if (!g || pipeline_run(&g, &cx)) return NULL;
  return g;
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

/* The logits of g on the seeded image and weights. */
static int logits(const IrGraph *g, float *out) {
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
  if (!rc) memcpy(out, rt_cpu_data(x, g->output[0]), sizeof(float) * BATCH * CLASSES);
  rt_cpu_free(x);
  return rc;
}

static int argmax(const float *v) {
  int k = 0;
  for (int i = 1; i < CLASSES; i++) k = v[i] > v[k] ? i : k;
  return k;
}

static void compare(const char *root, const Int8Scales *scales, IrDtype precision) {
  Arena aa, ab;
  arena_init(&aa);
  arena_init(&ab);
  IrGraph *fused = compile(&aa, root, precision, 1, scales), *plain = compile(&ab, root, precision, 0, scales);
  CHECK(fused && plain, "resnet20 int8 compiles with and without requant (%s)", ir_dtype_name(precision));
  if (fused && plain) {
    int convs, casts, convs0, casts0;
    count_requant(fused, &convs, &casts);
    count_requant(plain, &convs0, &casts0);
    CHECK(convs == 9 && casts == 0, "%s: 9 requantized convolutions (got %d), no cast of one (got %d)",
          ir_dtype_name(precision), convs, casts);
    CHECK(convs0 == 0, "without the pass none (got %d)", convs0);
    CHECK(plain->nnode - fused->nnode == 9, "nine casts fewer (%d nodes against %d)", fused->nnode, plain->nnode);
    float a[BATCH * CLASSES], b[BATCH * CLASSES];
    if (logits(fused, a) == 0 && logits(plain, b) == 0) {
      int same = !memcmp(a, b, sizeof a), agree = 0;
      for (int i = 0; i < BATCH; i++) agree += argmax(a + i * CLASSES) == argmax(b + i * CLASSES);
      double e = exectest_compare("logits", a, b, BATCH * CLASSES, precision == IR_DT_F32 ? 0 : 5e-2);
      printf("%s: requantized logits %s the plain graph's (max difference %.3g), %d of %d predictions agree\n",
             ir_dtype_name(precision), same ? "equal" : "differ from", e, agree, BATCH);
      if (precision == IR_DT_F32) CHECK(same, "f32: the logits agree bit for bit");
      CHECK(e <= 5e-2 && agree == BATCH, "%s: the logits agree (%.3g), the predictions too", ir_dtype_name(precision),
            e);
    } else {
      CHECK(0, "both graphs run");
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
    IrGraph *g = compile(&a, root, IR_DT_F16, 1, scales);
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
    char buf[8192] = "";
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    Diag d;
    diag_init(&d, f);
    int bad = ir_verify(g, &d, "requant");
    fclose(f);
    CHECK(bad && strstr(buf, BAD[k].msg), "%s: refused with \"%s\" (got: %s)", BAD[k].what, BAD[k].msg, buf);
    arena_free(&a);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) return check_skip("usage: test_requant SOURCE_DIR");
  double steps[NLAYERS];
  for (int i = 0; i < NLAYERS; i++) steps[i] = 0.05;
  Int8Scales scales = {.layer = LAYERS, .scale = steps, .n = NLAYERS};
  compare(argv[1], &scales, IR_DT_F32);
  compare(argv[1], &scales, IR_DT_F16);
  refusals(argv[1], &scales);
  return check_report();
}
