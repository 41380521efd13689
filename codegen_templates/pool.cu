/* pool.cu - pooling on NHWC tensors, forward and backward: max, average
 * and global average, runtime/rt_ref_pool.c's semantics (max: padding never
 * wins, NaN propagates, the first maximum in row-major window order; avg:
 * the divisor counts the padding with NETC_INCL, else only the input).
 *
 * Parameters: NETC_KERNEL_NAME; one of NETC_POOL_MAX, NETC_POOL_AVG,
 * NETC_POOL_MAX_ARG, NETC_POOL_MAX_BWD, NETC_POOL_AVG_BWD, NETC_GAP,
 * NETC_GAP_BWD defined to 1;
 * NETC_TX (storage type); the input x: NETC_N, NETC_H, NETC_W, NETC_C; the
 * output: NETC_HO, NETC_WO; the window NETC_R x NETC_S, stride NETC_SH x
 * NETC_SW, padding NETC_PH x NETC_PW (both ends), NETC_INCL; NETC_V
 * channels per vector access (C % V == 0).
 *
 * One thread per V channels of one output element (forward) or of one
 * input element (backward): the backward gathers from the windows that
 * cover its element, in the order the reference scatters (output row, then
 * column), so sums match it without atomics.  Max backward is two kernels:
 * MAX_ARG finds each window's winner once and stores it per channel as one
 * byte, its position r*S + s in the window (255: the window holds no input
 * element; R*S <= 254), then MAX_BWD compares those bytes with its own
 * position in each covering window -- not recomputing every window's
 * maximum from x for each of its elements.  With NETC_POOL_BN (MAX and
 * MAX_ARG) x is not read: it is recomputed from z (storage type NETC_TZ) as
 * relu((z - mean) * (gamma * invstd) + beta) per channel, each operation
 * rounded on its own (no fused multiply-add) and the result rounded to
 * NETC_TX: the CPU's rt_ref_bn_normalize, hence the forward's y exactly
 * (maxpool_bn_relu and maxpool_bn_relu_bwd: the stem's y is not stored).
 * With NETC_POOL_WIN (MAX with NETC_POOL_BN: maxpool_bn_relu) the forward
 * also writes each window's winner byte, the code MAX_BWD reads (255 being
 * the i8 -1 of maxpool_bwd_win's winners).  With NETC_POOL_COEF (MAX with
 * NETC_POOL_BN, no winners: maxpool_bn_relu_infer) the batch norm comes as
 * chan_finalize.cu's INFER coefficients coef[3][C] = {scale, beta, mean}
 * rather than beta, gamma, mean, invstd (k = scale: conv2d_bn's apply);
 * with NETC_POOL_Q8 (a float literal, and NETC_YCOUNT) the maxima are
 * stored as i8 quantized by that step (netc_q8, a calibrated cast's
 * arithmetic), the step after y's elements.
 * NETC_POOL_TILE (with
 * NETC_POOL_MAX and NETC_POOL_BN): one block of 256 threads per
 * NETC_POOL_TOH x NETC_POOL_TOW output pixels (times C/V, a multiple of
 * 256: each thread takes several), which first writes relu(bn(z)) of the
 * input pixels its windows cover into shared memory, each once, then
 * searches the windows there (the same values and order, hence the same
 * winners); the larger the tile, the fewer input pixels two tiles both
 * read; launch: one block per tile, N *
 * ceil(HO/TOH) * ceil(WO/TOW) blocks.  Global average: one thread per
 * (n, channel vector) adds the H*W pixels in order.
 * Launch: 1-D, 256 threads a block, any grid (grid-stride loop); with
 * NETC_POOL_TILE one block per tile (above). */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TX) || !defined(NETC_N) || !defined(NETC_H) || !defined(NETC_W) || \
    !defined(NETC_C) || !defined(NETC_V)
#error "pool.cu is a template: define NETC_KERNEL_NAME, NETC_TX, NETC_N, NETC_H, NETC_W, NETC_C, NETC_V and the op"
#endif
#if NETC_C % NETC_V != 0
#error "pool.cu: NETC_C must be a multiple of NETC_V"
#endif

typedef NETC_TX tx_t;
typedef netc_vec<tx_t, NETC_V> vec_t;
#if defined(NETC_POOL_BN)
typedef NETC_TZ tz_t;
typedef netc_vec<tz_t, NETC_V> zvec_t;
#endif
static constexpr int V = NETC_V, CV = NETC_C / NETC_V, H = NETC_H, W = NETC_W;
#if defined(NETC_POOL_Q8)
#if !defined(NETC_POOL_COEF) || !defined(NETC_YCOUNT)
#error "pool.cu: NETC_POOL_Q8 is maxpool_bn_relu_infer's: NETC_POOL_COEF and NETC_YCOUNT"
#endif
/* The pooled result's storage: i8 quantized by the step NETC_POOL_Q8 (y's
 * one scale, stored after its NETC_YCOUNT elements), else tx_t. */
typedef signed char ty_t;
__device__ __forceinline__ ty_t netc_yout(float f) { return netc_q8(f, NETC_POOL_Q8); }
#else
typedef tx_t ty_t;
__device__ __forceinline__ ty_t netc_yout(float f) { return netc_cv<tx_t>(f); }
#endif

#if defined(NETC_POOL_MAX) || defined(NETC_POOL_AVG) || defined(NETC_POOL_MAX_ARG) || defined(NETC_POOL_MAX_BWD) || \
    defined(NETC_POOL_AVG_BWD)
static constexpr int HO = NETC_HO, WO = NETC_WO, R = NETC_R, S = NETC_S, SH = NETC_SH, SW = NETC_SW, PH = NETC_PH,
                     PW = NETC_PW;

/* Element offset of x's pixel (n, h, w), in vectors. */
__device__ __forceinline__ long long pix(int n, int h, int w) { return (((long long)n * H + h) * W + w) * CV; }

/* The divisor of one window along an axis, and its rows [*lo, *hi) in the input. */
__device__ __forceinline__ int avg_span(int o, int st, int pad, int k, int in, int *lo, int *hi) {
  int a = o * st - pad, b = a + k;
  if (b > in + pad) b = in + pad;
  const int padded = b - a;
  if (a < 0) a = 0;
  if (b > in) b = in;
  *lo = a;
  *hi = b;
  return NETC_INCL ? padded : (b > a ? b - a : 0);
}
#endif

/* The work units (one thread's V channels each) and the type of their
 * index: 32 bits when every unit's index fits, so that splitting it into
 * (n, h, w, channel vector) divides by constants with a multiply and a
 * shift rather than a 64-bit sequence. */
#if defined(NETC_POOL_MAX) || defined(NETC_POOL_AVG) || defined(NETC_POOL_MAX_ARG)
static constexpr long long TOTAL = (long long)NETC_N * HO * WO * CV;
#elif defined(NETC_GAP)
static constexpr long long TOTAL = (long long)NETC_N * CV;
#else
static constexpr long long TOTAL = (long long)NETC_N * H * W * CV;
#endif
typedef netc_idx<(TOTAL <= 0xffffffffLL)>::t idx_t;

#if defined(NETC_POOL_WIN) && NETC_R * NETC_S > 127
#error "pool.cu: maxpool_bn_relu's winners are i8: R*S must be at most 127"
#endif
#if (defined(NETC_POOL_MAX_ARG) || defined(NETC_POOL_MAX_BWD)) && NETC_R * NETC_S > 254
#error "pool.cu: max-pool backward keeps window positions in a byte: R*S must be at most 254"
#endif

#if defined(NETC_POOL_BN)
/* The batch norm of channels cv*V .. cv*V+V-1: mean, gamma*invstd, beta. */
struct Bn {
  float m[NETC_V], k[NETC_V], b[NETC_V];
};
#if defined(NETC_POOL_COEF)
#if defined(NETC_POOL_WIN) || !defined(NETC_POOL_MAX)
#error "pool.cu: NETC_POOL_COEF is maxpool_bn_relu_infer's: NETC_POOL_MAX without NETC_POOL_WIN"
#endif
/* Channel vector cv's batch norm from the INFER coefficients. */
__device__ __forceinline__ Bn bn_load(const float *coef, int cv) {
  Bn bn;
#pragma unroll
  for (int j = 0; j < V; j++) {
    const int c = cv * V + j;
    bn.m[j] = coef[2 * NETC_C + c], bn.k[j] = coef[c], bn.b[j] = coef[NETC_C + c];
  }
  return bn;
}
#define NETC_BN_LOAD(cv) bn_load(coef, cv)
#else
/* Channel vector cv's batch norm from the saved statistics. */
__device__ __forceinline__ Bn bn_load(const float *beta, const float *gamma, const float *mean, const float *invstd,
                                      int cv) {
  Bn bn;
#pragma unroll
  for (int j = 0; j < V; j++) {
    const int c = cv * V + j;
    bn.m[j] = mean[c], bn.k[j] = __fmul_rn(gamma[c], invstd[c]), bn.b[j] = beta[c];
  }
  return bn;
}
#define NETC_BN_LOAD(cv) bn_load(beta, gamma, mean, invstd, cv)
#endif
/* Element j of x from z's vector v: relu(bn(z)) rounded to tx_t. */
__device__ __forceinline__ float x_of(const zvec_t &v, const Bn &bn, int j) {
  const float t = __fadd_rn(__fmul_rn(__fsub_rn(netc_ld(v.v[j]), bn.m[j]), bn.k[j]), bn.b[j]);
  return netc_ld(netc_cv<tx_t>(t <= 0.0f ? 0.0f : t)); /* NaN stays NaN, as rt_ref_relu_fwd */
}
#endif
#if defined(NETC_POOL_MAX)
/* Vector i of y: the V maxima in y's storage (with NETC_POOL_Q8, the first
 * vector's thread also writes y's step after its elements). */
__device__ __forceinline__ void store_y(ty_t *y, long long i, const float *best) {
  netc_vec<ty_t, V> out;
#pragma unroll
  for (int j = 0; j < V; j++) out.v[j] = netc_yout(best[j]);
  netc_vst<ty_t, V>(y, i, out);
#if defined(NETC_POOL_Q8)
  if (i == 0) *(float *)(y + (NETC_YCOUNT + 15) / 16 * 16) = NETC_POOL_Q8;
#endif
}
#endif
#if defined(NETC_POOL_MAX) || defined(NETC_POOL_MAX_ARG)
/* Window element f at input position pos (h*W + w) into one channel's
 * winner so far, elements taken in row-major window order: the first
 * maximum wins, a NaN wins and ends the search. */
__device__ __forceinline__ void take(float f, int pos, int &arg, float &best, bool &done) {
  if (!done && (arg < 0 || f > best || f != f)) {
    best = f;
    arg = pos;
    done = f != f;
  }
}

/* The winner byte of window (oh, ow) won by input position arg: r*S + s,
 * 255 when the window holds no input element (arg < 0). */
__device__ __forceinline__ unsigned char code_of(int arg, int oh, int ow) {
  return arg < 0 ? 255 : (unsigned char)((arg / W - (oh * SH - PH)) * S + (arg % W - (ow * SW - PW)));
}
#if defined(NETC_POOL_TILE)
#if !defined(NETC_POOL_MAX) || !defined(NETC_POOL_BN)
#error "pool.cu: NETC_POOL_TILE is maxpool_bn_relu's: NETC_POOL_MAX and NETC_POOL_BN"
#endif
/* A block's outputs: TOH x TOW pixels, all CV channel vectors; its input
 * tile TIH x TIW pixels. */
static constexpr int TOH = NETC_POOL_TOH, TOW = NETC_POOL_TOW, TIH = (TOH - 1) * SH + R, TIW = (TOW - 1) * SW + S;
static constexpr int TILES_H = (HO + TOH - 1) / TOH, TILES_W = (WO + TOW - 1) / TOW;
#if 256 % (NETC_C / NETC_V) != 0 || NETC_POOL_TOH * NETC_POOL_TOW * (NETC_C / NETC_V) % 256 != 0
#error "pool.cu: NETC_POOL_TILE needs C/V to divide 256 and TOH * TOW * C/V to be a multiple of 256"
#endif
#endif

/* Winner h*W + w of channel j of window (oh, ow), or -1 when the window
 * holds no input element; best[j] its value.  fetch(ih, iw, f) gives the
 * V values of input pixel (ih, iw) the search compares. */
template <typename Fetch>
__device__ __forceinline__ void window_search(int oh, int ow, int *arg, float *best, const Fetch &fetch) {
  bool done[V];
#pragma unroll
  for (int j = 0; j < V; j++) {
    arg[j] = -1;
    best[j] = -__int_as_float(0x7f800000);
    done[j] = false;
  }
  for (int r = 0; r < R; r++) {
    const int ih = oh * SH - PH + r;
    if (ih < 0 || ih >= H) continue;
    for (int s = 0; s < S; s++) {
      const int iw = ow * SW - PW + s;
      if (iw < 0 || iw >= W) continue;
      float f[V];
      fetch(ih, iw, f);
#pragma unroll
      for (int j = 0; j < V; j++) take(f[j], ih * W + iw, arg[j], best[j], done[j]);
    }
  }
}

/* window_search of window (n, oh, ow), channel vector cv, from x, or (BN)
 * from z as relu(bn(z)). */
#if defined(NETC_POOL_BN)
__device__ __forceinline__ void window_max(const tz_t *x, int n, int oh, int ow, int cv, int *arg, float *best,
                                           const Bn &bn) {
  window_search(oh, ow, arg, best, [&](int ih, int iw, float *f) {
    const zvec_t v = netc_vld<tz_t, V>(x, pix(n, ih, iw) + cv);
#pragma unroll
    for (int j = 0; j < V; j++) f[j] = x_of(v, bn, j);
  });
}
#else
__device__ __forceinline__ void window_max(const tx_t *x, int n, int oh, int ow, int cv, int *arg, float *best) {
  window_search(oh, ow, arg, best, [&](int ih, int iw, float *f) {
    const vec_t v = netc_vld<tx_t, V>(x, pix(n, ih, iw) + cv);
#pragma unroll
    for (int j = 0; j < V; j++) f[j] = netc_ld(v.v[j]);
  });
}
#endif
#if defined(NETC_POOL_TILE)
/* window_search from a block's tile of relu(bn(z)) (its pixel (0, 0) is
 * input pixel (ih0, iw0), TIW pixels a row). */
__device__ __forceinline__ void window_max_tile(const vec_t *tile, int ih0, int iw0, int oh, int ow, int cv, int *arg,
                                                float *best) {
  window_search(oh, ow, arg, best, [&](int ih, int iw, float *f) {
    const vec_t v = tile[((ih - ih0) * TIW + (iw - iw0)) * CV + cv];
#pragma unroll
    for (int j = 0; j < V; j++) f[j] = netc_ld(v.v[j]);
  });
}
#endif
#endif

extern "C" __global__ void __launch_bounds__(256)
#if defined(NETC_POOL_MAX) && defined(NETC_POOL_BN) && defined(NETC_POOL_COEF)
NETC_KERNEL_NAME(const tz_t *__restrict__ x, const float *__restrict__ coef, ty_t *__restrict__ y)
#elif defined(NETC_POOL_MAX) && defined(NETC_POOL_BN) && defined(NETC_POOL_WIN)
NETC_KERNEL_NAME(const tz_t *__restrict__ x, const float *__restrict__ beta, const float *__restrict__ gamma,
                 const float *__restrict__ mean, const float *__restrict__ invstd, tx_t *__restrict__ y,
                 unsigned char *__restrict__ code)
#elif defined(NETC_POOL_MAX) && defined(NETC_POOL_BN)
NETC_KERNEL_NAME(const tz_t *__restrict__ x, const float *__restrict__ beta, const float *__restrict__ gamma,
                 const float *__restrict__ mean, const float *__restrict__ invstd, tx_t *__restrict__ y)
#elif defined(NETC_POOL_MAX) || defined(NETC_POOL_AVG) || defined(NETC_GAP)
NETC_KERNEL_NAME(const tx_t *__restrict__ x, tx_t *__restrict__ y)
#elif defined(NETC_POOL_MAX_ARG) && defined(NETC_POOL_BN)
NETC_KERNEL_NAME(const tz_t *__restrict__ x, const float *__restrict__ beta, const float *__restrict__ gamma,
                 const float *__restrict__ mean, const float *__restrict__ invstd, unsigned char *__restrict__ code)
#elif defined(NETC_POOL_MAX_ARG)
NETC_KERNEL_NAME(const tx_t *__restrict__ x, unsigned char *__restrict__ code)
#elif defined(NETC_POOL_MAX_BWD)
NETC_KERNEL_NAME(const tx_t *__restrict__ dy, const unsigned char *__restrict__ code, tx_t *__restrict__ dx)
#elif defined(NETC_POOL_AVG_BWD) || defined(NETC_GAP_BWD)
NETC_KERNEL_NAME(const tx_t *__restrict__ dy, tx_t *__restrict__ dx)
#else
#error "pool.cu: define one of NETC_POOL_MAX, NETC_POOL_AVG, NETC_POOL_MAX_ARG, NETC_POOL_MAX_BWD, NETC_POOL_AVG_BWD, NETC_GAP, NETC_GAP_BWD"
#endif
#if defined(NETC_POOL_TILE)
{
  /* block b: tile (n, th, tw); its input tile normalized into shared memory
   * once (each input pixel is in up to four 3x3/2 windows), then each
   * thread takes output pixels 256 / CV apart, at its channel vector */
  __shared__ vec_t tile[TIH * TIW * CV];
  const int b = blockIdx.x, tw = b % TILES_W, th = b / TILES_W % TILES_H, n = b / (TILES_W * TILES_H);
  const int oh0 = th * TOH, ow0 = tw * TOW, ih0 = oh0 * SH - PH, iw0 = ow0 * SW - PW;
  const int cv = threadIdx.x % CV; /* the same in every loop below: 256 % CV == 0 */
  const Bn bn = NETC_BN_LOAD(cv);
  for (int t = threadIdx.x; t < TIH * TIW * CV; t += 256) {
    const int q = t / CV, ih = ih0 + q / TIW, iw = iw0 + q % TIW;
    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
    const zvec_t v = netc_vld<tz_t, V>(x, pix(n, ih, iw) + cv);
    vec_t a;
#pragma unroll
    for (int j = 0; j < V; j++) a.v[j] = netc_cv<tx_t>(x_of(v, bn, j));
    tile[t] = a;
  }
  __syncthreads();
  for (int t = threadIdx.x; t < TOH * TOW * CV; t += 256) {
    const int q = t / CV, oh = oh0 + q / TOW, ow = ow0 + q % TOW;
    if (oh >= HO || ow >= WO) continue;
    int arg[V];
    float best[V];
    window_max_tile(tile, ih0, iw0, oh, ow, cv, arg, best);
    const long long i = (((long long)n * HO + oh) * WO + ow) * CV + cv;
    store_y(y, i, best);
#if defined(NETC_POOL_WIN)
    netc_vec<unsigned char, V> won;
#pragma unroll
    for (int j = 0; j < V; j++) won.v[j] = code_of(arg[j], oh, ow);
    netc_vst<unsigned char, V>(code, i, won);
#endif
  }
}
#else
{
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < TOTAL; i += stride) {
    const idx_t u = (idx_t)i;
    const int cv = (int)(u % CV);
    vec_t out;
#if defined(NETC_POOL_MAX) || defined(NETC_POOL_MAX_ARG)
    const idx_t p = u / CV;
    const int ow = (int)(p % WO), oh = (int)(p / WO % HO), n = (int)(p / ((idx_t)WO * HO));
    int arg[V];
    float best[V];
#if defined(NETC_POOL_BN)
    const Bn bn = NETC_BN_LOAD(cv);
    window_max(x, n, oh, ow, cv, arg, best, bn);
#else
    window_max(x, n, oh, ow, cv, arg, best);
#endif
    (void)out;
#if defined(NETC_POOL_MAX)
    store_y(y, i, best);
#endif
#if defined(NETC_POOL_MAX_ARG) || defined(NETC_POOL_WIN)
    netc_vec<unsigned char, V> won;
#pragma unroll
    for (int j = 0; j < V; j++) won.v[j] = code_of(arg[j], oh, ow);
    netc_vst<unsigned char, V>(code, i, won);
#endif
#elif defined(NETC_POOL_AVG)
    const idx_t p = u / CV;
    const int ow = (int)(p % WO), oh = (int)(p / WO % HO), n = (int)(p / ((idx_t)WO * HO));
    int h0, h1, w0, w1;
    const int dh = avg_span(oh, SH, PH, R, H, &h0, &h1), dw = avg_span(ow, SW, PW, S, W, &w0, &w1);
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; j++) acc[j] = 0.0f;
    for (int ih = h0; ih < h1; ih++)
      for (int iw = w0; iw < w1; iw++) {
        vec_t v = netc_vld<tx_t, V>(x, pix(n, ih, iw) + cv);
#pragma unroll
        for (int j = 0; j < V; j++) acc[j] += netc_ld(v.v[j]);
      }
    const long long cnt = (long long)dh * dw;
#pragma unroll
    for (int j = 0; j < V; j++) out.v[j] = netc_cv<tx_t>(cnt > 0 ? acc[j] / (float)cnt : 0.0f);
    netc_vst<tx_t, V>(y, i, out);
#elif defined(NETC_POOL_MAX_BWD) || defined(NETC_POOL_AVG_BWD)
    const idx_t p = u / CV;
    const int iw = (int)(p % W), ih = (int)(p / W % H), n = (int)(p / ((idx_t)W * H));
    float acc[V];
#if defined(NETC_POOL_MAX_BWD)
    netc_pool_gather<H, W, HO, WO, R, S, SH, SW, PH, PW, CV, V>(dy, code, n, ih, iw, cv, acc);
#else
    int oh0, oh1, ow0, ow1;
    netc_pool_cover<R, SH, PH, HO>(ih, oh0, oh1);
    netc_pool_cover<S, SW, PW, WO>(iw, ow0, ow1);
#pragma unroll
    for (int j = 0; j < V; j++) acc[j] = 0.0f;
    for (int oh = oh0; oh <= oh1; oh++)
      for (int ow = ow0; ow <= ow1; ow++) {
        vec_t g = netc_vld<tx_t, V>(dy, (((long long)n * HO + oh) * WO + ow) * CV + cv);
        int h0, h1, w0, w1;
        const long long cnt =
            (long long)avg_span(oh, SH, PH, R, H, &h0, &h1) * avg_span(ow, SW, PW, S, W, &w0, &w1);
        if (cnt <= 0) continue;
#pragma unroll
        for (int j = 0; j < V; j++) acc[j] += netc_ld(g.v[j]) / (float)cnt;
      }
#endif
#pragma unroll
    for (int j = 0; j < V; j++) out.v[j] = netc_cv<tx_t>(acc[j]);
    netc_vst<tx_t, V>(dx, i, out);
#elif defined(NETC_GAP)
    const int n = (int)(u / CV);
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; j++) acc[j] = 0.0f;
    for (long long q = 0; q < (long long)H * W; q++) {
      vec_t v = netc_vld<tx_t, V>(x, ((long long)n * H * W + q) * CV + cv);
#pragma unroll
      for (int j = 0; j < V; j++) acc[j] += netc_ld(v.v[j]);
    }
#pragma unroll
    for (int j = 0; j < V; j++) out.v[j] = netc_cv<tx_t>(acc[j] / (float)(H * W));
    netc_vst<tx_t, V>(y, i, out);
#else
    const int n = (int)(u / CV / ((idx_t)H * W));
    const float inv = 1.0f / (float)(H * W);
    vec_t g = netc_vld<tx_t, V>(dy, (long long)n * CV + cv);
#pragma unroll
    for (int j = 0; j < V; j++) out.v[j] = netc_cv<tx_t>(netc_ld(g.v[j]) * inv);
    netc_vst<tx_t, V>(dx, i, out);
#endif
  }
}
#endif
