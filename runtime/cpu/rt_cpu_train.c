/* rt_cpu_train.c - the CPU executor's training forms, the ops the autodiff
 * pass emits: batchnorm with batch statistics, the backward of every forward
 * op, and the SGD update.  Each maps one node onto rt_ref kernels; backward
 * kernels overwrite their outputs, so gradient fan-in is the graph's own
 * add nodes.  In-place ops (batchnorm_train's running statistics,
 * sgd_update's weight and momentum buffer, loss_scale_update's scale and
 * good-step count) write their input buffers.  Dynamic loss scaling (the
 * precision pass) adds nonfinite_check, sgd_update's skip flag and
 * loss_scale_update, all here. */
#include <math.h>

#include "rt_cpu_op.h"

/* Inputs x, weight, bias, running_mean, running_var; outputs y, mean, invstd.
 * The running statistics are updated in place (unbiased running variance). */
int rt_cpu_train_batchnorm(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0));
  float eps = (float)ir_attr_float(n, "eps", 1e-5), mom = (float)ir_attr_float(n, "momentum", 0.1);
  if (!x->sync && (int64_t)xs.N * xs.H * xs.W < 2) /* synchronized: the ranks' total (rt_ref_bn.c) */
    return rt_cpu_op_fail(x, n, "batch statistics need more than one value per channel");
  return rt_cpu_op_check(
      x, n,
      rt_ref_batchnorm_fwd_train_sync(&xs, x->sync, rt_cpu_op_in(x, n, 0), rt_cpu_op_in(x, n, 1), rt_cpu_op_in(x, n, 2),
                                      rt_cpu_op_out(x, n, 0), rt_cpu_op_in(x, n, 3), rt_cpu_op_in(x, n, 4), mom, eps,
                                      rt_cpu_op_out(x, n, 1), rt_cpu_op_out(x, n, 2)),
      "rt_ref_batchnorm_fwd_train");
}

/* (dy, w) -> dx, whose size is the output type (from attribute in_hw). */
size_t rt_cpu_train_conv2d_bwd_data_scratch(const RtCpu *x, const IrNode *n) {
  return rt_cpu_op_conv_scratch(x, rt_cpu_op_out_type(x, n, 0), rt_cpu_op_in_type(x, n, 1), rt_cpu_op_in_type(x, n, 0),
                                n);
}

int rt_cpu_train_conv2d_bwd_data(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0)), ys = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0));
  RtRefFilter wf = rt_cpu_op_filter(rt_cpu_op_in_type(x, n, 1));
  RtRefConvParam p = rt_cpu_op_conv_param(n);
  return rt_cpu_op_check(x, n,
                         rt_ref_conv2d_bwd_data(&xs, rt_cpu_op_out(x, n, 0), &wf, rt_cpu_op_in(x, n, 1), &p, &ys,
                                                rt_cpu_op_in(x, n, 0), x->scratch),
                         "rt_ref_conv2d_bwd_data");
}

/* (dy, x[, sbx]) -> dw of conv(P(x), w), in the filter layout matching x's
 * (KCRS for NCHW); P(x) is materialized in the scratch before the column buffer. */
size_t rt_cpu_train_conv2d_bwd_weight_scratch(const RtCpu *x, const IrNode *n) {
  return rt_cpu_op_prologue_scratch(x, n, 1,
                                    rt_cpu_op_conv_scratch(x, rt_cpu_op_in_type(x, n, 1), rt_cpu_op_out_type(x, n, 0),
                                                           rt_cpu_op_in_type(x, n, 0), n));
}

int rt_cpu_train_conv2d_bwd_weight(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 1)), ys = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0));
  RtRefFilter wf = rt_cpu_op_filter(rt_cpu_op_out_type(x, n, 0));
  RtRefConvParam p = rt_cpu_op_conv_param(n);
  const float *in;
  void *work;
  if (rt_cpu_op_prologue(x, n, 1, &in, &work)) return -1;
  return rt_cpu_op_check(
      x, n, rt_ref_conv2d_bwd_weight(&xs, in, &wf, rt_cpu_op_out(x, n, 0), NULL, &p, &ys, rt_cpu_op_in(x, n, 0), work),
      "rt_ref_conv2d_bwd_weight");
}

/* dy (image or [N, C]) -> f32[C]: the sum over everything but the channel
 * (a bias gradient), accumulated in double. */
int rt_cpu_train_channel_sum(RtCpu *x, const IrNode *n) {
  RtRefAct a = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0));
  const float *dy = rt_cpu_op_in(x, n, 0);
  float *out = rt_cpu_op_out(x, n, 0);
  int64_t HW = (int64_t)a.H * a.W;
  for (int c = 0; c < a.C; c++) {
    double s = 0;
    for (int64_t i = 0; i < a.N; i++)
      for (int64_t j = 0; j < HW; j++)
        s += a.layout == RT_REF_NHWC ? dy[(i * HW + j) * a.C + c] : dy[(i * a.C + c) * HW + j];
    out[c] = (float)s;
  }
  return 0;
}

/* (dy, x, weight, mean, invstd) -> dx, dweight, dbias. */
int rt_cpu_train_batchnorm_bwd(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 1));
  return rt_cpu_op_check(
      x, n,
      rt_ref_batchnorm_bwd_sync(&xs, x->sync, rt_cpu_op_in(x, n, 1), rt_cpu_op_in(x, n, 0), rt_cpu_op_in(x, n, 2),
                                rt_cpu_op_in(x, n, 3), rt_cpu_op_in(x, n, 4), rt_cpu_op_out(x, n, 0),
                                rt_cpu_op_out(x, n, 1), rt_cpu_op_out(x, n, 2)),
      "rt_ref_batchnorm_bwd");
}

/* (dy, y) -> dy * (y > 0) */
int rt_cpu_train_relu_bwd(RtCpu *x, const IrNode *n) {
  return rt_cpu_op_check(x, n,
                         rt_ref_relu_bwd(rt_cpu_op_in_numel(x, n, 0), rt_cpu_op_in(x, n, 1), rt_cpu_op_in(x, n, 0),
                                         rt_cpu_op_out(x, n, 0)),
                         "rt_ref_relu_bwd");
}

/* (dy, x) -> dx, the winner recomputed from x. */
int rt_cpu_train_maxpool_bwd(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 1)), ys = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0));
  RtRefPoolParam p = rt_cpu_op_pool_param(n);
  return rt_cpu_op_check(
      x, n,
      rt_ref_maxpool_bwd(&xs, rt_cpu_op_in(x, n, 1), NULL, &p, &ys, rt_cpu_op_in(x, n, 0), rt_cpu_op_out(x, n, 0)),
      "rt_ref_maxpool_bwd");
}

/* dy -> dx of spatial size in_hw (the output type). */
int rt_cpu_train_avgpool_bwd(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0)), ys = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0));
  RtRefPoolParam p = rt_cpu_op_pool_param(n);
  return rt_cpu_op_check(x, n, rt_ref_avgpool_bwd(&xs, rt_cpu_op_out(x, n, 0), &p, &ys, rt_cpu_op_in(x, n, 0)),
                         "rt_ref_avgpool_bwd");
}

int rt_cpu_train_global_avgpool_bwd(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0));
  return rt_cpu_op_check(x, n, rt_ref_global_avgpool_bwd(&xs, rt_cpu_op_out(x, n, 0), rt_cpu_op_in(x, n, 0)),
                         "rt_ref_global_avgpool_bwd");
}

/* (dy [N, out], w [out, in]) -> dx = dy w  [N, in] */
int rt_cpu_train_linear_bwd_data(RtCpu *x, const IrNode *n) {
  const IrType *wt = rt_cpu_op_in_type(x, n, 1);
  int M = (int)rt_cpu_op_dim(x, rt_cpu_op_in_type(x, n, 0), 0);
  return rt_cpu_op_check(x, n,
                         rt_ref_linear_bwd(M, (int)wt->dim[1], (int)wt->dim[0], NULL, rt_cpu_op_in(x, n, 1),
                                           rt_cpu_op_in(x, n, 0), rt_cpu_op_out(x, n, 0), NULL, NULL),
                         "rt_ref_linear_bwd");
}

/* (dy [N, out], x [N, in]) -> dw = dy^T x  [out, in] */
int rt_cpu_train_linear_bwd_weight(RtCpu *x, const IrNode *n) {
  const IrType *dyt = rt_cpu_op_in_type(x, n, 0), *xt = rt_cpu_op_in_type(x, n, 1);
  int M = (int)rt_cpu_op_dim(x, dyt, 0);
  return rt_cpu_op_check(x, n,
                         rt_ref_linear_bwd(M, (int)xt->dim[1], (int)dyt->dim[1], rt_cpu_op_in(x, n, 1), NULL,
                                           rt_cpu_op_in(x, n, 0), NULL, rt_cpu_op_out(x, n, 0), NULL),
                         "rt_ref_linear_bwd");
}

/* (logits, labels, loss_scale f32[]) -> loss_scale * d(mean loss)/d logits */
int rt_cpu_train_softmax_ce_bwd(RtCpu *x, const IrNode *n) {
  const IrType *lt = rt_cpu_op_in_type(x, n, 0);
  int N = (int)rt_cpu_op_dim(x, lt, 0), classes = (int)lt->dim[1];
  int32_t *labels = NULL;
  if (rt_cpu_fwd_labels(x, n, 1, classes, &labels)) return -1;
  float eps = (float)ir_attr_float(n, "smoothing", 0), scale = rt_cpu_op_in(x, n, 2)[0];
  return rt_cpu_op_check(
      x, n, rt_ref_softmax_ce_bwd(N, classes, rt_cpu_op_in(x, n, 0), NULL, labels, eps, scale, rt_cpu_op_out(x, n, 0)),
      "rt_ref_softmax_ce_bwd");
}

size_t rt_cpu_train_sgd_scratch(const RtCpu *x, const IrNode *n) { return (size_t)x->numel[n->in[1]] * sizeof(float); }

/* (w, g, buf, lr f32[], loss_scale f32[] [, skip f32[]]): g / loss_scale,
 * then PyTorch's SGD on w and buf in place; nothing at all when skip is
 * nonzero (an overflow seen by nonfinite_check).  buf starts at zero, so
 * momentum * buf + d on the first step is PyTorch's seeding of buf with d. */
int rt_cpu_train_sgd_update(RtCpu *x, const IrNode *n) {
  if (n->nin > 5 && rt_cpu_op_in(x, n, 5)[0] != 0) return 0;
  int64_t count = rt_cpu_op_in_numel(x, n, 0);
  const float *g = rt_cpu_op_in(x, n, 1);
  float lr = rt_cpu_op_in(x, n, 3)[0], scale = rt_cpu_op_in(x, n, 4)[0];
  if (!(scale > 0) || isinf(scale)) return rt_cpu_op_fail(x, n, "loss scale %g is not a positive number", scale);
  float *gs = x->scratch;
  for (int64_t i = 0; i < count; i++) gs[i] = g[i] / scale;
  RtRefSgd o = {.lr = lr,
                .momentum = (float)ir_attr_float(n, "momentum", 0),
                .weight_decay = (float)ir_attr_float(n, "weight_decay", 0),
                .nesterov = ir_attr_int(n, "nesterov", 0) != 0};
  return rt_cpu_op_check(x, n, rt_ref_sgd_update(count, rt_cpu_op_in(x, n, 0), gs, rt_cpu_op_in(x, n, 2), &o, 0),
                         "rt_ref_sgd_update");
}

/* (tensors...) -> f32[] 1 when any element of any input is inf or nan, else 0.
 * f16/bf16 values are held as floats, so an overflow shows as inf here too. */
int rt_cpu_train_nonfinite_check(RtCpu *x, const IrNode *n) {
  float found = 0;
  for (int i = 0; i < n->nin && !found; i++) {
    const float *v = rt_cpu_op_in(x, n, i);
    int64_t count = rt_cpu_op_in_numel(x, n, i);
    for (int64_t k = 0; k < count && !found; k++) found = isfinite(v[k]) ? 0.0f : 1.0f;
  }
  rt_cpu_op_out(x, n, 0)[0] = found;
  return 0;
}

/* (flag, @scale, @good_steps) in place, as PyTorch's GradScaler.update():
 * flag nonzero: scale *= backoff, good_steps = 0; else good_steps += 1, and
 * at growth_interval scale *= growth (kept when that is not finite in f32)
 * and good_steps = 0. */
int rt_cpu_train_loss_scale_update(RtCpu *x, const IrNode *n) {
  float flag = rt_cpu_op_in(x, n, 0)[0], *scale = rt_cpu_op_in(x, n, 1), *steps = rt_cpu_op_in(x, n, 2);
  float backoff = (float)ir_attr_float(n, "backoff", 0.5), growth = (float)ir_attr_float(n, "growth", 2.0);
  float every = (float)ir_attr_int(n, "growth_interval", 2000);
  if (flag != 0) {
    *scale *= backoff;
    *steps = 0;
    return 0;
  }
  *steps += 1;
  if (*steps >= every) {
    float grown = *scale * growth;
    if (isfinite(grown)) *scale = grown;
    *steps = 0;
  }
  return 0;
}
