/* rt_ref_pool.c - max, average and global average pooling, forward and
 * backward, PyTorch's MaxPool2d / AvgPool2d / AdaptiveAvgPool2d(1).
 *
 * Both layouts go through one loop: element (n, c, h, w) lives at
 * plane(n, c) + (h*W + w) * step, with step 1 for NCHW and C for NHWC.
 * Max pooling records, per output, h*W + w of the winner in its plane, so
 * the backward can scatter without searching again. */
#include <math.h>
#include <string.h>

#include "rt_ref.h"

typedef struct Planes {
  int64_t hw, step;
  int C;
  int nhwc;
} Planes;

static Planes planes_of(const RtRefAct *a) {
  Planes p = {(int64_t)a->H * a->W, a->layout == RT_REF_NHWC ? a->C : 1, a->C, a->layout == RT_REF_NHWC};
  return p;
}

static int64_t plane_base(const Planes *p, int n, int c) {
  return p->nhwc ? (int64_t)n * p->hw * p->C + c : ((int64_t)n * p->C + c) * p->hw;
}

static int pool_dim(int in, int pad0, int pad1, int k, int dil, int st, int ceil_mode) {
  int span = in + pad0 + pad1 - dil * (k - 1) - 1;
  if (span < 0) return -1;
  int out = (span + (ceil_mode ? st - 1 : 0)) / st + 1;
  /* PyTorch: the last window must start inside the input or its front pad */
  if (ceil_mode && (int64_t)(out - 1) * st >= (int64_t)in + pad0) out--;
  return out;
}

int rt_ref_pool_out_shape(const RtRefAct *x, const RtRefPoolParam *p, RtRefAct *y) {
  if (!x || !p || !y) return RT_REF_EARG;
  if (x->N <= 0 || x->C <= 0 || x->H <= 0 || x->W <= 0 || (x->layout != RT_REF_NCHW && x->layout != RT_REF_NHWC))
    return RT_REF_ESHAPE;
  if (p->R < 1 || p->S < 1 || p->stride_h < 1 || p->stride_w < 1 || p->dil_h < 1 || p->dil_w < 1 || p->pad_top < 0 ||
      p->pad_left < 0 || p->pad_bottom < 0 || p->pad_right < 0)
    return RT_REF_ESHAPE;
  int ho = pool_dim(x->H, p->pad_top, p->pad_bottom, p->R, p->dil_h, p->stride_h, p->ceil_mode);
  int wo = pool_dim(x->W, p->pad_left, p->pad_right, p->S, p->dil_w, p->stride_w, p->ceil_mode);
  if (ho < 1 || wo < 1) return RT_REF_ESHAPE;
  *y = *x;
  y->H = ho;
  y->W = wo;
  return RT_REF_OK;
}

static int pool_check(const RtRefAct *xs, const RtRefPoolParam *p, const RtRefAct *ys) {
  RtRefAct e;
  int rc = rt_ref_pool_out_shape(xs, p, &e);
  if (rc) return rc;
  if (!ys || ys->N != e.N || ys->C != e.C || ys->H != e.H || ys->W != e.W || ys->layout != e.layout)
    return RT_REF_ESHAPE;
  return RT_REF_OK;
}

/* The winner of one max window: plane offset h*W + w, or -1 if none. */
static int32_t window_argmax(const RtRefAct *xs, const float *xp, int64_t step, const RtRefPoolParam *p, int oh,
                             int ow) {
  float best = -INFINITY;
  int32_t arg = -1;
  for (int r = 0; r < p->R; r++) {
    int ih = oh * p->stride_h - p->pad_top + r * p->dil_h;
    if (ih < 0 || ih >= xs->H) continue;
    for (int s = 0; s < p->S; s++) {
      int iw = ow * p->stride_w - p->pad_left + s * p->dil_w;
      if (iw < 0 || iw >= xs->W) continue;
      int32_t at = ih * xs->W + iw;
      float v = xp[at * step];
      if (arg < 0 || v > best || isnan(v)) {
        best = v;
        arg = at;
        if (isnan(v)) return arg;
      }
    }
  }
  return arg;
}

int rt_ref_maxpool_fwd(const RtRefAct *xs, const float *x, const RtRefPoolParam *p, const RtRefAct *ys, float *y,
                       int32_t *argmax) {
  int rc = pool_check(xs, p, ys);
  if (rc) return rc;
  if (!x || !y) return RT_REF_EARG;
  Planes px = planes_of(xs), py = planes_of(ys);
  for (int n = 0; n < xs->N; n++)
    for (int c = 0; c < xs->C; c++) {
      const float *xp = x + plane_base(&px, n, c);
      int64_t yb = plane_base(&py, n, c);
      for (int oh = 0; oh < ys->H; oh++)
        for (int ow = 0; ow < ys->W; ow++) {
          int64_t yi = yb + ((int64_t)oh * ys->W + ow) * py.step;
          int32_t a = window_argmax(xs, xp, px.step, p, oh, ow);
          y[yi] = a < 0 ? -INFINITY : xp[a * px.step];
          if (argmax) argmax[yi] = a;
        }
    }
  return RT_REF_OK;
}

int rt_ref_maxpool_bwd(const RtRefAct *xs, const float *x, const int32_t *argmax, const RtRefPoolParam *p,
                       const RtRefAct *ys, const float *dy, float *dx) {
  int rc = pool_check(xs, p, ys);
  if (rc) return rc;
  if (!dy || !dx || (!argmax && !x)) return RT_REF_EARG;
  Planes px = planes_of(xs), py = planes_of(ys);
  memset(dx, 0, sizeof *dx * (size_t)rt_ref_act_count(xs));
  for (int n = 0; n < xs->N; n++)
    for (int c = 0; c < xs->C; c++) {
      int64_t xb = plane_base(&px, n, c), yb = plane_base(&py, n, c);
      for (int oh = 0; oh < ys->H; oh++)
        for (int ow = 0; ow < ys->W; ow++) {
          int64_t yi = yb + ((int64_t)oh * ys->W + ow) * py.step;
          int32_t a = argmax ? argmax[yi] : window_argmax(xs, x + xb, px.step, p, oh, ow);
          if (a >= 0 && a < px.hw) dx[xb + a * px.step] += dy[yi];
        }
    }
  return RT_REF_OK;
}

/* argmax -> win (to_win) or win -> argmax for every output element. */
static int win_convert(const RtRefAct *xs, const RtRefPoolParam *p, const RtRefAct *ys, int32_t *argmax, float *win,
                       int to_win) {
  int rc = pool_check(xs, p, ys);
  if (rc) return rc;
  if (!argmax || !win) return RT_REF_EARG;
  Planes py = planes_of(ys);
  for (int n = 0; n < ys->N; n++)
    for (int c = 0; c < ys->C; c++) {
      int64_t yb = plane_base(&py, n, c);
      for (int oh = 0; oh < ys->H; oh++)
        for (int ow = 0; ow < ys->W; ow++) {
          int64_t yi = yb + ((int64_t)oh * ys->W + ow) * py.step;
          int h0 = oh * p->stride_h - p->pad_top, w0 = ow * p->stride_w - p->pad_left;
          if (to_win) {
            int32_t a = argmax[yi];
            win[yi] = a < 0 ? -1.0f : (float)((a / xs->W - h0) / p->dil_h * p->S + (a % xs->W - w0) / p->dil_w);
            continue;
          }
          float f = win[yi];
          if (f == -1.0f) {
            argmax[yi] = -1;
            continue;
          }
          if (!(f >= 0 && f < (float)(p->R * p->S)) || f != (float)(int)f) return RT_REF_EARG;
          int k = (int)f, ih = h0 + k / p->S * p->dil_h, iw = w0 + k % p->S * p->dil_w;
          if (ih < 0 || ih >= xs->H || iw < 0 || iw >= xs->W) return RT_REF_EARG;
          argmax[yi] = ih * xs->W + iw;
        }
    }
  return RT_REF_OK;
}

int rt_ref_maxpool_win_of(const RtRefAct *xs, const RtRefPoolParam *p, const RtRefAct *ys, const int32_t *argmax,
                          float *win) {
  return win_convert(xs, p, ys, (int32_t *)argmax, win, 1); /* argmax only read */
}

int rt_ref_maxpool_argmax_of(const RtRefAct *xs, const RtRefPoolParam *p, const RtRefAct *ys, const float *win,
                             int32_t *argmax) {
  return win_convert(xs, p, ys, argmax, (float *)win, 0); /* win only read */
}

/* Window rows [*lo, *hi) inside the input, and its divisor along the axis. */
static int avg_span(int o, int st, int pad0, int pad1, int k, int in, int incl, int *lo, int *hi) {
  int a = o * st - pad0, b = a + k;
  if (b > in + pad1) b = in + pad1;
  int padded = b - a;
  if (a < 0) a = 0;
  if (b > in) b = in;
  *lo = a;
  *hi = b;
  return incl ? padded : (b > a ? b - a : 0);
}

static int avg_check(const RtRefAct *xs, const RtRefPoolParam *p, const RtRefAct *ys) {
  int rc = pool_check(xs, p, ys);
  if (rc) return rc;
  return p->dil_h == 1 && p->dil_w == 1 ? RT_REF_OK : RT_REF_ESHAPE;
}

int rt_ref_avgpool_fwd(const RtRefAct *xs, const float *x, const RtRefPoolParam *p, const RtRefAct *ys, float *y) {
  int rc = avg_check(xs, p, ys);
  if (rc) return rc;
  if (!x || !y) return RT_REF_EARG;
  Planes px = planes_of(xs), py = planes_of(ys);
  int incl = p->count_include_pad;
  for (int n = 0; n < xs->N; n++)
    for (int c = 0; c < xs->C; c++) {
      const float *xp = x + plane_base(&px, n, c);
      int64_t yb = plane_base(&py, n, c);
      for (int oh = 0; oh < ys->H; oh++) {
        int h0, h1, w0, w1;
        int dh = avg_span(oh, p->stride_h, p->pad_top, p->pad_bottom, p->R, xs->H, incl, &h0, &h1);
        for (int ow = 0; ow < ys->W; ow++) {
          int dw = avg_span(ow, p->stride_w, p->pad_left, p->pad_right, p->S, xs->W, incl, &w0, &w1);
          float acc = 0;
          for (int ih = h0; ih < h1; ih++)
            for (int iw = w0; iw < w1; iw++) acc += xp[((int64_t)ih * xs->W + iw) * px.step];
          int64_t cnt = (int64_t)dh * dw;
          y[yb + ((int64_t)oh * ys->W + ow) * py.step] = cnt > 0 ? acc / (float)cnt : 0.0f;
        }
      }
    }
  return RT_REF_OK;
}

int rt_ref_avgpool_bwd(const RtRefAct *xs, float *dx, const RtRefPoolParam *p, const RtRefAct *ys, const float *dy) {
  int rc = avg_check(xs, p, ys);
  if (rc) return rc;
  if (!dx || !dy) return RT_REF_EARG;
  Planes px = planes_of(xs), py = planes_of(ys);
  int incl = p->count_include_pad;
  memset(dx, 0, sizeof *dx * (size_t)rt_ref_act_count(xs));
  for (int n = 0; n < xs->N; n++)
    for (int c = 0; c < xs->C; c++) {
      float *xp = dx + plane_base(&px, n, c);
      int64_t yb = plane_base(&py, n, c);
      for (int oh = 0; oh < ys->H; oh++) {
        int h0, h1, w0, w1;
        int dh = avg_span(oh, p->stride_h, p->pad_top, p->pad_bottom, p->R, xs->H, incl, &h0, &h1);
        for (int ow = 0; ow < ys->W; ow++) {
          int dw = avg_span(ow, p->stride_w, p->pad_left, p->pad_right, p->S, xs->W, incl, &w0, &w1);
          int64_t cnt = (int64_t)dh * dw;
          if (cnt <= 0) continue;
          float g = dy[yb + ((int64_t)oh * ys->W + ow) * py.step] / (float)cnt;
          for (int ih = h0; ih < h1; ih++)
            for (int iw = w0; iw < w1; iw++) xp[((int64_t)ih * xs->W + iw) * px.step] += g;
        }
      }
    }
  return RT_REF_OK;
}

static int gap_check(const RtRefAct *xs) {
  return xs && xs->N > 0 && xs->C > 0 && xs->H > 0 && xs->W > 0 &&
         (xs->layout == RT_REF_NCHW || xs->layout == RT_REF_NHWC);
}

int rt_ref_global_avgpool_fwd(const RtRefAct *xs, const float *x, float *y) {
  if (!gap_check(xs)) return RT_REF_ESHAPE;
  if (!x || !y) return RT_REF_EARG;
  Planes px = planes_of(xs);
  int C = xs->C;
  if (px.nhwc) {
    for (int n = 0; n < xs->N; n++) {
      float *yn = y + (int64_t)n * C;
      const float *xn = x + (int64_t)n * px.hw * C;
      for (int c = 0; c < C; c++) yn[c] = 0;
      for (int64_t i = 0; i < px.hw; i++)
        for (int c = 0; c < C; c++) yn[c] += xn[i * C + c];
      for (int c = 0; c < C; c++) yn[c] /= (float)px.hw;
    }
    return RT_REF_OK;
  }
  for (int64_t nc = 0; nc < (int64_t)xs->N * C; nc++) {
    const float *xp = x + nc * px.hw;
    double acc = 0;
    for (int64_t i = 0; i < px.hw; i++) acc += xp[i];
    y[nc] = (float)(acc / (double)px.hw);
  }
  return RT_REF_OK;
}

int rt_ref_global_avgpool_bwd(const RtRefAct *xs, float *dx, const float *dy) {
  if (!gap_check(xs)) return RT_REF_ESHAPE;
  if (!dx || !dy) return RT_REF_EARG;
  Planes px = planes_of(xs);
  int C = xs->C;
  float inv = 1.0f / (float)px.hw;
  if (px.nhwc) {
    for (int n = 0; n < xs->N; n++)
      for (int64_t i = 0; i < px.hw; i++)
        for (int c = 0; c < C; c++) dx[((int64_t)n * px.hw + i) * C + c] = dy[(int64_t)n * C + c] * inv;
    return RT_REF_OK;
  }
  for (int64_t nc = 0; nc < (int64_t)xs->N * C; nc++)
    for (int64_t i = 0; i < px.hw; i++) dx[nc * px.hw + i] = dy[nc] * inv;
  return RT_REF_OK;
}
