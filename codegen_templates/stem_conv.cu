/* stem_conv.cu - a strided convolution on four channels (ResNet's
 * inference stem in f16) on tensor cores: folded 2x2 into a
 * stride-1 convolution on 16 channels (s2d.cu's comment has the
 * arithmetic) as it is staged in shared memory, so neither the folded
 * input nor the folded filter is ever stored, and summed by mma.sync
 * m16n8k16 with f32 accumulation.
 *
 * Each folded pixel's 16 channels are 32 bytes: one tap of the folded
 * filter (R' x S' taps of 16 channels) is one k-step of 16, and an A
 * fragment (16 output pixels of a row by 16 channels) is read straight from
 * the staged input rows by ldmatrix, without an im2col copy.  Pixels and
 * filter rows sit 48 bytes apart in shared memory (16 halves and 8 of
 * padding), which spreads ldmatrix's eight 16-byte rows over all 32 banks.
 *
 * A block is persistent: it stages the whole folded filter once
 * ([tap][k][16], TAPS * K * 48 bytes), then takes items of ROWS output rows
 * of one image: stages the ROWS + R' - 1 folded input rows they read, then
 * each warp computes 16 output columns of those rows by all K channels
 * (ROWS x K/8 accumulator tiles of 16 x 8) and stores them.
 *
 *   x [N, H, W, 4] (NHWC), w [K, R, S, 4] (KRSC) -> y [N, HO, WO, K] (NHWC),
 *   y = the convolution of x by w, stride 2, padding PH, PW, no bias.
 *
 * Parameters: NETC_KERNEL_NAME, NETC_TX (netc_f16), NETC_N, NETC_H, NETC_W, NETC_K (a
 * multiple of 16), NETC_R, NETC_S (at most 8), NETC_PH, NETC_PW, NETC_HO,
 * NETC_WO, NETC_SMEM (the launch's dynamic shared memory).  Launch: block NETC_THREADS = 32 * ceil(WO / 16), any grid (the
 * emitter's: two blocks an SM), dynamic shared memory W_BYTES + X_BYTES
 * (below; the emitter's stem_smem computes the same sum).  sm_80 or later. */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TX) || !defined(NETC_N) || !defined(NETC_H) || !defined(NETC_W) || \
    !defined(NETC_K) || !defined(NETC_R) || !defined(NETC_S) || !defined(NETC_PH) || !defined(NETC_PW) ||          \
    !defined(NETC_HO) || !defined(NETC_WO) || !defined(NETC_THREADS) || !defined(NETC_SMEM)
#error "stem_conv.cu is a template: define NETC_KERNEL_NAME, NETC_TX, the geometry and NETC_THREADS"
#endif

typedef NETC_TX tx_t;
static constexpr int N = NETC_N, H = NETC_H, W = NETC_W, K = NETC_K, R = NETC_R, S = NETC_S;
static constexpr int PH = NETC_PH, PW = NETC_PW, HO = NETC_HO, WO = NETC_WO;
static constexpr int RQ = (R + 1) / 2, SQ = (S + 1) / 2, TAPS = RQ * SQ; /* the folded filter */
static constexpr int ROWS = 2;                                           /* output rows an item */
static constexpr int MT = (WO + 15) / 16;                                /* warps: 16 columns each */
static constexpr int TR = ROWS + RQ - 1, TC = MT * 16 + SQ - 1;          /* the staged tile, folded */
static constexpr int PS = 24;                                            /* halves a staged pixel */
static constexpr int NT = K / 8;                                         /* 8-channel n-tiles */
static constexpr int HOB = (HO + ROWS - 1) / ROWS, ITEMS = N * HOB;
static constexpr int W_BYTES = TAPS * K * PS * 2; /* then X_BYTES = TR * TC * PS * 2 of the tile */
static_assert(W_BYTES + TR * TC * PS * 2 == NETC_SMEM, "stem_conv.cu: the emitter's stem_smem differs");
static_assert(K % 16 == 0 && R <= 8 && S <= 8 && NETC_THREADS == MT * 32, "stem_conv.cu: unsupported geometry");
static_assert(sizeof(tx_t) == 2, "stem_conv.cu: f16");

/* The shared-memory address of p, for ldmatrix. */
__device__ __forceinline__ unsigned stem_smem_addr(const void *p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

/* Four 8x8 matrices of 16-bit elements: lane l gives the address of row
 * l % 8 of matrix l / 8; r[i] is matrix i's fragment (row lane / 4, columns
 * 2 * (lane % 4) and the next). */
__device__ __forceinline__ void stem_ldsm4(unsigned r[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/* acc (16 x 8, f32) += a (16 x 16) * b (16 x 8). */
__device__ __forceinline__ void stem_mma(float acc[4], const unsigned a[4], const unsigned b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

extern "C" __global__ void __launch_bounds__(NETC_THREADS, 2)
    NETC_KERNEL_NAME(const tx_t *__restrict__ x, const tx_t *__restrict__ w, tx_t *__restrict__ y) {
  extern __shared__ __align__(16) unsigned char stem_smem[];
  tx_t *ws = reinterpret_cast<tx_t *>(stem_smem);           /* [TAPS][K][PS] */
  tx_t *xs = reinterpret_cast<tx_t *>(stem_smem + W_BYTES); /* [TR][TC][PS] */
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  /* the folded filter: tap (a, b), channel (p * 2 + q) * 4 + c is w[k][2a+p][2b+q][c], 0 past R, S */
  for (int i = threadIdx.x; i < TAPS * K * 16; i += NETC_THREADS) {
    const int ch = i % 16, k = (i / 16) % K, tap = i / (16 * K);
    const int r = 2 * (tap / SQ) + ch / 8, s = 2 * (tap % SQ) + (ch / 4) % 2;
    ws[(tap * K + k) * PS + ch] = r < R && s < S ? w[((k * R + r) * S + s) * 4 + ch % 4] : netc_cv<tx_t>(0.0f);
  }
  const unsigned ws_a = stem_smem_addr(ws), xs_a = stem_smem_addr(xs);
  /* ldmatrix rows: A's lane gives pixel lane % 16, channels 8 * (lane / 16) ..;
   * B's two n-tiles j, j + 1: matrix lane / 8 is (n-tile j + m / 2, channels 8 * (m % 2) ..) */
  const int a_px = lane % 16, a_ch = 8 * (lane / 16);
  const int b_k = 8 * ((lane / 8) / 2) + lane % 8, b_ch = 8 * ((lane / 8) % 2);

  for (int item = blockIdx.x; item < ITEMS; item += gridDim.x) {
    const int n = item / HOB, oh0 = (item % HOB) * ROWS;
    __syncthreads(); /* the last item's fragments are read (and the filter staged) */
    /* the folded rows oh0 .. oh0 + TR - 1: one thread a padded input pixel's 4 channels (8 bytes) */
    for (int u = threadIdx.x; u < TR * 4 * TC; u += NETC_THREADS) {
      const int wu = u % (2 * TC), p = (u / (2 * TC)) % 2, row = u / (4 * TC);
      const int h = 2 * (oh0 + row) + p - PH, wc = wu - PW;
      uint2 v = make_uint2(0u, 0u);
      if (h >= 0 && h < H && wc >= 0 && wc < W)
        v = *reinterpret_cast<const uint2 *>(x + (((long long)n * H + h) * W + wc) * 4);
      *reinterpret_cast<uint2 *>(xs + (row * TC + wu / 2) * PS + (p * 2 + wu % 2) * 4) = v;
    }
    __syncthreads();

    float acc[ROWS][NT][4];
#pragma unroll
    for (int r = 0; r < ROWS; r++)
#pragma unroll
      for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[r][j][e] = 0.0f;
#pragma unroll
    for (int tap = 0; tap < TAPS; tap++) {
      const int ta = tap / SQ, tb = tap % SQ;
      unsigned bf[NT][2];
#pragma unroll
      for (int j = 0; j < NT; j += 2) {
        unsigned m[4];
        stem_ldsm4(m, ws_a + ((tap * K + 8 * j + b_k) * PS + b_ch) * 2);
        bf[j][0] = m[0], bf[j][1] = m[1], bf[j + 1][0] = m[2], bf[j + 1][1] = m[3];
      }
#pragma unroll
      for (int r = 0; r < ROWS; r++) {
        unsigned af[4];
        stem_ldsm4(af, xs_a + (((r + ta) * TC + 16 * warp + tb + a_px) * PS + a_ch) * 2);
#pragma unroll
        for (int j = 0; j < NT; j++) stem_mma(acc[r][j], af, bf[j]);
      }
    }

    /* accumulator (r, j): rows lane / 4 and lane / 4 + 8 of the warp's 16 columns,
     * channels 8j + 2 (lane % 4) and the next, stored as one 32-bit pair */
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
      const int oh = oh0 + r;
#pragma unroll
      for (int half = 0; half < 2; half++) {
        const int ow = 16 * warp + lane / 4 + 8 * half;
        if (oh >= HO || ow >= WO) continue;
        tx_t *yp = y + (((long long)n * HO + oh) * WO + ow) * K + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < NT; j++) {
          const tx_t lo = netc_cv<tx_t>(acc[r][j][2 * half]), hi = netc_cv<tx_t>(acc[r][j][2 * half + 1]);
          *reinterpret_cast<unsigned *>(yp + 8 * j) = (unsigned)lo.b | (unsigned)hi.b << 16;
        }
      }
    }
  }
}
