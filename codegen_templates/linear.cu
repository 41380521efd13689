/* linear.cu - the fully connected layer and its two gradients as one tiled
 * GEMM with f32 accumulation: out[m][n] = sum_k A(m,k) B(k,n) (+ bias[n]),
 * with A and B read through compile-time strides:
 *
 *   linear             out = y  [M=batch, N=out]: A(m,k) = x[m,k], B(k,n) = W[n,k], + bias
 *   linear_bwd_data    out = dx [M=batch, N=in]:  A(m,k) = dy[m,k], B(k,n) = W[k,n]
 *   linear_bwd_weight  out = dW [M=out, N=in]:    A(m,k) = dy[k,m], B(k,n) = x[k,n]
 *
 * Parameters: NETC_KERNEL_NAME; NETC_M, NETC_N, NETC_K; strides NETC_SAM,
 * NETC_SAK, NETC_SBK, NETC_SBN (elements); NETC_TA, NETC_TB, NETC_TO
 * (storage types of A, B, out); NETC_BIAS (0/1) and NETC_TBIAS.
 * Launch: grid (ceil(N/64), ceil(M/64)), block 256: a block computes a
 * 64 x 64 tile of out, 4 x 4 per thread, staging 16-deep slices of A and B
 * in shared memory (loaded along whichever index is contiguous). */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_M) || !defined(NETC_N) || !defined(NETC_K) || !defined(NETC_TA) || \
    !defined(NETC_TB) || !defined(NETC_TO) || !defined(NETC_BIAS)
#error "linear.cu is a template: define NETC_KERNEL_NAME, NETC_M, NETC_N, NETC_K, the strides, types and NETC_BIAS"
#endif

typedef NETC_TA ta_t;
typedef NETC_TB tb_t;
typedef NETC_TO to_t;
static constexpr int M = NETC_M, N = NETC_N, K = NETC_K, TM = 64, TN = 64, TK = 16;
static constexpr long long SAM = NETC_SAM, SAK = NETC_SAK, SBK = NETC_SBK, SBN = NETC_SBN;

extern "C" __global__ void __launch_bounds__(256)
NETC_KERNEL_NAME(const ta_t *__restrict__ a, const tb_t *__restrict__ b,
#if NETC_BIAS
                 const NETC_TBIAS *__restrict__ bias,
#endif
                 to_t *__restrict__ out) {
  __shared__ float as[TK][TM + 4], bs[TK][TN + 4];
  const int t = threadIdx.x, tx = t % 16, ty = t / 16;
  const int m0 = blockIdx.y * TM, n0 = blockIdx.x * TN;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TK) {
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const int e = t + 256 * q;
      /* consecutive threads walk the contiguous index of each operand */
      const int am = SAK == 1 ? e / TK : e % TM, ak = SAK == 1 ? e % TK : e / TM;
      const int bn = SBN == 1 ? e % TN : e / TK, bk = SBN == 1 ? e / TN : e % TK;
      const int gm = m0 + am, gk = k0 + ak, hn = n0 + bn, hk = k0 + bk;
      as[ak][am] = gm < M && gk < K ? netc_ld(a[gm * SAM + gk * SAK]) : 0.0f;
      bs[bk][bn] = hn < N && hk < K ? netc_ld(b[hk * SBK + hn * SBN]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < TK; kk++) {
      float ra[4], rb[4];
#pragma unroll
      for (int i = 0; i < 4; i++) ra[i] = as[kk][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; j++) rb[j] = bs[kk][tx * 4 + j];
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] += ra[i] * rb[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int m = m0 + ty * 4 + i;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int n = n0 + tx * 4 + j;
      if (n >= N) continue;
      float v = acc[i][j];
#if NETC_BIAS
      v += netc_ld(bias[n]);
#endif
      out[(long long)m * N + n] = netc_cv<to_t>(v);
    }
  }
}
