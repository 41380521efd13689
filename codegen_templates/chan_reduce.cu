/* chan_reduce.cu - per-channel partial sums over the rows of a channels-last
 * tensor ([ROWS, C]: NHWC with ROWS = N*H*W, or an [N, C] matrix): the
 * first pass of batch-norm statistics, of the batch-norm backward, and of
 * channel_sum.  chan_finalize.cu adds the partials up.
 *
 * Parameters (#defines):
 *   NETC_KERNEL_NAME
 *   NETC_RED_STATS | NETC_RED_BWD | NETC_RED_SUM  the op, defined to 1
 *   NETC_RELU    BWD: 1 to mask dy by the batch norm's output, recomputed from
 *                x: (x - mean) * (float)(gamma*invstd) + beta > 0
 *                (batchnorm_relu_bwd), else 0
 *   NETC_TX      storage type of x (float, netc_f16, netc_bf16)
 *   NETC_TG      storage type of dy (BWD, SUM; default NETC_TX: the f32
 *                stem's batch norm reads an f16 gradient)
 *   NETC_RED_COPY  STATS: also write every element of x it reads, rounded
 *                to NETC_TC (netc_cv: to nearest even, as cast.cu), into a
 *                kernel parameter xc after part, shaped like x (the f32
 *                stem's z and its f16 copy zc: conv2d_bn_stats, x read once)
 *   NETC_ROWS, NETC_C   the tensor's shape
 *   NETC_V       channels per vector access (C % V == 0; at most 16 bytes of
 *                either type)
 *   NETC_BX, NETC_BY    block shape: x over channel vectors, y over rows
 *   NETC_GATHER  BWD: dy is a max pool's output gradient (a kernel parameter
 *                code after dy: its winner bytes), gathered per element of x
 *                by netc_pool_gather (common.cu) and rounded to NETC_TG, as
 *                maxpool_bwd_win stores it (batchnorm_relu_bwd_win); x is
 *                the pool's input [N, NETC_H, NETC_W, C], the pool's output
 *                NETC_HO x NETC_WO, its window NETC_R x NETC_S, stride
 *                NETC_SH x NETC_SW, padding NETC_PH x NETC_PW
 *
 * Launch: grid (G, ceil(C/V / BX)), block (BX, BY); block (g, t) sums rows
 * g*BY + ty, stepping G*BY, of channel vector t*BX + tx, then the BY row
 * partials of the block are added in shared memory (in a fixed order:
 * deterministic, no atomics) into part[g*C + c] and part[G*C + g*C + c]:
 *
 *   op     part (first)             part (second)
 *   STATS  sum (x - x[0,c])         sum (x - x[0,c])^2   (shifted by the first row,
 *                                   so a large mean does not cancel the variance)
 *   BWD    sum g                    sum g * (x - mean[c]) * invstd[c],
 *                                   g = dy (masked with RELU, above)
 *   SUM    sum dy                   -
 *
 * Sums are f32 within a block; chan_finalize.cu adds blocks in f64. */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TX) || !defined(NETC_ROWS) || !defined(NETC_C) || \
    !defined(NETC_V) || !defined(NETC_BX) || !defined(NETC_BY)
#error "chan_reduce.cu is a template: define NETC_KERNEL_NAME, NETC_TX, NETC_ROWS, NETC_C, NETC_V, NETC_BX, NETC_BY"
#endif
#if NETC_C % NETC_V != 0
#error "chan_reduce.cu: NETC_C must be a multiple of NETC_V"
#endif

typedef NETC_TX tx_t;
#if defined(NETC_TG)
typedef NETC_TG tg_t;
#else
typedef tx_t tg_t;
#endif
#if defined(NETC_RED_COPY)
#if !defined(NETC_RED_STATS) || !defined(NETC_TC)
#error "chan_reduce.cu: NETC_RED_COPY goes with NETC_RED_STATS and needs NETC_TC"
#endif
typedef NETC_TC tc_t;
#endif
static constexpr long long rows = NETC_ROWS;
static constexpr int C = NETC_C, V = NETC_V, CV = NETC_C / NETC_V;
#if defined(NETC_RED_SUM)
static constexpr int NSUM = 1;
#else
static constexpr int NSUM = 2;
#endif
#if defined(NETC_GATHER)
/* The gradient at row r (pixel (n, ih, iw) of x), channel vector cv. */
__device__ __forceinline__ netc_vec<tg_t, V> gathered(const tg_t *dy, const unsigned char *code, long long r, int cv) {
  return netc_pool_gather_at<NETC_H, NETC_W, NETC_HO, NETC_WO, NETC_R, NETC_S, NETC_SH, NETC_SW, NETC_PH, NETC_PW, CV,
                             V>(dy, code, (unsigned)r, cv);
}
#if NETC_ROWS > 0xffffffffLL
#error "chan_reduce.cu: NETC_GATHER needs fewer than 2^32 rows"
#endif
#endif

extern "C" __global__ void __launch_bounds__(NETC_BX *NETC_BY)
#if defined(NETC_RED_STATS) && defined(NETC_RED_COPY)
NETC_KERNEL_NAME(const tx_t *__restrict__ x, float *__restrict__ part, tc_t *__restrict__ xc)
#elif defined(NETC_RED_STATS)
NETC_KERNEL_NAME(const tx_t *__restrict__ x, float *__restrict__ part)
#elif defined(NETC_RED_BWD) && defined(NETC_GATHER)
NETC_KERNEL_NAME(const tg_t *__restrict__ dy, const unsigned char *__restrict__ code, const tx_t *__restrict__ x,
                 const float *__restrict__ gamma, const float *__restrict__ beta, const float *__restrict__ mean,
                 const float *__restrict__ invstd, float *__restrict__ part)
#elif defined(NETC_RED_BWD)
NETC_KERNEL_NAME(const tg_t *__restrict__ dy, const tx_t *__restrict__ x, const float *__restrict__ gamma,
                 const float *__restrict__ beta, const float *__restrict__ mean, const float *__restrict__ invstd,
                 float *__restrict__ part)
#elif defined(NETC_RED_SUM)
NETC_KERNEL_NAME(const tg_t *__restrict__ dy, float *__restrict__ part)
#else
#error "chan_reduce.cu: define NETC_RED_STATS, NETC_RED_BWD or NETC_RED_SUM"
#endif
{
  __shared__ float sh[NSUM][NETC_BY][NETC_BX * NETC_V];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int cv = blockIdx.y * NETC_BX + tx;
  const bool active = cv < CV;
  float s1[V], s2[V];
#pragma unroll
  for (int j = 0; j < V; j++) s1[j] = s2[j] = 0.0f;
  if (active) {
#if defined(NETC_RED_STATS)
    float k0[V]; /* the shift: row 0 */
    netc_vec<tx_t, V> first = netc_vld<tx_t, V>(x, cv);
#pragma unroll
    for (int j = 0; j < V; j++) k0[j] = netc_ld(first.v[j]);
#elif defined(NETC_RED_BWD)
    float k0[V], k1[V]; /* mean, invstd */
#if NETC_RELU
    float ks[V], kb[V]; /* the forward's scale gamma*invstd and beta: the relu's mask */
#endif
#pragma unroll
    for (int j = 0; j < V; j++) {
      k0[j] = mean[cv * V + j];
      k1[j] = invstd[cv * V + j];
#if NETC_RELU
      ks[j] = (float)((double)gamma[cv * V + j] * k1[j]);
      kb[j] = beta[cv * V + j];
#endif
    }
#endif
    for (long long r = (long long)blockIdx.x * NETC_BY + ty; r < rows; r += (long long)gridDim.x * NETC_BY) {
      const long long at = r * CV + cv;
#if defined(NETC_RED_STATS)
      netc_vec<tx_t, V> vx = netc_vld<tx_t, V>(x, at);
#pragma unroll
      for (int j = 0; j < V; j++) {
        const float d = netc_ld(vx.v[j]) - k0[j];
        s1[j] += d;
        s2[j] += d * d;
      }
#if defined(NETC_RED_COPY)
      netc_vec<tc_t, V> vc;
#pragma unroll
      for (int j = 0; j < V; j++) vc.v[j] = netc_cv<tc_t>(netc_ld(vx.v[j]));
      netc_vst<tc_t, V>(xc, at, vc);
#endif
#elif defined(NETC_RED_BWD)
#if defined(NETC_GATHER)
      netc_vec<tg_t, V> vd = gathered(dy, code, r, cv);
#else
      netc_vec<tg_t, V> vd = netc_vld<tg_t, V>(dy, at);
#endif
      netc_vec<tx_t, V> vx = netc_vld<tx_t, V>(x, at);
#pragma unroll
      for (int j = 0; j < V; j++) {
        float g = netc_ld(vd.v[j]);
        const float xc = netc_ld(vx.v[j]) - k0[j];
#if NETC_RELU
        g = xc * ks[j] + kb[j] <= 0.0f ? 0.0f : g; /* rt_ref_bn_relu_mask: NaN passes g */
#endif
        s1[j] += g;
        s2[j] += g * (xc * k1[j]);
      }
#else
      netc_vec<tg_t, V> vd = netc_vld<tg_t, V>(dy, at);
#pragma unroll
      for (int j = 0; j < V; j++) s1[j] += netc_ld(vd.v[j]);
#endif
    }
  }
#pragma unroll
  for (int j = 0; j < V; j++) {
    sh[0][ty][tx * V + j] = s1[j];
    if (NSUM > 1) sh[NSUM - 1][ty][tx * V + j] = s2[j];
  }
  __syncthreads();
  /* the first BX*V*NSUM threads add the BY rows of one column each */
  const int t = ty * NETC_BX + tx;
  if (t < NSUM * NETC_BX * V) {
    const int which = t / (NETC_BX * V), col = t % (NETC_BX * V);
    const int c = blockIdx.y * NETC_BX * V + col;
    if (c < C) {
      float s = 0.0f;
      for (int i = 0; i < NETC_BY; i++) s += sh[which][i][col];
      part[(long long)which * gridDim.x * C + (long long)blockIdx.x * C + c] = s;
    }
  }
}
