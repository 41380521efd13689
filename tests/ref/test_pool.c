/* test_pool.c - max, average and global average pooling: hand cases
 * (PyTorch's numbers), output shapes with ceil_mode, the kernels against a
 * per-tap oracle written here on random shapes in both layouts, the max
 * backward with and without saved indices, and every backward against
 * central differences. */
#include "ref_test.h"

static RtRefPoolParam pool(int k, int s, int pad, int ceil_mode, int incl) {
  return (RtRefPoolParam){k, k, s, s, pad, pad, pad, pad, 1, 1, ceil_mode, incl};
}

static void hand_cases(void) {
  /* 4x4 ramp, 3x3 window, stride 2, pad 1 -> 2x2 */
  RtRefAct xs = {1, 1, 4, 4, RT_REF_NCHW}, ys;
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  RtRefPoolParam p = pool(3, 2, 1, 0, 1);
  CHECK(rt_ref_pool_out_shape(&xs, &p, &ys) == 0 && ys.H == 2 && ys.W == 2, "shape");
  float y[4], dx[16];
  int32_t arg[4];
  rt_ref_maxpool_fwd(&xs, x, &p, &ys, y, arg);
  const float max_want[4] = {5, 7, 13, 15};
  const int32_t arg_want[4] = {5, 7, 13, 15};
  for (int i = 0; i < 4; i++) CHECK(y[i] == max_want[i] && arg[i] == arg_want[i], "max[%d] %g at %d", i, y[i], arg[i]);
  /* avg with padding counted: window at (0,0) covers x[0,1,4,5] of 9 */
  rt_ref_avgpool_fwd(&xs, x, &p, &ys, y);
  const float avg_incl[4] = {10 / 9.0f, 24 / 9.0f, 51 / 9.0f, 90 / 9.0f};
  for (int i = 0; i < 4; i++) CHECK_CLOSE(y[i], avg_incl[i], 1e-6, "avg include pad");
  p.count_include_pad = 0;
  rt_ref_avgpool_fwd(&xs, x, &p, &ys, y);
  const float avg_excl[4] = {10 / 4.0f, 24 / 6.0f, 51 / 6.0f, 90 / 9.0f};
  for (int i = 0; i < 4; i++) CHECK_CLOSE(y[i], avg_excl[i], 1e-6, "avg exclude pad");
  const float dy[4] = {1, 2, 3, 4};
  rt_ref_maxpool_bwd(&xs, x, arg, &p, &ys, dy, dx);
  for (int i = 0; i < 16; i++) {
    float want = i == 5 ? 1 : i == 7 ? 2 : i == 13 ? 3 : i == 15 ? 4 : 0;
    CHECK(dx[i] == want, "maxpool dx[%d] = %g", i, dx[i]);
  }
  /* ties: the first maximum in window order wins */
  float flat[16] = {0};
  rt_ref_maxpool_fwd(&xs, flat, &p, &ys, y, arg);
  CHECK(arg[0] == 0 && arg[3] == 5, "tie argmax %d %d", arg[0], arg[3]);
  flat[6] = NAN;
  rt_ref_maxpool_fwd(&xs, flat, &p, &ys, y, arg);
  CHECK(y[0] == 0 && isnan(y[1]) && y[2] == 0 && isnan(y[3]), "NaN propagates");
  /* ceil_mode: 5 -> 3 with k2 s2; k2 s2 p1 on 5 would give 4 but the last
   * window would start in the bottom padding, so PyTorch gives 3 */
  RtRefAct x5 = {1, 1, 5, 5, RT_REF_NHWC};
  p = pool(2, 2, 0, 0, 1);
  rt_ref_pool_out_shape(&x5, &p, &ys);
  CHECK(ys.H == 2, "floor %d", ys.H);
  p.ceil_mode = 1;
  rt_ref_pool_out_shape(&x5, &p, &ys);
  CHECK(ys.H == 3 && ys.layout == RT_REF_NHWC, "ceil %d", ys.H);
  p = pool(2, 2, 1, 1, 1);
  rt_ref_pool_out_shape(&x5, &p, &ys);
  CHECK(ys.H == 3, "ceil with pad %d", ys.H);
  RtRefAct x6 = {1, 1, 6, 6, RT_REF_NCHW};
  p = pool(3, 2, 1, 1, 1);
  rt_ref_pool_out_shape(&x6, &p, &ys);
  CHECK(ys.H == 4, "ceil 6 k3 s2 p1 %d", ys.H);
  RtRefPoolParam dil = pool(3, 1, 0, 0, 1);
  dil.dil_h = 2;
  RtRefAct ysd;
  rt_ref_pool_out_shape(&x6, &dil, &ysd);
  float x36[36], y36[36];
  CHECK(rt_ref_avgpool_fwd(&x6, x36, &dil, &ysd, y36) == RT_REF_ESHAPE, "avg with dilation");
}

/* Oracle: visits each tap and asks whether it is in the input / padding. */
static void oracle(const RtRefAct *xs, const float *x, const RtRefPoolParam *p, const RtRefAct *ys, float *ymax,
                   float *yavg) {
  for (int n = 0; n < xs->N; n++)
    for (int c = 0; c < xs->C; c++)
      for (int oh = 0; oh < ys->H; oh++)
        for (int ow = 0; ow < ys->W; ow++) {
          double best = -INFINITY, sum = 0;
          int in = 0, padded = 0;
          for (int r = 0; r < p->R; r++)
            for (int s = 0; s < p->S; s++) {
              int ih = oh * p->stride_h - p->pad_top + r * p->dil_h;
              int iw = ow * p->stride_w - p->pad_left + s * p->dil_w;
              if (ih >= -p->pad_top && ih < xs->H + p->pad_bottom && iw >= -p->pad_left && iw < xs->W + p->pad_right)
                padded++;
              if (ih < 0 || ih >= xs->H || iw < 0 || iw >= xs->W) continue;
              double v = x[rt_ref_act_index(xs, n, c, ih, iw)];
              in++;
              sum += v;
              if (v > best) best = v;
            }
          int64_t k = rt_ref_act_index(ys, n, c, oh, ow);
          ymax[k] = (float)best;
          int cnt = p->count_include_pad ? padded : in;
          yavg[k] = cnt ? (float)(sum / cnt) : 0.0f;
        }
}

static void random_cases(void) {
  for (int t = 0; t < 60; t++) {
    RtRefPoolParam p = {rng_int(1, 4), rng_int(1, 4), rng_int(1, 3), rng_int(1, 3), 0, 0, 0, 0, 1, 1,
                        t % 3 == 0,    t % 2};
    /* PyTorch requires pad <= window/2 */
    p.pad_top = rng_int(0, p.R / 2), p.pad_bottom = rng_int(0, p.R / 2);
    p.pad_left = rng_int(0, p.S / 2), p.pad_right = rng_int(0, p.S / 2);
    RtRefAct xs = {rng_int(1, 2), rng_int(1, 4), rng_int(p.R, p.R + 8), rng_int(p.S, p.S + 8),
                   t % 2 ? RT_REF_NHWC : RT_REF_NCHW},
             ys;
    int rc = rt_ref_pool_out_shape(&xs, &p, &ys);
    CHECK(rc == 0, "random shape rc %d", rc);
    if (rc) continue;
    int64_t nx = rt_ref_act_count(&xs), ny = rt_ref_act_count(&ys);
    float *x = rand_array(nx, -1, 1), *y = zero_array(ny), *ym = zero_array(ny);
    float *ya = zero_array(ny), *dy = rand_array(ny, -1, 1);
    float *dx1 = zero_array(nx), *dx2 = zero_array(nx);
    int32_t *arg = malloc(sizeof *arg * (size_t)ny);
    oracle(&xs, x, &p, &ys, ym, ya);
    rt_ref_maxpool_fwd(&xs, x, &p, &ys, y, arg);
    compare_arrays("maxpool vs oracle", y, ym, ny, 0);
    rt_ref_avgpool_fwd(&xs, x, &p, &ys, y);
    compare_arrays("avgpool vs oracle", y, ya, ny, 1e-6);
    rt_ref_maxpool_bwd(&xs, x, arg, &p, &ys, dy, dx1);
    rt_ref_maxpool_bwd(&xs, x, NULL, &p, &ys, dy, dx2);
    compare_arrays("maxpool bwd: indices vs recompute", dx1, dx2, nx, 0);
    /* dilated max pooling */
    p.dil_h = rng_int(1, 2), p.dil_w = rng_int(1, 2);
    if (rt_ref_pool_out_shape(&xs, &p, &ys) == 0) {
      ny = rt_ref_act_count(&ys);
      float *y2 = zero_array(ny), *ym2 = zero_array(ny), *ya2 = zero_array(ny);
      oracle(&xs, x, &p, &ys, ym2, ya2);
      rt_ref_maxpool_fwd(&xs, x, &p, &ys, y2, NULL);
      compare_arrays("dilated maxpool vs oracle", y2, ym2, ny, 0);
      free(y2), free(ym2), free(ya2);
    }
    free(x), free(y), free(ym), free(ya), free(dy), free(dx1), free(dx2), free(arg);
  }
}

typedef struct PoolCtx {
  RtRefAct xs, ys;
  RtRefPoolParam p;
  int kind; /* 0 max, 1 avg, 2 global avg */
} PoolCtx;

static void pool_as_fn(void *vc, const float *x, float *y) {
  PoolCtx *c = vc;
  if (c->kind == 0)
    rt_ref_maxpool_fwd(&c->xs, x, &c->p, &c->ys, y, NULL);
  else if (c->kind == 1)
    rt_ref_avgpool_fwd(&c->xs, x, &c->p, &c->ys, y);
  else
    rt_ref_global_avgpool_fwd(&c->xs, x, y);
}

static void grads(RtRefLayout layout) {
  PoolCtx c = {{2, 3, 7, 6, layout}, {0}, pool(3, 2, 1, 1, 0), 0};
  rt_ref_pool_out_shape(&c.xs, &c.p, &c.ys);
  int64_t nx = rt_ref_act_count(&c.xs), ny = rt_ref_act_count(&c.ys);
  /* distinct values 0.01 apart, shuffled, so no window has a near tie */
  float *x = zero_array(nx), *r = rand_array(ny, -1, 1), *dx = zero_array(nx);
  for (int64_t i = 0; i < nx; i++) x[i] = 0.01f * (float)i;
  for (int64_t i = nx - 1; i > 0; i--) {
    int64_t j = rng_u32() % (uint32_t)(i + 1);
    float t = x[i];
    x[i] = x[j], x[j] = t;
  }
  rt_ref_maxpool_bwd(&c.xs, x, NULL, &c.p, &c.ys, r, dx);
  grad_check("maxpool dx", pool_as_fn, &c, x, nx, ny, r, dx, 1e-3f, 1e-3, (int)nx);
  c.kind = 1;
  rt_ref_avgpool_bwd(&c.xs, dx, &c.p, &c.ys, r);
  grad_check("avgpool (exclude pad) dx", pool_as_fn, &c, x, nx, ny, r, dx, 0.1f, 1e-4, (int)nx);
  c.p.count_include_pad = 1;
  rt_ref_avgpool_bwd(&c.xs, dx, &c.p, &c.ys, r);
  grad_check("avgpool (include pad) dx", pool_as_fn, &c, x, nx, ny, r, dx, 0.1f, 1e-4, (int)nx);
  c.kind = 2;
  float gy[6];
  rt_ref_global_avgpool_fwd(&c.xs, x, gy);
  for (int n = 0; n < 2; n++)
    for (int ch = 0; ch < 3; ch++) {
      double s = 0;
      for (int h = 0; h < 7; h++)
        for (int w = 0; w < 6; w++) s += x[rt_ref_act_index(&c.xs, n, ch, h, w)];
      CHECK_CLOSE(gy[n * 3 + ch], s / 42, 1e-6, "global avgpool");
    }
  rt_ref_global_avgpool_bwd(&c.xs, dx, r);
  grad_check("global avgpool dx", pool_as_fn, &c, x, nx, 6, r, dx, 0.5f, 1e-4, (int)nx);
  free(x), free(r), free(dx);
}

int main(void) {
  hand_cases();
  random_cases();
  grads(RT_REF_NCHW);
  grads(RT_REF_NHWC);
  return check_report();
}
