/* sgd_multi.cu - sgd.cu's update of NETC_NT parameters in one launch: a run
 * of sgd_update nodes that share lr, loss scale, skip flag, attributes and
 * dtypes (runtime/rt_gpu_optim.c finds the runs).  Every element gets
 * exactly sgd.cu's arithmetic, in the same order:
 *
 *   g' = g / loss_scale;  d = g' + weight_decay * w
 *   momentum != 0: buf = momentum * buf + d;  d = nesterov ? d + momentum * buf : buf
 *   w -= lr * d
 *
 * and the same guards: a loss scale that is not a positive finite number,
 * or (NETC_SKIP) a nonzero skip flag, leaves every w and buf alone.
 *
 * The tensors' pointers are only known once the executor has placed its
 * values, so they come as a device table (tab[t] = {w, g, buf}, written
 * once when the executor is made); their sizes and the block layout are
 * constants here.  Tensor t is cut into chunks of NETC_CHUNK elements (a
 * multiple of NETC_V), one block each, blocks block0[t] .. block0[t+1]-1;
 * a block reads V-element vectors (every tensor starts 16-byte aligned),
 * and the last chunk's count % V tail one element per thread.
 *
 * Parameters: NETC_KERNEL_NAME; NETC_TW, NETC_TG, NETC_TBUF (storage types);
 * NETC_NT (tensors); NETC_COUNTS, NETC_BLOCK0 (brace lists: NT element
 * counts, NT+1 first blocks, the last the grid); NETC_CHUNK; NETC_V;
 * NETC_MOMENTUM, NETC_WD (float literals), NETC_NESTEROV (0/1), NETC_SKIP (0/1).
 * Launch: 1-D, grid block0[NT], 256 threads a block. */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TW) || !defined(NETC_TG) || !defined(NETC_TBUF) || \
    !defined(NETC_NT) || !defined(NETC_COUNTS) || !defined(NETC_BLOCK0) || !defined(NETC_CHUNK) ||     \
    !defined(NETC_V) || !defined(NETC_SKIP)
#error "sgd_multi.cu is a template: define NETC_KERNEL_NAME, NETC_TW, NETC_TG, NETC_TBUF, NETC_NT, NETC_COUNTS, NETC_BLOCK0, NETC_CHUNK, NETC_V, NETC_MOMENTUM, NETC_WD, NETC_NESTEROV, NETC_SKIP"
#endif

static constexpr int NT = NETC_NT, V = NETC_V;
static constexpr long long CHUNK = NETC_CHUNK;
static_assert(CHUNK % NETC_V == 0, "chunks must hold whole vectors");

struct netc_sgd_ptrs {
  NETC_TW *w;
  const NETC_TG *g;
  NETC_TBUF *buf;
};

__constant__ long long netc_count[NT] = NETC_COUNTS;
__constant__ int netc_block0[NT + 1] = NETC_BLOCK0;

extern "C" __global__ void __launch_bounds__(256)
NETC_KERNEL_NAME(const netc_sgd_ptrs *__restrict__ tab, const float *__restrict__ lr_p,
                 const float *__restrict__ scale_p
#if NETC_SKIP
                 , const float *__restrict__ skip_p
#endif
) {
  const float lr = *lr_p, scale = *scale_p;
  if (!(scale > 0.0f) || scale == __int_as_float(0x7f800000)) return;
#if NETC_SKIP
  if (*skip_p != 0.0f) return;
#endif
  const NetcChunk c = netc_run_chunk(netc_block0, netc_count, NT, CHUNK, V, (int)blockIdx.x);
  const netc_sgd_ptrs p = tab[c.t];
  for (long long i = threadIdx.x; i < c.nv; i += blockDim.x)
    netc_sgd_vec<NETC_TW, NETC_TG, NETC_TBUF, V>(p.w, p.g, p.buf, c.v0 + i, lr, scale, NETC_MOMENTUM, NETC_WD,
                                                  NETC_NESTEROV);
  for (long long i = c.begin + c.nv * V + threadIdx.x; i < c.begin + c.n; i += blockDim.x)
    netc_sgd_elem(p.w, p.g, p.buf, i, lr, scale, NETC_MOMENTUM, NETC_WD, NETC_NESTEROV);
}
