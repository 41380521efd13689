/* cg_emit_conv.c - the convolution nodes (conv2d, conv2d_bn,
 * conv2d_bn_train, conv2d_bn_stats, conv2d_bwd_data, conv2d_bwd_weight,
 * conv2d_bwd_data_relu, conv2d_bwd_data_bn_relu): the cuDNN convolution's
 * description (cg_conv.h) and which of the node's tensors it reads and
 * writes, the launches around it -- bias, batch norm, masks, the
 * prologue's activation when cuDNN's plan cannot fuse them -- and the
 * folding of a strided few-channel convolution into a stride-1 one (s2d.cu
 * before cuDNN, or stem_conv.cu's own tensor-core kernel for inference). */
#include "cg_emit.h"

#include <string.h>

#include "cg_tmpl.h"

/* The shape, attributes and dtype of the convolution whose forward roles
 * are x, w, y into *d (zeroed first; the kind and the fusions left 0). */
static void conv_geometry(const Emit *e, CgKArg x, CgKArg w, CgKArg y, CgConvDesc *d) {
  const IrNode *n = e->n;
  const IrType *tx = arg_type(e, x), *tw = arg_type(e, w), *ty = arg_type(e, y);
  memset(d, 0, sizeof *d);
  d->n = (int)dim(e, tx, 0), d->h = (int)tx->dim[1], d->w = (int)tx->dim[2], d->c = (int)tx->dim[3];
  d->k = (int)tw->dim[0], d->r = (int)tw->dim[1], d->s = (int)tw->dim[2];
  d->ho = (int)ty->dim[1], d->wo = (int)ty->dim[2];
  cg_emit_attr2(n, "s", 1, d->stride);
  cg_emit_attr2(n, "p", 0, d->pad);
  cg_emit_attr2(n, "d", 1, d->dilation);
  d->groups = (int)ir_attr_int(n, "groups", 1);
  d->dtype = tx->dtype;
  d->ydtype = ty->dtype;
  const IrAttr *math = ir_attr_find(n, "math");
  d->tf32 = tx->dtype == IR_DT_F32 && math && math->kind == IR_ATTR_STR && strcmp(math->s, "tf32") == 0;
}

/* Whether a convolution of kind with forward roles typed tx, tw, ty is an
 * FP8 data or weight gradient: an E5M2 gradient (role y) by the forward's
 * E4M3 weights (a data gradient) or activations (a weight gradient), into
 * f32. */
static int fp8_bwd(CgConvKind kind, const IrType *tx, const IrType *tw, const IrType *ty) {
  if (kind == CG_CONV_FWD || ty->dtype != IR_DT_F8E5M2) return 0;
  const IrType *q = kind == CG_CONV_BWD_DATA ? tw : tx, *r = kind == CG_CONV_BWD_DATA ? tx : tw;
  return q->dtype == IR_DT_F8E4M3 && r->dtype == IR_DT_F32;
}

/* The node's convolution: x, w, y are the forward roles' tensors.  A
 * forward one of i8 or f8e4m3 values writes a float y through its
 * epilogue's dequantization (quant_epilogue, cg_emit_bn_infer); an FP8
 * data or weight gradient is planned as an f32 convolution of its
 * operands' f32 copies (fp8_widen, once the node's launches are made) on
 * TF32 tensor cores: the scaled FP8 values rounded to TF32's 10-bit
 * mantissa (a relative 2^-11, as f16 would round them), FP32 accumulation. */
static int conv(Emit *e, CgConvKind kind, CgKArg x, CgKArg w, CgKArg y) {
  const IrType *tx = arg_type(e, x), *tw = arg_type(e, w), *ty = arg_type(e, y);
  if (tx->layout != IR_LAYOUT_NHWC || ty->layout != IR_LAYOUT_NHWC || tw->layout != IR_LAYOUT_KRSC)
    return cg_emit_fail(e, "convolutions run on NHWC activations and KRSC filters");
  int requant = ty->dtype == IR_DT_I8 && ir_attr_find(e->n, "y_scale"); /* pass requant */
  int quant = kind == CG_CONV_FWD && tx->dtype == tw->dtype && (tx->dtype == IR_DT_I8 || tx->dtype == IR_DT_F8E4M3) &&
              (cg_tmpl_is_float(ty->dtype) || requant);
  int widen = fp8_bwd(kind, tx, tw, ty);
  if (!quant && !widen && (tx->dtype != tw->dtype || tx->dtype != ty->dtype || !cg_tmpl_is_float(tx->dtype)))
    return cg_emit_fail(e, "a convolution of %s by %s into %s has no GPU kernel yet", ir_dtype_name(tx->dtype),
                        ir_dtype_name(tw->dtype), ir_dtype_name(ty->dtype));
  conv_geometry(e, x, w, y, &e->k->conv);
  if (widen) e->k->conv.dtype = e->k->conv.ydtype = IR_DT_F32, e->k->conv.tf32 = 1;
  e->k->conv.kind = kind;
  e->k->has_conv = 1;
  e->k->conv_x = x, e->k->conv_w = w, e->k->conv_y = y;
  return 0;
}

/* A requantized i8 result (pass requant) where cuDNN has no plan that
 * writes i8: the plan writes the epilogue's y / S in f16 into scratch past
 * everything else the node uses, and a cast launch (QOUT_UNFUSED) rounds
 * it into y (whose step S the qscale launch wrote after its elements). */
static int requant_fallback(Emit *e) {
  CgKNode *k = e->k;
  if (!k->has_conv || k->conv.ydtype != IR_DT_I8) return 0;
  int64_t count = numel(e, out_type(e, 0));
  int v = cg_tmpl_flat_vec(IR_DT_F16);
  k->qout_offset = align256(k->rin_bytes ? k->rin_offset + k->rin_bytes : k->scratch_bytes);
  k->qout_bytes = (size_t)count * ir_dtype_size(IR_DT_F16);
  if (cg_emit_begin(e, "requant")) return -1;
  cg_emit_def(e, "NETC_CAST_I8", "1");
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(IR_DT_F16));
  cg_emit_def(e, "NETC_COUNT", "%lldLL", (long long)count);
  cg_emit_def(e, "NETC_V", "%d", v);
  cg_emit_def(e, "NETC_SCALE", "1.0f");  /* the epilogue divided by S */
  cg_emit_def(e, "NETC_NSCALES", "0LL"); /* S is written */
  CgKArg q = scratch(k->qout_offset);
  CG_EMIT_ARGS(e, q, q, out(0));
  if (cg_emit_end(e, "cast.cu", cg_emit_grid_1d(e, count / v + 1), 1, BLOCK, 1)) return -1;
  last_when(e, CG_K_QOUT_UNFUSED);
  return 0;
}

/* An FP8 gradient's operand a (the role's argument *role) dequantized into
 * f32 scratch past everything else the node uses (dequant.cu), before the
 * convolution, which then reads that copy. */
static int fp8_widen_one(Emit *e, CgKArg *role) {
  const IrType *t = arg_type(e, *role);
  int64_t count = numel(e, t);
  size_t at = align256(e->k->scratch_bytes);
  need_scratch(e, at + (size_t)count * sizeof(float));
  if (cg_emit_begin(e, t->dtype == IR_DT_F8E5M2 ? "dq_e5m2" : "dq_e4m3")) return -1;
  cg_emit_def(e, "NETC_F8", "%d", t->dtype == IR_DT_F8E5M2);
  cg_emit_def(e, "NETC_COUNT", "%lldLL", (long long)count);
  CG_EMIT_ARGS(e, *role, scratch(at));
  if (cg_emit_end(e, "dequant.cu", cg_emit_grid_1d(e, count), 1, BLOCK, 1)) return -1;
  cg_emit_hoist_last(e);
  *role = scratch(at);
  return 0;
}

/* The FP8 operands of node e's data or weight gradient, widened (conv):
 * the gradient dy (role y) and the weights (data gradient) or the
 * activations (weight gradient). */
static int fp8_widen(Emit *e) {
  CgKNode *k = e->k;
  if (!k->has_conv || k->conv.kind == CG_CONV_FWD || arg_type(e, k->conv_y)->dtype != IR_DT_F8E5M2) return 0;
  return fp8_widen_one(e, &k->conv_y) || fp8_widen_one(e, k->conv.kind == CG_CONV_BWD_DATA ? &k->conv_w : &k->conv_x);
}

/* conv2d_bwd_data_bn_relu (dy, w, beta, z, gamma, mean, invstd) -> dz,
 * dgamma, dbeta.  The data gradient goes to dz; then either cuDNN's plan
 * masked it and wrote dgamma, dbeta and the coefficients a, b, c into
 * scratch 0 (conv.dbn, rt_cudnn.h), and one launch (FUSED) makes dz = a * dz
 * + b * z + c in place, or the plan was the plain data gradient and the
 * batch norm's backward launches (UNFUSED) run on it in place. */
static int dgrad_bn_relu(Emit *e) {
  if (conv(e, CG_CONV_BWD_DATA, out(0), in(1), in(0))) return -1;
  CgEmitChan c;
  if (cg_emit_chan_plan(e, out_type(e, 0), &c) || cg_emit_check_f32(e, 2, 2, 1, 2) || cg_emit_check_f32(e, 4, 6, 1, 0))
    return -1;
  if (c.dt != in_type(e, 3)->dtype) return cg_emit_fail(e, "z and the data gradient differ in dtype");
  /* synchronized batch norm: cuDNN's batch-norm backward would sum this rank's batch alone */
  if (e->opts->sync_bn) return cg_emit_bn_bwd_from(e, 1, out(0), 2, CG_K_ALWAYS);
  CgKNode *k = e->k;
  k->conv.dbn = 1;
  k->conv_bn[CG_KBN_Z] = in(3), k->conv_bn[CG_KBN_MEAN] = in(5), k->conv_bn[CG_KBN_INVSTD] = in(6);
  k->conv_bn[CG_KBN_GAMMA] = in(4), k->conv_bn[CG_KBN_BETA] = in(2);
  k->conv_bn[CG_KBN_DGAMMA] = out(1), k->conv_bn[CG_KBN_DBETA] = out(2), k->conv_bn[CG_KBN_ABC] = scratch(0);
  need_scratch(e, (size_t)3 * c.C * sizeof(float));
  if (cg_emit_chan_apply(e, &c, "NETC_APPLY_ABC", 0, "float")) return -1;
  CG_EMIT_ARGS(e, out(0), in(3), scratch(0), out(0));
  last_when(e, CG_K_FUSED);
  return cg_emit_bn_bwd_from(e, 1, out(0), 2, CG_K_UNFUSED);
}

/* --- quantized convolutions: x and w i8 or f8e4m3, their scales in the epilogue -- */

/* A quantized convolution's epilogue affine as its dequantization [and
 * the bias input `bias`] (no launch after: without the epilogue there is
 * no plan), its scale and bias in scratch past the node's other uses. */
static int quant_epilogue(Emit *e, int bias) {
  int64_t K = dim(e, in_type(e, 1), 0);
  size_t esb = align256(e->k->scratch_bytes);
  need_scratch(e, esb + (size_t)2 * K * sizeof(float));
  e->k->conv.epilogue = CG_EPI_AFFINE;
  e->k->conv_esb = scratch(esb);
  return cg_emit_qscale(e, "NETC_QS_SET", bias, NULL, esb);
}

static int emit_conv_body(Emit *e) {
  switch (e->n->op) {
  case IR_OP_CONV2D: {
    if (conv(e, CG_CONV_FWD, in(0), in(1), out(0))) return -1;
    if (conv_quant(e)) return quant_epilogue(e, e->n->nin >= 3 ? 2 : -1);
    if (e->n->nin < 3) return 0;
    CgEmitChan c;
    if (cg_emit_chan_plan(e, out_type(e, 0), &c)) return -1;
    const char *tb = cg_tmpl_ctype(in_type(e, 2)->dtype);
    if (!cg_tmpl_is_float(in_type(e, 2)->dtype)) return cg_emit_fail(e, "bias is not a float tensor");
    if (cg_emit_chan_apply(e, &c, "NETC_APPLY_BIAS", 0, tb)) return -1;
    CG_EMIT_ARGS(e, out(0), in(2), out(0));
    return 0;
  }
  case IR_OP_CONV2D_BWD_DATA: return conv(e, CG_CONV_BWD_DATA, out(0), in(1), in(0));
  case IR_OP_CONV2D_BWD_WEIGHT: return conv(e, CG_CONV_BWD_FILTER, in(1), out(0), in(0));
  case IR_OP_CONV2D_BWD_DATA_RELU: /* cuDNN [adds and] masks dx in its epilogue, or a kernel does after */
  {
    int g = residual_in(e);
    if (conv(e, CG_CONV_BWD_DATA, out(0), in(1), in(0))) return -1;
    e->k->conv.epilogue = CG_EPI_DRELU | (g >= 0 ? CG_EPI_RESIDUAL : 0);
    e->k->conv_mask = in(2);
    if (g >= 0) e->k->conv_res = in(g);
    IrDtype dt = out_type(e, 0)->dtype;
    int64_t count = numel(e, out_type(e, 0));
    if (g >= 0 ? cg_emit_eltwise_launch(e, "mask", "NETC_OP_SUM_RELU_BWD", dt, count, in(2), out(0), in(g), out(0))
               : cg_emit_eltwise_launch(e, "mask", "NETC_OP_RELU_BWD", dt, count, in(2), out(0), out(0), out(0)))
      return -1;
    last_when(e, CG_K_EPI_UNFUSED);
    return 0;
  }
  case IR_OP_CONV2D_BWD_DATA_BN_RELU: return dgrad_bn_relu(e);
  case IR_OP_CONV2D_BN:
    if (conv(e, CG_CONV_FWD, in(0), in(1), out(0))) return -1;
    return cg_emit_bn_infer(e, out_type(e, 0), 2, out(0), out(0), (int)ir_attr_int(e->n, "relu", 0));
  case IR_OP_CONV2D_BN_STATS: /* z = out 0, mean, invstd, sb = out 3 */
    if (conv(e, CG_CONV_FWD, in(0), in(1), out(0)) || cg_emit_bn_train(e, out_type(e, 0), out(0), out(0), 2, 1, 1, 3))
      return -1;
    return conv_quant(e) ? quant_epilogue(e, -1) : 0;
  default: /* conv2d_bn_train: z = out 0, y = out 1 */
    if (conv(e, CG_CONV_FWD, in(0), in(1), out(0)) ||
        cg_emit_bn_train(e, out_type(e, 0), out(0), out(1), 2, 2, (int)ir_attr_int(e->n, "relu", 0), -1))
      return -1;
    return conv_quant(e) ? quant_epilogue(e, -1) : 0; /* training: the batch norm's kernels on the f32 z */
  }
}

/* --- a strided convolution on few channels, folded (s2d.cu) ------------------ */

/* Whether node e's convolution runs folded: a stride-2 f32 convolution
 * (f16 or bf16 too, but for a weight gradient: inference's f16 stem) into
 * its own dtype on at most 4 channels (ResNet's stem) in training (conv2d_bn_train, or
 * conv2d_bn_stats when pass prologue left its normalizing to the max pool)
 * or a plain one (conv2d without a bias: inference's stem, whose batch
 * norm pass prologue gave to the max pool), ungrouped and undilated,
 * without a prologue; then *d is its description
 * as it would be planned unfolded.  $NETC_S2D=0 keeps every convolution as
 * it is, $NETC_S2D=all also folds weight gradients.  On the H200 (ResNet-50,
 * batch 256) the folded forward takes 0.91 ms against 1.39; the folded
 * weight gradient is no faster (1.61 ms against 1.65), so it is not the
 * default.  Inference's conv2d_bn without a residual (a stem that pass
 * prologue left whole: -fno-prologue, or no max pool after it) is folded
 * too: its epilogue's scale and bias are per output channel, which the
 * fold leaves as they are. */
static int s2d_node(const Emit *e, CgConvDesc *d) {
  const IrNode *n = e->n;
  int all = e->opts->s2d == 2, wgrad = n->op == IR_OP_CONV2D_BWD_WEIGHT;
  int fwd = n->op == IR_OP_CONV2D_BN_TRAIN || n->op == IR_OP_CONV2D_BN_STATS ||
            (n->op == IR_OP_CONV2D && n->nin == 2) || (n->op == IR_OP_CONV2D_BN && n->nin == 6);
  if (!e->opts->s2d || (!fwd && !(all && wgrad)) || ir_conv_prologue(e->g, n) >= 0) return 0;
  if (wgrad)
    conv_geometry(e, in(1), out(0), in(0), d);
  else
    conv_geometry(e, in(0), in(1), out(0), d);
  int dt_ok = d->dtype == IR_DT_F32 || (!wgrad && (d->dtype == IR_DT_F16 || d->dtype == IR_DT_BF16));
  return dt_ok && d->ydtype == d->dtype && arg_type(e, in(wgrad))->layout == IR_LAYOUT_NHWC && d->c <= 4 &&
         d->stride[0] == 2 && d->stride[1] == 2 && d->dilation[0] == 1 && d->dilation[1] == 1 && d->r > 2 && d->s > 2 &&
         d->groups == 1;
}

/* One s2d.cu launch: `op` from `from` to `to` for an unfolded tensor
 * dims = {n, h, w, c} and its fold {hq, wq} (padding {ph, pw}); `count`
 * results.  Scratch offsets are placed by s2d_place. */
static int s2d_launch(Emit *e, const char *stage, const char *op, const int dims[8], CgKArg from, CgKArg to,
                      int64_t count, IrDtype dt) {
  static const char *const names[] = {"NETC_N",  "NETC_H",  "NETC_W",  "NETC_C",
                                      "NETC_HQ", "NETC_WQ", "NETC_PH", "NETC_PW"};
  if (cg_emit_begin(e, stage)) return -1;
  cg_emit_def(e, op, "1");
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(dt));
  for (int i = 0; i < 8; i++) cg_emit_def(e, names[i], "%d", dims[i]);
  CG_EMIT_ARGS(e, from, to);
  return cg_emit_end(e, "s2d.cu", cg_emit_grid_1d(e, count), 1, BLOCK, 1);
}

/* The folded tensors' geometry of node e's convolution (its description
 * as planned unfolded): x's dims, w's dims, each {n, h, w, c, hq, wq, ph, pw}. */
static void s2d_dims(const CgConvDesc *d, int xd[8], int wd[8]) {
  int rq = (d->r + 1) / 2, sq = (d->s + 1) / 2;
  int x[8] = {d->n, d->h, d->w, d->c, d->ho + rq - 1, d->wo + sq - 1, d->pad[0], d->pad[1]};
  int w[8] = {d->k, d->r, d->s, d->c, rq, sq, 0, 0};
  memcpy(xd, x, sizeof x), memcpy(wd, w, sizeof w);
}

/* Node e's convolution as the stride-1 one of x and w folded 2x2 into
 * channels (s2d.cu's comment has the arithmetic), after the node's other
 * kernels were emitted: the folding launches (0, and 1 for w forward;
 * emitted first, `before` the convolution) get their scratch past
 * everything else the node uses; a weight gradient's folded result is
 * unfolded into the node's output last.  y is unchanged: pixel (i, j) of
 * the folded convolution is pixel (i, j) of the strided one. */
static int s2d_place(Emit *e) {
  CgKNode *k = e->k;
  CgConvDesc *d = &k->conv;
  int xd[8], wd[8], fwd = d->kind == CG_CONV_FWD;
  s2d_dims(d, xd, wd);
  size_t es = ir_dtype_size(d->dtype);
  size_t xq = align256(k->scratch_bytes), xq_bytes = (size_t)d->n * xd[4] * xd[5] * 4 * d->c * es;
  size_t wf = align256(xq + xq_bytes), wq_bytes = (size_t)d->k * wd[4] * wd[5] * 4 * d->c * es;
  CgKArg fx = {.kind = CG_KARG_SCRATCH, .offset = xq}, fw = {.kind = CG_KARG_SCRATCH, .offset = wf};
  k->launch[0].args[0] = k->conv_x, k->launch[0].args[1] = fx;
  if (fwd) k->launch[1].args[0] = k->conv_w, k->launch[1].args[1] = fw;
  if (!fwd && s2d_launch(e, "s2d_dw", "NETC_S2D_DW", wd, fw, k->conv_w, (int64_t)d->k * d->r * d->s * d->c, d->dtype))
    return -1;
  need_scratch(e, wf + wq_bytes);
  k->conv_x = fx, k->conv_w = fw;
  d->c *= 4, d->h = xd[4], d->w = xd[5], d->r = wd[4], d->s = wd[5];
  d->stride[0] = d->stride[1] = 1, d->pad[0] = d->pad[1] = 0;
  return 0;
}

/* The folding launches of node e, before its other kernels: their
 * geometry from d (s2d_node's), their arguments from s2d_place. */
static int s2d_fold(Emit *e, const CgConvDesc *d) {
  int xd[8], wd[8];
  s2d_dims(d, xd, wd);
  CgKArg none = {.kind = CG_KARG_SCRATCH};
  int v = d->c == 1 || d->c == 2 || d->c == 4 ? d->c : 1; /* s2d.cu's V */
  if (s2d_launch(e, "s2d_x", "NETC_S2D_X", xd, none, none, (int64_t)d->n * xd[4] * xd[5] * 4 * d->c / v, d->dtype) ||
      (e->n->op != IR_OP_CONV2D_BWD_WEIGHT &&
       s2d_launch(e, "s2d_w", "NETC_S2D_W", wd, none, none, (int64_t)d->k * wd[4] * wd[5] * 4 * d->c / v, d->dtype)))
    return -1;
  for (int i = 0; i < e->k->nlaunch; i++) e->k->launch[i].before = 1;
  return 0;
}

/* --- an inference stem on tensor cores (stem_conv.cu) ------------------------ */

enum { STEM_ROWS = 2, STEM_PS = 24, STEM_SMEM_MAX = 96 * 1024 }; /* stem_conv.cu's ROWS and PS */

/* stem_conv.cu's dynamic shared memory for the folded convolution d (its
 * unfolded description): the folded filter and one item's folded rows. */
static size_t stem_smem(const CgConvDesc *d) {
  int rq = (d->r + 1) / 2, sq = (d->s + 1) / 2, mt = (d->wo + 15) / 16;
  return (size_t)2 * STEM_PS * ((size_t)rq * sq * d->k + (size_t)(STEM_ROWS + rq - 1) * (mt * 16 + sq - 1));
}

/* Whether node e, whose convolution s2d_node folds (d its unfolded
 * description), runs on stem_conv.cu: a plain convolution (inference's
 * stem once pass prologue gave its batch norm to the max pool; f16 when
 * the default precision is, rule 3 of docs/passes/precision.md) on 4
 * channels (pass layout pads an inference stem to 4) into as
 * many output channels as a multiple of 16 up to 64 (a thread holds 2K
 * accumulators: 128 registers at K = 64, no spills under two blocks an
 * SM), a filter of at most 8x8, at most 8 warps a row (WO <= 128: more
 * threads would cut each one's registers below that), NHWC x and y and a
 * KRSC filter, on sm_80 or later, within 96 KiB of shared memory (what
 * every device since sm_80 lets a block opt into). */
static int stem_mma_node(const Emit *e, const CgConvDesc *d) {
  return e->opts->stem_mma && e->n->op == IR_OP_CONV2D && e->n->nin == 2 && d->dtype == IR_DT_F16 && d->c == 4 &&
         d->k % 16 == 0 && d->k <= 64 && d->r <= 8 && d->s <= 8 && d->wo <= 8 * 16 && e->dev->cc_major >= 8 &&
         stem_smem(d) <= STEM_SMEM_MAX && arg_type(e, in(1))->layout == IR_LAYOUT_KRSC &&
         arg_type(e, in(0))->layout == IR_LAYOUT_NHWC && arg_type(e, out(0))->layout == IR_LAYOUT_NHWC;
}

/* Node e's convolution as one stem_conv.cu launch from x and the filter
 * as they are: two persistent blocks an SM, one warp per 16 output
 * columns. */
static int stem_mma(Emit *e, const CgConvDesc *d) {
  static const char *const names[] = {"NETC_N", "NETC_H",  "NETC_W",  "NETC_K",  "NETC_R",
                                      "NETC_S", "NETC_PH", "NETC_PW", "NETC_HO", "NETC_WO"};
  const int v[] = {d->n, d->h, d->w, d->k, d->r, d->s, d->pad[0], d->pad[1], d->ho, d->wo};
  int threads = 32 * ((d->wo + 15) / 16);
  int64_t items = (int64_t)d->n * ((d->ho + STEM_ROWS - 1) / STEM_ROWS);
  int64_t grid = 2 * (int64_t)(e->dev->sm_count > 0 ? e->dev->sm_count : 1);
  if (cg_emit_begin(e, "mma")) return -1;
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(d->dtype));
  for (int i = 0; i < 10; i++) cg_emit_def(e, names[i], "%d", v[i]);
  cg_emit_def(e, "NETC_THREADS", "%d", threads);
  cg_emit_def(e, "NETC_SMEM", "%zu", stem_smem(d)); /* the template asserts its own sum equals it */
  CG_EMIT_ARGS(e, in(0), in(1), out(0));
  if (cg_emit_end(e, "stem_conv.cu", (unsigned)(items < grid ? items : grid), 1, (unsigned)threads, 1)) return -1;
  e->k->launch[e->k->nlaunch - 1].smem = (unsigned)stem_smem(d);
  return 0;
}

/* A node whose convolution has a prologue (input sbx: relu(x * scale +
 * bias) is what it convolves; x is input xi): cuDNN applies it on the fly
 * when it has an engine for that.  For when it has none, the node's first
 * launch (PROLOGUE) writes the activation into scratch past everything
 * else the node uses (placed once the rest is emitted). */
int cg_emit_conv(Emit *e) {
  int sbx = ir_conv_prologue(e->g, e->n), xi = e->n->op == IR_OP_CONV2D_BWD_WEIGHT ? 1 : 0;
  const IrType *tx = in_type(e, xi);
  if (sbx >= 0) {
    const IrType *ts = in_type(e, sbx);
    if (ts->dtype != tx->dtype || ts->rank != 2 || ts->dim[0] != 2 || ts->dim[1] != tx->dim[3])
      return cg_emit_fail(e, "the prologue's scale and bias must be [2, %lld] of x's dtype", (long long)tx->dim[3]);
    CgEmitChan c;
    if (cg_emit_chan_plan(e, tx, &c) || cg_emit_chan_apply(e, &c, "NETC_APPLY_SBR", 1, cg_tmpl_ctype(tx->dtype)))
      return -1;
    CG_EMIT_ARGS(e, in(xi), in(sbx), scratch(0));
    last_when(e, CG_K_PROLOGUE);
    e->k->launch[e->k->nlaunch - 1].before = 1;
  }
  CgConvDesc folded;
  int fold = sbx < 0 && s2d_node(e, &folded);
  if (fold && stem_mma_node(e, &folded)) return stem_mma(e, &folded);
  if ((fold && s2d_fold(e, &folded)) || emit_conv_body(e) || (fold && s2d_place(e)) || fp8_widen(e) ||
      requant_fallback(e))
    return -1;
  if (sbx < 0) return 0;
  CgKNode *k = e->k;
  if (k->qout_bytes || k->rin_bytes)
    return cg_emit_fail(e, "a requantized i8 result or an i8 residual, and a prologue (in scratch past the rest)");
  if (k->conv_x.kind != CG_KARG_IN || k->conv_x.index != xi || k->conv.kind == CG_CONV_BWD_DATA)
    return cg_emit_fail(e, "a prologue on a convolution that does not read input %d", xi);
  k->conv.prologue = 1;
  k->conv_sb = in(sbx);
  k->pro_offset = align256(k->scratch_bytes);
  k->pro_bytes = (size_t)numel(e, tx) * ir_dtype_size(tx->dtype);
  k->launch[0].args[2].offset = k->pro_offset;
  return 0;
}
