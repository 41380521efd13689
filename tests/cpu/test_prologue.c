/* test_prologue.c - the prologue pass and conv2d_bn_stats on the CPU
 * executor.
 *
 * 1. rt_ref_bn_prologue and rt_ref_bn_scale_bias against direct loops.
 * 2. In f32, a hand-written chain conv2d_bn_stats -> conv2d_bn_stats (with a
 *    prologue) -> conv2d_bn_train (with a prologue, strided, padded) plus a
 *    weight gradient with a prologue, against the same chain of
 *    conv2d_bn_train {relu=1} reading the stored relu(bn(z)): outputs,
 *    statistics, running statistics and the weight gradient agree to f32
 *    rounding, and sb is gamma*invstd, beta - mean*scale.
 * 3. tests/passes/prologue/bottleneck.net, grouped.net (its grouped conv2
 *    the one conv2d_bn_stats) and the stem of
 *    tests/codegen/kernels/stem7.net (whose max pool's backward becomes
 *    batchnorm_relu_bwd_win) trained four steps in f16 with and without the
 *    pass (which must fire): losses and every parameter agree within f16
 *    tolerance.
 * 4. ResNet-50 in f16: 32 conv2d_bn_stats, 16 of them, 16 conv2d_bn_train and
 *    32 weight gradients reading through a prologue; in fp32 none; in both
 *    the stem's max pool is maxpool_bn_relu and its backward, with the
 *    batch norm's, one batchnorm_relu_bwd_win.
 * 5. conv2d_bn_stats's fifth result zc (an f32 z rounded to f16 or bf16):
 *    equal bit for bit to a cast of z, hand-written and in smallcnn's stem
 *    (the pass folds the cast: gone, z unread; one training step with and
 *    without the pass gives the same zc, z and loss bit for bit); the
 *    verifier refuses an f32, misshapen or second copy.
 * 6. Inference (pass_prologue_infer): stem7's batch norm + relu applied by
 *    its max pool (maxpool_bn_relu_infer, the cast after it folded in),
 *    in f16, bf16, f32 and INT8 (the i8 cast folded where its step is
 *    calibrated): the pooled result and the logits equal
 *    the unfused graph's bit for bit, gamma of both signs; ResNet-50's
 *    stem takes the same form. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "exectest.h"
#include "int8_scales.h"
#include "pipeline.h"
#include "rt_ref.h"

/* --- 1. the reference kernels ------------------------------------------- */

static void check_kernels(void) {
  uint64_t seed = 5;
  enum { N = 2, C = 3, H = 4, W = 5, COUNT = N * C * H * W };
  static float x[COUNT], y[COUNT], sb[2 * C], gamma[C], beta[C], mean[C], invstd[C];
  for (int i = 0; i < COUNT; i++) x[i] = exectest_rand(&seed, -2, 2);
  for (int c = 0; c < C; c++) {
    gamma[c] = exectest_rand(&seed, -1.5f, 1.5f), beta[c] = exectest_rand(&seed, -1, 1);
    mean[c] = exectest_rand(&seed, -1, 1), invstd[c] = exectest_rand(&seed, 0.5f, 3);
  }
  CHECK(rt_ref_bn_scale_bias(C, gamma, beta, mean, invstd, sb) == RT_REF_OK, "rt_ref_bn_scale_bias runs");
  for (int c = 0; c < C; c++) {
    double s = (double)gamma[c] * invstd[c];
    CHECK(fabs(sb[c] - s) <= 1e-6 * fabs(s) + 1e-7, "scale[%d] %g, want %g", c, sb[c], s);
    double b = beta[c] - mean[c] * s;
    CHECK(fabs(sb[C + c] - b) <= 1e-5, "bias[%d] %g, want %g", c, sb[C + c], b);
  }
  for (int layout = 0; layout < 2; layout++) {
    RtRefAct xs = {N, C, H, W, layout ? RT_REF_NHWC : RT_REF_NCHW};
    CHECK(rt_ref_bn_prologue(&xs, x, sb, y) == RT_REF_OK, "rt_ref_bn_prologue runs");
    int bad = 0, zeros = 0;
    for (int n = 0; n < N; n++)
      for (int c = 0; c < C; c++)
        for (int h = 0; h < H; h++)
          for (int w = 0; w < W; w++) {
            int i = layout ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
            double want = (double)x[i] * sb[c] + sb[C + c];
            want = want > 0 ? want : 0;
            zeros += want == 0;
            bad += fabs(y[i] - want) > 1e-6 * (1 + fabs(want));
          }
    CHECK(bad == 0, "prologue (%s): %d elements differ from max(0, x*scale + bias)", layout ? "NHWC" : "NCHW", bad);
    CHECK(zeros > 0 && zeros < COUNT, "the relu clips some elements and not all (%d zeros)", zeros);
  }
  RtRefAct bad_shape = {0, C, H, W, RT_REF_NHWC};
  CHECK(rt_ref_bn_prologue(&bad_shape, x, sb, y) == RT_REF_ESHAPE, "empty batch: ESHAPE");
  CHECK(rt_ref_bn_scale_bias(C, gamma, beta, mean, NULL, sb) == RT_REF_EARG, "missing invstd: EARG");
}

/* --- 2. f32 semantics against the stored-activation chain --------------- */

#define DECLS                                                                        \
  "  input %0 x : f32[N,6,6,8] NHWC\n"                                               \
  "  input %1 dy : f32[N,6,6,8] NHWC\n"                                              \
  "  param @w1 : f32[8,1,1,8] KRSC\n  param @g1 : f32[8]\n  param @b1 : f32[8]\n"    \
  "  state @rm1 : f32[8]\n  state @rv1 : f32[8]\n"                                   \
  "  param @w2 : f32[8,3,3,8] KRSC\n  param @g2 : f32[8]\n  param @b2 : f32[8]\n"    \
  "  state @rm2 : f32[8]\n  state @rv2 : f32[8]\n"                                   \
  "  param @w3 : f32[16,3,3,8] KRSC\n  param @g3 : f32[16]\n  param @b3 : f32[16]\n" \
  "  state @rm3 : f32[16]\n  state @rv3 : f32[16]\n"
#define BN1  "(%0, @w1, @g1, @b1, @rm1, @rv1"
#define BN2  "@w2, @g2, @b2, @rm2, @rv2"
#define BN3  "@w3, @g3, @b3, @rm3, @rv3"
#define K1   "{k=1x1 s=1x1 p=0x0 d=1x1 groups=1 eps=1e-05 momentum=0.1"
#define K2   "{k=3x3 s=1x1 p=1x1 d=1x1 groups=1 eps=1e-05 momentum=0.1"
#define K3   "{k=3x3 s=2x2 p=1x1 d=1x1 groups=1 eps=1e-05 momentum=0.1 relu=1}"
#define Z    "f32[N,6,6,8] NHWC"
#define V8   "f32[8], f32[8]"
#define OUT3 " : f32[N,3,3,16] NHWC, f32[N,3,3,16] NHWC, f32[16], f32[16]\n"

static const char *const PROLOGUE_IR =
    "graph pro {\n" DECLS "  %2, %3, %4, %5 = conv2d_bn_stats" BN1 ") " K1 "} : " Z ", " V8 ", f32[2,8]\n"
    "  %6, %7, %8, %9 = conv2d_bn_stats(%2, " BN2 ", %5) " K2 "} : " Z ", " V8 ", f32[2,8]\n"
    "  %10, %11, %12, %13 = conv2d_bn_train(%6, " BN3 ", %9) " K3 OUT3
    "  %14 = conv2d_bwd_weight(%1, %2, %5) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[8,3,3,8] KRSC\n"
    "  output %11, %14\n}\n";

static const char *const STORED_IR =
    "graph stored {\n" DECLS "  %2, %3, %4, %5 = conv2d_bn_train" BN1 ") " K1 " relu=1} : " Z ", " Z ", " V8 "\n"
    "  %6, %7, %8, %9 = conv2d_bn_train(%3, " BN2 ") " K2 " relu=1} : " Z ", " Z ", " V8 "\n"
    "  %10, %11, %12, %13 = conv2d_bn_train(%7, " BN3 ") " K3 OUT3
    "  %14 = conv2d_bwd_weight(%1, %3) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[8,3,3,8] KRSC\n"
    "  output %11, %14\n}\n";

/* Gives every named float value of b the contents of a's value of that name. */
static void copy_named(RtCpu *a, const IrGraph *ga, RtCpu *b) {
  for (int v = 0; v < ga->nval; v++) {
    if (!ga->val[v].name || rt_cpu_is_int(a, v)) continue;
    int w = rt_cpu_find(b, ga->val[v].name);
    if (w < 0 || rt_cpu_numel(b, w) != rt_cpu_numel(a, v)) {
      CHECK(0, "%s missing or differently sized in the second graph", ga->val[v].name);
      continue;
    }
    memcpy(rt_cpu_data(b, w), rt_cpu_data(a, v), sizeof(float) * (size_t)rt_cpu_numel(a, v));
  }
}

static void fill_values(RtCpu *x, const IrGraph *g, uint64_t *seed) {
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT || rt_cpu_is_int(x, v)) continue;
    const char *n = val->name;
    if (val->kind == IR_VAL_PARAM && val->type.rank >= 2) {
      float r = 1.0f / sqrtf((float)(rt_cpu_numel(x, v) / val->type.dim[0]));
      exectest_fill(x, v, seed, -r, r);
    } else if (strstr(n, "running_var") || (n[0] == 'r' && n[1] == 'v')) {
      exectest_fill(x, v, seed, 0.5f, 1.5f);
    } else if (strstr(n, "bn") && strstr(n, ".weight")) {
      exectest_fill(x, v, seed, 0.8f, 1.2f);
    } else if (n[0] == 'g' && n[1] >= '0' && n[1] <= '9') {
      exectest_fill(x, v, seed, 0.5f, 1.5f);
    } else if (val->kind != IR_VAL_INPUT || val->type.rank > 0) {
      exectest_fill(x, v, seed, -0.5f, 0.5f);
    }
  }
}

/* Result k of node i. */
static float *res(ExectestCase *c, int i, int k) { return rt_cpu_data(c->x, c->g->node[i].out[k]); }

static void check_f32_semantics(void) {
  enum { BATCH = 3 };
  ExectestCase p = {0}, s = {0};
  int ok = exectest_open(&p, PROLOGUE_IR, BATCH) == 0 && exectest_open(&s, STORED_IR, BATCH) == 0;
  CHECK(ok, "both hand-written graphs read, verify and get executors");
  if (!ok) goto done;
  uint64_t seed = 11;
  fill_values(p.x, p.g, &seed);
  copy_named(p.x, p.g, s.x);
  CHECK(exectest_run(p.x) == 0 && exectest_run(s.x) == 0, "both graphs run");
  const double TOL = 2e-5;
  double worst = 0;
  int64_t ny = rt_cpu_numel(p.x, p.g->output[0]), nz = rt_cpu_numel(p.x, p.g->node[1].out[0]);
  worst = fmax(worst, exectest_compare("y3", exectest_out(&p, 0), exectest_out(&s, 0), ny, TOL));
  worst = fmax(worst, exectest_compare("dw2", exectest_out(&p, 1), exectest_out(&s, 1), 8 * 9 * 8, TOL));
  worst = fmax(worst, exectest_compare("z2", res(&p, 1, 0), res(&s, 1, 0), nz, TOL));
  /* statistics: outputs 1, 2 of conv2d_bn_stats, 2, 3 of conv2d_bn_train */
  worst = fmax(worst, exectest_compare("mean1", res(&p, 0, 1), res(&s, 0, 2), 8, TOL));
  worst = fmax(worst, exectest_compare("invstd1", res(&p, 0, 2), res(&s, 0, 3), 8, TOL));
  worst = fmax(worst, exectest_compare("mean2", res(&p, 1, 1), res(&s, 1, 2), 8, TOL));
  worst = fmax(worst, exectest_compare("invstd2", res(&p, 1, 2), res(&s, 1, 3), 8, TOL));
  static const char *const running[] = {"rm1", "rv1", "rm2", "rv2", "rm3", "rv3"};
  for (int i = 0; i < 6; i++) {
    int vp = rt_cpu_find(p.x, running[i]), vs = rt_cpu_find(s.x, running[i]);
    worst = fmax(worst,
                 exectest_compare(running[i], rt_cpu_data(p.x, vp), rt_cpu_data(s.x, vs), rt_cpu_numel(p.x, vp), TOL));
  }
  printf("f32 prologue chain vs stored activations: worst relative difference %.2e\n", worst);
  CHECK(worst <= TOL, "f32 prologue chain matches the stored-activation chain (%.2e)", worst);
  /* sb of the first stats node, against gamma, beta and its own statistics */
  const float *sb = res(&p, 0, 3), *g1 = exectest_f(p.x, "g1"), *b1 = exectest_f(p.x, "b1");
  const float *m1 = res(&p, 0, 1), *is1 = res(&p, 0, 2);
  for (int c = 0; c < 8; c++) {
    double scale = (double)g1[c] * is1[c];
    CHECK(fabs(sb[c] - scale) <= 1e-6 * fabs(scale), "sb scale[%d] %g, want %g", c, sb[c], scale);
    CHECK(fabs(sb[8 + c] - (b1[c] - m1[c] * scale)) <= 1e-5, "sb bias[%d] %g, want %g", c, sb[8 + c],
          b1[c] - m1[c] * scale);
  }
done:
  exectest_close(&p);
  exectest_close(&s);
}

/* --- 3. f16 training with and without the pass --------------------------- */

enum { TBATCH = 4, STEPS = 4 };

static IrGraph *compile_model(Arena *a, const char *root, const char *model, int prologue) {
  return exectest_compile(
      a, root, model,
      (PassCtx){.precision = IR_DT_F16, .precision_set = 1, .disabled = prologue ? 0 : pipeline_bit("prologue")});
}

static int count_op(const IrGraph *g, IrOp op) {
  int k = 0;
  for (int i = 0; i < g->nnode; i++) k += g->node[i].op == op;
  return k;
}

/* model trained with and without the pass, which makes `stats`
 * conv2d_bn_stats and `bn_win` batchnorm_relu_bwd_win. */
static void check_training(const char *root, const char *model, int stats, int bn_win) {
  Arena aa, ab;
  arena_init(&aa);
  arena_init(&ab);
  IrGraph *gp = compile_model(&aa, root, model, 1), *gs = compile_model(&ab, root, model, 0);
  CHECK(gp && gs, "%s compiles with and without the prologue pass", model);
  RtCpu *xp = gp ? exectest_new(gp, TBATCH) : NULL, *xs = gs ? exectest_new(gs, TBATCH) : NULL;
  if (!xp || !xs) goto done;
  CHECK(count_op(gp, IR_OP_CONV2D_BN_STATS) == stats && count_op(gs, IR_OP_CONV2D_BN_STATS) == 0,
        "%s: the pass made %d conv2d_bn_stats (%d), none without it (%d)", model, stats,
        count_op(gp, IR_OP_CONV2D_BN_STATS), count_op(gs, IR_OP_CONV2D_BN_STATS));
  CHECK(count_op(gp, IR_OP_BATCHNORM_RELU_BWD_WIN) == bn_win && count_op(gs, IR_OP_BATCHNORM_RELU_BWD_WIN) == 0,
        "%s: the pass made %d batchnorm_relu_bwd_win (%d)", model, bn_win, count_op(gp, IR_OP_BATCHNORM_RELU_BWD_WIN));
  uint64_t seed = 29;
  fill_values(xp, gp, &seed);
  exectest_fill(xp, exectest_val(xp, "image"), &seed, 0, 1);
  int64_t *lp = rt_cpu_data(xp, exectest_val(xp, "label"));
  for (int i = 0; i < TBATCH; i++) lp[i] = i % 3;
  *exectest_f(xp, "lr") = 0.1f;
  *exectest_f(xp, "loss_scale") = 256;
  copy_named(xp, gp, xs);
  memcpy(rt_cpu_data(xs, exectest_val(xs, "label")), lp, sizeof(int64_t) * TBATCH);
  float lossp[STEPS], losss[STEPS];
  for (int s = 0; s < STEPS; s++) {
    CHECK(exectest_run(xp) == 0 && exectest_run(xs) == 0, "step %d runs", s);
    lossp[s] = *(float *)rt_cpu_data(xp, gp->output[0]);
    losss[s] = *(float *)rt_cpu_data(xs, gs->output[0]);
    printf("%s step %d: loss %.5f with the prologue, %.5f without\n", model, s, lossp[s], losss[s]);
    CHECK(isfinite(lossp[s]) && fabs(lossp[s] - losss[s]) <= 1e-2 * fmax(1, fabs(losss[s])), "step %d loss %g vs %g", s,
          lossp[s], losss[s]);
  }
  CHECK(lossp[STEPS - 1] < lossp[0], "training lowers the loss (%g -> %g)", lossp[0], lossp[STEPS - 1]);
  int params = 0;
  double worst = 0;
  for (int v = 0; v < gp->nval; v++) {
    const IrValue *val = &gp->val[v];
    if (val->kind != IR_VAL_PARAM && val->kind != IR_VAL_STATE) continue;
    int w = rt_cpu_find(xs, val->name);
    worst = fmax(worst, exectest_compare(val->name, rt_cpu_data(xp, v), rt_cpu_data(xs, w), rt_cpu_numel(xp, v), 1e-2));
    params++;
  }
  printf("%s: %d parameters and state after %d f16 steps: worst relative difference %.2e\n", model, params, STEPS,
         worst);
  CHECK(params > 10 && worst <= 1e-2, "%s: every parameter agrees within f16 tolerance (%.2e)", model, worst);
done:
  rt_cpu_free(xp);
  rt_cpu_free(xs);
  arena_free(&aa);
  arena_free(&ab);
}

/* --- 4. ResNet-50's counts ---------------------------------------------- */

static void check_resnet50(const char *root, IrDtype precision) {
  Arena a;
  arena_init(&a);
  IrGraph *g = exectest_compile(&a, root, "models/resnet50.net", (PassCtx){.precision = precision, .precision_set = 1});
  CHECK(g != NULL, "resnet50 compiles (%s)", ir_dtype_name(precision));
  if (g) {
    int stats = 0, stats_pro = 0, train_pro = 0, wgrad_pro = 0, pool = 0, stem = 0, pool_win = 0, pool_bn_bwd = 0,
        bn_win = 0;
    for (int i = 0; i < g->nnode; i++) {
      const IrNode *n = &g->node[i];
      int pro = ir_conv_prologue(g, n) >= 0;
      pool += n->op == IR_OP_MAXPOOL_BN_RELU;
      pool_win += n->op == IR_OP_MAXPOOL_BWD_WIN && g->val[n->in[1]].def >= 0 &&
                  g->node[g->val[n->in[1]].def].op == IR_OP_MAXPOOL_BN_RELU;
      pool_bn_bwd += n->op == IR_OP_MAXPOOL_BN_RELU_BWD;
      bn_win += n->op == IR_OP_BATCHNORM_RELU_BWD_WIN && g->val[n->in[1]].def >= 0 &&
                g->node[g->val[n->in[1]].def].op == IR_OP_MAXPOOL_BN_RELU;
      stem += n->op == IR_OP_CONV2D_BN_STATS && n->name && strcmp(n->name, "conv1") == 0;
      stats += n->op == IR_OP_CONV2D_BN_STATS;
      stats_pro += n->op == IR_OP_CONV2D_BN_STATS && pro;
      train_pro += n->op == IR_OP_CONV2D_BN_TRAIN && pro;
      wgrad_pro += n->op == IR_OP_CONV2D_BWD_WEIGHT && pro;
    }
    int on = precision != IR_DT_F32;
    printf("resnet50 %s: %d conv2d_bn_stats (%d with a prologue), %d conv2d_bn_train and %d wgrads with a prologue, "
           "%d maxpool_bn_relu, %d maxpool_bwd_win, %d batchnorm_relu_bwd_win\n",
           ir_dtype_name(precision), stats, stats_pro, train_pro, wgrad_pro, pool, pool_win, bn_win);
    CHECK(stats == 32 * on + 1 && stats_pro == 16 * on && train_pro == 16 * on && wgrad_pro == 32 * on,
          "resnet50 %s: conv1, conv2 of 16 bottlenecks made conv2d_bn_stats; conv2, conv3 and their wgrads "
          "read through a prologue",
          ir_dtype_name(precision));
    /* the stem in any precision: its max pool recomputes the batch norm + relu from z */
    CHECK(stem == 1 && pool == 1, "resnet50 %s: the stem is conv2d_bn_stats and its max pool maxpool_bn_relu",
          ir_dtype_name(precision));
    /* ... whose backward reads the forward's winners, gathered into the batch norm's backward */
    CHECK(bn_win == 1 && pool_win == 0 && pool_bn_bwd == 0,
          "resnet50 %s: the max pool's and batch norm's backward are one batchnorm_relu_bwd_win of "
          "maxpool_bn_relu's winners",
          ir_dtype_name(precision));
  }
  arena_free(&a);
}

/* --- 5. the f32 stem's z copy folded into conv2d_bn_stats --------------- */

/* conv2d_bn_stats writing zc (%6) of type zc, or (cast_dt set) writing z
 * for a cast to cast_dt to make %6 of that type. */
#define ZC_STATS "  %2, %3, %4, %5"
#define ZC_CALL  " = conv2d_bn_stats" BN1 ") " K1 "} : " Z ", " V8 ", f32[2,8]"
static void zc_text(char *buf, size_t len, const char *zc, const char *cast_dt) {
  if (cast_dt)
    snprintf(buf, len, "graph zc {\n%s%s%s\n  %%6 = cast(%%2) {to=%s} : %s\n  output %%6\n}\n", DECLS, ZC_STATS,
             ZC_CALL, cast_dt, zc);
  else
    snprintf(buf, len, "graph zc {\n%s%s, %%6%s, %s\n  output %%6\n}\n", DECLS, ZC_STATS, ZC_CALL, zc);
}

static void check_zc_kernel(IrDtype dt) {
  enum { BATCH = 3 };
  const char *dn = ir_dtype_name(dt);
  char zc[64], folded[4096], cast[4096];
  snprintf(zc, sizeof zc, "%s[N,6,6,8] NHWC", dn);
  zc_text(folded, sizeof folded, zc, NULL);
  zc_text(cast, sizeof cast, zc, dn);
  ExectestCase f = {0}, c = {0};
  int ok = exectest_open(&f, folded, BATCH) == 0 && exectest_open(&c, cast, BATCH) == 0;
  CHECK(ok, "%s: conv2d_bn_stats with zc and with a cast read, verify and get executors", dn);
  if (!ok) goto done;
  uint64_t seed = 17;
  fill_values(f.x, f.g, &seed);
  copy_named(f.x, f.g, c.x);
  CHECK(exectest_run(f.x) == 0 && exectest_run(c.x) == 0, "%s: both graphs run", dn);
  int64_t n = rt_cpu_numel(f.x, f.g->output[0]);
  const float *got = exectest_out(&f, 0), *want = exectest_out(&c, 0), *z = res(&f, 0, 0);
  int same = memcmp(got, want, sizeof(float) * (size_t)n) == 0, rounded = 0;
  for (int64_t i = 0; i < n; i++) rounded += got[i] != z[i];
  printf("zc %s: %lld elements, %d differ from the f32 z\n", dn, (long long)n, rounded);
  CHECK(same, "%s: zc equals the cast of z bit for bit", dn);
  CHECK(rounded > n / 2, "%s: zc is z rounded (%d of %lld elements differ from z)", dn, rounded, (long long)n);
  CHECK(memcmp(z, res(&c, 0, 0), sizeof(float) * (size_t)n) == 0, "%s: z is the same with zc", dn);
done:
  exectest_close(&f);
  exectest_close(&c);
}

/* The verifier's rules for zc: f16 or bf16, z's shape and layout, and at
 * most one (4 or 5 results). */
static void check_zc_verify(void) {
  static const char *const BAD[] = {"f32[N,6,6,8] NHWC", "f16[N,6,6,4] NHWC", "f16[N,6,8,6] NCHW",
                                    "f16[N,6,6,8] NHWC, f16[N,6,6,8] NHWC"};
  for (int i = 0; i < (int)(sizeof BAD / sizeof BAD[0]); i++) {
    char text[4096];
    zc_text(text, sizeof text, BAD[i], NULL);
    if (i == 3) { /* a sixth result */
      char *eq = strstr(text, " = conv2d_bn_stats");
      if (eq) {
        memmove(eq + 5, eq, strlen(eq) + 1);
        memcpy(eq, ", %99", 5);
      }
    }
    Arena a;
    arena_init(&a);
    printf("expected error %d:\n", i);
    CHECK(exectest_read(&a, text) == NULL, "conv2d_bn_stats with zc %s verified", BAD[i]);
    arena_free(&a);
  }
}

/* The node named name, or NULL. */
static const IrNode *node_named(const IrGraph *g, const char *name) {
  for (int i = 0; i < g->nnode; i++)
    if (g->node[i].name && strcmp(g->node[i].name, name) == 0) return &g->node[i];
  return NULL;
}

static IrGraph *compile_smallcnn(Arena *a, const char *root, IrDtype precision, int prologue) {
  return exectest_compile(
      a, root, "models/smallcnn.net",
      (PassCtx){.precision = precision, .precision_set = 1, .disabled = prologue ? 0 : pipeline_bit("prologue")});
}

/* smallcnn's f32 stem: with the pass, conv1's cast of z is gone and conv1
 * writes zc; one training step with and without the pass gives zc and the
 * cast's result, z and the loss bit for bit. */
static void check_zc_smallcnn(const char *root, IrDtype precision) {
  const char *dn = ir_dtype_name(precision);
  char cast_name[32];
  snprintf(cast_name, sizeof cast_name, "conv1.z.%s", dn);
  Arena aa, ab;
  arena_init(&aa);
  arena_init(&ab);
  IrGraph *gp = compile_smallcnn(&aa, root, precision, 1), *gs = compile_smallcnn(&ab, root, precision, 0);
  CHECK(gp && gs, "smallcnn %s compiles with and without the prologue pass", dn);
  RtCpu *xp = NULL, *xs = NULL;
  if (!gp || !gs) goto done;
  const IrNode *stem = node_named(gp, "conv1"), *cast = node_named(gs, cast_name);
  int ok = stem && stem->op == IR_OP_CONV2D_BN_STATS && stem->nout == 5 &&
           gp->val[stem->out[4]].type.dtype == precision && !node_named(gp, cast_name);
  for (int i = 0; ok && i < gp->nnode; i++)
    for (int k = 0; k < gp->node[i].nin; k++) ok = ok && gp->node[i].in[k] != stem->out[0];
  CHECK(ok, "smallcnn %s: conv1 is conv2d_bn_stats writing zc, z has no reader, %s is gone", dn, cast_name);
  CHECK(cast && cast->op == IR_OP_CAST && node_named(gs, "conv1")->nout == 4,
        "smallcnn %s without the pass: conv1 and its cast %s as they were", dn, cast_name);
  if (!ok || !cast || !(xp = exectest_new(gp, TBATCH)) || !(xs = exectest_new(gs, TBATCH))) goto done;
  uint64_t seed = 31;
  fill_values(xp, gp, &seed);
  exectest_fill(xp, exectest_val(xp, "image"), &seed, 0, 1);
  int64_t *lp = rt_cpu_data(xp, exectest_val(xp, "label"));
  for (int i = 0; i < TBATCH; i++) lp[i] = (i * 7) % 10;
  *exectest_f(xp, "lr") = 0.1f;
  *exectest_f(xp, "loss_scale") = 256;
  copy_named(xp, gp, xs);
  memcpy(rt_cpu_data(xs, exectest_val(xs, "label")), lp, sizeof(int64_t) * TBATCH);
  CHECK(exectest_run(xp) == 0 && exectest_run(xs) == 0, "smallcnn %s: a step runs with and without the pass", dn);
  const IrNode *stem_s = node_named(gs, "conv1");
  int64_t n = rt_cpu_numel(xp, stem->out[4]);
  CHECK(n == rt_cpu_numel(xs, cast->out[0]) &&
            memcmp(rt_cpu_data(xp, stem->out[4]), rt_cpu_data(xs, cast->out[0]), sizeof(float) * (size_t)n) == 0,
        "smallcnn %s: zc equals the cast's result bit for bit", dn);
  CHECK(memcmp(rt_cpu_data(xp, stem->out[0]), rt_cpu_data(xs, stem_s->out[0]), sizeof(float) * (size_t)n) == 0,
        "smallcnn %s: z is the same bit for bit", dn);
  float lossp = *(float *)rt_cpu_data(xp, gp->output[0]), losss = *(float *)rt_cpu_data(xs, gs->output[0]);
  printf("smallcnn %s: loss %.7f with the pass, %.7f without\n", dn, lossp, losss);
  CHECK(isfinite(lossp) && lossp == losss, "smallcnn %s: the loss is the same bit for bit (%.9g vs %.9g)", dn, lossp,
        losss);
done:
  rt_cpu_free(xp);
  rt_cpu_free(xs);
  arena_free(&aa);
  arena_free(&ab);
}

/* --- 6. inference: the stem's batch norm applied by its max pool -------- */

static IrGraph *compile_infer(Arena *a, const char *root, const char *model, IrDtype precision, const char *int8,
                              const Int8Scales *scales, int prologue) {
  return exectest_compile(a, root, model,
                          (PassCtx){.inference = 1,
                                    .batch = TBATCH,
                                    .precision = precision,
                                    .precision_set = 1,
                                    .int8_layers = int8,
                                    .int8_scales = scales,
                                    .disabled = prologue ? 0 : pipeline_bit("prologue")});
}

/* The largest |a - b| over n elements, relative to the largest |b| (1 at least). */
static double worst_diff(const float *a, const float *b, int64_t n) {
  double d = 0, m = 1;
  for (int64_t i = 0; i < n; i++) {
    d = fmax(d, fabs((double)a[i] - b[i]));
    m = fmax(m, fabs((double)b[i]));
  }
  return d / m;
}

/* stem7's inference graph with and without the pass: with it conv1 is a
 * plain conv2d read by pool1, a maxpool_bn_relu_infer that folded the cast
 * after it (y_dtype; none in f32, and none when the next layer quantizes
 * by each batch's maximum: its i8 cast stays; with a calibrated step,
 * y_dtype=i8 and y_scale), with the batch norm's gamma of both signs (a
 * negative scale: the pool must not take its maximum before the affine).
 * An f32 stem (f32, and bf16 graphs) gives the pool's result and the
 * logits of the graph without the pass bit for bit.  An f16 graph's stem
 * is f16 (the precision policy's inference rule), so there is no cast to
 * fold but a calibrated i8 one, and the pool reads the convolution's
 * result rounded to f16 before its batch norm where the fused conv2d_bn
 * rounded after it: equal within f16's rounding (i8: within one step). */
static void check_infer_stem(const char *root, IrDtype precision, const char *int8, double step) {
  static const char *LAYERS[] = {"conv2"};
  double steps[] = {step};
  Int8Scales table = {.layer = LAYERS, .scale = steps, .n = 1}, *scales = step > 0 ? &table : NULL;
  const char *model = "tests/codegen/kernels/stem7.net";
  const char *dn = scales ? "int8 calibrated" : int8 ? "int8" : ir_dtype_name(precision);
  Arena aa, ab;
  arena_init(&aa);
  arena_init(&ab);
  IrGraph *gp = compile_infer(&aa, root, model, precision, int8, scales, 1),
          *gs = compile_infer(&ab, root, model, precision, int8, scales, 0);
  CHECK(gp && gs, "stem7 inference %s compiles with and without the prologue pass", dn);
  RtCpu *xp = NULL, *xs = NULL;
  if (!gp || !gs) goto done;
  const IrNode *conv = node_named(gp, "conv1"), *pool = node_named(gp, "pool1");
  const IrNode *conv_s = node_named(gs, "conv1"), *pool_s = node_named(gs, "pool1");
  int f16_stem = precision == IR_DT_F16;
  int folds = scales || (!int8 && precision != IR_DT_F32 && !f16_stem);
  IrDtype want = scales ? IR_DT_I8 : folds || f16_stem ? precision : IR_DT_F32;
  char cast_name[32];
  snprintf(cast_name, sizeof cast_name, "pool1.%s", int8 ? "i8" : ir_dtype_name(precision));
  const IrNode *cast_s = node_named(gs, cast_name);
  int ok = conv && conv->op == IR_OP_CONV2D && conv->nin == 2 && pool && pool->op == IR_OP_MAXPOOL_BN_RELU_INFER &&
           pool->in[0] == conv->out[0] && gp->val[pool->out[0]].type.dtype == want &&
           (ir_attr_find(pool, "y_dtype") != NULL) == folds &&
           (ir_attr_find(pool, "y_scale") != NULL) == (scales != NULL) &&
           (node_named(gp, cast_name) != NULL) == (int8 && !scales);
  CHECK(ok, "stem7 %s: conv1 is conv2d, pool1 maxpool_bn_relu_infer of it%s", dn,
        folds ? ", the cast folded in" : ", no cast folded");
  CHECK(conv_s && conv_s->op == IR_OP_CONV2D_BN && pool_s && pool_s->op == IR_OP_MAXPOOL &&
            (cast_s != NULL) == (precision != IR_DT_F32 && (!f16_stem || int8)),
        "stem7 %s without the pass: conv2d_bn, maxpool and its cast as they were", dn);
  CHECK(conv && gp->val[conv->out[0]].type.dtype == (f16_stem ? IR_DT_F16 : IR_DT_F32) &&
            gp->val[conv->in[0]].type.dtype == gp->val[conv->out[0]].type.dtype,
        "stem7 %s: the stem convolution computes in %s", dn, f16_stem ? "f16" : "f32");
  if (!ok || !(xp = exectest_new(gp, TBATCH)) || !(xs = exectest_new(gs, TBATCH))) goto done;
  uint64_t seed = 37;
  fill_values(xp, gp, &seed);
  exectest_fill(xp, exectest_val(xp, "bn1.weight"), &seed, -1, 1);
  exectest_fill(xp, exectest_val(xp, "image"), &seed, 0, 1);
  copy_named(xp, gp, xs);
  CHECK(exectest_run(xp) == 0 && exectest_run(xs) == 0, "stem7 %s: inference runs with and without the pass", dn);
  int yv = pool->out[0], ys = cast_s && (folds || !int8) ? cast_s->out[0] : pool_s->out[0];
  int64_t n = rt_cpu_numel(xp, yv), m = rt_cpu_numel(xp, gp->output[0]);
  const float *y = rt_cpu_data(xp, yv);
  int negative = 0, zero = 0;
  for (int64_t i = 0; i < n; i++) zero += y[i] == 0, negative += y[i] < 0;
  int same = n == rt_cpu_numel(xs, ys) && m == rt_cpu_numel(xs, gs->output[0]);
  double dy = same ? worst_diff(y, rt_cpu_data(xs, ys), n) : 1;
  double dl = same ? worst_diff(rt_cpu_data(xp, gp->output[0]), rt_cpu_data(xs, gs->output[0]), m) : 1;
  double tol_y = !f16_stem ? 0 : scales ? step : 2e-3, tol_l = !f16_stem ? 0 : 5e-3;
  if (f16_stem)
    printf("stem7 %s inference: pooled result within %.3g, logits within %.3g of the unfused\n", dn, dy, dl);
  CHECK(same && dy <= tol_y && negative == 0 && zero > 0 && zero < n,
        "stem7 %s: the pooled result equals the unfused one %s (%d zeros of %lld; worst difference %.3g)", dn,
        f16_stem ? "within f16's rounding" : "bit for bit", zero, (long long)n, dy);
  CHECK(same && dl <= tol_l, "stem7 %s: the logits equal %s (worst difference %.3g of the largest)", dn,
        f16_stem ? "within f16's rounding" : "bit for bit", dl);
done:
  rt_cpu_free(xp);
  rt_cpu_free(xs);
  arena_free(&aa);
  arena_free(&ab);
}

/* ResNet-50's inference graph: conv1 a plain conv2d, its max pool the one
 * maxpool_bn_relu_infer, writing f16 (the cast folded), no maxpool left. */
static void check_infer_resnet50(const char *root) {
  Arena a;
  arena_init(&a);
  IrGraph *g = compile_infer(&a, root, "models/resnet50.net", IR_DT_F16, NULL, NULL, 1);
  CHECK(g != NULL, "resnet50 inference compiles");
  if (g) {
    const IrNode *conv = node_named(g, "conv1"), *pool = node_named(g, "maxpool");
    CHECK(conv && conv->op == IR_OP_CONV2D && pool && pool->op == IR_OP_MAXPOOL_BN_RELU_INFER &&
              g->val[pool->out[0]].type.dtype == IR_DT_F16 && count_op(g, IR_OP_MAXPOOL_BN_RELU_INFER) == 1 &&
              count_op(g, IR_OP_MAXPOOL) == 0 && !node_named(g, "maxpool.f16"),
          "resnet50 inference: the stem is conv2d and maxpool_bn_relu_infer writing f16, no maxpool or cast left");
  }
  arena_free(&a);
}

int main(int argc, char **argv) {
  if (argc < 2) return check_skip("usage: exec_test_prologue SOURCE_DIR");
  check_kernels();
  check_f32_semantics();
  check_training(argv[1], "tests/passes/prologue/bottleneck.net", 2, 0);
  check_training(argv[1], "tests/passes/prologue/grouped.net", 1, 0);
  check_training(argv[1], "tests/codegen/kernels/stem7.net", 1, 1);
  check_resnet50(argv[1], IR_DT_F16);
  check_resnet50(argv[1], IR_DT_F32);
  check_zc_kernel(IR_DT_F16);
  check_zc_kernel(IR_DT_BF16);
  check_zc_verify();
  check_zc_smallcnn(argv[1], IR_DT_F16);
  check_zc_smallcnn(argv[1], IR_DT_BF16);
  check_infer_stem(argv[1], IR_DT_F16, NULL, 0);
  check_infer_stem(argv[1], IR_DT_BF16, NULL, 0);
  check_infer_stem(argv[1], IR_DT_F32, NULL, 0);
  check_infer_stem(argv[1], IR_DT_F16, "all", 0);
  check_infer_stem(argv[1], IR_DT_F16, "all", 0.02);
  check_infer_resnet50(argv[1]);
  return check_report();
}
