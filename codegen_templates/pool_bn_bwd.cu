/* pool_bn_bwd.cu - batchnorm_relu_bwd_win's two passes over z, by cells:
 * the batch norm + relu backward of a max pool's input gradient that is
 * gathered from the pool's output gradient dy and its winner bytes, never
 * stored.  The same values as chan_reduce.cu's NETC_RED_BWD and
 * chan_apply.cu's NETC_APPLY_BWD with NETC_GATHER, each element's gradient
 * netc_pool_gather's sum (common.cu: the same windows in the same order)
 * rounded to NETC_TG; but a thread takes a whole cell of SH x SW pixels of
 * z (from (ch*SH, cw*SW); at most NWH x NWW windows cover one, whatever the
 * padding), loads those windows at once, and gathers all its pixels'
 * gradients from them:
 * a 3x3/2 pool's cell is 2x2 pixels under 2x2 windows, 8 loads for 4
 * pixels where gathering pixel by pixel made 18 dependent ones (a third of
 * the memory bandwidth).
 *
 *   NETC_PBB_SUMS   part[g*C + c] = sum g, part[G*C + g*C + c] = sum g *
 *                   (z - mean) * invstd over block g's cells, g masked by
 *                   (z - mean) * (float)(gamma*invstd) + beta > 0 (as
 *                   chan_reduce.cu; chan_finalize.cu NETC_FIN_BWD follows)
 *   NETC_PBB_APPLY  dz = coef[c]*g' + coef[C+c]*(z - mean[c]) + coef[2C+c],
 *                   g' = g masked by (z - mean[c])*coef[c] + coef[3C+c] > 0
 *                   (as chan_apply.cu), rounded to NETC_TY
 *
 * Parameters: NETC_KERNEL_NAME, the pass; NETC_TX (z), NETC_TG (dy),
 * NETC_TY (dz, APPLY); z is [NETC_N, NETC_H, NETC_W, NETC_C], dy
 * [N, NETC_HO, NETC_WO, C]; the window NETC_R x NETC_S, stride NETC_SH x
 * NETC_SW, padding NETC_PH x NETC_PW; NETC_V channels a vector (C/V must
 * divide 256).
 * Launch: 1-D, blocks of 256 threads, any grid (grid-stride over cells x
 * channel vectors; SUMS writes one partial a block and channel).  A
 * thread keeps one channel vector (256 % (C/V) == 0). */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TX) || !defined(NETC_TG) || !defined(NETC_TY) || !defined(NETC_N) || \
    !defined(NETC_H) || !defined(NETC_W) || !defined(NETC_HO) || !defined(NETC_WO) || !defined(NETC_C) ||           \
    !defined(NETC_V) || !defined(NETC_R) || !defined(NETC_S) || !defined(NETC_SH) || !defined(NETC_SW) ||             \
    !defined(NETC_PH) || !defined(NETC_PW)
#error "pool_bn_bwd.cu is a template: define NETC_KERNEL_NAME, NETC_TX, NETC_TG, NETC_TY, the shapes and the window"
#endif
#if NETC_R * NETC_S > 254
#error "pool_bn_bwd.cu: winner bytes hold window positions below 255: R*S must be at most 254"
#endif
#if NETC_C % NETC_V != 0 || 256 % (NETC_C / NETC_V) != 0
#error "pool_bn_bwd.cu: C must be a multiple of V, and C/V divide 256"
#endif

typedef NETC_TX tx_t;
typedef NETC_TG tg_t;
static constexpr int V = NETC_V, C = NETC_C, CV = NETC_C / NETC_V, H = NETC_H, W = NETC_W, HO = NETC_HO, WO = NETC_WO;
static constexpr int R = NETC_R, S = NETC_S, SH = NETC_SH, SW = NETC_SW, PH = NETC_PH, PW = NETC_PW;
/* cells of SH x SW pixels; at most NWH x NWW windows cover one */
static constexpr int CH = (H + SH - 1) / SH, CW = (W + SW - 1) / SW, NWH = (SH + R - 2) / SH + 1,
                     NWW = (SW + S - 2) / SW + 1;
static constexpr long long UNITS = (long long)NETC_N * CH * CW * CV;
/* a unit's index in 32 bits when they all fit (netc_idx, common.cu) */
typedef netc_idx<(UNITS <= 0xffffffffLL)>::t idx_t;

/* The gradients of cell (n, ch, cw)'s pixels, channel vector cv: each
 * netc_pool_gather's sum over the windows below, rounded to tg_t (pixels
 * outside z get 0). */
__device__ __forceinline__ void cell_gather(const tg_t *dy, const unsigned char *code, int n, int ch, int cw, int cv,
                                            float g[SH][SW][V]) {
  int oh0, ow0, unused;
  netc_pool_cover<R, SH, PH, HO>(ch * SH, oh0, unused);
  netc_pool_cover<S, SW, PW, WO>(cw * SW, ow0, unused);
  netc_vec<tg_t, V> d[NWH][NWW];
  netc_vec<unsigned char, V> won[NWH][NWW];
#pragma unroll
  for (int a = 0; a < NWH; a++)
#pragma unroll
    for (int b = 0; b < NWW; b++) {
      const int oh = oh0 + a, ow = ow0 + b;
      if (oh < HO && ow < WO) {
        const long long o = (((long long)n * HO + oh) * WO + ow) * CV + cv;
        d[a][b] = netc_vld<tg_t, V>(dy, o);
        won[a][b] = netc_vld<unsigned char, V>(code, o);
      } else { /* no such window: its byte matches no position */
#pragma unroll
        for (int j = 0; j < V; j++) won[a][b].v[j] = 255, d[a][b].v[j] = netc_cv<tg_t>(0.0f);
      }
    }
#pragma unroll
  for (int y = 0; y < SH; y++)
#pragma unroll
    for (int x = 0; x < SW; x++) {
      const int ih = ch * SH + y, iw = cw * SW + x;
      float acc[V];
#pragma unroll
      for (int j = 0; j < V; j++) acc[j] = 0.0f;
#pragma unroll
      for (int a = 0; a < NWH; a++)
#pragma unroll
        for (int b = 0; b < NWW; b++) {
          const int r = ih - ((oh0 + a) * SH - PH), s = iw - ((ow0 + b) * SW - PW);
          if (r < 0 || r >= R || s < 0 || s >= S) continue; /* window (a, b) does not cover the pixel */
#pragma unroll
          for (int j = 0; j < V; j++)
            if (won[a][b].v[j] == r * S + s) acc[j] += netc_ld(d[a][b].v[j]);
        }
#pragma unroll
      for (int j = 0; j < V; j++) g[y][x][j] = netc_ld(netc_cv<tg_t>(acc[j]));
    }
}

extern "C" __global__ void __launch_bounds__(256)
#if defined(NETC_PBB_SUMS)
NETC_KERNEL_NAME(const tg_t *__restrict__ dy, const unsigned char *__restrict__ code, const tx_t *__restrict__ x,
                 const float *__restrict__ gamma, const float *__restrict__ beta, const float *__restrict__ mean,
                 const float *__restrict__ invstd, float *__restrict__ part)
#elif defined(NETC_PBB_APPLY)
NETC_KERNEL_NAME(const tg_t *__restrict__ dy, const unsigned char *__restrict__ code, const tx_t *__restrict__ x,
                 const float *__restrict__ mean, const float *__restrict__ coef, NETC_TY *__restrict__ out)
#else
#error "pool_bn_bwd.cu: define NETC_PBB_SUMS or NETC_PBB_APPLY"
#endif
{
  const int cv = threadIdx.x % CV; /* fixed: the stride is a multiple of 256, C/V divides 256 */
  float k[5][V];
#pragma unroll
  for (int j = 0; j < V; j++) {
    const int c = cv * V + j;
#if defined(NETC_PBB_SUMS)
    k[0][j] = mean[c], k[1][j] = invstd[c], k[2][j] = (float)((double)gamma[c] * k[1][j]), k[3][j] = beta[c];
#else
    k[0][j] = coef[c], k[1][j] = coef[C + c], k[2][j] = coef[2 * C + c], k[3][j] = mean[c], k[4][j] = coef[3 * C + c];
#endif
  }
#if defined(NETC_PBB_SUMS)
  float s1[V], s2[V];
#pragma unroll
  for (int j = 0; j < V; j++) s1[j] = s2[j] = 0.0f;
#endif
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x; u < UNITS; u += stride) {
    const idx_t cell = (idx_t)u / CV;
    const int cw = (int)(cell % CW), ch = (int)(cell / CW % CH), n = (int)(cell / ((idx_t)CW * CH));
    float g[SH][SW][V];
    cell_gather(dy, code, n, ch, cw, cv, g);
#pragma unroll
    for (int py = 0; py < SH; py++)
#pragma unroll
      for (int px = 0; px < SW; px++) {
        const int ih = ch * SH + py, iw = cw * SW + px;
        if (ih >= H || iw >= W) continue;
        const long long at = (((long long)n * H + ih) * W + iw) * CV + cv;
        const netc_vec<tx_t, V> vx = netc_vld<tx_t, V>(x, at);
#if defined(NETC_PBB_SUMS)
#pragma unroll
        for (int j = 0; j < V; j++) {
          const float xc = netc_ld(vx.v[j]) - k[0][j];
          const float gm = xc * k[2][j] + k[3][j] <= 0.0f ? 0.0f : g[py][px][j]; /* rt_ref_bn_relu_mask */
          s1[j] += gm;
          s2[j] += gm * (xc * k[1][j]);
        }
#else
        netc_vec<NETC_TY, V> vo;
#pragma unroll
        for (int j = 0; j < V; j++) {
          const float xc = netc_ld(vx.v[j]) - k[3][j];
          const float gm = xc * k[0][j] + k[4][j] <= 0.0f ? 0.0f : g[py][px][j];
          vo.v[j] = netc_cv<NETC_TY>(k[0][j] * gm + k[1][j] * xc + k[2][j]);
        }
        netc_vst<NETC_TY, V>(out, at, vo);
#endif
      }
  }
#if defined(NETC_PBB_SUMS)
  /* the 256/CV threads of each channel vector add up in a fixed order */
  __shared__ float sh[2][256 / CV][C];
#pragma unroll
  for (int j = 0; j < V; j++) sh[0][threadIdx.x / CV][cv * V + j] = s1[j], sh[1][threadIdx.x / CV][cv * V + j] = s2[j];
  __syncthreads();
  for (int i = threadIdx.x; i < 2 * C; i += 256) {
    const int which = i / C, c = i % C;
    float s = 0.0f;
    for (int r = 0; r < 256 / CV; r++) s += sh[which][r][c];
    part[(long long)which * gridDim.x * C + (long long)blockIdx.x * C + c] = s;
  }
#endif
}
