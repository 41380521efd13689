/* relayout.cu - a rank-4 tensor moved between channels-first (NCHW, KCRS)
 * and channels-last (NHWC, KRSC) order, with its channel dim padded with
 * zeros or cropped: runtime/rt_cpu_layout.c's relayout.
 *
 * Parameters: NETC_KERNEL_NAME; NETC_TX (storage type), NETC_TY (the
 * result's, default NETC_TX: a relayout that also casts, as the inference
 * image's to f16 for an f16 first convolution); the logical dims
 * NETC_A (N or K), NETC_CIN, NETC_COUT, NETC_H, NETC_W (H/R, W/S);
 * NETC_IN_LAST, NETC_OUT_LAST (1: channels-last).
 * One thread per output element, in output order (writes coalesced, reads
 * gathered: the graph relayouts only its input image, small filters and
 * [N, C, 1, 1] gradients, so no shared-memory transpose).  With
 * NETC_PIXEL_VEC (channels-first to channels-last, COUT elements making a
 * 4, 8 or 16-byte vector: the image NCHW -> NHWC padded to 4 channels) one
 * thread per output pixel instead, reading its min(CIN, COUT) channels
 * (each read coalesced across the threads of a row) and writing them as
 * one vector.
 * Indices are 32-bit when the tensor has fewer than 2^32 elements.
 * Launch: 1-D, 256 threads a block, any grid (grid-stride loop). */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TX) || !defined(NETC_A) || !defined(NETC_CIN) || \
    !defined(NETC_COUT) || !defined(NETC_H) || !defined(NETC_W) || !defined(NETC_IN_LAST) || !defined(NETC_OUT_LAST)
#error "relayout.cu is a template: define NETC_KERNEL_NAME, NETC_TX, NETC_A, NETC_CIN, NETC_COUT, NETC_H, NETC_W, NETC_IN_LAST, NETC_OUT_LAST"
#endif

typedef NETC_TX tx_t;
#if defined(NETC_TY)
typedef NETC_TY ty_t;
#else
typedef NETC_TX ty_t;
#endif
static constexpr long long A = NETC_A, CI = NETC_CIN, CO = NETC_COUT, H = NETC_H, W = NETC_W;

typedef netc_idx<(A * (CI > CO ? CI : CO) * H * W <= 0xffffffffLL)>::t idx_t;

extern "C" __global__ void __launch_bounds__(256)
NETC_KERNEL_NAME(const tx_t *__restrict__ x, ty_t *__restrict__ y) {
#if defined(NETC_PIXEL_VEC)
  static_assert(!NETC_IN_LAST && NETC_OUT_LAST, "relayout.cu: NETC_PIXEL_VEC moves channels-first to channels-last");
  const long long pixels = A * H * W, stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < pixels; i += stride) {
    const idx_t p = (idx_t)i, hw = p % (idx_t)(H * W), a = p / (idx_t)(H * W);
    netc_vec<ty_t, NETC_COUT> v;
#pragma unroll
    for (int c = 0; c < NETC_COUT; c++)
      v.v[c] = netc_cv<ty_t>(c < CI ? netc_ld(x[(a * (idx_t)CI + c) * (idx_t)(H * W) + hw]) : 0.0f);
    netc_vst<ty_t, NETC_COUT>(y, i, v);
  }
#else
  const long long total = A * CO * H * W, stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    long long a, c, h, w, r = i;
    if (NETC_OUT_LAST) {
      c = r % CO, r /= CO;
      w = r % W, r /= W;
      h = r % H, a = r / H;
    } else {
      w = r % W, r /= W;
      h = r % H, r /= H;
      c = r % CO, a = r / CO;
    }
    const long long src = NETC_IN_LAST ? ((a * H + h) * W + w) * CI + c : ((a * CI + c) * H + h) * W + w;
    y[i] = netc_cv<ty_t>(c < CI ? netc_ld(x[src]) : 0.0f);
  }
#endif
}
