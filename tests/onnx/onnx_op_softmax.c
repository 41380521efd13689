/* onnx_op_softmax.c - ONNX Softmax on rt_ref_softmax_ce_fwd's prob output.
 *
 * The kernel normalizes rows of [rows, classes].  Opset 13+ normalizes one
 * axis: [outer, A, inner] is moved to [outer, inner, A] rows, run, and moved
 * back.  Opsets before 13 flatten the input to [prod(:axis), prod(axis:)],
 * which is the kernel's layout as is.  The kernel's loss is computed against
 * all-zero labels and ignored. */
#include <stdlib.h>

#include "onnx_case.h"
#include "rt_ref.h"

static OnnxRunStatus softmax_rows(OnnxCase *c, int64_t rows, int64_t classes, const float *x, float *y) {
  if (rows > INT32_MAX || classes > INT32_MAX) return onnx_case_skip(c, "more than 2^31 rows or classes");
  int32_t *labels = calloc((size_t)(rows ? rows : 1), sizeof *labels);
  if (!labels) return onnx_case_error(c, "out of memory");
  float loss;
  OnnxRunStatus st = onnx_case_kernel(c, rt_ref_softmax_ce_fwd((int)rows, (int)classes, x, labels, 0.0f, &loss, y),
                                      "rt_ref_softmax_ce_fwd");
  free(labels);
  return st;
}

OnnxRunStatus onnx_op_softmax(OnnxCase *c) {
  static const char *const KNOWN[] = {"axis", NULL};
  if (onnx_case_unknown_attr(c, KNOWN)) return c->status;
  const OnnxTensor *x = onnx_case_float_in(c, 0);
  if (!x || onnx_case_out_f(c, 0, x->ndim, x->dims)) return c->status;
  int coerce_2d = c->opset < 13;
  int64_t axis = onnx_attr_int(c->node, "axis", coerce_2d ? 1 : -1);
  if (axis < 0) axis += x->ndim;
  if (axis < 0 || axis >= x->ndim) return onnx_case_error(c, "axis out of range");
  int64_t outer = onnx_shape_count(x->dims, 0, (int)axis);
  if (coerce_2d) return softmax_rows(c, outer, onnx_shape_count(x->dims, (int)axis, x->ndim), x->f, c->out[0].f);
  int64_t A = x->dims[axis], inner = onnx_shape_count(x->dims, (int)axis + 1, x->ndim);
  if (inner == 1) return softmax_rows(c, outer, A, x->f, c->out[0].f);
  float *xt = malloc((x->n ? x->n : 1) * sizeof *xt), *yt = malloc((x->n ? x->n : 1) * sizeof *yt);
  OnnxRunStatus st;
  if (!xt || !yt) {
    st = onnx_case_error(c, "out of memory");
  } else {
    onnx_shape_axis_to_last(x->f, outer, A, inner, xt);
    st = softmax_rows(c, outer * inner, A, xt, yt);
    if (st == ONNX_RUN_OK) onnx_shape_last_to_axis(yt, outer, A, inner, c->out[0].f);
  }
  free(xt);
  free(yt);
  return st;
}
