/* onnx_spatial.c - ONNX window attributes to explicit per-side parameters.
 *
 * ONNX gives pads as [x1_begin, x2_begin, ..., x1_end, x2_end] and lets
 * auto_pad=SAME_UPPER/SAME_LOWER ask for output = ceil(input / stride) with
 * the odd pad at the end (UPPER) or the beginning (LOWER).  Both become the
 * four pads of RtRefConvParam/RtRefPoolParam here.  1-D ops run as 2-D with
 * a height of 1; 3-D ops are skipped. */
#include <string.h>

#include "onnx_case.h"

/* Reads an int list attribute of nsp entries (or def when absent). */
static int read_list(OnnxCase *c, const char *name, int nsp, int def, int *vals) {
  const int64_t *v;
  size_t n = onnx_attr_ints(c->node, name, &v);
  for (int d = 0; d < nsp; d++) vals[d] = def;
  if (n == 0) return 0;
  if ((int)n != nsp) {
    onnx_case_error(c, "%s has %zu entries, want %d", name, n, nsp);
    return -1;
  }
  for (int d = 0; d < nsp; d++) vals[d] = (int)v[d];
  return 0;
}

int onnx_spatial_read(OnnxCase *c, const OnnxTensor *x, const int64_t *kernel, OnnxSpatial *sp) {
  int nsp = x->ndim - 2;
  if (nsp < 1 || nsp > 2) {
    onnx_case_skip(c, "%d-D spatial input; the kernels are 2-D (1-D mapped onto H=1)", nsp);
    return -1;
  }
  int k[2], s[2], d[2], p[4], in[2];
  if (kernel) {
    for (int a = 0; a < nsp; a++) k[a] = (int)kernel[a];
  } else {
    const int64_t *v;
    if ((int)onnx_attr_ints(c->node, "kernel_shape", &v) != nsp) {
      onnx_case_error(c, "kernel_shape missing or of the wrong length");
      return -1;
    }
    for (int a = 0; a < nsp; a++) k[a] = (int)v[a];
  }
  if (read_list(c, "strides", nsp, 1, s) || read_list(c, "dilations", nsp, 1, d) || read_list(c, "pads", 2 * nsp, 0, p))
    return -1;
  for (int a = 0; a < nsp; a++) in[a] = (int)x->dims[2 + a];

  char mode[32];
  onnx_attr_string(c->node, "auto_pad", "NOTSET", mode, sizeof mode);
  if (strcmp(mode, "VALID") == 0) {
    memset(p, 0, sizeof p);
  } else if (strcmp(mode, "SAME_UPPER") == 0 || strcmp(mode, "SAME_LOWER") == 0) {
    for (int a = 0; a < nsp; a++) {
      int out = (in[a] + s[a] - 1) / s[a];
      int total = (out - 1) * s[a] + (k[a] - 1) * d[a] + 1 - in[a];
      if (total < 0) total = 0;
      int small = total / 2, big = total - small;
      int upper = strcmp(mode, "SAME_UPPER") == 0;
      p[a] = upper ? small : big;
      p[nsp + a] = upper ? big : small;
    }
  } else if (strcmp(mode, "NOTSET") != 0) {
    onnx_case_error(c, "unknown auto_pad '%s'", mode);
    return -1;
  }

  memset(sp, 0, sizeof *sp);
  sp->N = (int)x->dims[0];
  sp->C = (int)x->dims[1];
  sp->H = nsp == 2 ? in[0] : 1;
  sp->W = in[nsp - 1];
  sp->R = nsp == 2 ? k[0] : 1;
  sp->S = k[nsp - 1];
  sp->stride_h = nsp == 2 ? s[0] : 1;
  sp->stride_w = s[nsp - 1];
  sp->dil_h = nsp == 2 ? d[0] : 1;
  sp->dil_w = d[nsp - 1];
  sp->pad_top = nsp == 2 ? p[0] : 0;
  sp->pad_bottom = nsp == 2 ? p[2] : 0;
  sp->pad_left = nsp == 2 ? p[1] : p[0];
  sp->pad_right = nsp == 2 ? p[3] : p[1];
  return 0;
}
