/* rt_cpu_fused.c - the executor's fused ops (made by the fuse pass), each the
 * composition of the rt_ref kernels its unfused nodes would run, in the same
 * order, so a graph computes the same numbers with and without fusion.
 *
 * The intermediate that fusion removes from the graph lives in the fused
 * node's own output buffer: conv2d_bn's convolution is written to y and
 * normalized there, batchnorm_relu_bwd masks dy into dz and differentiates
 * in place, conv2d_bwd_data_relu masks dx in place.  This is safe because
 * the batch-norm affine, its backward's final pass and relu_bwd each write
 * element i from element i of their inputs only (rt_ref_bn.c,
 * rt_ref_eltwise.c), after any reductions over those inputs.  Nothing is
 * allocated here; the convolutions use the executor's scratch, which also
 * holds a prologue's P(x) (rt_cpu_op_prologue) when the node has one. */
#include "rt_cpu_op.h"

size_t rt_cpu_fused_conv_scratch(const RtCpu *x, const IrNode *n) {
  return rt_cpu_op_prologue_scratch(x, n, 0, rt_cpu_fwd_conv2d_scratch(x, n));
}

/* z = conv(P(x), w): the prologue (if any) applied first, then padding. */
static int conv_into(RtCpu *x, const IrNode *n, float *z) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0)), zs = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0));
  RtRefFilter wf = rt_cpu_op_filter(rt_cpu_op_in_type(x, n, 1));
  RtRefConvParam p = rt_cpu_op_conv_param(n);
  const float *in;
  void *work;
  if (rt_cpu_op_prologue(x, n, 0, &in, &work)) return -1;
  return rt_cpu_op_check(x, n, rt_ref_conv2d_fwd(&xs, in, &wf, rt_cpu_op_in(x, n, 1), NULL, &p, &zs, z, work),
                         "rt_ref_conv2d_fwd");
}

/* Result k rounded to its dtype, as a stored value is. */
static int round_out(RtCpu *x, const IrNode *n, int k) {
  float *z = rt_cpu_op_out(x, n, k);
  return rt_cpu_op_round(x, n, rt_cpu_op_out_type(x, n, k)->dtype, x->numel[n->out[k]], z, z);
}

/* Result k: the residual (ir_conv_residual, when the node has one) added,
 * then relu when relu=1.  The batch norm's output is rounded to the result's
 * dtype before the sum, as the unfused batch norm stores it. */
static int relu_if(RtCpu *x, const IrNode *n, int k) {
  float *y = rt_cpu_op_out(x, n, k);
  int64_t count = x->numel[n->out[k]];
  int r = ir_conv_residual(x->g, n);
  if (r >= 0 && (round_out(x, n, k) ||
                 rt_cpu_op_check(x, n, rt_ref_add_fwd(count, y, rt_cpu_op_in(x, n, r), y), "rt_ref_add_fwd")))
    return -1;
  if (ir_attr_int(n, "relu", 0) == 0) return 0;
  return rt_cpu_op_check(x, n, rt_ref_relu_fwd(count, y, y), "rt_ref_relu_fwd");
}

/* The convolution of a training conv + batch norm into z (result 0),
 * rounded: z is a result of its own, so the statistics are taken from z as
 * its dtype keeps it, as they are from an unfused conv2d's rounded output.
 * *zs, *eps and *mom for the batch norm that follows. */
static int conv_z(RtCpu *x, const IrNode *n, RtRefAct *zs, float *eps, float *mom) {
  *zs = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0));
  *eps = (float)ir_attr_float(n, "eps", 1e-5), *mom = (float)ir_attr_float(n, "momentum", 0.1);
  if (!x->sync && (int64_t)zs->N * zs->H * zs->W < 2) /* synchronized: the ranks' total (rt_ref_bn.c) */
    return rt_cpu_op_fail(x, n, "batch statistics need more than one value per channel");
  return conv_into(x, n, rt_cpu_op_out(x, n, 0)) || round_out(x, n, 0) ? -1 : 0;
}

/* An f32 z with a narrower y (y_dtype): y normalizes z rounded to y's
 * dtype, the z the backward pass reads (pass precision stores it so), with
 * the statistics of the f32 z; so the relu's mask that the backward
 * recomputes from that z is the forward's, element for element. */
static int narrow_y(RtCpu *x, const IrNode *n) {
  IrDtype zt = rt_cpu_op_out_type(x, n, 0)->dtype, yt = rt_cpu_op_out_type(x, n, 1)->dtype;
  if (zt == yt || zt != IR_DT_F32) return 0;
  RtRefAct ys = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 1));
  float *y = rt_cpu_op_out(x, n, 1);
  if (rt_cpu_op_round(x, n, yt, x->numel[n->out[1]], rt_cpu_op_out(x, n, 0), y)) return -1;
  return rt_cpu_op_check(x, n,
                         rt_ref_bn_normalize(&ys, y, rt_cpu_op_in(x, n, 2), rt_cpu_op_in(x, n, 3),
                                             rt_cpu_op_out(x, n, 2), rt_cpu_op_out(x, n, 3), y),
                         "rt_ref_bn_normalize");
}

/* (x, w, gamma, beta, running_mean, running_var[, sbx][, r]) -> z = conv(P(x), w),
 * y = [relu] (batchnorm_train(z) [+ r]), batch mean, invstd; running
 * statistics updated in place. */
int rt_cpu_fused_conv2d_bn_train(RtCpu *x, const IrNode *n) {
  RtRefAct zs;
  float eps, mom;
  if (conv_z(x, n, &zs, &eps, &mom)) return -1;
  if (rt_cpu_op_check(x, n,
                      rt_ref_batchnorm_fwd_train_sync(&zs, x->sync, rt_cpu_op_out(x, n, 0), rt_cpu_op_in(x, n, 2),
                                                      rt_cpu_op_in(x, n, 3), rt_cpu_op_out(x, n, 1),
                                                      rt_cpu_op_in(x, n, 4), rt_cpu_op_in(x, n, 5), mom, eps,
                                                      rt_cpu_op_out(x, n, 2), rt_cpu_op_out(x, n, 3)),
                      "rt_ref_batchnorm_fwd_train"))
    return -1;
  if (narrow_y(x, n)) return -1;
  return relu_if(x, n, 1);
}

/* (x, w, gamma, beta, running_mean, running_var[, sbx]) -> z = conv(P(x), w),
 * batch mean, invstd (running statistics updated in place, the same numbers
 * as conv2d_bn_train's) and sb = [gamma * invstd; beta - mean * scale]
 * rounded to its dtype [, zc = z rounded to zc's dtype, as the cast that
 * pass prologue folded into the node (rt_cpu_cast) rounds it]. */
int rt_cpu_fused_conv2d_bn_stats(RtCpu *x, const IrNode *n) {
  RtRefAct zs;
  float eps, mom;
  if (conv_z(x, n, &zs, &eps, &mom)) return -1;
  if (rt_cpu_op_check(
          x, n,
          rt_ref_batchnorm_stats_sync(&zs, x->sync, rt_cpu_op_out(x, n, 0), rt_cpu_op_in(x, n, 4),
                                      rt_cpu_op_in(x, n, 5), mom, eps, rt_cpu_op_out(x, n, 1), rt_cpu_op_out(x, n, 2)),
          "rt_ref_batchnorm_stats") ||
      rt_cpu_op_check(x, n,
                      rt_ref_bn_scale_bias(zs.C, rt_cpu_op_in(x, n, 2), rt_cpu_op_in(x, n, 3), rt_cpu_op_out(x, n, 1),
                                           rt_cpu_op_out(x, n, 2), rt_cpu_op_out(x, n, 3)),
                      "rt_ref_bn_scale_bias"))
    return -1;
  if (round_out(x, n, 3)) return -1;
  if (n->nout < 5) return 0;
  return rt_cpu_op_round(x, n, rt_cpu_op_out_type(x, n, 4)->dtype, x->numel[n->out[4]], rt_cpu_op_out(x, n, 0),
                         rt_cpu_op_out(x, n, 4));
}

/* Inference: the convolution, then the running-statistics batch norm
 * applied in place (the same arithmetic as folding it into w and a bias,
 * without a per-run copy of the filter), then relu. */
int rt_cpu_fused_conv2d_bn(RtCpu *x, const IrNode *n) {
  RtRefAct ys = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0));
  float *y = rt_cpu_op_out(x, n, 0);
  float eps = (float)ir_attr_float(n, "eps", 1e-5);
  if (conv_into(x, n, y)) return -1;
  if (rt_cpu_op_check(x, n,
                      rt_ref_batchnorm_fwd_infer(&ys, y, rt_cpu_op_in(x, n, 2), rt_cpu_op_in(x, n, 3),
                                                 rt_cpu_op_in(x, n, 4), rt_cpu_op_in(x, n, 5), eps, y),
                      "rt_ref_batchnorm_fwd_infer"))
    return -1;
  return relu_if(x, n, 0);
}

int rt_cpu_fused_add_relu(RtCpu *x, const IrNode *n) {
  return rt_cpu_op_check(x, n,
                         rt_ref_add_relu_fwd(rt_cpu_op_in_numel(x, n, 0), rt_cpu_op_in(x, n, 0), rt_cpu_op_in(x, n, 1),
                                             rt_cpu_op_out(x, n, 0)),
                         "rt_ref_add_relu_fwd");
}

/* (a, b, y) -> relu_bwd(a + b, y), in place in the output (the sum is
 * rounded once, with the output, as add then relu_bwd round it). */
int rt_cpu_fused_sum_relu_bwd(RtCpu *x, const IrNode *n) {
  int64_t count = rt_cpu_op_in_numel(x, n, 0);
  float *dx = rt_cpu_op_out(x, n, 0);
  if (rt_cpu_op_check(x, n, rt_ref_add_fwd(count, rt_cpu_op_in(x, n, 0), rt_cpu_op_in(x, n, 1), dx), "rt_ref_add_fwd"))
    return -1;
  return rt_cpu_op_check(x, n, rt_ref_relu_bwd(count, rt_cpu_op_in(x, n, 2), dx, dx), "rt_ref_relu_bwd");
}

/* The batch norm + relu backward of gradient dy (may be dz) into dz:
 * inputs beta, z, gamma, mean, invstd from index `at`, dgamma and dbeta
 * results 1 and 2. */
static int bn_relu_bwd(RtCpu *x, const IrNode *n, int at, const float *dy, float *dz) {
  RtRefAct zs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, at + 1));
  const float *beta = rt_cpu_op_in(x, n, at), *z = rt_cpu_op_in(x, n, at + 1), *gamma = rt_cpu_op_in(x, n, at + 2),
              *mean = rt_cpu_op_in(x, n, at + 3), *invstd = rt_cpu_op_in(x, n, at + 4);
  if (rt_cpu_op_check(x, n, rt_ref_bn_relu_mask(&zs, z, dy, gamma, beta, mean, invstd, dz), "rt_ref_bn_relu_mask"))
    return -1;
  return rt_cpu_op_check(x, n,
                         rt_ref_batchnorm_bwd_sync(&zs, x->sync, z, dz, gamma, mean, invstd, dz, rt_cpu_op_out(x, n, 1),
                                                   rt_cpu_op_out(x, n, 2)),
                         "rt_ref_batchnorm_bwd");
}

/* (dy, beta, z, gamma, mean, invstd) -> dz, dgamma, dbeta of
 * batchnorm_bwd(relu_bwd(dy, relu(batchnorm(z))), z, gamma, mean, invstd),
 * the mask recomputed from z (rt_ref_bn_relu_mask). */
int rt_cpu_fused_batchnorm_relu_bwd(RtCpu *x, const IrNode *n) {
  return bn_relu_bwd(x, n, 1, rt_cpu_op_in(x, n, 0), rt_cpu_op_out(x, n, 0));
}

/* Scratch of maxpool_bn_relu[_bwd], maxpool_bwd_win and
 * batchnorm_relu_bwd_win: y, one float per element of z (not for the
 * winners' readers), then (not for maxpool_bn_relu_bwd) the winners'
 * argmax, one int32 per pooled element. */
size_t rt_cpu_fused_pool_bn_scratch(const RtCpu *x, const IrNode *n) {
  if (n->op == IR_OP_MAXPOOL_BWD_WIN || n->op == IR_OP_BATCHNORM_RELU_BWD_WIN)
    return (size_t)x->numel[n->in[0]] * sizeof(int32_t);
  if (n->op == IR_OP_MAXPOOL_BN_RELU_BWD) return (size_t)x->numel[n->in[1]] * sizeof(float);
  return (size_t)x->numel[n->in[0]] * sizeof(float) + (size_t)x->numel[n->out[0]] * sizeof(int32_t);
}

/* y = relu(batchnorm(z)) into scratch from inputs z, beta, gamma, mean,
 * invstd at `at`.. by the batch-norm forward's own expression
 * (rt_ref_bn_normalize, as rt_ref_batchnorm_fwd_train), rounded to dt as
 * the forward stores it: the same values, so the same maxima. */
static float *pool_bn_y(RtCpu *x, const IrNode *n, int at, IrDtype dt) {
  RtRefAct zs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, at));
  int64_t count = x->numel[n->in[at]];
  float *y = x->scratch;
  if (rt_cpu_op_check(
          x, n,
          rt_ref_bn_normalize(&zs, rt_cpu_op_in(x, n, at), rt_cpu_op_in(x, n, at + 2), rt_cpu_op_in(x, n, at + 1),
                              rt_cpu_op_in(x, n, at + 3), rt_cpu_op_in(x, n, at + 4), y),
          "rt_ref_bn_normalize") ||
      rt_cpu_op_check(x, n, rt_ref_relu_fwd(count, y, y), "rt_ref_relu_fwd") || rt_cpu_op_round(x, n, dt, count, y, y))
    return NULL;
  return y;
}

/* (z, beta, gamma, mean, invstd) -> maxpool(y), win: y recomputed
 * (pool_bn_y) in the output's dtype; win each window's winner r*S + s. */
int rt_cpu_fused_maxpool_bn_relu(RtCpu *x, const IrNode *n) {
  RtRefAct zs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0)), ys = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0));
  RtRefPoolParam p = rt_cpu_op_pool_param(n);
  const float *y = pool_bn_y(x, n, 0, rt_cpu_op_out_type(x, n, 0)->dtype);
  if (!y) return -1;
  int32_t *argmax = (int32_t *)((float *)x->scratch + x->numel[n->in[0]]);
  return rt_cpu_op_check(x, n, rt_ref_maxpool_fwd(&zs, y, &p, &ys, rt_cpu_op_out(x, n, 0), argmax),
                         "rt_ref_maxpool_fwd") ||
         rt_cpu_op_check(x, n, rt_ref_maxpool_win_of(&zs, &p, &ys, argmax, rt_cpu_op_out(x, n, 1)),
                         "rt_ref_maxpool_win_of");
}

/* Inference: (z, gamma, beta, running_mean, running_var) -> maxpool(y),
 * y = relu(batchnorm(z)) by the running statistics (conv2d_bn's arithmetic)
 * in scratch, rounded to z's dtype as conv2d_bn stores it; the maxima
 * then rounded to the result's dtype by the executor (rt_cpu.c; i8:
 * quantized by y_scale), as the cast folded into the node rounded them. */
int rt_cpu_fused_maxpool_bn_relu_infer(RtCpu *x, const IrNode *n) {
  RtRefAct zs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0)), ys = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0));
  RtRefPoolParam p = rt_cpu_op_pool_param(n);
  int64_t count = x->numel[n->in[0]];
  float *y = x->scratch, *out = rt_cpu_op_out(x, n, 0);
  int32_t *argmax = (int32_t *)(y + count);
  float eps = (float)ir_attr_float(n, "eps", 1e-5);
  if (rt_cpu_op_check(
          x, n,
          rt_ref_batchnorm_fwd_infer(&zs, rt_cpu_op_in(x, n, 0), rt_cpu_op_in(x, n, 1), rt_cpu_op_in(x, n, 2),
                                     rt_cpu_op_in(x, n, 3), rt_cpu_op_in(x, n, 4), eps, y),
          "rt_ref_batchnorm_fwd_infer") ||
      rt_cpu_op_check(x, n, rt_ref_relu_fwd(count, y, y), "rt_ref_relu_fwd") ||
      rt_cpu_op_round(x, n, rt_cpu_op_in_type(x, n, 0)->dtype, count, y, y) ||
      rt_cpu_op_check(x, n, rt_ref_maxpool_fwd(&zs, y, &p, &ys, out, argmax), "rt_ref_maxpool_fwd"))
    return -1;
  return 0; /* the executor rounds the result to its dtype (i8: by y_scale), as the cast did */
}

/* Inputs dy, win (0, 1) of a winners' reader: dy added into each window's
 * winner, into dx (output 0's size); the argmax in scratch. */
static int win_gather(RtCpu *x, const IrNode *n, float *dx) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0)), ys = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0));
  RtRefPoolParam p = rt_cpu_op_pool_param(n);
  int32_t *argmax = (int32_t *)x->scratch;
  return rt_cpu_op_check(x, n, rt_ref_maxpool_argmax_of(&xs, &p, &ys, rt_cpu_op_in(x, n, 1), argmax),
                         "rt_ref_maxpool_argmax_of") ||
         rt_cpu_op_check(x, n, rt_ref_maxpool_bwd(&xs, NULL, argmax, &p, &ys, rt_cpu_op_in(x, n, 0), dx),
                         "rt_ref_maxpool_bwd");
}

/* (dy, win) -> dx: dy added into each window's winner. */
int rt_cpu_fused_maxpool_bwd_win(RtCpu *x, const IrNode *n) { return win_gather(x, n, rt_cpu_op_out(x, n, 0)); }

/* (dy, win, beta, z, gamma, mean, invstd) -> batchnorm_relu_bwd of
 * maxpool_bwd_win(dy, win): the gathered gradient rounded to dy's dtype (as
 * maxpool_bwd_win stores it) in dz, then the batch norm's backward of it in
 * place. */
int rt_cpu_fused_batchnorm_relu_bwd_win(RtCpu *x, const IrNode *n) {
  float *dz = rt_cpu_op_out(x, n, 0);
  if (win_gather(x, n, dz) || rt_cpu_op_round(x, n, rt_cpu_op_in_type(x, n, 0)->dtype, x->numel[n->out[0]], dz, dz))
    return -1;
  return bn_relu_bwd(x, n, 2, dz, dz);
}

/* (dy, z, beta, gamma, mean, invstd) -> maxpool_bwd(dy, y), y recomputed
 * (pool_bn_y) in dy's dtype, as the forward stored it. */
int rt_cpu_fused_maxpool_bn_relu_bwd(RtCpu *x, const IrNode *n) {
  RtRefAct zs = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 1)), ys = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0));
  RtRefPoolParam p = rt_cpu_op_pool_param(n);
  const float *y = pool_bn_y(x, n, 1, rt_cpu_op_in_type(x, n, 0)->dtype);
  if (!y) return -1;
  return rt_cpu_op_check(x, n, rt_ref_maxpool_bwd(&zs, y, NULL, &p, &ys, rt_cpu_op_in(x, n, 0), rt_cpu_op_out(x, n, 0)),
                         "rt_ref_maxpool_bwd");
}

/* (dy, w, beta, z, gamma, mean, invstd) -> dz, dgamma, dbeta: the data
 * gradient rounded to dz's dtype (as the unfused one is stored), then
 * batchnorm_relu_bwd of it in place. */
int rt_cpu_fused_conv2d_bwd_data_bn_relu(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0)), ys = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0));
  RtRefFilter wf = rt_cpu_op_filter(rt_cpu_op_in_type(x, n, 1));
  RtRefConvParam p = rt_cpu_op_conv_param(n);
  float *dz = rt_cpu_op_out(x, n, 0);
  if (rt_cpu_op_check(
          x, n, rt_ref_conv2d_bwd_data(&xs, dz, &wf, rt_cpu_op_in(x, n, 1), &p, &ys, rt_cpu_op_in(x, n, 0), x->scratch),
          "rt_ref_conv2d_bwd_data") ||
      round_out(x, n, 0))
    return -1;
  return bn_relu_bwd(x, n, 2, dz, dz);
}

/* (dy, w, y [, g]) -> relu_bwd(conv2d_bwd_data(dy, w) [+ g], y); dx's size
 * is the output type.  As in a fused epilogue, the data gradient is summed
 * and masked before it is rounded, with the result. */
int rt_cpu_fused_conv2d_bwd_data_relu(RtCpu *x, const IrNode *n) {
  RtRefAct xs = rt_cpu_op_act(x, rt_cpu_op_out_type(x, n, 0)), ys = rt_cpu_op_act(x, rt_cpu_op_in_type(x, n, 0));
  RtRefFilter wf = rt_cpu_op_filter(rt_cpu_op_in_type(x, n, 1));
  RtRefConvParam p = rt_cpu_op_conv_param(n);
  float *dx = rt_cpu_op_out(x, n, 0);
  int64_t count = x->numel[n->out[0]];
  int g = ir_conv_residual(x->g, n);
  if (rt_cpu_op_check(
          x, n, rt_ref_conv2d_bwd_data(&xs, dx, &wf, rt_cpu_op_in(x, n, 1), &p, &ys, rt_cpu_op_in(x, n, 0), x->scratch),
          "rt_ref_conv2d_bwd_data") ||
      (g >= 0 && rt_cpu_op_check(x, n, rt_ref_add_fwd(count, dx, rt_cpu_op_in(x, n, g), dx), "rt_ref_add_fwd")))
    return -1;
  return rt_cpu_op_check(x, n, rt_ref_relu_bwd(count, rt_cpu_op_in(x, n, 2), dx, dx), "rt_ref_relu_bwd");
}
