/* cg_emit_qscale.c - a quantized (i8 or f8e4m3) convolution's dequantization
 * (and requantization, for an i8 result with y_scale): the qscale.cu
 * launch that turns x's and w's scales (stored after their elements,
 * ir_value_scales) into the scale and bias of cuDNN's epilogue, run before
 * the convolution.  conv2d (cg_emit_conv.c) sets them from the scales and
 * its bias; conv2d_bn (cg_emit_bn.c, after the finalize that folds the
 * batch norm) multiplies the folded scale by them. */
#include "cg_emit.h"

#include "cg_tmpl.h"

int cg_emit_qscale(Emit *e, const char *op, int bias, const CgKArg *from, size_t esb) {
  const IrNode *n = e->n;
  int64_t xs = ir_value_scales(e->g, n->in[0], e->batch), ws = ir_value_scales(e->g, n->in[1], e->batch);
  if (!xs || !ws)
    return cg_emit_fail(e, "a quantized convolution reads x and w as their casts wrote them (with their scales)");
  int64_t K = dim(e, in_type(e, 1), 0);
  if (ws != 1 && ws != K)
    return cg_emit_fail(e, "w has %lld scales for %lld output channels", (long long)ws, (long long)K);
  if (cg_emit_begin(e, "qscale")) return -1;
  cg_emit_def(e, op, "1");
  cg_emit_def(e, "NETC_K", "%lldLL", (long long)K);
  cg_emit_def(e, "NETC_XCOUNT", "%lldLL", (long long)numel(e, in_type(e, 0)));
  cg_emit_def(e, "NETC_WCOUNT", "%lldLL", (long long)numel(e, in_type(e, 1)));
  cg_emit_def(e, "NETC_WSCALES", "%lldLL", (long long)ws);
  if (e->k->conv.epilogue & CG_EPI_OUTSCALE) cg_emit_def(e, "NETC_QS_OUTSCALE", "1");
  CgKArg args[6] = {in(0), in(1)};
  int nargs = 2;
  if (from) {
    cg_emit_def(e, "NETC_QS_FROM", "1");
    args[nargs++] = *from;
  }
  if (bias >= 0) {
    if (!cg_tmpl_is_float(in_type(e, bias)->dtype)) return cg_emit_fail(e, "bias is not a float tensor");
    cg_emit_def(e, "NETC_QS_BIAS", "1");
    cg_emit_def(e, "NETC_TB", "%s", cg_tmpl_ctype(in_type(e, bias)->dtype));
    args[nargs++] = in(bias);
  }
  args[nargs++] = scratch(esb);
  const IrAttr *ys = ir_attr_find(n, "y_scale");
  if (ys) { /* requantized i8 y (pass requant): the affine divided by its step, which y records */
    cg_emit_def_float(e, "NETC_QS_OUT", ys->f);
    cg_emit_def(e, "NETC_YCOUNT", "%lldLL", (long long)numel(e, out_type(e, 0)));
    args[nargs++] = out(0);
  }
  cg_emit_args(e, nargs, args);
  if (cg_emit_end(e, "qscale.cu", (unsigned)((K + BLOCK - 1) / BLOCK), 1, BLOCK, 1)) return -1;
  cg_emit_hoist_last(e);
  return 0;
}
