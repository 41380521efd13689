/* rt_ref_linear.c - the fully connected layer, PyTorch's nn.Linear:
 * y[M, Cout] = x[M, Cin] w[Cout, Cin]^T + b[Cout], and its backward, as cblas_sgemm. */
#include <cblas.h>

#include "rt_ref.h"

int rt_ref_linear_fwd(int M, int Cin, int Cout, const float *x, const float *w, const float *bias, float *y) {
  if (M < 1 || Cin < 1 || Cout < 1) return RT_REF_ESHAPE;
  if (!x || !w || !y) return RT_REF_EARG;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, Cout, Cin, 1.0f, x, Cin, w, Cin, 0.0f, y, Cout);
  if (bias)
    for (int m = 0; m < M; m++)
      for (int j = 0; j < Cout; j++) y[(int64_t)m * Cout + j] += bias[j];
  return RT_REF_OK;
}

int rt_ref_linear_bwd(int M, int Cin, int Cout, const float *x, const float *w, const float *dy, float *dx, float *dw,
                      float *dbias) {
  if (M < 1 || Cin < 1 || Cout < 1) return RT_REF_ESHAPE;
  if (!dy || (dx && !w) || (dw && !x)) return RT_REF_EARG;
  if (dx) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, Cin, Cout, 1.0f, dy, Cout, w, Cin, 0.0f, dx, Cin);
  if (dw) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Cout, Cin, M, 1.0f, dy, Cout, x, Cin, 0.0f, dw, Cin);
  if (dbias) {
    for (int j = 0; j < Cout; j++) dbias[j] = 0;
    for (int m = 0; m < M; m++)
      for (int j = 0; j < Cout; j++) dbias[j] += dy[(int64_t)m * Cout + j];
  }
  return RT_REF_OK;
}
