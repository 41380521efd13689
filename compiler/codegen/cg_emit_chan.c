/* cg_emit_chan.c - per-channel work on a channels-last tensor, for batch
 * norm, biases and the convolution prologue: the plan (vector width, block
 * shape, the number G of partial sums), and its three passes -- the partial
 * sums (chan_reduce.cu), their finalize into statistics and coefficients
 * (chan_finalize.cu) and the per-element apply (chan_apply.cu). */
#include "cg_emit.h"

#include <string.h>

#include "cg_tmpl.h"

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

/* Shape and reduction geometry of per-channel work on tensor t whose
 * result y has dtype ty and gradient dy dtype tg: vectors as wide as
 * the widest of the three dtypes allows. */
int cg_emit_chan_plan_mixed(Emit *e, const IrType *t, IrDtype ty, IrDtype tg, CgEmitChan *c) {
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

int cg_emit_chan_plan(Emit *e, const IrType *t, CgEmitChan *c) {
  return cg_emit_chan_plan_mixed(e, t, t->dtype, t->dtype, c);
}

static void chan_defs(Emit *e, const CgEmitChan *c) {
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
int cg_emit_chan_reduce(Emit *e, const CgEmitChan *c, const char *op, int relu) {
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

size_t cg_emit_chan_sync_at(const CgEmitChan *c) { return align256(c->coef + (size_t)4 * c->C * sizeof(float)); }

/* chan_finalize.cu's shape for plan c, G partials a channel, and its launch: a block of CB channels. */
static void fin_shape(Emit *e, const CgEmitChan *c, int G) {
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(c->dt));
  cg_emit_def(e, "NETC_C", "%d", c->C);
  cg_emit_def(e, "NETC_G", "%d", G);
  cg_emit_def(e, "NETC_M", "%lldLL", (long long)c->rows);
}

static int fin_end(Emit *e, const CgEmitChan *c) {
  return cg_emit_end(e, "chan_finalize.cu", (unsigned)((c->C + FIN_CB - 1) / FIN_CB), 1, FIN_CB, FIN_GY);
}

int cg_emit_chan_pack(Emit *e, const CgEmitChan *c, const char *op) {
  if (cg_emit_begin(e, c->noshift ? "pack_sums" : "pack")) return -1;
  cg_emit_def(e, op, "1");
  if (c->noshift) cg_emit_def(e, "NETC_NOSHIFT", "1");
  fin_shape(e, c, c->G);
  need_scratch(e, cg_emit_chan_sync_at(c) + (size_t)(2 * c->C + 1) * sizeof(double));
  if (fin_end(e, c)) return -1;
  e->k->launch[e->k->nlaunch - 1].sum_f64 = 2 * c->C + 1;
  return 0;
}

int cg_emit_chan_finalize(Emit *e, const CgEmitChan *c, const char *op) {
  if (cg_emit_begin(e, c->sync ? "finalize_ranks" : c->noshift ? "finalize_sums" : "finalize")) return -1;
  cg_emit_def(e, op, "1");
  if (c->noshift || (c->sync && strcmp(op, "NETC_FIN_TRAIN") == 0)) cg_emit_def(e, "NETC_NOSHIFT", "1");
  if (c->sync) cg_emit_def(e, "NETC_FIN_SYNC", "1");
  if (c->sb) cg_emit_def(e, "NETC_FIN_SB", "1");
  fin_shape(e, c, c->sync ? 1 : c->G);
  cg_emit_def_float(e, "NETC_EPS", ir_attr_float(e->n, "eps", 1e-5));
  cg_emit_def_float(e, "NETC_MOM", ir_attr_float(e->n, "momentum", 0.1));
  need_scratch(e, c->coef + (size_t)4 * c->C * sizeof(float));
  return fin_end(e, c);
}

int cg_emit_chan_finalize_infer(Emit *e, CgEmitChan *c, int p, int sb, CgKArg *coef, CgKArg *esb) {
  int once = 1;
  for (int i = p; i <= p + 3; i++) once &= ir_value_is_weight(e->g, e->n->in[i]);
  size_t coef_at = once ? 0 : c->coef, esb_at = coef_at + align256((size_t)4 * c->C * sizeof(float));
  *coef = once ? kept(coef_at) : scratch(coef_at);
  if (sb) *esb = once ? kept(esb_at) : scratch(esb_at);
  c->sb = sb;
  if (cg_emit_chan_finalize(e, c, "NETC_FIN_INFER")) return -1;
  if (sb)
    CG_EMIT_ARGS(e, in(p), in(p + 1), in(p + 2), in(p + 3), *coef, *esb);
  else
    CG_EMIT_ARGS(e, in(p), in(p + 1), in(p + 2), in(p + 3), *coef);
  e->k->launch[e->k->nlaunch - 1].once = once;
  if (once) e->k->kept_bytes = sb ? esb_at + (size_t)2 * c->C * sizeof(float) : (size_t)4 * c->C * sizeof(float);
  return 0;
}

/* residual: NETC_APPLY_AFFINE adds a tensor shaped like x (the node's
 * residual input) before the relu. */
int cg_emit_chan_apply(Emit *e, const CgEmitChan *c, const char *op, int relu, const char *tb) {
  int residual = strcmp(op, "NETC_APPLY_AFFINE") == 0 && residual_in(e) >= 0;
  const char *stage = strcmp(op, "NETC_APPLY_BIAS") == 0  ? "bias"
                      : strcmp(op, "NETC_APPLY_SBR") == 0 ? "prologue"
                      : strcmp(op, "NETC_APPLY_ABC") == 0 ? "apply_abc"
                      : residual                          ? "apply_add"
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
