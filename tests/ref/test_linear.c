/* test_linear.c - y = x w^T + b (w is [out, in], PyTorch): forward and
 * backward against double loops written here, a hand case, and the
 * backward against central differences. */
#include "ref_test.h"

static void hand_case(void) {
  const float x[2 * 3] = {1, 2, 3, 4, 5, 6}, w[2 * 3] = {1, 0, -1, 0.5f, 0.5f, 0.5f};
  const float b[2] = {10, 20};
  float y[4];
  CHECK(rt_ref_linear_fwd(2, 3, 2, x, w, b, y) == 0, "hand");
  const float want[4] = {8, 23, 8, 27.5f};
  for (int i = 0; i < 4; i++) CHECK(y[i] == want[i], "hand y[%d] = %g", i, y[i]);
  CHECK(rt_ref_linear_fwd(0, 3, 2, x, w, b, y) == RT_REF_ESHAPE, "M = 0");
}

static void against_loops(int M, int I, int O) {
  float *x = rand_array((int64_t)M * I, -1, 1), *w = rand_array((int64_t)O * I, -1, 1);
  float *b = rand_array(O, -1, 1), *dy = rand_array((int64_t)M * O, -1, 1);
  float *y = zero_array((int64_t)M * O), *yw = zero_array((int64_t)M * O);
  float *dx = zero_array((int64_t)M * I), *dxw = zero_array((int64_t)M * I);
  float *dw = zero_array((int64_t)O * I), *dww = zero_array((int64_t)O * I);
  float *db = zero_array(O), *dbw = zero_array(O);
  for (int m = 0; m < M; m++)
    for (int o = 0; o < O; o++) {
      double s = b[o];
      for (int i = 0; i < I; i++) s += (double)x[m * I + i] * w[o * I + i];
      yw[m * O + o] = (float)s;
    }
  for (int m = 0; m < M; m++)
    for (int i = 0; i < I; i++) {
      double s = 0;
      for (int o = 0; o < O; o++) s += (double)dy[m * O + o] * w[o * I + i];
      dxw[m * I + i] = (float)s;
    }
  for (int o = 0; o < O; o++) {
    double sb = 0;
    for (int m = 0; m < M; m++) sb += dy[m * O + o];
    dbw[o] = (float)sb;
    for (int i = 0; i < I; i++) {
      double s = 0;
      for (int m = 0; m < M; m++) s += (double)dy[m * O + o] * x[m * I + i];
      dww[o * I + i] = (float)s;
    }
  }
  rt_ref_linear_fwd(M, I, O, x, w, b, y);
  compare_arrays("linear y", y, yw, (int64_t)M * O, 1e-5);
  rt_ref_linear_bwd(M, I, O, x, w, dy, dx, dw, db);
  compare_arrays("linear dx", dx, dxw, (int64_t)M * I, 1e-5);
  compare_arrays("linear dw", dw, dww, (int64_t)O * I, 1e-5);
  compare_arrays("linear db", db, dbw, O, 1e-5);
  rt_ref_linear_fwd(M, I, O, x, w, NULL, y);
  for (int m = 0; m < M; m++)
    for (int o = 0; o < O; o++) yw[m * O + o] -= b[o];
  compare_arrays("linear y without bias", y, yw, (int64_t)M * O, 1e-5);
  free(x), free(w), free(b), free(dy), free(y), free(yw), free(dx), free(dxw);
  free(dw), free(dww), free(db), free(dbw);
}

typedef struct LinCtx {
  int M, I, O, wrt;
  float *x, *w, *b;
} LinCtx;

static void linear_as_fn(void *vc, const float *v, float *y) {
  LinCtx *c = vc;
  rt_ref_linear_fwd(c->M, c->I, c->O, c->wrt == 0 ? v : c->x, c->wrt == 1 ? v : c->w, c->wrt == 2 ? v : c->b, y);
}

static void grads(void) {
  LinCtx c = {3, 7, 5, 0, NULL, NULL, NULL};
  c.x = rand_array(21, -1, 1), c.w = rand_array(35, -1, 1), c.b = rand_array(5, -1, 1);
  float *r = rand_array(15, -1, 1), dx[21], dw[35], db[5];
  rt_ref_linear_bwd(3, 7, 5, c.x, c.w, r, dx, dw, db);
  grad_check("linear dx", linear_as_fn, &c, c.x, 21, 15, r, dx, 0.25f, 1e-4, 21);
  c.wrt = 1;
  grad_check("linear dw", linear_as_fn, &c, c.w, 35, 15, r, dw, 0.25f, 1e-4, 35);
  c.wrt = 2;
  grad_check("linear db", linear_as_fn, &c, c.b, 5, 15, r, db, 0.25f, 1e-4, 5);
  free(c.x), free(c.w), free(c.b), free(r);
}

int main(void) {
  hand_case();
  against_loops(1, 1, 1);
  against_loops(4, 2048, 10);
  against_loops(32, 512, 1000);
  against_loops(7, 13, 3);
  grads();
  return check_report();
}
