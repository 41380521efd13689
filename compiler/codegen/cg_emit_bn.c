/* cg_emit_bn.c - batch norm's kernels: inference's affine from running
 * statistics (batchnorm, conv2d_bn's epilogue), training's batch
 * statistics with the affine (batchnorm_train, conv2d_bn_train,
 * conv2d_bn_stats, with cuDNN's GenStats as the fused alternative), the
 * backward (batchnorm_bwd, batchnorm_relu_bwd, batchnorm_relu_bwd_win, by
 * pixel or by pool_bn_bwd.cu's cells) and channel_sum -- all on the
 * per-channel passes of cg_emit_chan.c. */
#include "cg_emit.h"

#include <string.h>

#include "cg_tmpl.h"

/* A quantized convolution's residual as cuDNN's epilogue adds it: of dtype
 * rdtype (i8: pass requant's block outputs), multiplied by rscale on the
 * way in: an i8 residual's step, over y's step when y is requantized -- but
 * with the out scale (CG_EPI_OUTSCALE: y divided by its step last) a float
 * residual as it is, the copy below then only the plan without it. */
static int quant_residual(Emit *e, int r) {
  CgConvDesc *d = &e->k->conv;
  const IrAttr *ys = ir_attr_find(e->n, "y_scale");
  double out = ys ? ys->f : 1.0, step = 1.0;
  d->rdtype = in_type(e, r)->dtype;
  if (d->rdtype == IR_DT_I8 && !((step = ir_value_step(e->g, e->n->in[r])) > 0))
    return cg_emit_fail(e, "an i8 residual needs a calibrated step");
  float rs = (float)(step / out);
  d->rscale = d->epilogue & CG_EPI_OUTSCALE ? (float)step : rs;
  if (d->rdtype != IR_DT_I8 && rs == 1.0f) return 0;
  /* where cuDNN has no plan adding an i8 residual, or any residual scaled (on the H100, cuDNN 9.14: no engine
   * for an int8 convolution whose residual ADD has ALPHA2): its f16 copy times rscale in scratch past the rest
   * (RES_UNFUSED, before the convolution), which the plan adds as it is */
  CgKNode *k = e->k;
  int64_t count = numel(e, in_type(e, r));
  k->rin_offset = align256(k->scratch_bytes);
  k->rin_bytes = (size_t)count * ir_dtype_size(IR_DT_F16);
  if (cg_emit_begin(e, "res_dq")) return -1;
  cg_emit_def(e, "NETC_DQ_SCALED", "1");
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(d->rdtype));
  cg_emit_def_float(e, "NETC_MUL", rs);
  cg_emit_def(e, "NETC_COUNT", "%lldLL", (long long)count);
  CG_EMIT_ARGS(e, in(r), scratch(k->rin_offset));
  if (cg_emit_end(e, "dequant.cu", cg_emit_grid_1d(e, (count + 7) / 8), 1, BLOCK, 1)) return -1;
  last_when(e, CG_K_RES_UNFUSED);
  cg_emit_hoist_last(e);
  return 0;
}

/* batchnorm / conv2d_bn: running statistics (inputs p..p+3: gamma, beta,
 * mean, var) into coef, then the affine on tensor x into y.  conv2d_bn
 * (conv set): the finalize runs before the convolution and also writes the
 * equivalent scale and bias (f32) for the convolution's epilogue, which an
 * quantized convolution's qscale launch then multiplies by its dequantization;
 * the affine runs only when cuDNN's plan has no epilogue.  The finalize
 * reads only parameters and state, so it is a `once` launch writing kept
 * memory, coef at 0 and the scale and bias after it: run when the weights
 * change, not in the step (ResNet-50: 53 launches of about 5 us each out
 * of the inference step).  A quantized convolution's qscale, which runs in
 * the step (x's scale is the step's), reads them there and writes the
 * epilogue's into scratch. */
int cg_emit_bn_infer(Emit *e, const IrType *t, int p, CgKArg x, CgKArg y, int relu) {
  CgEmitChan c;
  int epi = e->k->has_conv;
  IrType t16 = *t; /* a requantized i8 result's channels, for the plan (its apply launch is never made) */
  if (t->dtype == IR_DT_I8) t16.dtype = IR_DT_F16, t = &t16;
  CgKArg coef, esb;
  if (cg_emit_chan_plan(e, t, &c) || cg_emit_check_f32(e, p, p + 3, 1, 0) ||
      cg_emit_chan_finalize_infer(e, &c, p, epi, &coef, &esb))
    return -1;
  int once = coef.kind == CG_KARG_KEPT;
  if (epi) {
    CgConvDesc *d = &e->k->conv;
    int r = residual_in(e);
    const IrAttr *ys = ir_attr_find(e->n, "y_scale");
    d->epilogue = CG_EPI_AFFINE | (relu ? CG_EPI_RELU : 0) | (r >= 0 ? CG_EPI_RESIDUAL : 0);
    /* an i8 result requantized by 1/S adding a float residual: divided last (cg_conv.h), the residual as it is */
    if (conv_quant(e) && r >= 0 && in_type(e, r)->dtype != IR_DT_I8 && ys && ys->f != 1.0)
      d->epilogue |= CG_EPI_OUTSCALE;
    e->k->launch[e->k->nlaunch - 1].before = 1;
    /* the epilogue's in scratch where the finalize would write them each step: multiplied in place, or from
     * the kept ones */
    size_t at = c.coef + align256((size_t)4 * c.C * sizeof(float));
    if (!once || conv_quant(e)) need_scratch(e, at + (size_t)cg_conv_esb_floats(d) * c.C * sizeof(float));
    if (conv_quant(e)) {
      if (cg_emit_qscale(e, "NETC_QS_MUL", -1, once ? &esb : NULL, at)) return -1;
      esb = scratch(at);
    }
    e->k->conv_esb = esb;
    if (residual_in(e) >= 0) e->k->conv_res = in(residual_in(e));
    if (conv_quant(e)) /* its plan always has the epilogue: no apply launch */
      return residual_in(e) >= 0 ? quant_residual(e, residual_in(e)) : 0;
  }
  if (cg_emit_chan_apply(e, &c, "NETC_APPLY_AFFINE", relu, "float")) return -1;
  if (epi) last_when(e, CG_K_EPI_UNFUSED);
  if (residual_in(e) >= 0)
    CG_EMIT_ARGS(e, x, coef, in(residual_in(e)), y);
  else
    CG_EMIT_ARGS(e, x, coef, y);
  return 0;
}

/* Synchronized batch norm (the sync_bn code switch): before the finalize of
 * plan c, a PACK launch (when `when`) turns the partial sums at *part into
 * this rank's f64 sums (bwd: dgamma and dbeta, outputs 1 and 2, from
 * them too; else the statistics of x), which the executor adds over the
 * ranks; *part then points at them and c finalizes from them.  Nothing
 * without the switch. */
static int sync_pack(Emit *e, CgEmitChan *c, int bwd, CgKArg x, CgKArg *part, CgKWhen when) {
  if (!e->opts->sync_bn) return 0;
  size_t at = cg_emit_chan_sync_at(c);
  if (cg_emit_chan_pack(e, c, bwd ? "NETC_FIN_PACK_BWD" : "NETC_FIN_PACK_STATS")) return -1;
  if (bwd)
    CG_EMIT_ARGS(e, *part, out(1), out(2), scratch(at));
  else
    CG_EMIT_ARGS(e, x, *part, scratch(at));
  last_when(e, when);
  *part = scratch(at);
  c->sync = 1;
  return 0;
}

static void train_finalize_args(Emit *e, CgKArg x, CgKArg part, int p, int o, size_t coef, int sb) {
  if (sb >= 0)
    CG_EMIT_ARGS(e, x, part, in(p), in(p + 1), in(p + 2), in(p + 3), out(o), out(o + 1), scratch(coef), out(sb));
  else
    CG_EMIT_ARGS(e, x, part, in(p), in(p + 1), in(p + 2), in(p + 3), out(o), out(o + 1), scratch(coef));
}

/* The training finalize (chan_finalize.cu NETC_FIN_TRAIN) of plan c from
 * the sums in scratch 0: x, the sums, inputs p..p+3, outputs o and o+1,
 * the coefficients, and output sb when it writes the scale and bias
 * (sb >= 0).  fusable: the sums come from the kernels (UNFUSED) or from
 * cuDNN's GenStats (FUSED, the sums of x itself), a finalize for each;
 * with synchronized batch norm a PACK for each (sync_pack) and one
 * finalize of the ranks' sums after them. */
static int train_finalize(Emit *e, CgEmitChan c, CgKArg x, int p, int o, int sb, int fusable) {
  CgEmitChan f = c;
  f.G = 1, f.noshift = 1;
  CgKArg part = scratch(0), fpart = scratch(0); /* sync_pack points both at the one place of the f64 sums */
  if (e->opts->sync_bn) {
    if (sync_pack(e, &c, 0, x, &part, fusable ? CG_K_UNFUSED : CG_K_ALWAYS) ||
        (fusable && sync_pack(e, &f, 0, x, &fpart, CG_K_FUSED)) || cg_emit_chan_finalize(e, &c, "NETC_FIN_TRAIN"))
      return -1;
    train_finalize_args(e, x, part, p, o, c.coef, sb);
    return 0;
  }
  if (cg_emit_chan_finalize(e, &c, "NETC_FIN_TRAIN")) return -1;
  train_finalize_args(e, x, part, p, o, c.coef, sb);
  if (!fusable) return 0;
  last_when(e, CG_K_UNFUSED);
  if (cg_emit_chan_finalize(e, &f, "NETC_FIN_TRAIN")) return -1;
  train_finalize_args(e, x, part, p, o, c.coef, sb);
  last_when(e, CG_K_FUSED);
  return 0;
}

/* The backward's finalize (NETC_FIN_BWD) of plan c, when `when`, from the
 * sums in scratch 0 (through sync_pack): gamma (input p), beta, invstd
 * (input p + 2) into dgamma, dbeta (outputs 1, 2) and the coefficients. */
static int bwd_finalize(Emit *e, CgEmitChan c, int p, CgKArg beta, CgKWhen when) {
  CgKArg part = scratch(0);
  if (sync_pack(e, &c, 1, part, &part, when) || cg_emit_chan_finalize(e, &c, "NETC_FIN_BWD")) return -1;
  CG_EMIT_ARGS(e, part, in(p), beta, in(p + 2), out(1), out(2), scratch(c.coef));
  last_when(e, when);
  return 0;
}

/* batchnorm_train / conv2d_bn_train: statistics of x, then y; inputs p..p+3
 * are gamma, beta, running mean, running var; outputs o, o+1 mean, invstd.
 * After an f16/bf16 forward convolution the statistics may come from the
 * convolution itself (cuDNN's GenStats, sums into scratch 0): both ways
 * are emitted, the executor runs the one its cuDNN plan allows.
 * conv2d_bn_stats (sb >= 0) writes no y: its finalize writes the
 * equivalent scale and bias into output sb instead (NETC_FIN_SB); with a
 * fifth output zc (pass prologue folded a cast of its f32 z into it), the
 * statistics pass also writes z rounded to zc's dtype there, so that z is
 * read once (NETC_RED_COPY). */
int cg_emit_bn_train(Emit *e, const IrType *t, CgKArg x, CgKArg y, int p, int o, int relu, int sb) {
  CgEmitChan c;
  if (cg_emit_chan_plan_mixed(e, t, arg_type(e, y)->dtype /* y_dtype */, t->dtype, &c) ||
      cg_emit_check_f32(e, p, p + 3, o, o + 1))
    return -1;
  if (c.rows < 2) return cg_emit_fail(e, "batch statistics need more than one value per channel");
  int fusable = e->k->has_conv && e->k->conv.kind == CG_CONV_FWD && c.dt != IR_DT_F32;
  int zc = sb >= 0 && e->n->nout > 4 ? 4 : -1;
  if (zc >= 0) {
    c.copy = 1, c.tc = out_type(e, zc)->dtype;
    if (c.dt != IR_DT_F32 || (c.tc != IR_DT_F16 && c.tc != IR_DT_BF16))
      return cg_emit_fail(e, "z's copy zc must be f16 or bf16 of an f32 z");
  }
  if (cg_emit_chan_reduce(e, &c, "NETC_RED_STATS", 0)) return -1;
  if (zc >= 0)
    CG_EMIT_ARGS(e, x, scratch(0), out(zc));
  else
    CG_EMIT_ARGS(e, x, scratch(0));
  if (fusable) last_when(e, CG_K_UNFUSED);
  c.sb = sb >= 0;
  if (sb >= 0 && out_type(e, sb)->dtype != c.dt) return cg_emit_fail(e, "the scale and bias must have z's dtype");
  if (train_finalize(e, c, x, p, o, sb, fusable)) return -1;
  if (fusable) {
    e->k->conv.genstats = 1;
    e->k->conv_stats = scratch(0);
  }
  if (sb >= 0) return 0;
  c.round_x = c.dt == IR_DT_F32 && c.ty != IR_DT_F32; /* rt_ref_bn_normalize after rounding, as the CPU */
  if (cg_emit_chan_apply(e, &c, "NETC_APPLY_AFFINE", relu, "float")) return -1;
  if (residual_in(e) >= 0)
    CG_EMIT_ARGS(e, x, scratch(c.coef), in(residual_in(e)), y);
  else
    CG_EMIT_ARGS(e, x, scratch(c.coef), y);
  return 0;
}

/* batchnorm_relu_bwd_win by cells (pool_bn_bwd.cu) when C/V divides
 * BLOCK; else 0 (chan_reduce.cu and chan_apply.cu gathering pixel by
 * pixel), or NETC_PBB=0. */
static int pbb_cells(const Emit *e, const CgEmitChan *c) {
  int cv = c->C / c->V;
  return e->opts->pbb && cv <= BLOCK && BLOCK % cv == 0;
}

/* pool_bn_bwd.cu's pass `op` (NETC_PBB_SUMS or NETC_PBB_APPLY) of plan c
 * on G blocks. */
static int pbb_launch(Emit *e, const CgEmitChan *c, const char *op, unsigned G) {
  if (cg_emit_begin(e, strcmp(op, "NETC_PBB_SUMS") == 0 ? "sums" : "apply")) return -1;
  const IrType *z = out_type(e, 0);
  cg_emit_def(e, op, "1");
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(c->dt));
  cg_emit_def(e, "NETC_TG", "%s", cg_tmpl_ctype(c->tg));
  cg_emit_def(e, "NETC_TY", "%s", cg_tmpl_ctype(c->ty));
  cg_emit_def(e, "NETC_N", "%lld", (long long)dim(e, z, 0));
  cg_emit_def(e, "NETC_C", "%d", c->C);
  cg_emit_def(e, "NETC_V", "%d", c->V);
  cg_emit_window_defs(e, z, c->gather);
  return cg_emit_end(e, "pool_bn_bwd.cu", G, 1, BLOCK, 1);
}

/* batchnorm_relu_bwd_win's launches by cells (pool_bn_bwd.cu `sums`,
 * chan_finalize.cu, pool_bn_bwd.cu `apply`): bn_bwd_from's arguments, one
 * unit of work per cell of SH x SW pixels and channel vector. */
static int pbb_bwd(Emit *e, CgEmitChan *c, CgKArg dy, CgKArg x, CgKArg beta, int p, CgKWhen when) {
  const IrType *z = out_type(e, 0);
  int st[2];
  cg_emit_attr2(e->n, "s", 1, st);
  int64_t cells = dim(e, z, 0) * ((z->dim[1] + st[0] - 1) / st[0]) * ((z->dim[2] + st[1] - 1) / st[1]);
  unsigned grid = cg_emit_grid_1d(e, cells * (c->C / c->V));
  c->G = (int)grid;
  c->coef = align256((size_t)2 * c->G * c->C * sizeof(float));
  need_scratch(e, c->coef + (size_t)4 * c->C * sizeof(float));
  if (pbb_launch(e, c, "NETC_PBB_SUMS", grid)) return -1;
  CG_EMIT_ARGS(e, dy, in(1), x, in(p), beta, in(p + 1), in(p + 2), scratch(0));
  last_when(e, when);
  if (bwd_finalize(e, *c, p, beta, when)) return -1;
  if (pbb_launch(e, c, "NETC_PBB_APPLY", grid)) return -1;
  CG_EMIT_ARGS(e, dy, in(1), x, in(p + 1), scratch(c->coef), out(0));
  last_when(e, when);
  return 0;
}

/* The launches of a batch norm's backward of gradient dy into output 0
 * (may be dy: in place), dgamma and dbeta outputs 1 and 2; its inputs x,
 * gamma, mean, invstd in a row from index `at` + 1, after beta at `at`
 * when relu (at < 0: from index 1, no beta).  Each launch runs `when`. */
int cg_emit_bn_bwd_from(Emit *e, int relu, CgKArg dy, int at, CgKWhen when) {
  int xi = relu ? at + 1 : 1, p = xi + 1;
  int gather = e->n->op == IR_OP_BATCHNORM_RELU_BWD_WIN; /* dy a max pool's, its winners input 1 */
  CgKArg x = in(xi), beta = relu ? in(at) : in(p);
  CgEmitChan c;
  if (cg_emit_chan_plan_mixed(e, in_type(e, xi), out_type(e, 0)->dtype, arg_type(e, dy)->dtype, &c) ||
      cg_emit_check_f32(e, p, p + 2, 1, 2) || (relu && cg_emit_check_f32(e, at, at, 1, 0)))
    return -1;
  if (gather) {
    const IrType *w = in_type(e, 1);
    if (w->dtype != IR_DT_I8 || w->layout != IR_LAYOUT_NHWC || out_type(e, 0)->layout != IR_LAYOUT_NHWC)
      return cg_emit_fail(e, "batchnorm_relu_bwd_win needs NHWC tensors and i8 winners");
    c.gather = w;
    if (pbb_cells(e, &c)) return pbb_bwd(e, &c, dy, x, beta, p, when);
  }
  if (cg_emit_chan_reduce(e, &c, "NETC_RED_BWD", relu)) return -1;
  if (gather)
    CG_EMIT_ARGS(e, dy, in(1), x, in(p), beta, in(p + 1), in(p + 2), scratch(0));
  else
    CG_EMIT_ARGS(e, dy, x, in(p), beta, in(p + 1), in(p + 2), scratch(0));
  last_when(e, when);
  if (bwd_finalize(e, c, p, beta, when)) return -1;
  if (cg_emit_chan_apply(e, &c, "NETC_APPLY_BWD", relu, "float")) return -1;
  if (gather)
    CG_EMIT_ARGS(e, dy, in(1), x, in(p + 1), scratch(c.coef), out(0));
  else
    CG_EMIT_ARGS(e, dy, x, in(p + 1), scratch(c.coef), out(0));
  last_when(e, when);
  return 0;
}

/* batchnorm_bwd (dy, x, gamma, mean, invstd) and batchnorm_relu_bwd
 * (dy, beta, z, gamma, mean, invstd) -> dx, dgamma, dbeta (and
 * batchnorm_relu_bwd_win (dy, win, beta, z, ...): bn_bwd_from at 2).  The relu's
 * mask is recomputed from z with beta (the kernels take gamma twice in its
 * place without one).  dy and dx may have other dtypes than x (the f32
 * stem's f16 gradient, read as it is). */
static int bn_bwd(Emit *e, int relu) { return cg_emit_bn_bwd_from(e, relu, in(0), relu ? 1 : -1, CG_K_ALWAYS); }

/* The batch-norm nodes: batchnorm (x, gamma, beta, mean, var) -> y;
 * batchnorm_train (x, gamma, beta, running mean, running var) -> y, mean,
 * invstd, and the backward ops above. */
int cg_emit_bn_batchnorm(Emit *e) { return cg_emit_bn_infer(e, in_type(e, 0), 1, in(0), out(0), 0); }
int cg_emit_bn_batchnorm_train(Emit *e) { return cg_emit_bn_train(e, in_type(e, 0), in(0), out(0), 1, 1, 0, -1); }
int cg_emit_bn_batchnorm_bwd(Emit *e) { return bn_bwd(e, 0); }
int cg_emit_bn_batchnorm_relu_bwd(Emit *e) { return bn_bwd(e, 1); }
int cg_emit_bn_batchnorm_relu_bwd_win(Emit *e) { return cg_emit_bn_bwd_from(e, 1, in(0), 2, CG_K_ALWAYS); }

int cg_emit_bn_channel_sum(Emit *e) {
  CgEmitChan c;
  if (cg_emit_chan_plan(e, in_type(e, 0), &c) || cg_emit_check_f32(e, 1, 0, 0, 0)) return -1;
  if (cg_emit_chan_reduce(e, &c, "NETC_RED_SUM", 0)) return -1;
  CG_EMIT_ARGS(e, in(0), scratch(0));
  if (cg_emit_chan_finalize(e, &c, "NETC_FIN_SUM")) return -1;
  CG_EMIT_ARGS(e, scratch(0), out(0));
  return 0;
}
