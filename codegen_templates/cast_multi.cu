/* cast_multi.cu - cast.cu's NETC_CAST of NETC_NT tensors in one launch:
 * the per-step casts of the f32 master weights to their f16/bf16 copies
 * (runtime/rt_gpu_optim.c gathers them at the first of them).  Every
 * element is netc_cv<TY>(netc_ld(x)), as in cast.cu.
 *
 * As in sgd_multi.cu, the pointers come as a device table (tab[t] = {x, y},
 * written when the executor is made) and the sizes and block layout are
 * constants: tensor t is cut into NETC_CHUNK-element chunks (a multiple of
 * NETC_V), one block each, blocks block0[t] .. block0[t+1]-1.
 *
 * Parameters: NETC_KERNEL_NAME; NETC_TX, NETC_TY (storage types); NETC_NT;
 * NETC_COUNTS, NETC_BLOCK0 (brace lists of NT counts and NT+1 first
 * blocks); NETC_CHUNK; NETC_V.  Launch: 1-D, grid block0[NT], 256 threads. */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TX) || !defined(NETC_TY) || !defined(NETC_NT) || \
    !defined(NETC_COUNTS) || !defined(NETC_BLOCK0) || !defined(NETC_CHUNK) || !defined(NETC_V)
#error "cast_multi.cu is a template: define NETC_KERNEL_NAME, NETC_TX, NETC_TY, NETC_NT, NETC_COUNTS, NETC_BLOCK0, NETC_CHUNK, NETC_V"
#endif

static constexpr int NT = NETC_NT, V = NETC_V;
static constexpr long long CHUNK = NETC_CHUNK;
static_assert(CHUNK % NETC_V == 0, "chunks must hold whole vectors");

struct netc_cast_ptrs {
  const NETC_TX *x;
  NETC_TY *y;
};

__constant__ long long netc_count[NT] = NETC_COUNTS;
__constant__ int netc_block0[NT + 1] = NETC_BLOCK0;

extern "C" __global__ void __launch_bounds__(256) NETC_KERNEL_NAME(const netc_cast_ptrs *__restrict__ tab) {
  const NetcChunk c = netc_run_chunk(netc_block0, netc_count, NT, CHUNK, V, (int)blockIdx.x);
  const netc_cast_ptrs p = tab[c.t];
  for (long long i = threadIdx.x; i < c.nv; i += blockDim.x) {
    netc_vec<NETC_TX, V> vx = netc_vld<NETC_TX, V>(p.x, c.v0 + i);
    netc_vec<NETC_TY, V> vy;
#pragma unroll
    for (int j = 0; j < V; j++) vy.v[j] = netc_cv<NETC_TY>(netc_ld(vx.v[j]));
    netc_vst<NETC_TY, V>(p.y, c.v0 + i, vy);
  }
  for (long long i = c.begin + c.nv * V + threadIdx.x; i < c.begin + c.n; i += blockDim.x)
    p.y[i] = netc_cv<NETC_TY>(netc_ld(p.x[i]));
}
