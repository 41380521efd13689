/* test_eltwise.c - relu, add, fused add+relu and their backwards (values by
 * hand and central differences), loss scaling, and the inf/NaN check. */
#include <float.h>

#include "ref_test.h"

static void values(void) {
  const float a[5] = {-2, -0.5f, 0, 0.5f, 3}, b[5] = {1, 1, 1, -1, -4};
  const float dy[5] = {10, 20, 30, 40, 50};
  float y[5], d[5], da[5], db[5];
  CHECK(rt_ref_relu_fwd(5, a, y) == 0, "relu");
  const float relu_want[5] = {0, 0, 0, 0.5f, 3};
  for (int i = 0; i < 5; i++) CHECK(y[i] == relu_want[i], "relu[%d] = %g", i, y[i]);
  rt_ref_relu_bwd(5, y, dy, d);
  const float drelu_want[5] = {0, 0, 0, 40, 50}; /* relu'(0) = 0, as PyTorch */
  for (int i = 0; i < 5; i++) CHECK(d[i] == drelu_want[i], "drelu[%d] = %g", i, d[i]);
  rt_ref_add_fwd(5, a, b, y);
  for (int i = 0; i < 5; i++) CHECK(y[i] == a[i] + b[i], "add[%d]", i);
  rt_ref_add_bwd(5, dy, da, db);
  for (int i = 0; i < 5; i++) CHECK(da[i] == dy[i] && db[i] == dy[i], "dadd[%d]", i);
  CHECK(rt_ref_add_bwd(5, dy, NULL, db) == 0, "add_bwd with one gradient");
  rt_ref_add_relu_fwd(5, a, b, y);
  const float ar_want[5] = {0, 0.5f, 1, 0, 0};
  for (int i = 0; i < 5; i++) CHECK(y[i] == ar_want[i], "add_relu[%d] = %g", i, y[i]);
  rt_ref_add_relu_bwd(5, y, dy, d);
  const float dar_want[5] = {0, 20, 30, 0, 0};
  for (int i = 0; i < 5; i++) CHECK(d[i] == dar_want[i], "dadd_relu[%d] = %g", i, d[i]);
  float inplace[5] = {-1, 2, -3, 4, -5};
  rt_ref_relu_fwd(5, inplace, inplace);
  CHECK(inplace[0] == 0 && inplace[1] == 2 && inplace[4] == 0, "relu in place");
  float s[3] = {1, -2, 4};
  rt_ref_scale(3, s, 0.5f);
  CHECK(s[0] == 0.5f && s[1] == -1 && s[2] == 2, "scale");
  CHECK(rt_ref_relu_fwd(-1, a, y) == RT_REF_ESHAPE, "negative count");
}

static void nonfinite(void) {
  float v[6] = {1, -FLT_MAX, FLT_MAX, 0, -0.0f, FLT_MIN / 4};
  CHECK(rt_ref_has_nonfinite(6, v) == 0, "finite values");
  CHECK(rt_ref_has_nonfinite(0, NULL) == 0, "empty");
  v[3] = INFINITY;
  CHECK(rt_ref_has_nonfinite(6, v) == 1, "+inf");
  v[3] = -INFINITY;
  CHECK(rt_ref_has_nonfinite(6, v) == 1, "-inf");
  v[3] = NAN;
  CHECK(rt_ref_has_nonfinite(6, v) == 1, "nan");
  v[3] = 0;
  v[5] = -NAN;
  CHECK(rt_ref_has_nonfinite(6, v) == 1, "-nan at the end");
}

/* relu keeps NaN as PyTorch does (torch.relu(nan) = nan), and a NaN y
 * passes its gradient (threshold_backward: y <= 0 ? 0 : dy); -0 is zeroed. */
static void nan_propagates(void) {
  const float x[4] = {NAN, -NAN, -0.0f, INFINITY}, dy[4] = {1, 2, 3, 4}, zero[4] = {0};
  float y[4], d[4];
  rt_ref_relu_fwd(4, x, y);
  CHECK(isnan(y[0]) && isnan(y[1]) && y[2] == 0 && !signbit(y[2]) && y[3] == INFINITY,
        "relu(NaN, -NaN, -0, inf) = %g %g %g %g", y[0], y[1], y[2], y[3]);
  rt_ref_relu_bwd(4, y, dy, d);
  CHECK(d[0] == 1 && d[1] == 2 && d[2] == 0 && d[3] == 4, "relu_bwd at NaN = %g %g %g %g", d[0], d[1], d[2], d[3]);
  const float nan_dy[4] = {NAN, NAN, NAN, NAN}, neg[4] = {-1, 1, 0, 2};
  rt_ref_relu_bwd(4, neg, nan_dy, d);
  CHECK(d[0] == 0 && isnan(d[1]) && d[2] == 0 && isnan(d[3]), "relu_bwd of a NaN gradient: masked or kept");
  rt_ref_add_relu_fwd(4, x, zero, y);
  CHECK(isnan(y[0]) && isnan(y[1]) && y[2] == 0 && y[3] == INFINITY, "add_relu keeps NaN");
  const float pinf[1] = {INFINITY}, ninf[1] = {-INFINITY};
  rt_ref_add_relu_fwd(1, pinf, ninf, y);
  CHECK(isnan(y[0]), "add_relu(inf + -inf) = NaN, got %g", y[0]);
  rt_ref_add_relu_bwd(4, x, dy, d);
  CHECK(d[0] == 1 && d[1] == 2 && d[2] == 0, "add_relu_bwd at NaN");
  float inplace[3] = {NAN, -1, 2};
  rt_ref_relu_fwd(3, inplace, inplace);
  CHECK(isnan(inplace[0]) && inplace[1] == 0 && inplace[2] == 2, "relu in place keeps NaN");
}

typedef struct AddCtx {
  int64_t n;
  const float *other;
  int relu;
} AddCtx;

static void add_as_fn(void *vc, const float *x, float *y) {
  AddCtx *c = vc;
  if (c->relu)
    rt_ref_add_relu_fwd(c->n, x, c->other, y);
  else
    rt_ref_add_fwd(c->n, x, c->other, y);
}

static void relu_as_fn(void *vc, const float *x, float *y) { rt_ref_relu_fwd(((AddCtx *)vc)->n, x, y); }

static void grads(void) {
  enum { N = 64 };
  float *x = rand_array(N, -1, 1), *o = rand_array(N, -1, 1), *r = rand_array(N, -1, 1);
  float y[N], dx[N];
  for (int i = 0; i < N; i++) { /* keep clear of relu's kink */
    if (fabsf(x[i]) < 0.05f) x[i] = 0.3f;
    if (fabsf(x[i] + o[i]) < 0.05f) o[i] += 0.2f;
  }
  AddCtx c = {N, o, 0};
  rt_ref_relu_fwd(N, x, y);
  rt_ref_relu_bwd(N, y, r, dx);
  grad_check("relu dx", relu_as_fn, &c, x, N, N, r, dx, 1e-2f, 1e-4, N);
  rt_ref_add_bwd(N, r, dx, NULL);
  grad_check("add da", add_as_fn, &c, x, N, N, r, dx, 1e-2f, 1e-4, N);
  c.relu = 1;
  rt_ref_add_relu_fwd(N, x, o, y);
  rt_ref_add_relu_bwd(N, y, r, dx);
  grad_check("add_relu da", add_as_fn, &c, x, N, N, r, dx, 1e-2f, 1e-4, N);
  free(x), free(o), free(r);
}

int main(void) {
  values();
  nonfinite();
  nan_propagates();
  grads();
  return check_report();
}
