/* test_bn.c - batch normalization: the training forward against statistics
 * computed here in double, running statistics by hand (biased variance to
 * normalize, unbiased into the running average, as PyTorch), inference
 * forward, NCHW and NHWC agreeing, and the backward (dx, dgamma, dbeta)
 * against central differences of the training forward. */
#include "ref_test.h"

static void hand_case(void) {
  /* one channel, four values: mean 2.5, biased var 1.25, unbiased 5/3 */
  RtRefAct xs = {4, 1, 1, 1, RT_REF_NCHW};
  const float x[4] = {1, 2, 3, 4}, gamma[1] = {2}, beta[1] = {0.5f};
  float y[4], rm[1] = {0}, rv[1] = {1}, sm[1], si[1];
  CHECK(rt_ref_batchnorm_fwd_train(&xs, x, gamma, beta, y, rm, rv, 0.1f, 1e-5f, sm, si) == 0, "hand");
  CHECK_CLOSE(sm[0], 2.5, 1e-7, "save_mean");
  CHECK_CLOSE(si[0], 1 / sqrt(1.25 + 1e-5), 1e-6, "save_invstd");
  CHECK_CLOSE(rm[0], 0.25, 1e-7, "running_mean");
  CHECK_CLOSE(rv[0], 0.9 + 0.1 * 5.0 / 3.0, 1e-6, "running_var (unbiased)");
  for (int i = 0; i < 4; i++) CHECK_CLOSE(y[i], 2 * (x[i] - 2.5) / sqrt(1.25 + 1e-5) + 0.5, 1e-6, "hand y");
  float yi[4];
  CHECK(rt_ref_batchnorm_fwd_infer(&xs, x, gamma, beta, rm, rv, 1e-5f, yi) == 0, "infer");
  for (int i = 0; i < 4; i++) CHECK_CLOSE(yi[i], 2 * (x[i] - rm[0]) / sqrt(rv[0] + 1e-5) + 0.5, 1e-6, "infer y");
  RtRefAct one = {1, 1, 1, 1, RT_REF_NCHW};
  CHECK(rt_ref_batchnorm_fwd_train(&one, x, gamma, beta, y, rm, rv, 0.1f, 1e-5f, sm, si) == RT_REF_ESHAPE,
        "a single value has no unbiased variance");
}

/* A stand-in for another process of a synchronized batch norm: its sums
 * equal this one's (so every sum doubles, the count with them), or, with
 * user "alone", no other process at all. */
static int twin_sum(void *user, double *v, int n) {
  if (!strcmp((const char *)user, "alone")) return 0;
  for (int i = 0; i < n; i++) v[i] *= 2;
  return 0;
}

/* A synchronized batch norm needs two values per channel over every
 * process's batch together, not in each: one value here and one in the
 * twin normalize (mean and variance those of the pair: the same value
 * twice, so y = beta), and one value with no other process is refused. */
static void sync_count(void) {
  RtRefAct one = {1, 1, 1, 1, RT_REF_NCHW};
  const float x[1] = {3}, gamma[1] = {2}, beta[1] = {0.5f};
  float y[1], rm[1] = {0}, rv[1] = {1}, sm[1], si[1];
  RtRefSync twin = {twin_sum, "twin"}, alone = {twin_sum, "alone"};
  CHECK(rt_ref_batchnorm_fwd_train_sync(&one, &twin, x, gamma, beta, y, rm, rv, 0.1f, 1e-5f, sm, si) == 0,
        "one value a process, two in all");
  CHECK_CLOSE(sm[0], 3, 1e-7, "the pair's mean");
  CHECK_CLOSE(y[0], 0.5, 1e-6, "y of the mean is beta");
  CHECK_CLOSE(rv[0], 0.9, 1e-6, "running var: the pair's unbiased variance 0");
  CHECK(rt_ref_batchnorm_fwd_train_sync(&one, &alone, x, gamma, beta, y, rm, rv, 0.1f, 1e-5f, sm, si) == RT_REF_ESHAPE,
        "one value in all is refused");
  CHECK(rt_ref_batchnorm_stats_sync(&one, &alone, x, rm, rv, 0.1f, 1e-5f, sm, si) == RT_REF_ESHAPE,
        "statistics of one value in all are refused");
}

/* The fused relus of batch norm keep NaN as relu does: the prologue's
 * relu(x * scale + bias) and the backward's mask, in both layouts. */
static void nan_relu(RtRefLayout layout) {
  RtRefAct xs = {1, 2, 1, 2, layout};
  /* scale 1 and bias 0 in both channels: the layout moves no value */
  const float x[4] = {NAN, -1, NAN, 2}, sb[4] = {1, 1, 0, 0}, dy[4] = {1, 2, 3, 4};
  float y[4], g[4];
  CHECK(rt_ref_bn_prologue(&xs, x, sb, y) == 0, "prologue");
  CHECK(isnan(y[0]) && y[1] == 0 && isnan(y[2]) && y[3] == 2, "prologue relu keeps NaN: %g %g %g %g", y[0], y[1], y[2],
        y[3]);
  const float gamma[2] = {1, 1}, beta[2] = {0, 0}, mean[2] = {0, 0}, invstd[2] = {1, 1};
  CHECK(rt_ref_bn_relu_mask(&xs, x, dy, gamma, beta, mean, invstd, g) == 0, "mask");
  CHECK(g[0] == 1 && g[1] == 0 && g[2] == 3 && g[3] == 4, "a NaN output passes dy: %g %g %g %g", g[0], g[1], g[2],
        g[3]);
}

/* Training forward against a double-precision computation here. */
static void against_double(RtRefLayout layout, int N, int C, int H, int W, float offset) {
  RtRefAct xs = {N, C, H, W, layout};
  int64_t n = rt_ref_act_count(&xs);
  float *x = rand_array(n, offset - 2, offset + 2), *g = rand_array(C, 0.5f, 1.5f);
  float *b = rand_array(C, -1, 1), *y = zero_array(n), *want = zero_array(n);
  float *rm = rand_array(C, -1, 1), *rv = rand_array(C, 0.5f, 2), *sm = zero_array(C);
  float *si = zero_array(C), *rm0 = zero_array(C), *rv0 = zero_array(C);
  memcpy(rm0, rm, sizeof *rm * (size_t)C);
  memcpy(rv0, rv, sizeof *rv * (size_t)C);
  float mom = 0.1f, eps = 1e-5f;
  CHECK(rt_ref_batchnorm_fwd_train(&xs, x, g, b, y, rm, rv, mom, eps, sm, si) == 0, "train");
  int64_t M = (int64_t)N * H * W;
  for (int c = 0; c < C; c++) {
    double s = 0, ss = 0;
    for (int i = 0; i < N; i++)
      for (int h = 0; h < H; h++)
        for (int w = 0; w < W; w++) s += x[rt_ref_act_index(&xs, i, c, h, w)];
    double mean = s / M;
    for (int i = 0; i < N; i++)
      for (int h = 0; h < H; h++)
        for (int w = 0; w < W; w++) {
          double d = x[rt_ref_act_index(&xs, i, c, h, w)] - mean;
          ss += d * d;
        }
    double var = ss / M, invstd = 1 / sqrt(var + eps);
    CHECK_CLOSE(sm[c], mean, 1e-6, "mean");
    CHECK_CLOSE(si[c], invstd, 1e-5, "invstd");
    CHECK_CLOSE(rm[c], (1 - mom) * rm0[c] + mom * mean, 1e-6, "running mean");
    CHECK_CLOSE(rv[c], (1 - mom) * rv0[c] + mom * ss / (M - 1), 1e-5, "running var");
    for (int i = 0; i < N; i++)
      for (int h = 0; h < H; h++)
        for (int w = 0; w < W; w++) {
          int64_t k = rt_ref_act_index(&xs, i, c, h, w);
          want[k] = (float)(g[c] * (x[k] - mean) * invstd + b[c]);
        }
  }
  compare_arrays(layout == RT_REF_NHWC ? "bn train NHWC" : "bn train NCHW", y, want, n, 1e-5);
  free(x), free(g), free(b), free(y), free(want), free(rm), free(rv), free(sm);
  free(si), free(rm0), free(rv0);
}

/* NHWC results are the NCHW results transposed, forward and backward. */
static void layouts_agree(void) {
  int N = 3, C = 5, H = 4, W = 3;
  RtRefAct a = {N, C, H, W, RT_REF_NCHW}, b = {N, C, H, W, RT_REF_NHWC};
  int64_t n = rt_ref_act_count(&a);
  float *x = rand_array(n, -3, 3), *dy = rand_array(n, -1, 1), *g = rand_array(C, 0.5f, 2);
  float *be = rand_array(C, -1, 1), *xt = zero_array(n), *dyt = zero_array(n);
  float *y = zero_array(n), *yt = zero_array(n), *ytt = zero_array(n);
  float *dx = zero_array(n), *dxt = zero_array(n), *dxtt = zero_array(n);
  float sm[5], si[5], smt[5], sit[5], dg[5], db[5], dgt[5], dbt[5];
  rt_ref_nchw_to_nhwc(N, C, H, W, x, xt);
  rt_ref_nchw_to_nhwc(N, C, H, W, dy, dyt);
  rt_ref_batchnorm_fwd_train(&a, x, g, be, y, NULL, NULL, 0.1f, 1e-5f, sm, si);
  rt_ref_batchnorm_fwd_train(&b, xt, g, be, yt, NULL, NULL, 0.1f, 1e-5f, smt, sit);
  rt_ref_nhwc_to_nchw(N, C, H, W, yt, ytt);
  compare_arrays("bn NHWC vs NCHW y", ytt, y, n, 1e-6);
  rt_ref_batchnorm_bwd(&a, x, dy, g, sm, si, dx, dg, db);
  rt_ref_batchnorm_bwd(&b, xt, dyt, g, smt, sit, dxt, dgt, dbt);
  rt_ref_nhwc_to_nchw(N, C, H, W, dxt, dxtt);
  compare_arrays("bn NHWC vs NCHW dx", dxtt, dx, n, 1e-5);
  compare_arrays("bn NHWC vs NCHW dgamma", dgt, dg, C, 1e-5);
  compare_arrays("bn NHWC vs NCHW dbeta", dbt, db, C, 1e-5);
  free(x), free(dy), free(g), free(be), free(xt), free(dyt), free(y), free(yt);
  free(ytt), free(dx), free(dxt), free(dxtt);
}

typedef struct BnCtx {
  RtRefAct xs;
  float *x, *g, *b;
  int wrt; /* 0 x, 1 gamma, 2 beta */
} BnCtx;

static void bn_as_fn(void *vc, const float *v, float *y) {
  BnCtx *c = vc;
  rt_ref_batchnorm_fwd_train(&c->xs, c->wrt == 0 ? v : c->x, c->wrt == 1 ? v : c->g, c->wrt == 2 ? v : c->b, y, NULL,
                             NULL, 0.1f, 1e-5f, NULL, NULL);
}

static void grad(RtRefLayout layout) {
  BnCtx c = {{2, 3, 3, 4, layout}, NULL, NULL, NULL, 0};
  int C = c.xs.C;
  int64_t n = rt_ref_act_count(&c.xs);
  c.x = rand_array(n, -2, 2), c.g = rand_array(C, 0.5f, 2), c.b = rand_array(C, -1, 1);
  float *r = rand_array(n, -1, 1), *y = zero_array(n), *dx = zero_array(n);
  float sm[3], si[3], dg[3], db[3];
  rt_ref_batchnorm_fwd_train(&c.xs, c.x, c.g, c.b, y, NULL, NULL, 0.1f, 1e-5f, sm, si);
  CHECK(rt_ref_batchnorm_bwd(&c.xs, c.x, r, c.g, sm, si, dx, dg, db) == 0, "bwd");
  c.wrt = 0;
  grad_check("bn dx", bn_as_fn, &c, c.x, n, n, r, dx, 1e-2f, 2e-3, 72);
  c.wrt = 1;
  grad_check("bn dgamma", bn_as_fn, &c, c.g, C, n, r, dg, 1e-2f, 2e-3, 3);
  c.wrt = 2;
  grad_check("bn dbeta", bn_as_fn, &c, c.b, C, n, r, db, 1e-2f, 2e-3, 3);
  free(c.x), free(c.g), free(c.b), free(r), free(y), free(dx);
}

int main(void) {
  hand_case();
  sync_count();
  nan_relu(RT_REF_NCHW);
  nan_relu(RT_REF_NHWC);
  against_double(RT_REF_NCHW, 4, 6, 5, 7, 0);
  against_double(RT_REF_NHWC, 4, 6, 5, 7, 0);
  against_double(RT_REF_NCHW, 2, 3, 9, 9, 1000); /* large mean, small spread */
  against_double(RT_REF_NHWC, 3, 16, 1, 1, -50);
  layouts_agree();
  grad(RT_REF_NCHW);
  grad(RT_REF_NHWC);
  return check_report();
}
