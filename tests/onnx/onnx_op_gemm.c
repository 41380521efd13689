/* onnx_op_gemm.c - ONNX Gemm on rt_ref_linear_fwd.
 *
 * Y = alpha * A' B' + beta * C, A' = transA ? A^T : A  [M, K], B' likewise
 * [K, N].  rt_ref_linear_fwd computes x w^T + bias with w [N, K], so B is
 * passed as is when transB=1 and transposed otherwise; alpha scales a copy
 * of A' (rt_ref_scale).  A row-vector C ([N] or [1, N]) becomes the
 * kernel's bias (scaled by beta); any other C is broadcast to [M, N] and
 * added with rt_ref_add_fwd. */
#include <stdlib.h>
#include <string.h>

#include "onnx_case.h"
#include "rt_ref.h"

typedef struct Bufs {
  float *x, *w, *bias, *cb;
} Bufs;

static void bufs_free(Bufs *b) {
  free(b->x);
  free(b->w);
  free(b->bias);
  free(b->cb);
}

static float *alloc_floats(int64_t n) { return malloc((size_t)(n ? n : 1) * sizeof(float)); }

static OnnxRunStatus gemm_run(OnnxCase *c, const OnnxTensor *A, const OnnxTensor *B, const OnnxTensor *Cin, Bufs *b) {
  int ta = (int)onnx_attr_int(c->node, "transA", 0), tb = (int)onnx_attr_int(c->node, "transB", 0);
  float alpha = onnx_attr_float(c->node, "alpha", 1.0f), beta = onnx_attr_float(c->node, "beta", 1.0f);
  if (A->ndim != 2 || B->ndim != 2) return onnx_case_error(c, "A and B must be 2-D");
  int64_t M = A->dims[ta ? 1 : 0], K = A->dims[ta ? 0 : 1];
  int64_t N = B->dims[tb ? 0 : 1], KB = B->dims[tb ? 1 : 0];
  if (K != KB) return onnx_case_error(c, "inner dims %lld != %lld", (long long)K, (long long)KB);
  int64_t ydims[2] = {M, N};
  if (onnx_case_out_f(c, 0, 2, ydims)) return c->status;
  if (!(b->x = alloc_floats(M * K)) || !(b->w = alloc_floats(N * K))) return onnx_case_error(c, "out of memory");

  if (ta)
    onnx_shape_axis_to_last(A->f, 1, K, M, b->x);
  else
    memcpy(b->x, A->f, (size_t)(M * K) * sizeof *b->x);
  if (tb)
    memcpy(b->w, B->f, (size_t)(N * K) * sizeof *b->w);
  else
    onnx_shape_axis_to_last(B->f, 1, K, N, b->w);
  OnnxRunStatus st = onnx_case_kernel(c, rt_ref_scale(M * K, b->x, alpha), "rt_ref_scale");
  if (st != ONNX_RUN_OK) return st;

  int row_vec =
      Cin && ((Cin->ndim == 1 && Cin->dims[0] == N) || (Cin->ndim == 2 && Cin->dims[0] == 1 && Cin->dims[1] == N));
  if (row_vec) {
    if (!(b->bias = alloc_floats(N))) return onnx_case_error(c, "out of memory");
    memcpy(b->bias, Cin->f, (size_t)N * sizeof *b->bias);
    if ((st = onnx_case_kernel(c, rt_ref_scale(N, b->bias, beta), "rt_ref_scale")) != ONNX_RUN_OK) return st;
  }
  st = onnx_case_kernel(c, rt_ref_linear_fwd((int)M, (int)K, (int)N, b->x, b->w, b->bias, c->out[0].f),
                        "rt_ref_linear_fwd");
  if (st != ONNX_RUN_OK || !Cin || row_vec) return st;
  if (!(b->cb = alloc_floats(M * N))) return onnx_case_error(c, "out of memory");
  if (onnx_shape_expand(Cin, 2, ydims, b->cb)) return onnx_case_error(c, "C does not broadcast to [M, N]");
  if ((st = onnx_case_kernel(c, rt_ref_scale(M * N, b->cb, beta), "rt_ref_scale")) != ONNX_RUN_OK) return st;
  return onnx_case_kernel(c, rt_ref_add_fwd(M * N, c->out[0].f, b->cb, c->out[0].f), "rt_ref_add_fwd");
}

OnnxRunStatus onnx_op_gemm(OnnxCase *c) {
  static const char *const KNOWN[] = {"alpha", "beta", "transA", "transB", NULL};
  if (onnx_case_unknown_attr(c, KNOWN)) return c->status;
  const OnnxTensor *A, *B, *Cin = NULL;
  if (!(A = onnx_case_float_in(c, 0)) || !(B = onnx_case_float_in(c, 1))) return c->status;
  if (c->nin > 2 && c->in[2] && !(Cin = onnx_case_float_in(c, 2))) return c->status;
  Bufs b = {0};
  OnnxRunStatus st = gemm_run(c, A, B, Cin, &b);
  bufs_free(&b);
  return st;
}
