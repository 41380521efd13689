/* eltwise.cu - the elementwise kernels of a training step: relu, add, the
 * fused add+relu of a residual join, and their backwards, for f32, f16
 * and bf16.
 *
 * This file is a template: it is not compiled as it stands.  The runtime
 * (cg_nvrtc_instantiate) prepends one #define per parameter, and every
 * parameter is a compile-time constant, so each instantiation is one
 * straight-line kernel for one op, dtype and size:
 *
 *   NETC_KERNEL_NAME   the kernel's symbol, e.g. k3_relu_f16
 *   NETC_OP_<OP>       exactly one of RELU_FWD RELU_BWD ADD_FWD ADD_BWD
 *                      ADD_RELU_FWD ADD_RELU_BWD SUM_RELU_BWD, defined to 1
 *   NETC_DTYPE_F32, NETC_DTYPE_F16 or NETC_DTYPE_BF16, defined to 1
 *                      (storage type)
 *   NETC_VEC           elements per vector access (f32: 4, f16/bf16: 8 make
 *                      16-byte loads); 1, 2, 4 or 8
 *   NETC_N             the element count
 *
 * The kernel's parameters are always (in0, in1, in2, out0, out1); an op
 * leaves the ones it does not use alone (the caller may pass 0 for them):
 *
 *   op            in0   in1   in2   out0   out1   out0[i] =
 *   relu_fwd      x     -     -     y      -      x <= 0 ? 0 : x
 *   relu_bwd      y     dy    -     dx     -      y <= 0 ? 0 : dy
 *   add_fwd       a     b     -     y      -      a + b
 *   add_bwd       dy    -     -     da     db     dy  (and out1[i] = dy)
 *   add_relu_fwd  a     b     -     y      -      a + b <= 0 ? 0 : a + b
 *   add_relu_bwd  y     dy    -     dsum   -      y <= 0 ? 0 : dy
 *   sum_relu_bwd  y     a     b     dx     -      y <= 0 ? 0 : a + b
 *
 * sum_relu_bwd is the relu backward of a gradient that arrives in two
 * parts (a residual block's input feeds both of its branches): rounding
 * a + b once to the storage type gives what add then relu_bwd give.
 *
 * These are runtime/rt_ref_eltwise.c's formulas (NaN goes to 0 through
 * relu, as there).  Arithmetic is in f32; f16 values are converted on load
 * and rounded to nearest even on store, which for one add gives exactly
 * the f16 sum (f32 has more than 2*11+2 bits, so the double rounding is
 * harmless).  Conversions use PTX directly, so the source needs no header
 * (NVRTC finds no cuda_fp16.h without the toolkit's include path).
 *
 * Contract: every pointer is aligned to NETC_VEC elements (cuMemAlloc
 * gives 256 bytes); any grid of any size covers all NETC_N elements
 * (grid-stride loop), full vectors first, then the NETC_N % NETC_VEC
 * tail one element per thread.  Outputs must not overlap inputs
 * unless they are the same array. */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_VEC) || !defined(NETC_N)
#error "eltwise.cu is a template: define NETC_KERNEL_NAME, NETC_VEC, NETC_N, NETC_OP_* and NETC_DTYPE_*"
#endif

#if defined(NETC_DTYPE_F32)
typedef float netc_t;
__device__ __forceinline__ float netc_load(netc_t v) { return v; }
__device__ __forceinline__ netc_t netc_store(float f) { return f; }
#elif defined(NETC_DTYPE_F16)
typedef unsigned short netc_t; /* IEEE binary16 bits */
__device__ __forceinline__ float netc_load(netc_t v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
  return f;
}
__device__ __forceinline__ netc_t netc_store(float f) {
  netc_t v;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(v) : "f"(f));
  return v;
}
#elif defined(NETC_DTYPE_BF16)
typedef unsigned short netc_t; /* bfloat16 bits */
__device__ __forceinline__ float netc_load(netc_t v) { return __uint_as_float((unsigned)v << 16); }
__device__ __forceinline__ netc_t netc_store(float f) {
  netc_t v;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(v) : "f"(f));
  return v;
}
#else
#error "eltwise.cu: define NETC_DTYPE_F32, NETC_DTYPE_F16 or NETC_DTYPE_BF16"
#endif

#if NETC_VEC != 1 && NETC_VEC != 2 && NETC_VEC != 4 && NETC_VEC != 8
#error "eltwise.cu: NETC_VEC must be 1, 2, 4 or 8"
#endif

/* NETC_NIN and NETC_NOUT are #undef'd at the end: compiler/codegen/cg_kernels.c
 * compiles many instantiations as one program, each in its own namespace. */

/* The op on one element, in f32: x[NETC_NIN] in, y[NETC_NOUT] out. */
#if defined(NETC_OP_RELU_FWD)
#define NETC_NIN 1
#define NETC_NOUT 1
__device__ __forceinline__ void netc_apply(const float *x, float *y) {
  y[0] = x[0] <= 0.0f ? 0.0f : x[0];
}
#elif defined(NETC_OP_RELU_BWD) || defined(NETC_OP_ADD_RELU_BWD)
#define NETC_NIN 2
#define NETC_NOUT 1
__device__ __forceinline__ void netc_apply(const float *x, float *y) {
  y[0] = x[0] <= 0.0f ? 0.0f : x[1];
}
#elif defined(NETC_OP_ADD_FWD)
#define NETC_NIN 2
#define NETC_NOUT 1
__device__ __forceinline__ void netc_apply(const float *x, float *y) {
  y[0] = x[0] + x[1];
}
#elif defined(NETC_OP_ADD_BWD)
#define NETC_NIN 1
#define NETC_NOUT 2
__device__ __forceinline__ void netc_apply(const float *x, float *y) {
  y[0] = x[0];
  y[1] = x[0];
}
#elif defined(NETC_OP_ADD_RELU_FWD)
#define NETC_NIN 2
#define NETC_NOUT 1
__device__ __forceinline__ void netc_apply(const float *x, float *y) {
  const float s = x[0] + x[1];
  y[0] = s <= 0.0f ? 0.0f : s;
}
#elif defined(NETC_OP_SUM_RELU_BWD)
#define NETC_NIN 3
#define NETC_NOUT 1
__device__ __forceinline__ void netc_apply(const float *x, float *y) {
  y[0] = x[0] <= 0.0f ? 0.0f : x[1] + x[2];
}
#else
#error "eltwise.cu: define one NETC_OP_* (RELU_FWD, RELU_BWD, ADD_FWD, ADD_BWD, ADD_RELU_FWD, ADD_RELU_BWD, SUM_RELU_BWD)"
#endif

/* One vector access: alignas makes the struct copy a single wide access. */
struct alignas(sizeof(netc_t) * NETC_VEC) netc_vec {
  netc_t v[NETC_VEC];
};

static constexpr long long netc_n = NETC_N;
static constexpr long long netc_nvec = netc_n / NETC_VEC;

/* Every array below is indexed by unrolled loop counters only, so it
 * lives in registers; k selects among the kernel's pointers at compile
 * time. */
extern "C" __global__ void __launch_bounds__(256)
NETC_KERNEL_NAME(const netc_t *__restrict__ in0, const netc_t *__restrict__ in1, const netc_t *__restrict__ in2,
                 netc_t *__restrict__ out0, netc_t *__restrict__ out1) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (long long i = first; i < netc_nvec; i += stride) {
    netc_vec vx[NETC_NIN], vy[NETC_NOUT];
#pragma unroll
    for (int k = 0; k < NETC_NIN; k++)
      vx[k] = reinterpret_cast<const netc_vec *>(k == 0 ? in0 : k == 1 ? in1 : in2)[i];
#pragma unroll
    for (int j = 0; j < NETC_VEC; j++) {
      float x[NETC_NIN], y[NETC_NOUT];
#pragma unroll
      for (int k = 0; k < NETC_NIN; k++) x[k] = netc_load(vx[k].v[j]);
      netc_apply(x, y);
#pragma unroll
      for (int k = 0; k < NETC_NOUT; k++) vy[k].v[j] = netc_store(y[k]);
    }
#pragma unroll
    for (int k = 0; k < NETC_NOUT; k++)
      reinterpret_cast<netc_vec *>(k ? out1 : out0)[i] = vy[k];
  }
  /* the tail: NETC_N % NETC_VEC elements, folded away when it is zero */
  if (netc_n % NETC_VEC != 0 && first < netc_n % NETC_VEC) {
    const long long i = netc_nvec * NETC_VEC + first;
    float x[NETC_NIN], y[NETC_NOUT];
#pragma unroll
    for (int k = 0; k < NETC_NIN; k++) x[k] = netc_load((k == 0 ? in0 : k == 1 ? in1 : in2)[i]);
    netc_apply(x, y);
#pragma unroll
    for (int k = 0; k < NETC_NOUT; k++) (k ? out1 : out0)[i] = netc_store(y[k]);
  }
}

#undef NETC_NIN
#undef NETC_NOUT
