/* accum.cu - gradient accumulation's two kernels (runtime/rt_gpu_accum.c),
 * per gradient dtype, after common.cu; runtime/rt_cpu_accum.c is the
 * reference:
 *
 *   netc_accum_add_T:    sum[i] += g[i]                          (a micro-step)
 *   netc_accum_finish_T: g[i] = (sum[i] + g[i]) / k;  sum[i] = 0  (the last one)
 *
 * sum is f32; g is f32, f16 or bf16 (T), rounded to nearest even.  The
 * division is a division, as the reference does it.  No parameters: the
 * count and k are kernel arguments.
 * Launch: 1-D, 256 threads a block, any grid (grid-stride). */

template <typename T> __device__ __forceinline__ void accum_add(float *__restrict__ sum, const T *__restrict__ g,
                                                                long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) sum[i] += netc_ld(g[i]);
}

template <typename T> __device__ __forceinline__ void accum_finish(float *__restrict__ sum, T *__restrict__ g,
                                                                   long long n, float k) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    g[i] = netc_cv<T>((sum[i] + netc_ld(g[i])) / k);
    sum[i] = 0.0f;
  }
}

#define NETC_ACCUM_KERNELS(T, SUFFIX)                                                                      \
  extern "C" __global__ void __launch_bounds__(256)                                                        \
      netc_accum_add_##SUFFIX(float *__restrict__ sum, const T *__restrict__ g, long long n) {             \
    accum_add<T>(sum, g, n);                                                                               \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(256)                                                        \
      netc_accum_finish_##SUFFIX(float *__restrict__ sum, T *__restrict__ g, long long n, float k) {       \
    accum_finish<T>(sum, g, n, k);                                                                         \
  }

NETC_ACCUM_KERNELS(float, f32)
NETC_ACCUM_KERNELS(netc_f16, f16)
NETC_ACCUM_KERNELS(netc_bf16, bf16)
