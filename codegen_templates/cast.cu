/* cast.cu - elementwise dtype conversion and plain copies, and the
 * symmetric int8 quantization of a cast to i8 (docs/ir.md's cast):
 *
 *   NETC_CAST       y = x converted from NETC_TX to NETC_TY (round to
 *                   nearest even; NETC_TX == NETC_TY is a copy: flatten,
 *                   unflatten)
 *   NETC_CAST_AMAX  part[block] = max |x| over the block's grid-stride share;
 *                   with NETC_SLICES K (the cast's axis=0: a weight's output
 *                   channels), block k the max of slice k, elements
 *                   k * count / K and on
 *   NETC_CAST_I8    q = clamp(rint(x / scale), -127, 127) as signed char,
 *                   scale = NETC_SCALE (the cast's calibrated scale=), else
 *                   max(part[0..G-1]) / 127, else with NETC_SLICES the
 *                   element's slice's part / 127 (1 for an all-zero max)
 *   NETC_CAST_F8    q = f8(x / scale) (NETC_F8: 0 E4M3, 1 E5M2; round to
 *                   nearest even, saturating, rt_ref_f32_to_f8's bits; NaN
 *                   stays NaN and an infinity becomes E5M2's infinity or
 *                   E4M3's NaN, which has none, so a check after the cast
 *                   still sees it), scale = NETC_SCALE, else with NETC_HIST
 *                   H (delayed scaling) max(hist[0..H)) / the format's
 *                   largest value, else -- and while the history is all 0
 *                   -- max(part[0..G-1]) / that (1 for 0); with NETC_HIST
 *                   each block's largest finite |x| into amax[block]
 *   NETC_CAST_F8_PUSH  one block: hist one step older, its newest entry the
 *                   largest of amax[0..NETC_G2-1] (the history updated in
 *                   place, after every block of the cast read it)
 * NETC_CAST_AMAX for FP8 (NETC_FINITE) leaves NaN and infinities out, and
 * with NETC_HIST (hist its second argument) does nothing once the history
 * holds an amax.
 *
 * The i8 result holds q, then at the next 16-byte boundary its NETC_NSCALES
 * f32 scales (compiler/ir.h, ir_value_scales: one, or one per slice), which
 * the convolutions reading it dequantize with; runtime/rt_cpu_layout.c
 * keeps scale * q as float instead.  A NaN makes its tensor's (or slice's)
 * maximum and so its scale NaN, and every dequantized value NaN, as on the
 * CPU executor; with a calibrated scale it quantizes to -127 (i8 has no
 * NaN).
 *
 * Parameters: NETC_KERNEL_NAME, the op, NETC_TX, NETC_TY (CAST), NETC_COUNT,
 * NETC_V (elements per vector access; CAST and CAST_I8), NETC_G (CAST_I8:
 * the AMAX launch's grid), NETC_SCALE, NETC_SLICES, NETC_NSCALES (CAST_I8).  Launch: 1-D, 256
 * threads a block; CAST and CAST_I8 any grid, AMAX grid G (K with
 * NETC_SLICES). */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TX) || !defined(NETC_COUNT)
#error "cast.cu is a template: define NETC_KERNEL_NAME, NETC_TX, NETC_COUNT and one NETC_CAST*"
#endif

typedef NETC_TX tx_t;
static constexpr long long count = NETC_COUNT;

#if defined(NETC_CAST_F8) || defined(NETC_CAST_F8_PUSH)
/* the FP8 kernels, at the end */
#else
#if defined(NETC_CAST) || defined(NETC_CAST_I8)
#if defined(NETC_CAST)
typedef NETC_TY ty_t;
#else
typedef signed char ty_t;
#endif
static constexpr int V = NETC_V;
static constexpr long long nvec = NETC_COUNT / NETC_V;
#endif

extern "C" __global__ void __launch_bounds__(256)
#if defined(NETC_CAST)
NETC_KERNEL_NAME(const tx_t *__restrict__ x, ty_t *__restrict__ y)
#elif defined(NETC_CAST_AMAX) && defined(NETC_HIST)
NETC_KERNEL_NAME(const tx_t *__restrict__ x, const float *__restrict__ hist, float *__restrict__ part)
#elif defined(NETC_CAST_AMAX)
NETC_KERNEL_NAME(const tx_t *__restrict__ x, float *__restrict__ part)
#elif defined(NETC_CAST_I8)
NETC_KERNEL_NAME(const tx_t *__restrict__ x, const float *__restrict__ part, ty_t *__restrict__ y)
#else
#error "cast.cu: define NETC_CAST, NETC_CAST_AMAX or NETC_CAST_I8"
#endif
{
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
#if defined(NETC_CAST_AMAX)
  __shared__ float sh[32];
  float m = 0.0f;
#if defined(NETC_HIST)
  for (int k = threadIdx.x; k < NETC_HIST; k += blockDim.x) m = fmaxf(m, hist[k]);
  if (netc_block_max(m, sh) > 0.0f) return; /* the cast scales by the history */
  m = 0.0f;
#endif
#if defined(NETC_FINITE)
#define netc_nanmax(a, b) fmaxf((a), isfinite(b) ? (b) : 0.0f) /* FP8: NaN and infinities left out */
#endif
#if defined(NETC_SLICES)
  constexpr long long per = count / NETC_SLICES;
  (void)stride, (void)first; /* a block a slice */
  for (long long i = threadIdx.x; i < per; i += blockDim.x) m = netc_nanmax(m, fabsf(netc_ld(x[blockIdx.x * per + i])));
#else
  for (long long i = first; i < count; i += stride) m = netc_nanmax(m, fabsf(netc_ld(x[i])));
#endif
#if defined(NETC_FINITE)
#undef netc_nanmax
#endif
  m = netc_block_max(m, sh);
  if (threadIdx.x == 0) part[blockIdx.x] = m;
#else
#if defined(NETC_CAST_I8)
#if defined(NETC_SCALE)
  const float scale = NETC_SCALE;
#define NETC_SCALE_AT(i) scale
#elif defined(NETC_SLICES)
  constexpr long long per = count / NETC_SLICES;
#define NETC_SCALE_AT(i) (!(part[(i) / per] <= 0.0f) ? part[(i) / per] / 127.0f : 1.0f)
#else
  __shared__ float sh[32];
  float m = 0.0f;
  for (int g = threadIdx.x; g < NETC_G; g += blockDim.x) m = netc_nanmax(m, part[g]);
  m = netc_block_max(m, sh);
  const float scale = !(m <= 0.0f) ? m / 127.0f : 1.0f; /* NaN when x holds one */
#define NETC_SCALE_AT(i) scale
#endif
  {
    float *tail = (float *)((char *)y + (count + 15) / 16 * 16);
#if defined(NETC_SLICES) && !defined(NETC_SCALE)
    for (long long k = first; k < NETC_SLICES; k += stride) tail[k] = !(part[k] <= 0.0f) ? part[k] / 127.0f : 1.0f;
#else
    for (long long k = first; k < NETC_NSCALES; k += stride) tail[k] = scale;
#endif
  }
#define NETC_CONVERT(f, i) netc_q8((f), NETC_SCALE_AT(i))
#else
#define NETC_CONVERT(f, i) netc_cv<ty_t>(f)
#endif
  for (long long i = first; i < nvec; i += stride) {
    netc_vec<tx_t, V> vx = netc_vld<tx_t, V>(x, i);
    netc_vec<ty_t, V> vy;
#pragma unroll
    for (int j = 0; j < V; j++) vy.v[j] = NETC_CONVERT(netc_ld(vx.v[j]), i * V + j);
    netc_vst<ty_t, V>(y, i, vy);
  }
  if (count % V != 0 && first < count % V) {
    const long long i = nvec * V + first;
    y[i] = NETC_CONVERT(netc_ld(x[i]), i);
  }
#undef NETC_CONVERT
#if defined(NETC_SCALE_AT)
#undef NETC_SCALE_AT
#endif
#endif
}
#endif /* the generic kernel */

#if defined(NETC_CAST_F8) || defined(NETC_CAST_F8_PUSH)
#if !defined(NETC_HIST) && defined(NETC_CAST_F8_PUSH)
#error "cast.cu: NETC_CAST_F8_PUSH needs NETC_HIST"
#endif

/* f to FP8 NETC_F8 (0 E4M3, 1 E5M2) as rt_ref_f32_to_f8: the step of f's
 * binade (the subnormals' below the smallest normal), f / step rounded half
 * to even (exact: step is a power of two), saturating at the largest
 * finite value; NaN stays NaN, an infinity is E5M2's or E4M3's NaN. */
static constexpr float netc_f8_top = NETC_F8 ? 57344.0f : 448.0f; /* the format's largest value */

__device__ __forceinline__ unsigned char netc_f8(float f) {
  constexpr int mbits = NETC_F8 ? 2 : 3, bias = NETC_F8 ? 15 : 7, emin = 1 - bias;
  constexpr int max_code = NETC_F8 ? 0x7b : 0x7e, nan_code = NETC_F8 ? 0x7e : 0x7f;
  const unsigned char sign = signbit(f) ? 0x80 : 0;
  if (f != f) return sign | nan_code;
  const float a = fabsf(f);
  if (isinf(a)) return sign | (NETC_F8 ? 0x7c : nan_code);
  if (a >= netc_f8_top) return sign | max_code;
  int e;
  frexpf(a, &e);
  e = e - 1 < emin ? emin : e - 1; /* a in [2^e, 2^(e+1)) */
  float q = rintf(ldexpf(a, mbits - e));
  if (q == 0.0f) return sign;
  if (q >= (float)(2 << mbits)) q *= 0.5f, e++; /* rounded up into the next binade */
  if (q < (float)(1 << mbits)) return sign | (unsigned char)q; /* subnormal */
  const int code = ((e + bias) << mbits) | ((int)q - (1 << mbits));
  return sign | (unsigned char)(code > max_code ? max_code : code);
}

extern "C" __global__ void __launch_bounds__(256)
#if defined(NETC_CAST_F8_PUSH)
NETC_KERNEL_NAME(const float *__restrict__ amax, float *__restrict__ hist)
#elif defined(NETC_HIST)
NETC_KERNEL_NAME(const tx_t *__restrict__ x, const float *__restrict__ part, const float *__restrict__ hist,
                 float *__restrict__ amax, unsigned char *__restrict__ y)
#else
NETC_KERNEL_NAME(const tx_t *__restrict__ x, const float *__restrict__ part, unsigned char *__restrict__ y)
#endif
{
#if defined(NETC_CAST_F8_PUSH)
  __shared__ float sh[32];
  (void)count;
  float m = 0.0f;
  for (int g = threadIdx.x; g < NETC_G2; g += blockDim.x) m = fmaxf(m, amax[g]);
  m = netc_block_max(m, sh);
  if (threadIdx.x == 0) {
    for (int k = NETC_HIST - 1; k > 0; k--) hist[k] = hist[k - 1];
    hist[0] = m;
  }
#else
#if defined(NETC_SCALE)
  const float scale = NETC_SCALE;
#else
  __shared__ float sh[32];
  float h = 0.0f;
#if defined(NETC_HIST)
  for (int k = threadIdx.x; k < NETC_HIST; k += blockDim.x) h = fmaxf(h, hist[k]);
  h = netc_block_max(h, sh);
  if (!(h > 0.0f)) /* no amax recorded yet: the tensor's own, as the AMAX launch found it */
#endif
  {
    float m = 0.0f;
    for (int g = threadIdx.x; g < NETC_G; g += blockDim.x) m = fmaxf(m, part[g]);
    h = netc_block_max(m, sh);
  }
  const float scale = h > 0.0f ? h / netc_f8_top : 1.0f;
#endif
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (first == 0) *(float *)((char *)y + (count + 15) / 16 * 16) = scale; /* the value's one scale */
#if defined(NETC_HIST)
  float m = 0.0f;
#endif
  for (long long i = first; i < count; i += stride) {
    const float f = netc_ld(x[i]);
    y[i] = netc_f8(f / scale);
#if defined(NETC_HIST)
    if (isfinite(f)) m = fmaxf(m, fabsf(f));
#endif
  }
#if defined(NETC_HIST)
  m = netc_block_max(m, sh);
  if (threadIdx.x == 0) amax[blockIdx.x] = m;
#endif
#endif
}
#endif
