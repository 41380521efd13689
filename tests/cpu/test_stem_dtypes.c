/* test_stem_dtypes.c - the CPU executor on the mixed dtypes the precision
 * pass gives an f32 first convolution in a mixed-precision graph: its
 * conv2d_bn_train keeps z, mean and invstd f32 but stores y = relu(bn(z))
 * in f16 or bf16 (y_dtype); z is cast to that dtype right after it, and
 * its batchnorm_relu_bwd reads the narrow z and that dtype's gradient dy
 * into an f32 dz (dz_dtype=f32).
 *
 * Each mixed graph runs beside the all-f32 graph on the same values (dy
 * given as numbers the narrow dtype holds exactly, as a stored f16 gradient
 * is).  z, mean, invstd and the running statistics must be bitwise the f32
 * graph's (the statistics come from the f32 z).  y must be, element for
 * element, max(0, (zr - mean) * (float)(gamma * invstd) + beta) rounded to
 * the narrow dtype, zr being z rounded to it: the forward normalizes the z
 * the backward reads, so that its relu and the backward's recomputed mask
 * agree everywhere (checked too); the all-f32 graph's y is that same
 * expression on its f32 z, bitwise (a max pool's backward recomputes it:
 * maxpool_bn_relu_bwd).  dz, dgamma and dbeta must be rt_ref's
 * masked batch-norm backward of zr, not rounded.  The mixed graph's types
 * are ir_verify'd: a y_dtype that is no float dtype, a residual of z's
 * dtype beside an f16 y, or a y_dtype on the backward, is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exectest.h"
#include "rt_ref.h"

#define DECLS(DY)                                                              \
  "  input %0 x : f32[N,6,6,4] NHWC\n"                                         \
  "  input %1 dy : " DY "[N,3,3,8] NHWC\n"                                     \
  "  param @w : f32[8,3,3,4] KRSC\n  param @g : f32[8]\n  param @b : f32[8]\n" \
  "  state @rm : f32[8]\n  state @rv : f32[8]\n"
#define CONV "conv2d_bn_train(%0, @w, @g, @b, @rm, @rv) {k=3x3 s=2x2 p=1x1 d=1x1 groups=1 eps=1e-05 momentum=0.1 relu=1"
#define BWD  "batchnorm_relu_bwd(%1, @b, %2, @g, %4, %5)"

static const char *const F32_IR =
    "graph stem {\n" DECLS("f32") "  %2, %3, %4, %5 = " CONV
                                  "} : f32[N,3,3,8] NHWC, f32[N,3,3,8] NHWC, f32[8], f32[8]\n"
                                  "  %6, %7, %8 = " BWD " : f32[N,3,3,8] NHWC, f32[8], f32[8]\n"
                                  "  output %2, %3, %4, %5, %6, %7, %8\n}\n";

/* The same with y, dy and the z the backward reads in the dtype that
 * replaces each DT, as the precision pass writes it. */
static const char *const MIXED_IR =
    "graph stem {\n" DECLS("DT") "  %2, %3, %4, %5 = " CONV
                                 " precision=f32 math=\"tf32\" y_dtype=DT} : f32[N,3,3,8] NHWC, DT[N,3,3,8] NHWC, "
                                 "f32[8], f32[8]\n"
                                 "  %9 = cast(%2) {to=DT} : DT[N,3,3,8] NHWC\n"
                                 "  %6, %7, %8 = batchnorm_relu_bwd(%1, @b, %9, @g, %4, %5) {dz_dtype=f32} : "
                                 "f32[N,3,3,8] NHWC, f32[8], f32[8]\n"
                                 "  output %2, %3, %4, %5, %6, %7, %8\n}\n";

/* tmpl with every "DT" replaced by dt, into out (len bytes). */
static void with_dtype(const char *tmpl, const char *dt, char *out, size_t len) {
  size_t k = 0;
  for (const char *p = tmpl; *p && k + 8 < len;)
    if (p[0] == 'D' && p[1] == 'T') {
      k += (size_t)snprintf(out + k, len - k, "%s", dt);
      p += 2;
    } else {
      out[k++] = *p++;
    }
  out[k] = 0;
}

enum { BATCH = 3 };

static int bitwise(const float *a, const float *b, int64_t n) { return memcmp(a, b, sizeof(float) * (size_t)n) == 0; }

static void check_mixed(const char *dt) {
  char text[2048];
  with_dtype(MIXED_IR, dt, text, sizeof text);
  ExectestCase f = {0}, m = {0};
  int ok = exectest_open(&f, F32_IR, BATCH) == 0 && exectest_open(&m, text, BATCH) == 0;
  CHECK(ok, "%s: the graphs read, verify and get executors", dt);
  if (!ok) goto done;
  int bf = strcmp(dt, "bf16") == 0;
  static const char *const names[] = {"x", "dy", "w", "g", "b", "rm", "rv"};
  uint64_t seed = 11;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int vf = exectest_val(f.x, names[i]), vm = exectest_val(m.x, names[i]);
    if (vf < 0 || vm < 0) goto done;
    int rv = strcmp(names[i], "rv") == 0, g = strcmp(names[i], "g") == 0;
    float *p = exectest_fill(f.x, vf, &seed, rv || g ? 0.5f : -1.0f, rv || g ? 1.5f : 1.0f);
    int64_t n = rt_cpu_numel(f.x, vf);
    if (strcmp(names[i], "dy") == 0)
      CHECK((bf ? rt_ref_round_bf16(n, p, p) : rt_ref_round_f16(n, p, p)) == RT_REF_OK, "%s: dy rounds", dt);
    memcpy(rt_cpu_data(m.x, vm), p, sizeof(float) * (size_t)n);
  }
  if (exectest_run(f.x) || exectest_run(m.x)) {
    CHECK(0, "%s: both graphs run", dt);
    goto done;
  }
  static const char *const outs[] = {"z", "y", "mean", "invstd", "dz", "dgamma", "dbeta"};
  for (int k = 0; k < 4; k++)
    if (k != 1)
      CHECK(bitwise(exectest_out(&f, k), exectest_out(&m, k), rt_cpu_numel(f.x, f.g->output[k])),
            "%s: %s differs from the f32 graph's", dt, outs[k]);
  int64_t n = rt_cpu_numel(f.x, f.g->output[0]);
  const float *z = exectest_out(&m, 0), *y = exectest_out(&m, 1), *mean = exectest_out(&m, 2),
              *invstd = exectest_out(&m, 3), *gam = exectest_f(m.x, "g"), *bet = exectest_f(m.x, "b"),
              *dy = exectest_f(m.x, "dy");
  float *zr = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)n),
        *gm = malloc(sizeof(float) * (size_t)n), *dz = malloc(sizeof(float) * (size_t)n), dg[8], db[8];
  if (!zr || !want || !gm || !dz) abort();
  CHECK((bf ? rt_ref_round_bf16(n, z, zr) : rt_ref_round_f16(n, z, zr)) == RT_REF_OK, "%s: z rounds", dt);
  for (int64_t i = 0; i < n; i++) {
    int c = (int)(i % 8);
    float v = (zr[i] - mean[c]) * (float)((double)gam[c] * invstd[c]) + bet[c];
    want[i] = v > 0.0f ? v : 0.0f;
  }
  CHECK((bf ? rt_ref_round_bf16(n, want, want) : rt_ref_round_f16(n, want, want)) == RT_REF_OK, "%s: y rounds", dt);
  CHECK(bitwise(want, y, n), "%s: y is not the normalized z rounded to %s, rounded", dt, dt);
  CHECK(!bitwise(exectest_out(&f, 1), y, n), "%s: y holds the f32 values, not rounded ones", dt);
  /* the all-f32 graph's y is the same expression on the f32 z (what a max pool's backward recomputes) */
  float *y32 = malloc(sizeof(float) * (size_t)n);
  if (!y32) abort();
  RtRefAct ys = {.N = BATCH, .H = 3, .W = 3, .C = 8, .layout = RT_REF_NHWC};
  CHECK(rt_ref_bn_normalize(&ys, exectest_out(&f, 0), gam, bet, exectest_out(&f, 2), exectest_out(&f, 3), y32) ==
                RT_REF_OK &&
            rt_ref_relu_fwd(n, y32, y32) == RT_REF_OK && bitwise(y32, exectest_out(&f, 1), n),
        "%s: the f32 graph's y is not rt_ref_bn_normalize of its z, relu'd", dt);
  free(y32);
  RtRefAct zs = {.N = BATCH, .H = 3, .W = 3, .C = 8, .layout = RT_REF_NHWC};
  CHECK(rt_ref_bn_relu_mask(&zs, zr, dy, gam, bet, mean, invstd, gm) == RT_REF_OK &&
            rt_ref_batchnorm_bwd(&zs, zr, gm, gam, mean, invstd, dz, dg, db) == RT_REF_OK,
        "%s: the reference backward runs", dt);
  int agree = 1, zeros = 0;
  for (int64_t i = 0; i < n; i++) {
    if (dy[i] != 0.0f) agree &= (y[i] > 0.0f) == (gm[i] != 0.0f);
    zeros += y[i] == 0.0f;
  }
  CHECK(agree, "%s: the backward's mask is not the forward's relu", dt);
  CHECK(zeros > 0 && zeros < n, "%s: the relu keeps some and zeroes some (%d of %lld zero)", dt, zeros, (long long)n);
  CHECK(bitwise(dz, exectest_out(&m, 4), n), "%s: dz is not the backward of the rounded z", dt);
  CHECK(bitwise(dg, exectest_out(&m, 5), 8) && bitwise(db, exectest_out(&m, 6), 8),
        "%s: dgamma or dbeta is not the backward's of the rounded z", dt);
  free(zr), free(want), free(gm), free(dz);
  static const char *const state[] = {"rm", "rv"};
  for (int i = 0; i < 2; i++)
    CHECK(bitwise(exectest_f(f.x, state[i]), exectest_f(m.x, state[i]), 8), "%s: running statistic %s differs", dt,
          state[i]);
done:
  exectest_close(&f);
  exectest_close(&m);
}

/* A graph that must not read. */
static void check_refused(const char *what, const char *text) {
  Arena a;
  arena_init(&a);
  fprintf(stderr, "(expected error for %s follows)\n", what);
  CHECK(exectest_read(&a, text) == NULL, "%s: accepted", what);
  arena_free(&a);
}

int main(void) {
  check_mixed("f16");
  check_mixed("bf16");
  check_refused("y_dtype=i32",
                "graph e {\n" DECLS("f32") "  %2, %3, %4, %5 = " CONV " y_dtype=i32} : f32[N,3,3,8] NHWC, "
                                           "i32[N,3,3,8] NHWC, f32[8], f32[8]\n  output %3\n}\n");
  check_refused(
      "an f32 residual beside an f16 y",
      "graph e {\n" DECLS(
          "f32") "  input %2 r : f32[N,3,3,8] NHWC\n"
                 "  %3, %4, %5, %6 = conv2d_bn_train(%0, @w, @g, @b, @rm, @rv, %2) {k=3x3 s=2x2 p=1x1 d=1x1 groups=1 "
                 "eps=1e-05 momentum=0.1 relu=1 y_dtype=f16} : f32[N,3,3,8] NHWC, f16[N,3,3,8] NHWC, f32[8], f32[8]\n"
                 "  output %4\n}\n");
  check_refused("y_dtype on batchnorm_relu_bwd",
                "graph e {\n" DECLS("f32") "  %2, %3, %4, %5 = " CONV "} : f32[N,3,3,8] NHWC, f32[N,3,3,8] NHWC, "
                                           "f32[8], f32[8]\n  %6, %7, %8 = " BWD
                                           " {y_dtype=f16} : f32[N,3,3,8] NHWC, f32[8], f32[8]\n"
                                           "  output %6\n}\n");
  return check_report();
}
