/* rt_cpu_fwd.c - the CPU executor's forward ops: each maps one IR node's
 * attributes and value types onto an rt_ref kernel.  Batchnorm here is the
 * inference form (running statistics); the training forms are in
 * rt_cpu_train.c. */
#include <string.h>

#include "rt_cpu_op.h"

size_t rt_cpu_fwd_conv2d_scratch(const RtCpu *x, const IrNode *n) {
  return rt_cpu_op_conv_scratch(x, rt_cpu_op_in_type(x, n, 0), rt_cpu_op_in_type(x, n, 1), rt_cpu_op_out_type(x, n, 0),
                                n);
}

int rt_cpu_fwd_conv2d(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0)), ys = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0));
  RtRefFilter wf = rt_cpu_op_filter(rt_cpu_op_in_type(x, n, 1));
  RtRefConvParam p = rt_cpu_op_conv_param(n);
  const float *bias = n->nin == 3 ? rt_cpu_op_in(x, n, 2) : NULL;
  return rt_cpu_op_check(x, n,
                         rt_ref_conv2d_fwd(&xs, rt_cpu_op_in(x, n, 0), &wf, rt_cpu_op_in(x, n, 1), bias, &p, &ys,
                                           rt_cpu_op_out(x, n, 0), x->scratch),
                         "rt_ref_conv2d_fwd");
}

/* Inputs: x, weight, bias, running_mean, running_var. */
int rt_cpu_fwd_batchnorm(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0));
  float eps = (float)ir_attr_float(n, "eps", 1e-5);
  return rt_cpu_op_check(
      x, n,
      rt_ref_batchnorm_fwd_infer(&xs, rt_cpu_op_in(x, n, 0), rt_cpu_op_in(x, n, 1), rt_cpu_op_in(x, n, 2),
                                 rt_cpu_op_in(x, n, 3), rt_cpu_op_in(x, n, 4), eps, rt_cpu_op_out(x, n, 0)),
      "rt_ref_batchnorm_fwd_infer");
}

int rt_cpu_fwd_relu(RtCpu *x, const IrNode *n) {
  return rt_cpu_op_check(x, n,
                         rt_ref_relu_fwd(rt_cpu_op_in_numel(x, n, 0), rt_cpu_op_in(x, n, 0), rt_cpu_op_out(x, n, 0)),
                         "rt_ref_relu_fwd");
}

int rt_cpu_fwd_add(RtCpu *x, const IrNode *n) {
  return rt_cpu_op_check(
      x, n,
      rt_ref_add_fwd(rt_cpu_op_in_numel(x, n, 0), rt_cpu_op_in(x, n, 0), rt_cpu_op_in(x, n, 1), rt_cpu_op_out(x, n, 0)),
      "rt_ref_add_fwd");
}

int rt_cpu_fwd_maxpool(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0)), ys = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0));
  RtRefPoolParam p = rt_cpu_op_pool_param(n);
  return rt_cpu_op_check(x, n, rt_ref_maxpool_fwd(&xs, rt_cpu_op_in(x, n, 0), &p, &ys, rt_cpu_op_out(x, n, 0), NULL),
                         "rt_ref_maxpool_fwd");
}

int rt_cpu_fwd_avgpool(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0)), ys = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0));
  RtRefPoolParam p = rt_cpu_op_pool_param(n);
  return rt_cpu_op_check(x, n, rt_ref_avgpool_fwd(&xs, rt_cpu_op_in(x, n, 0), &p, &ys, rt_cpu_op_out(x, n, 0)),
                         "rt_ref_avgpool_fwd");
}

/* The [N, C, 1, 1] / [N, 1, 1, C] output is laid out as rt_ref's [N, C]. */
int rt_cpu_fwd_global_avgpool(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0));
  return rt_cpu_op_check(x, n, rt_ref_global_avgpool_fwd(&xs, rt_cpu_op_in(x, n, 0), rt_cpu_op_out(x, n, 0)),
                         "rt_ref_global_avgpool_fwd");
}

/* flatten of NCHW (or NHWC with H = W = 1, the only kind the type rules
 * allow) and unflatten to NCHW keep the memory order: a copy. */
int rt_cpu_fwd_copy(RtCpu *x, const IrNode *n) {
  memcpy(rt_cpu_op_out(x, n, 0), rt_cpu_op_in(x, n, 0), (size_t)rt_cpu_op_in_numel(x, n, 0) * sizeof(float));
  return 0;
}

/* x [N, in], w [out, in], bias [out]. */
int rt_cpu_fwd_linear(RtCpu *x, const IrNode *n) {
  const IrType *wt = rt_cpu_op_in_type(x, n, 1);
  int M = (int)rt_cpu_op_dim(x, rt_cpu_op_in_type(x, n, 0), 0);
  const float *bias = n->nin == 3 ? rt_cpu_op_in(x, n, 2) : NULL;
  return rt_cpu_op_check(x, n,
                         rt_ref_linear_fwd(M, (int)wt->dim[1], (int)wt->dim[0], rt_cpu_op_in(x, n, 0),
                                           rt_cpu_op_in(x, n, 1), bias, rt_cpu_op_out(x, n, 0)),
                         "rt_ref_linear_fwd");
}

size_t rt_cpu_fwd_labels_scratch(const RtCpu *x, const IrNode *n) {
  return (size_t)x->numel[n->in[1]] * sizeof(int32_t);
}

int rt_cpu_fwd_labels(RtCpu *x, const IrNode *n, int i, int64_t classes, int32_t **out) {
  const int64_t *lab = rt_cpu_op_in_int(x, n, i);
  int64_t count = rt_cpu_op_in_numel(x, n, i);
  int32_t *l32 = x->scratch;
  for (int64_t k = 0; k < count; k++) {
    if (lab[k] < 0 || lab[k] >= classes)
      return rt_cpu_op_fail(x, n, "label %lld of sample %lld is outside [0, %lld)", (long long)lab[k], (long long)k,
                            (long long)classes);
    l32[k] = (int32_t)lab[k];
  }
  *out = l32;
  return 0;
}

/* logits [N, classes], labels [N] -> mean loss f32[]. */
int rt_cpu_fwd_softmax_ce(RtCpu *x, const IrNode *n) {
  const IrType *lt = rt_cpu_op_in_type(x, n, 0);
  int N = (int)rt_cpu_op_dim(x, lt, 0), classes = (int)lt->dim[1];
  int32_t *labels = NULL;
  if (rt_cpu_fwd_labels(x, n, 1, classes, &labels)) return -1;
  float eps = (float)ir_attr_float(n, "smoothing", 0);
  return rt_cpu_op_check(
      x, n, rt_ref_softmax_ce_fwd(N, classes, rt_cpu_op_in(x, n, 0), labels, eps, rt_cpu_op_out(x, n, 0), NULL),
      "rt_ref_softmax_ce_fwd");
}
