/* rt_ref_conv.c - 2-D convolution, forward and both backwards, as im2col +
 * cblas_sgemm, one image and one group at a time.
 *
 * The column buffer's orientation follows the activation layout, its row
 * order (the reduction index q) follows the filter layout, so every filter
 * group is a plain [Kg, Q] matrix whatever the layouts:
 *   NCHW: col is [Q, P]  and  y_g[Kg, P] = W_g[Kg, Q] col[Q, P]
 *   NHWC: col is [P, Q]  and  y_g[P, Kg] = col[P, Q] W_g^T   (ldc = K)
 * with P = Ho*Wo and q = (c, r, s) for KCRS, (r, s, c) for KRSC.  A 1x1,
 * stride-1, unpadded convolution needs no columns: x already is one.
 * rt_ref_conv_naive.c holds the direct loops these are tested against. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "rt_ref.h"

typedef struct ConvGeo {
  int N, C, H, W, K, Cg, Kg, R, S, Ho, Wo, G;
  int sh, sw, pt, pl, dh, dw;
  int64_t P, Q;
  int nhwc, krsc, pointwise;
} ConvGeo;

static int is_act_layout(RtRefLayout l) { return l == RT_REF_NCHW || l == RT_REF_NHWC; }

static int conv_out_dim(int in, int pad0, int pad1, int k, int dil, int st) {
  int span = in + pad0 + pad1 - dil * (k - 1) - 1;
  return span < 0 ? -1 : span / st + 1;
}

int rt_ref_conv2d_out_shape(const RtRefAct *x, const RtRefFilter *w, const RtRefConvParam *p, RtRefAct *y) {
  if (!x || !w || !p || !y) return RT_REF_EARG;
  if (x->N <= 0 || x->C <= 0 || x->H <= 0 || x->W <= 0 || w->K <= 0 || w->C <= 0 || w->R <= 0 || w->S <= 0 ||
      !is_act_layout(x->layout) || (w->layout != RT_REF_KCRS && w->layout != RT_REF_KRSC))
    return RT_REF_ESHAPE;
  if (p->stride_h < 1 || p->stride_w < 1 || p->dil_h < 1 || p->dil_w < 1 || p->pad_top < 0 || p->pad_left < 0 ||
      p->pad_bottom < 0 || p->pad_right < 0 || p->groups < 1)
    return RT_REF_ESHAPE;
  if ((int64_t)w->C * p->groups != x->C || w->K % p->groups) return RT_REF_ESHAPE;
  int ho = conv_out_dim(x->H, p->pad_top, p->pad_bottom, w->R, p->dil_h, p->stride_h);
  int wo = conv_out_dim(x->W, p->pad_left, p->pad_right, w->S, p->dil_w, p->stride_w);
  if (ho < 1 || wo < 1) return RT_REF_ESHAPE;
  y->N = x->N;
  y->C = w->K;
  y->H = ho;
  y->W = wo;
  y->layout = x->layout;
  return RT_REF_OK;
}

static int conv_geo(const RtRefAct *xs, const RtRefFilter *wf, const RtRefConvParam *p, const RtRefAct *ys,
                    ConvGeo *g) {
  RtRefAct e;
  int rc = rt_ref_conv2d_out_shape(xs, wf, p, &e);
  if (rc) return rc;
  if (!ys || ys->N != e.N || ys->C != e.C || ys->H != e.H || ys->W != e.W || ys->layout != e.layout)
    return RT_REF_ESHAPE;
  g->N = xs->N, g->C = xs->C, g->H = xs->H, g->W = xs->W;
  g->K = wf->K, g->Cg = wf->C, g->R = wf->R, g->S = wf->S;
  g->G = p->groups, g->Kg = wf->K / p->groups;
  g->Ho = e.H, g->Wo = e.W;
  g->sh = p->stride_h, g->sw = p->stride_w;
  g->pt = p->pad_top, g->pl = p->pad_left;
  g->dh = p->dil_h, g->dw = p->dil_w;
  g->P = (int64_t)e.H * e.W;
  g->Q = (int64_t)wf->C * wf->R * wf->S;
  g->nhwc = xs->layout == RT_REF_NHWC;
  g->krsc = wf->layout == RT_REF_KRSC;
  g->pointwise = g->R == 1 && g->S == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 && p->pad_bottom == 0 &&
                 p->pad_right == 0;
  return RT_REF_OK;
}

int64_t rt_ref_conv2d_workspace(const RtRefAct *x, const RtRefFilter *w, const RtRefAct *y, const RtRefConvParam *p) {
  ConvGeo g;
  if (conv_geo(x, w, p, y, &g)) return 0;
  return g.pointwise ? 0 : g.P * g.Q;
}

/* Output positions o in [*lo, *hi) read input o*st - pad + k*dil inside [0, len). */
static void valid_range(int len, int pad, int k, int dil, int st, int out, int *lo, int *hi) {
  int off = pad - k * dil; /* need o*st >= off and o*st < len + off */
  int a = off <= 0 ? 0 : (off + st - 1) / st;
  int end = len + off;
  int b = end <= 0 ? 0 : (end + st - 1) / st;
  if (b > out) b = out;
  if (a > b) a = b;
  *lo = a;
  *hi = b;
}

static int64_t q_index(const ConvGeo *g, int c, int r, int s) {
  return g->krsc ? ((int64_t)r * g->S + s) * g->Cg + c : ((int64_t)c * g->R + r) * g->S + s;
}

/* col[Q, P] <- image xn (NCHW, channels of group gi). */
static void im2col_nchw(const ConvGeo *g, const float *xn, int gi, float *col) {
  for (int c = 0; c < g->Cg; c++) {
    const float *xc = xn + ((int64_t)gi * g->Cg + c) * g->H * g->W;
    for (int r = 0; r < g->R; r++) {
      int hlo, hhi;
      valid_range(g->H, g->pt, r, g->dh, g->sh, g->Ho, &hlo, &hhi);
      for (int s = 0; s < g->S; s++) {
        int wlo, whi;
        valid_range(g->W, g->pl, s, g->dw, g->sw, g->Wo, &wlo, &whi);
        float *row = col + q_index(g, c, r, s) * g->P;
        for (int oh = 0; oh < g->Ho; oh++) {
          float *dst = row + (int64_t)oh * g->Wo;
          if (oh < hlo || oh >= hhi) {
            memset(dst, 0, sizeof *dst * (size_t)g->Wo);
            continue;
          }
          const float *src = xc + (int64_t)(oh * g->sh - g->pt + r * g->dh) * g->W + s * g->dw - g->pl;
          for (int ow = 0; ow < wlo; ow++) dst[ow] = 0;
          if (g->sw == 1)
            memcpy(dst + wlo, src + wlo, sizeof *dst * (size_t)(whi - wlo));
          else
            for (int ow = wlo; ow < whi; ow++) dst[ow] = src[(int64_t)ow * g->sw];
          for (int ow = whi; ow < g->Wo; ow++) dst[ow] = 0;
        }
      }
    }
  }
}

/* dxn (NCHW, group gi's channels) += col[Q, P] scattered back. */
static void col2im_nchw(const ConvGeo *g, const float *col, int gi, float *dxn) {
  for (int c = 0; c < g->Cg; c++) {
    float *xc = dxn + ((int64_t)gi * g->Cg + c) * g->H * g->W;
    for (int r = 0; r < g->R; r++) {
      int hlo, hhi;
      valid_range(g->H, g->pt, r, g->dh, g->sh, g->Ho, &hlo, &hhi);
      for (int s = 0; s < g->S; s++) {
        int wlo, whi;
        valid_range(g->W, g->pl, s, g->dw, g->sw, g->Wo, &wlo, &whi);
        const float *row = col + q_index(g, c, r, s) * g->P;
        for (int oh = hlo; oh < hhi; oh++) {
          const float *src = row + (int64_t)oh * g->Wo;
          float *dst = xc + (int64_t)(oh * g->sh - g->pt + r * g->dh) * g->W + s * g->dw - g->pl;
          for (int ow = wlo; ow < whi; ow++) dst[(int64_t)ow * g->sw] += src[ow];
        }
      }
    }
  }
}

/* col[P, Q] <- image xn (NHWC, channels of group gi). */
static void im2col_nhwc(const ConvGeo *g, const float *xn, int gi, float *col) {
  for (int oh = 0; oh < g->Ho; oh++) {
    for (int ow = 0; ow < g->Wo; ow++) {
      float *dst = col + ((int64_t)oh * g->Wo + ow) * g->Q;
      for (int r = 0; r < g->R; r++) {
        int ih = oh * g->sh - g->pt + r * g->dh;
        for (int s = 0; s < g->S; s++) {
          int iw = ow * g->sw - g->pl + s * g->dw;
          int inside = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W;
          const float *src = xn + ((int64_t)ih * g->W + iw) * g->C + (int64_t)gi * g->Cg;
          if (g->krsc) {
            float *d = dst + ((int64_t)r * g->S + s) * g->Cg;
            if (inside)
              memcpy(d, src, sizeof *d * (size_t)g->Cg);
            else
              memset(d, 0, sizeof *d * (size_t)g->Cg);
          } else {
            int64_t rs = (int64_t)g->R * g->S, q0 = (int64_t)r * g->S + s;
            for (int c = 0; c < g->Cg; c++) dst[c * rs + q0] = inside ? src[c] : 0.0f;
          }
        }
      }
    }
  }
}

/* dxn (NHWC, group gi's channels) += col[P, Q] scattered back. */
static void col2im_nhwc(const ConvGeo *g, const float *col, int gi, float *dxn) {
  for (int oh = 0; oh < g->Ho; oh++) {
    for (int ow = 0; ow < g->Wo; ow++) {
      const float *src = col + ((int64_t)oh * g->Wo + ow) * g->Q;
      for (int r = 0; r < g->R; r++) {
        int ih = oh * g->sh - g->pt + r * g->dh;
        if (ih < 0 || ih >= g->H) continue;
        for (int s = 0; s < g->S; s++) {
          int iw = ow * g->sw - g->pl + s * g->dw;
          if (iw < 0 || iw >= g->W) continue;
          float *d = dxn + ((int64_t)ih * g->W + iw) * g->C + (int64_t)gi * g->Cg;
          if (g->krsc) {
            const float *q = src + ((int64_t)r * g->S + s) * g->Cg;
            for (int c = 0; c < g->Cg; c++) d[c] += q[c];
          } else {
            int64_t rs = (int64_t)g->R * g->S, q0 = (int64_t)r * g->S + s;
            for (int c = 0; c < g->Cg; c++) d[c] += src[c * rs + q0];
          }
        }
      }
    }
  }
}

/* The columns of image xn, group gi: either x itself (pointwise) or ws
 * filled by im2col.  *ld is the leading dimension of the returned matrix. */
static const float *columns(const ConvGeo *g, const float *xn, int gi, float *ws, int *ld) {
  if (g->pointwise) {
    *ld = g->nhwc ? g->C : (int)g->P;
    return g->nhwc ? xn + (int64_t)gi * g->Cg : xn + (int64_t)gi * g->Cg * g->P;
  }
  if (g->nhwc)
    im2col_nhwc(g, xn, gi, ws);
  else
    im2col_nchw(g, xn, gi, ws);
  *ld = g->nhwc ? (int)g->Q : (int)g->P;
  return ws;
}

static float *workspace(const ConvGeo *g, float *ws, float **owned) {
  *owned = NULL;
  if (ws || g->pointwise) return ws;
  *owned = malloc(sizeof(float) * (size_t)(g->P * g->Q));
  return *owned;
}

int rt_ref_conv2d_fwd(const RtRefAct *xs, const float *x, const RtRefFilter *wf, const float *w, const float *bias,
                      const RtRefConvParam *p, const RtRefAct *ys, float *y, float *ws) {
  ConvGeo g;
  int rc = conv_geo(xs, wf, p, ys, &g);
  if (rc) return rc;
  if (!x || !w || !y) return RT_REF_EARG;
  float *owned, *col = workspace(&g, ws, &owned);
  if (!col && !g.pointwise) return RT_REF_ENOMEM;
  int64_t xstride = (int64_t)g.C * g.H * g.W, ystride = (int64_t)g.K * g.P;
  for (int n = 0; n < g.N; n++) {
    const float *xn = x + n * xstride;
    float *yn = y + n * ystride;
    for (int gi = 0; gi < g.G; gi++) {
      int ld;
      const float *cm = columns(&g, xn, gi, col, &ld);
      const float *wg = w + (int64_t)gi * g.Kg * g.Q;
      if (g.nhwc)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g.P, g.Kg, (int)g.Q, 1.0f, cm, ld, wg, (int)g.Q, 0.0f,
                    yn + (int64_t)gi * g.Kg, g.K);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g.Kg, (int)g.P, (int)g.Q, 1.0f, wg, (int)g.Q, cm, ld,
                    0.0f, yn + (int64_t)gi * g.Kg * g.P, (int)g.P);
    }
    if (!bias) continue;
    if (g.nhwc) {
      for (int64_t i = 0; i < g.P; i++)
        for (int k = 0; k < g.K; k++) yn[i * g.K + k] += bias[k];
    } else {
      for (int k = 0; k < g.K; k++)
        for (int64_t i = 0; i < g.P; i++) yn[k * g.P + i] += bias[k];
    }
  }
  free(owned);
  return RT_REF_OK;
}

int rt_ref_conv2d_bwd_data(const RtRefAct *xs, float *dx, const RtRefFilter *wf, const float *w,
                           const RtRefConvParam *p, const RtRefAct *ys, const float *dy, float *ws) {
  ConvGeo g;
  int rc = conv_geo(xs, wf, p, ys, &g);
  if (rc) return rc;
  if (!dx || !w || !dy) return RT_REF_EARG;
  float *owned, *col = workspace(&g, ws, &owned);
  if (!col && !g.pointwise) return RT_REF_ENOMEM;
  int64_t xstride = (int64_t)g.C * g.H * g.W, ystride = (int64_t)g.K * g.P;
  if (!g.pointwise) memset(dx, 0, sizeof *dx * (size_t)(g.N * xstride));
  for (int n = 0; n < g.N; n++) {
    float *dxn = dx + n * xstride;
    const float *dyn = dy + n * ystride;
    for (int gi = 0; gi < g.G; gi++) {
      const float *wg = w + (int64_t)gi * g.Kg * g.Q;
      /* pointwise: the column matrix is dx itself, written directly */
      float *dcol = col;
      int ld = g.nhwc ? (int)g.Q : (int)g.P;
      if (g.pointwise) {
        dcol = g.nhwc ? dxn + (int64_t)gi * g.Cg : dxn + (int64_t)gi * g.Cg * g.P;
        ld = g.nhwc ? g.C : (int)g.P;
      }
      if (g.nhwc)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g.P, (int)g.Q, g.Kg, 1.0f, dyn + (int64_t)gi * g.Kg,
                    g.K, wg, (int)g.Q, 0.0f, dcol, ld);
      else
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)g.Q, (int)g.P, g.Kg, 1.0f, wg, (int)g.Q,
                    dyn + (int64_t)gi * g.Kg * g.P, (int)g.P, 0.0f, dcol, ld);
      if (g.pointwise) continue;
      if (g.nhwc)
        col2im_nhwc(&g, col, gi, dxn);
      else
        col2im_nchw(&g, col, gi, dxn);
    }
  }
  free(owned);
  return RT_REF_OK;
}

int rt_ref_conv2d_bwd_weight(const RtRefAct *xs, const float *x, const RtRefFilter *wf, float *dw, float *dbias,
                             const RtRefConvParam *p, const RtRefAct *ys, const float *dy, float *ws) {
  ConvGeo g;
  int rc = conv_geo(xs, wf, p, ys, &g);
  if (rc) return rc;
  if (!dy || (dw && !x)) return RT_REF_EARG;
  int64_t xstride = (int64_t)g.C * g.H * g.W, ystride = (int64_t)g.K * g.P;
  if (dbias) {
    for (int k = 0; k < g.K; k++) dbias[k] = 0;
    for (int n = 0; n < g.N; n++) {
      const float *dyn = dy + n * ystride;
      if (g.nhwc) {
        for (int64_t i = 0; i < g.P; i++)
          for (int k = 0; k < g.K; k++) dbias[k] += dyn[i * g.K + k];
      } else {
        for (int k = 0; k < g.K; k++) {
          float acc = 0;
          for (int64_t i = 0; i < g.P; i++) acc += dyn[k * g.P + i];
          dbias[k] += acc;
        }
      }
    }
  }
  if (!dw) return RT_REF_OK;
  float *owned, *col = workspace(&g, ws, &owned);
  if (!col && !g.pointwise) return RT_REF_ENOMEM;
  for (int n = 0; n < g.N; n++) {
    const float *xn = x + n * xstride, *dyn = dy + n * ystride;
    float beta = n ? 1.0f : 0.0f;
    for (int gi = 0; gi < g.G; gi++) {
      int ld;
      const float *cm = columns(&g, xn, gi, col, &ld);
      float *dwg = dw + (int64_t)gi * g.Kg * g.Q;
      if (g.nhwc)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g.Kg, (int)g.Q, (int)g.P, 1.0f, dyn + (int64_t)gi * g.Kg,
                    g.K, cm, ld, beta, dwg, (int)g.Q);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g.Kg, (int)g.Q, (int)g.P, 1.0f,
                    dyn + (int64_t)gi * g.Kg * g.P, (int)g.P, cm, ld, beta, dwg, (int)g.Q);
    }
  }
  free(owned);
  return RT_REF_OK;
}
