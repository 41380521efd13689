/* cg_conv.h - the description of one convolution, as the code generator
 * hands it to the GPU executor: a node's kernels (cg_kernels.h) say which
 * convolution runs first, and the executor runs it with cuDNN
 * (runtime/gpu/rt_cudnn.h).  Activations are NHWC, filters KRSC, all dense.
 *
 * Tensor roles are those of the forward convolution y = conv(x, w) in every
 * kind: CG_CONV_FWD reads x, w and writes y; CG_CONV_BWD_DATA reads y (dy)
 * and w and writes x (dx); CG_CONV_BWD_FILTER reads x and y (dy) and
 * writes w (dw). */
#ifndef NETC_CG_CONV_H
#define NETC_CG_CONV_H

#include "ir.h"

typedef enum CgConvKind { CG_CONV_FWD, CG_CONV_BWD_DATA, CG_CONV_BWD_FILTER } CgConvKind;

typedef struct CgConvDesc {
  CgConvKind kind;
  int n, c, h, w; /* x: N x H x W x C (C = all input channels) */
  int k, r, s;    /* w: K x R x S x (C / groups) */
  int ho, wo;     /* y: N x Ho x Wo x K */
  int stride[2], pad[2], dilation[2], groups;
  IrDtype dtype;  /* of x, w and y: IR_DT_F32, IR_DT_F16 or IR_DT_BF16; or of x and w: IR_DT_I8
                   * or IR_DT_F8E4M3 */
  IrDtype ydtype; /* of y: dtype, except for an i8 or f8e4m3 forward convolution (x and w
                   * quantized, their scales folded into the epilogue's, which it must have;
                   * i32 accumulation for i8, FP32 (Hopper's FP8 tensor-core accumulation)
                   * for f8e4m3): IR_DT_F32, or IR_DT_F16 / IR_DT_BF16 */
  int tf32;       /* f32 only: allow TF32 tensor-core engines (10-bit mantissa products,
                           * FP32 accumulation); 0 keeps full FP32 numerics */
  int genstats;   /* CG_CONV_FWD on f16/bf16 only: the same kernel also writes the
                           * per-channel sum and sum of squares of y, f32 (cuDNN's conv +
                           * GenStats fusion); see RtConvIo.stats */
  int prologue;   /* CG_CONV_FWD / CG_CONV_BWD_FILTER on f16/bf16 only: the convolution
                           * reads relu(x * scale + bias) in place of x (per channel of x, scale
                           * and bias in x's dtype, computed in FP32, zero padding applied after),
                           * a batch norm and its relu applied on the fly (cuDNN's ConvBNfprop
                           * and ConvBNwgrad patterns); see RtConvIo.sb */
  int epilogue;   /* CG_CONV_FWD, no genstats or prologue: the convolution's FP32 result
                           * r becomes y = [relu](r * scale + bias [+ residual]) (per channel of
                           * y, scale and bias f32; cuDNN's conv-scale-bias-add-relu runtime
                           * fusion); CG_EPI_* flags; see RtConvIo.esb and residual.
                           * CG_CONV_BWD_DATA: CG_EPI_DRELU, dx [+ residual, shaped like dx]
                           * masked where the forward's relu output (RtConvIo.mask, shaped like
                           * dx) is not positive */
  int dbn;        /* CG_CONV_BWD_DATA on f16/bf16 only, no epilogue: the data gradient
                           * of a conv whose input was relu(batchnorm(z)) (cuDNN's
                           * DgradDreluBNBwdWeight): the FP32 result r becomes
                           * x = r masked where z's batch norm ((z - mean) * invstd * gamma
                           * + beta, per channel of x, recomputed) is not positive, stored in
                           * x's dtype; from that x and z the same plan writes the batch-norm
                           * backward's weights: dgamma = sum x * (z - mean) * invstd, dbeta =
                           * sum x, and the coefficients a, b, c (per channel) of its data
                           * gradient dz = a * x + b * z + c, which the caller applies; see
                           * RtConvIo.bn */
  IrDtype rdtype; /* CG_EPI_RESIDUAL on a forward one: the residual's dtype, ydtype, or i8 for a quantized
                   * convolution reading a quantized residual (pass requant's i8 block outputs) */
  float rscale;   /* CG_EPI_RESIDUAL on a forward one: what the residual is multiplied by before it is added
                   * (0: 1): an i8 residual's step, divided by y's step when y is requantized to i8 */
} CgConvDesc;

/* CG_EPI_OUTSCALE (forward, with CG_EPI_AFFINE): the epilogue's result is
 * multiplied last, after the relu, by a third per-channel f32 vector (an i8
 * result requantized by 1/S with a float residual added at its own scale:
 * relu(r * scale + bias + residual) / S, where without it the residual
 * would have to be scaled by 1/S on its way in, which cuDNN's int8
 * engines refuse); see RtConvIo.esb. */
enum { CG_EPI_AFFINE = 1, CG_EPI_RESIDUAL = 2, CG_EPI_RELU = 4, CG_EPI_DRELU = 8, CG_EPI_OUTSCALE = 16 };

/* The epilogue's f32 vectors of K (RtConvIo.esb), as many times K floats:
 * scales and biases (2), and with CG_EPI_OUTSCALE the scales, biases and
 * out scales of that form after them (5). */
static inline int cg_conv_esb_floats(const CgConvDesc *d) { return d->epilogue & CG_EPI_OUTSCALE ? 5 : 2; }

#endif
