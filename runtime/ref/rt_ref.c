/* rt_ref.c - what the reference kernels share: error texts and the index
 * arithmetic of the activation and filter layouts.  Every kernel file
 * addresses memory through these (or the same formulas inlined in a hot
 * loop), so a layout means the same thing everywhere. */
#include "rt_ref.h"

const char *rt_ref_strerror(int code) {
  switch (code) {
  case RT_REF_OK: return "ok";
  case RT_REF_ESHAPE: return "inconsistent shapes or parameters";
  case RT_REF_ELABEL: return "class label out of range";
  case RT_REF_ENOMEM: return "out of memory";
  case RT_REF_EARG: return "invalid argument";
  case RT_REF_ESYNC: return "the batch statistics could not be summed over the ranks";
  default: return "unknown error";
  }
}

int64_t rt_ref_act_count(const RtRefAct *a) { return (int64_t)a->N * a->C * a->H * a->W; }

int64_t rt_ref_act_index(const RtRefAct *a, int n, int c, int h, int w) {
  if (a->layout == RT_REF_NHWC) return (((int64_t)n * a->H + h) * a->W + w) * a->C + c;
  return (((int64_t)n * a->C + c) * a->H + h) * a->W + w;
}

int64_t rt_ref_filter_index(const RtRefFilter *f, int k, int c, int r, int s) {
  if (f->layout == RT_REF_KRSC) return (((int64_t)k * f->R + r) * f->S + s) * f->C + c;
  return (((int64_t)k * f->C + c) * f->R + r) * f->S + s;
}
