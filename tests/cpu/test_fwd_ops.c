/* test_fwd_ops.c - every forward op run by the CPU executor on a tiny graph,
 * against hand-computed values in double or rt_ref's naive oracles, in NCHW
 * and in NHWC (the NHWC graph gets the transposed data and must give the
 * transposed result); plus f16/bf16 output rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exectest.h"
#include "rt_ref.h"

enum { N = 2 };
static const double TOL = 1e-5;

static void check_same(const char *what, const float *got, const float *want, int64_t n, double tol) {
  double e = exectest_compare(what, got, want, n, tol);
  CHECK(e <= tol, "%s differs: %.3g", what, e);
}

/* --- conv2d: asymmetric stride, padding, dilation, two groups, bias ------ */
static void test_conv2d(void) {
  const char *nchw = "graph t {\n"
                     "  input %0 x : f32[N,4,6,7] NCHW\n"
                     "  param @w : f32[6,2,3,3] KCRS\n"
                     "  param @b : f32[6]\n"
                     "  %1 = conv2d(%0, @w, @b) {k=3x3 s=2x1 p=1x0 d=1x2 groups=2} : f32[N,6,3,3] NCHW\n"
                     "  output %1\n}\n";
  const char *nhwc = "graph t {\n"
                     "  input %0 x : f32[N,6,7,4] NHWC\n"
                     "  param @w : f32[6,3,3,2] KRSC\n"
                     "  param @b : f32[6]\n"
                     "  %1 = conv2d(%0, @w, @b) {k=3x3 s=2x1 p=1x0 d=1x2 groups=2} : f32[N,3,3,6] NHWC\n"
                     "  output %1\n}\n";
  ExectestCase a, b;
  uint64_t seed = 1;
  if (exectest_open(&a, nchw, N) | exectest_open(&b, nhwc, N)) {
    CHECK(0, "conv2d graphs did not load");
  } else {
    float *x = exectest_fill(a.x, exectest_val(a.x, "x"), &seed, -1, 1);
    float *w = exectest_fill(a.x, exectest_val(a.x, "w"), &seed, -1, 1);
    float *bias = exectest_fill(a.x, exectest_val(a.x, "b"), &seed, -1, 1);
    CHECK(exectest_run(a.x) == 0, "conv2d NCHW run");
    RtRefAct xs = {N, 4, 6, 7, RT_REF_NCHW}, ys = {N, 6, 3, 3, RT_REF_NCHW};
    RtRefFilter wf = {6, 2, 3, 3, RT_REF_KCRS};
    RtRefConvParam p = {2, 1, 1, 0, 1, 0, 1, 2, 2};
    float want[N * 6 * 9], got[N * 6 * 9];
    CHECK(rt_ref_conv2d_fwd_naive(&xs, x, &wf, w, bias, &p, &ys, want) == 0, "naive conv");
    check_same("conv2d NCHW", exectest_out(&a, 0), want, N * 6 * 9, TOL);

    rt_ref_nchw_to_nhwc(N, 4, 6, 7, x, exectest_f(b.x, "x"));
    rt_ref_nchw_to_nhwc(6, 2, 3, 3, w, exectest_f(b.x, "w"));
    memcpy(exectest_f(b.x, "b"), bias, 6 * sizeof(float));
    CHECK(exectest_run(b.x) == 0, "conv2d NHWC run");
    rt_ref_nhwc_to_nchw(N, 6, 3, 3, exectest_out(&b, 0), got);
    check_same("conv2d NHWC", got, want, N * 6 * 9, TOL);
  }
  exectest_close(&a);
  exectest_close(&b);
}

/* --- batchnorm (inference form), rank 4 in both layouts and rank 2 ------- */
static void bn_ref(const float *x, int64_t rows, int C, int64_t inner, const float *w, const float *b, const float *rm,
                   const float *rv, double eps, float *y) {
  for (int64_t i = 0; i < rows; i++)
    for (int c = 0; c < C; c++)
      for (int64_t j = 0; j < inner; j++) {
        int64_t k = (i * C + c) * inner + j;
        y[k] = (float)(w[c] * (x[k] - rm[c]) / sqrt(rv[c] + eps) + b[c]);
      }
}

static void test_batchnorm(void) {
  static const char *texts[3] = {
      "graph t {\n  input %0 x : f32[N,3,4,5] NCHW\n  param @w : f32[3]\n  param @b : f32[3]\n"
      "  state @rm : f32[3]\n  state @rv : f32[3]\n"
      "  %1 = batchnorm(%0, @w, @b, @rm, @rv) {eps=0.001 momentum=0.1} : f32[N,3,4,5] NCHW\n  output %1\n}\n",
      "graph t {\n  input %0 x : f32[N,4,5,3] NHWC\n  param @w : f32[3]\n  param @b : f32[3]\n"
      "  state @rm : f32[3]\n  state @rv : f32[3]\n"
      "  %1 = batchnorm(%0, @w, @b, @rm, @rv) {eps=0.001 momentum=0.1} : f32[N,4,5,3] NHWC\n  output %1\n}\n",
      "graph t {\n  input %0 x : f32[N,3] \n  param @w : f32[3]\n  param @b : f32[3]\n"
      "  state @rm : f32[3]\n  state @rv : f32[3]\n"
      "  %1 = batchnorm(%0, @w, @b, @rm, @rv) {eps=0.001 momentum=0.1} : f32[N,3]\n  output %1\n}\n",
  };
  for (int t = 0; t < 3; t++) {
    ExectestCase c;
    uint64_t seed = 7;
    if (exectest_open(&c, texts[t], N)) {
      CHECK(0, "batchnorm graph %d did not load", t);
      exectest_close(&c);
      continue;
    }
    float *x = exectest_fill(c.x, exectest_val(c.x, "x"), &seed, -2, 2);
    float *w = exectest_fill(c.x, exectest_val(c.x, "w"), &seed, 0.5f, 1.5f);
    float *b = exectest_fill(c.x, exectest_val(c.x, "b"), &seed, -1, 1);
    float *rm = exectest_fill(c.x, exectest_val(c.x, "rm"), &seed, -1, 1);
    float *rv = exectest_fill(c.x, exectest_val(c.x, "rv"), &seed, 0.5f, 2);
    float xn[N * 60], want[N * 60], got[N * 60];
    CHECK(exectest_run(c.x) == 0, "batchnorm run %d", t);
    if (t == 1) {
      rt_ref_nhwc_to_nchw(N, 3, 4, 5, x, xn);
      bn_ref(xn, N, 3, 20, w, b, rm, rv, 0.001, want);
      rt_ref_nhwc_to_nchw(N, 3, 4, 5, exectest_out(&c, 0), got);
    } else {
      int64_t inner = t == 0 ? 20 : 1;
      bn_ref(x, N, 3, inner, w, b, rm, rv, 0.001, want);
      memcpy(got, exectest_out(&c, 0), sizeof(float) * (size_t)(N * 3 * inner));
    }
    check_same(t == 0   ? "batchnorm NCHW"
               : t == 1 ? "batchnorm NHWC"
                        : "batchnorm [N,C]",
               got, want, N * 3 * (t == 2 ? 1 : 20), TOL);
    exectest_close(&c);
  }
}

/* --- relu and add, with a residual shape -------------------------------- */
static void test_relu_add(void) {
  const char *text =
      "graph t {\n  input %0 a : f32[N,2,3,3] NHWC\n  input %1 b : f32[N,2,3,3] NHWC\n"
      "  %2 = add(%0, %1) : f32[N,2,3,3] NHWC\n  %3 = relu(%2) : f32[N,2,3,3] NHWC\n  output %3, %2\n}\n";
  ExectestCase c;
  uint64_t seed = 3;
  if (exectest_open(&c, text, N) == 0) {
    float *a = exectest_fill(c.x, exectest_val(c.x, "a"), &seed, -1, 1);
    float *b = exectest_fill(c.x, exectest_val(c.x, "b"), &seed, -1, 1);
    CHECK(exectest_run(c.x) == 0, "relu/add run");
    float sum[N * 18], rel[N * 18];
    for (int i = 0; i < N * 18; i++) sum[i] = a[i] + b[i], rel[i] = sum[i] > 0 ? sum[i] : 0;
    check_same("add", exectest_out(&c, 1), sum, N * 18, 0);
    check_same("relu", exectest_out(&c, 0), rel, N * 18, 0);
  } else {
    CHECK(0, "relu/add graph did not load");
  }
  exectest_close(&c);
}

/* --- pooling ------------------------------------------------------------ */
/* NCHW pooling in double: max, or average with or without the padding. */
static void pool_ref(int avg, int include_pad, const float *x, int C, int H, int W, const int k[2], const int s[2],
                     const int p[2], int Ho, int Wo, float *y) {
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int oh = 0; oh < Ho; oh++)
        for (int ow = 0; ow < Wo; ow++) {
          double best = -INFINITY, sum = 0;
          int cnt = 0, padded = 0;
          for (int r = 0; r < k[0]; r++)
            for (int q = 0; q < k[1]; q++) {
              int h = oh * s[0] - p[0] + r, w = ow * s[1] - p[1] + q;
              if (h < H + p[0] && w < W + p[1]) padded++;
              if (h < 0 || w < 0 || h >= H || w >= W) continue;
              double v = x[((n * C + c) * H + h) * W + w];
              best = v > best ? v : best;
              sum += v;
              cnt++;
            }
          y[((n * C + c) * Ho + oh) * Wo + ow] = (float)(!avg ? best : sum / (include_pad ? padded : cnt));
        }
}

static void test_pool(const char *op, int avg, int include_pad) {
  /* x: 3 channels of 7x6, k=3x2 s=2x2 p=1x1 -> 4x4 */
  char nchw[512], nhwc[512];
  const char *extra = !avg ? "" : include_pad ? " include_pad=1" : " include_pad=0";
  snprintf(nchw, sizeof nchw,
           "graph t {\n  input %%0 x : f32[N,3,7,6] NCHW\n"
           "  %%1 = %s(%%0) {k=3x2 s=2x2 p=1x1%s} : f32[N,3,4,4] NCHW\n  output %%1\n}\n",
           op, extra);
  snprintf(nhwc, sizeof nhwc,
           "graph t {\n  input %%0 x : f32[N,7,6,3] NHWC\n"
           "  %%1 = %s(%%0) {k=3x2 s=2x2 p=1x1%s} : f32[N,4,4,3] NHWC\n  output %%1\n}\n",
           op, extra);
  ExectestCase a, b;
  uint64_t seed = 11;
  if (exectest_open(&a, nchw, N) | exectest_open(&b, nhwc, N)) {
    CHECK(0, "%s graphs did not load", op);
  } else {
    float *x = exectest_fill(a.x, exectest_val(a.x, "x"), &seed, -1, 1);
    rt_ref_nchw_to_nhwc(N, 3, 7, 6, x, exectest_f(b.x, "x"));
    CHECK(exectest_run(a.x) == 0 && exectest_run(b.x) == 0, "%s run", op);
    static const int k[2] = {3, 2}, s[2] = {2, 2}, p[2] = {1, 1};
    float want[N * 48], got[N * 48];
    pool_ref(avg, include_pad, x, 3, 7, 6, k, s, p, 4, 4, want);
    char what[64];
    snprintf(what, sizeof what, "%s%s NCHW", op, extra);
    check_same(what, exectest_out(&a, 0), want, N * 48, TOL);
    rt_ref_nhwc_to_nchw(N, 3, 4, 4, exectest_out(&b, 0), got);
    snprintf(what, sizeof what, "%s%s NHWC", op, extra);
    check_same(what, got, want, N * 48, TOL);
  }
  exectest_close(&a);
  exectest_close(&b);
}

/* --- global_avgpool -> flatten -> linear, in both layouts ---------------- */
static void test_head(void) {
  const char *texts[2] = {"graph t {\n  input %0 x : f32[N,3,2,5] NCHW\n  param @w : f32[4,3]\n  param @b : f32[4]\n"
                          "  %1 = global_avgpool(%0) : f32[N,3,1,1] NCHW\n  %2 = flatten(%1) : f32[N,3]\n"
                          "  %3 = linear(%2, @w, @b) : f32[N,4]\n  output %3, %2\n}\n",
                          "graph t {\n  input %0 x : f32[N,2,5,3] NHWC\n  param @w : f32[4,3]\n  param @b : f32[4]\n"
                          "  %1 = global_avgpool(%0) : f32[N,1,1,3] NHWC\n  %2 = flatten(%1) : f32[N,3]\n"
                          "  %3 = linear(%2, @w, @b) : f32[N,4]\n  output %3, %2\n}\n"};
  for (int t = 0; t < 2; t++) {
    ExectestCase c;
    uint64_t seed = 5;
    if (exectest_open(&c, texts[t], N)) {
      CHECK(0, "head graph %d did not load", t);
      exectest_close(&c);
      continue;
    }
    float *x = exectest_fill(c.x, exectest_val(c.x, "x"), &seed, -1, 1);
    float *w = exectest_fill(c.x, exectest_val(c.x, "w"), &seed, -1, 1);
    float *b = exectest_fill(c.x, exectest_val(c.x, "b"), &seed, -1, 1);
    CHECK(exectest_run(c.x) == 0, "head run");
    float xn[N * 30], gap[N * 3], y[N * 4];
    if (t)
      rt_ref_nhwc_to_nchw(N, 3, 2, 5, x, xn);
    else
      memcpy(xn, x, sizeof xn);
    for (int i = 0; i < N * 3; i++) {
      double s = 0;
      for (int j = 0; j < 10; j++) s += xn[i * 10 + j];
      gap[i] = (float)(s / 10);
    }
    for (int n = 0; n < N; n++)
      for (int o = 0; o < 4; o++) {
        double s = b[o];
        for (int i = 0; i < 3; i++) s += (double)gap[n * 3 + i] * w[o * 3 + i];
        y[n * 4 + o] = (float)s;
      }
    check_same(t ? "flatten(global_avgpool) NHWC" : "flatten(global_avgpool) NCHW", exectest_out(&c, 1), gap, N * 3,
               TOL);
    check_same(t ? "linear NHWC" : "linear NCHW", exectest_out(&c, 0), y, N * 4, TOL);
    exectest_close(&c);
  }
}

/* --- softmax_cross_entropy with label smoothing -------------------------- */
static void test_softmax_ce(void) {
  const char *text = "graph t {\n  input %0 z : f32[N,5]\n  input %1 label : i64[N]\n"
                     "  %2 = softmax_cross_entropy(%0, %1) {smoothing=0.2} : f32[]\n  output %2\n}\n";
  ExectestCase c;
  uint64_t seed = 9;
  if (exectest_open(&c, text, N) == 0) {
    float *z = exectest_fill(c.x, exectest_val(c.x, "z"), &seed, -3, 3);
    int v = exectest_val(c.x, "label");
    CHECK(rt_cpu_is_int(c.x, v), "labels stored as integers");
    int64_t *lab = rt_cpu_data(c.x, v);
    lab[0] = 4, lab[1] = 0;
    CHECK(exectest_run(c.x) == 0, "softmax_ce run");
    double loss = 0;
    for (int n = 0; n < N; n++) {
      double m = -INFINITY, se = 0;
      for (int j = 0; j < 5; j++) m = z[n * 5 + j] > m ? z[n * 5 + j] : m;
      for (int j = 0; j < 5; j++) se += exp(z[n * 5 + j] - m);
      double lse = m + log(se), smooth = 0;
      for (int j = 0; j < 5; j++) smooth += lse - z[n * 5 + j];
      loss += 0.8 * (lse - z[n * 5 + lab[n]]) + 0.2 * smooth / 5;
    }
    CHECK_CLOSE(exectest_out(&c, 0)[0], loss / N, 1e-5, "softmax_ce loss");
  } else {
    CHECK(0, "softmax_ce graph did not load");
  }
  exectest_close(&c);
}

/* --- precision: f16 and bf16 outputs keep only what their dtype holds ---- */
static void test_precision(void) {
  const char *text = "graph t {\n  input %0 a : f16[N,7]\n  input %1 b : bf16[N,7]\n"
                     "  %2 = relu(%0) : f16[N,7]\n  %3 = add(%1, %1) : bf16[N,7]\n  output %2, %3\n}\n";
  ExectestCase c;
  if (exectest_open(&c, text, N) == 0) {
    float *a = exectest_f(c.x, "a"), *b = exectest_f(c.x, "b");
    static const float vals[7] = {1.0f + 1.0f / 4096, 0.1f, -0.3f, 70000.0f, 3.14159265f, 1e-6f, 1.0f + 1.0f / 256};
    for (int i = 0; i < N * 7; i++) a[i] = b[i] = vals[i % 7] * (i < 7 ? 1.0f : 0.37f);
    CHECK(exectest_run(c.x) == 0, "precision run");
    float wa[N * 7], wb[N * 7];
    for (int i = 0; i < N * 7; i++) {
      wa[i] = rt_ref_f16_to_f32(rt_ref_f32_to_f16(a[i] > 0 ? a[i] : 0));
      wb[i] = rt_ref_bf16_to_f32(rt_ref_f32_to_bf16(b[i] + b[i]));
    }
    check_same("relu f16 output", exectest_out(&c, 0), wa, N * 7, 0);
    check_same("add bf16 output", exectest_out(&c, 1), wb, N * 7, 0);
    CHECK(exectest_out(&c, 0)[0] == 1.0f, "1 + 2^-12 rounds to 1 in f16 (ties to even)");
    CHECK(isinf(exectest_out(&c, 0)[3]), "70000 overflows f16");
    CHECK(exectest_out(&c, 1)[6] == 2.0f, "2 + 2^-7 rounds to 2 in bf16");
  } else {
    CHECK(0, "precision graph did not load");
  }
  exectest_close(&c);
}

/* --- casts to FP8: scaled by the largest finite |x| (or scale=), rounded to
 * the format; NaN and infinities pass, and so are not in the maximum ------ */
static void test_cast_f8(void) {
  const char *text = "graph t {\n  input %0 a : f32[N,7]\n"
                     "  %1 = cast(%0) {to=f8e4m3} : f8e4m3[N,7]\n"
                     "  %2 = cast(%0) {to=f8e5m2 scale=0.001} : f8e5m2[N,7]\n"
                     "  %3 = cast(%1) {to=f32} : f32[N,7]\n"
                     "  output %1, %2, %3\n}\n";
  ExectestCase c;
  if (exectest_open(&c, text, N) == 0) {
    float *a = exectest_f(c.x, "a");
    static const float vals[7] = {0.3f, -1.7f, 2.5e-3f, 9.0f, NAN, -INFINITY, 1e-7f};
    for (int i = 0; i < N * 7; i++) a[i] = vals[i % 7] * (i < 7 ? 1.0f : 0.5f);
    CHECK(exectest_run(c.x) == 0, "f8 cast run");
    float amax = 9.0f, s4 = amax / 448.0f, w4[N * 7], w5[N * 7];
    for (int i = 0; i < N * 7; i++) {
      w4[i] = isfinite(a[i]) ? s4 * rt_ref_f8_to_f32(rt_ref_f32_to_f8(a[i] / s4, RT_REF_E4M3), RT_REF_E4M3) : a[i];
      w5[i] =
          isfinite(a[i]) ? 0.001f * rt_ref_f8_to_f32(rt_ref_f32_to_f8(a[i] / 0.001f, RT_REF_E5M2), RT_REF_E5M2) : a[i];
    }
    const float *q4 = exectest_out(&c, 0), *q5 = exectest_out(&c, 1), *back = exectest_out(&c, 2);
    for (int i = 0; i < N * 7; i++) {
      int same4 = isnan(w4[i]) ? isnan(q4[i]) : q4[i] == w4[i], same5 = isnan(w5[i]) ? isnan(q5[i]) : q5[i] == w5[i];
      CHECK(same4 && same5, "[%d] %g: e4m3 %g (want %g), e5m2 %g (want %g)", i, a[i], q4[i], w4[i], q5[i], w5[i]);
      CHECK(isnan(back[i]) ? isnan(q4[i]) : back[i] == q4[i], "[%d] the cast back to f32 keeps the value", i);
    }
    CHECK(q4[3] == 9.0f, "the largest finite value maps to 448 and back exactly: %g", q4[3]);
    CHECK(q4[2] != a[2], "2.5e-3 is not kept exactly by e4m3 at this scale");
    CHECK(isinf(q4[5]) && q4[5] < 0 && isnan(q4[4]), "-inf and NaN pass");
  } else {
    CHECK(0, "f8 cast graph did not load");
  }
  exectest_close(&c);
}

int main(void) {
  test_cast_f8();
  test_conv2d();
  test_batchnorm();
  test_relu_add();
  test_pool("maxpool", 0, 0);
  test_pool("avgpool", 1, 1);
  test_pool("avgpool", 1, 0);
  test_head();
  test_softmax_ce();
  test_precision();
  return check_report();
}
