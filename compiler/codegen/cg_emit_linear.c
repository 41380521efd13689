/* cg_emit_linear.c - linear, linear_bwd_data and linear_bwd_weight: cuDNN
 * 1x1 convolutions of [N, 1, 1, C] when their matrices allow (then a bias
 * apply after), else the tiled matrix product of linear.cu. */
#include "cg_emit.h"

#include <string.h>

#include "cg_tmpl.h"

/* A linear op is the 1x1 convolution of x [N, C] read as NHWC [N, 1, 1, C]
 * by w [K, C] read as KRSC [K, 1, 1, C] into y [N, K] read as [N, 1, 1, K]
 * (row-major matrices are exactly that memory); linear_bwd_data and
 * linear_bwd_weight are its data and weight gradients.  The forward roles
 * (rt_cudnn.h): linear x = in 0, w = in 1, y = out 0; linear_bwd_data
 * (dy, w) x = out 0, w = in 1, y = in 0; linear_bwd_weight (dy, x) x = in 1,
 * w = out 0, y = in 0. */
static void linear_roles(const Emit *e, CgConvKind *kind, CgKArg *x, CgKArg *w, CgKArg *y) {
  switch (e->n->op) {
  case IR_OP_LINEAR: *kind = CG_CONV_FWD, *x = in(0), *w = in(1), *y = out(0); break;
  case IR_OP_LINEAR_BWD_DATA: *kind = CG_CONV_BWD_DATA, *x = out(0), *w = in(1), *y = in(0); break;
  default: *kind = CG_CONV_BWD_FILTER, *x = in(1), *w = out(0), *y = in(0); break;
  }
}

/* Whether node e's linear op runs on cuDNN: its three matrices row-major
 * of one dtype cuDNN takes (f32, f16, bf16), their dims in a convolution's
 * int and consistent.  Anything else (a linear of mixed dtypes) keeps
 * linear.cu, as does every linear op with $NETC_LINEAR_CUDNN=0 (for
 * comparisons).  A shape cuDNN has no engine for is known only when the
 * executor plans it, and fails there as a convolution's does. */
static int linear_on_cudnn(const Emit *e) {
  if (!e->opts->linear_cudnn) return 0;
  CgConvKind kind;
  CgKArg a[3];
  linear_roles(e, &kind, &a[0], &a[1], &a[2]);
  const IrType *tx = arg_type(e, a[0]), *tw = arg_type(e, a[1]), *ty = arg_type(e, a[2]);
  IrDtype dt = tx->dtype;
  if ((dt != IR_DT_F32 && dt != IR_DT_F16 && dt != IR_DT_BF16) || tw->dtype != dt || ty->dtype != dt) return 0;
  for (int i = 0; i < 3; i++) {
    const IrType *t = arg_type(e, a[i]);
    if (t->rank != 2 || t->layout != IR_LAYOUT_ROW) return 0;
    for (int j = 0; j < 2; j++)
      if (dim(e, t, j) < 1 || dim(e, t, j) > 0x7fffffff) return 0; /* CgConvDesc's ints */
  }
  return dim(e, tx, 0) == dim(e, ty, 0) && tx->dim[1] == tw->dim[1] && ty->dim[1] == tw->dim[0];
}

/* Node e's linear op as its cuDNN convolution (linear_roles), and a
 * linear's bias added after it as a convolution's is (chan_apply.cu
 * NETC_APPLY_BIAS in place: cuDNN's result is rounded to y's dtype first). */
static int linear_cudnn(Emit *e) {
  CgKNode *k = e->k;
  CgConvDesc *d = &k->conv;
  CgConvKind kind;
  linear_roles(e, &kind, &k->conv_x, &k->conv_w, &k->conv_y);
  const IrType *tx = arg_type(e, k->conv_x), *tw = arg_type(e, k->conv_w);
  memset(d, 0, sizeof *d);
  d->kind = kind;
  d->n = (int)dim(e, tx, 0), d->h = d->w = 1, d->c = (int)tx->dim[1];
  d->k = (int)tw->dim[0], d->r = d->s = 1;
  d->ho = d->wo = 1;
  d->stride[0] = d->stride[1] = d->dilation[0] = d->dilation[1] = 1;
  d->groups = 1;
  d->dtype = tx->dtype;
  const IrAttr *math = ir_attr_find(e->n, "math"); /* strict FP32 unless the node allows TF32 */
  d->tf32 = tx->dtype == IR_DT_F32 && math && math->kind == IR_ATTR_STR && strcmp(math->s, "tf32") == 0;
  k->has_conv = 1;
  if (e->n->op != IR_OP_LINEAR || e->n->nin < 3) return 0;
  CgEmitChan c;
  if (!cg_tmpl_is_float(in_type(e, 2)->dtype)) return cg_emit_fail(e, "bias is not a float tensor");
  const char *tb = cg_tmpl_ctype(in_type(e, 2)->dtype);
  if (cg_emit_chan_plan(e, out_type(e, 0), &c) || cg_emit_chan_apply(e, &c, "NETC_APPLY_BIAS", 0, tb)) return -1;
  CG_EMIT_ARGS(e, out(0), in(2), out(0));
  return 0;
}

int cg_emit_linear(Emit *e) {
  IrOp op = e->n->op;
  const IrType *t0 = in_type(e, 0), *t1 = in_type(e, 1), *to = out_type(e, 0);
  if (t0->rank != 2 || t1->rank != 2 || to->rank != 2) return cg_emit_fail(e, "linear needs [N, C] matrices");
  if (!cg_tmpl_is_float(t0->dtype) || !cg_tmpl_is_float(t1->dtype) || !cg_tmpl_is_float(to->dtype))
    return cg_emit_fail(e, "linear in %s has no GPU kernel yet (the i8 scales are not kept)", ir_dtype_name(t0->dtype));
  if (linear_on_cudnn(e)) return linear_cudnn(e);
  int64_t M, N, K, sam, sak, sbk, sbn;
  int64_t batch = dim(e, t0, 0);
  if (op == IR_OP_LINEAR) { /* x [M, K], W [N, K] */
    M = batch, K = t0->dim[1], N = t1->dim[0];
    sam = K, sak = 1, sbk = 1, sbn = K;
  } else if (op == IR_OP_LINEAR_BWD_DATA) { /* dy [M, K=out], W [out, N=in] */
    M = batch, K = t0->dim[1], N = t1->dim[1];
    sam = K, sak = 1, sbk = N, sbn = 1;
  } else { /* dy [batch, M=out], x [batch, N=in] */
    M = t0->dim[1], N = t1->dim[1], K = batch;
    sam = 1, sak = M, sbk = N, sbn = 1;
  }
  int bias = op == IR_OP_LINEAR && e->n->nin == 3;
  if (cg_emit_begin(e, "")) return -1;
  cg_emit_def(e, "NETC_M", "%lld", (long long)M);
  cg_emit_def(e, "NETC_N", "%lld", (long long)N);
  cg_emit_def(e, "NETC_K", "%lld", (long long)K);
  cg_emit_def(e, "NETC_SAM", "%lld", (long long)sam);
  cg_emit_def(e, "NETC_SAK", "%lld", (long long)sak);
  cg_emit_def(e, "NETC_SBK", "%lld", (long long)sbk);
  cg_emit_def(e, "NETC_SBN", "%lld", (long long)sbn);
  cg_emit_def(e, "NETC_TA", "%s", cg_tmpl_ctype(t0->dtype));
  cg_emit_def(e, "NETC_TB", "%s", cg_tmpl_ctype(t1->dtype));
  cg_emit_def(e, "NETC_TO", "%s", cg_tmpl_ctype(to->dtype));
  cg_emit_def(e, "NETC_BIAS", "%d", bias);
  if (bias) {
    if (!cg_tmpl_is_float(in_type(e, 2)->dtype)) return cg_emit_fail(e, "bias is not a float tensor");
    cg_emit_def(e, "NETC_TBIAS", "%s", cg_tmpl_ctype(in_type(e, 2)->dtype));
    CG_EMIT_ARGS(e, in(0), in(1), in(2), out(0));
  } else {
    CG_EMIT_ARGS(e, in(0), in(1), out(0));
  }
  return cg_emit_end(e, "linear.cu", (unsigned)((N + 63) / 64), (unsigned)((M + 63) / 64), BLOCK, 1);
}
