/* input_u8.cu - the image input of a step from a batch of bytes: the input
 * pipeline's conversion (runtime/rt_gpu_input.c), the GPU form of
 * runtime/rt_ref_input.c's rt_ref_input_u8:
 *
 *   y = (x * scale[c']) + shift[c'],  c' = min(c, 2), cast to NETC_TY
 *
 * as a rounded multiply and a rounded add (no FMA contraction, so the
 * floats are the reference's bit for bit); padded channels c >= C are 0.
 *
 * Parameters: NETC_KERNEL_NAME; NETC_TY (storage type of the input:
 * float, netc_f16 or netc_bf16); NETC_N, NETC_C (channels of the bytes),
 * NETC_DC (channels of the input, >= NETC_C), NETC_H, NETC_W;
 * NETC_SRC_LAST, NETC_DST_LAST (1: channels-last).  scale and shift come
 * as a by-value argument (they are the run's, not the graph's).
 * One thread per output element, in output order (writes coalesced; the
 * bytes are read gathered, a quarter of the traffic).
 * Launch: 1-D, 256 threads a block, any grid (grid-stride loop). */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TY) || !defined(NETC_N) || !defined(NETC_C) || \
    !defined(NETC_DC) || !defined(NETC_H) || !defined(NETC_W) || !defined(NETC_SRC_LAST) || !defined(NETC_DST_LAST)
#error "input_u8.cu is a template: define NETC_KERNEL_NAME, NETC_TY, NETC_N, NETC_C, NETC_DC, NETC_H, NETC_W, NETC_*_LAST"
#endif

typedef NETC_TY ty_t;
static constexpr long long N = NETC_N, C = NETC_C, DC = NETC_DC, HW = (long long)NETC_H * NETC_W;

struct netc_input_norm {
  float scale[3], shift[3];
};

extern "C" __global__ void __launch_bounds__(256)
NETC_KERNEL_NAME(const unsigned char *__restrict__ x, ty_t *__restrict__ y, netc_input_norm norm) {
  const long long total = N * DC * HW, stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    long long n, c, p, r = i;
    if (NETC_DST_LAST) {
      c = r % DC, r /= DC;
      p = r % HW, n = r / HW;
    } else {
      p = r % HW, r /= HW;
      c = r % DC, n = r / DC;
    }
    float v = 0.0f;
    if (c < C) {
      const int k = c < 2 ? (int)c : 2;
      const long long from = NETC_SRC_LAST ? (n * HW + p) * C + c : (n * C + c) * HW + p;
      v = __fadd_rn(__fmul_rn((float)x[from], norm.scale[k]), norm.shift[k]);
    }
    y[i] = netc_cv<ty_t>(v);
  }
}
