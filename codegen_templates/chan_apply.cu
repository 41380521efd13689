/* chan_apply.cu - the per-element pass of a per-channel op on a
 * channels-last tensor ([ROWS, C], element i has channel i % C), after
 * chan_finalize.cu made its coefficients coef[3][C]:
 *
 *   NETC_APPLY_AFFINE  y = (x - coef[2C+c]) * coef[c] + coef[C+c], then
 *                      relu with NETC_RELU (batch norm forward)
 *   NETC_APPLY_BIAS    y = x + bias[c]  (a convolution's bias)
 *   NETC_APPLY_BWD     dx = coef[c]*g + coef[C+c]*(x - mean[c]) + coef[2C+c],
 *                      g = dy, masked by y > 0 with NETC_RELU (batch-norm backward)
 *
 * Parameters: NETC_KERNEL_NAME, the op (defined to 1), NETC_RELU (0/1),
 * NETC_TX (storage type of x, dy, y and the result), NETC_TB (of bias),
 * NETC_ROWS, NETC_C, NETC_V (elements per vector access; C % V == 0, so a
 * vector never straddles two pixels).
 * Launch: 1-D, 256 threads a block, any grid (grid-stride loop).
 * The result may be the same array as x (in-place batch norm, bias add):
 * no pointer here is __restrict__. */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TX) || !defined(NETC_ROWS) || !defined(NETC_C) || !defined(NETC_V)
#error "chan_apply.cu is a template: define NETC_KERNEL_NAME, NETC_TX, NETC_ROWS, NETC_C, NETC_V and one NETC_APPLY_*"
#endif
#if NETC_C % NETC_V != 0
#error "chan_apply.cu: NETC_C must be a multiple of NETC_V"
#endif

typedef NETC_TX tx_t;
static constexpr int V = NETC_V, CV = NETC_C / NETC_V;
static constexpr long long nvec = (long long)NETC_ROWS * CV;

extern "C" __global__ void __launch_bounds__(256)
#if defined(NETC_APPLY_AFFINE)
NETC_KERNEL_NAME(const tx_t *x, const float *coef, tx_t *out)
#elif defined(NETC_APPLY_BIAS)
NETC_KERNEL_NAME(const tx_t *x, const NETC_TB *bias, tx_t *out)
#elif defined(NETC_APPLY_BWD)
NETC_KERNEL_NAME(const tx_t *dy, const tx_t *x, const tx_t *ymask, const float *mean, const float *coef, tx_t *out)
#else
#error "chan_apply.cu: define NETC_APPLY_AFFINE, NETC_APPLY_BIAS or NETC_APPLY_BWD"
#endif
{
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += stride) {
    const int c0 = (int)(i % CV) * V;
    netc_vec<tx_t, V> vx = netc_vld<tx_t, V>(x, i), vo;
#if defined(NETC_APPLY_BWD)
    netc_vec<tx_t, V> vd = netc_vld<tx_t, V>(dy, i);
#if NETC_RELU
    netc_vec<tx_t, V> vm = netc_vld<tx_t, V>(ymask, i);
#endif
#endif
#pragma unroll
    for (int j = 0; j < V; j++) {
      const int c = c0 + j;
      const float xv = netc_ld(vx.v[j]);
      float r;
#if defined(NETC_APPLY_AFFINE)
      r = (xv - coef[2 * NETC_C + c]) * coef[c] + coef[NETC_C + c];
#if NETC_RELU
      r = r > 0.0f ? r : 0.0f;
#endif
#elif defined(NETC_APPLY_BIAS)
      r = xv + netc_ld(bias[c]);
#else
      float g = netc_ld(vd.v[j]);
#if NETC_RELU
      g = netc_ld(vm.v[j]) > 0.0f ? g : 0.0f;
#endif
      r = coef[c] * g + coef[NETC_C + c] * (xv - mean[c]) + coef[2 * NETC_C + c];
#endif
      vo.v[j] = netc_cv<tx_t>(r);
    }
    netc_vst<tx_t, V>(out, i, vo);
  }
}
