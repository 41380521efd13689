/* dequant.cu - a quantized tensor as the values it stands for.
 *
 * FP8 (NETC_F8): y[i] (f32) =
 * value(q[i]) * scale, with scale the one f32 its cast stored after q's
 * elements (compiler/ir.h, ir_value_scales); a NaN code gives NaN, E5M2's
 * infinities infinity.  These are the values the CPU executor keeps for
 * an FP8 tensor (runtime/cpu/rt_cpu_layout.c, cast_f8).
 *
 * The data and weight gradients of an FP8 convolution (an E5M2 gradient by
 * the forward's E4M3 operand) read such f32 copies and run as TF32
 * convolutions with FP32 accumulation (cg_emit_conv.c): the CPU executor's
 * arithmetic but for the operands' rounding to TF32 (a relative 2^-11);
 * correct, not faster than f16.
 *
 * Scaled (NETC_DQ_SCALED, x of NETC_TX: signed char, f16, bf16 or float;
 * NETC_MUL a float literal): y[i] (f16) = x[i] * NETC_MUL, a residual's
 * values times the factor its quantized convolution's epilogue would have
 * applied (conv.rscale: an i8 residual's step, over y's), for a plan that
 * adds an unscaled f16 residual where cuDNN has none adding the i8 one or
 * scaling it (cg_emit_bn.c).
 *
 * Parameters: NETC_KERNEL_NAME, NETC_F8 (0 E4M3, 1 E5M2), or
 * NETC_DQ_SCALED with NETC_TX and NETC_MUL; NETC_COUNT (the elements of
 * q).  Launch: 1-D, 256 threads a block, any grid (scaled: a thread for
 * each 8 elements fills the device). */

#if !defined(NETC_KERNEL_NAME) || !(defined(NETC_F8) || defined(NETC_DQ_SCALED)) || !defined(NETC_COUNT)
#error "dequant.cu is a template: define NETC_KERNEL_NAME, NETC_F8 or NETC_DQ_SCALED, and NETC_COUNT"
#endif

static constexpr long long count = NETC_COUNT;

#if defined(NETC_DQ_SCALED)
__device__ __forceinline__ float netc_dq_ld(signed char v) { return (float)v; }
template <typename T> __device__ __forceinline__ float netc_dq_ld(T v) { return netc_ld(v); }

/* 8 elements a thread (one 8-byte load of i8, one 16-byte store of f16:
 * an element a thread left the kernel at a sixth of the bandwidth), the
 * last count % 8 one a thread; x and y start 16-byte aligned (tensors and
 * scratch are placed at 256-byte offsets). */
extern "C" __global__ void __launch_bounds__(256)
NETC_KERNEL_NAME(const NETC_TX *__restrict__ x, netc_f16 *__restrict__ y) {
  constexpr long long vecs = count / 8;
  const long long stride = (long long)gridDim.x * blockDim.x, first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (long long i = first; i < vecs; i += stride) {
    const netc_vec<NETC_TX, 8> a = netc_vld<NETC_TX, 8>(x, i);
    netc_vec<netc_f16, 8> b;
#pragma unroll
    for (int k = 0; k < 8; k++) b.v[k] = netc_cv<netc_f16>(netc_dq_ld(a.v[k]) * NETC_MUL);
    netc_vst<netc_f16, 8>(y, i, b);
  }
  for (long long i = vecs * 8 + first; i < count; i += stride) y[i] = netc_cv<netc_f16>(netc_dq_ld(x[i]) * NETC_MUL);
}
#else

/* The value of FP8 code c (rt_ref_f8_to_f32's). */
__device__ __forceinline__ float netc_f8_value(unsigned char c) {
  constexpr int mbits = NETC_F8 ? 2 : 3, ebits = NETC_F8 ? 5 : 4, bias = NETC_F8 ? 15 : 7;
  const int e = (c >> mbits) & ((1 << ebits) - 1), m = c & ((1 << mbits) - 1);
  const float sign = c & 0x80 ? -1.0f : 1.0f;
  if (NETC_F8 && e == (1 << ebits) - 1) return m ? __int_as_float(0x7fc00000) : sign * __int_as_float(0x7f800000);
  if (!NETC_F8 && e == 15 && m == 7) return __int_as_float(0x7fc00000);
  if (e == 0) return sign * ldexpf((float)m, 1 - bias - mbits); /* subnormal */
  return sign * ldexpf((float)((1 << mbits) | m), e - bias - mbits);
}

extern "C" __global__ void __launch_bounds__(256)
NETC_KERNEL_NAME(const unsigned char *__restrict__ q, float *__restrict__ y) {
  const float scale = *(const float *)(q + (count + 15) / 16 * 16);
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
    y[i] = netc_f8_value(q[i]) * scale;
}
#endif
