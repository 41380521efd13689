/* input_jpeg.cu - the image input of a step from decoded pictures: the GPU
 * decoder's crop, resize, flip, normalization, channel padding and layout
 * in one pass (runtime/gpu/rt_gpu_jpeg.c), the GPU form of
 * runtime/data/rt_augment.c's rt_augment_apply followed by
 * runtime/ref/rt_ref_input.c's rt_ref_input_u8:
 *
 *   fx = x0 + (x + 0.5) * sx - 0.5 clamped to [0, w - 1] (doubles; fy alike)
 *   u8 = bilinear of the four neighbours + 0.5, truncated (floats)
 *   y  = u8 * scale[c'] + shift[c'],  c' = min(c, 2), cast to NETC_TY
 *
 * every step a rounded operation (no FMA contraction), so the bytes equal
 * the CPU's for the same picture and window.  Output column x reads source
 * column W - 1 - x when the item is flipped.  Padded channels c >= 3 are 0.
 *
 * Parameters: NETC_KERNEL_NAME; NETC_TY (float, netc_f16 or netc_bf16);
 * NETC_DC (channels of the input, >= 3), NETC_H, NETC_W; NETC_DST_LAST
 * (1: channels-last).  One thread per output pixel (n, y, x) writing its
 * NETC_DC channels.  Launch: 1-D, 256 threads a block, any grid. */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TY) || !defined(NETC_DC) || !defined(NETC_H) || !defined(NETC_W) || \
    !defined(NETC_DST_LAST)
#error "input_jpeg.cu is a template: define NETC_KERNEL_NAME, NETC_TY, NETC_DC, NETC_H, NETC_W, NETC_DST_LAST"
#endif

typedef NETC_TY ty_t;
static constexpr long long DC = NETC_DC, H = NETC_H, W = NETC_W, HW = (long long)NETC_H * NETC_W;

struct netc_input_norm {
  float scale[3], shift[3];
};

/* One picture of the batch, as rt_gpu_jpeg.c's Item lays it out. */
struct netc_jpeg_item {
  unsigned long long src; /* RGB interleaved rows of pitch bytes: the part of the picture from (bx, by) on */
  int w, h, pitch, flip;
  int bx, by;
  double x0, y0, sx, sy; /* the window's origin and source pixels per output pixel */
};

__device__ __forceinline__ double netc_coord(double o, long long i, double step, int size) {
  double f = __dadd_rn(__dadd_rn(o, __dmul_rn((double)i + 0.5, step)), -0.5);
  if (f < 0) f = 0;
  if (f > size - 1) f = size - 1;
  return f;
}

__device__ __forceinline__ float netc_lerp(float a, float b, float t) { return __fadd_rn(a, __fmul_rn(t, b - a)); }

extern "C" __global__ void __launch_bounds__(256)
NETC_KERNEL_NAME(const netc_jpeg_item *__restrict__ items, ty_t *__restrict__ y, netc_input_norm norm, int n) {
  const long long total = (long long)n * HW, stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    const long long b = i / HW, p = i % HW, oy = p / W, ox = p % W;
    const netc_jpeg_item it = items[b];
    const long long sx = it.flip ? W - 1 - ox : ox;
    const double fx = netc_coord(it.x0, sx, it.sx, it.w), fy = netc_coord(it.y0, oy, it.sy, it.h);
    const int xa = (int)fx, ya = (int)fy;
    const int xb = xa + 1 < it.w ? xa + 1 : xa, yb = ya + 1 < it.h ? ya + 1 : ya;
    const float wx = (float)(fx - xa), wy = (float)(fy - ya);
    const unsigned char *r0 = (const unsigned char *)it.src + (long long)(ya - it.by) * it.pitch;
    const unsigned char *r1 = (const unsigned char *)it.src + (long long)(yb - it.by) * it.pitch;
    const int ca = (xa - it.bx) * 3, cb = (xb - it.bx) * 3;
    for (int c = 0; c < DC; c++) {
      float v = 0.0f;
      if (c < 3) {
        const float top = netc_lerp((float)r0[ca + c], (float)r0[cb + c], wx);
        const float bot = netc_lerp((float)r1[ca + c], (float)r1[cb + c], wx);
        const unsigned char u8 = (unsigned char)__fadd_rn(netc_lerp(top, bot, wy), 0.5f);
        v = __fadd_rn(__fmul_rn((float)u8, norm.scale[c]), norm.shift[c]);
      }
      const long long at = NETC_DST_LAST ? (b * HW + p) * DC + c : (b * DC + c) * HW + p;
      y[at] = netc_cv<ty_t>(v);
    }
  }
}
