/* rt_ref_conv_naive.c - 2-D convolution as the definition reads: direct
 * loops over every output and tap, accumulated in double.  Slow on purpose;
 * it is the oracle the im2col kernels of rt_ref_conv.c (and the GPU's) are
 * tested against, so it shares nothing with them but the index helpers. */
#include <stdlib.h>

#include "rt_ref.h"

static int check_shapes(const RtRefAct *xs, const RtRefFilter *wf, const RtRefConvParam *p, const RtRefAct *ys) {
  RtRefAct e;
  int rc = rt_ref_conv2d_out_shape(xs, wf, p, &e);
  if (rc) return rc;
  if (!ys || ys->N != e.N || ys->C != e.C || ys->H != e.H || ys->W != e.W || ys->layout != e.layout)
    return RT_REF_ESHAPE;
  return RT_REF_OK;
}

/* Input row/column a tap reads, or -1 when it falls in the padding. */
static int tap(int o, int st, int pad, int k, int dil, int len) {
  int i = o * st - pad + k * dil;
  return i >= 0 && i < len ? i : -1;
}

int rt_ref_conv2d_fwd_naive(const RtRefAct *xs, const float *x, const RtRefFilter *wf, const float *w,
                            const float *bias, const RtRefConvParam *p, const RtRefAct *ys, float *y) {
  int rc = check_shapes(xs, wf, p, ys);
  if (rc) return rc;
  if (!x || !w || !y) return RT_REF_EARG;
  int Kg = wf->K / p->groups;
  for (int n = 0; n < ys->N; n++)
    for (int k = 0; k < ys->C; k++)
      for (int oh = 0; oh < ys->H; oh++)
        for (int ow = 0; ow < ys->W; ow++) {
          double acc = bias ? bias[k] : 0.0;
          int c0 = (k / Kg) * wf->C;
          for (int c = 0; c < wf->C; c++)
            for (int r = 0; r < wf->R; r++) {
              int ih = tap(oh, p->stride_h, p->pad_top, r, p->dil_h, xs->H);
              if (ih < 0) continue;
              for (int s = 0; s < wf->S; s++) {
                int iw = tap(ow, p->stride_w, p->pad_left, s, p->dil_w, xs->W);
                if (iw < 0) continue;
                acc += (double)x[rt_ref_act_index(xs, n, c0 + c, ih, iw)] * w[rt_ref_filter_index(wf, k, c, r, s)];
              }
            }
          y[rt_ref_act_index(ys, n, k, oh, ow)] = (float)acc;
        }
  return RT_REF_OK;
}

int rt_ref_conv2d_bwd_data_naive(const RtRefAct *xs, float *dx, const RtRefFilter *wf, const float *w,
                                 const RtRefConvParam *p, const RtRefAct *ys, const float *dy) {
  int rc = check_shapes(xs, wf, p, ys);
  if (rc) return rc;
  if (!dx || !w || !dy) return RT_REF_EARG;
  int64_t nx = rt_ref_act_count(xs);
  double *acc = calloc((size_t)nx, sizeof *acc);
  if (!acc) return RT_REF_ENOMEM;
  int Kg = wf->K / p->groups;
  for (int n = 0; n < ys->N; n++)
    for (int k = 0; k < ys->C; k++)
      for (int oh = 0; oh < ys->H; oh++)
        for (int ow = 0; ow < ys->W; ow++) {
          double g = dy[rt_ref_act_index(ys, n, k, oh, ow)];
          int c0 = (k / Kg) * wf->C;
          for (int c = 0; c < wf->C; c++)
            for (int r = 0; r < wf->R; r++) {
              int ih = tap(oh, p->stride_h, p->pad_top, r, p->dil_h, xs->H);
              if (ih < 0) continue;
              for (int s = 0; s < wf->S; s++) {
                int iw = tap(ow, p->stride_w, p->pad_left, s, p->dil_w, xs->W);
                if (iw < 0) continue;
                acc[rt_ref_act_index(xs, n, c0 + c, ih, iw)] += g * w[rt_ref_filter_index(wf, k, c, r, s)];
              }
            }
        }
  for (int64_t i = 0; i < nx; i++) dx[i] = (float)acc[i];
  free(acc);
  return RT_REF_OK;
}

int rt_ref_conv2d_bwd_weight_naive(const RtRefAct *xs, const float *x, const RtRefFilter *wf, float *dw, float *dbias,
                                   const RtRefConvParam *p, const RtRefAct *ys, const float *dy) {
  int rc = check_shapes(xs, wf, p, ys);
  if (rc) return rc;
  if (!dy || (dw && !x)) return RT_REF_EARG;
  int Kg = wf->K / p->groups;
  for (int k = 0; k < wf->K; k++) {
    if (dbias) {
      double acc = 0;
      for (int n = 0; n < ys->N; n++)
        for (int oh = 0; oh < ys->H; oh++)
          for (int ow = 0; ow < ys->W; ow++) acc += dy[rt_ref_act_index(ys, n, k, oh, ow)];
      dbias[k] = (float)acc;
    }
    if (!dw) continue;
    int c0 = (k / Kg) * wf->C;
    for (int c = 0; c < wf->C; c++)
      for (int r = 0; r < wf->R; r++)
        for (int s = 0; s < wf->S; s++) {
          double acc = 0;
          for (int n = 0; n < ys->N; n++)
            for (int oh = 0; oh < ys->H; oh++) {
              int ih = tap(oh, p->stride_h, p->pad_top, r, p->dil_h, xs->H);
              if (ih < 0) continue;
              for (int ow = 0; ow < ys->W; ow++) {
                int iw = tap(ow, p->stride_w, p->pad_left, s, p->dil_w, xs->W);
                if (iw < 0) continue;
                acc += (double)dy[rt_ref_act_index(ys, n, k, oh, ow)] * x[rt_ref_act_index(xs, n, c0 + c, ih, iw)];
              }
            }
          dw[rt_ref_filter_index(wf, k, c, r, s)] = (float)acc;
        }
  }
  return RT_REF_OK;
}
