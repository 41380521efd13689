/* onnx_op_eltwise.c - ONNX Relu and Add on rt_ref_relu_fwd / rt_ref_add_fwd.
 *
 * The kernels take two arrays of one shape; Add's numpy broadcasting is done
 * here by expanding each operand to the output shape first. */
#include <stdlib.h>

#include "onnx_case.h"
#include "rt_ref.h"

OnnxRunStatus onnx_op_relu(OnnxCase *c) {
  if (onnx_case_unknown_attr(c, (const char *const[]){NULL})) return c->status;
  const OnnxTensor *x = onnx_case_float_in(c, 0);
  if (!x || onnx_case_out_f(c, 0, x->ndim, x->dims)) return c->status;
  return onnx_case_kernel(c, rt_ref_relu_fwd((int64_t)x->n, x->f, c->out[0].f), "rt_ref_relu_fwd");
}

OnnxRunStatus onnx_op_add(OnnxCase *c) {
  if (onnx_case_unknown_attr(c, (const char *const[]){NULL})) return c->status;
  const OnnxTensor *a, *b;
  if (!(a = onnx_case_float_in(c, 0)) || !(b = onnx_case_float_in(c, 1))) return c->status;
  int nd;
  int64_t dims[ONNX_MAX_DIMS];
  if (onnx_shape_broadcast(a, b, &nd, dims)) return onnx_case_error(c, "shapes do not broadcast");
  if (onnx_case_out_f(c, 0, nd, dims)) return c->status;
  int64_t n = (int64_t)c->out[0].n;
  float *ea = malloc((size_t)(n ? n : 1) * sizeof *ea);
  float *eb = malloc((size_t)(n ? n : 1) * sizeof *eb);
  OnnxRunStatus st;
  if (!ea || !eb)
    st = onnx_case_error(c, "out of memory");
  else if (onnx_shape_expand(a, nd, dims, ea) || onnx_shape_expand(b, nd, dims, eb))
    st = onnx_case_error(c, "broadcast failed");
  else
    st = onnx_case_kernel(c, rt_ref_add_fwd(n, ea, eb, c->out[0].f), "rt_ref_add_fwd");
  free(ea);
  free(eb);
  return st;
}
