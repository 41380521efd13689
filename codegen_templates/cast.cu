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
#if defined(NETC_SLICES)
  constexpr long long per = count / NETC_SLICES;
  (void)stride, (void)first; /* a block a slice */
  for (long long i = threadIdx.x; i < per; i += blockDim.x) m = netc_nanmax(m, fabsf(netc_ld(x[blockIdx.x * per + i])));
#else
  for (long long i = first; i < count; i += stride) m = netc_nanmax(m, fabsf(netc_ld(x[i])));
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
#define NETC_CONVERT(f, i) ((signed char)fminf(127.0f, fmaxf(-127.0f, rintf((f) / NETC_SCALE_AT(i)))))
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
