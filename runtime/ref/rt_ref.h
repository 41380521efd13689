/* rt_ref.h - the plain-C reference kernels of netc's CPU executor.
 *
 * Every op the IR knows has a forward and a backward here, on FP32 arrays,
 * with PyTorch's semantics (docs/reference_kernels.md gives the formulas).
 * The CPU executor calls these to train; the GPU back end is checked against
 * them.  Convolution and linear layers run as im2col + cblas_sgemm
 * (OpenBLAS threads the GEMMs); a naive direct-loop convolution is kept
 * beside them as the test oracle.
 *
 * Conventions:
 *  - Every function returns RT_REF_OK (0) or a negative RT_REF_E* code; a
 *    shape that does not add up is RT_REF_ESHAPE and nothing is written.
 *  - Backward kernels overwrite their outputs (they never accumulate); a
 *    gradient output passed as NULL is not computed.
 *  - Activations are described by RtRefAct {N, C, H, W, layout}; C is the
 *    stored channel count (after channel padding, if any).  Filters are
 *    RtRefFilter {K, C, R, S, layout} where C is channels per group.
 *  - Element counts are int64_t; dims are int.
 *  - Kernels hold no global state and allocate only per call (the
 *    convolution's column buffer, unless the caller passes a workspace). */
#ifndef NETC_RT_REF_H
#define NETC_RT_REF_H

#include <stdint.h>

enum {
  RT_REF_OK = 0,
  RT_REF_ESHAPE = -1, /* dims, layouts or parameters are inconsistent */
  RT_REF_ELABEL = -2, /* a class label is outside [0, classes) */
  RT_REF_ENOMEM = -3, /* the per-call workspace could not be allocated */
  RT_REF_EARG = -4,   /* a required pointer is NULL or a scalar is invalid */
  RT_REF_ESYNC = -5,  /* the batch statistics could not be summed over the processes (RtRefSync) */
};

/* A short text for an RT_REF_E* code ("ok" for 0). */
const char *rt_ref_strerror(int code);

typedef enum RtRefLayout {
  RT_REF_NCHW, /* activations: x[n][c][h][w] */
  RT_REF_NHWC, /* activations: x[n][h][w][c] */
  RT_REF_KCRS, /* filters: w[k][c][r][s] */
  RT_REF_KRSC, /* filters: w[k][r][s][c] */
} RtRefLayout;

/* Batch statistics over several processes (synchronized batch norm, a
 * data-parallel run's option): sum adds v[0..n) over the processes in
 * place, the same doubles everywhere, and returns 0 (else the statistics
 * fail with RT_REF_ESYNC); the processes' counts of values travel in the
 * same sums.  Every process must make the same calls in the same order
 * (the same graph: a backward without dx makes none).  Batch norm's
 * training forward then normalizes by the mean and variance of every
 * process's batch, and its backward's data gradient uses their summed
 * gradient terms; dgamma and dbeta stay the process's own (the average
 * of the gradients over the processes makes them the whole batch's). */
typedef struct RtRefSync {
  int (*sum)(void *user, double *v, int n);
  void *user;
} RtRefSync;

typedef struct RtRefAct {
  int N, C, H, W;
  RtRefLayout layout; /* RT_REF_NCHW or RT_REF_NHWC */
} RtRefAct;

typedef struct RtRefFilter {
  int K, C, R, S;     /* C = input channels per group */
  RtRefLayout layout; /* RT_REF_KCRS or RT_REF_KRSC */
} RtRefFilter;

/* Padding may differ at the two ends of an axis (ONNX pads); PyTorch's
 * symmetric padding sets top == bottom and left == right. */
typedef struct RtRefConvParam {
  int stride_h, stride_w;
  int pad_top, pad_left, pad_bottom, pad_right;
  int dil_h, dil_w;
  int groups;
} RtRefConvParam;

typedef struct RtRefPoolParam {
  int R, S; /* window height, width */
  int stride_h, stride_w;
  int pad_top, pad_left, pad_bottom, pad_right;
  int dil_h, dil_w;      /* max pooling only; avg pooling needs 1 */
  int ceil_mode;         /* output size rounds up, PyTorch's rule */
  int count_include_pad; /* avg pooling: divide by the padded window size */
} RtRefPoolParam;

/* Number of elements an activation holds: N*C*H*W. */
int64_t rt_ref_act_count(const RtRefAct *a);
/* Element offset of (n, c, h, w) in a's layout. */
int64_t rt_ref_act_index(const RtRefAct *a, int n, int c, int h, int w);
/* Element offset of (k, c, r, s) in f's layout. */
int64_t rt_ref_filter_index(const RtRefFilter *f, int k, int c, int r, int s);

/* --- convolution (rt_ref_conv.c, rt_ref_conv_naive.c) --------------------
 * y[n,k,p,q] = b[k] + sum_{c,r,s} x[n, g*C+c, p*sh - pt + r*dh, q*sw - pl + s*dw]
 *                                 * w[k, c, r, s],   g = k / (K/groups)
 * x: [N, C*groups, H, W], w: [K, C, R, S], y: [N, K, Ho, Wo] with
 * Ho = (H + pt + pb - dh*(R-1) - 1) / sh + 1 (floor), likewise Wo.
 * Any activation layout combines with any filter layout; x and y must share
 * one activation layout.  bias may be NULL. */

/* Fills y's dims (N, K, Ho, Wo) and layout from x, w and p. */
int rt_ref_conv2d_out_shape(const RtRefAct *x, const RtRefFilter *w, const RtRefConvParam *p, RtRefAct *y);
/* Floats of workspace the fast kernels below use for one call (the column
 * buffer of one image, one group).  Pass ws = NULL to have them allocate it. */
int64_t rt_ref_conv2d_workspace(const RtRefAct *x, const RtRefFilter *w, const RtRefAct *y, const RtRefConvParam *p);

int rt_ref_conv2d_fwd(const RtRefAct *xs, const float *x, const RtRefFilter *wf, const float *w, const float *bias,
                      const RtRefConvParam *p, const RtRefAct *ys, float *y, float *ws);
/* dx = conv2d's gradient with respect to x, from dy and w. */
int rt_ref_conv2d_bwd_data(const RtRefAct *xs, float *dx, const RtRefFilter *wf, const float *w,
                           const RtRefConvParam *p, const RtRefAct *ys, const float *dy, float *ws);
/* dw (and dbias[k] = sum over n,p,q of dy, when dbias != NULL) from x, dy. */
int rt_ref_conv2d_bwd_weight(const RtRefAct *xs, const float *x, const RtRefFilter *wf, float *dw, float *dbias,
                             const RtRefConvParam *p, const RtRefAct *ys, const float *dy, float *ws);

/* The same three, as direct loops in double precision: the test oracle. */
int rt_ref_conv2d_fwd_naive(const RtRefAct *xs, const float *x, const RtRefFilter *wf, const float *w,
                            const float *bias, const RtRefConvParam *p, const RtRefAct *ys, float *y);
int rt_ref_conv2d_bwd_data_naive(const RtRefAct *xs, float *dx, const RtRefFilter *wf, const float *w,
                                 const RtRefConvParam *p, const RtRefAct *ys, const float *dy);
int rt_ref_conv2d_bwd_weight_naive(const RtRefAct *xs, const float *x, const RtRefFilter *wf, float *dw, float *dbias,
                                   const RtRefConvParam *p, const RtRefAct *ys, const float *dy);

/* --- batch normalization (rt_ref_bn.c) -----------------------------------
 * Per channel c over (n, h, w), M = N*H*W:
 *   mean = sum x / M, var = sum (x - mean)^2 / M,  invstd = 1/sqrt(var + eps)
 *   y = gamma * (x - mean) * invstd + beta
 *   running_mean = (1-momentum)*running_mean + momentum*mean
 *   running_var  = (1-momentum)*running_var  + momentum*var*M/(M-1)
 * save_mean, save_invstd: [C], kept for the backward (may be NULL).
 * running_mean/var may be NULL (not updated).  M must be > 1. */
int rt_ref_batchnorm_fwd_train(const RtRefAct *xs, const float *x, const float *gamma, const float *beta, float *y,
                               float *running_mean, float *running_var, float momentum, float eps, float *save_mean,
                               float *save_invstd);
/* y = gamma * (x - running_mean) / sqrt(running_var + eps) + beta */
int rt_ref_batchnorm_fwd_infer(const RtRefAct *xs, const float *x, const float *gamma, const float *beta,
                               const float *running_mean, const float *running_var, float eps, float *y);
/* With xhat = (x - mean) * invstd:
 *   dbeta = sum dy, dgamma = sum dy * xhat,
 *   dx = gamma * invstd * (dy - dbeta/M - xhat * dgamma/M)
 * mean and invstd are save_mean/save_invstd of the training forward. */
int rt_ref_batchnorm_bwd(const RtRefAct *xs, const float *x, const float *dy, const float *gamma,
                         const float *save_mean, const float *save_invstd, float *dx, float *dgamma, float *dbeta);
/* The gradient through relu(batchnorm(x)) up to the batch norm's output,
 * with the relu's mask recomputed from x:
 *   g = (x - mean) * k + beta <= 0 ? 0 : dy,   k = (float)(gamma * invstd)
 * (a NaN batch-norm output passes dy, as relu_bwd's NaN does)
 * (k in double, rounded once, as the batch norm's forward coefficient).
 * g may be dy (in place). */
int rt_ref_bn_relu_mask(const RtRefAct *xs, const float *x, const float *dy, const float *gamma, const float *beta,
                        const float *save_mean, const float *save_invstd, float *g);
/* The batch norm's output from saved statistics, with the mask's
 * expression: y = (x - mean) * k + beta, k as above; y may be x.  The f32
 * stem's forward normalizes its z rounded to f16 with it (pass precision:
 * the backward reads that f16 z). */
int rt_ref_bn_normalize(const RtRefAct *xs, const float *x, const float *gamma, const float *beta,
                        const float *save_mean, const float *save_invstd, float *y);

/* The training forward's statistics alone (no normalized output): batch
 * mean and invstd into save_mean/save_invstd (required), running averages
 * updated as rt_ref_batchnorm_fwd_train does, with the same numbers. */
int rt_ref_batchnorm_stats(const RtRefAct *xs, const float *x, float *running_mean, float *running_var, float momentum,
                           float eps, float *save_mean, float *save_invstd);
/* rt_ref_batchnorm_fwd_train, rt_ref_batchnorm_stats and
 * rt_ref_batchnorm_bwd with the batch statistics over every process of
 * sync (RtRefSync; NULL: this one's only, as the plain ones). */
int rt_ref_batchnorm_fwd_train_sync(const RtRefAct *xs, const RtRefSync *sync, const float *x, const float *gamma,
                                    const float *beta, float *y, float *running_mean, float *running_var,
                                    float momentum, float eps, float *save_mean, float *save_invstd);
int rt_ref_batchnorm_stats_sync(const RtRefAct *xs, const RtRefSync *sync, const float *x, float *running_mean,
                                float *running_var, float momentum, float eps, float *save_mean, float *save_invstd);
int rt_ref_batchnorm_bwd_sync(const RtRefAct *xs, const RtRefSync *sync, const float *x, const float *dy,
                              const float *gamma, const float *save_mean, const float *save_invstd, float *dx,
                              float *dgamma, float *dbeta);
/* The batch norm's equivalent scale and bias, in f32: sb[c] = scale =
 * gamma * invstd, sb[C + c] = beta - mean * scale, so that
 * batchnorm(x) == x * scale + bias ([2, C], row 0 then row 1). */
int rt_ref_bn_scale_bias(int C, const float *gamma, const float *beta, const float *save_mean, const float *save_invstd,
                         float *sb);
/* A convolution's prologue: y = relu(x * sb[c] + sb[C + c]) per channel,
 * in f32 (the caller rounds y to x's dtype).  y may be x. */
int rt_ref_bn_prologue(const RtRefAct *xs, const float *x, const float *sb, float *y);

/* --- elementwise (rt_ref_eltwise.c) --------------------------------------
 * All take n elements; y may alias an input. */
/* y = x <= 0 ? 0 : x: NaN stays NaN, as PyTorch's relu */
int rt_ref_relu_fwd(int64_t n, const float *x, float *y);
/* dx = y <= 0 ? 0 : dy (y is relu's output, or its input: same sign; a
 * NaN y passes dy, as PyTorch's threshold_backward) */
int rt_ref_relu_bwd(int64_t n, const float *y, const float *dy, float *dx);
int rt_ref_add_fwd(int64_t n, const float *a, const float *b, float *y);
/* da = db = dy; either may be NULL. */
int rt_ref_add_bwd(int64_t n, const float *dy, float *da, float *db);
/* y = relu(a + b), NaN kept */
int rt_ref_add_relu_fwd(int64_t n, const float *a, const float *b, float *y);
/* dsum = y <= 0 ? 0 : dy; dsum is the gradient of both a and b. */
int rt_ref_add_relu_bwd(int64_t n, const float *y, const float *dy, float *dsum);
/* x *= s (loss scaling and its undoing) */
int rt_ref_scale(int64_t n, float *x, float s);
/* 1 when x holds an inf or a NaN, else 0. */
int rt_ref_has_nonfinite(int64_t n, const float *x);

/* --- pooling (rt_ref_pool.c) ---------------------------------------------
 * y: [N, C, Ho, Wo] in x's layout, Ho = floor or (ceil_mode) ceil of
 * (H + pt + pb - dh*(R-1) - 1) / sh + 1, and with ceil_mode the last window
 * must start inside the input or its top/left padding (PyTorch). */
int rt_ref_pool_out_shape(const RtRefAct *x, const RtRefPoolParam *p, RtRefAct *y);
/* y = max over the window (padding never wins; NaN propagates).  argmax
 * (may be NULL): for each y element, h*W + w of the chosen input element
 * in its (n, c) plane, the first maximum in row-major window order. */
int rt_ref_maxpool_fwd(const RtRefAct *xs, const float *x, const RtRefPoolParam *p, const RtRefAct *ys, float *y,
                       int32_t *argmax);
/* dx = 0, then dx[argmax] += dy; argmax NULL: recomputed from x. */
int rt_ref_maxpool_bwd(const RtRefAct *xs, const float *x, const int32_t *argmax, const RtRefPoolParam *p,
                       const RtRefAct *ys, const float *dy, float *dx);
/* Each max window's winner in its other form: win (r*S + s in the window,
 * -1: none, as maxpool_bn_relu writes it) from argmax (h*W + w in the
 * input plane, -1: none), and back.  RT_REF_EARG when a winner lies outside
 * its window or the input. */
int rt_ref_maxpool_win_of(const RtRefAct *xs, const RtRefPoolParam *p, const RtRefAct *ys, const int32_t *argmax,
                          float *win);
int rt_ref_maxpool_argmax_of(const RtRefAct *xs, const RtRefPoolParam *p, const RtRefAct *ys, const float *win,
                             int32_t *argmax);
/* y = sum over the window of x / count, count = window clipped to the padded
 * input (count_include_pad) or to the input itself. */
int rt_ref_avgpool_fwd(const RtRefAct *xs, const float *x, const RtRefPoolParam *p, const RtRefAct *ys, float *y);
int rt_ref_avgpool_bwd(const RtRefAct *xs, float *dx, const RtRefPoolParam *p, const RtRefAct *ys, const float *dy);
/* y[n, c] = mean over h, w of x  (y is [N, C] row-major in either layout) */
int rt_ref_global_avgpool_fwd(const RtRefAct *xs, const float *x, float *y);
int rt_ref_global_avgpool_bwd(const RtRefAct *xs, float *dx, const float *dy);

/* --- linear (rt_ref_linear.c) --------------------------------------------
 * x: [M, Cin], w: [Cout, Cin] (PyTorch), bias: [Cout] or NULL, y: [M, Cout]
 *   y = x w^T + b;  dx = dy w;  dw = dy^T x;  dbias = sum over M of dy */
int rt_ref_linear_fwd(int M, int Cin, int Cout, const float *x, const float *w, const float *bias, float *y);
int rt_ref_linear_bwd(int M, int Cin, int Cout, const float *x, const float *w, const float *dy, float *dx, float *dw,
                      float *dbias);

/* --- softmax cross-entropy (rt_ref_softmax_ce.c) -------------------------
 * logits: [N, classes], labels: [N] in [0, classes) (else RT_REF_ELABEL),
 * eps = label smoothing.  With p = softmax(logits) per row:
 *   loss = mean_n [ (1-eps) * -log p[n, label] + eps * mean_j -log p[n, j] ]
 * prob (may be NULL) receives p. */
int rt_ref_softmax_ce_fwd(int N, int classes, const float *logits, const int32_t *labels, float eps, float *loss,
                          float *prob);
/* dlogits = dloss / N * (p - ((1-eps) * onehot(label) + eps / classes)).
 * prob may be NULL: p is then recomputed from logits. */
int rt_ref_softmax_ce_bwd(int N, int classes, const float *logits, const float *prob, const int32_t *labels, float eps,
                          float dloss, float *dlogits);

/* --- SGD (rt_ref_sgd.c) --------------------------------------------------
 * PyTorch's torch.optim.SGD, per element:
 *   d = g + weight_decay * w
 *   if momentum != 0:
 *     buf = first_step ? d : momentum * buf + (1 - dampening) * d
 *     d = nesterov ? d + momentum * buf : buf
 *   w -= lr * d
 * buf may be NULL only when momentum == 0. */
typedef struct RtRefSgd {
  float lr, momentum, dampening, weight_decay;
  int nesterov;
} RtRefSgd;
int rt_ref_sgd_update(int64_t n, float *w, const float *g, float *buf, const RtRefSgd *o, int first_step);

/* --- precision simulation (rt_ref_precision.c) ---------------------------
 * Round to nearest, ties to even; overflow goes to +-inf, NaN stays NaN
 * (quieted).  f16 keeps subnormals. */
uint16_t rt_ref_f32_to_f16(float f);
float rt_ref_f16_to_f32(uint16_t h);
uint16_t rt_ref_f32_to_bf16(float f);
float rt_ref_bf16_to_f32(uint16_t h);
/* y = float(f16(x)), y = float(bf16(x)); y may alias x. */
int rt_ref_round_f16(int64_t n, const float *x, float *y);
int rt_ref_round_bf16(int64_t n, const float *x, float *y);
/* FP8 (the OCP 8-bit formats, as Hopper's tensor cores take them):
 *   E4M3 (e4m3fn): bias 7, 3 mantissa bits, largest 448, smallest 2^-9, no
 *        infinity, NaN 0x7f/0xff (FP8 activations and weights)
 *   E5M2: bias 15, 2 mantissa bits, largest 57344, smallest 2^-16, inf
 *        0x7c, NaN 0x7e (FP8 gradients)
 * Round to nearest, ties to even, saturating: a magnitude beyond the
 * largest finite value (infinity included) becomes the largest finite
 * value, as CUDA's __nv_cvt_float_to_fp8 with __NV_SATFINITE does; NaN
 * stays NaN. */
typedef enum RtRefF8 { RT_REF_E4M3 = 0, RT_REF_E5M2 } RtRefF8;
uint8_t rt_ref_f32_to_f8(float f, RtRefF8 fmt);
float rt_ref_f8_to_f32(uint8_t b, RtRefF8 fmt);
float rt_ref_f8_max(RtRefF8 fmt); /* 448 or 57344 */
/* y = scale * float(f8(x / scale)): scaled FP8 simulation; scale > 0; y may alias x. */
int rt_ref_round_f8(int64_t n, const float *x, float scale, RtRefF8 fmt, float *y);
/* Delayed scaling (a cast to FP8 that keeps an amax history h[0..H), h[0]
 * the latest step's): the scale is the history's largest amax over fmt's
 * largest value, so that what the recent steps saw fits; amax, the tensor
 * at hand's largest finite magnitude, stands in while the history holds
 * none (every entry 0: the first step); 1 when that is 0 too.  Values
 * beyond the scale's range then saturate. */
float rt_ref_f8_delayed_scale(const float *h, int64_t H, float amax, RtRefF8 fmt);
/* The history one step older: h[1..H) = the old h[0..H-1), h[0] = amax. */
void rt_ref_amax_push(float *h, int64_t H, float amax);
/* q = clamp(round_half_even(x / scale), -128, 127); scale > 0.  NaN -> 0. */
int rt_ref_quant_i8(int64_t n, const float *x, float scale, int8_t *q);
/* y = q * scale */
int rt_ref_dequant_i8(int64_t n, const int8_t *q, float scale, float *y);
/* y = dequant(quant(x)): fake quantization; y may alias x. */
int rt_ref_round_i8(int64_t n, const float *x, float scale, float *y);

/* --- layout (rt_ref_layout.c) --------------------------------------------
 * Copies between layouts; x and y must not alias.  A filter converts as an
 * activation with N = K (KCRS is NCHW-shaped, KRSC is NHWC-shaped). */
int rt_ref_nchw_to_nhwc(int N, int C, int H, int W, const float *x, float *y);
int rt_ref_nhwc_to_nchw(int N, int C, int H, int W, const float *x, float *y);
/* y (C = Cpad channels) = x (C = xs->C channels) followed by zero channels,
 * in xs's layout; Cpad >= xs->C. */
int rt_ref_pad_channels(const RtRefAct *xs, const float *x, int Cpad, float *y);
/* y (C = C channels) = the first C channels of x (xs->C >= C channels). */
int rt_ref_unpad_channels(const RtRefAct *xs, const float *x, int C, float *y);

#endif
