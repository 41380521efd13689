/* cg_emit_optim.c - the optimizer step's nodes: sgd_update (sgd.cu, with
 * momentum, weight decay, Nesterov and the skip flag), and dynamic loss
 * scaling (loss_scale.cu): nonfinite_check over the gradients and
 * loss_scale_update. */
#include "cg_emit.h"

#include <stdio.h>

#include "cg_tmpl.h"

int cg_emit_optim_sgd(Emit *e) {
  const IrType *tw = in_type(e, 0), *tg = in_type(e, 1), *tb = in_type(e, 2);
  int skip = e->n->nin > 5;
  if (!cg_tmpl_is_float(tw->dtype) || !cg_tmpl_is_float(tg->dtype) || !cg_tmpl_is_float(tb->dtype) ||
      in_type(e, 3)->dtype != IR_DT_F32 || in_type(e, 4)->dtype != IR_DT_F32 ||
      (skip && in_type(e, 5)->dtype != IR_DT_F32))
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
int cg_emit_optim_nonfinite_check(Emit *e) {
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

int cg_emit_optim_loss_scale_update(Emit *e) {
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
