/* onnx_op_conv.c - ONNX Conv on rt_ref_conv2d_fwd.
 *
 * X [N, C, H, W] (or [N, C, L] as H = 1), W [M, C/group, kH, kW] in KCRS,
 * optional bias B [M]; pads, strides, dilations, group and auto_pad map
 * one to one onto RtRefConvParam. */
#include "onnx_case.h"
#include "rt_ref.h"

OnnxRunStatus onnx_op_conv(OnnxCase *c) {
  static const char *const KNOWN[] = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", NULL};
  if (onnx_case_unknown_attr(c, KNOWN)) return ONNX_RUN_SKIP;
  const OnnxTensor *x, *w, *b = NULL;
  if (!(x = onnx_case_float_in(c, 0)) || !(w = onnx_case_float_in(c, 1))) return c->status;
  if (c->nin > 2 && c->in[2] && !(b = onnx_case_float_in(c, 2))) return c->status;
  if (w->ndim != x->ndim) return onnx_case_error(c, "weight rank %d != input rank %d", w->ndim, x->ndim);

  OnnxSpatial sp;
  if (onnx_spatial_read(c, x, w->dims + 2, &sp)) return c->status;
  int group = (int)onnx_attr_int(c->node, "group", 1);

  RtRefAct xs = {sp.N, sp.C, sp.H, sp.W, RT_REF_NCHW}, ys;
  RtRefFilter wf = {(int)w->dims[0], (int)w->dims[1], sp.R, sp.S, RT_REF_KCRS};
  RtRefConvParam p = {sp.stride_h,  sp.stride_w, sp.pad_top, sp.pad_left, sp.pad_bottom,
                      sp.pad_right, sp.dil_h,    sp.dil_w,   group};
  OnnxRunStatus st = onnx_case_kernel(c, rt_ref_conv2d_out_shape(&xs, &wf, &p, &ys), "rt_ref_conv2d_out_shape");
  if (st != ONNX_RUN_OK) return st;
  int64_t dims[4] = {ys.N, ys.C, ys.H, ys.W};
  if (x->ndim == 3) dims[2] = ys.W; /* [N, K, 1, Wo] back to [N, K, Wo] */
  if (onnx_case_out_f(c, 0, x->ndim, dims)) return ONNX_RUN_ERROR;
  return onnx_case_kernel(c, rt_ref_conv2d_fwd(&xs, x->f, &wf, w->f, b ? b->f : NULL, &p, &ys, c->out[0].f, NULL),
                          "rt_ref_conv2d_fwd");
}
