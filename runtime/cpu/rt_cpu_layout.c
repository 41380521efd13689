/* rt_cpu_layout.c - the executor's layout and precision ops.
 *
 * relayout moves a rank-4 tensor between NCHW and NHWC (or KCRS and KRSC)
 * and pads the channel dim with zeros or crops it; cast converts dtypes,
 * with values kept as float: f16/bf16 round to nearest even, i8 is a
 * symmetric per-tensor fake quantization with scale max|x| / 127, f8
 * (E4M3, E5M2) a scaled rounding to the format (cast_f8). */
#include <math.h>
#include <string.h>

#include "rt_cpu_op.h"

/* Strides (in elements) of the logical axes (N|K, C, H|R, W|S) of t. */
static void logical_strides(const RtCpu *x, const IrType *t, int64_t dims[4], int64_t stride[4]) {
  int last = t->layout == IR_LAYOUT_NHWC || t->layout == IR_LAYOUT_KRSC;
  int pos[4] = {0, last ? 3 : 1, last ? 1 : 2, last ? 2 : 3}; /* memory position of each logical axis */
  int64_t mem_stride[4];
  mem_stride[3] = 1;
  for (int i = 2; i >= 0; i--) mem_stride[i] = mem_stride[i + 1] * rt_cpu_op_dim(x, t, i + 1);
  for (int a = 0; a < 4; a++) {
    dims[a] = rt_cpu_op_dim(x, t, pos[a]);
    stride[a] = mem_stride[pos[a]];
  }
}

int rt_cpu_relayout(RtCpu *x, const IrNode *n) {
  int64_t sd[4], ss[4], dd[4], ds[4];
  logical_strides(x, rt_cpu_op_in_type(x, n, 0), sd, ss);
  logical_strides(x, rt_cpu_op_out_type(x, n, 0), dd, ds);
  const float *src = rt_cpu_op_in(x, n, 0);
  float *dst = rt_cpu_op_out(x, n, 0);
  for (int64_t a = 0; a < dd[0]; a++)
    for (int64_t c = 0; c < dd[1]; c++)
      for (int64_t h = 0; h < dd[2]; h++)
        for (int64_t w = 0; w < dd[3]; w++)
          dst[a * ds[0] + c * ds[1] + h * ds[2] + w * ds[3]] =
              c < sd[1] ? src[a * ss[0] + c * ss[1] + h * ss[2] + w * ss[3]] : 0.0f;
  return 0;
}

/* To f8: scale=S; with an amax history (input 1, delayed scaling) the
 * scale rt_ref_f8_delayed_scale gives, the tensor's own largest finite |x|
 * then pushed into the history (rt_ref_amax_push, in place); else that
 * largest |x| over the format's largest value (1 for none).  Then x /
 * scale rounded (rt_ref_round_f8), saturating.  NaN and infinities pass as
 * they are, so that a check after the cast (dynamic loss scaling's) still
 * sees them, and stay out of the amax. */
static int cast_f8(RtCpu *x, const IrNode *n, int64_t count, const float *src, float *dst, IrDtype to) {
  RtRefF8 fmt = to == IR_DT_F8E4M3 ? RT_REF_E4M3 : RT_REF_E5M2;
  const IrAttr *fixed = ir_attr_find(n, "scale");
  float *hist = n->nin > 1 ? rt_cpu_op_in(x, n, 1) : NULL;
  int64_t H = hist ? rt_cpu_op_in_numel(x, n, 1) : 0;
  float amax = 0;
  for (int64_t i = 0; i < count && !fixed; i++)
    if (isfinite(src[i])) amax = fmaxf(amax, fabsf(src[i]));
  float scale = fixed      ? (float)fixed->f
                : hist     ? rt_ref_f8_delayed_scale(hist, H, amax, fmt)
                : amax > 0 ? amax / rt_ref_f8_max(fmt)
                           : 1.0f;
  for (int64_t i = 0; i < count; i++)
    dst[i] = isfinite(src[i]) ? scale * rt_ref_f8_to_f32(rt_ref_f32_to_f8(src[i] / scale, fmt), fmt) : src[i];
  if (hist) rt_ref_amax_push(hist, H, amax);
  return 0;
}

int rt_cpu_cast(RtCpu *x, const IrNode *n) {
  int64_t count = rt_cpu_op_in_numel(x, n, 0);
  const float *src = rt_cpu_op_in(x, n, 0);
  float *dst = rt_cpu_op_out(x, n, 0);
  IrDtype to = rt_cpu_op_out_type(x, n, 0)->dtype;
  if (to == IR_DT_F16 || to == IR_DT_BF16) return rt_cpu_op_round(x, n, to, count, src, dst);
  if (to == IR_DT_F8E4M3 || to == IR_DT_F8E5M2) return cast_f8(x, n, count, src, dst, to);
  if (to != IR_DT_I8) {
    memmove(dst, src, (size_t)count * sizeof(float));
    return 0;
  }
  /* scale=S: calibrated; axis=0: one scale per slice of dimension 0 (a weight's output channels), from its
   * maximum; else the tensor's maximum (ir_infer.c, infer_cast) */
  const IrAttr *fixed = ir_attr_find(n, "scale"), *axis = ir_attr_find(n, "axis");
  const IrType *t = rt_cpu_op_out_type(x, n, 0);
  int64_t slices = axis && t->rank > 0 && t->dim[0] > 0 ? t->dim[0] : 1, per = slices > 1 ? count / slices : count;
  for (int64_t k = 0; k < slices; k++) {
    const float *s = src + k * per;
    float *d = dst + k * per;
    /* a NaN makes the maximum and the scale NaN (torch.max's NaN), and so
     * every value of the slice, as on the GPU (cast.cu); with a calibrated
     * scale it becomes -127: i8 has no NaN */
    float amax = 0;
    for (int64_t i = 0; i < per && !fixed; i++) amax = amax > fabsf(s[i]) || isnan(amax) ? amax : fabsf(s[i]);
    float scale = fixed ? (float)fixed->f : !(amax <= 0) ? amax / 127.0f : 1.0f;
    rt_cpu_quantize(scale, per, s, d);
  }
  return 0;
}

void rt_cpu_quantize(float scale, int64_t count, const float *src, float *dst) {
  for (int64_t i = 0; i < count; i++) dst[i] = scale * fminf(127.0f, fmaxf(-127.0f, nearbyintf(src[i] / scale)));
}
