/* rt_cudnn_graph.c - the operation graph of a convolution description
 * (rt_cudnn.c's opening has the uids and shapes): its tensors, the
 * convolution descriptor and its forward, data-gradient or filter-gradient
 * operation, and as the description asks the GenStats statistics, the
 * prologue's and the epilogue's pointwise operations, or dbn's batch-norm
 * backward (DgradDreluBNBwdWeight), all finalized into one graph. */
#include "rt_cudnn_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A dense tensor with logical dims {N, C, H, W} (filters {K, C/g, R, S})
 * laid out channels-last. */
static RtCudaStatus make_tensor_as(RtCudnn *h, cudnnBackendDescriptor_t *t, int64_t uid, IrDtype dtype, int virt,
                                   int64_t d0, int64_t d1, int64_t d2, int64_t d3, const char *what, char *err,
                                   size_t errlen) {
  int64_t dims[4] = {d0, d1, d2, d3};
  bool is_virtual = virt != 0;
  int64_t strides[4] = {d1 * d2 * d3, 1, d3 * d1, d1};
  int64_t align = 16;
  cudnnDataType_t dt = dtype == IR_DT_F32      ? CUDNN_DATA_FLOAT
                       : dtype == IR_DT_F16    ? CUDNN_DATA_HALF
                       : dtype == IR_DT_I8     ? CUDNN_DATA_INT8
                       : dtype == IR_DT_F8E4M3 ? CUDNN_DATA_FP8_E4M3
                       : dtype == IR_DT_F8E5M2 ? CUDNN_DATA_FP8_E5M2
                       : dtype == IR_DT_I32    ? CUDNN_DATA_INT32
                                               : CUDNN_DATA_BFLOAT16;
  RtCudaStatus s;
  if ((s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_TENSOR_DESCRIPTOR, t), what)) ||
      (s = SET(h, *t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, what)) ||
      (s = SET(h, *t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, what)) ||
      (s = SET(h, *t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, what)) ||
      (s = SET(h, *t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what)) ||
      (s = SET(h, *t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, what)) ||
      (virt && (s = SET(h, *t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, what))) ||
      (s = DNN(h, BackendFinalize, (*t), what)))
    return s;
  return RT_CUDA_OK;
}

static RtCudaStatus make_tensor(RtCudnn *h, cudnnBackendDescriptor_t *t, int64_t uid, IrDtype dtype, int64_t d0,
                                int64_t d1, int64_t d2, int64_t d3, const char *what, char *err, size_t errlen) {
  return make_tensor_as(h, t, uid, dtype, 0, d0, d1, d2, d3, what, err, errlen);
}

static RtCudaStatus make_conv(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  int64_t dims = 2;
  int64_t dil[2] = {d->dilation[0], d->dilation[1]};
  int64_t str[2] = {d->stride[0], d->stride[1]};
  int64_t pad[2] = {d->pad[0], d->pad[1]};
  /* i8 by i8 accumulates in i32 (cuDNN's int8 convolutions) */
  cudnnDataType_t comp = d->dtype == IR_DT_I8 ? CUDNN_DATA_INT32 : CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  RtCudaStatus s;
  if ((s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &p->conv), p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims, p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil, p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str, p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad, p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad, p->what)) ||
      (s = DNN(h, BackendFinalize, (p->conv), p->what)))
    return s;
  return RT_CUDA_OK;
}

/* The operation's descriptor type and attribute names per kind; x, w, y
 * name the attribute that takes the forward role's tensor (dx, dw, dy). */
static const struct {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t alpha, beta, conv, x, w, y;
} OPS[] = {
    [CG_CONV_FWD] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
    [CG_CONV_BWD_DATA] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
    [CG_CONV_BWD_FILTER] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY},
};

/* The *_HANDLE attributes: deprecated in the 9.19 header, needed by 9.14. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const cudnnBackendAttributeName_t GRAPH_HANDLE = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
#pragma GCC diagnostic pop

/* The GenStats operation on the convolution's output: per-channel sum and
 * sum of squares into two f32 [1, K, 1, 1] tensors. */
static RtCudaStatus make_genstats(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  RtCudaStatus s;
  if ((s = make_tensor(h, &p->sum, UID_SUM, IR_DT_F32, 1, d->k, 1, 1, p->what, err, errlen)) ||
      (s = make_tensor(h, &p->sqsum, UID_SQSUM, IR_DT_F32, 1, d->k, 1, 1, p->what, err, errlen)) ||
      (s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, &p->stats), p->what)) ||
      (s = SET(h, p->stats, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode, p->what)) ||
      (s = SET(h, p->stats, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, p->what)) ||
      (s = SET(h, p->stats, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->y, p->what)) ||
      (s = SET(h, p->stats, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->sum,
               p->what)) ||
      (s = SET(h, p->stats, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->sqsum,
               p->what)) ||
      (s = DNN(h, BackendFinalize, (p->stats), p->what)))
    return s;
  return RT_CUDA_OK;
}

/* One pointwise operation (math in FP32): y = mode(x, alpha2 * b) (b NULL
 * for a unary mode; alpha2 is left at cuDNN's default when 1); RELU_BWD
 * takes x as the forward's tensor and b as dy. */
static RtCudaStatus make_pointwise_a(RtCudnn *h, RtConvPlan *p, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                     cudnnBackendDescriptor_t b, float alpha2, cudnnBackendDescriptor_t y,
                                     cudnnBackendDescriptor_t *pw, cudnnBackendDescriptor_t *op, char *err,
                                     size_t errlen) {
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  int bwd = mode == CUDNN_POINTWISE_RELU_BWD;
  RtCudaStatus s;
  if ((s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_POINTWISE_DESCRIPTOR, pw), p->what)) ||
      (s = SET(h, *pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, p->what)) ||
      (s = SET(h, *pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, p->what)) ||
      (s = DNN(h, BackendFinalize, (*pw), p->what)) ||
      (s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op), p->what)) ||
      (s = SET(h, *op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, pw, p->what)) ||
      (s = SET(h, *op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, p->what)) ||
      (b && (s = SET(h, *op, bwd ? CUDNN_ATTR_OPERATION_POINTWISE_DYDESC : CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, p->what))) ||
      (s = SET(h, *op, bwd ? CUDNN_ATTR_OPERATION_POINTWISE_DXDESC : CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, p->what)) ||
      (alpha2 != 1.0f &&
       (s = SET(h, *op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &alpha2, p->what))) ||
      (s = DNN(h, BackendFinalize, (*op), p->what)))
    return s;
  return RT_CUDA_OK;
}

static RtCudaStatus make_pointwise(RtCudnn *h, RtConvPlan *p, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                   cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t *pw,
                                   cudnnBackendDescriptor_t *op, char *err, size_t errlen) {
  return make_pointwise_a(h, p, mode, x, b, 1.0f, y, pw, op, err, errlen);
}

/* relu(x * scale + bias) into p->virt[PRO_RELU], the convolution's input. */
static RtCudaStatus make_prologue(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  static const cudnnPointwiseMode_t MODE[PRO_OPS] = {CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_ADD,
                                                     CUDNN_POINTWISE_RELU_FWD};
  RtCudaStatus s;
  if ((s = make_tensor(h, &p->scale, UID_SCALE, d->dtype, 1, d->c, 1, 1, p->what, err, errlen)) ||
      (s = make_tensor(h, &p->bias, UID_BIAS, d->dtype, 1, d->c, 1, 1, p->what, err, errlen)))
    return s;
  cudnnBackendDescriptor_t in = p->x, operand[PRO_OPS] = {p->scale, p->bias, NULL};
  for (int i = 0; i < PRO_OPS; i++) {
    if ((s = make_tensor_as(h, &p->virt[i], UID_VIRT + i, IR_DT_F32, 1, d->n, d->c, d->h, d->w, p->what, err,
                            errlen)) ||
        (s = make_pointwise(h, p, MODE[i], in, operand[i], p->virt[i], &p->pw[i], &p->pwop[i], err, errlen)))
      return s;
    in = p->virt[i];
  }
  return RT_CUDA_OK;
}

/* The epilogue's operations after the convolution's result, which goes to
 * p->evirt[0] (*conv_out); the last writes p->y (forward) or p->x (dx). */
static RtCudaStatus make_epilogue(RtCudnn *h, RtConvPlan *p, cudnnBackendDescriptor_t *conv_out, char *err,
                                  size_t errlen) {
  const CgConvDesc *d = &p->key;
  int fwd = d->kind == CG_CONV_FWD, e = d->epilogue;
  cudnnPointwiseMode_t mode[EPI_OPS];
  cudnnBackendDescriptor_t operand[EPI_OPS];
  int n = 0;
  RtCudaStatus s;
  if (fwd) {
    if ((s = make_tensor(h, &p->escale, UID_ESCALE, IR_DT_F32, 1, d->k, 1, 1, p->what, err, errlen)) ||
        (s = make_tensor(h, &p->ebias, UID_EBIAS, IR_DT_F32, 1, d->k, 1, 1, p->what, err, errlen)) ||
        ((e & CG_EPI_RESIDUAL) &&
         (s = make_tensor(h, &p->eres, UID_RESIDUAL, d->rdtype, d->n, d->k, d->ho, d->wo, p->what, err, errlen))) ||
        ((e & CG_EPI_OUTSCALE) &&
         (s = make_tensor(h, &p->eoscale, UID_EOSCALE, IR_DT_F32, 1, d->k, 1, 1, p->what, err, errlen))))
      return s;
    mode[n] = CUDNN_POINTWISE_MUL, operand[n++] = p->escale;
    mode[n] = CUDNN_POINTWISE_ADD, operand[n++] = p->ebias;
    if (e & CG_EPI_RESIDUAL) mode[n] = CUDNN_POINTWISE_ADD, operand[n++] = p->eres;
    if (e & CG_EPI_RELU) mode[n] = CUDNN_POINTWISE_RELU_FWD, operand[n++] = NULL;
    if (e & CG_EPI_OUTSCALE) mode[n] = CUDNN_POINTWISE_MUL, operand[n++] = p->eoscale;
  } else {
    if ((s = make_tensor(h, &p->emask, UID_MASK, d->dtype, d->n, d->c, d->h, d->w, p->what, err, errlen)) ||
        ((e & CG_EPI_RESIDUAL) &&
         (s = make_tensor(h, &p->eres, UID_RESIDUAL, d->dtype, d->n, d->c, d->h, d->w, p->what, err, errlen))))
      return s;
    if (e & CG_EPI_RESIDUAL) mode[n] = CUDNN_POINTWISE_ADD, operand[n++] = p->eres;
    mode[n] = CUDNN_POINTWISE_RELU_BWD, operand[n++] = NULL;
  }
  int64_t c = fwd ? d->k : d->c, hh = fwd ? d->ho : d->h, ww = fwd ? d->wo : d->w;
  for (int i = 0; i < n; i++)
    if ((s = make_tensor_as(h, &p->evirt[i], UID_EVIRT + i, i == 0 && p->acc_i32 ? IR_DT_I32 : IR_DT_F32, 1, d->n, c,
                            hh, ww, p->what, err, errlen)))
      return s;
  for (int i = 0; i < n; i++) {
    cudnnBackendDescriptor_t out = i + 1 < n ? p->evirt[i + 1] : fwd ? p->y : p->x;
    /* RELU_BWD: x is the forward's relu output (the mask), dy the data gradient */
    int drelu = mode[i] == CUDNN_POINTWISE_RELU_BWD;
    cudnnBackendDescriptor_t x = drelu ? p->emask : p->evirt[i], b = drelu ? p->evirt[i] : operand[i];
    /* a forward residual scaled on the way in (rscale: an i8 residual's step, or over y's) */
    float alpha2 = fwd && operand[i] == p->eres && d->rscale != 0.0f ? d->rscale : 1.0f;
    if ((s = make_pointwise_a(h, p, mode[i], x, b, alpha2, out, &p->epw[i], &p->epop[i], err, errlen))) return s;
  }
  p->nepi = n;
  *conv_out = p->evirt[0];
  return RT_CUDA_OK;
}

/* z - mean into p->bnvirt[1]: an ADD with ALPHA2 = -1, or (p->dbn_sub) a SUB. */
static RtCudaStatus make_dbn_center(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  cudnnBackendDescriptor_t mean = p->bnin[BN_MEAN], out = p->bnvirt[BN_SUBMEAN + 1];
  cudnnBackendDescriptor_t *pw = &p->bnpw[BN_SUBMEAN], *op = &p->bnop[BN_SUBMEAN];
  return p->dbn_sub ? make_pointwise(h, p, CUDNN_POINTWISE_SUB, p->bnz, mean, out, pw, op, err, errlen)
                    : make_pointwise_a(h, p, CUDNN_POINTWISE_ADD, p->bnz, mean, -1.0f, out, pw, op, err, errlen);
}

/* The dbn operations after the convolution, whose result goes to
 * p->bnvirt[0] (*conv_out): z's batch norm, RELU_BWD of the result against
 * it into p->x, and BN_BWD_WEIGHTS of (z, p->x). */
static RtCudaStatus make_dbn(RtCudnn *h, RtConvPlan *p, cudnnBackendDescriptor_t *conv_out, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  RtCudaStatus s;
  if ((s = make_tensor(h, &p->bnz, UID_Z, d->dtype, d->n, d->c, d->h, d->w, p->what, err, errlen))) return s;
  for (int i = 0; i < BN_INS; i++)
    if ((s = make_tensor(h, &p->bnin[i], UID_BN_IN + i, IR_DT_F32, 1, d->c, 1, 1, p->what, err, errlen))) return s;
  for (int i = 0; i < BN_OUTS; i++)
    if ((s = make_tensor(h, &p->bnout[i], UID_BN_OUT + i, IR_DT_F32, 1, d->c, 1, 1, p->what, err, errlen))) return s;
  /* bnvirt[0]: the convolution's result; bnvirt[i + 1]: the batch norm's i-th step */
  for (int i = 0; i < BN_OPS; i++)
    if ((s = make_tensor_as(h, &p->bnvirt[i], UID_BN_VIRT + i, IR_DT_F32, 1, d->n, d->c, d->h, d->w, p->what, err,
                            errlen)))
      return s;
  static const cudnnPointwiseMode_t MODE[] = {
      [BN_INVSTD_MUL] = CUDNN_POINTWISE_MUL, [BN_GAMMA_MUL] = CUDNN_POINTWISE_MUL, [BN_BETA_ADD] = CUDNN_POINTWISE_ADD};
  static const int OPERAND[] = {[BN_INVSTD_MUL] = BN_INVSTD, [BN_GAMMA_MUL] = BN_GAMMA, [BN_BETA_ADD] = BN_BETA};
  if ((s = make_dbn_center(h, p, err, errlen))) return s;
  for (int i = BN_INVSTD_MUL; i <= BN_BETA_ADD; i++)
    if ((s = make_pointwise(h, p, MODE[i], p->bnvirt[i], p->bnin[OPERAND[i]], p->bnvirt[i + 1], &p->bnpw[i],
                            &p->bnop[i], err, errlen)))
      return s;
  /* RELU_BWD: x is the recomputed batch norm (the forward relu's input), dy the convolution's result */
  if ((s = make_pointwise(h, p, CUDNN_POINTWISE_RELU_BWD, p->bnvirt[BN_BETA_ADD + 1], p->bnvirt[0], p->x,
                          &p->bnpw[BN_DRELU], &p->bnop[BN_DRELU], err, errlen)))
    return s;
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  /* beta is no input of BN_BWD_WEIGHTS: only the mask needs it */
  static const cudnnBackendAttributeName_t IN_ATTR[BN_BETA] = {
      [BN_MEAN] = CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC,
      [BN_INVSTD] = CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC,
      [BN_GAMMA] = CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC};
  static const cudnnBackendAttributeName_t OUT_ATTR[BN_OUTS] = {
      CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC,
      CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC,
      CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS};
  if ((s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR, &p->bnw), p->what)) ||
      (s = SET(h, p->bnw, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, p->what)) ||
      (s = SET(h, p->bnw, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->bnz,
               p->what)) ||
      (s = SET(h, p->bnw, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->x,
               p->what)))
    return s;
  for (int i = 0; i < BN_BETA; i++)
    if ((s = SET(h, p->bnw, IN_ATTR[i], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->bnin[i], p->what))) return s;
  for (int i = 0; i < BN_OUTS; i++)
    if ((s = SET(h, p->bnw, OUT_ATTR[i], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->bnout[i], p->what))) return s;
  if ((s = DNN(h, BackendFinalize, (p->bnw), p->what))) return s;
  *conv_out = p->bnvirt[0];
  return RT_CUDA_OK;
}

/* The operation graph of every operation made for p, in dataflow order. */
static RtCudaStatus make_opgraph(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  cudnnBackendDescriptor_t ops[PRO_OPS + EPI_OPS + BN_OPS + 3];
  int64_t nops = 0;
  for (int i = 0; d->prologue && i < PRO_OPS; i++) ops[nops++] = p->pwop[i];
  ops[nops++] = p->op;
  for (int i = 0; d->epilogue && i < p->nepi; i++) ops[nops++] = p->epop[i];
  for (int i = 0; d->dbn && i < BN_OPS; i++) ops[nops++] = p->bnop[i];
  if (d->dbn) ops[nops++] = p->bnw;
  if (d->genstats) ops[nops++] = p->stats;
  RtCudaStatus s;
  if ((s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &p->graph), p->what)) ||
      (s = SET(h, p->graph, GRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h->handle, p->what)) ||
      (s = SET(h, p->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops, p->what)) ||
      (s = DNN(h, BackendFinalize, (p->graph), p->what)))
    return s;
  return RT_CUDA_OK;
}

RtCudaStatus rt_cudnn_graph_make(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  RtCudaStatus s;
  if ((s = make_tensor(h, &p->x, UID_X, d->dtype, d->n, d->c, d->h, d->w, p->what, err, errlen)) ||
      (s = make_tensor(h, &p->w, UID_W, d->dtype, d->k, d->c / d->groups, d->r, d->s, p->what, err, errlen)) ||
      (s = make_tensor(h, &p->y, UID_Y, d->ydtype, d->n, d->k, d->ho, d->wo, p->what, err, errlen)) ||
      (s = make_conv(h, p, err, errlen)) || (d->prologue && (s = make_prologue(h, p, err, errlen))))
    return s;
  cudnnBackendDescriptor_t conv_x = d->prologue ? p->virt[PRO_RELU] : p->x, conv_y = p->y;
  /* the epilogue's first operation reads what the convolution writes: y forward, dx backward */
  cudnnBackendDescriptor_t *epi_from = d->kind == CG_CONV_FWD ? &conv_y : &conv_x;
  if (d->epilogue && (s = make_epilogue(h, p, epi_from, err, errlen))) return s;
  if (d->dbn && (s = make_dbn(h, p, &conv_x, err, errlen))) return s;
  float alpha = 1.0f, beta = 0.0f;
  if ((s = DNN(h, BackendCreateDescriptor, (OPS[d->kind].type, &p->op), p->what)) ||
      (s = SET(h, p->op, OPS[d->kind].alpha, CUDNN_TYPE_FLOAT, 1, &alpha, p->what)) ||
      (s = SET(h, p->op, OPS[d->kind].beta, CUDNN_TYPE_FLOAT, 1, &beta, p->what)) ||
      (s = SET(h, p->op, OPS[d->kind].conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->conv, p->what)) ||
      (s = SET(h, p->op, OPS[d->kind].x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv_x, p->what)) ||
      (s = SET(h, p->op, OPS[d->kind].w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->w, p->what)) ||
      (s = SET(h, p->op, OPS[d->kind].y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv_y, p->what)) ||
      (s = DNN(h, BackendFinalize, (p->op), p->what)))
    return s;
  if (d->genstats && (s = make_genstats(h, p, err, errlen))) return s;
  return make_opgraph(h, p, err, errlen);
}
