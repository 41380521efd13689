/* rt_ref_input.c - a batch of bytes into the image input's floats
 * (rt_ref_input.h gives the formula and the layouts). */
#include "rt_ref_input.h"

int rt_ref_input_ok(const RtRefInput *in) {
  return in && in->n > 0 && in->c > 0 && in->h > 0 && in->w > 0 && in->dc >= in->c;
}

void rt_ref_input_u8(const RtRefInput *in, const uint8_t *src, float *dst) {
  int64_t C = in->c, DC = in->dc, HW = in->h * in->w;
  /* element strides of channel and pixel on each side */
  int64_t sc = in->src_nhwc ? 1 : HW, sp = in->src_nhwc ? C : 1;
  int64_t dcs = in->dst_nhwc ? 1 : HW, dp = in->dst_nhwc ? DC : 1;
  for (int64_t i = 0; i < in->n; i++) {
    const uint8_t *x = src + i * C * HW;
    float *y = dst + i * DC * HW;
    for (int64_t c = 0; c < DC; c++) {
      if (c >= C) {
        for (int64_t p = 0; p < HW; p++) y[c * dcs + p * dp] = 0.0f;
        continue;
      }
      float a = in->scale[c < 2 ? c : 2], b = in->shift[c < 2 ? c : 2];
      for (int64_t p = 0; p < HW; p++) y[c * dcs + p * dp] = (float)x[c * sc + p * sp] * a + b;
    }
  }
}
