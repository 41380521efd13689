/* cg_emit_pool.c - pooling (pool.cu): max, average and global average
 * pooling and their gradients, maxpool_bn_relu (y recomputed from z, the
 * winners written as bytes, tiled in shared memory when it fits), its
 * inference form maxpool_bn_relu_infer (the running statistics), and the
 * backward of a max pool from its winners (maxpool_bwd_win,
 * maxpool_bn_relu_bwd). */
#include "cg_emit.h"

#include "cg_tmpl.h"

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
 * pixels a block of BLOCK threads, each taking pixels at one channel vector
 * (C/V must divide BLOCK), the largest of 8x8, 8x4, 4x4 and BLOCK/(C/V)
 * pixels whose input tile fits in shared memory (48 KB static) and gives
 * every thread work: a 3x3/2 window's tile of 8x8 outputs reads 17x17
 * inputs, 1.13 per output's four, against 1.33 for 2x8 (64 f32 channels);
 * 0 when none does (the grid-stride kernel), or NETC_POOL_TILE=0. */
static int pool_tile(const Emit *e, const IrType *tx, int C, int V, int *toh, int *tow) {
  int cv = C / V, k[2], s[2];
  if (!e->opts->pool_tile || cv > BLOCK || BLOCK % cv) return 0;
  cg_emit_attr2(e->n, "k", 1, k);
  cg_emit_attr2(e->n, "s", 1, s);
  int pix = BLOCK / cv, one[2] = {pix / (pix < 8 ? pix : 8), pix < 8 ? pix : 8};
  const int tiles[4][2] = {{8, 8}, {8, 4}, {4, 4}, {one[0], one[1]}};
  for (int i = 0; i < 4; i++) {
    int h = tiles[i][0], w = tiles[i][1];
    size_t bytes =
        (size_t)((h - 1) * s[0] + k[0]) * (size_t)((w - 1) * s[1] + k[1]) * (size_t)C * ir_dtype_size(tx->dtype);
    if (bytes <= 48 * 1024 && h * w * cv % BLOCK == 0) {
      *toh = h, *tow = w;
      return 1;
    }
  }
  return 0;
}

/* The end of a pool launch that recomputes relu(bn(z)) (maxpool_bn_relu
 * and its inference form): one block per tile when pool_tile finds one,
 * else the grid-stride kernel over y's vectors. */
static int end_bn_pool(Emit *e, const IrType *tx, const IrType *ty, int C, int V) {
  int toh, tow;
  if (!pool_tile(e, tx, C, V, &toh, &tow))
    return cg_emit_end(e, "pool.cu", cg_emit_grid_1d(e, numel(e, ty) / V), 1, BLOCK, 1);
  cg_emit_def(e, "NETC_POOL_TILE", "1");
  cg_emit_def(e, "NETC_POOL_TOH", "%d", toh);
  cg_emit_def(e, "NETC_POOL_TOW", "%d", tow);
  int64_t tiles = dim(e, ty, 0) * ((ty->dim[1] + toh - 1) / toh) * ((ty->dim[2] + tow - 1) / tow);
  return cg_emit_end(e, "pool.cu", (unsigned)tiles, 1, BLOCK, 1);
}

/* maxpool_bn_relu_infer (z, gamma, beta, mean, var) -> y: the running
 * statistics' coefficients (chan_finalize.cu's INFER, those conv2d_bn's
 * apply takes) into kept memory by a `once` launch (into scratch each step
 * when they are not all weights), then the pool recomputing each element from
 * z by them (NETC_POOL_COEF) and rounding it to y's dtype (i8: the
 * maxima in z's dtype quantized by y_scale, NETC_POOL_Q8); tiled when the
 * tile fits.  The pool's defines describe x as z's shape in the dtype the
 * maxima are taken in. */
static int pool_bn_infer(Emit *e) {
  const IrType *tz = in_type(e, 0), *ty = out_type(e, 0);
  if (tz->layout != IR_LAYOUT_NHWC || ty->layout != IR_LAYOUT_NHWC || tz->rank != 4)
    return cg_emit_fail(e, "pooling runs on NHWC tensors");
  int q8 = ty->dtype == IR_DT_I8;
  if (!cg_tmpl_is_float(tz->dtype) || (!cg_tmpl_is_float(ty->dtype) && !q8))
    return cg_emit_fail(e, "maxpool_bn_relu_infer needs a float z and a float or i8 y");
  IrType tx = *tz; /* i8: the maxima in z's dtype, then quantized */
  if (!q8) tx.dtype = ty->dtype;
  CgEmitChan c;
  CgKArg coef;
  if (cg_emit_chan_plan(e, tz, &c) || cg_emit_check_f32(e, 1, 4, 1, 0) ||
      cg_emit_chan_finalize_infer(e, &c, 1, 0, &coef, NULL))
    return -1;
  int C = (int)tz->dim[3], V = cg_emit_vec(tx.dtype, C);
  if (cg_emit_vec(tz->dtype, C) < V) V = cg_emit_vec(tz->dtype, C);
  if (cg_emit_begin(e, "")) return -1;
  pool_defs(e, "NETC_POOL_MAX", &tx, ty, C, V);
  cg_emit_def(e, "NETC_POOL_BN", "1");
  cg_emit_def(e, "NETC_POOL_COEF", "1");
  cg_emit_def(e, "NETC_TZ", "%s", cg_tmpl_ctype(tz->dtype));
  if (q8) {
    cg_emit_def_float(e, "NETC_POOL_Q8", ir_attr_float(e->n, "y_scale", 0));
    cg_emit_def(e, "NETC_YCOUNT", "%lldLL", (long long)numel(e, ty));
  }
  CG_EMIT_ARGS(e, in(0), coef, out(0));
  return end_bn_pool(e, &tx, ty, C, V);
}

int cg_emit_pool(Emit *e) {
  IrOp op = e->n->op;
  if (op == IR_OP_MAXPOOL_BN_RELU_INFER) return pool_bn_infer(e);
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
    return end_bn_pool(e, tx, ty, C, V);
  } else {
    CG_EMIT_ARGS(e, in(0), out(0));
  }
  return cg_emit_end(e, "pool.cu", cg_emit_grid_1d(e, units), 1, BLOCK, 1);
}
