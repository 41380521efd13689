/* rt_cpu_op.h - what the CPU executor's op functions share (internal).
 *
 * rt_cpu.c owns the executor and the dispatch table RT_CPU_OPS, indexed by
 * IrOp: each entry is one function that maps a node's attributes and value
 * types onto rt_ref calls (rt_cpu_fwd.c: forward ops, rt_cpu_train.c: the
 * training forms), and optionally one that says how many bytes of scratch the
 * node needs (the executor allocates the largest once).  Shapes were checked
 * with ir_infer() when the executor was made, so an op function may trust
 * that its inputs and outputs have the sizes the type rules give. */
#ifndef NETC_RT_CPU_OP_H
#define NETC_RT_CPU_OP_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "rt_cpu.h"
#include "rt_ref.h"

struct RtCpu {
  const IrGraph *g;
  int64_t batch;
  void **buf; /* per value: float* or int64_t*, numel[v] elements */
  int64_t *numel;
  void *scratch;   /* shared by all nodes, sized for the hungriest one */
  size_t nscratch; /* bytes */
  char *err;       /* the current rt_cpu_run's message buffer */
  size_t errlen;
  const RtRefSync *sync; /* batch norm's statistics over several processes (rt_cpu_set_sync), or NULL */
  char *once;            /* per node: marked `once` (pass_hoist): run before a step after the weights change */
  int nonce;             /* how many */
  int stale;             /* the once nodes' results predate the weights (set when a weight's storage is handed out) */
};

/* Runs node n; returns 0, or -1 after rt_cpu_op_fail(). */
typedef int (*RtCpuOpFn)(RtCpu *x, const IrNode *n);
/* Scratch bytes node n needs (types already checked). */
typedef size_t (*RtCpuScratchFn)(const RtCpu *x, const IrNode *n);

typedef struct RtCpuOp {
  RtCpuOpFn run;
  RtCpuScratchFn scratch; /* NULL: none */
  unsigned int_inputs;    /* bit i: input i holds integers (labels) */
} RtCpuOp;

/* The entry for op, or NULL when the executor does not run it. */
const RtCpuOp *rt_cpu_op_find(IrOp op);

/* Writes "node 'NAME' (op, %id): message" into x's error buffer; returns -1. */
int rt_cpu_op_fail(RtCpu *x, const IrNode *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* count values of src rounded to dtype dt into dst (may be src): f16 and
 * bf16 as a stored value of that dtype is; src left as it is for other
 * dtypes (dst untouched).  0, or -1 after rt_cpu_op_fail(). */
int rt_cpu_op_round(RtCpu *x, const IrNode *n, IrDtype dt, int64_t count, const float *src, float *dst);
/* Fails with rt_ref's text for a nonzero kernel status; returns 0 on 0. */
int rt_cpu_op_check(RtCpu *x, const IrNode *n, int status, const char *kernel);

/* Buffers of the node's i-th input / output. */
float *rt_cpu_op_in(RtCpu *x, const IrNode *n, int i);
float *rt_cpu_op_out(RtCpu *x, const IrNode *n, int i);
const int64_t *rt_cpu_op_in_int(RtCpu *x, const IrNode *n, int i);
const IrType *rt_cpu_op_in_type(const RtCpu *x, const IrNode *n, int i);
const IrType *rt_cpu_op_out_type(const RtCpu *x, const IrNode *n, int i);
int64_t rt_cpu_op_in_numel(const RtCpu *x, const IrNode *n, int i);

/* Dim i of t with N replaced by the batch size. */
int64_t rt_cpu_op_dim(const RtCpu *x, const IrType *t, int i);
/* An NCHW/NHWC activation, or an [N, C] matrix as an N x C x 1 x 1 NCHW one. */
RtRefAct rt_cpu_op_act(const RtCpu *x, const IrType *t);
RtRefFilter rt_cpu_op_filter(const IrType *t);
/* k, s, p, d and groups of a convolution node (d = 1, groups = 1 if absent). */
RtRefConvParam rt_cpu_op_conv_param(const IrNode *n);
/* k, s, p and include_pad of a pooling node. */
RtRefPoolParam rt_cpu_op_pool_param(const IrNode *n);
/* Bytes of column buffer a convolution of x (xt) by w (wt) into y (yt) uses. */
size_t rt_cpu_op_conv_scratch(const RtCpu *x, const IrType *xt, const IrType *wt, const IrType *yt, const IrNode *n);
/* A convolution's prologue (ir_conv_prologue): when node n has one, P(x) =
 * max(0, x * scale + bias) of input xi, rounded to x's dtype, is written to
 * the start of the scratch and *in points there; otherwise *in is input xi.
 * *work is the scratch left for the convolution.  0, or -1 after
 * rt_cpu_op_fail(). */
int rt_cpu_op_prologue(RtCpu *x, const IrNode *n, int xi, const float **in, void **work);
/* Scratch bytes for a convolution that needs conv_bytes, plus P(x) of input
 * xi when n has a prologue. */
size_t rt_cpu_op_prologue_scratch(const RtCpu *x, const IrNode *n, int xi, size_t conv_bytes);
/* A two-element spatial attribute (one int means both); dflt when absent. */
void rt_cpu_op_attr2(const IrNode *n, const char *key, int dflt, int v[2]);

/* --- op functions (one per IrOp; see the table in rt_cpu.c) --------------- */
int rt_cpu_fwd_conv2d(RtCpu *x, const IrNode *n);
size_t rt_cpu_fwd_conv2d_scratch(const RtCpu *x, const IrNode *n);
int rt_cpu_fwd_batchnorm(RtCpu *x, const IrNode *n);
int rt_cpu_fwd_relu(RtCpu *x, const IrNode *n);
int rt_cpu_fwd_add(RtCpu *x, const IrNode *n);
int rt_cpu_fwd_maxpool(RtCpu *x, const IrNode *n);
int rt_cpu_fwd_avgpool(RtCpu *x, const IrNode *n);
int rt_cpu_fwd_global_avgpool(RtCpu *x, const IrNode *n);
int rt_cpu_fwd_copy(RtCpu *x, const IrNode *n); /* flatten, unflatten */
int rt_cpu_fwd_linear(RtCpu *x, const IrNode *n);
int rt_cpu_fwd_softmax_ce(RtCpu *x, const IrNode *n);
size_t rt_cpu_fwd_labels_scratch(const RtCpu *x, const IrNode *n);
/* Labels of input i as int32 in scratch; -1 when one is outside [0, classes). */
int rt_cpu_fwd_labels(RtCpu *x, const IrNode *n, int i, int64_t classes, int32_t **out);

int rt_cpu_train_batchnorm(RtCpu *x, const IrNode *n);
int rt_cpu_train_conv2d_bwd_data(RtCpu *x, const IrNode *n);
size_t rt_cpu_train_conv2d_bwd_data_scratch(const RtCpu *x, const IrNode *n);
int rt_cpu_train_conv2d_bwd_weight(RtCpu *x, const IrNode *n);
size_t rt_cpu_train_conv2d_bwd_weight_scratch(const RtCpu *x, const IrNode *n);
int rt_cpu_train_channel_sum(RtCpu *x, const IrNode *n);
int rt_cpu_train_batchnorm_bwd(RtCpu *x, const IrNode *n);
int rt_cpu_train_relu_bwd(RtCpu *x, const IrNode *n);
int rt_cpu_train_maxpool_bwd(RtCpu *x, const IrNode *n);
int rt_cpu_train_avgpool_bwd(RtCpu *x, const IrNode *n);
int rt_cpu_train_global_avgpool_bwd(RtCpu *x, const IrNode *n);
int rt_cpu_train_linear_bwd_data(RtCpu *x, const IrNode *n);
int rt_cpu_train_linear_bwd_weight(RtCpu *x, const IrNode *n);
int rt_cpu_train_softmax_ce_bwd(RtCpu *x, const IrNode *n);
int rt_cpu_train_sgd_update(RtCpu *x, const IrNode *n);
size_t rt_cpu_train_sgd_scratch(const RtCpu *x, const IrNode *n);
int rt_cpu_train_nonfinite_check(RtCpu *x, const IrNode *n);
int rt_cpu_train_loss_scale_update(RtCpu *x, const IrNode *n);

/* rt_cpu_fused.c: the fuse pass's ops */
int rt_cpu_fused_conv2d_bn_train(RtCpu *x, const IrNode *n);
int rt_cpu_fused_conv2d_bn(RtCpu *x, const IrNode *n);
int rt_cpu_fused_conv2d_bn_stats(RtCpu *x, const IrNode *n);
/* conv2d_bn_train, conv2d_bn, conv2d_bn_stats: the column buffer and P(x). */
size_t rt_cpu_fused_conv_scratch(const RtCpu *x, const IrNode *n);
int rt_cpu_fused_add_relu(RtCpu *x, const IrNode *n);
int rt_cpu_fused_batchnorm_relu_bwd(RtCpu *x, const IrNode *n);
int rt_cpu_fused_conv2d_bwd_data_relu(RtCpu *x, const IrNode *n);
int rt_cpu_fused_conv2d_bwd_data_bn_relu(RtCpu *x, const IrNode *n);
int rt_cpu_fused_maxpool_bn_relu(RtCpu *x, const IrNode *n);
int rt_cpu_fused_maxpool_bn_relu_infer(RtCpu *x, const IrNode *n);
int rt_cpu_fused_maxpool_bn_relu_bwd(RtCpu *x, const IrNode *n);
int rt_cpu_fused_maxpool_bwd_win(RtCpu *x, const IrNode *n);
int rt_cpu_fused_batchnorm_relu_bwd_win(RtCpu *x, const IrNode *n);
size_t rt_cpu_fused_pool_bn_scratch(const RtCpu *x, const IrNode *n);
int rt_cpu_fused_sum_relu_bwd(RtCpu *x, const IrNode *n);

/* rt_cpu_layout.c: relayout and cast */
int rt_cpu_relayout(RtCpu *x, const IrNode *n);
/* i8 quantization by step scale as the CPU keeps it: dst = scale *
 * clamp(rint(src / scale), -127, 127) (a NaN becomes -127); in place is fine. */
void rt_cpu_quantize(float scale, int64_t count, const float *src, float *dst);
int rt_cpu_cast(RtCpu *x, const IrNode *n);

#endif
