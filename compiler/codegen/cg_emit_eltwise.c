/* cg_emit_eltwise.c - flat elementwise nodes (eltwise.cu): relu, add,
 * add_relu, relu_bwd and sum_relu_bwd, 16 bytes per access with a scalar
 * tail; cg_emit_eltwise_launch is also the mask after a data gradient. */
#include "cg_emit.h"

#include "cg_tmpl.h"

/* Inputs a0, a1, a2 (repeat a1 when the op takes fewer), output o0. */
int cg_emit_eltwise_launch(Emit *e, const char *stage, const char *op, IrDtype dt, int64_t count, CgKArg a0, CgKArg a1,
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

int cg_emit_eltwise(Emit *e) {
  const IrType *t = in_type(e, 0);
  int64_t n = numel(e, t);
  for (int i = 1; i < e->n->nin; i++)
    if (in_type(e, i)->dtype != t->dtype) return cg_emit_fail(e, "inputs of different dtypes");
  switch (e->n->op) {
  case IR_OP_RELU: return cg_emit_eltwise_launch(e, "", "NETC_OP_RELU_FWD", t->dtype, n, in(0), in(0), in(0), out(0));
  case IR_OP_ADD: return cg_emit_eltwise_launch(e, "", "NETC_OP_ADD_FWD", t->dtype, n, in(0), in(1), in(1), out(0));
  case IR_OP_ADD_RELU:
    return cg_emit_eltwise_launch(e, "", "NETC_OP_ADD_RELU_FWD", t->dtype, n, in(0), in(1), in(1), out(0));
  case IR_OP_SUM_RELU_BWD: /* (a, b, y): the template takes (y, a, b) */
    return cg_emit_eltwise_launch(e, "", "NETC_OP_SUM_RELU_BWD", t->dtype, n, in(2), in(0), in(1), out(0));
  default: /* relu_bwd (dy, y): the template takes (y, dy) */
    return cg_emit_eltwise_launch(e, "", "NETC_OP_RELU_BWD", t->dtype, n, in(1), in(0), in(0), out(0));
  }
}
