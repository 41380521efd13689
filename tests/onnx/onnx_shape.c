/* onnx_shape.c - numpy broadcasting and axis moves around the kernels.
 *
 * The reference kernels take flat arrays of one shape (elementwise) or a
 * last-axis layout (softmax); these helpers bring ONNX operands into that
 * form and back, and do no arithmetic of their own. */
#include "onnx_case.h"

int64_t onnx_shape_count(const int64_t *dims, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; d++) n *= dims[d];
  return n;
}

int onnx_shape_broadcast(const OnnxTensor *a, const OnnxTensor *b, int *ndim, int64_t *dims) {
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int d = 0; d < nd; d++) {
    /* align from the right: a missing leading dim counts as 1 */
    int da = d - (nd - a->ndim), db = d - (nd - b->ndim);
    int64_t ea = da >= 0 ? a->dims[da] : 1, eb = db >= 0 ? b->dims[db] : 1;
    if (ea != eb && ea != 1 && eb != 1) return -1;
    dims[d] = ea == 1 ? eb : ea;
  }
  *ndim = nd;
  return 0;
}

int onnx_shape_expand(const OnnxTensor *src, int ndim, const int64_t *dims, float *dst) {
  if (!src->f || src->ndim > ndim) return -1;
  int64_t stride[ONNX_MAX_DIMS];
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    int ds = d - (ndim - src->ndim);
    int64_t e = ds >= 0 ? src->dims[ds] : 1;
    if (e != 1 && e != dims[d]) return -1;
    stride[d] = e == 1 ? 0 : s; /* a broadcast axis re-reads the same element */
    s *= e;
  }
  int64_t n = onnx_shape_count(dims, 0, ndim);
  int64_t idx[ONNX_MAX_DIMS] = {0};
  for (int64_t k = 0; k < n; k++) {
    int64_t off = 0;
    for (int d = 0; d < ndim; d++) off += idx[d] * stride[d];
    dst[k] = src->f[off];
    for (int d = ndim - 1; d >= 0; d--) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return 0;
}

void onnx_shape_axis_to_last(const float *x, int64_t outer, int64_t A, int64_t inner, float *y) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t a = 0; a < A; a++)
      for (int64_t i = 0; i < inner; i++) y[(o * inner + i) * A + a] = x[(o * A + a) * inner + i];
}

void onnx_shape_last_to_axis(const float *x, int64_t outer, int64_t A, int64_t inner, float *y) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t a = 0; a < A; a++)
      for (int64_t i = 0; i < inner; i++) y[(o * A + a) * inner + i] = x[(o * inner + i) * A + a];
}
