/* test_train_ops.c - the training ops one by one, in NCHW and NHWC.
 *
 * NCHW results are checked against independent references: the convolution
 * gradients against rt_ref's naive double-precision oracles (groups=2,
 * stride, padding and dilation different per axis), every linear backward
 * op by its adjoint identity <f(x), dy> = <x, f_bwd(dy)> with the forward op
 * run in the same graph, batchnorm_train (batch statistics, running
 * statistics with the unbiased variance) and batchnorm_bwd, relu_bwd and
 * channel_sum by hand in double.  The NHWC graph gets the transposed data
 * and must give the transposed results. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "exectest.h"
#include "rt_ref.h"

enum { N = 2, C = 4, H = 6, W = 7, K = 6, P = 3, Q = 3, PH = 3, PW = 4 };

static const char *NCHW =
    "graph t {\n"
    "  input %0 x : f32[N,4,6,7] NCHW\n"
    "  input %1 dy : f32[N,6,3,3] NCHW\n"
    "  input %2 by : f32[N,4,6,7] NCHW\n"
    "  input %3 py : f32[N,4,3,4] NCHW\n"
    "  input %4 gy : f32[N,4,1,1] NCHW\n"
    "  param @w : f32[6,2,3,3] KCRS\n"
    "  param @g : f32[4]\n"
    "  param @b : f32[4]\n"
    "  state @rm : f32[4]\n"
    "  state @rv : f32[4]\n"
    "  %5 = conv2d_bwd_data(%1, @w) {k=3x3 s=2x1 p=1x0 d=1x2 groups=2 in_hw=6x7} : f32[N,4,6,7] NCHW\n"
    "  %6 = conv2d_bwd_weight(%1, %0) {k=3x3 s=2x1 p=1x0 d=1x2 groups=2} : f32[6,2,3,3] KCRS\n"
    "  %7 = channel_sum(%1) : f32[6]\n"
    "  %8, %9, %10 = batchnorm_train(%0, @g, @b, @rm, @rv) {eps=0.001 momentum=0.25} : f32[N,4,6,7] NCHW, f32[4], "
    "f32[4]\n"
    "  %11, %12, %13 = batchnorm_bwd(%2, %0, @g, %9, %10) : f32[N,4,6,7] NCHW, f32[4], f32[4]\n"
    "  %14 = relu_bwd(%2, %8) : f32[N,4,6,7] NCHW\n"
    "  %15 = maxpool_bwd(%3, %0) {k=3x2 s=2x2 p=1x1} : f32[N,4,6,7] NCHW\n"
    "  %16 = avgpool_bwd(%3) {k=3x2 s=2x2 p=1x1 include_pad=1 in_hw=6x7} : f32[N,4,6,7] NCHW\n"
    "  %17 = global_avgpool_bwd(%4) {in_hw=6x7} : f32[N,4,6,7] NCHW\n"
    "  %18 = maxpool(%0) {k=3x2 s=2x2 p=1x1} : f32[N,4,3,4] NCHW\n"
    "  %19 = avgpool(%0) {k=3x2 s=2x2 p=1x1 include_pad=1} : f32[N,4,3,4] NCHW\n"
    "  %20 = global_avgpool(%0) : f32[N,4,1,1] NCHW\n"
    "  %21 = conv2d(%0, @w) {k=3x3 s=2x1 p=1x0 d=1x2 groups=2} : f32[N,6,3,3] NCHW\n"
    "  output %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21\n"
    "}\n";

static const char *NHWC =
    "graph t {\n"
    "  input %0 x : f32[N,6,7,4] NHWC\n"
    "  input %1 dy : f32[N,3,3,6] NHWC\n"
    "  input %2 by : f32[N,6,7,4] NHWC\n"
    "  input %3 py : f32[N,3,4,4] NHWC\n"
    "  input %4 gy : f32[N,1,1,4] NHWC\n"
    "  param @w : f32[6,3,3,2] KRSC\n"
    "  param @g : f32[4]\n"
    "  param @b : f32[4]\n"
    "  state @rm : f32[4]\n"
    "  state @rv : f32[4]\n"
    "  %5 = conv2d_bwd_data(%1, @w) {k=3x3 s=2x1 p=1x0 d=1x2 groups=2 in_hw=6x7} : f32[N,6,7,4] NHWC\n"
    "  %6 = conv2d_bwd_weight(%1, %0) {k=3x3 s=2x1 p=1x0 d=1x2 groups=2} : f32[6,3,3,2] KRSC\n"
    "  %7 = channel_sum(%1) : f32[6]\n"
    "  %8, %9, %10 = batchnorm_train(%0, @g, @b, @rm, @rv) {eps=0.001 momentum=0.25} : f32[N,6,7,4] NHWC, f32[4], "
    "f32[4]\n"
    "  %11, %12, %13 = batchnorm_bwd(%2, %0, @g, %9, %10) : f32[N,6,7,4] NHWC, f32[4], f32[4]\n"
    "  %14 = relu_bwd(%2, %8) : f32[N,6,7,4] NHWC\n"
    "  %15 = maxpool_bwd(%3, %0) {k=3x2 s=2x2 p=1x1} : f32[N,6,7,4] NHWC\n"
    "  %16 = avgpool_bwd(%3) {k=3x2 s=2x2 p=1x1 include_pad=1 in_hw=6x7} : f32[N,6,7,4] NHWC\n"
    "  %17 = global_avgpool_bwd(%4) {in_hw=6x7} : f32[N,6,7,4] NHWC\n"
    "  output %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17\n"
    "}\n";

enum {
  O_DX,
  O_DW,
  O_DB,
  O_BNY,
  O_MEAN,
  O_INVSTD,
  O_BNDX,
  O_BNDG,
  O_BNDB,
  O_RELU,
  O_MPB,
  O_APB,
  O_GAPB,
  O_MP,
  O_AP,
  O_GAP,
  O_CONV
};

static const double TOL = 1e-5;

static void same(const char *what, const float *got, const float *want, int64_t n, double tol) {
  double e = exectest_compare(what, got, want, n, tol);
  CHECK(e <= tol, "%s differs: %.3g", what, e);
}

static double dot(const float *a, const float *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

/* <f(x), dy> == <x, f_bwd(dy)> */
static void adjoint(const char *what, const float *fx, const float *dy, int64_t ny, const float *x, const float *dx,
                    int64_t nx) {
  double l = dot(fx, dy, ny), r = dot(x, dx, nx);
  CHECK(fabs(l - r) <= 1e-5 * (1 + fabs(l)), "%s adjoint: <f(x), dy> = %.9g, <x, bwd(dy)> = %.9g", what, l, r);
}

/* batchnorm_train and batchnorm_bwd in double; rm, rv start as given. */
static void check_bn(ExectestCase *c, const float *x, const float *dy, const float *g, const float *b, const float *rm0,
                     const float *rv0) {
  const int64_t M = (int64_t)N * H * W;
  float y[N * C * H * W], dx[N * C * H * W], mean[C], invstd[C], dg[C], db[C], rm[C], rv[C];
  for (int ch = 0; ch < C; ch++) {
    double s = 0, ss = 0, sdy = 0, sdyx = 0;
    for (int n = 0; n < N; n++)
      for (int i = 0; i < H * W; i++) s += x[(n * C + ch) * H * W + i];
    double mu = s / M;
    for (int n = 0; n < N; n++)
      for (int i = 0; i < H * W; i++) ss += pow(x[(n * C + ch) * H * W + i] - mu, 2);
    double var = ss / M, is = 1 / sqrt(var + 0.001);
    mean[ch] = (float)mu, invstd[ch] = (float)is;
    rm[ch] = (float)(0.75 * rm0[ch] + 0.25 * mu);
    rv[ch] = (float)(0.75 * rv0[ch] + 0.25 * ss / (M - 1));
    for (int n = 0; n < N; n++)
      for (int i = 0; i < H * W; i++) {
        int64_t k = (n * C + ch) * H * W + i;
        double xh = (x[k] - mu) * is;
        y[k] = (float)(g[ch] * xh + b[ch]);
        sdy += dy[k], sdyx += dy[k] * xh;
      }
    dg[ch] = (float)sdyx, db[ch] = (float)sdy;
    for (int n = 0; n < N; n++)
      for (int i = 0; i < H * W; i++) {
        int64_t k = (n * C + ch) * H * W + i;
        double xh = (x[k] - mu) * is;
        dx[k] = (float)(g[ch] * is * (dy[k] - sdy / M - xh * sdyx / M));
      }
  }
  same("batchnorm_train y", exectest_out(c, O_BNY), y, N * C * H * W, TOL);
  same("batchnorm_train mean", exectest_out(c, O_MEAN), mean, C, TOL);
  same("batchnorm_train invstd", exectest_out(c, O_INVSTD), invstd, C, TOL);
  same("batchnorm_train running_mean", exectest_f(c->x, "rm"), rm, C, TOL);
  same("batchnorm_train running_var (unbiased)", exectest_f(c->x, "rv"), rv, C, TOL);
  same("batchnorm_bwd dx", exectest_out(c, O_BNDX), dx, N * C * H * W, 1e-4);
  same("batchnorm_bwd dweight", exectest_out(c, O_BNDG), dg, C, 1e-5);
  same("batchnorm_bwd dbias", exectest_out(c, O_BNDB), db, C, 1e-5);
}

int main(void) {
  ExectestCase a, h;
  if (exectest_open(&a, NCHW, N) | exectest_open(&h, NHWC, N)) {
    CHECK(0, "graphs did not load");
    exectest_close(&a);
    exectest_close(&h);
    return check_report();
  }
  uint64_t seed = 99;
  float *x = exectest_fill(a.x, exectest_val(a.x, "x"), &seed, -1, 1);
  float *dy = exectest_fill(a.x, exectest_val(a.x, "dy"), &seed, -1, 1);
  float *by = exectest_fill(a.x, exectest_val(a.x, "by"), &seed, -1, 1);
  float *py = exectest_fill(a.x, exectest_val(a.x, "py"), &seed, -1, 1);
  float *gy = exectest_fill(a.x, exectest_val(a.x, "gy"), &seed, -1, 1);
  float *w = exectest_fill(a.x, exectest_val(a.x, "w"), &seed, -1, 1);
  float *g = exectest_fill(a.x, exectest_val(a.x, "g"), &seed, 0.5f, 1.5f);
  float *b = exectest_fill(a.x, exectest_val(a.x, "b"), &seed, -1, 1);
  float *rm = exectest_fill(a.x, exectest_val(a.x, "rm"), &seed, -1, 1);
  float *rv = exectest_fill(a.x, exectest_val(a.x, "rv"), &seed, 0.5f, 2);
  float rm0[C], rv0[C];
  memcpy(rm0, rm, sizeof rm0);
  memcpy(rv0, rv, sizeof rv0);
  /* The NHWC graph gets the same numbers, transposed. */
  rt_ref_nchw_to_nhwc(N, C, H, W, x, exectest_f(h.x, "x"));
  rt_ref_nchw_to_nhwc(N, K, P, Q, dy, exectest_f(h.x, "dy"));
  rt_ref_nchw_to_nhwc(N, C, H, W, by, exectest_f(h.x, "by"));
  rt_ref_nchw_to_nhwc(N, C, PH, PW, py, exectest_f(h.x, "py"));
  memcpy(exectest_f(h.x, "gy"), gy, sizeof(float) * N * C);
  rt_ref_nchw_to_nhwc(K, 2, 3, 3, w, exectest_f(h.x, "w"));
  memcpy(exectest_f(h.x, "g"), g, sizeof(float) * C);
  memcpy(exectest_f(h.x, "b"), b, sizeof(float) * C);
  memcpy(exectest_f(h.x, "rm"), rm, sizeof(float) * C);
  memcpy(exectest_f(h.x, "rv"), rv, sizeof(float) * C);
  CHECK(exectest_run(a.x) == 0 && exectest_run(h.x) == 0, "training ops run");

  /* convolution gradients against the naive oracles */
  RtRefAct xs = {N, C, H, W, RT_REF_NCHW}, ys = {N, K, P, Q, RT_REF_NCHW};
  RtRefFilter wf = {K, 2, 3, 3, RT_REF_KCRS};
  RtRefConvParam p = {2, 1, 1, 0, 1, 0, 1, 2, 2};
  static float want[N * C * H * W], got[N * C * H * W];
  float dwant[K * 2 * 9], dbias[K];
  rt_ref_conv2d_bwd_data_naive(&xs, want, &wf, w, &p, &ys, dy);
  same("conv2d_bwd_data", exectest_out(&a, O_DX), want, N * C * H * W, TOL);
  rt_ref_conv2d_bwd_weight_naive(&xs, x, &wf, dwant, dbias, &p, &ys, dy);
  same("conv2d_bwd_weight", exectest_out(&a, O_DW), dwant, K * 18, TOL);
  same("channel_sum", exectest_out(&a, O_DB), dbias, K, TOL);
  adjoint("conv2d data", exectest_out(&a, O_CONV), dy, N * K * P * Q, x, exectest_out(&a, O_DX), N * C * H * W);
  adjoint("conv2d weight", exectest_out(&a, O_CONV), dy, N * K * P * Q, w, exectest_out(&a, O_DW), K * 18);

  check_bn(&a, x, by, g, b, rm0, rv0);
  const float *bny = exectest_out(&a, O_BNY);
  for (int i = 0; i < N * C * H * W; i++) want[i] = bny[i] > 0 ? by[i] : 0;
  same("relu_bwd", exectest_out(&a, O_RELU), want, N * C * H * W, 0);

  adjoint("maxpool", exectest_out(&a, O_MP), py, N * C * PH * PW, x, exectest_out(&a, O_MPB), N * C * H * W);
  adjoint("avgpool", exectest_out(&a, O_AP), py, N * C * PH * PW, x, exectest_out(&a, O_APB), N * C * H * W);
  adjoint("global_avgpool", exectest_out(&a, O_GAP), gy, N * C, x, exectest_out(&a, O_GAPB), N * C * H * W);
  int nonzero = 0;
  for (int i = 0; i < N * C * H * W; i++) nonzero += exectest_out(&a, O_MPB)[i] != 0;
  CHECK(nonzero > 0 && nonzero <= N * C * PH * PW, "maxpool_bwd routes each dy to one input (%d nonzero)", nonzero);

  /* NHWC == transposed NCHW */
  static const struct {
    int out, c, hh, ww;
    const char *what;
  } act[] = {
      {O_DX, C, H, W, "conv2d_bwd_data"},      {O_BNY, C, H, W, "batchnorm_train y"},
      {O_BNDX, C, H, W, "batchnorm_bwd dx"},   {O_RELU, C, H, W, "relu_bwd"},
      {O_MPB, C, H, W, "maxpool_bwd"},         {O_APB, C, H, W, "avgpool_bwd"},
      {O_GAPB, C, H, W, "global_avgpool_bwd"},
  };
  for (size_t i = 0; i < sizeof act / sizeof act[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "%s NHWC", act[i].what);
    rt_ref_nhwc_to_nchw(N, act[i].c, act[i].hh, act[i].ww, exectest_out(&h, act[i].out), got);
    same(what, got, exectest_out(&a, act[i].out), N * act[i].c * act[i].hh * act[i].ww, 1e-5);
  }
  rt_ref_nhwc_to_nchw(K, 2, 3, 3, exectest_out(&h, O_DW), got);
  same("conv2d_bwd_weight KRSC", got, exectest_out(&a, O_DW), K * 18, 1e-5);
  static const int vec[] = {O_DB, O_MEAN, O_INVSTD, O_BNDG, O_BNDB};
  for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++)
    same("per-channel NHWC", exectest_out(&h, vec[i]), exectest_out(&a, vec[i]), vec[i] == O_DB ? K : C, 1e-5);
  same("running_var NHWC", exectest_f(h.x, "rv"), exectest_f(a.x, "rv"), C, 1e-6);
  exectest_close(&a);
  exectest_close(&h);
  return check_report();
}
