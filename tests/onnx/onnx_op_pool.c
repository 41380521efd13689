/* onnx_op_pool.c - ONNX MaxPool, AveragePool and GlobalAveragePool on
 * rt_ref_maxpool_fwd, rt_ref_avgpool_fwd and rt_ref_global_avgpool_fwd.
 *
 * 2-D (and 1-D as H = 1) windows with explicit or auto pads, strides,
 * ceil_mode and count_include_pad; MaxPool also takes dilations and returns
 * ONNX's Indices output, the flat offset into X of the chosen element
 * (storage_order 0: row-major, 1: column-major within each (n, c) plane),
 * derived from the kernel's per-plane argmax. */
#include <stdlib.h>

#include "onnx_case.h"
#include "rt_ref.h"

/* Output dims of a pool over x from the kernel's [N, C, Ho, Wo]. */
static int pool_out_dims(const OnnxTensor *x, const RtRefAct *ys, int64_t *dims) {
  dims[0] = ys->N;
  dims[1] = ys->C;
  if (x->ndim == 3) {
    dims[2] = ys->W;
    return 3;
  }
  dims[2] = ys->H;
  dims[3] = ys->W;
  return 4;
}

/* Reads the window into RtRefPoolParam and allocates output 0; returns
 * ONNX_RUN_OK or the failing status. */
static OnnxRunStatus pool_setup(OnnxCase *c, const OnnxTensor **x, RtRefAct *xs, RtRefPoolParam *p, RtRefAct *ys) {
  OnnxSpatial sp;
  if (!(*x = onnx_case_float_in(c, 0)) || onnx_spatial_read(c, *x, NULL, &sp)) return c->status;
  *xs = (RtRefAct){sp.N, sp.C, sp.H, sp.W, RT_REF_NCHW};
  *p = (RtRefPoolParam){sp.R,
                        sp.S,
                        sp.stride_h,
                        sp.stride_w,
                        sp.pad_top,
                        sp.pad_left,
                        sp.pad_bottom,
                        sp.pad_right,
                        sp.dil_h,
                        sp.dil_w,
                        (int)onnx_attr_int(c->node, "ceil_mode", 0),
                        (int)onnx_attr_int(c->node, "count_include_pad", 0)};
  OnnxRunStatus st = onnx_case_kernel(c, rt_ref_pool_out_shape(xs, p, ys), "rt_ref_pool_out_shape");
  if (st != ONNX_RUN_OK) return st;
  int64_t dims[4];
  int nd = pool_out_dims(*x, ys, dims);
  return onnx_case_out_f(c, 0, nd, dims) ? ONNX_RUN_ERROR : ONNX_RUN_OK;
}

OnnxRunStatus onnx_op_maxpool(OnnxCase *c) {
  static const char *const KNOWN[] = {"auto_pad", "ceil_mode", "dilations",     "kernel_shape",
                                      "pads",     "strides",   "storage_order", NULL};
  if (onnx_case_unknown_attr(c, KNOWN)) return c->status;
  const OnnxTensor *x;
  RtRefAct xs, ys;
  RtRefPoolParam p;
  OnnxRunStatus st = pool_setup(c, &x, &xs, &p, &ys);
  if (st != ONNX_RUN_OK) return st;
  int want_idx = c->nout > 1;
  int32_t *argmax = NULL;
  int64_t ny = rt_ref_act_count(&ys);
  if (want_idx && !(argmax = malloc((size_t)(ny ? ny : 1) * sizeof *argmax)))
    return onnx_case_error(c, "out of memory");
  st = onnx_case_kernel(c, rt_ref_maxpool_fwd(&xs, x->f, &p, &ys, c->out[0].f, argmax), "rt_ref_maxpool_fwd");
  if (st == ONNX_RUN_OK && want_idx) {
    int64_t col = onnx_attr_int(c->node, "storage_order", 0);
    if (onnx_case_out_i64(c, 1, c->out[0].ndim, c->out[0].dims) == 0) {
      int64_t plane = (int64_t)xs.H * xs.W, per_plane = (int64_t)ys.H * ys.W;
      for (int64_t k = 0; k < ny; k++) {
        int64_t h = argmax[k] / xs.W, w = argmax[k] % xs.W;
        c->out[1].i[k] = (k / per_plane) * plane + (col ? w * xs.H + h : h * xs.W + w);
      }
    } else {
      st = ONNX_RUN_ERROR;
    }
  }
  free(argmax);
  return st;
}

OnnxRunStatus onnx_op_avgpool(OnnxCase *c) {
  static const char *const KNOWN[] = {"auto_pad",     "ceil_mode", "count_include_pad", "dilations",
                                      "kernel_shape", "pads",      "strides",           NULL};
  if (onnx_case_unknown_attr(c, KNOWN)) return c->status;
  const OnnxTensor *x;
  RtRefAct xs, ys;
  RtRefPoolParam p;
  OnnxRunStatus st = pool_setup(c, &x, &xs, &p, &ys);
  if (st != ONNX_RUN_OK) return st;
  if (p.dil_h != 1 || p.dil_w != 1)
    return onnx_case_skip(c, "dilated average pooling (rt_ref_avgpool_fwd needs dilation 1)");
  return onnx_case_kernel(c, rt_ref_avgpool_fwd(&xs, x->f, &p, &ys, c->out[0].f), "rt_ref_avgpool_fwd");
}

OnnxRunStatus onnx_op_global_avgpool(OnnxCase *c) {
  if (onnx_case_unknown_attr(c, (const char *const[]){NULL})) return c->status;
  const OnnxTensor *x = onnx_case_float_in(c, 0);
  if (!x) return c->status;
  if (x->ndim < 3) return onnx_case_error(c, "input rank %d < 3", x->ndim);
  /* the mean runs over all spatial axes, so any rank folds into H */
  RtRefAct xs = {(int)x->dims[0], (int)x->dims[1], (int)onnx_shape_count(x->dims, 2, x->ndim), 1, RT_REF_NCHW};
  int64_t dims[ONNX_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) dims[d] = d < 2 ? x->dims[d] : 1;
  if (onnx_case_out_f(c, 0, x->ndim, dims)) return c->status;
  return onnx_case_kernel(c, rt_ref_global_avgpool_fwd(&xs, x->f, c->out[0].f), "rt_ref_global_avgpool_fwd");
}
