/* loss_scale.cu - dynamic loss scaling on the device, so that a training
 * step needs no host round trip (runtime/rt_cpu_train.c has the reference
 * of each):
 *
 *   NETC_NONFINITE_ZERO  nonfinite_check, first launch: flag = 0
 *   NETC_NONFINITE_SCAN  nonfinite_check, second launch: flag = 1 when any
 *                        element of any input is inf or nan.  Every thread
 *                        that finds one may store 1 (the same value, so the
 *                        race is benign); no atomics, no second stage.
 *   NETC_LS_UPDATE       loss_scale_update, one thread: GradScaler.update()
 *
 * Parameters: NETC_KERNEL_NAME.  SCAN: NETC_T0..NETC_T14 (storage types,
 * float/netc_f16/netc_bf16) and NETC_COUNT0..NETC_COUNT14 (element counts;
 * 0 for an unused slot, whose pointer is never read).  LS_UPDATE:
 * NETC_GROWTH_INTERVAL (a float literal), NETC_BACKOFF, NETC_GROWTH.
 * Launch: ZERO and LS_UPDATE any 1-D block; SCAN 1-D, 256 threads a block,
 * any grid (grid-stride per input: 16-byte vectors, then the tail one
 * element per thread). */

#if !defined(NETC_KERNEL_NAME)
#error "loss_scale.cu is a template: define NETC_KERNEL_NAME and one of NETC_NONFINITE_ZERO, NETC_NONFINITE_SCAN, NETC_LS_UPDATE"
#endif

#define NETC_F32_MAX 3.402823466e38f

#if defined(NETC_NONFINITE_ZERO)

extern "C" __global__ void NETC_KERNEL_NAME(float *__restrict__ flag) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *flag = 0.0f;
}

#elif defined(NETC_NONFINITE_SCAN)

/* |v| <= FLT_MAX is false for inf and for nan */
template <typename T> __device__ __forceinline__ bool netc_bad(T v) { return !(fabsf(netc_ld(v)) <= NETC_F32_MAX); }

template <typename T, long long N>
__device__ __forceinline__ bool netc_scan(const T *__restrict__ p, long long first, long long stride) {
  constexpr int V = 16 / (int)sizeof(T);
  constexpr long long nvec = N / V;
  bool bad = false;
  for (long long i = first; i < nvec; i += stride) {
    netc_vec<T, V> v = netc_vld<T, V>(p, i);
#pragma unroll
    for (int j = 0; j < V; j++) bad |= netc_bad(v.v[j]);
  }
  for (long long i = nvec * V + first; i < N; i += stride) bad |= netc_bad(p[i]);
  return bad;
}

#define NETC_P(i) const NETC_T##i *__restrict__ p##i
#define NETC_S(i) netc_scan<NETC_T##i, NETC_COUNT##i>(p##i, first, stride)

extern "C" __global__ void __launch_bounds__(256)
NETC_KERNEL_NAME(float *__restrict__ flag, NETC_P(0), NETC_P(1), NETC_P(2), NETC_P(3), NETC_P(4), NETC_P(5),
                 NETC_P(6), NETC_P(7), NETC_P(8), NETC_P(9), NETC_P(10), NETC_P(11), NETC_P(12), NETC_P(13),
                 NETC_P(14)) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  bool bad = NETC_S(0) | NETC_S(1) | NETC_S(2) | NETC_S(3) | NETC_S(4) | NETC_S(5) | NETC_S(6) | NETC_S(7) |
             NETC_S(8) | NETC_S(9) | NETC_S(10) | NETC_S(11) | NETC_S(12) | NETC_S(13) | NETC_S(14);
  /* every lane reaches the vote: no thread has returned */
  if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0) *flag = 1.0f;
}

#undef NETC_P
#undef NETC_S

#elif defined(NETC_LS_UPDATE)

/* scale and good_steps are the STATE values; f32 arithmetic as the CPU's */
extern "C" __global__ void NETC_KERNEL_NAME(const float *__restrict__ flag, float *__restrict__ scale,
                                            float *__restrict__ steps) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  if (*flag != 0.0f) {
    *scale = *scale * NETC_BACKOFF;
    *steps = 0.0f;
    return;
  }
  float s = *steps + 1.0f;
  if (s >= NETC_GROWTH_INTERVAL) {
    const float grown = *scale * NETC_GROWTH;
    if (fabsf(grown) <= NETC_F32_MAX) *scale = grown;
    s = 0.0f;
  }
  *steps = s;
}

#else
#error "loss_scale.cu: define one of NETC_NONFINITE_ZERO, NETC_NONFINITE_SCAN, NETC_LS_UPDATE"
#endif

#undef NETC_F32_MAX
