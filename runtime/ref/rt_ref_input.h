/* rt_ref_input.h - the image input of a step made from a batch of bytes:
 * the plain-C form of the input pipeline's conversion (the CPU executor
 * uses it; the GPU's generated kernel, codegen_templates/input_u8.cu, is
 * checked against it).
 *
 * For image i, channel c < C and pixel p, with c' = min(c, 2):
 *
 *   y = (float)x * scale[c'] + shift[c']       scale = 1/(255 std), shift = -mean/std
 *
 * as one float multiply and one float add, each rounded (no fused
 * multiply-add, so every executor gets the same bits); channels C..DC-1 of
 * the destination are 0.  A one-channel set uses entry 0; a flat [N,F]
 * input is C = F, H = W = 1. */
#ifndef NETC_RT_REF_INPUT_H
#define NETC_RT_REF_INPUT_H

#include <stdint.h>

typedef struct RtRefInput {
  int64_t n, c, h, w; /* the bytes: n images of c channels (1 or 3), h x w */
  int src_nhwc;       /* bytes are NHWC (else NCHW, as the loaders write them) */
  int64_t dc;         /* destination channels, >= c (padded ones are zeros) */
  int dst_nhwc;       /* destination is NHWC (else NCHW) */
  float scale[3], shift[3];
} RtRefInput;

/* 1 when the description is usable (positive dims, dc >= c), else 0. */
int rt_ref_input_ok(const RtRefInput *in);
/* dst (n * dc * h * w floats) from src (n * c * h * w bytes). */
void rt_ref_input_u8(const RtRefInput *in, const uint8_t *src, float *dst);

#endif
