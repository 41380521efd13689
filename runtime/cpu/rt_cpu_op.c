/* rt_cpu_op.c - the CPU executor's op table and what its op functions share:
 * node errors, buffers, and the translation of IR types and attributes into
 * rt_ref's activation, filter, convolution and pooling descriptions.
 *
 * Adding an op: one entry in RT_CPU_OPS below, one function (declared in
 * rt_cpu_op.h) that reads the node's inputs and writes its outputs.  An op
 * without an entry makes rt_cpu_new fail with "op X not supported". */
#include <stdarg.h>
#include <stdio.h>

#include "rt_cpu_op.h"

enum { LABELS = 1u << 1 }; /* softmax_cross_entropy's second input */

static const RtCpuOp RT_CPU_OPS[IR_OP_COUNT] = {
    [IR_OP_CONV2D] = {rt_cpu_fwd_conv2d, rt_cpu_fwd_conv2d_scratch, 0},
    [IR_OP_BATCHNORM] = {rt_cpu_fwd_batchnorm, NULL, 0},
    [IR_OP_RELU] = {rt_cpu_fwd_relu, NULL, 0},
    [IR_OP_ADD] = {rt_cpu_fwd_add, NULL, 0},
    [IR_OP_MAXPOOL] = {rt_cpu_fwd_maxpool, NULL, 0},
    [IR_OP_AVGPOOL] = {rt_cpu_fwd_avgpool, NULL, 0},
    [IR_OP_GLOBAL_AVGPOOL] = {rt_cpu_fwd_global_avgpool, NULL, 0},
    [IR_OP_FLATTEN] = {rt_cpu_fwd_copy, NULL, 0},
    [IR_OP_LINEAR] = {rt_cpu_fwd_linear, NULL, 0},
    [IR_OP_SOFTMAX_CE] = {rt_cpu_fwd_softmax_ce, rt_cpu_fwd_labels_scratch, LABELS},
    [IR_OP_BATCHNORM_TRAIN] = {rt_cpu_train_batchnorm, NULL, 0},
    [IR_OP_CONV2D_BWD_DATA] = {rt_cpu_train_conv2d_bwd_data, rt_cpu_train_conv2d_bwd_data_scratch, 0},
    [IR_OP_CONV2D_BWD_WEIGHT] = {rt_cpu_train_conv2d_bwd_weight, rt_cpu_train_conv2d_bwd_weight_scratch, 0},
    [IR_OP_CHANNEL_SUM] = {rt_cpu_train_channel_sum, NULL, 0},
    [IR_OP_BATCHNORM_BWD] = {rt_cpu_train_batchnorm_bwd, NULL, 0},
    [IR_OP_RELU_BWD] = {rt_cpu_train_relu_bwd, NULL, 0},
    [IR_OP_MAXPOOL_BWD] = {rt_cpu_train_maxpool_bwd, NULL, 0},
    [IR_OP_AVGPOOL_BWD] = {rt_cpu_train_avgpool_bwd, NULL, 0},
    [IR_OP_GLOBAL_AVGPOOL_BWD] = {rt_cpu_train_global_avgpool_bwd, NULL, 0},
    [IR_OP_UNFLATTEN] = {rt_cpu_fwd_copy, NULL, 0},
    [IR_OP_LINEAR_BWD_DATA] = {rt_cpu_train_linear_bwd_data, NULL, 0},
    [IR_OP_LINEAR_BWD_WEIGHT] = {rt_cpu_train_linear_bwd_weight, NULL, 0},
    [IR_OP_SOFTMAX_CE_BWD] = {rt_cpu_train_softmax_ce_bwd, rt_cpu_fwd_labels_scratch, LABELS},
    [IR_OP_SGD_UPDATE] = {rt_cpu_train_sgd_update, rt_cpu_train_sgd_scratch, 0},
    [IR_OP_CONV2D_BN_TRAIN] = {rt_cpu_fused_conv2d_bn_train, rt_cpu_fused_conv_scratch, 0},
    [IR_OP_CONV2D_BN] = {rt_cpu_fused_conv2d_bn, rt_cpu_fused_conv_scratch, 0},
    [IR_OP_CONV2D_BN_STATS] = {rt_cpu_fused_conv2d_bn_stats, rt_cpu_fused_conv_scratch, 0},
    [IR_OP_ADD_RELU] = {rt_cpu_fused_add_relu, NULL, 0},
    [IR_OP_SUM_RELU_BWD] = {rt_cpu_fused_sum_relu_bwd, NULL, 0},
    [IR_OP_BATCHNORM_RELU_BWD] = {rt_cpu_fused_batchnorm_relu_bwd, NULL, 0},
    [IR_OP_CONV2D_BWD_DATA_RELU] = {rt_cpu_fused_conv2d_bwd_data_relu, rt_cpu_train_conv2d_bwd_data_scratch, 0},
    [IR_OP_CONV2D_BWD_DATA_BN_RELU] = {rt_cpu_fused_conv2d_bwd_data_bn_relu, rt_cpu_train_conv2d_bwd_data_scratch, 0},
    [IR_OP_MAXPOOL_BN_RELU_BWD] = {rt_cpu_fused_maxpool_bn_relu_bwd, rt_cpu_fused_pool_bn_scratch, 0},
    [IR_OP_MAXPOOL_BN_RELU] = {rt_cpu_fused_maxpool_bn_relu, rt_cpu_fused_pool_bn_scratch, 0},
    [IR_OP_MAXPOOL_BN_RELU_INFER] = {rt_cpu_fused_maxpool_bn_relu_infer, rt_cpu_fused_pool_bn_scratch, 0},
    [IR_OP_MAXPOOL_BWD_WIN] = {rt_cpu_fused_maxpool_bwd_win, rt_cpu_fused_pool_bn_scratch, 0},
    [IR_OP_BATCHNORM_RELU_BWD_WIN] = {rt_cpu_fused_batchnorm_relu_bwd_win, rt_cpu_fused_pool_bn_scratch, 0},
    [IR_OP_RELAYOUT] = {rt_cpu_relayout, NULL, 0},
    [IR_OP_CAST] = {rt_cpu_cast, NULL, 0},
    [IR_OP_NONFINITE_CHECK] = {rt_cpu_train_nonfinite_check, NULL, 0},
    [IR_OP_LOSS_SCALE_UPDATE] = {rt_cpu_train_loss_scale_update, NULL, 0},
};

const RtCpuOp *rt_cpu_op_find(IrOp op) {
  return (unsigned)op < IR_OP_COUNT && RT_CPU_OPS[op].run ? &RT_CPU_OPS[op] : NULL;
}

int rt_cpu_op_fail(RtCpu *x, const IrNode *n, const char *fmt, ...) {
  if (!x->err || !x->errlen) return -1;
  const IrOpInfo *info = ir_op_info(n->op);
  int used = snprintf(x->err, x->errlen, "node '%s' (%s", n->name ? n->name : "", info ? info->name : "?");
  if (used >= 0 && (size_t)used < x->errlen && n->nout > 0)
    used += snprintf(x->err + used, x->errlen - (size_t)used, ", %%%d", n->out[0]);
  if (used >= 0 && (size_t)used < x->errlen) used += snprintf(x->err + used, x->errlen - (size_t)used, "): ");
  if (used >= 0 && (size_t)used < x->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err + used, x->errlen - (size_t)used, fmt, ap);
    va_end(ap);
  }
  return -1;
}

int rt_cpu_op_check(RtCpu *x, const IrNode *n, int status, const char *kernel) {
  if (status == RT_REF_OK) return 0;
  return rt_cpu_op_fail(x, n, "%s: %s", kernel, rt_ref_strerror(status));
}

float *rt_cpu_op_in(RtCpu *x, const IrNode *n, int i) { return x->buf[n->in[i]]; }
float *rt_cpu_op_out(RtCpu *x, const IrNode *n, int i) { return x->buf[n->out[i]]; }
const int64_t *rt_cpu_op_in_int(RtCpu *x, const IrNode *n, int i) { return x->buf[n->in[i]]; }
const IrType *rt_cpu_op_in_type(const RtCpu *x, const IrNode *n, int i) { return &x->g->val[n->in[i]].type; }
const IrType *rt_cpu_op_out_type(const RtCpu *x, const IrNode *n, int i) { return &x->g->val[n->out[i]].type; }
int64_t rt_cpu_op_in_numel(const RtCpu *x, const IrNode *n, int i) { return x->numel[n->in[i]]; }

int64_t rt_cpu_op_dim(const RtCpu *x, const IrType *t, int i) { return t->dim[i] == IR_DIM_N ? x->batch : t->dim[i]; }

RtRefAct rt_cpu_op_act(const RtCpu *x, const IrType *t) {
  RtRefAct a = {.N = (int)rt_cpu_op_dim(x, t, 0), .C = 1, .H = 1, .W = 1, .layout = RT_REF_NCHW};
  if (t->rank == 2) {
    a.C = (int)t->dim[1];
  } else if (t->rank == 4 && t->layout == IR_LAYOUT_NHWC) {
    a = (RtRefAct){a.N, (int)t->dim[3], (int)t->dim[1], (int)t->dim[2], RT_REF_NHWC};
  } else if (t->rank == 4) {
    a = (RtRefAct){a.N, (int)t->dim[1], (int)t->dim[2], (int)t->dim[3], RT_REF_NCHW};
  }
  return a;
}

RtRefFilter rt_cpu_op_filter(const IrType *t) {
  if (t->layout == IR_LAYOUT_KRSC)
    return (RtRefFilter){(int)t->dim[0], (int)t->dim[3], (int)t->dim[1], (int)t->dim[2], RT_REF_KRSC};
  return (RtRefFilter){(int)t->dim[0], (int)t->dim[1], (int)t->dim[2], (int)t->dim[3], RT_REF_KCRS};
}

void rt_cpu_op_attr2(const IrNode *n, const char *key, int dflt, int v[2]) {
  const IrAttr *a = ir_attr_find(n, key);
  v[0] = v[1] = dflt;
  if (a && a->kind == IR_ATTR_INT) v[0] = v[1] = (int)a->i[0];
  if (a && a->kind == IR_ATTR_INTS && a->n == 2) v[0] = (int)a->i[0], v[1] = (int)a->i[1];
}

RtRefConvParam rt_cpu_op_conv_param(const IrNode *n) {
  int s[2], p[2], d[2];
  rt_cpu_op_attr2(n, "s", 1, s);
  rt_cpu_op_attr2(n, "p", 0, p);
  rt_cpu_op_attr2(n, "d", 1, d);
  return (RtRefConvParam){.stride_h = s[0],
                          .stride_w = s[1],
                          .pad_top = p[0],
                          .pad_left = p[1],
                          .pad_bottom = p[0],
                          .pad_right = p[1],
                          .dil_h = d[0],
                          .dil_w = d[1],
                          .groups = (int)ir_attr_int(n, "groups", 1)};
}

RtRefPoolParam rt_cpu_op_pool_param(const IrNode *n) {
  int k[2], s[2], p[2];
  rt_cpu_op_attr2(n, "k", 1, k);
  rt_cpu_op_attr2(n, "s", 1, s);
  rt_cpu_op_attr2(n, "p", 0, p);
  /* PyTorch's AvgPool2d counts padding by default. */
  return (RtRefPoolParam){.R = k[0],
                          .S = k[1],
                          .stride_h = s[0],
                          .stride_w = s[1],
                          .pad_top = p[0],
                          .pad_left = p[1],
                          .pad_bottom = p[0],
                          .pad_right = p[1],
                          .dil_h = 1,
                          .dil_w = 1,
                          .count_include_pad = (int)ir_attr_int(n, "include_pad", 1)};
}

size_t rt_cpu_op_conv_scratch(const RtCpu *x, const IrType *xt, const IrType *wt, const IrType *yt, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, xt), ys = rt_cpu_op_act(x, yt);
  RtRefFilter wf = rt_cpu_op_filter(wt);
  RtRefConvParam p = rt_cpu_op_conv_param(n);
  int64_t f = rt_ref_conv2d_workspace(&xs, &wf, &ys, &p);
  return f > 0 ? (size_t)f * sizeof(float) : 0;
}

/* P(x) is kept at the start of the scratch, the convolution's column buffer
 * after it, on a 64-byte boundary. */
static size_t prologue_bytes(const RtCpu *x, const IrNode *n, int xi) {
  if (ir_conv_prologue(x->g, n) < 0) return 0;
  size_t b = (size_t)x->numel[n->in[xi]] * sizeof(float);
  return (b + 63) & ~(size_t)63;
}

size_t rt_cpu_op_prologue_scratch(const RtCpu *x, const IrNode *n, int xi, size_t conv_bytes) {
  return prologue_bytes(x, n, xi) + conv_bytes;
}

int rt_cpu_op_prologue(RtCpu *x, const IrNode *n, int xi, const float **in, void **work) {
  int sbx = ir_conv_prologue(x->g, n);
  size_t skip = prologue_bytes(x, n, xi);
  *in = rt_cpu_op_in(x, n, xi);
  *work = (char *)x->scratch + skip;
  if (sbx < 0) return 0;
  float *p = x->scratch;
  int64_t count = x->numel[n->in[xi]];
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, xi));
  if (rt_cpu_op_check(x, n, rt_ref_bn_prologue(&xs, *in, rt_cpu_op_in(x, n, sbx), p), "rt_ref_bn_prologue")) return -1;
  if (rt_cpu_op_round(x, n, rt_cpu_op_in_type(x, n, xi)->dtype, count, p, p)) return -1;
  *in = p;
  return 0;
}

int rt_cpu_op_round(RtCpu *x, const IrNode *n, IrDtype dt, int64_t count, const float *src, float *dst) {
  if (dt == IR_DT_F16) return rt_cpu_op_check(x, n, rt_ref_round_f16(count, src, dst), "rt_ref_round_f16");
  if (dt == IR_DT_BF16) return rt_cpu_op_check(x, n, rt_ref_round_bf16(count, src, dst), "rt_ref_round_bf16");
  return 0;
}
