/* cg_emit_loss.c - softmax cross-entropy (softmax_ce.cu): the forward's
 * per-row losses and their mean, and the gradient scaled by the loss scale. */
#include "cg_emit.h"

#include "cg_tmpl.h"

int cg_emit_loss_softmax_ce(Emit *e) {
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
