/* ir_infer.c - output types of every op, from input types and attributes.
 *
 * One function per op family; lowering calls ir_infer() to type each node it
 * creates (its message becomes the user's error), and the verifier calls it
 * again after every pass to check that no pass broke a type.  Activations
 * are rank 4 in NCHW or NHWC (dims in memory order), filters KCRS or KRSC;
 * N may be the symbolic batch size IR_DIM_N. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir.h"

enum { DIM_LIMIT = 1 << 30 }; /* no attribute or size beyond this */

typedef struct Ctx {
  const IrGraph *g;
  const IrNode *n;
  char *err;
  size_t errlen;
} Ctx;

static int fail(Ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(Ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, c->errlen, fmt, ap);
  va_end(ap);
  return -1;
}

static const IrType *in_type(Ctx *c, int i) { return &c->g->val[c->n->in[i]].type; }

/* Index of the channel / first spatial dim of a rank-4 activation. */
static int act_c(const IrType *t) { return t->layout == IR_LAYOUT_NHWC ? 3 : 1; }
static int act_h(const IrType *t) { return t->layout == IR_LAYOUT_NHWC ? 1 : 2; }

static int is_act4(const IrType *t) {
  return t->rank == 4 && (t->layout == IR_LAYOUT_NCHW || t->layout == IR_LAYOUT_NHWC);
}

static int is_float(IrDtype dt) { return dt == IR_DT_F32 || dt == IR_DT_F16 || dt == IR_DT_BF16; }

static int need_act4(Ctx *c, int i, const char *what) {
  const IrType *t = in_type(c, i);
  char b[96];
  if (!is_act4(t)) return fail(c, "%s expects an NCHW or NHWC image tensor, got %s", what, ir_type_str(t, b, sizeof b));
  return 0;
}

/* Reads a 2-element spatial attribute (k, s, p, d) and checks its range. */
static int spatial_attr(Ctx *c, const char *key, int64_t lo, int64_t v[2]) {
  const IrAttr *a = ir_attr_find(c->n, key);
  if (!a) return fail(c, "missing attribute '%s'", key);
  if (a->kind == IR_ATTR_INT) {
    v[0] = v[1] = a->i[0];
  } else if (a->kind == IR_ATTR_INTS && a->n == 2) {
    v[0] = a->i[0], v[1] = a->i[1];
  } else {
    return fail(c, "attribute '%s' must be one integer or two", key);
  }
  for (int i = 0; i < 2; i++)
    if (v[i] < lo || v[i] > DIM_LIMIT)
      return fail(c, "attribute %s=%" PRId64 " out of range (%" PRId64 "..%d)", key, v[i], lo, DIM_LIMIT);
  return 0;
}

/* Output extent of a sliding window; -1 with a message when it does not fit. */
static int window(Ctx *c, const char *what, int axis, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                  int64_t *out) {
  int64_t span = d * (k - 1) + 1;
  if (in + 2 * p < span)
    return fail(c,
                "%s window %" PRId64 " (dilation %" PRId64 ") with padding %" PRId64 " does not fit input %s %" PRId64,
                what, k, d, p, axis ? "width" : "height", in);
  *out = (in + 2 * p - span) / s + 1;
  return 0;
}

static int infer_conv2d(Ctx *c, IrType *out) {
  if (need_act4(c, 0, "conv2d")) return -1;
  const IrType *x = in_type(c, 0), *w = in_type(c, 1);
  char b1[96], b2[96];
  if (w->rank != 4 || (w->layout != IR_LAYOUT_KCRS && w->layout != IR_LAYOUT_KRSC))
    return fail(c, "conv2d filter must be KCRS or KRSC, got %s", ir_type_str(w, b1, sizeof b1));
  int64_t k[2], s[2], p[2], d[2], groups = ir_attr_int(c->n, "groups", 1);
  if (spatial_attr(c, "k", 1, k) || spatial_attr(c, "s", 1, s) || spatial_attr(c, "p", 0, p) ||
      spatial_attr(c, "d", 1, d))
    return -1;
  int krsc = w->layout == IR_LAYOUT_KRSC;
  int64_t K = w->dim[0], Cg = w->dim[krsc ? 3 : 1], R = w->dim[krsc ? 1 : 2], S = w->dim[krsc ? 2 : 3];
  int64_t C = x->dim[act_c(x)];
  if (groups < 1 || groups > C || C % groups || K % groups)
    return fail(c, "conv2d groups=%" PRId64 " must divide input channels %" PRId64 " and output channels %" PRId64,
                groups, C, K);
  if (R != k[0] || S != k[1])
    return fail(c, "conv2d filter %s does not match kernel %" PRId64 "x%" PRId64, ir_type_str(w, b1, sizeof b1), k[0],
                k[1]);
  if (Cg * groups != C)
    return fail(c, "conv2d filter %s expects %" PRId64 " input channels, input %s has %" PRId64,
                ir_type_str(w, b1, sizeof b1), Cg * groups, ir_type_str(x, b2, sizeof b2), C);
  if (w->dtype != x->dtype)
    return fail(c, "conv2d filter dtype %s differs from input dtype %s", ir_dtype_name(w->dtype),
                ir_dtype_name(x->dtype));
  if (c->n->nin == 3) {
    const IrType *bias = in_type(c, 2);
    if (bias->rank != 1 || bias->dim[0] != K)
      return fail(c, "conv2d bias %s must be [%" PRId64 "]", ir_type_str(bias, b1, sizeof b1), K);
  }
  int h = act_h(x);
  *out = *x;
  out->dim[act_c(x)] = K;
  /* int8 and FP8 products accumulate and dequantize to f32 */
  if (x->dtype == IR_DT_I8 || x->dtype == IR_DT_F8E4M3) out->dtype = IR_DT_F32;
  for (int i = 0; i < 2; i++)
    if (window(c, "conv2d", i, x->dim[h + i], k[i], s[i], p[i], d[i], &out->dim[h + i])) return -1;
  return 0;
}

static int infer_batchnorm(Ctx *c, IrType *out) {
  const IrType *x = in_type(c, 0);
  char b1[96], b2[96];
  if (!is_act4(x) && !(x->rank == 2 && x->layout == IR_LAYOUT_ROW))
    return fail(c, "batchnorm expects an NCHW/NHWC image or an [N, C] tensor, got %s", ir_type_str(x, b1, sizeof b1));
  if (!is_float(x->dtype)) return fail(c, "batchnorm of non-float tensor %s", ir_type_str(x, b1, sizeof b1));
  int64_t C = x->dim[x->rank == 2 ? 1 : act_c(x)];
  for (int i = 1; i < c->n->nin; i++) {
    const IrType *t = in_type(c, i);
    if (t->rank != 1 || t->dim[0] != C || t->dtype != IR_DT_F32)
      return fail(c, "batchnorm statistic/parameter %d is %s, expected f32[%" PRId64 "] for input %s", i,
                  ir_type_str(t, b1, sizeof b1), C, ir_type_str(x, b2, sizeof b2));
  }
  double eps = ir_attr_float(c->n, "eps", -1), mom = ir_attr_float(c->n, "momentum", -1);
  if (!(eps > 0)) return fail(c, "batchnorm eps must be positive");
  if (!(mom >= 0 && mom <= 1)) return fail(c, "batchnorm momentum must be in [0, 1]");
  *out = *x;
  return 0;
}

static int infer_same(Ctx *c, IrType *out) {
  *out = *in_type(c, 0);
  return 0;
}

static int infer_add(Ctx *c, IrType *out) {
  const IrType *a = in_type(c, 0), *b = in_type(c, 1);
  char b1[96], b2[96];
  if (!ir_type_equal(a, b))
    return fail(c, "add of mismatched tensors %s and %s", ir_type_str(a, b1, sizeof b1), ir_type_str(b, b2, sizeof b2));
  *out = *a;
  return 0;
}

static int infer_pool(Ctx *c, IrType *out) {
  const char *what = ir_op_info(c->n->op)->name;
  if (need_act4(c, 0, what)) return -1;
  const IrType *x = in_type(c, 0);
  int64_t k[2], s[2], p[2];
  if (spatial_attr(c, "k", 1, k) || spatial_attr(c, "s", 1, s) || spatial_attr(c, "p", 0, p)) return -1;
  for (int i = 0; i < 2; i++)
    if (2 * p[i] > k[i])
      return fail(c, "%s padding %" PRId64 " is more than half the window %" PRId64, what, p[i], k[i]);
  int h = act_h(x);
  *out = *x;
  for (int i = 0; i < 2; i++)
    if (window(c, what, i, x->dim[h + i], k[i], s[i], p[i], 1, &out->dim[h + i])) return -1;
  return 0;
}

static int infer_global_avgpool(Ctx *c, IrType *out) {
  if (need_act4(c, 0, "global_avgpool")) return -1;
  const IrType *x = in_type(c, 0);
  *out = *x;
  out->dim[act_h(x)] = out->dim[act_h(x) + 1] = 1;
  return 0;
}

static int infer_flatten(Ctx *c, IrType *out) {
  const IrType *x = in_type(c, 0);
  char b1[96];
  if (x->rank < 2) return fail(c, "flatten needs a tensor of rank 2 or more, got %s", ir_type_str(x, b1, sizeof b1));
  int64_t n = 1;
  for (int i = 1; i < x->rank; i++) {
    if (x->dim[i] == IR_DIM_N || n > INT64_MAX / 2 / x->dim[i])
      return fail(c, "flatten of %s overflows", ir_type_str(x, b1, sizeof b1));
    n *= x->dim[i];
  }
  /* Flattening NHWC orders features differently from NCHW unless H = W = 1. */
  if (x->layout == IR_LAYOUT_NHWC && x->dim[1] * x->dim[2] != 1)
    return fail(c, "flatten of NHWC tensor %s with spatial size > 1", ir_type_str(x, b1, sizeof b1));
  int64_t d[2] = {x->dim[0], n};
  *out = ir_type(x->dtype, IR_LAYOUT_ROW, 2, d);
  return 0;
}

static int infer_linear(Ctx *c, IrType *out) {
  const IrType *x = in_type(c, 0), *w = in_type(c, 1);
  char b1[96], b2[96];
  if (x->rank != 2)
    return fail(c, "linear expects an [N, features] input, got %s (use flatten)", ir_type_str(x, b1, sizeof b1));
  if (w->rank != 2 || w->dim[1] != x->dim[1])
    return fail(c, "linear weight %s does not match input %s", ir_type_str(w, b1, sizeof b1),
                ir_type_str(x, b2, sizeof b2));
  if (w->dtype != x->dtype)
    return fail(c, "linear weight dtype %s differs from input dtype %s", ir_dtype_name(w->dtype),
                ir_dtype_name(x->dtype));
  if (c->n->nin == 3) {
    const IrType *b = in_type(c, 2);
    if (b->rank != 1 || b->dim[0] != w->dim[0])
      return fail(c, "linear bias %s must be [%" PRId64 "]", ir_type_str(b, b1, sizeof b1), w->dim[0]);
  }
  int64_t d[2] = {x->dim[0], w->dim[0]};
  *out = ir_type(x->dtype == IR_DT_I8 || x->dtype == IR_DT_F8E4M3 ? IR_DT_F32 : x->dtype, IR_LAYOUT_ROW, 2, d);
  return 0;
}

static int infer_softmax_ce(Ctx *c, IrType *out) {
  const IrType *x = in_type(c, 0), *y = in_type(c, 1);
  char b1[96], b2[96];
  if (x->rank != 2 || !is_float(x->dtype))
    return fail(c, "softmax_cross_entropy expects [N, classes] float logits, got %s", ir_type_str(x, b1, sizeof b1));
  if (y->rank != 1 || (y->dtype != IR_DT_I32 && y->dtype != IR_DT_I64) || y->dim[0] != x->dim[0])
    return fail(c, "softmax_cross_entropy labels must be i32[N] or i64[N] class indices matching logits %s, got %s",
                ir_type_str(x, b1, sizeof b1), ir_type_str(y, b2, sizeof b2));
  double sm = ir_attr_float(c->n, "smoothing", -1);
  if (!(sm >= 0 && sm < 1)) return fail(c, "label smoothing must be in [0, 1)");
  *out = ir_type(IR_DT_F32, IR_LAYOUT_ROW, 0, NULL);
  return 0;
}

/* The optional inputs of a convolution (ir_conv_prologue,
 * ir_conv_residual): the prologue's sbx is [2, C] in x's dtype, C being x's
 * channels (x is input x_at); every optional input must be one of the two. */
static int optional_inputs(Ctx *c, int from, int x_at) {
  int pro = ir_conv_prologue(c->g, c->n), res = ir_conv_residual(c->g, c->n);
  char b1[96], b2[96];
  for (int i = from; i < c->n->nin; i++)
    if (i != pro && i != res)
      return fail(c, "input %d (%s) is neither a prologue scale/bias [2, C] nor a residual", i,
                  ir_type_str(in_type(c, i), b1, sizeof b1));
  if (pro < 0) return 0;
  const IrType *sb = in_type(c, pro), *x = in_type(c, x_at);
  if (!is_act4(x)) return fail(c, "a prologue needs an image input, got %s", ir_type_str(x, b1, sizeof b1));
  int64_t C = x->dim[act_c(x)];
  if (sb->layout != IR_LAYOUT_ROW || sb->dim[0] != 2 || sb->dim[1] != C || sb->dtype != x->dtype)
    return fail(c, "prologue scale/bias %s must be %s[2,%" PRId64 "] for input %s", ir_type_str(sb, b1, sizeof b1),
                ir_dtype_name(x->dtype), C, ir_type_str(x, b2, sizeof b2));
  return 0;
}

/* --- training forms ------------------------------------------------------ */

static IrType vec_f32(int64_t C) { return ir_type(IR_DT_F32, IR_LAYOUT_ROW, 1, &C); }

static int64_t chan(const IrType *t) { return t->rank == 4 ? t->dim[act_c(t)] : t->rank >= 2 ? t->dim[1] : 1; }

static int infer_batchnorm_train(Ctx *c, IrType *out) {
  if (infer_batchnorm(c, out)) return -1;
  out[1] = out[2] = vec_f32(chan(in_type(c, 0)));
  return 0;
}

/* Rank-4 tensor like `like` with channels C and spatial size from attribute in_hw. */
static int with_hw(Ctx *c, const IrType *like, int64_t C, IrType *out) {
  int64_t hw[2];
  if (spatial_attr(c, "in_hw", 1, hw)) return -1;
  *out = *like;
  out->dim[act_c(like)] = C;
  out->dim[act_h(like)] = hw[0];
  out->dim[act_h(like) + 1] = hw[1];
  return 0;
}

/* Checks that the forward op `fwd`, with this node's attributes, maps an input
 * of type xt (and filter wt, for conv2d) to an output shaped like dy: the
 * backward op's shapes are consistent with some forward op. */
static int check_forward(Ctx *c, IrOp fwd, const IrType *xt, const IrType *wt, const IrType *dy) {
  IrValue vals[2] = {{.type = *xt}, {.type = wt ? *wt : *xt}};
  IrGraph g = {.val = vals, .nval = 2};
  int in[2] = {0, 1};
  IrNode n = *c->n;
  n.op = fwd;
  n.in = in;
  n.nin = wt ? 2 : 1;
  n.nout = 1;
  IrType y;
  if (ir_infer(&g, &n, &y, c->err, c->errlen)) return -1;
  char b1[96], b2[96];
  if (y.rank != dy->rank || memcmp(y.dim, dy->dim, sizeof y.dim[0] * (size_t)y.rank))
    return fail(c, "gradient %s does not match the forward output %s", ir_type_str(dy, b1, sizeof b1),
                ir_type_str(&y, b2, sizeof b2));
  return 0;
}

static int infer_conv2d_bwd_data(Ctx *c, IrType *out) {
  if (need_act4(c, 0, "conv2d_bwd_data")) return -1;
  const IrType *dy = in_type(c, 0), *w = in_type(c, 1);
  if (w->rank != 4) return fail(c, "conv2d_bwd_data filter must have rank 4");
  int64_t groups = ir_attr_int(c->n, "groups", 1);
  int64_t Cg = w->dim[w->layout == IR_LAYOUT_KRSC ? 3 : 1];
  if (with_hw(c, dy, Cg * groups, out)) return -1;
  /* FP8: an E5M2 gradient and E4M3 weights, the products dequantized to f32 */
  int f8 = dy->dtype == IR_DT_F8E5M2;
  if (f8 != (w->dtype == IR_DT_F8E4M3))
    return fail(c, "conv2d_bwd_data of a %s gradient and %s weights (FP8 takes an f8e5m2 gradient and f8e4m3 weights)",
                ir_dtype_name(dy->dtype), ir_dtype_name(w->dtype));
  out->dtype = f8 ? IR_DT_F32 : dy->dtype;
  IrType wt = *w;
  wt.dtype = out->dtype;
  return check_forward(c, IR_OP_CONV2D, out, &wt, dy);
}

/* (dy, x [, sbx]) -> dw of conv(P(x), w) */
static int infer_conv2d_bwd_weight(Ctx *c, IrType *out) {
  if (need_act4(c, 0, "conv2d_bwd_weight") || need_act4(c, 1, "conv2d_bwd_weight")) return -1;
  const IrType *dy = in_type(c, 0), *x = in_type(c, 1);
  int64_t k[2], groups = ir_attr_int(c->n, "groups", 1);
  if (spatial_attr(c, "k", 1, k)) return -1;
  if (groups < 1 || x->dim[act_c(x)] % groups)
    return fail(c, "groups=%" PRId64 " does not divide the input channels", groups);
  int64_t K = dy->dim[act_c(dy)], Cg = x->dim[act_c(x)] / groups;
  int nhwc = x->layout == IR_LAYOUT_NHWC;
  int64_t d[4] = {K, nhwc ? k[0] : Cg, nhwc ? k[1] : k[0], nhwc ? Cg : k[1]};
  /* FP8: an E5M2 gradient and E4M3 activations, the products dequantized to f32 */
  int f8 = dy->dtype == IR_DT_F8E5M2;
  if (f8 != (x->dtype == IR_DT_F8E4M3))
    return fail(c,
                "conv2d_bwd_weight of a %s gradient and %s activations (FP8 takes an f8e5m2 gradient and f8e4m3 "
                "activations)",
                ir_dtype_name(dy->dtype), ir_dtype_name(x->dtype));
  *out = ir_type(f8 ? IR_DT_F32 : x->dtype, nhwc ? IR_LAYOUT_KRSC : IR_LAYOUT_KCRS, 4, d);
  IrType wt = *out;
  wt.dtype = x->dtype;
  return check_forward(c, IR_OP_CONV2D, x, &wt, dy) || optional_inputs(c, 2, 1);
}

static int infer_channel_sum(Ctx *c, IrType *out) {
  const IrType *x = in_type(c, 0);
  if (!is_act4(x) && x->rank != 2) return fail(c, "channel_sum needs an image or [N, C] tensor");
  *out = vec_f32(chan(x));
  return 0;
}

/* a and b have one shape and layout (dtypes may differ); else the failure
 * "<what_a> A does not match <what_b> B". */
static int need_same_shape(Ctx *c, const char *what_a, const IrType *a, const char *what_b, const IrType *b) {
  if (a->rank == b->rank && !memcmp(a->dim, b->dim, sizeof a->dim[0] * (size_t)a->rank) && a->layout == b->layout)
    return 0;
  char b1[96], b2[96];
  return fail(c, "%s %s does not match %s %s", what_a, ir_type_str(a, b1, sizeof b1), what_b,
              ir_type_str(b, b2, sizeof b2));
}

static int infer_batchnorm_bwd(Ctx *c, IrType *out) {
  const IrType *dy = in_type(c, 0), *x = in_type(c, 1);
  if (need_same_shape(c, "batchnorm_bwd gradient", dy, "input", x)) return -1;
  int64_t C = chan(x);
  for (int i = 2; i < 5; i++) {
    const IrType *t = in_type(c, i);
    if (t->rank != 1 || t->dim[0] != C) return fail(c, "batchnorm_bwd input %d must be f32[%" PRId64 "]", i, C);
  }
  out[0] = *x;
  out[0].dtype = dy->dtype;
  out[1] = out[2] = vec_f32(C);
  return 0;
}

static int infer_relu_bwd(Ctx *c, IrType *out) {
  const IrType *dy = in_type(c, 0), *y = in_type(c, 1);
  if (need_same_shape(c, "relu_bwd gradient", dy, "output", y)) return -1;
  *out = *dy;
  return 0;
}

/* sum_relu_bwd(a, b, y): relu_bwd(add(a, b), y). */
static int infer_sum_relu_bwd(Ctx *c, IrType *out) {
  const IrType *a = in_type(c, 0), *b = in_type(c, 1), *y = in_type(c, 2);
  char b1[96], b2[96];
  if (!ir_type_equal(a, b))
    return fail(c, "sum_relu_bwd of mismatched gradients %s and %s", ir_type_str(a, b1, sizeof b1),
                ir_type_str(b, b2, sizeof b2));
  if (need_same_shape(c, "sum_relu_bwd gradient", a, "output", y)) return -1;
  *out = *a;
  return 0;
}

static int infer_maxpool_bwd(Ctx *c, IrType *out) {
  if (need_act4(c, 0, "maxpool_bwd") || need_act4(c, 1, "maxpool_bwd")) return -1;
  *out = *in_type(c, 1);
  out->dtype = in_type(c, 0)->dtype;
  return check_forward(c, IR_OP_MAXPOOL, out, NULL, in_type(c, 0));
}

static int infer_avgpool_bwd(Ctx *c, IrType *out) {
  if (need_act4(c, 0, "avgpool_bwd")) return -1;
  const IrType *dy = in_type(c, 0);
  if (with_hw(c, dy, dy->dim[act_c(dy)], out)) return -1;
  return check_forward(c, IR_OP_AVGPOOL, out, NULL, dy);
}

static int infer_global_avgpool_bwd(Ctx *c, IrType *out) {
  if (need_act4(c, 0, "global_avgpool_bwd")) return -1;
  const IrType *dy = in_type(c, 0);
  if (dy->dim[act_h(dy)] != 1 || dy->dim[act_h(dy) + 1] != 1)
    return fail(c, "global_avgpool_bwd gradient must be 1x1 spatially");
  return with_hw(c, dy, dy->dim[act_c(dy)], out);
}

static int infer_unflatten(Ctx *c, IrType *out) {
  const IrType *x = in_type(c, 0);
  const IrAttr *a = ir_attr_find(c->n, "shape");
  if (!a || a->kind != IR_ATTR_INTS || a->n != 3) return fail(c, "unflatten needs shape=CxHxW");
  if (x->rank != 2) return fail(c, "unflatten needs an [N, features] tensor");
  int64_t n = 1;
  for (int i = 0; i < 3; i++) {
    if (a->i[i] < 1 || a->i[i] > DIM_LIMIT) return fail(c, "unflatten shape out of range");
    n *= a->i[i];
    if (n > x->dim[1]) break; /* bounded before the next product can overflow */
  }
  if (n != x->dim[1]) return fail(c, "unflatten shape has %" PRId64 " elements, input has %" PRId64, n, x->dim[1]);
  int64_t d[4] = {x->dim[0], a->i[0], a->i[1], a->i[2]};
  *out = ir_type(x->dtype, IR_LAYOUT_NCHW, 4, d);
  return 0;
}

static int infer_linear_bwd_data(Ctx *c, IrType *out) {
  const IrType *dy = in_type(c, 0), *w = in_type(c, 1);
  if (dy->rank != 2 || w->rank != 2 || dy->dim[1] != w->dim[0])
    return fail(c, "linear_bwd_data gradient and weight do not match");
  int64_t d[2] = {dy->dim[0], w->dim[1]};
  *out = ir_type(dy->dtype, IR_LAYOUT_ROW, 2, d);
  return 0;
}

static int infer_linear_bwd_weight(Ctx *c, IrType *out) {
  const IrType *dy = in_type(c, 0), *x = in_type(c, 1);
  if (dy->rank != 2 || x->rank != 2 || dy->dim[0] != x->dim[0])
    return fail(c, "linear_bwd_weight gradient and input do not match");
  int64_t d[2] = {dy->dim[1], x->dim[1]};
  *out = ir_type(x->dtype, IR_LAYOUT_ROW, 2, d);
  return 0;
}

static int is_scalar_f32(const IrType *t) { return t->rank == 0 && t->dtype == IR_DT_F32; }

static int infer_softmax_ce_bwd(Ctx *c, IrType *out) {
  IrType loss;
  if (infer_softmax_ce(c, &loss)) return -1;
  if (!is_scalar_f32(in_type(c, 2))) return fail(c, "softmax_cross_entropy_bwd loss scale must be f32[]");
  *out = *in_type(c, 0);
  return 0;
}

static int infer_sgd_update(Ctx *c, IrType *out) {
  const IrType *w = in_type(c, 0), *g = in_type(c, 1), *buf = in_type(c, 2);
  char b1[96], b2[96];
  if (w->dtype != IR_DT_F32 || !ir_type_equal(w, buf))
    return fail(c, "sgd_update weight %s and momentum buffer %s must be the same f32 type",
                ir_type_str(w, b1, sizeof b1), ir_type_str(buf, b2, sizeof b2));
  if (g->rank != w->rank || memcmp(g->dim, w->dim, sizeof g->dim[0] * (size_t)g->rank))
    return fail(c, "sgd_update gradient %s does not match weight %s", ir_type_str(g, b1, sizeof b1),
                ir_type_str(w, b2, sizeof b2));
  if (!is_scalar_f32(in_type(c, 3)) || !is_scalar_f32(in_type(c, 4)))
    return fail(c, "sgd_update learning rate and loss scale must be f32[]");
  if (c->n->nin > 5 && !is_scalar_f32(in_type(c, 5))) return fail(c, "sgd_update skip flag must be f32[]");
  (void)out;
  return 0;
}

/* The y_dtype attribute into y->dtype (none: y unchanged): f32, f16 or
 * bf16, or i8 requantized by the attribute y_scale's S > 0 (y = S *
 * clamp(rint(r / S), -127, 127) of the f32 result r: the next layer's
 * calibrated cast folded in; its one scale after its elements, as a
 * cast's). */
static int y_dtype_attr(Ctx *c, IrType *y) {
  const IrAttr *yd = ir_attr_find(c->n, "y_dtype"), *ys = ir_attr_find(c->n, "y_scale");
  if (!yd) return ys ? fail(c, "y_scale is for an i8 y_dtype") : 0;
  int i8 = yd->kind == IR_ATTR_DTYPE && yd->i[0] == IR_DT_I8;
  if (yd->kind != IR_ATTR_DTYPE || (!is_float((IrDtype)yd->i[0]) && !i8))
    return fail(c, "y_dtype must be f32, f16, bf16 or i8");
  if (i8 != (ys != NULL)) return fail(c, i8 ? "an i8 y_dtype needs y_scale" : "y_scale is for an i8 y_dtype");
  if (ys && (ys->kind != IR_ATTR_FLOAT || !(ys->f > 0) || !isfinite(ys->f)))
    return fail(c, "y_scale must be a finite number above 0");
  y->dtype = (IrDtype)yd->i[0];
  return 0;
}

/* A quantized convolution's (x i8 or f8e4m3) dequantized result: f32,
 * or y_dtype_attr's (the precision pass stores it in the default dtype;
 * pass requant folds the next layer's calibrated cast in).  y_dtype on a
 * convolution of floats is refused (conv2d_bn_train's own y_dtype is its
 * normalized output's). */
static int quantized_y(Ctx *c, IrType *y) {
  IrDtype x = in_type(c, 0)->dtype;
  if (ir_attr_find(c->n, "y_dtype") && x != IR_DT_I8 && x != IR_DT_F8E4M3)
    return fail(c, "y_dtype is for a convolution of i8 or f8e4m3 values, not %s", ir_dtype_name(x));
  return y_dtype_attr(c, y);
}

static int infer_conv2d_node(Ctx *c, IrType *out) { return infer_conv2d(c, out) || quantized_y(c, out); }

/* --- fused forms ------------------------------------------------------------ */

/* Types the node's first two inputs as conv2d(x, w) with its attributes. */
static int probe_conv(Ctx *c, IrType *z) {
  IrNode n = *c->n;
  n.op = IR_OP_CONV2D;
  n.nin = 2;
  n.nout = 1;
  Ctx pc = {c->g, &n, c->err, c->errlen};
  return infer_conv2d(&pc, z);
}

/* gamma, beta (and running mean, var) at inputs from..to-1 are f32[C]. */
static int bn_vectors(Ctx *c, int from, int to, int64_t C) {
  char b1[96];
  for (int i = from; i < to; i++) {
    const IrType *t = in_type(c, i);
    if (t->rank != 1 || t->dim[0] != C || t->dtype != IR_DT_F32)
      return fail(c, "batch-norm vector %d is %s, expected f32[%" PRId64 "]", i, ir_type_str(t, b1, sizeof b1), C);
  }
  return 0;
}

static int relu_flag(Ctx *c) {
  int64_t r = ir_attr_int(c->n, "relu", -1);
  return r == 0 || r == 1 ? 0 : fail(c, "attribute relu must be 0 or 1");
}

static int bn_attrs(Ctx *c, int with_momentum) {
  double eps = ir_attr_float(c->n, "eps", -1), mom = ir_attr_float(c->n, "momentum", 0);
  if (!(eps > 0)) return fail(c, "batch-norm eps must be positive");
  if (with_momentum && !(mom >= 0 && mom <= 1)) return fail(c, "batch-norm momentum must be in [0, 1]");
  return 0;
}

/* (x, w, gamma, beta, running_mean, running_var [, sbx] [, residual])
 * -> z = conv(P(x)), y = [relu](bn(z) [+ residual]), mean, invstd.
 * The residual is added to the batch norm's output before the relu, shaped
 * like that output. */
static int residual(Ctx *c, const IrType *y) {
  int r = ir_conv_residual(c->g, c->n);
  if (r < 0) return 0;
  /* an i8 convolution requantizing its result (y i8, pass requant) adds a float or a quantized residual (i8 with
   * its one scale: a block output requantized too); one writing floats, its float dtype's or a quantized one */
  IrDtype rt = in_type(c, r)->dtype;
  if (rt == IR_DT_I8 && !(in_type(c, 0)->dtype == IR_DT_I8 && ir_value_step(c->g, c->n->in[r]) > 0))
    return fail(c, "an i8 residual must be added by an i8 convolution and carry a calibrated step");
  int quantized = in_type(c, 0)->dtype == IR_DT_I8 && (rt == IR_DT_I8 || (y->dtype == IR_DT_I8 && is_float(rt)));
  return need_same_shape(c, "residual", in_type(c, r), "the batch norm's output", y) ||
         (rt != y->dtype && !quantized
              ? fail(c, "residual is %s, the batch norm's output %s", ir_dtype_name(rt), ir_dtype_name(y->dtype))
              : 0);
}

/* y's dtype: z's, or the y_dtype attribute's (the precision pass stores an
 * f32 convolution's normalized output in the default dtype). */
static int infer_conv2d_bn_train(Ctx *c, IrType *out) {
  if (probe_conv(c, &out[0]) || relu_flag(c) || bn_attrs(c, 1)) return -1;
  int64_t K = chan(&out[0]);
  const IrAttr *yd = ir_attr_find(c->n, "y_dtype");
  out[1] = out[0];
  if (yd) {
    if (yd->kind != IR_ATTR_DTYPE || !is_float((IrDtype)yd->i[0])) return fail(c, "y_dtype must be f32, f16 or bf16");
    out[1].dtype = (IrDtype)yd->i[0];
  }
  if (bn_vectors(c, 2, 6, K) || optional_inputs(c, 6, 0) || residual(c, &out[1])) return -1;
  out[2] = out[3] = vec_f32(K);
  return 0;
}

/* Inference: (x, w, gamma, beta, running_mean, running_var [, sbx] [, residual])
 * -> y, batch norm folded into the conv. */
static int infer_conv2d_bn(Ctx *c, IrType *out) {
  if (probe_conv(c, out) || quantized_y(c, out) || relu_flag(c) || bn_attrs(c, 0)) return -1;
  return bn_vectors(c, 2, 6, chan(out)) || optional_inputs(c, 6, 0) || residual(c, out);
}

/* (x, w, gamma, beta, running_mean, running_var [, sbx]) -> z = conv(P(x)),
 * mean, invstd, sb = [2, K] in z's dtype: the batch norm's scale and bias
 * (relu(bn(z)) == relu(z * sb[0] + sb[1])), for the next convolution's
 * prologue [, zc].  zc, present when pass prologue folded a cast of z into
 * the node, is an f32 z rounded to f16 or bf16: no input or attribute says
 * which, so its dtype is the one the node declares (a node being built,
 * without results yet, is typed with four). */
static int infer_conv2d_bn_stats(Ctx *c, IrType *out) {
  int nout = c->n->nout;
  if (nout != 0 && nout != 4 && nout != 5)
    return fail(c, "conv2d_bn_stats has 4 results, or 5 with z's copy zc, not %d", nout);
  if (probe_conv(c, &out[0]) || bn_attrs(c, 1)) return -1;
  int64_t K = chan(&out[0]);
  if (bn_vectors(c, 2, 6, K) || optional_inputs(c, 6, 0)) return -1;
  out[1] = out[2] = vec_f32(K);
  int64_t d[2] = {2, K};
  out[3] = ir_type(out[0].dtype, IR_LAYOUT_ROW, 2, d);
  if (nout < 5) return 0;
  int zc = c->n->out ? c->n->out[4] : -1;
  if (zc < 0 || zc >= c->g->nval) return fail(c, "conv2d_bn_stats's copy zc is not a value");
  IrDtype dc = c->g->val[zc].type.dtype;
  if (out[0].dtype != IR_DT_F32 || (dc != IR_DT_F16 && dc != IR_DT_BF16))
    return fail(c, "conv2d_bn_stats's copy zc must be f16 or bf16 of an f32 z, not %s of a %s z", ir_dtype_name(dc),
                ir_dtype_name(out[0].dtype));
  out[4] = out[0];
  out[4].dtype = dc;
  return 0;
}

/* The gradient dy's batch norm + relu backward -> dz, dgamma, dbeta, with
 * inputs beta, z, gamma, mean, invstd from index `at`
 * (batchnorm_relu_bwd: (dy, beta, z, gamma, mean, invstd)): the relu's
 * mask is recomputed from z; dz has z's dtype (dy may be narrower: an f32
 * convolution's f16 output y), or the dz_dtype attribute's (the precision
 * pass keeps an f32 convolution's z for the backward pass in f16, its dz
 * in f32). */
static int bn_relu_bwd_from(Ctx *c, const IrType *dy, int at, IrType *out) {
  const IrType *z = in_type(c, at + 1);
  const char *op = ir_op_info(c->n->op)->name;
  char what[64];
  snprintf(what, sizeof what, "%s input", op);
  if (need_same_shape(c, what, z, "gradient", dy)) return -1;
  if (!is_float(dy->dtype)) return fail(c, "%s of a non-float gradient", op);
  int64_t C = chan(z);
  if (bn_vectors(c, at, at + 1, C) || bn_vectors(c, at + 2, at + 5, C)) return -1;
  out[0] = *z;
  const IrAttr *dd = ir_attr_find(c->n, "dz_dtype");
  if (dd) {
    if (dd->kind != IR_ATTR_DTYPE || !is_float((IrDtype)dd->i[0]) || !is_float(z->dtype))
      return fail(c, "dz_dtype must be f32, f16 or bf16, of a float z");
    out[0].dtype = (IrDtype)dd->i[0];
  }
  out[1] = out[2] = vec_f32(C);
  return 0;
}

static int infer_batchnorm_relu_bwd(Ctx *c, IrType *out) { return bn_relu_bwd_from(c, in_type(c, 0), 1, out); }

/* (dy, w, beta, z, gamma, mean, invstd) -> batchnorm_relu_bwd(
 * conv2d_bwd_data(dy, w), beta, z, gamma, mean, invstd): the data gradient
 * of a convolution whose input was relu(batchnorm(z)), taken back through
 * them; dz has z's dtype (the data gradient's), then dgamma, dbeta. */
static int infer_conv2d_bwd_data_bn_relu(Ctx *c, IrType *out) {
  IrType dx;
  if (infer_conv2d_bwd_data(c, &dx)) return -1;
  const IrType *z = in_type(c, 3);
  if (need_same_shape(c, "conv2d_bwd_data_bn_relu input z", z, "the data gradient", &dx)) return -1;
  if (z->dtype != dx.dtype)
    return fail(c, "z is %s, the data gradient %s", ir_dtype_name(z->dtype), ir_dtype_name(dx.dtype));
  int64_t C = chan(z);
  if (bn_vectors(c, 2, 3, C) || bn_vectors(c, 4, 7, C)) return -1;
  out[0] = dx;
  out[1] = out[2] = vec_f32(C);
  return 0;
}

/* (dy, z, beta, gamma, mean, invstd): maxpool_bwd(dy, y) with y =
 * relu(batchnorm(z)) recomputed from z and the statistics (in dy's dtype,
 * as the forward stored it), so that y need not be kept; dx like z, in
 * dy's dtype. */
static int infer_maxpool_bn_relu_bwd(Ctx *c, IrType *out) {
  if (need_act4(c, 0, "maxpool_bn_relu_bwd") || need_act4(c, 1, "maxpool_bn_relu_bwd")) return -1;
  const IrType *z = in_type(c, 1);
  if (!is_float(z->dtype) || !is_float(in_type(c, 0)->dtype)) return fail(c, "maxpool_bn_relu_bwd of non-float values");
  if (bn_vectors(c, 2, 6, z->dim[act_c(z)])) return -1;
  *out = *z;
  out->dtype = in_type(c, 0)->dtype;
  return check_forward(c, IR_OP_MAXPOOL, out, NULL, in_type(c, 0));
}

/* (z, beta, gamma, mean, invstd) -> y, win: y = maxpool(relu(batchnorm(z)))
 * with the batch norm from the saved statistics, the pool's input never
 * stored (pass prologue); like z.  win: i8 of y's shape, each window's
 * winner r*S + s (-1: the window holds no input element), for
 * maxpool_bwd_win. */
static int infer_maxpool_bn_relu(Ctx *c, IrType *out) {
  if (need_act4(c, 0, "maxpool_bn_relu")) return -1;
  const IrType *z = in_type(c, 0);
  if (!is_float(z->dtype)) return fail(c, "maxpool_bn_relu of a non-float z");
  if (bn_vectors(c, 1, 5, z->dim[act_c(z)]) || infer_pool(c, out)) return -1;
  int64_t k[2];
  if (spatial_attr(c, "k", 1, k)) return -1;
  if (k[0] * k[1] > 127) return fail(c, "maxpool_bn_relu window of %" PRId64 " elements (at most 127)", k[0] * k[1]);
  out[1] = out[0];
  out[1].dtype = IR_DT_I8;
  return 0;
}

/* Inference: (z, gamma, beta, running_mean, running_var) -> y =
 * maxpool(relu(batchnorm(z))) with the running statistics, the batch
 * norm's output never stored (pass prologue: the f32 stem); y in z's
 * dtype or the y_dtype attribute's (a cast after the pool folded in: f16 or
 * bf16, or i8 quantized by the step y_scale, a calibrated cast's). */
static int infer_maxpool_bn_relu_infer(Ctx *c, IrType *out) {
  if (need_act4(c, 0, "maxpool_bn_relu_infer")) return -1;
  const IrType *z = in_type(c, 0);
  if (!is_float(z->dtype)) return fail(c, "maxpool_bn_relu_infer of a non-float z");
  if (bn_vectors(c, 1, 5, z->dim[act_c(z)]) || bn_attrs(c, 0) || infer_pool(c, out)) return -1;
  return y_dtype_attr(c, out);
}

/* (dy, win) -> dx: dy added into each window's winner (win, as
 * maxpool_bn_relu writes it), in_hw giving dx's size; dx in dy's dtype. */
static int infer_maxpool_bwd_win(Ctx *c, IrType *out) {
  if (need_act4(c, 0, "maxpool_bwd_win") || need_act4(c, 1, "maxpool_bwd_win")) return -1;
  const IrType *dy = in_type(c, 0), *win = in_type(c, 1);
  if (!is_float(dy->dtype)) return fail(c, "maxpool_bwd_win of a non-float gradient");
  if (win->dtype != IR_DT_I8) return fail(c, "maxpool_bwd_win winners are %s, not i8", ir_dtype_name(win->dtype));
  if (need_same_shape(c, "maxpool_bwd_win winners", win, "the gradient", dy)) return -1;
  if (win->layout != dy->layout) return fail(c, "maxpool_bwd_win winners and gradient in different layouts");
  if (with_hw(c, dy, dy->dim[act_c(dy)], out)) return -1;
  return check_forward(c, IR_OP_MAXPOOL, out, NULL, dy);
}

/* (dy, win, beta, z, gamma, mean, invstd) -> batchnorm_relu_bwd(
 * maxpool_bwd_win(dy, win), beta, z, gamma, mean, invstd): the stem's
 * max-pool backward gathered straight into its batch norm's backward (pass
 * prologue), the gathered gradient in dy's dtype as maxpool_bwd_win stores
 * it; dz like z (or dz_dtype), then dgamma, dbeta. */
static int infer_batchnorm_relu_bwd_win(Ctx *c, IrType *out) {
  IrType g;
  return infer_maxpool_bwd_win(c, &g) || bn_relu_bwd_from(c, &g, 2, out);
}

/* (dy, w, y [, g]) -> conv2d_bwd_data(dy, w) [+ g] masked by y > 0; g is
 * the other gradient of a value two branches read (a residual block's input) */
static int infer_conv2d_bwd_data_relu(Ctx *c, IrType *out) {
  if (infer_conv2d_bwd_data(c, out) ||
      need_same_shape(c, "conv2d_bwd_data_relu mask", in_type(c, 2), "the gradient", out))
    return -1;
  if (c->n->nin < 4) return 0;
  if (ir_conv_residual(c->g, c->n) != 3) return fail(c, "input 3 of conv2d_bwd_data_relu must be a gradient to add");
  return need_same_shape(c, "conv2d_bwd_data_relu addend", in_type(c, 3), "the gradient", out) ||
         (in_type(c, 3)->dtype != out->dtype
              ? fail(c, "addend is %s, the gradient %s", ir_dtype_name(in_type(c, 3)->dtype), ir_dtype_name(out->dtype))
              : 0);
}

/* --- layout and precision ---------------------------------------------------- */

/* x -> the same tensor in layout `layout` (NCHW<->NHWC, KCRS<->KRSC) with the
 * channel dim padded with zeros, or cropped, to `c`; stored as y_dtype (a
 * float dtype: the precision pass folds a cast of a relayout into it) when
 * given. */
static int infer_relayout(Ctx *c, IrType *out) {
  const IrType *x = in_type(c, 0);
  const IrAttr *la = ir_attr_find(c->n, "layout");
  int64_t ch = ir_attr_int(c->n, "c", -1);
  int to = la && la->kind == IR_ATTR_STR ? ir_layout_parse(la->s) : -1;
  char b1[96];
  if (x->rank != 4 || x->layout == IR_LAYOUT_ROW)
    return fail(c, "relayout needs an image or filter tensor, got %s", ir_type_str(x, b1, sizeof b1));
  int act = x->layout == IR_LAYOUT_NCHW || x->layout == IR_LAYOUT_NHWC;
  if (to < 0 || (act != (to == IR_LAYOUT_NCHW || to == IR_LAYOUT_NHWC)))
    return fail(c, "relayout of %s to layout '%s'", ir_type_str(x, b1, sizeof b1), la && la->s ? la->s : "?");
  if (ch < 1 || ch > DIM_LIMIT) return fail(c, "relayout channel count c=%" PRId64 " out of range", ch);
  /* Logical (N|K, C, H|R, W|S), then written out in the target order. */
  int cx = x->layout == IR_LAYOUT_NHWC || x->layout == IR_LAYOUT_KRSC ? 3 : 1;
  int hx = cx == 3 ? 1 : 2;
  int64_t n = x->dim[0], h = x->dim[hx], w = x->dim[hx + 1];
  int last = to == IR_LAYOUT_NHWC || to == IR_LAYOUT_KRSC;
  int64_t d[4] = {n, last ? h : ch, last ? w : h, last ? ch : w};
  *out = ir_type(x->dtype, (IrLayout)to, 4, d);
  const IrAttr *yd = ir_attr_find(c->n, "y_dtype");
  if (yd && (yd->kind != IR_ATTR_DTYPE || !is_float((IrDtype)yd->i[0]) || !is_float(x->dtype)))
    return fail(c, "a relayout's y_dtype must be f32, f16 or bf16, of a float tensor");
  return y_dtype_attr(c, out);
}

static int infer_cast(Ctx *c, IrType *out) {
  char b1[96];
  const IrAttr *a = ir_attr_find(c->n, "to");
  if (!a || a->kind != IR_ATTR_DTYPE) return fail(c, "cast needs to=DTYPE");
  IrDtype to = (IrDtype)a->i[0], from = in_type(c, 0)->dtype;
  int f8 = to == IR_DT_F8E4M3 || to == IR_DT_F8E5M2;
  int scaled = from == IR_DT_I8 || from == IR_DT_F8E4M3 || from == IR_DT_F8E5M2;
  if (!is_float(from) && !scaled) return fail(c, "cast of a %s tensor", ir_dtype_name(from));
  if (!is_float(to) && to != IR_DT_I8 && !f8) return fail(c, "cast to %s", ir_dtype_name(to));
  /* to i8: scale=S, a calibrated per-tensor scale (x is rounded to x/S, clamped to +-127), or axis=0, a scale per
   * slice of dimension 0 (a weight's output channel) from the slice's own maximum; neither: the tensor's maximum.
   * To f8: scale=S, x rounded to x/S; else S = the largest finite |x| over the format's largest value */
  const IrAttr *scale = ir_attr_find(c->n, "scale"), *axis = ir_attr_find(c->n, "axis");
  if (scale && to != IR_DT_I8 && !f8) return fail(c, "scale is for a cast to i8 or f8");
  if (axis && to != IR_DT_I8) return fail(c, "axis is for a cast to i8");
  if (scale && (scale->kind != IR_ATTR_FLOAT || !(scale->f > 0) || scale->f > 1e30))
    return fail(c, "cast scale must be a positive number");
  if (axis && (axis->kind != IR_ATTR_INT || axis->i[0] != 0 || in_type(c, 0)->rank < 1))
    return fail(c, "cast axis must be 0 (the output channels)");
  if (scale && axis) return fail(c, "cast takes scale or axis, not both");
  /* To f8 with delayed scaling: input 1 is the amax history, f32[H] state the cast reads and updates (docs/ir.md) */
  if (c->n->nin == 2) {
    const IrType *h = in_type(c, 1);
    if (!f8 || scale) return fail(c, "an amax history (input 1) is for a cast to f8 without scale=");
    if (h->dtype != IR_DT_F32 || h->rank != 1 || h->dim[0] < 1 || h->dim[0] > 1024)
      return fail(c, "cast amax history %s must be f32[H], H in 1..1024", ir_type_str(h, b1, sizeof b1));
  }
  *out = *in_type(c, 0);
  out->dtype = to;
  return 0;
}

/* --- dynamic loss scaling ---------------------------------------------------- */

/* (tensors of any float types) -> f32[] flag: 1 when any element is inf or nan */
static int infer_nonfinite_check(Ctx *c, IrType *out) {
  char b1[96];
  for (int i = 0; i < c->n->nin; i++)
    if (!is_float(in_type(c, i)->dtype))
      return fail(c, "nonfinite_check input %d is %s, not a float tensor", i,
                  ir_type_str(in_type(c, i), b1, sizeof b1));
  *out = ir_type(IR_DT_F32, IR_LAYOUT_ROW, 0, NULL);
  return 0;
}

/* (flag f32[], @scale f32[] state, @good_steps f32[] state): updated in place */
static int infer_loss_scale_update(Ctx *c, IrType *out) {
  if (!is_scalar_f32(in_type(c, 0))) return fail(c, "loss_scale_update flag must be f32[]");
  for (int i = 1; i < 3; i++)
    if (!is_scalar_f32(in_type(c, i)) || c->g->val[c->n->in[i]].kind != IR_VAL_STATE)
      return fail(c, "loss_scale_update %s must be an f32[] state", i == 1 ? "scale" : "good-step count");
  const IrAttr *gi = ir_attr_find(c->n, "growth_interval");
  if (!gi || gi->kind != IR_ATTR_INT || gi->i[0] < 1 || gi->i[0] > DIM_LIMIT)
    return fail(c, "loss_scale_update needs an integer growth_interval in 1..%d", DIM_LIMIT);
  double backoff = ir_attr_float(c->n, "backoff", -1), growth = ir_attr_float(c->n, "growth", -1);
  if (!(backoff > 0 && backoff < 1)) return fail(c, "loss_scale_update backoff must be in (0, 1)");
  if (!(growth > 1 && growth < 1e30)) return fail(c, "loss_scale_update growth must be above 1");
  (void)out;
  return 0;
}

typedef int (*InferFn)(Ctx *, IrType *);

static const InferFn INFER[IR_OP_COUNT] = {
    [IR_OP_CONV2D] = infer_conv2d_node,
    [IR_OP_BATCHNORM] = infer_batchnorm,
    [IR_OP_RELU] = infer_same,
    [IR_OP_ADD] = infer_add,
    [IR_OP_MAXPOOL] = infer_pool,
    [IR_OP_AVGPOOL] = infer_pool,
    [IR_OP_GLOBAL_AVGPOOL] = infer_global_avgpool,
    [IR_OP_FLATTEN] = infer_flatten,
    [IR_OP_LINEAR] = infer_linear,
    [IR_OP_SOFTMAX_CE] = infer_softmax_ce,
    [IR_OP_BATCHNORM_TRAIN] = infer_batchnorm_train,
    [IR_OP_CONV2D_BWD_DATA] = infer_conv2d_bwd_data,
    [IR_OP_CONV2D_BWD_WEIGHT] = infer_conv2d_bwd_weight,
    [IR_OP_CHANNEL_SUM] = infer_channel_sum,
    [IR_OP_BATCHNORM_BWD] = infer_batchnorm_bwd,
    [IR_OP_RELU_BWD] = infer_relu_bwd,
    [IR_OP_SUM_RELU_BWD] = infer_sum_relu_bwd,
    [IR_OP_MAXPOOL_BWD] = infer_maxpool_bwd,
    [IR_OP_AVGPOOL_BWD] = infer_avgpool_bwd,
    [IR_OP_GLOBAL_AVGPOOL_BWD] = infer_global_avgpool_bwd,
    [IR_OP_UNFLATTEN] = infer_unflatten,
    [IR_OP_LINEAR_BWD_DATA] = infer_linear_bwd_data,
    [IR_OP_LINEAR_BWD_WEIGHT] = infer_linear_bwd_weight,
    [IR_OP_SOFTMAX_CE_BWD] = infer_softmax_ce_bwd,
    [IR_OP_SGD_UPDATE] = infer_sgd_update,
    [IR_OP_CONV2D_BN_TRAIN] = infer_conv2d_bn_train,
    [IR_OP_CONV2D_BN] = infer_conv2d_bn,
    [IR_OP_CONV2D_BN_STATS] = infer_conv2d_bn_stats,
    [IR_OP_ADD_RELU] = infer_add,
    [IR_OP_BATCHNORM_RELU_BWD] = infer_batchnorm_relu_bwd,
    [IR_OP_CONV2D_BWD_DATA_RELU] = infer_conv2d_bwd_data_relu,
    [IR_OP_CONV2D_BWD_DATA_BN_RELU] = infer_conv2d_bwd_data_bn_relu,
    [IR_OP_MAXPOOL_BN_RELU_BWD] = infer_maxpool_bn_relu_bwd,
    [IR_OP_MAXPOOL_BN_RELU] = infer_maxpool_bn_relu,
    [IR_OP_MAXPOOL_BN_RELU_INFER] = infer_maxpool_bn_relu_infer,
    [IR_OP_MAXPOOL_BWD_WIN] = infer_maxpool_bwd_win,
    [IR_OP_BATCHNORM_RELU_BWD_WIN] = infer_batchnorm_relu_bwd_win,
    [IR_OP_RELAYOUT] = infer_relayout,
    [IR_OP_CAST] = infer_cast,
    [IR_OP_NONFINITE_CHECK] = infer_nonfinite_check,
    [IR_OP_LOSS_SCALE_UPDATE] = infer_loss_scale_update,
};

int ir_infer(const IrGraph *g, const IrNode *n, IrType *out, char *err, size_t errlen) {
  Ctx c = {g, n, err, errlen};
  const IrOpInfo *info = ir_op_info(n->op);
  if (!info || !INFER[n->op]) return fail(&c, "no type rule for op %d", (int)n->op);
  if (n->nin < info->min_in || n->nin > info->max_in)
    return fail(&c, "%s takes %d to %d inputs, got %d", info->name, info->min_in, info->max_in, n->nin);
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] < 0 || n->in[i] >= g->nval) return fail(&c, "%s input %d is not a value", info->name, i);
  return INFER[n->op](&c, out);
}
