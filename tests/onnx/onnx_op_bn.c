/* onnx_op_bn.c - ONNX BatchNormalization on rt_ref_batchnorm_fwd_infer and
 * rt_ref_batchnorm_fwd_train.
 *
 * X [N, C, D1, ...] runs as [N, C, D1*..., 1].  Inference normalizes with
 * input_mean/input_var.  training_mode=1 (opset 14+) normalizes with the
 * batch statistics and outputs running_mean = momentum * input_mean +
 * (1 - momentum) * batch_mean, running_var likewise with the *biased*
 * batch variance.  rt_ref follows PyTorch: its momentum weighs the batch
 * statistic (so it gets 1 - momentum) and its running variance uses the
 * unbiased variance; the mapper undoes that factor M/(M-1), M = N*D1*...,
 * on the kernel's own running_var output.  The opset 9-13 outputs
 * saved_mean/saved_var are not mapped. */
#include <string.h>

#include "onnx_case.h"
#include "rt_ref.h"

OnnxRunStatus onnx_op_batchnorm(OnnxCase *c) {
  static const char *const KNOWN[] = {"epsilon", "momentum", "training_mode", NULL};
  if (onnx_case_unknown_attr(c, KNOWN)) return c->status;
  const OnnxTensor *in[5];
  for (int k = 0; k < 5; k++)
    if (!(in[k] = onnx_case_float_in(c, k))) return c->status;
  const OnnxTensor *x = in[0];
  if (x->ndim < 2) return onnx_case_error(c, "input rank %d < 2", x->ndim);
  float eps = onnx_attr_float(c->node, "epsilon", 1e-5f);
  float mom = onnx_attr_float(c->node, "momentum", 0.9f);
  int train = (int)onnx_attr_int(c->node, "training_mode", 0);
  if (c->nout > 3 || (c->nout > 1 && !train))
    return onnx_case_skip(c, "%d outputs without training_mode (opset < 14 saved_mean/var)", c->nout);

  RtRefAct xs = {(int)x->dims[0], (int)x->dims[1], (int)onnx_shape_count(x->dims, 2, x->ndim), 1, RT_REF_NCHW};
  int64_t C = x->dims[1];
  if (onnx_case_out_f(c, 0, x->ndim, x->dims)) return c->status;
  if (!train)
    return onnx_case_kernel(
        c, rt_ref_batchnorm_fwd_infer(&xs, x->f, in[1]->f, in[2]->f, in[3]->f, in[4]->f, eps, c->out[0].f),
        "rt_ref_batchnorm_fwd_infer");

  float *rmean = NULL, *rvar = NULL;
  if (c->nout == 3) {
    if (onnx_case_out_f(c, 1, 1, &C) || onnx_case_out_f(c, 2, 1, &C)) return c->status;
    rmean = c->out[1].f;
    rvar = c->out[2].f;
    memcpy(rmean, in[3]->f, (size_t)C * sizeof *rmean);
    memcpy(rvar, in[4]->f, (size_t)C * sizeof *rvar);
  }
  OnnxRunStatus st = onnx_case_kernel(
      c,
      rt_ref_batchnorm_fwd_train(&xs, x->f, in[1]->f, in[2]->f, c->out[0].f, rmean, rvar, 1.0f - mom, eps, NULL, NULL),
      "rt_ref_batchnorm_fwd_train");
  if (st != ONNX_RUN_OK || !rvar) return st;
  double M = (double)xs.N * xs.H * xs.W;
  for (int64_t k = 0; k < C; k++) {
    double kept = (double)mom * in[4]->f[k]; /* (1 - kernel momentum) * input_var */
    rvar[k] = (float)(kept + ((double)rvar[k] - kept) * (M - 1) / M);
  }
  return ONNX_RUN_OK;
}
