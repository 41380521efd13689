/* test_conv.c - conv2d: the im2col+GEMM kernels against the direct-loop
 * oracle on many shapes (stride, asymmetric padding, dilation, groups, 1x1,
 * 7x7, odd sizes) in every activation/filter layout pairing; the oracle
 * against a hand-computed case, against itself across layouts, and its
 * backwards against central differences of its forward. */
#include "ref_test.h"

typedef struct Case {
  int N, C, H, W, K, R, S, sh, sw, pt, pl, pb, pr, dh, dw, groups;
} Case;

static const Case CASES[] = {
    /* N  C  H   W  K  R  S sh sw pt pl pb pr dh dw g */
    {2, 3, 9, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},   {1, 4, 8, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},
    {2, 8, 6, 6, 8, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},   /* pointwise */
    {2, 8, 7, 5, 4, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1},   /* 1x1 stride 2 */
    {1, 3, 15, 13, 5, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1}, /* stem-like 7x7 */
    {2, 6, 9, 8, 6, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1},   /* dilation 2 */
    {2, 6, 7, 7, 9, 3, 3, 1, 2, 1, 0, 2, 1, 1, 1, 3},   /* groups, asym pad */
    {1, 8, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 8},   /* depthwise */
    {1, 8, 5, 6, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2},   /* grouped pointwise */
    {3, 5, 11, 5, 7, 2, 3, 3, 1, 0, 1, 1, 0, 1, 2, 1},  /* odd everything */
    {1, 2, 4, 4, 3, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1},   /* kernel > input */
};

static void shapes(const Case *c, RtRefLayout al, RtRefLayout fl, RtRefAct *xs, RtRefFilter *wf, RtRefConvParam *p,
                   RtRefAct *ys) {
  *xs = (RtRefAct){c->N, c->C, c->H, c->W, al};
  *wf = (RtRefFilter){c->K, c->C / c->groups, c->R, c->S, fl};
  *p = (RtRefConvParam){c->sh, c->sw, c->pt, c->pl, c->pb, c->pr, c->dh, c->dw, c->groups};
  int rc = rt_ref_conv2d_out_shape(xs, wf, p, ys);
  CHECK(rc == RT_REF_OK, "out_shape rc %d", rc);
}

/* Fast kernels against the oracle for one case and layout pair. */
static void fast_vs_naive(const Case *c, RtRefLayout al, RtRefLayout fl, int own_ws) {
  RtRefAct xs, ys;
  RtRefFilter wf;
  RtRefConvParam p;
  shapes(c, al, fl, &xs, &wf, &p, &ys);
  int64_t nx = rt_ref_act_count(&xs), ny = rt_ref_act_count(&ys);
  int64_t nw = (int64_t)wf.K * wf.C * wf.R * wf.S;
  float *x = rand_array(nx, -1, 1), *w = rand_array(nw, -1, 1);
  float *b = rand_array(c->K, -1, 1), *dy = rand_array(ny, -1, 1);
  float *y0 = zero_array(ny), *y1 = zero_array(ny);
  float *dx0 = zero_array(nx), *dx1 = rand_array(nx, -9, 9);
  float *dw0 = zero_array(nw), *dw1 = rand_array(nw, -9, 9);
  float *db0 = zero_array(c->K), *db1 = zero_array(c->K);
  int64_t nws = rt_ref_conv2d_workspace(&xs, &wf, &ys, &p);
  float *ws = own_ws ? zero_array(nws) : NULL;
  char what[160];
  snprintf(what, sizeof what, "conv N%d C%d %dx%d K%d %dx%d s%dx%d p%d,%d,%d,%d d%dx%d g%d %s/%s%s", c->N, c->C, c->H,
           c->W, c->K, c->R, c->S, c->sh, c->sw, c->pt, c->pl, c->pb, c->pr, c->dh, c->dw, c->groups,
           al == RT_REF_NHWC ? "NHWC" : "NCHW", fl == RT_REF_KRSC ? "KRSC" : "KCRS", own_ws ? " ws" : "");
  CHECK(rt_ref_conv2d_fwd_naive(&xs, x, &wf, w, b, &p, &ys, y0) == 0, "%s", what);
  CHECK(rt_ref_conv2d_fwd(&xs, x, &wf, w, b, &p, &ys, y1, ws) == 0, "%s", what);
  CHECK(rt_ref_conv2d_bwd_data_naive(&xs, dx0, &wf, w, &p, &ys, dy) == 0, "%s", what);
  CHECK(rt_ref_conv2d_bwd_data(&xs, dx1, &wf, w, &p, &ys, dy, ws) == 0, "%s", what);
  CHECK(rt_ref_conv2d_bwd_weight_naive(&xs, x, &wf, dw0, db0, &p, &ys, dy) == 0, "%s", what);
  CHECK(rt_ref_conv2d_bwd_weight(&xs, x, &wf, dw1, db1, &p, &ys, dy, ws) == 0, "%s", what);
  char sub[200];
  snprintf(sub, sizeof sub, "%s fwd", what);
  compare_arrays(sub, y1, y0, ny, 1e-5);
  snprintf(sub, sizeof sub, "%s bwd_data", what);
  compare_arrays(sub, dx1, dx0, nx, 1e-5);
  snprintf(sub, sizeof sub, "%s bwd_weight", what);
  compare_arrays(sub, dw1, dw0, nw, 1e-5);
  snprintf(sub, sizeof sub, "%s bwd_bias", what);
  compare_arrays(sub, db1, db0, c->K, 1e-5);
  free(x), free(w), free(b), free(dy), free(y0), free(y1), free(dx0), free(dx1);
  free(dw0), free(dw1), free(db0), free(db1), free(ws);
}

static Case random_case(void) {
  Case c;
  c.groups = rng_int(1, 3);
  c.N = rng_int(1, 3);
  c.C = c.groups * rng_int(1, 4);
  c.K = c.groups * rng_int(1, 4);
  c.R = rng_int(1, 5), c.S = rng_int(1, 5);
  c.sh = rng_int(1, 3), c.sw = rng_int(1, 3);
  c.dh = rng_int(1, 2), c.dw = rng_int(1, 2);
  c.pt = rng_int(0, 2), c.pb = rng_int(0, 2), c.pl = rng_int(0, 2), c.pr = rng_int(0, 2);
  int rh = c.dh * (c.R - 1) + 1, rw = c.dw * (c.S - 1) + 1;
  c.H = rng_int(rh > 2 ? rh : 2, rh + 9);
  c.W = rng_int(rw > 2 ? rw : 2, rw + 9);
  return c;
}

/* The oracle on a case small enough to do by hand: one 3x3 image, one 2x2
 * filter, padding 1 on the left/top only, stride 2. */
static void hand_case(void) {
  RtRefAct xs = {1, 1, 3, 3, RT_REF_NCHW}, ys = {1, 1, 2, 2, RT_REF_NCHW};
  RtRefFilter wf = {1, 1, 2, 2, RT_REF_KCRS};
  RtRefConvParam p = {2, 2, 1, 1, 0, 0, 1, 1, 1};
  const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 10, 100, 1000};
  const float b[1] = {0.5f};
  /* y[0,0]: only w[1,1]*x[0,0]; y[0,1]: w[1,0]*x[0,1] + w[1,1]*x[0,2];
   * y[1,0]: w[0,1]*x[1,0] + w[1,1]*x[2,0]; y[1,1]: all four taps at (1,1) */
  const float want[4] = {1000.5f, 3200.5f, 7040.5f, 5 + 60 + 800 + 9000 + 0.5f};
  float y[4], y2[4];
  CHECK(rt_ref_conv2d_fwd_naive(&xs, x, &wf, w, b, &p, &ys, y) == 0, "hand naive");
  CHECK(rt_ref_conv2d_fwd(&xs, x, &wf, w, b, &p, &ys, y2, NULL) == 0, "hand fast");
  for (int i = 0; i < 4; i++) {
    CHECK_CLOSE(y[i], want[i], 1e-7, "hand naive");
    CHECK_CLOSE(y2[i], want[i], 1e-7, "hand fast");
  }
}

/* The oracle in NHWC/KRSC gives the NCHW/KCRS answer, transposed. */
static void layouts_agree(const Case *c) {
  RtRefAct xs, ys, xs2, ys2;
  RtRefFilter wf, wf2;
  RtRefConvParam p;
  shapes(c, RT_REF_NCHW, RT_REF_KCRS, &xs, &wf, &p, &ys);
  shapes(c, RT_REF_NHWC, RT_REF_KRSC, &xs2, &wf2, &p, &ys2);
  int64_t nx = rt_ref_act_count(&xs), ny = rt_ref_act_count(&ys);
  int64_t nw = (int64_t)wf.K * wf.C * wf.R * wf.S;
  float *x = rand_array(nx, -1, 1), *w = rand_array(nw, -1, 1);
  float *x2 = zero_array(nx), *w2 = zero_array(nw), *y = zero_array(ny);
  float *y2 = zero_array(ny), *y2t = zero_array(ny);
  rt_ref_nchw_to_nhwc(xs.N, xs.C, xs.H, xs.W, x, x2);
  rt_ref_nchw_to_nhwc(wf.K, wf.C, wf.R, wf.S, w, w2);
  rt_ref_conv2d_fwd_naive(&xs, x, &wf, w, NULL, &p, &ys, y);
  rt_ref_conv2d_fwd_naive(&xs2, x2, &wf2, w2, NULL, &p, &ys2, y2);
  rt_ref_nhwc_to_nchw(ys.N, ys.C, ys.H, ys.W, y2, y2t);
  compare_arrays("naive NHWC/KRSC vs NCHW/KCRS", y2t, y, ny, 1e-6);
  free(x), free(w), free(x2), free(w2), free(y), free(y2), free(y2t);
}

typedef struct ConvCtx {
  RtRefAct xs, ys;
  RtRefFilter wf;
  RtRefConvParam p;
  float *x, *w, *b;
  int fast, wrt; /* wrt: 0 x, 1 w, 2 bias */
} ConvCtx;

static void conv_as_fn(void *vc, const float *v, float *y) {
  ConvCtx *c = vc;
  const float *x = c->wrt == 0 ? v : c->x, *w = c->wrt == 1 ? v : c->w;
  const float *b = c->wrt == 2 ? v : c->b;
  if (c->fast)
    rt_ref_conv2d_fwd(&c->xs, x, &c->wf, w, b, &c->p, &c->ys, y, NULL);
  else
    rt_ref_conv2d_fwd_naive(&c->xs, x, &c->wf, w, b, &c->p, &c->ys, y);
}

static void conv_grad_check(const Case *cs, RtRefLayout al, RtRefLayout fl, int fast) {
  ConvCtx c = {0};
  shapes(cs, al, fl, &c.xs, &c.wf, &c.p, &c.ys);
  c.fast = fast;
  int64_t nx = rt_ref_act_count(&c.xs), ny = rt_ref_act_count(&c.ys);
  int64_t nw = (int64_t)c.wf.K * c.wf.C * c.wf.R * c.wf.S;
  c.x = rand_array(nx, -1, 1), c.w = rand_array(nw, -1, 1), c.b = rand_array(cs->K, -1, 1);
  float *r = rand_array(ny, -1, 1), *dx = zero_array(nx), *dw = zero_array(nw);
  float *db = zero_array(cs->K);
  if (fast) {
    rt_ref_conv2d_bwd_data(&c.xs, dx, &c.wf, c.w, &c.p, &c.ys, r, NULL);
    rt_ref_conv2d_bwd_weight(&c.xs, c.x, &c.wf, dw, db, &c.p, &c.ys, r, NULL);
  } else {
    rt_ref_conv2d_bwd_data_naive(&c.xs, dx, &c.wf, c.w, &c.p, &c.ys, r);
    rt_ref_conv2d_bwd_weight_naive(&c.xs, c.x, &c.wf, dw, db, &c.p, &c.ys, r);
  }
  const char *tag = fast ? "fast" : "naive";
  char what[64];
  c.wrt = 0;
  snprintf(what, sizeof what, "%s conv dx", tag);
  grad_check(what, conv_as_fn, &c, c.x, nx, ny, r, dx, 0.05f, 1e-4, 60);
  c.wrt = 1;
  snprintf(what, sizeof what, "%s conv dw", tag);
  grad_check(what, conv_as_fn, &c, c.w, nw, ny, r, dw, 0.05f, 1e-4, 60);
  c.wrt = 2;
  snprintf(what, sizeof what, "%s conv dbias", tag);
  grad_check(what, conv_as_fn, &c, c.b, cs->K, ny, r, db, 0.05f, 1e-4, 60);
  free(c.x), free(c.w), free(c.b), free(r), free(dx), free(dw), free(db);
}

static void bad_shapes(void) {
  RtRefAct xs = {1, 4, 5, 5, RT_REF_NCHW}, ys;
  RtRefFilter wf = {6, 2, 3, 3, RT_REF_KCRS};
  RtRefConvParam p = {1, 1, 0, 0, 0, 0, 1, 1, 2};
  CHECK(rt_ref_conv2d_out_shape(&xs, &wf, &p, &ys) == 0, "grouped shape");
  CHECK(ys.C == 6 && ys.H == 3 && ys.W == 3, "out shape %d %d %d", ys.C, ys.H, ys.W);
  float buf[200] = {0};
  RtRefAct wrong = ys;
  wrong.H = 4;
  CHECK(rt_ref_conv2d_fwd(&xs, buf, &wf, buf, NULL, &p, &wrong, buf, NULL) == RT_REF_ESHAPE, "wrong output shape");
  p.groups = 3; /* 4 channels do not split into 3 groups of 2 */
  CHECK(rt_ref_conv2d_out_shape(&xs, &wf, &p, &ys) == RT_REF_ESHAPE, "groups");
  p.groups = 2;
  wf.R = 7; /* larger than the unpadded input */
  CHECK(rt_ref_conv2d_out_shape(&xs, &wf, &p, &ys) == RT_REF_ESHAPE, "kernel too big");
  wf.R = 3;
  p.stride_h = 0;
  CHECK(rt_ref_conv2d_out_shape(&xs, &wf, &p, &ys) == RT_REF_ESHAPE, "stride 0");
}

int main(void) {
  const RtRefLayout al[2] = {RT_REF_NCHW, RT_REF_NHWC};
  const RtRefLayout fl[2] = {RT_REF_KCRS, RT_REF_KRSC};
  hand_case();
  bad_shapes();
  int ncases = (int)(sizeof CASES / sizeof CASES[0]);
  for (int i = 0; i < ncases; i++) {
    for (int a = 0; a < 2; a++)
      for (int f = 0; f < 2; f++) fast_vs_naive(&CASES[i], al[a], fl[f], i % 2);
    layouts_agree(&CASES[i]);
  }
  for (int i = 0; i < 40; i++) {
    Case c = random_case();
    fast_vs_naive(&c, al[i % 2], fl[(i / 2) % 2], i % 3 == 0);
    if (i % 4 == 0) layouts_agree(&c);
  }
  conv_grad_check(&CASES[6], RT_REF_NCHW, RT_REF_KCRS, 0);
  conv_grad_check(&CASES[5], RT_REF_NHWC, RT_REF_KRSC, 0);
  conv_grad_check(&CASES[1], RT_REF_NCHW, RT_REF_KRSC, 1);
  conv_grad_check(&CASES[9], RT_REF_NHWC, RT_REF_KCRS, 1);
  return check_report();
}
