/* cg_kernels.c - the generated CUDA kernels of one node of a final
 * graph (cg_kernels.h gives the contract; docs/codegen.md the kernel
 * list).  Each op maps onto one to three instantiations of the templates in
 * codegen_templates/, with every shape (batch included), dtype, attribute
 * and vector width baked in as #defines, plus the launch geometry and which
 * of the node's tensors (or scratch) each kernel parameter is.  The
 * launches are built with cg_emit.c (cg_emit.h). */
#include "cg_emit.h"
#include "cg_tmpl.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_nvrtc.h"
#include "cg_text.h"

static const char *layout_tag(const IrType *t) {
  switch (t->layout) {
  case IR_LAYOUT_NCHW: return "nchw";
  case IR_LAYOUT_NHWC: return "nhwc";
  case IR_LAYOUT_KCRS: return "kcrs";
  case IR_LAYOUT_KRSC: return "krsc";
  default: return "row";
  }
}

/* A tensor as [rows, C] with channels innermost: NHWC (rows = N*H*W) or a
 * row-major [N, C] matrix.  -1 (after fail) for anything else. */
static int chan_view(Emit *e, const IrType *t, int64_t *rows, int *C) {
  if (!((t->rank == 4 && t->layout == IR_LAYOUT_NHWC) || (t->rank == 2 && t->layout == IR_LAYOUT_ROW))) {
    char b[96];
    return cg_emit_fail(e, "per-channel kernels need NHWC or [N, C] tensors, not %s", ir_type_str(t, b, sizeof b));
  }
  *C = (int)dim(e, t, t->rank - 1);
  *rows = numel(e, t) / *C;
  return 0;
}

/* --- elementwise (eltwise.cu) ----------------------------------------------- */

/* Inputs a0, a1, a2 (repeat a1 when the op takes fewer), output o0. */
static int eltwise(Emit *e, const char *stage, const char *op, IrDtype dt, int64_t count, CgKArg a0, CgKArg a1,
                   CgKArg a2, CgKArg o0) {
  if (!cg_tmpl_is_float(dt)) return cg_emit_fail(e, "%s of %s has no GPU kernel", op, ir_dtype_name(dt));
  int v = cg_tmpl_flat_vec(dt);
  if (cg_emit_begin(e, stage)) return -1;
  cg_emit_def(e, op, "1");
  cg_emit_def(e, dt == IR_DT_F32 ? "NETC_DTYPE_F32" : dt == IR_DT_F16 ? "NETC_DTYPE_F16" : "NETC_DTYPE_BF16", "1");
  cg_emit_def(e, "NETC_VEC", "%d", v);
  cg_emit_def(e, "NETC_N", "%lldLL", (long long)count);
  CG_EMIT_ARGS(e, a0, a1, a2, o0, o0); /* out1 is unused by these ops */
  int64_t units = count / v > count % v ? count / v : count % v;
  return cg_emit_end(e, "eltwise.cu", cg_emit_grid_1d(e, units), 1, BLOCK, 1);
}

static int emit_eltwise(Emit *e) {
  const IrType *t = in_type(e, 0);
  int64_t n = numel(e, t);
  for (int i = 1; i < e->n->nin; i++)
    if (in_type(e, i)->dtype != t->dtype) return cg_emit_fail(e, "inputs of different dtypes");
  switch (e->n->op) {
  case IR_OP_RELU: return eltwise(e, "", "NETC_OP_RELU_FWD", t->dtype, n, in(0), in(0), in(0), out(0));
  case IR_OP_ADD: return eltwise(e, "", "NETC_OP_ADD_FWD", t->dtype, n, in(0), in(1), in(1), out(0));
  case IR_OP_ADD_RELU: return eltwise(e, "", "NETC_OP_ADD_RELU_FWD", t->dtype, n, in(0), in(1), in(1), out(0));
  case IR_OP_SUM_RELU_BWD: /* (a, b, y): the template takes (y, a, b) */
    return eltwise(e, "", "NETC_OP_SUM_RELU_BWD", t->dtype, n, in(2), in(0), in(1), out(0));
  default: /* relu_bwd (dy, y): the template takes (y, dy) */
    return eltwise(e, "", "NETC_OP_RELU_BWD", t->dtype, n, in(1), in(0), in(0), out(0));
  }
}

/* --- per-channel ops (chan_reduce.cu, chan_finalize.cu, chan_apply.cu) ----- */

typedef struct Chan {
  int64_t rows;
  int C, V, bx, by, G, gy;
  int noshift; /* finalize: the sums are of x itself (G = 1), not shifted by its first row */
  int sb;      /* finalize (train): also the equivalent scale and bias, in x's dtype */
  IrDtype dt;
  IrDtype ty, tg; /* apply's result and the gradient dy (NETC_TY, NETC_TG), when not dt */
  size_t coef;    /* scratch offset of coef[4][C] */
  int round_x;    /* apply (AFFINE): x rounded to ty first (NETC_ROUND_X) */
  int copy;       /* reduce (STATS): also writes x rounded to tc, its third argument (NETC_RED_COPY) */
  IrDtype tc;
  const IrType *gather; /* BWD: dy is this max pool output's gradient, gathered (NETC_GATHER), or NULL */
} Chan;

/* Shape and reduction geometry of per-channel work on tensor t whose
 * result y has dtype ty and gradient dy dtype tg: vectors as wide as
 * the widest of the three dtypes allows. */
static int chan_plan_mixed(Emit *e, const IrType *t, IrDtype ty, IrDtype tg, Chan *c) {
  memset(c, 0, sizeof *c);
  if (chan_view(e, t, &c->rows, &c->C)) return -1;
  if (!cg_tmpl_is_float(t->dtype) || !cg_tmpl_is_float(ty) || !cg_tmpl_is_float(tg))
    return cg_emit_fail(e, "per-channel kernels need float tensors");
  c->dt = t->dtype, c->ty = ty, c->tg = tg;
  c->V = cg_emit_vec(t->dtype, c->C);
  if (cg_emit_vec(ty, c->C) < c->V) c->V = cg_emit_vec(ty, c->C);
  if (cg_emit_vec(tg, c->C) < c->V) c->V = cg_emit_vec(tg, c->C);
  int cv = c->C / c->V;
  c->bx = cv < 16 ? cv : 16;
  c->by = BLOCK / c->bx;
  c->gy = (cv + c->bx - 1) / c->bx;
  int64_t want = (int64_t)(e->dev->sm_count > 0 ? e->dev->sm_count : 1) * 4 / c->gy;
  int64_t chunks = (c->rows + c->by - 1) / c->by;
  if (want < 1) want = 1;
  c->G = (int)(chunks < want ? chunks : want);
  c->coef = align256((size_t)2 * c->G * c->C * sizeof(float));
  return 0;
}

static int chan_plan(Emit *e, const IrType *t, Chan *c) { return chan_plan_mixed(e, t, t->dtype, t->dtype, c); }

static void chan_defs(Emit *e, const Chan *c) {
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(c->dt));
  if (c->tg != c->dt) cg_emit_def(e, "NETC_TG", "%s", cg_tmpl_ctype(c->tg));
  cg_emit_def(e, "NETC_ROWS", "%lldLL", (long long)c->rows);
  cg_emit_def(e, "NETC_C", "%d", c->C);
  cg_emit_def(e, "NETC_V", "%d", c->V);
  if (c->gather) {
    cg_emit_def(e, "NETC_GATHER", "1");
    cg_emit_window_defs(e, out_type(e, 0), c->gather);
  }
}

/* The partial sums: op is NETC_RED_STATS, NETC_RED_BWD or NETC_RED_SUM. */
static int chan_reduce(Emit *e, const Chan *c, const char *op, int relu) {
  if (cg_emit_begin(e, strcmp(op, "NETC_RED_STATS") == 0 ? "stats" : "sums")) return -1;
  cg_emit_def(e, op, "1");
  cg_emit_def(e, "NETC_RELU", "%d", relu);
  chan_defs(e, c);
  if (c->copy) {
    cg_emit_def(e, "NETC_RED_COPY", "1");
    cg_emit_def(e, "NETC_TC", "%s", cg_tmpl_ctype(c->tc));
  }
  cg_emit_def(e, "NETC_BX", "%d", c->bx);
  cg_emit_def(e, "NETC_BY", "%d", c->by);
  need_scratch(e, c->coef + (size_t)4 * c->C * sizeof(float));
  return cg_emit_end(e, "chan_reduce.cu", (unsigned)c->G, (unsigned)c->gy, (unsigned)c->bx, (unsigned)c->by);
}

static int chan_finalize(Emit *e, const Chan *c, const char *op) {
  if (cg_emit_begin(e, c->noshift ? "finalize_sums" : "finalize")) return -1;
  cg_emit_def(e, op, "1");
  if (c->noshift) cg_emit_def(e, "NETC_NOSHIFT", "1");
  if (c->sb) cg_emit_def(e, "NETC_FIN_SB", "1");
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(c->dt));
  cg_emit_def(e, "NETC_C", "%d", c->C);
  cg_emit_def(e, "NETC_G", "%d", c->G);
  cg_emit_def(e, "NETC_M", "%lldLL", (long long)c->rows);
  cg_emit_def_float(e, "NETC_EPS", ir_attr_float(e->n, "eps", 1e-5));
  cg_emit_def_float(e, "NETC_MOM", ir_attr_float(e->n, "momentum", 0.1));
  need_scratch(e, c->coef + (size_t)4 * c->C * sizeof(float));
  return cg_emit_end(e, "chan_finalize.cu", (unsigned)((c->C + FIN_CB - 1) / FIN_CB), 1, FIN_CB, FIN_GY);
}

/* residual: NETC_APPLY_AFFINE adds a tensor shaped like x (the node's
 * residual input) before the relu. */
static int chan_apply(Emit *e, const Chan *c, const char *op, int relu, const char *tb) {
  int residual = strcmp(op, "NETC_APPLY_AFFINE") == 0 && residual_in(e) >= 0;
  const char *stage = strcmp(op, "NETC_APPLY_BIAS") == 0 ? "bias"
                      : strcmp(op, "NETC_APPLY_SBR") == 0 ? "prologue"
                      : strcmp(op, "NETC_APPLY_ABC") == 0 ? "apply_abc"
                      : residual                           ? "apply_add"
                                                           : "apply";
  if (cg_emit_begin(e, stage)) return -1;
  unsigned grid = cg_emit_grid_1d(e, c->rows * (c->C / c->V));
  cg_emit_def(e, op, "1");
  cg_emit_def(e, "NETC_RELU", "%d", relu);
  if (residual) cg_emit_def(e, "NETC_RESIDUAL", "1");
  cg_emit_def(e, "NETC_TB", "%s", tb);
  cg_emit_def(e, "NETC_GRID", "%u", grid);
  chan_defs(e, c);
  if (c->ty != c->dt) cg_emit_def(e, "NETC_TY", "%s", cg_tmpl_ctype(c->ty));
  if (c->round_x) cg_emit_def(e, "NETC_ROUND_X", "1");
  return cg_emit_end(e, "chan_apply.cu", grid, 1, BLOCK, 1);
}

/* batchnorm / conv2d_bn: running statistics (inputs p..p+3: gamma, beta,
 * mean, var) into coef, then the affine on tensor x into y.  conv2d_bn
 * (conv set): the finalize runs before the convolution and also writes the
 * equivalent scale and bias (f32) for the convolution's epilogue; the
 * affine runs only when cuDNN's plan has no epilogue. */
static int bn_infer(Emit *e, const IrType *t, int p, CgKArg x, CgKArg y, int relu) {
  Chan c;
  int epi = e->k->has_conv;
  if (chan_plan(e, t, &c) || cg_emit_check_f32(e, p, p + 3, 1, 0)) return -1;
  size_t esb = c.coef + align256((size_t)4 * c.C * sizeof(float));
  c.sb = epi;
  if (chan_finalize(e, &c, "NETC_FIN_INFER")) return -1;
  if (epi) {
    CG_EMIT_ARGS(e, in(p), in(p + 1), in(p + 2), in(p + 3), scratch(c.coef), scratch(esb));
    need_scratch(e, esb + (size_t)2 * c.C * sizeof(float));
    e->k->launch[e->k->nlaunch - 1].before = 1;
    CgConvDesc *d = &e->k->conv;
    d->epilogue = CG_EPI_AFFINE | (relu ? CG_EPI_RELU : 0) | (residual_in(e) >= 0 ? CG_EPI_RESIDUAL : 0);
    e->k->conv_esb = scratch(esb);
    if (residual_in(e) >= 0) e->k->conv_res = in(residual_in(e));
  } else {
    CG_EMIT_ARGS(e, in(p), in(p + 1), in(p + 2), in(p + 3), scratch(c.coef));
  }
  if (chan_apply(e, &c, "NETC_APPLY_AFFINE", relu, "float")) return -1;
  if (epi) last_when(e, CG_K_EPI_UNFUSED);
  if (residual_in(e) >= 0)
    CG_EMIT_ARGS(e, x, scratch(c.coef), in(residual_in(e)), y);
  else
    CG_EMIT_ARGS(e, x, scratch(c.coef), y);
  return 0;
}

/* The training finalize's arguments (chan_finalize.cu NETC_FIN_TRAIN): x,
 * the sums in scratch 0, inputs p..p+3, outputs o and o+1, the
 * coefficients, and output sb when it writes the scale and bias (sb >= 0). */
static void train_finalize_args(Emit *e, CgKArg x, int p, int o, size_t coef, int sb) {
  if (sb >= 0)
    CG_EMIT_ARGS(e, x, scratch(0), in(p), in(p + 1), in(p + 2), in(p + 3), out(o), out(o + 1), scratch(coef), out(sb));
  else
    CG_EMIT_ARGS(e, x, scratch(0), in(p), in(p + 1), in(p + 2), in(p + 3), out(o), out(o + 1), scratch(coef));
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
static int bn_train(Emit *e, const IrType *t, CgKArg x, CgKArg y, int p, int o, int relu, int sb) {
  Chan c;
  if (chan_plan_mixed(e, t, arg_type(e, y)->dtype /* y_dtype */, t->dtype, &c) ||
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
  if (chan_reduce(e, &c, "NETC_RED_STATS", 0)) return -1;
  if (zc >= 0)
    CG_EMIT_ARGS(e, x, scratch(0), out(zc));
  else
    CG_EMIT_ARGS(e, x, scratch(0));
  if (fusable) last_when(e, CG_K_UNFUSED);
  c.sb = sb >= 0;
  if (sb >= 0 && out_type(e, sb)->dtype != c.dt) return cg_emit_fail(e, "the scale and bias must have z's dtype");
  if (chan_finalize(e, &c, "NETC_FIN_TRAIN")) return -1;
  train_finalize_args(e, x, p, o, c.coef, sb);
  if (fusable) {
    last_when(e, CG_K_UNFUSED);
    Chan f = c;
    f.G = 1, f.noshift = 1;
    if (chan_finalize(e, &f, "NETC_FIN_TRAIN")) return -1;
    train_finalize_args(e, x, p, o, c.coef, sb);
    last_when(e, CG_K_FUSED);
    e->k->conv.genstats = 1;
    e->k->conv_stats = scratch(0);
  }
  if (sb >= 0) return 0;
  c.round_x = c.dt == IR_DT_F32 && c.ty != IR_DT_F32; /* rt_ref_bn_normalize after rounding, as the CPU */
  if (chan_apply(e, &c, "NETC_APPLY_AFFINE", relu, "float")) return -1;
  if (residual_in(e) >= 0)
    CG_EMIT_ARGS(e, x, scratch(c.coef), in(residual_in(e)), y);
  else
    CG_EMIT_ARGS(e, x, scratch(c.coef), y);
  return 0;
}

/* batchnorm_relu_bwd_win by cells (pool_bn_bwd.cu) when C/V divides
 * BLOCK; else 0 (chan_reduce.cu and chan_apply.cu gathering pixel by
 * pixel), or NETC_PBB=0. */
static int pbb_cells(const Emit *e, const Chan *c) {
  int cv = c->C / c->V;
  return e->opts->pbb && cv <= BLOCK && BLOCK % cv == 0;
}

/* pool_bn_bwd.cu's pass `op` (NETC_PBB_SUMS or NETC_PBB_APPLY) of plan c
 * on G blocks. */
static int pbb_launch(Emit *e, const Chan *c, const char *op, unsigned G) {
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
static int pbb_bwd(Emit *e, Chan *c, CgKArg dy, CgKArg x, CgKArg beta, int p, CgKWhen when) {
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
  if (chan_finalize(e, c, "NETC_FIN_BWD")) return -1;
  CG_EMIT_ARGS(e, scratch(0), in(p), beta, in(p + 2), out(1), out(2), scratch(c->coef));
  last_when(e, when);
  if (pbb_launch(e, c, "NETC_PBB_APPLY", grid)) return -1;
  CG_EMIT_ARGS(e, dy, in(1), x, in(p + 1), scratch(c->coef), out(0));
  last_when(e, when);
  return 0;
}

/* The launches of a batch norm's backward of gradient dy into output 0
 * (may be dy: in place), dgamma and dbeta outputs 1 and 2; its inputs x,
 * gamma, mean, invstd in a row from index `at` + 1, after beta at `at`
 * when relu (at < 0: from index 1, no beta).  Each launch runs `when`. */
static int bn_bwd_from(Emit *e, int relu, CgKArg dy, int at, CgKWhen when) {
  int xi = relu ? at + 1 : 1, p = xi + 1;
  int gather = e->n->op == IR_OP_BATCHNORM_RELU_BWD_WIN; /* dy a max pool's, its winners input 1 */
  CgKArg x = in(xi), beta = relu ? in(at) : in(p);
  Chan c;
  if (chan_plan_mixed(e, in_type(e, xi), out_type(e, 0)->dtype, arg_type(e, dy)->dtype, &c) ||
      cg_emit_check_f32(e, p, p + 2, 1, 2) || (relu && cg_emit_check_f32(e, at, at, 1, 0)))
    return -1;
  if (gather) {
    const IrType *w = in_type(e, 1);
    if (w->dtype != IR_DT_I8 || w->layout != IR_LAYOUT_NHWC || out_type(e, 0)->layout != IR_LAYOUT_NHWC)
      return cg_emit_fail(e, "batchnorm_relu_bwd_win needs NHWC tensors and i8 winners");
    c.gather = w;
    if (pbb_cells(e, &c)) return pbb_bwd(e, &c, dy, x, beta, p, when);
  }
  if (chan_reduce(e, &c, "NETC_RED_BWD", relu)) return -1;
  if (gather)
    CG_EMIT_ARGS(e, dy, in(1), x, in(p), beta, in(p + 1), in(p + 2), scratch(0));
  else
    CG_EMIT_ARGS(e, dy, x, in(p), beta, in(p + 1), in(p + 2), scratch(0));
  last_when(e, when);
  if (chan_finalize(e, &c, "NETC_FIN_BWD")) return -1;
  CG_EMIT_ARGS(e, scratch(0), in(p), beta, in(p + 2), out(1), out(2), scratch(c.coef));
  last_when(e, when);
  if (chan_apply(e, &c, "NETC_APPLY_BWD", relu, "float")) return -1;
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
static int bn_bwd(Emit *e, int relu) { return bn_bwd_from(e, relu, in(0), relu ? 1 : -1, CG_K_ALWAYS); }

static int emit_channel_sum(Emit *e) {
  Chan c;
  if (chan_plan(e, in_type(e, 0), &c) || cg_emit_check_f32(e, 1, 0, 0, 0)) return -1;
  if (chan_reduce(e, &c, "NETC_RED_SUM", 0)) return -1;
  CG_EMIT_ARGS(e, in(0), scratch(0));
  if (chan_finalize(e, &c, "NETC_FIN_SUM")) return -1;
  CG_EMIT_ARGS(e, scratch(0), out(0));
  return 0;
}

/* --- convolutions (cuDNN) and what follows them ----------------------------- */

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
  const IrAttr *math = ir_attr_find(n, "math");
  d->tf32 = tx->dtype == IR_DT_F32 && math && math->kind == IR_ATTR_STR && strcmp(math->s, "tf32") == 0;
}

/* The node's convolution: x, w, y are the forward roles' tensors. */
static int conv(Emit *e, CgConvKind kind, CgKArg x, CgKArg w, CgKArg y) {
  const IrType *tx = arg_type(e, x), *tw = arg_type(e, w), *ty = arg_type(e, y);
  if (tx->layout != IR_LAYOUT_NHWC || ty->layout != IR_LAYOUT_NHWC || tw->layout != IR_LAYOUT_KRSC)
    return cg_emit_fail(e, "convolutions run on NHWC activations and KRSC filters");
  if (tx->dtype != tw->dtype || tx->dtype != ty->dtype || !cg_tmpl_is_float(tx->dtype))
    return cg_emit_fail(e, "a convolution of %s by %s into %s has no GPU kernel yet", ir_dtype_name(tx->dtype),
                ir_dtype_name(tw->dtype), ir_dtype_name(ty->dtype));
  conv_geometry(e, x, w, y, &e->k->conv);
  e->k->conv.kind = kind;
  e->k->has_conv = 1;
  e->k->conv_x = x, e->k->conv_w = w, e->k->conv_y = y;
  return 0;
}

/* conv2d_bwd_data_bn_relu (dy, w, beta, z, gamma, mean, invstd) -> dz,
 * dgamma, dbeta.  The data gradient goes to dz; then either cuDNN's plan
 * masked it and wrote dgamma, dbeta and the coefficients a, b, c into
 * scratch 0 (conv.dbn, rt_cudnn.h), and one launch (FUSED) makes dz = a * dz
 * + b * z + c in place, or the plan was the plain data gradient and the
 * batch norm's backward launches (UNFUSED) run on it in place. */
static int dgrad_bn_relu(Emit *e) {
  if (conv(e, CG_CONV_BWD_DATA, out(0), in(1), in(0))) return -1;
  Chan c;
  if (chan_plan(e, out_type(e, 0), &c) || cg_emit_check_f32(e, 2, 2, 1, 2) || cg_emit_check_f32(e, 4, 6, 1, 0))
    return -1;
  if (c.dt != in_type(e, 3)->dtype) return cg_emit_fail(e, "z and the data gradient differ in dtype");
  CgKNode *k = e->k;
  k->conv.dbn = 1;
  k->conv_bn[CG_KBN_Z] = in(3), k->conv_bn[CG_KBN_MEAN] = in(5), k->conv_bn[CG_KBN_INVSTD] = in(6);
  k->conv_bn[CG_KBN_GAMMA] = in(4), k->conv_bn[CG_KBN_BETA] = in(2);
  k->conv_bn[CG_KBN_DGAMMA] = out(1), k->conv_bn[CG_KBN_DBETA] = out(2), k->conv_bn[CG_KBN_ABC] = scratch(0);
  need_scratch(e, (size_t)3 * c.C * sizeof(float));
  if (chan_apply(e, &c, "NETC_APPLY_ABC", 0, "float")) return -1;
  CG_EMIT_ARGS(e, out(0), in(3), scratch(0), out(0));
  last_when(e, CG_K_FUSED);
  return bn_bwd_from(e, 1, out(0), 2, CG_K_UNFUSED);
}

static int emit_conv_body(Emit *e) {
  switch (e->n->op) {
  case IR_OP_CONV2D: {
    if (conv(e, CG_CONV_FWD, in(0), in(1), out(0))) return -1;
    if (e->n->nin < 3) return 0;
    Chan c;
    if (chan_plan(e, out_type(e, 0), &c)) return -1;
    const char *tb = cg_tmpl_ctype(in_type(e, 2)->dtype);
    if (!cg_tmpl_is_float(in_type(e, 2)->dtype)) return cg_emit_fail(e, "bias is not a float tensor");
    if (chan_apply(e, &c, "NETC_APPLY_BIAS", 0, tb)) return -1;
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
    if (g >= 0 ? eltwise(e, "mask", "NETC_OP_SUM_RELU_BWD", dt, count, in(2), out(0), in(g), out(0))
               : eltwise(e, "mask", "NETC_OP_RELU_BWD", dt, count, in(2), out(0), out(0), out(0)))
      return -1;
    last_when(e, CG_K_EPI_UNFUSED);
    return 0;
  }
  case IR_OP_CONV2D_BWD_DATA_BN_RELU: return dgrad_bn_relu(e);
  case IR_OP_CONV2D_BN:
    if (conv(e, CG_CONV_FWD, in(0), in(1), out(0))) return -1;
    return bn_infer(e, out_type(e, 0), 2, out(0), out(0), (int)ir_attr_int(e->n, "relu", 0));
  case IR_OP_CONV2D_BN_STATS: /* z = out 0, mean, invstd, sb = out 3 */
    if (conv(e, CG_CONV_FWD, in(0), in(1), out(0))) return -1;
    return bn_train(e, out_type(e, 0), out(0), out(0), 2, 1, 1, 3);
  default: /* conv2d_bn_train: z = out 0, y = out 1 */
    if (conv(e, CG_CONV_FWD, in(0), in(1), out(0))) return -1;
    return bn_train(e, out_type(e, 0), out(0), out(1), 2, 2, (int)ir_attr_int(e->n, "relu", 0), -1);
  }
}

/* --- a strided convolution on few channels, folded (s2d.cu) ------------------ */

/* Whether node e's convolution runs folded: a stride-2 f32 convolution
 * on at most 4 channels (ResNet's stem) in training (conv2d_bn_train, or
 * conv2d_bn_stats when pass prologue left its normalizing to the max pool),
 * ungrouped and undilated, without a prologue; then *d is its description
 * as it would be planned unfolded.  $NETC_S2D=0 keeps every convolution as
 * it is, $NETC_S2D=all also folds weight gradients.  On the H200 (ResNet-50,
 * batch 256) the folded forward takes 0.91 ms against 1.39; the folded
 * weight gradient is no faster (1.61 ms against 1.65), so it is not the
 * default.  Inference's conv2d_bn (its epilogue planned on the folded
 * description) is not folded: untried. */
static int s2d_node(const Emit *e, CgConvDesc *d) {
  const IrNode *n = e->n;
  int all = e->opts->s2d == 2, wgrad = n->op == IR_OP_CONV2D_BWD_WEIGHT;
  int fwd = n->op == IR_OP_CONV2D_BN_TRAIN || n->op == IR_OP_CONV2D_BN_STATS;
  if (!e->opts->s2d || (!fwd && !(all && wgrad)) ||
      ir_conv_prologue(e->g, n) >= 0)
    return 0;
  if (wgrad)
    conv_geometry(e, in(1), out(0), in(0), d);
  else
    conv_geometry(e, in(0), in(1), out(0), d);
  return d->dtype == IR_DT_F32 && arg_type(e, in(wgrad))->layout == IR_LAYOUT_NHWC && d->c <= 4 &&
         d->stride[0] == 2 && d->stride[1] == 2 && d->dilation[0] == 1 && d->dilation[1] == 1 && d->r > 2 &&
         d->s > 2 && d->groups == 1;
}

/* One s2d.cu launch: `op` from `from` to `to` for an unfolded tensor
 * dims = {n, h, w, c} and its fold {hq, wq} (padding {ph, pw}); `count`
 * results.  Scratch offsets are placed by s2d_place. */
static int s2d_launch(Emit *e, const char *stage, const char *op, const int dims[8], CgKArg from, CgKArg to,
                      int64_t count) {
  static const char *const names[] = {"NETC_N", "NETC_H", "NETC_W", "NETC_C", "NETC_HQ",
                                      "NETC_WQ", "NETC_PH", "NETC_PW"};
  if (cg_emit_begin(e, stage)) return -1;
  cg_emit_def(e, op, "1");
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(IR_DT_F32));
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
  size_t xq = align256(k->scratch_bytes), xq_bytes = (size_t)d->n * xd[4] * xd[5] * 4 * d->c * sizeof(float);
  size_t wf = align256(xq + xq_bytes), wq_bytes = (size_t)d->k * wd[4] * wd[5] * 4 * d->c * sizeof(float);
  CgKArg fx = {.kind = CG_KARG_SCRATCH, .offset = xq}, fw = {.kind = CG_KARG_SCRATCH, .offset = wf};
  k->launch[0].args[0] = k->conv_x, k->launch[0].args[1] = fx;
  if (fwd) k->launch[1].args[0] = k->conv_w, k->launch[1].args[1] = fw;
  if (!fwd && s2d_launch(e, "s2d_dw", "NETC_S2D_DW", wd, fw, k->conv_w, (int64_t)d->k * d->r * d->s * d->c))
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
  if (s2d_launch(e, "s2d_x", "NETC_S2D_X", xd, none, none, (int64_t)d->n * xd[4] * xd[5] * 4 * d->c / v) ||
      (e->n->op != IR_OP_CONV2D_BWD_WEIGHT &&
       s2d_launch(e, "s2d_w", "NETC_S2D_W", wd, none, none, (int64_t)d->k * wd[4] * wd[5] * 4 * d->c / v)))
    return -1;
  for (int i = 0; i < e->k->nlaunch; i++) e->k->launch[i].before = 1;
  return 0;
}

/* A node whose convolution has a prologue (input sbx: relu(x * scale +
 * bias) is what it convolves; x is input xi): cuDNN applies it on the fly
 * when it has an engine for that.  For when it has none, the node's first
 * launch (PROLOGUE) writes the activation into scratch past everything
 * else the node uses (placed once the rest is emitted). */
static int emit_conv(Emit *e) {
  int sbx = ir_conv_prologue(e->g, e->n), xi = e->n->op == IR_OP_CONV2D_BWD_WEIGHT ? 1 : 0;
  const IrType *tx = in_type(e, xi);
  if (sbx >= 0) {
    const IrType *ts = in_type(e, sbx);
    if (ts->dtype != tx->dtype || ts->rank != 2 || ts->dim[0] != 2 || ts->dim[1] != tx->dim[3])
      return cg_emit_fail(e, "the prologue's scale and bias must be [2, %lld] of x's dtype", (long long)tx->dim[3]);
    Chan c;
    if (chan_plan(e, tx, &c) || chan_apply(e, &c, "NETC_APPLY_SBR", 1, cg_tmpl_ctype(tx->dtype))) return -1;
    CG_EMIT_ARGS(e, in(xi), in(sbx), scratch(0));
    last_when(e, CG_K_PROLOGUE);
    e->k->launch[e->k->nlaunch - 1].before = 1;
  }
  CgConvDesc folded;
  int fold = sbx < 0 && s2d_node(e, &folded);
  if ((fold && s2d_fold(e, &folded)) || emit_conv_body(e) || (fold && s2d_place(e))) return -1;
  if (sbx < 0) return 0;
  CgKNode *k = e->k;
  if (k->conv_x.kind != CG_KARG_IN || k->conv_x.index != xi || k->conv.kind == CG_CONV_BWD_DATA)
    return cg_emit_fail(e, "a prologue on a convolution that does not read input %d", xi);
  k->conv.prologue = 1;
  k->conv_sb = in(sbx);
  k->pro_offset = align256(k->scratch_bytes);
  k->pro_bytes = (size_t)numel(e, tx) * ir_dtype_size(tx->dtype);
  k->launch[0].args[2].offset = k->pro_offset;
  return 0;
}

/* --- pooling (pool.cu) ------------------------------------------------------- */

/* The defines every pooling kernel of node e takes: op `which`, input x
 * tx, output (forward roles) ty. */
static void pool_defs(Emit *e, const char *which, const IrType *tx, const IrType *ty, int C, int V) {
  cg_emit_def(e, which, "1");
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(tx->dtype));
  cg_emit_def(e, "NETC_N", "%lld", (long long)dim(e, tx, 0));
  cg_emit_def(e, "NETC_C", "%d", C);
  cg_emit_def(e, "NETC_V", "%d", V);
  IrOp op = e->n->op;
  if (op == IR_OP_GLOBAL_AVGPOOL || op == IR_OP_GLOBAL_AVGPOOL_BWD) {
    cg_emit_def(e, "NETC_H", "%lld", (long long)tx->dim[1]);
    cg_emit_def(e, "NETC_W", "%lld", (long long)tx->dim[2]);
    return;
  }
  cg_emit_window_defs(e, tx, ty);
  cg_emit_def(e, "NETC_INCL", "%d", ir_attr_int(e->n, "include_pad", 1) != 0);
}

/* maxpool_bwd and maxpool_bn_relu_bwd: each window's winner as a byte
 * (scratch), from the pool's input y, or (recompute) from z as y =
 * relu(batchnorm(z)) rounded to y's dtype (NETC_POOL_BN; z may be wider). */
static int pool_arg(Emit *e, const IrType *tx, const IrType *ty, int C, int V, int recompute) {
  int k[2];
  cg_emit_attr2(e->n, "k", 1, k);
  if (k[0] * k[1] > 254)
    return cg_emit_fail(e, "a max-pool window of %d elements has no GPU backward (at most 254)", k[0] * k[1]);
  if (recompute) {
    if (cg_emit_check_f32(e, 2, 5, 1, 0)) return -1;
  } else if (in_type(e, 1)->dtype != tx->dtype) {
    return cg_emit_fail(e, "dy and x must share a dtype");
  }
  if (cg_emit_begin(e, "arg")) return -1;
  pool_defs(e, "NETC_POOL_MAX_ARG", tx, ty, C, V);
  if (recompute) {
    cg_emit_def(e, "NETC_POOL_BN", "1");
    cg_emit_def(e, "NETC_TZ", "%s", cg_tmpl_ctype(in_type(e, 1)->dtype));
    CG_EMIT_ARGS(e, in(1), in(2), in(3), in(4), in(5), scratch(0));
  } else {
    CG_EMIT_ARGS(e, in(1), scratch(0));
  }
  need_scratch(e, (size_t)numel(e, ty));
  return cg_emit_end(e, "pool.cu", cg_emit_grid_1d(e, numel(e, ty) / V), 1, BLOCK, 1);
}

/* maxpool_bn_relu's tiling (pool.cu NETC_POOL_TILE): *toh x *tow output
 * pixels a block of BLOCK threads, one per pixel and channel vector, when
 * C/V divides BLOCK and the input tile fits in shared memory (48 KB
 * static); 0 when it does not (the grid-stride kernel), or NETC_POOL_TILE=0. */
static int pool_tile(const Emit *e, const IrType *tx, int C, int V, int *toh, int *tow) {
  int cv = C / V, k[2], s[2];
  if (!e->opts->pool_tile || cv > BLOCK || BLOCK % cv) return 0;
  cg_emit_attr2(e->n, "k", 1, k);
  cg_emit_attr2(e->n, "s", 1, s);
  int pix = BLOCK / cv;
  *tow = pix < 8 ? pix : 8;
  *toh = pix / *tow;
  size_t bytes = (size_t)((*toh - 1) * s[0] + k[0]) * (size_t)((*tow - 1) * s[1] + k[1]) * (size_t)C *
                 ir_dtype_size(tx->dtype);
  return bytes <= 48 * 1024;
}

static int emit_pool(Emit *e) {
  IrOp op = e->n->op;
  int recompute = op == IR_OP_MAXPOOL_BN_RELU_BWD, fwd_bn = op == IR_OP_MAXPOOL_BN_RELU;
  int won = op == IR_OP_MAXPOOL_BWD_WIN; /* the winners from maxpool_bn_relu */
  int bwd = op == IR_OP_MAXPOOL_BWD || op == IR_OP_AVGPOOL_BWD || op == IR_OP_GLOBAL_AVGPOOL_BWD || recompute || won;
  const IrType *tx = bwd ? out_type(e, 0) : in_type(e, 0), *ty = bwd ? in_type(e, 0) : out_type(e, 0);
  if (tx->layout != IR_LAYOUT_NHWC || ty->layout != IR_LAYOUT_NHWC || tx->rank != 4)
    return cg_emit_fail(e, "pooling runs on NHWC tensors");
  if (!cg_tmpl_is_float(tx->dtype) || tx->dtype != ty->dtype) return cg_emit_fail(e, "pooling needs one float dtype");
  int C = (int)tx->dim[3], V = cg_emit_vec(tx->dtype, C);
  if (recompute && cg_emit_vec(in_type(e, 1)->dtype, C) < V) V = cg_emit_vec(in_type(e, 1)->dtype, C);
  const char *which = op == IR_OP_MAXPOOL || fwd_bn ? "NETC_POOL_MAX"
                      : op == IR_OP_AVGPOOL         ? "NETC_POOL_AVG"
                      : op == IR_OP_MAXPOOL_BWD     ? "NETC_POOL_MAX_BWD"
                      : recompute || won            ? "NETC_POOL_MAX_BWD"
                      : op == IR_OP_AVGPOOL_BWD     ? "NETC_POOL_AVG_BWD"
                      : op == IR_OP_GLOBAL_AVGPOOL  ? "NETC_GAP"
                                                    : "NETC_GAP_BWD";
  int64_t units = numel(e, bwd ? tx : ty) / V;
  /* max: each window's winner as a byte (scratch), then the gather */
  if ((op == IR_OP_MAXPOOL_BWD || recompute) && pool_arg(e, tx, ty, C, V, recompute)) return -1;
  if (cg_emit_begin(e, "")) return -1;
  pool_defs(e, which, tx, ty, C, V);
  if (op == IR_OP_MAXPOOL_BWD || recompute) {
    CG_EMIT_ARGS(e, in(0), scratch(0), out(0));
  } else if (won) {
    if (in_type(e, 1)->dtype != IR_DT_I8 || in_type(e, 1)->layout != IR_LAYOUT_NHWC)
      return cg_emit_fail(e, "maxpool_bwd_win winners must be i8 NHWC");
    CG_EMIT_ARGS(e, in(0), in(1), out(0));
  } else if (fwd_bn) { /* y recomputed from z (NETC_POOL_BN), z of y's dtype; the winners too */
    if (cg_emit_check_f32(e, 1, 4, 1, 0)) return -1;
    if (e->n->nout != 2 || out_type(e, 1)->dtype != IR_DT_I8)
      return cg_emit_fail(e, "maxpool_bn_relu writes i8 winners");
    cg_emit_def(e, "NETC_POOL_BN", "1");
    cg_emit_def(e, "NETC_POOL_WIN", "1");
    cg_emit_def(e, "NETC_TZ", "%s", cg_tmpl_ctype(tx->dtype));
    CG_EMIT_ARGS(e, in(0), in(1), in(2), in(3), in(4), out(0), out(1));
    int toh, tow;
    if (pool_tile(e, tx, C, V, &toh, &tow)) {
      cg_emit_def(e, "NETC_POOL_TILE", "1");
      cg_emit_def(e, "NETC_POOL_TOH", "%d", toh);
      cg_emit_def(e, "NETC_POOL_TOW", "%d", tow);
      int64_t tiles = dim(e, ty, 0) * ((ty->dim[1] + toh - 1) / toh) * ((ty->dim[2] + tow - 1) / tow);
      return cg_emit_end(e, "pool.cu", (unsigned)tiles, 1, BLOCK, 1);
    }
  } else {
    CG_EMIT_ARGS(e, in(0), out(0));
  }
  return cg_emit_end(e, "pool.cu", cg_emit_grid_1d(e, units), 1, BLOCK, 1);
}

/* --- copies and casts (cast.cu) ---------------------------------------------- */

static int emit_cast(Emit *e) {
  const IrType *tx = in_type(e, 0), *ty = out_type(e, 0);
  int64_t count = numel(e, tx);
  int i8 = ty->dtype == IR_DT_I8;
  if (!cg_tmpl_is_float(tx->dtype) || !(cg_tmpl_is_float(ty->dtype) || i8))
    return cg_emit_fail(e, "a cast from %s to %s has no GPU kernel", ir_dtype_name(tx->dtype),
                        ir_dtype_name(ty->dtype));
  /* 16-byte accesses on the wider side (f32 -> f16 reads 16 bytes, writes 8):
   * no access wider than the 16-byte alignment every tensor has */
  int v = cg_tmpl_flat_vec(tx->dtype);
  if (!i8 && cg_tmpl_flat_vec(ty->dtype) < v) v = cg_tmpl_flat_vec(ty->dtype);
  unsigned G = cg_emit_grid_1d(e, count);
  if (i8) {
    if (cg_emit_begin(e, "amax")) return -1;
    cg_emit_def(e, "NETC_CAST_AMAX", "1");
    cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(tx->dtype));
    cg_emit_def(e, "NETC_COUNT", "%lldLL", (long long)count);
    CG_EMIT_ARGS(e, in(0), scratch(0));
    need_scratch(e, G * sizeof(float));
    if (cg_emit_end(e, "cast.cu", G, 1, BLOCK, 1)) return -1;
  }
  if (cg_emit_begin(e, i8 ? "quant" : "")) return -1;
  cg_emit_def(e, i8 ? "NETC_CAST_I8" : "NETC_CAST", "1");
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(tx->dtype));
  cg_emit_def(e, "NETC_TY", "%s", cg_tmpl_ctype(ty->dtype));
  cg_emit_def(e, "NETC_COUNT", "%lldLL", (long long)count);
  cg_emit_def(e, "NETC_V", "%d", v);
  cg_emit_def(e, "NETC_G", "%u", G);
  if (i8)
    CG_EMIT_ARGS(e, in(0), scratch(0), out(0));
  else
    CG_EMIT_ARGS(e, in(0), out(0));
  return cg_emit_end(e, "cast.cu", cg_emit_grid_1d(e, count / v + 1), 1, BLOCK, 1);
}

/* flatten / unflatten keep the memory order: a copy. */
static int emit_copy(Emit *e) {
  const IrType *tx = in_type(e, 0);
  if (!cg_tmpl_is_float(tx->dtype)) return cg_emit_fail(e, "copy of %s has no GPU kernel", ir_dtype_name(tx->dtype));
  if (cg_emit_begin(e, "")) return -1;
  cg_emit_def(e, "NETC_CAST", "1");
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(tx->dtype));
  cg_emit_def(e, "NETC_TY", "%s", cg_tmpl_ctype(tx->dtype));
  cg_emit_def(e, "NETC_V", "%d", cg_tmpl_flat_vec(tx->dtype));
  cg_emit_def(e, "NETC_COUNT", "%lldLL", (long long)numel(e, tx));
  CG_EMIT_ARGS(e, in(0), out(0));
  return cg_emit_end(e, "cast.cu", cg_emit_grid_1d(e, numel(e, tx) / cg_tmpl_flat_vec(tx->dtype) + 1), 1, BLOCK, 1);
}

/* --- relayout (relayout.cu) -------------------------------------------------- */

static int emit_relayout(Emit *e) {
  const IrType *tx = in_type(e, 0), *ty = out_type(e, 0);
  if (tx->rank != 4 || ty->rank != 4 || tx->layout == IR_LAYOUT_ROW || ty->layout == IR_LAYOUT_ROW)
    return cg_emit_fail(e, "relayout needs rank-4 tensors with named layouts");
  int in_last = tx->layout == IR_LAYOUT_NHWC || tx->layout == IR_LAYOUT_KRSC;
  int out_last = ty->layout == IR_LAYOUT_NHWC || ty->layout == IR_LAYOUT_KRSC;
  if (cg_emit_begin(e, "")) return -1;
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(tx->dtype));
  cg_emit_def(e, "NETC_A", "%lld", (long long)dim(e, tx, 0));
  cg_emit_def(e, "NETC_CIN", "%lld", (long long)tx->dim[in_last ? 3 : 1]);
  cg_emit_def(e, "NETC_COUT", "%lld", (long long)ty->dim[out_last ? 3 : 1]);
  cg_emit_def(e, "NETC_H", "%lld", (long long)ty->dim[out_last ? 1 : 2]);
  cg_emit_def(e, "NETC_W", "%lld", (long long)ty->dim[out_last ? 2 : 3]);
  cg_emit_def(e, "NETC_IN_LAST", "%d", in_last);
  cg_emit_def(e, "NETC_OUT_LAST", "%d", out_last);
  CG_EMIT_ARGS(e, in(0), out(0));
  int64_t co = ty->dim[out_last ? 3 : 1], vbytes = co * (int64_t)ir_dtype_size(ty->dtype);
  if (!in_last && out_last && (vbytes == 4 || vbytes == 8 || vbytes == 16)) { /* one thread per pixel */
    cg_emit_def(e, "NETC_PIXEL_VEC", "1");
    return cg_emit_end(e, "relayout.cu", cg_emit_grid_1d(e, numel(e, ty) / co), 1, BLOCK, 1);
  }
  return cg_emit_end(e, "relayout.cu", cg_emit_grid_1d(e, numel(e, ty)), 1, BLOCK, 1);
}

/* --- linear (cuDNN as a 1x1 convolution, else linear.cu) --------------------- */

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
  Chan c;
  if (!cg_tmpl_is_float(in_type(e, 2)->dtype)) return cg_emit_fail(e, "bias is not a float tensor");
  const char *tb = cg_tmpl_ctype(in_type(e, 2)->dtype);
  if (chan_plan(e, out_type(e, 0), &c) || chan_apply(e, &c, "NETC_APPLY_BIAS", 0, tb)) return -1;
  CG_EMIT_ARGS(e, out(0), in(2), out(0));
  return 0;
}

static int emit_linear(Emit *e) {
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

/* --- softmax cross-entropy (softmax_ce.cu) ---------------------------------- */

static int emit_softmax_ce(Emit *e) {
  const IrType *tz = in_type(e, 0), *tl = in_type(e, 1);
  if (tz->rank != 2 || !cg_tmpl_is_float(tz->dtype))
    return cg_emit_fail(e, "logits must be a float [N, classes] matrix");
  if (tl->dtype != IR_DT_I32 && tl->dtype != IR_DT_I64) return cg_emit_fail(e, "labels must be i32 or i64");
  int64_t N = dim(e, tz, 0), classes = tz->dim[1];
  int bwd = e->n->op == IR_OP_SOFTMAX_CE_BWD;
  if (cg_emit_begin(e, bwd ? "" : "rows")) return -1;
  cg_emit_def(e, bwd ? "NETC_SCE_BWD" : "NETC_SCE_ROWS", "1");
  cg_emit_def(e, "NETC_N", "%lld", (long long)N);
  cg_emit_def(e, "NETC_CLASSES", "%lld", (long long)classes);
  cg_emit_def_float(e, "NETC_EPS", ir_attr_float(e->n, "smoothing", 0));
  cg_emit_def(e, "NETC_TZ", "%s", cg_tmpl_ctype(tz->dtype));
  cg_emit_def(e, "NETC_TL", "%s", cg_tmpl_ctype(tl->dtype));
  if (bwd) {
    if (in_type(e, 2)->dtype != IR_DT_F32) return cg_emit_fail(e, "the loss scale must be f32");
    cg_emit_def(e, "NETC_TD", "%s", cg_tmpl_ctype(out_type(e, 0)->dtype));
    CG_EMIT_ARGS(e, in(0), in(1), in(2), out(0));
    return cg_emit_end(e, "softmax_ce.cu", (unsigned)N, 1, BLOCK, 1);
  }
  CG_EMIT_ARGS(e, in(0), in(1), scratch(0));
  need_scratch(e, (size_t)N * sizeof(double));
  if (cg_emit_end(e, "softmax_ce.cu", (unsigned)N, 1, BLOCK, 1) || cg_emit_begin(e, "mean")) return -1;
  cg_emit_def(e, "NETC_SCE_MEAN", "1");
  cg_emit_def(e, "NETC_N", "%lld", (long long)N);
  cg_emit_def(e, "NETC_CLASSES", "%lld", (long long)classes);
  CG_EMIT_ARGS(e, scratch(0), out(0));
  return cg_emit_end(e, "softmax_ce.cu", 1, 1, BLOCK, 1);
}

/* --- sgd_update (sgd.cu) ------------------------------------------------------ */

static int emit_sgd(Emit *e) {
  const IrType *tw = in_type(e, 0), *tg = in_type(e, 1), *tb = in_type(e, 2);
  int skip = e->n->nin > 5;
  if (!cg_tmpl_is_float(tw->dtype) || !cg_tmpl_is_float(tg->dtype) || !cg_tmpl_is_float(tb->dtype) ||
      in_type(e, 3)->dtype != IR_DT_F32 ||
      in_type(e, 4)->dtype != IR_DT_F32 || (skip && in_type(e, 5)->dtype != IR_DT_F32))
    return cg_emit_fail(e, "sgd_update needs float tensors and f32 lr, loss scale and skip flag");
  int64_t count = numel(e, tw);
  int v = cg_tmpl_flat_vec(tw->dtype);
  if (cg_tmpl_flat_vec(tg->dtype) < v) v = cg_tmpl_flat_vec(tg->dtype);
  if (cg_tmpl_flat_vec(tb->dtype) < v) v = cg_tmpl_flat_vec(tb->dtype);
  if (cg_emit_begin(e, "")) return -1;
  cg_emit_def(e, "NETC_TW", "%s", cg_tmpl_ctype(tw->dtype));
  cg_emit_def(e, "NETC_TG", "%s", cg_tmpl_ctype(tg->dtype));
  cg_emit_def(e, "NETC_TBUF", "%s", cg_tmpl_ctype(tb->dtype));
  cg_emit_def(e, "NETC_COUNT", "%lldLL", (long long)count);
  cg_emit_def(e, "NETC_V", "%d", v);
  cg_emit_def_float(e, "NETC_MOMENTUM", ir_attr_float(e->n, "momentum", 0));
  cg_emit_def_float(e, "NETC_WD", ir_attr_float(e->n, "weight_decay", 0));
  cg_emit_def(e, "NETC_NESTEROV", "%d", ir_attr_int(e->n, "nesterov", 0) != 0);
  cg_emit_def(e, "NETC_SKIP", "%d", skip);
  if (skip)
    CG_EMIT_ARGS(e, in(0), in(1), in(2), in(3), in(4), in(5));
  else
    CG_EMIT_ARGS(e, in(0), in(1), in(2), in(3), in(4));
  int64_t units = count / v > count % v ? count / v : count % v;
  return cg_emit_end(e, "sgd.cu", cg_emit_grid_1d(e, units), 1, BLOCK, 1);
}

/* --- dynamic loss scaling (loss_scale.cu) --------------------------------------- */

/* nonfinite_check: zero the flag, then one grid-stride scan of every input
 * (each a kernel parameter: at most CG_K_MAX_ARGS - 1 of them). */
static int emit_nonfinite_check(Emit *e) {
  enum { SLOTS = CG_K_MAX_ARGS - 1 };
  int nin = e->n->nin;
  if (nin > SLOTS) return cg_emit_fail(e, "%d inputs; a kernel takes at most %d", nin, SLOTS);
  if (out_type(e, 0)->dtype != IR_DT_F32) return cg_emit_fail(e, "the flag must be f32");
  if (cg_emit_begin(e, "zero")) return -1;
  cg_emit_def(e, "NETC_NONFINITE_ZERO", "1");
  CG_EMIT_ARGS(e, out(0));
  if (cg_emit_end(e, "loss_scale.cu", 1, 1, 32, 1) || cg_emit_begin(e, "scan")) return -1;
  cg_emit_def(e, "NETC_NONFINITE_SCAN", "1");
  CgKArg a[CG_K_MAX_ARGS];
  a[0] = out(0);
  int64_t units = 1;
  for (int i = 0; i < SLOTS; i++) {
    char tn[24], cn[24];
    snprintf(tn, sizeof tn, "NETC_T%d", i);
    snprintf(cn, sizeof cn, "NETC_COUNT%d", i);
    IrDtype dt = i < nin ? in_type(e, i)->dtype : IR_DT_F32;
    if (!cg_tmpl_is_float(dt)) return cg_emit_fail(e, "input %d is %s, not a float tensor", i, ir_dtype_name(dt));
    int64_t count = i < nin ? numel(e, in_type(e, i)) : 0, v = cg_tmpl_flat_vec(dt);
    cg_emit_def(e, tn, "%s", cg_tmpl_ctype(dt));
    cg_emit_def(e, cn, "%lldLL", (long long)count);
    a[i + 1] = in(i < nin ? i : 0); /* an unused slot's pointer is never read */
    if (count / v + count % v > units) units = count / v + count % v;
  }
  cg_emit_args(e, CG_K_MAX_ARGS, a);
  return cg_emit_end(e, "loss_scale.cu", cg_emit_grid_1d(e, units), 1, BLOCK, 1);
}

static int emit_loss_scale_update(Emit *e) {
  for (int i = 0; i < 3; i++)
    if (in_type(e, i)->dtype != IR_DT_F32 || numel(e, in_type(e, i)) != 1)
      return cg_emit_fail(e, "flag, scale and good-step count must be f32[]");
  if (cg_emit_begin(e, "")) return -1;
  cg_emit_def(e, "NETC_LS_UPDATE", "1");
  cg_emit_def_float(e, "NETC_GROWTH_INTERVAL", (double)ir_attr_int(e->n, "growth_interval", 2000));
  cg_emit_def_float(e, "NETC_BACKOFF", ir_attr_float(e->n, "backoff", 0.5));
  cg_emit_def_float(e, "NETC_GROWTH", ir_attr_float(e->n, "growth", 2.0));
  CG_EMIT_ARGS(e, in(0), in(1), in(2));
  return cg_emit_end(e, "loss_scale.cu", 1, 1, 32, 1);
}

/* --- the entry points ----------------------------------------------------------- */

static int emit_node(Emit *e) {
  switch (e->n->op) {
  case IR_OP_RELU:
  case IR_OP_ADD:
  case IR_OP_ADD_RELU:
  case IR_OP_RELU_BWD:
  case IR_OP_SUM_RELU_BWD: return emit_eltwise(e);
  case IR_OP_CONV2D:
  case IR_OP_CONV2D_BWD_DATA:
  case IR_OP_CONV2D_BWD_WEIGHT:
  case IR_OP_CONV2D_BWD_DATA_RELU:
  case IR_OP_CONV2D_BWD_DATA_BN_RELU:
  case IR_OP_CONV2D_BN:
  case IR_OP_CONV2D_BN_TRAIN:
  case IR_OP_CONV2D_BN_STATS: return emit_conv(e);
  case IR_OP_BATCHNORM: return bn_infer(e, in_type(e, 0), 1, in(0), out(0), 0);
  case IR_OP_BATCHNORM_TRAIN: return bn_train(e, in_type(e, 0), in(0), out(0), 1, 1, 0, -1);
  case IR_OP_BATCHNORM_BWD: return bn_bwd(e, 0);
  case IR_OP_BATCHNORM_RELU_BWD: return bn_bwd(e, 1);
  case IR_OP_BATCHNORM_RELU_BWD_WIN: return bn_bwd_from(e, 1, in(0), 2, CG_K_ALWAYS);
  case IR_OP_CHANNEL_SUM: return emit_channel_sum(e);
  case IR_OP_MAXPOOL:
  case IR_OP_AVGPOOL:
  case IR_OP_GLOBAL_AVGPOOL:
  case IR_OP_MAXPOOL_BWD:
  case IR_OP_AVGPOOL_BWD:
  case IR_OP_GLOBAL_AVGPOOL_BWD:
  case IR_OP_MAXPOOL_BN_RELU_BWD:
  case IR_OP_MAXPOOL_BN_RELU:
  case IR_OP_MAXPOOL_BWD_WIN: return emit_pool(e);
  case IR_OP_FLATTEN:
  case IR_OP_UNFLATTEN: return emit_copy(e);
  case IR_OP_LINEAR:
  case IR_OP_LINEAR_BWD_DATA:
  case IR_OP_LINEAR_BWD_WEIGHT: return emit_linear(e);
  case IR_OP_SOFTMAX_CE:
  case IR_OP_SOFTMAX_CE_BWD: return emit_softmax_ce(e);
  case IR_OP_SGD_UPDATE: return emit_sgd(e);
  case IR_OP_NONFINITE_CHECK: return emit_nonfinite_check(e);
  case IR_OP_LOSS_SCALE_UPDATE: return emit_loss_scale_update(e);
  case IR_OP_CAST: return emit_cast(e);
  case IR_OP_RELAYOUT: return emit_relayout(e);
  default: return cg_emit_fail(e, "op %s has no GPU kernel yet", ir_op_info(e->n->op)->name);
  }
}

static NetcOpts defaults;
static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;
static void defaults_init(void) { opts_default(&defaults); }

const NetcOpts *cg_device_opts(const CgDevice *dev) {
  if (dev && dev->opts) return dev->opts;
  pthread_once(&defaults_once, defaults_init);
  return &defaults;
}

int cg_kernels_emit(const IrGraph *g, int node, int64_t batch, const CgDevice *dev, CgKNode *out,
                        char *err, size_t errlen) {
  if (!out) return -1;
  memset(out, 0, sizeof *out);
  if (!g || !dev || node < 0 || node >= g->nnode || batch < 1) {
    if (err && errlen) snprintf(err, errlen, "cg_kernels_emit: invalid argument");
    return -1;
  }
  const IrNode *n = &g->node[node];
  Emit e = {.g = g, .n = n, .node = node, .batch = batch, .dev = dev, .opts = cg_device_opts(dev), .k = out,
            .err = err, .errlen = errlen};
  const IrType *mt = n->op == IR_OP_CAST ? &g->val[n->out[0]].type
                     : n->nin > 0        ? &g->val[n->in[0]].type
                                         : &g->val[n->out[0]].type;
  e.dtype = ir_dtype_name(mt->dtype);
  e.layout = layout_tag(mt);
  if (emit_node(&e)) {
    free(e.src.p);
    memset(out, 0, sizeof *out);
    return -1;
  }
  out->source = e.src.p;
  return 0;
}

void cg_kernels_free(CgKNode *k) {
  if (!k) return;
  free(k->source);
  k->source = NULL;
}
