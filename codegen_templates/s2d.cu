/* s2d.cu - a strided convolution on few channels as a stride-1 one on
 * four times as many (space to depth): the ResNet stem's 7x7/2 on 4 padded
 * channels becomes a 4x4/1 on 16, which cuDNN runs about twice as fast.
 *
 * With P the input padded by NETC_PH / NETC_PW zeros on each side, output
 * pixel (i, j) of a stride-2 convolution reads P rows 2i .. 2i+R-1.  Q, P
 * folded by 2x2 blocks into channels (Q[a][b][(p*2+q)*C + c] =
 * P[2a+p][2b+q][c]), holds them in rows i .. i+R'-1, R' = ceil(R/2): the
 * same sums as a valid stride-1 convolution of Q by W', W' the filter
 * folded the same way with zeros past R and S.
 *
 *   NETC_S2D_X   x [N, H, W, C] -> Q [N, HQ, WQ, 4C] (zero padding included)
 *   NETC_S2D_W   w [K, R, S, C] -> W' [K, R', S', 4C]
 *   NETC_S2D_DW  dW' [K, R', S', 4C] -> dw [K, R, S, C] (W''s adjoint: the
 *                entries past R and S, which no weight feeds, are dropped)
 *
 * Parameters: NETC_KERNEL_NAME, the op (defined to 1), NETC_TX (storage
 * type), NETC_N (N for X, K for the filters), NETC_H, NETC_W (H, W or R, S
 * of the unfolded tensor), NETC_C, NETC_HQ, NETC_WQ (folded rows and
 * columns), NETC_PH, NETC_PW (padding; 0 for the filters).  One thread per
 * element of the result (a pixel's C channels at once when C is 1, 2 or 4),
 * in its order (writes coalesced; the reads of a warp stay within a few
 * rows).  Launch: 1-D, 256 threads, any grid. */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TX) || !defined(NETC_N) || !defined(NETC_H) || !defined(NETC_W) || \
    !defined(NETC_C) || !defined(NETC_HQ) || !defined(NETC_WQ) || !defined(NETC_PH) || !defined(NETC_PW)
#error "s2d.cu is a template: define NETC_KERNEL_NAME, NETC_TX, NETC_N, NETC_H, NETC_W, NETC_C, NETC_HQ, NETC_WQ, NETC_PH, NETC_PW and one op"
#endif

typedef NETC_TX tx_t;
static constexpr long long N = NETC_N, H = NETC_H, W = NETC_W, C = NETC_C, HQ = NETC_HQ, WQ = NETC_WQ;

#if !defined(NETC_S2D_X) && !defined(NETC_S2D_W) && !defined(NETC_S2D_DW)
#error "s2d.cu: define NETC_S2D_X, NETC_S2D_W or NETC_S2D_DW"
#endif

extern "C" __global__ void __launch_bounds__(256)
NETC_KERNEL_NAME(const tx_t *__restrict__ src, tx_t *__restrict__ dst) {
  const long long stride = (long long)gridDim.x * blockDim.x;
#if defined(NETC_S2D_DW)
  const long long total = N * H * W * C;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    long long r = i;
    const long long c = r % C;
    r /= C;
    const long long s = r % W;
    r /= W;
    const long long rr = r % H, k = r / H;
    dst[i] = src[((k * HQ + rr / 2) * WQ + s / 2) * 4 * C + ((rr % 2) * 2 + s % 2) * C + c];
  }
#else
  /* V channels a thread: C itself when it is 1, 2 or 4 (one 4-, 8- or
   * 16-byte access of a pixel's channels), else 1 */
  constexpr int V = C == 1 || C == 2 || C == 4 ? (int)C : 1;
  constexpr long long CV = C / V;
  const long long total = N * HQ * WQ * 4 * CV; /* vectors of the result */
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    long long r = i;
    const long long cv = r % CV;
    r /= CV;
    const long long pq = r % 4;
    r /= 4;
    const long long b = r % WQ;
    r /= WQ;
    const long long a = r % HQ, n = r / HQ;
    const long long h = 2 * a + pq / 2 - NETC_PH, w = 2 * b + pq % 2 - NETC_PW;
    netc_vec<tx_t, V> v;
    if (h >= 0 && h < H && w >= 0 && w < W) {
      v = netc_vld<tx_t, V>(src, ((n * H + h) * W + w) * CV + cv);
    } else {
#pragma unroll
      for (int j = 0; j < V; j++) v.v[j] = netc_cv<tx_t>(0.0f);
    }
    netc_vst<tx_t, V>(dst, i, v);
  }
#endif
}
