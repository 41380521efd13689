/* cg_emit_copy.c - nodes that move values: flatten and unflatten (a copy,
 * cast.cu), casts between float dtypes, to i8 with its scale and to FP8
 * with its scale or amax history (cast.cu),
 * and relayouts between channels-first and channels-last (relayout.cu). */
#include "cg_emit.h"

#include "cg_tmpl.h"

/* A cast to FP8 (cast.cu NETC_CAST_F8): by its scale=, else by the
 * tensor's largest finite magnitude (an AMAX launch), else with an amax
 * history (input 1, delayed scaling) by the history -- the AMAX launch
 * then only runs while the history is all 0 -- with the cast's own amax
 * pushed into the history by a one-block launch after it. */
static int cast_f8(Emit *e, const IrType *tx, const IrType *ty, int64_t count) {
  const IrAttr *fixed = ir_attr_find(e->n, "scale");
  int64_t H = e->n->nin > 1 ? numel(e, in_type(e, 1)) : 0;
  unsigned G = cg_emit_grid_1d(e, count); /* the amax launch's grid and the cast's */
  size_t amax_at = align256((size_t)G * sizeof(float));
  need_scratch(e, amax_at + (size_t)G * sizeof(float));
  if (!fixed) {
    if (cg_emit_begin(e, "amax")) return -1;
    cg_emit_def(e, "NETC_CAST_AMAX", "1");
    cg_emit_def(e, "NETC_FINITE", "1");
    cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(tx->dtype));
    cg_emit_def(e, "NETC_COUNT", "%lldLL", (long long)count);
    if (H) {
      cg_emit_def(e, "NETC_HIST", "%lld", (long long)H);
      CG_EMIT_ARGS(e, in(0), in(1), scratch(0));
    } else {
      CG_EMIT_ARGS(e, in(0), scratch(0));
    }
    if (cg_emit_end(e, "cast.cu", G, 1, BLOCK, 1)) return -1;
  }
  if (cg_emit_begin(e, "f8")) return -1;
  cg_emit_def(e, "NETC_CAST_F8", "1");
  cg_emit_def(e, "NETC_F8", "%d", ty->dtype == IR_DT_F8E5M2);
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(tx->dtype));
  cg_emit_def(e, "NETC_COUNT", "%lldLL", (long long)count);
  cg_emit_def(e, "NETC_G", "%u", G);
  if (fixed) cg_emit_def(e, "NETC_SCALE", "%.9gf", fixed->f);
  if (H) {
    cg_emit_def(e, "NETC_HIST", "%lld", (long long)H);
    CG_EMIT_ARGS(e, in(0), scratch(0), in(1), scratch(amax_at), out(0));
  } else {
    CG_EMIT_ARGS(e, in(0), scratch(0), out(0));
  }
  if (cg_emit_end(e, "cast.cu", G, 1, BLOCK, 1)) return -1;
  if (!H) return 0;
  if (cg_emit_begin(e, "push")) return -1;
  cg_emit_def(e, "NETC_CAST_F8_PUSH", "1");
  cg_emit_def(e, "NETC_F8", "%d", ty->dtype == IR_DT_F8E5M2);
  cg_emit_def(e, "NETC_TX", "float");
  cg_emit_def(e, "NETC_COUNT", "%lldLL", (long long)count);
  cg_emit_def(e, "NETC_HIST", "%lld", (long long)H);
  cg_emit_def(e, "NETC_G2", "%u", G);
  CG_EMIT_ARGS(e, scratch(amax_at), in(1));
  return cg_emit_end(e, "cast.cu", 1, 1, BLOCK, 1);
}

int cg_emit_copy_cast(Emit *e) {
  const IrType *tx = in_type(e, 0), *ty = out_type(e, 0);
  int64_t count = numel(e, tx);
  int i8 = ty->dtype == IR_DT_I8;
  if (cg_tmpl_is_float(tx->dtype) && (ty->dtype == IR_DT_F8E4M3 || ty->dtype == IR_DT_F8E5M2))
    return cast_f8(e, tx, ty, count);
  if (!cg_tmpl_is_float(tx->dtype) || !(cg_tmpl_is_float(ty->dtype) || i8))
    return cg_emit_fail(e, "a cast from %s to %s has no GPU kernel", ir_dtype_name(tx->dtype),
                        ir_dtype_name(ty->dtype));
  /* 16-byte accesses on the wider side (f32 -> f16 reads 16 bytes, writes 8):
   * no access wider than the 16-byte alignment every tensor has */
  int v = cg_tmpl_flat_vec(tx->dtype);
  if (!i8 && cg_tmpl_flat_vec(ty->dtype) < v) v = cg_tmpl_flat_vec(ty->dtype);
  unsigned G = cg_emit_grid_1d(e, count);
  /* to i8: a calibrated scale (scale=S), one per slice of dimension 0 (axis=0), or the tensor's maximum */
  const IrAttr *fixed = i8 ? ir_attr_find(e->n, "scale") : NULL, *axis = i8 ? ir_attr_find(e->n, "axis") : NULL;
  int64_t slices = axis && ty->rank > 0 && dim(e, ty, 0) > 1 ? dim(e, ty, 0) : 0;
  if (slices && (count % slices || slices > (1 << 20)))
    return cg_emit_fail(e, "a cast to i8 along axis 0 of %lld slices of %lld elements", (long long)slices,
                        (long long)count);
  if (slices) G = (unsigned)slices;
  if (i8 && !fixed) {
    if (cg_emit_begin(e, "amax")) return -1;
    cg_emit_def(e, "NETC_CAST_AMAX", "1");
    cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(tx->dtype));
    cg_emit_def(e, "NETC_COUNT", "%lldLL", (long long)count);
    if (slices) cg_emit_def(e, "NETC_SLICES", "%lldLL", (long long)slices);
    CG_EMIT_ARGS(e, in(0), scratch(0));
    need_scratch(e, G * sizeof(float));
    if (cg_emit_end(e, "cast.cu", G, 1, BLOCK, 1)) return -1;
  }
  if (fixed) need_scratch(e, sizeof(float));
  if (cg_emit_begin(e, i8 ? "quant" : "")) return -1;
  cg_emit_def(e, i8 ? "NETC_CAST_I8" : "NETC_CAST", "1");
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(tx->dtype));
  cg_emit_def(e, "NETC_TY", "%s", cg_tmpl_ctype(ty->dtype));
  cg_emit_def(e, "NETC_COUNT", "%lldLL", (long long)count);
  cg_emit_def(e, "NETC_V", "%d", v);
  cg_emit_def(e, "NETC_G", "%u", G);
  if (fixed) cg_emit_def(e, "NETC_SCALE", "%.9gf", fixed->f);
  if (slices && !fixed) cg_emit_def(e, "NETC_SLICES", "%lldLL", (long long)slices);
  if (i8) cg_emit_def(e, "NETC_NSCALES", "%lldLL", (long long)ir_value_scales(e->g, e->n->out[0], e->batch));
  if (i8)
    CG_EMIT_ARGS(e, in(0), scratch(0), out(0));
  else
    CG_EMIT_ARGS(e, in(0), out(0));
  return cg_emit_end(e, "cast.cu", cg_emit_grid_1d(e, count / v + 1), 1, BLOCK, 1);
}

/* flatten / unflatten keep the memory order: a copy. */
int cg_emit_copy(Emit *e) {
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

int cg_emit_copy_relayout(Emit *e) {
  const IrType *tx = in_type(e, 0), *ty = out_type(e, 0);
  if (tx->rank != 4 || ty->rank != 4 || tx->layout == IR_LAYOUT_ROW || ty->layout == IR_LAYOUT_ROW)
    return cg_emit_fail(e, "relayout needs rank-4 tensors with named layouts");
  int in_last = tx->layout == IR_LAYOUT_NHWC || tx->layout == IR_LAYOUT_KRSC;
  int out_last = ty->layout == IR_LAYOUT_NHWC || ty->layout == IR_LAYOUT_KRSC;
  if (tx->dtype != ty->dtype && (!cg_tmpl_is_float(tx->dtype) || !cg_tmpl_is_float(ty->dtype)))
    return cg_emit_fail(e, "relayout from %s to %s has no GPU kernel", ir_dtype_name(tx->dtype),
                        ir_dtype_name(ty->dtype));
  if (cg_emit_begin(e, "")) return -1;
  cg_emit_def(e, "NETC_TX", "%s", cg_tmpl_ctype(tx->dtype));
  if (ty->dtype != tx->dtype) cg_emit_def(e, "NETC_TY", "%s", cg_tmpl_ctype(ty->dtype));
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
