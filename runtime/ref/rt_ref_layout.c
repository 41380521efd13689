/* rt_ref_layout.c - moving tensors between layouts: NCHW <-> NHWC
 * transposes (filters too: KCRS is NCHW-shaped, KRSC NHWC-shaped) and the
 * channel padding the layout pass inserts so that C is a multiple of the
 * vector width (the extra channels are zeros). */
#include <string.h>

#include "rt_ref.h"

static int dims_ok(int N, int C, int H, int W) { return N > 0 && C > 0 && H > 0 && W > 0; }

/* Transposes each of N [A, B] matrices into [B, A], in tiles for locality. */
static void transpose_batch(int N, int64_t A, int64_t B, const float *x, float *y) {
  enum { T = 32 };
  for (int n = 0; n < N; n++) {
    const float *xn = x + n * A * B;
    float *yn = y + n * A * B;
    for (int64_t a0 = 0; a0 < A; a0 += T)
      for (int64_t b0 = 0; b0 < B; b0 += T) {
        int64_t a1 = a0 + T < A ? a0 + T : A, b1 = b0 + T < B ? b0 + T : B;
        for (int64_t a = a0; a < a1; a++)
          for (int64_t b = b0; b < b1; b++) yn[b * A + a] = xn[a * B + b];
      }
  }
}

int rt_ref_nchw_to_nhwc(int N, int C, int H, int W, const float *x, float *y) {
  if (!dims_ok(N, C, H, W)) return RT_REF_ESHAPE;
  if (!x || !y || x == y) return RT_REF_EARG;
  transpose_batch(N, C, (int64_t)H * W, x, y);
  return RT_REF_OK;
}

int rt_ref_nhwc_to_nchw(int N, int C, int H, int W, const float *x, float *y) {
  if (!dims_ok(N, C, H, W)) return RT_REF_ESHAPE;
  if (!x || !y || x == y) return RT_REF_EARG;
  transpose_batch(N, (int64_t)H * W, C, x, y);
  return RT_REF_OK;
}

/* Copies the first `keep` channels of every pixel/plane from x (cx channels)
 * to y (cy channels), zero-filling y's channels beyond `keep`. */
static int copy_channels(const RtRefAct *xs, const float *x, int cy, float *y) {
  if (!xs || !dims_ok(xs->N, xs->C, xs->H, xs->W) || cy < 1 || (xs->layout != RT_REF_NCHW && xs->layout != RT_REF_NHWC))
    return RT_REF_ESHAPE;
  if (!x || !y || x == y) return RT_REF_EARG;
  int cx = xs->C, keep = cx < cy ? cx : cy;
  int64_t hw = (int64_t)xs->H * xs->W;
  if (xs->layout == RT_REF_NCHW) {
    for (int n = 0; n < xs->N; n++) {
      float *yn = y + (int64_t)n * cy * hw;
      memcpy(yn, x + (int64_t)n * cx * hw, sizeof *y * (size_t)(keep * hw));
      memset(yn + keep * hw, 0, sizeof *y * (size_t)((cy - keep) * hw));
    }
    return RT_REF_OK;
  }
  int64_t pixels = xs->N * hw;
  for (int64_t i = 0; i < pixels; i++) {
    memcpy(y + i * cy, x + i * cx, sizeof *y * (size_t)keep);
    memset(y + i * cy + keep, 0, sizeof *y * (size_t)(cy - keep));
  }
  return RT_REF_OK;
}

int rt_ref_pad_channels(const RtRefAct *xs, const float *x, int Cpad, float *y) {
  if (xs && Cpad < xs->C) return RT_REF_ESHAPE;
  return copy_channels(xs, x, Cpad, y);
}

int rt_ref_unpad_channels(const RtRefAct *xs, const float *x, int C, float *y) {
  if (xs && C > xs->C) return RT_REF_ESHAPE;
  return copy_channels(xs, x, C, y);
}
