/* rt_ref_eltwise.c - the elementwise ops: relu, add, the fused add+relu of a
 * residual join, their backwards, loss scaling and the inf/NaN check that
 * mixed-precision training runs on its gradients.  Outputs may alias
 * inputs; nothing here allocates.
 *
 * relu zeroes what is <= 0 and keeps the rest, NaN included, as PyTorch's
 * relu and threshold_backward do: `v <= 0 ? 0 : v`, never `v > 0 ? v : 0`
 * (which turns NaN into 0) or fmaxf (which drops NaN).  Every relu in netc
 * (the batch-norm prologue and mask, the CUDA templates) uses this form. */
#include <math.h>

#include "rt_ref.h"

int rt_ref_relu_fwd(int64_t n, const float *x, float *y) {
  if (n < 0) return RT_REF_ESHAPE;
  if (n && (!x || !y)) return RT_REF_EARG;
  for (int64_t i = 0; i < n; i++) y[i] = x[i] <= 0 ? 0.0f : x[i];
  return RT_REF_OK;
}

int rt_ref_relu_bwd(int64_t n, const float *y, const float *dy, float *dx) {
  if (n < 0) return RT_REF_ESHAPE;
  if (n && (!y || !dy || !dx)) return RT_REF_EARG;
  for (int64_t i = 0; i < n; i++) dx[i] = y[i] <= 0 ? 0.0f : dy[i];
  return RT_REF_OK;
}

int rt_ref_add_fwd(int64_t n, const float *a, const float *b, float *y) {
  if (n < 0) return RT_REF_ESHAPE;
  if (n && (!a || !b || !y)) return RT_REF_EARG;
  for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
  return RT_REF_OK;
}

int rt_ref_add_bwd(int64_t n, const float *dy, float *da, float *db) {
  if (n < 0) return RT_REF_ESHAPE;
  if (n && !dy) return RT_REF_EARG;
  for (int64_t i = 0; i < n; i++) {
    if (da) da[i] = dy[i];
    if (db) db[i] = dy[i];
  }
  return RT_REF_OK;
}

int rt_ref_add_relu_fwd(int64_t n, const float *a, const float *b, float *y) {
  if (n < 0) return RT_REF_ESHAPE;
  if (n && (!a || !b || !y)) return RT_REF_EARG;
  for (int64_t i = 0; i < n; i++) {
    float s = a[i] + b[i];
    y[i] = s <= 0 ? 0.0f : s;
  }
  return RT_REF_OK;
}

int rt_ref_add_relu_bwd(int64_t n, const float *y, const float *dy, float *dsum) {
  return rt_ref_relu_bwd(n, y, dy, dsum);
}

int rt_ref_scale(int64_t n, float *x, float s) {
  if (n < 0) return RT_REF_ESHAPE;
  if (n && !x) return RT_REF_EARG;
  for (int64_t i = 0; i < n; i++) x[i] *= s;
  return RT_REF_OK;
}

int rt_ref_has_nonfinite(int64_t n, const float *x) {
  /* x - x is 0 for finite x and NaN for inf and NaN: one branch-free pass */
  float acc = 0;
  for (int64_t i = 0; i < n; i++) acc += x[i] - x[i];
  return isnan(acc) ? 1 : 0;
}
