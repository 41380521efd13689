/* onnx_op_momentum.c - ONNX Momentum (ai.onnx.preview.training) on
 * rt_ref_sgd_update.
 *
 * Inputs R (learning rate), T (step count), X1..Xn, G1..Gn, V1..Vn; outputs
 * X1_new..Xn_new, V1_new..Vn_new.  ONNX, with g = G + norm_coefficient * X
 * and beta' = (T > 0 ? beta : 1):
 *   V_new = alpha * V + beta' * g
 *   X_new = X - R * V_new                 (mode "standard")
 *   X_new = X - R * (g + alpha * V_new)   (mode "nesterov")
 * which is PyTorch's SGD step (not its first step) with momentum = alpha,
 * dampening = 1 - beta', weight_decay = norm_coefficient. */
#include <string.h>

#include "onnx_case.h"
#include "rt_ref.h"

OnnxRunStatus onnx_op_momentum(OnnxCase *c) {
  static const char *const KNOWN[] = {"alpha", "beta", "mode", "norm_coefficient", NULL};
  if (onnx_case_unknown_attr(c, KNOWN)) return c->status;
  if (c->nin < 5 || (c->nin - 2) % 3 != 0 || c->nout != 2 * ((c->nin - 2) / 3))
    return onnx_case_error(c, "want R, T, then X, G, V groups");
  const OnnxTensor *R = onnx_case_float_in(c, 0), *T = c->in[1];
  if (!R) return c->status;
  if (!T || !T->i || T->n != 1 || R->n != 1) return onnx_case_error(c, "R and T must be scalars, T an integer");
  char mode[16];
  onnx_attr_string(c->node, "mode", "standard", mode, sizeof mode);
  int nesterov = strcmp(mode, "nesterov") == 0;
  if (!nesterov && strcmp(mode, "standard") != 0) return onnx_case_error(c, "unknown mode '%s'", mode);
  float beta = T->i[0] > 0 ? onnx_attr_float(c->node, "beta", 0.0f) : 1.0f;
  RtRefSgd o = {R->f[0], onnx_attr_float(c->node, "alpha", 0.0f), 1.0f - beta,
                onnx_attr_float(c->node, "norm_coefficient", 0.0f), nesterov};

  int n = (c->nin - 2) / 3;
  for (int k = 0; k < n; k++) {
    const OnnxTensor *X, *G, *V;
    if (!(X = onnx_case_float_in(c, 2 + k)) || !(G = onnx_case_float_in(c, 2 + n + k)) ||
        !(V = onnx_case_float_in(c, 2 + 2 * n + k)))
      return c->status;
    if (G->n != X->n || V->n != X->n) return onnx_case_error(c, "X, G, V sizes differ in group %d", k);
    if (onnx_case_out_f(c, k, X->ndim, X->dims) || onnx_case_out_f(c, n + k, V->ndim, V->dims)) return c->status;
    memcpy(c->out[k].f, X->f, X->n * sizeof *X->f);
    memcpy(c->out[n + k].f, V->f, V->n * sizeof *V->f);
    OnnxRunStatus st = onnx_case_kernel(c, rt_ref_sgd_update((int64_t)X->n, c->out[k].f, G->f, c->out[n + k].f, &o, 0),
                                        "rt_ref_sgd_update");
    if (st != ONNX_RUN_OK) return st;
  }
  return ONNX_RUN_OK;
}
