/* qscale.cu - the epilogue scales of an i8 convolution: cuDNN accumulates
 * q_x * q_w in i32, and y = acc * s_x * s_w[k] (then the node's own scale
 * and bias) is its epilogue's per-channel affine (rt_cudnn.h, esb: K f32
 * scales, then K f32 biases).  s_x and s_w are the scales the casts wrote
 * after q (compiler/ir.h, ir_value_scales): one for x, one per output
 * channel (or one) for w.
 *
 *   NETC_QS_SET  esb[k] = s_x * s_w[k]; esb[K + k] = bias[k] (NETC_QS_BIAS
 *                1: the node's bias input, of type NETC_TB), else 0
 *   NETC_QS_MUL  esb[k] *= s_x * s_w[k] (a folded batch norm's scale, which
 *                chan_finalize.cu wrote; its bias stays); with NETC_QS_FROM
 *                the scale and bias read from `from` (the finalize's, kept
 *                from step to step) rather than esb itself
 *   NETC_QS_OUT  (with either) y is i8 at that step S (pass requant): the
 *                scale and the bias divided by S, so the epilogue's result
 *                is y / S, which cuDNN (or a cast launch) rounds to i8; S
 *                written as y's one scale after its NETC_YCOUNT elements
 *   NETC_QS_OUTSCALE  (with MUL and OUT: a requantized y adding a float
 *                residual, cg_conv.h's CG_EPI_OUTSCALE) esb[2K..5K) too:
 *                the scale and bias not divided, and 1/S, for the plan
 *                that divides last and adds the residual as it is
 *
 * Parameters: NETC_KERNEL_NAME, NETC_K, NETC_XCOUNT and NETC_WCOUNT (the
 * elements of q_x and q_w: their scales start at the next 16-byte
 * boundary), NETC_WSCALES (1 or K), one of NETC_QS_SET / NETC_QS_MUL,
 * optionally NETC_QS_OUT and NETC_YCOUNT (y's elements; y the last
 * argument).  Launch: 1-D, 256 threads a block, at least K threads. */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_K) || !defined(NETC_XCOUNT) || !defined(NETC_WCOUNT)
#error "qscale.cu is a template: define NETC_KERNEL_NAME, NETC_K, NETC_XCOUNT, NETC_WCOUNT and NETC_QS_SET or _MUL"
#endif

static constexpr long long K = NETC_K;

__device__ __forceinline__ const float *netc_scales(const signed char *q, long long count) {
  return (const float *)(q + (count + 15) / 16 * 16);
}

#if defined(NETC_QS_OUT)
#define NETC_Y_ARG , signed char *__restrict__ y
static constexpr float out_step = NETC_QS_OUT;
#else
#define NETC_Y_ARG
static constexpr float out_step = 1.0f;
#endif

extern "C" __global__ void __launch_bounds__(256)
#if defined(NETC_QS_SET) && defined(NETC_QS_BIAS) && NETC_QS_BIAS
NETC_KERNEL_NAME(const signed char *__restrict__ xq, const signed char *__restrict__ wq,
                 const NETC_TB *__restrict__ bias, float *__restrict__ esb NETC_Y_ARG)
#elif defined(NETC_QS_FROM)
NETC_KERNEL_NAME(const signed char *__restrict__ xq, const signed char *__restrict__ wq,
                 const float *__restrict__ from, float *__restrict__ esb NETC_Y_ARG)
#else
NETC_KERNEL_NAME(const signed char *__restrict__ xq, const signed char *__restrict__ wq,
                 float *__restrict__ esb NETC_Y_ARG)
#endif
{
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= K) return;
#if defined(NETC_QS_OUT)
  if (k == 0) *(float *)(y + (NETC_YCOUNT + 15) / 16 * 16) = NETC_QS_OUT;
#endif
  const float s = netc_scales(xq, NETC_XCOUNT)[0] * netc_scales(wq, NETC_WCOUNT)[NETC_WSCALES > 1 ? k : 0];
#if defined(NETC_QS_SET)
  esb[k] = s / out_step;
#if defined(NETC_QS_BIAS) && NETC_QS_BIAS
  esb[K + k] = netc_ld(bias[k]) / out_step;
#else
  esb[K + k] = 0.0f;
#endif
#elif defined(NETC_QS_MUL)
#if defined(NETC_QS_FROM)
  const float scale = from[k], shift = from[K + k];
#else
  const float scale = esb[k], shift = esb[K + k];
#endif
#if defined(NETC_QS_OUTSCALE)
  esb[2 * K + k] = scale * s; /* the out scale's form: y = relu(acc * this + bias + residual) / S */
  esb[3 * K + k] = shift;
  esb[4 * K + k] = 1.0f / out_step;
#endif
  esb[k] = scale * s / out_step;
  esb[K + k] = shift / out_step;
#else
#error "qscale.cu: define NETC_QS_SET or NETC_QS_MUL"
#endif
}
#undef NETC_Y_ARG
