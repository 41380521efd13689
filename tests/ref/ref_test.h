/* ref_test.h - what the reference-kernel tests share: a seeded RNG, array
 * comparison that prints the first disagreements and the largest
 * difference, and a central-difference gradient check.
 *
 * The gradient check treats a kernel as y = f(x) and the scalar loss
 * L = sum_i r_i * y_i (r random, summed in double): the analytic dL/dx
 * comes from the kernel's backward with dy = r, the numeric one from
 * (L(x + eps e_j) - L(x - eps e_j)) / (2 eps) at sampled j. */
#ifndef NETC_REF_TEST_H
#define NETC_REF_TEST_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rt_ref.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static inline uint32_t rng_u32(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 16);
}

/* Uniform in [lo, hi). */
static inline float rng_uniform(float lo, float hi) {
  return lo + (hi - lo) * (float)(rng_u32() >> 8) * (1.0f / 16777216.0f);
}

/* Integer in [lo, hi]. */
static inline int rng_int(int lo, int hi) { return lo + (int)(rng_u32() % (uint32_t)(hi - lo + 1)); }

static inline float *rand_array(int64_t n, float lo, float hi) {
  float *a = malloc(sizeof *a * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) a[i] = rng_uniform(lo, hi);
  return a;
}

static inline float *zero_array(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

/* got vs want: |got - want| <= rtol * max(1e-3, max|want|) + atol/elementwise
 * slack; one CHECK, with the first few disagreements and the largest
 * difference printed when it fails. */
static inline int compare_arrays(const char *what, const float *got, const float *want, int64_t n, double rtol) {
  double scale = 1e-3, worst = 0;
  int64_t worst_i = 0, bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (fabs(want[i]) > scale) scale = fabs(want[i]);
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - want[i]);
    if (!(d <= rtol * scale)) {
      if (bad < 4) fprintf(stderr, "  %s[%lld]: got %.9g want %.9g\n", what, (long long)i, got[i], want[i]);
      bad++;
    }
    if (d > worst || d != d) worst = d, worst_i = i;
  }
  CHECK(bad == 0, "%s: %lld of %lld differ; largest diff %.3g at %lld (scale %.3g)", what, (long long)bad, (long long)n,
        worst, (long long)worst_i, scale);
  return bad == 0;
}

typedef void (*FwdFn)(void *ctx, const float *x, float *y);

static inline double weighted_sum(const float *y, const float *r, int64_t ny) {
  double s = 0;
  for (int64_t i = 0; i < ny; i++) s += (double)y[i] * r[i];
  return s;
}

/* Checks grad (dL/dx, from the backward with dy = r) against central
 * differences of fwd at up to `samples` indices of x (x is restored). */
static inline int grad_check(const char *what, FwdFn fwd, void *ctx, float *x, int64_t nx, int64_t ny, const float *r,
                             const float *grad, float eps, double tol, int samples) {
  float *y = malloc(sizeof *y * (size_t)ny);
  double gscale = 1e-3;
  for (int64_t i = 0; i < nx; i++)
    if (fabs(grad[i]) > gscale) gscale = fabs(grad[i]);
  int bad = 0, count = samples < nx ? samples : (int)nx;
  double worst = 0;
  for (int t = 0; t < count; t++) {
    int64_t j = samples < nx ? (int64_t)(rng_u32() % (uint32_t)nx) : t;
    float keep = x[j], xp = keep + eps, xm = keep - eps;
    x[j] = xp;
    fwd(ctx, x, y);
    double lp = weighted_sum(y, r, ny);
    x[j] = xm;
    fwd(ctx, x, y);
    double lm = weighted_sum(y, r, ny);
    x[j] = keep;
    double num = (lp - lm) / ((double)xp - xm);
    double d = fabs(num - grad[j]);
    if (d > worst) worst = d;
    if (!(d <= tol * gscale)) {
      if (bad < 4) fprintf(stderr, "  %s: d/dx[%lld] analytic %.7g numeric %.7g\n", what, (long long)j, grad[j], num);
      bad++;
    }
  }
  CHECK(bad == 0, "%s: %d of %d gradient samples off; largest diff %.3g (scale %.3g)", what, bad, count, worst, gscale);
  free(y);
  return bad == 0;
}

#endif
