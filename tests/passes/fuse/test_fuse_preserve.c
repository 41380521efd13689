/* test_fuse_preserve.c - the fuse pass does not change what a graph computes.
 *
 *   test_fuse_preserve TEST_DIR MODELS_DIR
 *
 * Each net (conv_bn_relu, residual, unfused, models/smallcnn, models/resnet20)
 * is compiled twice, with and without the fuse pass (the passes after it off
 * in both), and both graphs run on the CPU executor from the same
 * seeded values, matched by name (inputs, parameters, state).  Training: two
 * SGD steps (lr 0.1, loss scale 1); the loss and logits of each step and
 * every parameter and state value after them must agree.  Inference
 * (--inference) and the forward graph (-fno-autodiff): the outputs agree.
 * Then the executor's fused ops in NHWC: hand-written NHWC (and NCHW) graphs
 * holding every pattern, run before and after pass_fuse.  The fused graphs
 * must really be fused: every fused op kind shows up somewhere. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"
#include "exectest.h"

enum { BATCH = 4, STEPS = 2 };
static const double TOL = 1e-4;

typedef enum Mode { TRAIN, INFER, FORWARD } Mode;
static const char *const MODE_NAME[] = {"training", "inference", "forward"};

static int fused_seen[IR_OP_COUNT];
static int dgrad_sum_seen; /* conv2d_bwd_data_relu nodes with a fourth input */
static int residual_seen;  /* conv2d_bn[_train] nodes with a residual input */

static IrGraph *compile(Arena *a, const char *path, Mode mode, int fuse) {
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .out = stdout, .inference = mode == INFER};
  cx.disabled = pipeline_mask_after("fuse"); /* later passes rewrite what this test compares */
  if (!fuse) cx.disabled |= pipeline_bit("fuse");
  if (mode == FORWARD) cx.disabled |= pipeline_bit("autodiff");
  return compile_file(a, &d, path, &cx);
}

static uint64_t name_seed(const char *s) {
  uint64_t h = 1469598103934665603u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h | 1;
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

/* Every input, parameter and state value from a generator seeded by its
 * name, so two graphs with the same names get the same numbers. */
static void fill(RtCpu *x, const IrGraph *g, int classes) {
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT) continue;
    uint64_t s = name_seed(val->name);
    int64_t n = rt_cpu_numel(x, v);
    if (rt_cpu_is_int(x, v)) {
      int64_t *lab = rt_cpu_data(x, v);
      for (int64_t i = 0; i < n; i++) lab[i] = (i * 7 + 3) % (classes > 0 ? classes : 1);
      continue;
    }
    float lo = -1, hi = 1;
    if (!strcmp(val->name, "lr"))
      lo = hi = 0.1f;
    else if (!strcmp(val->name, "loss_scale"))
      lo = hi = 1;
    else if (ends_with(val->name, ".running_var"))
      lo = 0.5f, hi = 1.5f;
    else if (val->type.rank == 4 && val->kind != IR_VAL_INPUT)
      hi = (float)(1 / sqrt((double)n / (double)val->type.dim[0])), lo = -hi;
    else if (val->kind != IR_VAL_INPUT)
      lo = -0.5f, hi = 0.5f;
    float *p = exectest_fill(x, v, &s, lo, hi);
    if (lo == hi)
      for (int64_t i = 0; i < n; i++) p[i] = lo;
  }
}

static int count_fused(const IrGraph *g) {
  int n = 0;
  for (int i = 0; i < g->nnode; i++) {
    IrOp op = g->node[i].op;
    int fused = op == IR_OP_CONV2D_BN_TRAIN || op == IR_OP_CONV2D_BN || op == IR_OP_ADD_RELU ||
                op == IR_OP_BATCHNORM_RELU_BWD || op == IR_OP_CONV2D_BWD_DATA_RELU || op == IR_OP_SUM_RELU_BWD ||
                op == IR_OP_CONV2D_BWD_DATA_BN_RELU || op == IR_OP_MAXPOOL_BN_RELU_BWD;
    n += fused;
    if (fused) fused_seen[op]++;
    residual_seen += (op == IR_OP_CONV2D_BN_TRAIN || op == IR_OP_CONV2D_BN) && g->node[i].nin == 7;
    dgrad_sum_seen += op == IR_OP_CONV2D_BWD_DATA_RELU && ir_conv_residual(g, &g->node[i]) >= 0;
  }
  return n;
}

static void compare_outputs(const char *what, RtCpu *xf, const IrGraph *gf, RtCpu *xp, const IrGraph *gp) {
  CHECK(gf->noutput == gp->noutput, "%s: %d outputs fused, %d plain", what, gf->noutput, gp->noutput);
  for (int k = 0; k < gf->noutput && k < gp->noutput; k++) {
    int64_t n = rt_cpu_numel(xf, gf->output[k]);
    CHECK(n == rt_cpu_numel(xp, gp->output[k]), "%s: output %d sizes differ", what, k);
    double e = exectest_compare(what, rt_cpu_data(xf, gf->output[k]), rt_cpu_data(xp, gp->output[k]), n, TOL);
    CHECK(e <= TOL, "%s: output %d differs by %.3g", what, k, e);
  }
}

/* Every parameter and state value of gf against the one of that name in gp. */
static void compare_named(const char *what, RtCpu *xf, const IrGraph *gf, RtCpu *xp) {
  int compared = 0;
  for (int v = 0; v < gf->nval; v++) {
    const IrValue *val = &gf->val[v];
    if (val->kind != IR_VAL_PARAM && val->kind != IR_VAL_STATE) continue;
    int w = rt_cpu_find(xp, val->name);
    CHECK(w >= 0 && rt_cpu_numel(xp, w) == rt_cpu_numel(xf, v), "%s: %s missing or resized without fusion", what,
          val->name);
    if (w < 0 || rt_cpu_numel(xp, w) != rt_cpu_numel(xf, v)) continue;
    char label[4400];
    snprintf(label, sizeof label, "%s: %s", what, val->name);
    double e = exectest_compare(label, rt_cpu_data(xf, v), rt_cpu_data(xp, w), rt_cpu_numel(xf, v), TOL);
    CHECK(e <= TOL, "%s differs by %.3g", label, e);
    compared++;
  }
  CHECK(compared > 0, "%s: no parameters compared", what);
}

static void check_net(const char *path, Mode mode) {
  Arena a;
  arena_init(&a);
  IrGraph *gf = compile(&a, path, mode, 1), *gp = compile(&a, path, mode, 0);
  char what[4200];
  snprintf(what, sizeof what, "%s (%s)", path, MODE_NAME[mode]);
  CHECK(gf && gp, "%s compiles", what);
  RtCpu *xf = gf ? exectest_new(gf, BATCH) : NULL, *xp = gp ? exectest_new(gp, BATCH) : NULL;
  CHECK(xf && xp, "%s: executors", what);
  if (xf && xp) {
    int fused = count_fused(gf);
    CHECK(fused > 0 && gf->nnode < gp->nnode, "%s: %d fused nodes, %d nodes fused, %d plain", what, fused, gf->nnode,
          gp->nnode);
    const IrValue *logits = &gf->val[gf->output[mode == INFER ? 0 : 1]];
    int classes = (int)logits->type.dim[1];
    fill(xf, gf, classes);
    fill(xp, gp, classes);
    for (int step = 0; step < (mode == TRAIN ? STEPS : 1); step++) {
      if (exectest_run(xf) || exectest_run(xp)) {
        CHECK(0, "%s: step %d runs", what, step);
        break;
      }
      char label[4300];
      snprintf(label, sizeof label, "%s step %d", what, step);
      compare_outputs(label, xf, gf, xp, gp);
    }
    compare_named(what, xf, gf, xp);
    printf("%s: %d nodes -> %d (%d fused)\n", what, gp->nnode, gf->nnode, fused);
  }
  rt_cpu_free(xf);
  rt_cpu_free(xp);
  arena_free(&a);
}

/* --- hand-written graphs in either layout, through pass_fuse directly ------
 * $X3 $A4: activations with 3 / 4 channels (5x5), $W34 $W44G: filters
 * 4x3x3x3 and 4x2x3x3 (groups 2), in the layout substituted below. */
static const char *const TRAIN_TEXT =
    "graph hand {\n"
    "  input %0 x : $X3\n"
    "  input %1 dy : $A4\n"
    "  param @w1 : $W34\n"
    "  param @g1 : f32[4]\n"
    "  param @b1 : f32[4]\n"
    "  state @m1 : f32[4]\n"
    "  state @v1.running_var : f32[4]\n"
    "  param @w2 : $W44G\n"
    "  param @g2 : f32[4]\n"
    "  param @b2 : f32[4]\n"
    "  state @m2 : f32[4]\n"
    "  state @v2.running_var : f32[4]\n"
    "  %2 = conv2d(%0, @w1) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : $A4\n"
    "  %3, %4, %5 = batchnorm_train(%2, @g1, @b1, @m1, @v1.running_var) {eps=1e-05 momentum=0.1} : $A4, f32[4], "
    "f32[4]\n"
    "  %6 = relu(%3) : $A4\n"
    "  %7 = conv2d(%6, @w2) {k=3x3 s=1x1 p=2x2 d=2x2 groups=2} : $A4\n"
    "  %8, %9, %10 = batchnorm_train(%7, @g2, @b2, @m2, @v2.running_var) {eps=0.001 momentum=0.2} : $A4, f32[4], "
    "f32[4]\n"
    "  %11 = add(%8, %6) : $A4\n"
    "  %12 = relu(%11) : $A4\n"
    "  %13 = relu_bwd(%1, %12) : $A4\n"
    "  %14, %15, %16 = batchnorm_bwd(%13, %7, @g2, %9, %10) : $A4, f32[4], f32[4]\n"
    "  %17 = conv2d_bwd_data(%14, @w2) {k=3x3 s=1x1 p=2x2 d=2x2 groups=2 in_hw=5x5} : $A4\n"
    "  %18 = relu_bwd(%17, %6) : $A4\n"
    "  %19, %20, %21 = batchnorm_bwd(%18, %2, @g1, %4, %5) : $A4, f32[4], f32[4]\n"
    "  %22 = conv2d_bwd_data(%19, @w1) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1 in_hw=5x5} : $X3\n"
    "  %23 = relu_bwd(%22, %0) : $X3\n"
    "  %24 = add(%23, %0) : $X3\n"
    "  %25 = relu(%24) : $X3\n"
    "  output %12, %23, %15, %16, %20, %21, %19, %9, %10, %25\n"
    "}\n";

static const char *const INFER_TEXT =
    "graph hand {\n"
    "  input %0 x : $X3\n"
    "  param @w1 : $W34\n"
    "  param @g1 : f32[4]\n"
    "  param @b1 : f32[4]\n"
    "  state @m1 : f32[4]\n"
    "  state @v1.running_var : f32[4]\n"
    "  param @w2 : $W44G\n"
    "  param @g2 : f32[4]\n"
    "  param @b2 : f32[4]\n"
    "  state @m2 : f32[4]\n"
    "  state @v2.running_var : f32[4]\n"
    "  %2 = conv2d(%0, @w1) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : $A4\n"
    "  %3 = batchnorm(%2, @g1, @b1, @m1, @v1.running_var) {eps=1e-05 momentum=0.1} : $A4\n"
    "  %4 = relu(%3) : $A4\n"
    "  %5 = conv2d(%4, @w2) {k=3x3 s=1x1 p=2x2 d=2x2 groups=2} : $A4\n"
    "  %6 = batchnorm(%5, @g2, @b2, @m2, @v2.running_var) {eps=0.001 momentum=0.2} : $A4\n"
    "  output %6\n"
    "}\n";

/* text with each $KEY replaced; malloc'd. */
static char *substitute(const char *text, int nhwc) {
  static const char *const keys[][3] = {
      {"$X3", "f32[N,3,5,5] NCHW", "f32[N,5,5,3] NHWC"},
      {"$A4", "f32[N,4,5,5] NCHW", "f32[N,5,5,4] NHWC"},
      {"$W34", "f32[4,3,3,3] KCRS", "f32[4,3,3,3] KRSC"},
      {"$W44G", "f32[4,2,3,3] KCRS", "f32[4,3,3,2] KRSC"},
  };
  size_t cap = strlen(text) * 3 + 1, len = 0;
  char *out = malloc(cap);
  if (!out) return NULL;
  for (const char *p = text; *p;) {
    size_t k = 0, nk = sizeof keys / sizeof keys[0];
    for (; k < nk; k++) {
      size_t kl = strlen(keys[k][0]);
      if (strncmp(p, keys[k][0], kl) == 0) break;
    }
    if (k < nk) {
      len += (size_t)sprintf(out + len, "%s", keys[k][nhwc ? 2 : 1]);
      p += strlen(keys[k][0]);
    } else {
      out[len++] = *p++;
    }
  }
  out[len] = 0;
  return out;
}

static void check_hand(const char *name, const char *text, int nhwc, int want_fused) {
  char *src = substitute(text, nhwc);
  Arena a;
  arena_init(&a);
  IrGraph *gp = src ? exectest_read(&a, src) : NULL;
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .out = stdout};
  IrGraph *gf = gp ? pass_fuse(ir_graph_clone(gp), &cx) : NULL;
  char what[128];
  snprintf(what, sizeof what, "%s graph in %s", name, nhwc ? "NHWC" : "NCHW");
  CHECK(gf && !ir_verify(gf, &d, "fuse"), "%s: fuses and verifies", what);
  RtCpu *xf = gf ? exectest_new(gf, BATCH) : NULL, *xp = gp ? exectest_new(gp, BATCH) : NULL;
  if (xf && xp) {
    int fused = count_fused(gf);
    CHECK(fused == want_fused, "%s: %d fused nodes, want %d", what, fused, want_fused);
    fill(xf, gf, 0);
    fill(xp, gp, 0);
    CHECK(!exectest_run(xf) && !exectest_run(xp), "%s runs", what);
    compare_outputs(what, xf, gf, xp, gp);
    compare_named(what, xf, gf, xp);
  }
  rt_cpu_free(xf);
  rt_cpu_free(xp);
  arena_free(&a);
  free(src);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_fuse_preserve TEST_DIR MODELS_DIR\n");
    return 2;
  }
  static const char *const nets[][2] = {{"0", "conv_bn_relu"}, {"0", "residual"}, {"0", "unfused"},
                                        {"0", "gradsum"},      {"1", "smallcnn"}, {"1", "resnet20"}};
  char path[4096];
  for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
    snprintf(path, sizeof path, "%s/%s.net", argv[nets[i][0][0] == '0' ? 1 : 2], nets[i][1]);
    for (int m = TRAIN; m <= FORWARD; m++) check_net(path, (Mode)m);
  }
  for (int nhwc = 0; nhwc < 2; nhwc++) {
    /* conv2d_bn_train, conv2d_bn_train with the residual %6 (taking the add and
     * its relu), batchnorm_relu_bwd, conv2d_bwd_data_relu, add_relu (of values no
     * batch norm made); relu_bwd(dy, relu(add(...))) -> batchnorm_bwd stays
     * apart (its mask is not the batch norm's own relu, so it cannot be
     * recomputed from z) */
    check_hand("training", TRAIN_TEXT, nhwc, 5);
    check_hand("inference", INFER_TEXT, nhwc, 2);
  }
  static const IrOp kinds[] = {IR_OP_CONV2D_BN_TRAIN,
                               IR_OP_CONV2D_BN,
                               IR_OP_ADD_RELU,
                               IR_OP_BATCHNORM_RELU_BWD,
                               IR_OP_CONV2D_BWD_DATA_RELU,
                               IR_OP_SUM_RELU_BWD,
                               IR_OP_CONV2D_BWD_DATA_BN_RELU,
                               IR_OP_MAXPOOL_BN_RELU_BWD};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
    CHECK(fused_seen[kinds[k]] > 0, "no %s was made and run", ir_op_info(kinds[k])->name);
  CHECK(residual_seen > 0, "no conv + batch norm with a residual was made and run");
  CHECK(dgrad_sum_seen > 0, "no data gradient with an addend was made and run");
  return check_report();
}
