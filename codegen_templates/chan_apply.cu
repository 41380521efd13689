/* chan_apply.cu - the per-element pass of a per-channel op on a
 * channels-last tensor ([ROWS, C], element i has channel i % C), after
 * chan_finalize.cu made its coefficients coef[4][C] (the fourth row only for the relu mask):
 *
 *   NETC_APPLY_AFFINE  y = (x - coef[2C+c]) * coef[c] + coef[C+c], plus
 *                      res[i] with NETC_RESIDUAL 1 (a residual block's end; the
 *                      affine rounded to NETC_TY first, as an unfused batch norm
 *                      stores it),
 *                      then relu with NETC_RELU (batch norm forward)
 *   NETC_APPLY_BIAS    y = x + bias[c]  (a convolution's bias)
 *   NETC_APPLY_SBR     y = relu(x * sb[c] + sb[C+c]), sb of type NETC_TB (a
 *                      convolution's prologue: the batch norm and relu of
 *                      the layer before, by its equivalent scale and bias)
 *   NETC_APPLY_ABC     dx = abc[c]*g + abc[C+c]*x + abc[2C+c], g = dy (a batch
 *                      norm's backward from coefficients cuDNN made beside a
 *                      data gradient: DgradDreluBNBwdWeight)
 *   NETC_APPLY_BWD     dx = coef[c]*g + coef[C+c]*(x - mean[c]) + coef[2C+c],
 *                      g = dy, with NETC_RELU masked by the batch norm's output
 *                      recomputed from x: (x - mean[c]) * coef[c] + coef[3C+c] > 0
 *                      (coef[c] is gamma*invstd, coef[3C+c] beta; batch-norm backward)
 *
 * Parameters: NETC_KERNEL_NAME, the op (defined to 1), NETC_RELU (0/1),
 * NETC_TX (storage type of x), NETC_TY (of the result and the residual;
 * default NETC_TX: the f32 stem writes its f16 y from f32 z), NETC_TG (of dy;
 * default NETC_TX: the stem's f16 gradient with f32 z), NETC_TB (of bias),
 * NETC_ROWS, NETC_C, NETC_V (elements per vector access, at most 16 bytes
 * of each type; C % V == 0, so a vector never straddles two pixels),
 * NETC_GATHER (BWD: dy is a max pool's output gradient gathered per
 * element of x, a parameter code after dy holding its winners: as in
 * chan_reduce.cu, with the same NETC_H .. NETC_PW), NETC_GRID (the
 * launch's blocks), NETC_ROUND_X (AFFINE: normalize x rounded
 * to NETC_TY first: the f32 stem's z, whose f16 copy the backward pass reads).
 * Launch: 1-D, NETC_GRID blocks of 256 threads (grid-stride loop).  When
 * the stride is a multiple of the C/V vectors of a pixel (the usual case:
 * C a power of two), every vector a thread touches has the same channels,
 * so it loads their coefficients once into registers instead of for every
 * element: the per-element loads made these kernels instruction-bound at a
 * third of the memory bandwidth on f16 tensors.
 * The result may be the same array as x (in-place batch norm, bias add):
 * no pointer here is __restrict__. */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TX) || !defined(NETC_ROWS) || !defined(NETC_C) || !defined(NETC_V)
#error "chan_apply.cu is a template: define NETC_KERNEL_NAME, NETC_TX, NETC_ROWS, NETC_C, NETC_V and one NETC_APPLY_*"
#endif
#if NETC_C % NETC_V != 0
#error "chan_apply.cu: NETC_C must be a multiple of NETC_V"
#endif

typedef NETC_TX tx_t;
#if defined(NETC_TY)
typedef NETC_TY ty_t;
#else
typedef tx_t ty_t;
#endif
#if defined(NETC_TG)
typedef NETC_TG tg_t;
#else
typedef tx_t tg_t;
#endif
static constexpr int V = NETC_V, CV = NETC_C / NETC_V;
static constexpr long long nvec = (long long)NETC_ROWS * CV;
static constexpr long long STRIDE = (long long)NETC_GRID * 256;
static constexpr bool FIXED = STRIDE % CV == 0; /* a thread's channels never change */

/* Per-channel coefficients of channels c0..c0+V-1: k[0..2] as the op uses them. */
struct Coef {
  float k[5][V];
};

#if defined(NETC_APPLY_AFFINE) || defined(NETC_APPLY_ABC)
__device__ __forceinline__ Coef coef_of(const float *coef, const NETC_TB *, const float *, int c0) {
  Coef q;
#pragma unroll
  for (int j = 0; j < V; j++) q.k[0][j] = coef[c0 + j], q.k[1][j] = coef[NETC_C + c0 + j], q.k[2][j] = coef[2 * NETC_C + c0 + j];
  return q;
}
#elif defined(NETC_APPLY_BIAS) || defined(NETC_APPLY_SBR)
__device__ __forceinline__ Coef coef_of(const float *, const NETC_TB *bias, const float *, int c0) {
  Coef q;
#pragma unroll
  for (int j = 0; j < V; j++) {
    q.k[0][j] = netc_ld(bias[c0 + j]);
#if defined(NETC_APPLY_SBR)
    q.k[1][j] = netc_ld(bias[NETC_C + c0 + j]);
#endif
  }
  return q;
}
#else
__device__ __forceinline__ Coef coef_of(const float *coef, const NETC_TB *, const float *mean, int c0) {
  Coef q;
#pragma unroll
  for (int j = 0; j < V; j++)
    q.k[0][j] = coef[c0 + j], q.k[1][j] = coef[NETC_C + c0 + j], q.k[2][j] = coef[2 * NETC_C + c0 + j],
    q.k[3][j] = mean[c0 + j], q.k[4][j] = NETC_RELU ? coef[3 * NETC_C + c0 + j] : 0.0f;
  return q;
}
#endif

#if defined(NETC_GATHER)
#if NETC_ROWS > 0xffffffffLL
#error "chan_apply.cu: NETC_GATHER needs fewer than 2^32 rows"
#endif
/* The gradient of pixel p (of x), channel vector cv, rounded to tg_t. */
__device__ __forceinline__ netc_vec<tg_t, V> gathered(const tg_t *dy, const unsigned char *code, unsigned p, int cv) {
  return netc_pool_gather_at<NETC_H, NETC_W, NETC_HO, NETC_WO, NETC_R, NETC_S, NETC_SH, NETC_SW, NETC_PH, NETC_PW, CV,
                             V>(dy, code, p, cv);
}
#endif

extern "C" __global__ void __launch_bounds__(256)
#if defined(NETC_APPLY_AFFINE) && defined(NETC_RESIDUAL) && NETC_RESIDUAL
NETC_KERNEL_NAME(const tx_t *x, const float *coef, const ty_t *res, ty_t *out)
#elif defined(NETC_APPLY_AFFINE)
NETC_KERNEL_NAME(const tx_t *x, const float *coef, ty_t *out)
#elif defined(NETC_APPLY_BIAS) || defined(NETC_APPLY_SBR)
NETC_KERNEL_NAME(const tx_t *x, const NETC_TB *bias, ty_t *out)
#elif defined(NETC_APPLY_BWD) && defined(NETC_GATHER)
NETC_KERNEL_NAME(const tg_t *dy, const unsigned char *code, const tx_t *x, const float *mean, const float *coef,
                 ty_t *out)
#elif defined(NETC_APPLY_BWD)
NETC_KERNEL_NAME(const tg_t *dy, const tx_t *x, const float *mean, const float *coef, ty_t *out)
#elif defined(NETC_APPLY_ABC)
NETC_KERNEL_NAME(const tg_t *dy, const tx_t *x, const float *coef, ty_t *out)
#else
#error "chan_apply.cu: define NETC_APPLY_AFFINE, NETC_APPLY_BIAS, NETC_APPLY_SBR, NETC_APPLY_BWD or NETC_APPLY_ABC"
#endif
{
#if defined(NETC_APPLY_AFFINE) || defined(NETC_APPLY_ABC)
  const NETC_TB *bias = nullptr;
  const float *mean = nullptr;
#elif defined(NETC_APPLY_BIAS) || defined(NETC_APPLY_SBR)
  const float *coef = nullptr, *mean = nullptr;
#else
  const NETC_TB *bias = nullptr;
#endif
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  Coef q;
  if (FIXED) q = coef_of(coef, bias, mean, (int)(first % CV) * V);
  for (long long i = first; i < nvec; i += STRIDE) {
    if (!FIXED) q = coef_of(coef, bias, mean, (int)(i % CV) * V);
    netc_vec<tx_t, V> vx = netc_vld<tx_t, V>(x, i);
    netc_vec<ty_t, V> vo;
#if defined(NETC_APPLY_BWD) && defined(NETC_GATHER)
    netc_vec<tg_t, V> vd = gathered(dy, code, (unsigned)(i / CV), (int)(i % CV));
#elif defined(NETC_APPLY_BWD) || defined(NETC_APPLY_ABC)
    netc_vec<tg_t, V> vd = netc_vld<tg_t, V>(dy, i);
#elif defined(NETC_APPLY_AFFINE) && defined(NETC_RESIDUAL) && NETC_RESIDUAL
    netc_vec<ty_t, V> vr = netc_vld<ty_t, V>(res, i);
#endif
#pragma unroll
    for (int j = 0; j < V; j++) {
#if defined(NETC_ROUND_X)
      const float xv = netc_ld(netc_cv<ty_t>(netc_ld(vx.v[j]))); /* x as the narrower copy the backward reads */
#else
      const float xv = netc_ld(vx.v[j]);
#endif
      float r;
#if defined(NETC_APPLY_AFFINE)
      r = (xv - q.k[2][j]) * q.k[0][j] + q.k[1][j];
#if defined(NETC_RESIDUAL) && NETC_RESIDUAL
      r = netc_ld(netc_cv<ty_t>(r)) + netc_ld(vr.v[j]); /* rounded as the batch norm's stored output was */
#endif
#if NETC_RELU
      r = r <= 0.0f ? 0.0f : r; /* NaN stays NaN, as rt_ref_relu_fwd */
#endif
#elif defined(NETC_APPLY_BIAS)
      r = xv + q.k[0][j];
#elif defined(NETC_APPLY_SBR)
      r = xv * q.k[0][j] + q.k[1][j];
      r = r <= 0.0f ? 0.0f : r; /* NaN stays NaN, as rt_ref_relu_fwd */
#elif defined(NETC_APPLY_ABC)
      r = q.k[0][j] * netc_ld(vd.v[j]) + q.k[1][j] * xv + q.k[2][j];
#else
      float g = netc_ld(vd.v[j]);
      const float xc = xv - q.k[3][j];
#if NETC_RELU
      g = xc * q.k[0][j] + q.k[4][j] <= 0.0f ? 0.0f : g; /* rt_ref_bn_relu_mask */
#endif
      r = q.k[0][j] * g + q.k[1][j] * xc + q.k[2][j];
#endif
      vo.v[j] = netc_cv<ty_t>(r);
    }
    netc_vst<ty_t, V>(out, i, vo);
  }
}
