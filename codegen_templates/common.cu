/* common.cu - what every generated kernel source but eltwise.cu's starts
 * with: the storage types, conversions to and from f32, vector accesses and
 * block reductions.  The emitter (compiler/codegen/cg_kernels.c) puts this text,
 * then the op's template, inside a namespace of its own (netc_k<node>_<i>),
 * so the sources of all nodes can be compiled as one NVRTC program.
 *
 * f16 and bf16 are distinct one-member structs so that netc_ld / netc_cv
 * pick the conversion by overloading; conversions are PTX, round to nearest
 * even, and no header is needed (NVRTC has no toolkit include path).
 * Tensors are f32 (float), f16 (netc_f16), bf16 (netc_bf16), i8
 * (signed char), i32 (int) or i64 (long long). */

struct netc_f16 {
  unsigned short b;
};
struct netc_bf16 {
  unsigned short b;
};

__device__ __forceinline__ float netc_ld(float v) { return v; }
__device__ __forceinline__ float netc_ld(netc_f16 v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.b));
  return f;
}
__device__ __forceinline__ float netc_ld(netc_bf16 v) { return __uint_as_float((unsigned)v.b << 16); }

template <typename T> __device__ __forceinline__ T netc_cv(float f);
template <> __device__ __forceinline__ float netc_cv<float>(float f) { return f; }
template <> __device__ __forceinline__ netc_f16 netc_cv<netc_f16>(float f) {
  netc_f16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.b) : "f"(f));
  return h;
}
template <> __device__ __forceinline__ netc_bf16 netc_cv<netc_bf16>(float f) {
  netc_bf16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.b) : "f"(f));
  return h;
}

/* V consecutive elements as one access (16 bytes when V * sizeof(T) == 16). */
template <typename T, int V> struct alignas(sizeof(T) * V) netc_vec {
  T v[V];
};
template <typename T, int V> __device__ __forceinline__ netc_vec<T, V> netc_vld(const T *p, long long i) {
  return reinterpret_cast<const netc_vec<T, V> *>(p)[i];
}
template <typename T, int V> __device__ __forceinline__ void netc_vst(T *p, long long i, const netc_vec<T, V> &v) {
  reinterpret_cast<netc_vec<T, V> *>(p)[i] = v;
}

__device__ __forceinline__ float netc_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double netc_warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
/* i8 quantization by step s: clamp(rint(f / s), -127, 127), the CPU
 * executor's arithmetic (rt_cpu_quantize; a NaN becomes -127); a zero (half
 * of a relu's output) skips the division, whose slow path a zero dividend
 * takes: the same result for any step above 0 */
__device__ __forceinline__ signed char netc_q8(float f, float s) {
  if (f == 0.0f && s > 0.0f) return 0;
  return (signed char)fminf(127.0f, fmaxf(-127.0f, rintf(f / s)));
}
/* The larger of a and b, NaN when either is (fmaxf drops a NaN): a
 * maximum over a tensor with a NaN is NaN, as torch.max's is. */
__device__ __forceinline__ float netc_nanmax(float a, float b) { return a > b || a != a ? a : b; }
__device__ __forceinline__ float netc_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = netc_nanmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* The sum (or max, NaN when any is) of v over a 1-D block of blockDim.x
 * (a multiple of 32, at most 1024) threads, returned to every thread.
 * sh: 32 slots. */
template <typename T> __device__ __forceinline__ T netc_block_sum(T v, T *sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
  v = netc_warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < nwarp ? sh[lane] : (T)0;
  return netc_warp_sum(v);
}
__device__ __forceinline__ float netc_block_max(float v, float *sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
  v = netc_warp_max(v);
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < nwarp ? sh[lane] : -__int_as_float(0x7f800000);
  return netc_warp_max(v);
}

/* Multi-tensor runs (sgd_multi.cu, cast_multi.cu): tensor t of a run is
 * cut into chunks of `chunk` elements (a multiple of v), one block each,
 * blocks block0[t] .. block0[t+1]-1 (block0 ascending, nt tensors; a tensor
 * with no elements has no blocks).  Block b's tensor t and chunk: elements
 * begin .. begin+n-1 of it, the first nv*v of them as nv whole v-vectors
 * starting at vector v0. */
struct NetcChunk {
  int t;
  long long begin, n, nv, v0;
};
__device__ __forceinline__ NetcChunk netc_run_chunk(const int *block0, const long long *count, int nt,
                                                    long long chunk, int v, int b) {
  int lo = 0, hi = nt - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (block0[mid] <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  NetcChunk c;
  c.t = lo;
  c.begin = (long long)(b - block0[lo]) * chunk;
  const long long left = count[lo] - c.begin;
  c.n = left < chunk ? left : chunk;
  c.nv = c.n / v, c.v0 = c.begin / v;
  return c;
}

/* One element of torch.optim.SGD (sgd.cu and sgd_multi.cu share it, so both
 * contract the same expressions the same way): gs is the gradient already
 * divided by the loss scale. */
__device__ __forceinline__ void netc_sgd_one(float &w, float gs, float &b, float lr, float mu, float wd,
                                             bool nesterov) {
  float d = gs + wd * w;
  if (mu != 0.0f) {
    b = mu * b + d;
    d = nesterov ? d + mu * b : b;
  }
  w -= lr * d;
}

/* netc_sgd_one on V-vector i of w, g and buf (stored back; buf only with
 * momentum), and on element i alone: sgd.cu's and sgd_multi.cu's loops. */
template <typename TW, typename TG, typename TB, int V>
__device__ __forceinline__ void netc_sgd_vec(TW *w, const TG *g, TB *buf, long long i, float lr, float scale, float mu,
                                             float wd, bool nesterov) {
  netc_vec<TW, V> vw = netc_vld<TW, V>(w, i);
  netc_vec<TG, V> vg = netc_vld<TG, V>(g, i);
  netc_vec<TB, V> vb = netc_vld<TB, V>(buf, i);
#pragma unroll
  for (int j = 0; j < V; j++) {
    float wf = netc_ld(vw.v[j]), bf = netc_ld(vb.v[j]);
    netc_sgd_one(wf, netc_ld(vg.v[j]) / scale, bf, lr, mu, wd, nesterov);
    vw.v[j] = netc_cv<TW>(wf);
    vb.v[j] = netc_cv<TB>(bf);
  }
  netc_vst<TW, V>(w, i, vw);
  if (mu != 0.0f) netc_vst<TB, V>(buf, i, vb);
}
template <typename TW, typename TG, typename TB>
__device__ __forceinline__ void netc_sgd_elem(TW *w, const TG *g, TB *buf, long long i, float lr, float scale, float mu,
                                              float wd, bool nesterov) {
  float wf = netc_ld(w[i]), bf = netc_ld(buf[i]);
  netc_sgd_one(wf, netc_ld(g[i]) / scale, bf, lr, mu, wd, nesterov);
  w[i] = netc_cv<TW>(wf);
  if (mu != 0.0f) buf[i] = netc_cv<TB>(bf);
}

/* The type of an index into at most 2^32 elements (Fits) or more: splitting
 * a 32-bit one into coordinates divides by constants with a multiply and a
 * shift rather than a 64-bit sequence. */
template <bool Fits> struct netc_idx {
  typedef long long t;
};
template <> struct netc_idx<true> {
  typedef unsigned t;
};

/* Pooling windows along one axis (K wide, stride ST, padding PAD, OUT
 * outputs): the outputs o0..o1 whose windows cover input index i (none
 * when o0 > o1). */
template <int K, int ST, int PAD, int OUT> __device__ __forceinline__ void netc_pool_cover(int i, int &o0, int &o1) {
  const int l = i + PAD - K + 1;
  o0 = l <= 0 ? 0 : (l + ST - 1) / ST;
  o1 = min((i + PAD) / ST, OUT - 1);
}

/* The max pool's backward gather (pool.cu's NETC_POOL_MAX_BWD; chan_reduce.cu
 * and chan_apply.cu with NETC_GATHER, the stem's batch-norm backward reading
 * it directly): channels cv*V .. cv*V+V-1 of the input pixel (n, ih, iw)'s
 * gradient, the sum of dy over the windows covering it whose winner byte
 * (r*S + s in the window: maxpool_bn_relu's win, pool.cu's MAX_ARG) is its
 * own position, in output row then column order (the reference's scatter
 * order).  Input H x W, output HO x WO, window R x S, stride SH x SW,
 * padding PH x PW, CV vectors of V channels a pixel. */
template <int H, int W, int HO, int WO, int R, int S, int SH, int SW, int PH, int PW, int CV, int V, typename T>
__device__ __forceinline__ void netc_pool_gather(const T *dy, const unsigned char *code, int n, int ih, int iw, int cv,
                                                 float acc[V]) {
  int oh0, oh1, ow0, ow1;
  netc_pool_cover<R, SH, PH, HO>(ih, oh0, oh1);
  netc_pool_cover<S, SW, PW, WO>(iw, ow0, ow1);
#pragma unroll
  for (int j = 0; j < V; j++) acc[j] = 0.0f;
  for (int oh = oh0; oh <= oh1; oh++)
    for (int ow = ow0; ow <= ow1; ow++) {
      const long long o = (((long long)n * HO + oh) * WO + ow) * CV + cv;
      const netc_vec<T, V> g = netc_vld<T, V>(dy, o);
      const netc_vec<unsigned char, V> won = netc_vld<unsigned char, V>(code, o);
      const int mine = (ih - (oh * SH - PH)) * S + (iw - (ow * SW - PW));
#pragma unroll
      for (int j = 0; j < V; j++)
        if (won.v[j] == mine) acc[j] += netc_ld(g.v[j]);
    }
}

/* netc_pool_gather of pixel p (its index in [N, H, W]; fewer than 2^32),
 * rounded to T as a stored gradient is (chan_reduce.cu, chan_apply.cu with
 * NETC_GATHER). */
template <int H, int W, int HO, int WO, int R, int S, int SH, int SW, int PH, int PW, int CV, int V, typename T>
__device__ __forceinline__ netc_vec<T, V> netc_pool_gather_at(const T *dy, const unsigned char *code, unsigned p,
                                                              int cv) {
  float acc[V];
  netc_pool_gather<H, W, HO, WO, R, S, SH, SW, PH, PW, CV, V>(dy, code, (int)(p / (H * W)), (int)(p / W % H),
                                                              (int)(p % W), cv, acc);
  netc_vec<T, V> g;
#pragma unroll
  for (int j = 0; j < V; j++) g.v[j] = netc_cv<T>(acc[j]);
  return g;
}
