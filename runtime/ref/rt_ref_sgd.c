/* rt_ref_sgd.c - one step of torch.optim.SGD on a parameter array: weight
 * decay folded into the gradient, momentum buffer (seeded with the first
 * gradient, as PyTorch does), optional dampening and Nesterov. */
#include "rt_ref.h"

int rt_ref_sgd_update(int64_t n, float *w, const float *g, float *buf, const RtRefSgd *o, int first_step) {
  if (n < 0) return RT_REF_ESHAPE;
  if (!o || (n && (!w || !g || (o->momentum != 0 && !buf)))) return RT_REF_EARG;
  float lr = o->lr, mu = o->momentum, wd = o->weight_decay;
  float damp = 1 - o->dampening;
  for (int64_t i = 0; i < n; i++) {
    float d = g[i] + wd * w[i];
    if (mu != 0) {
      float b = first_step ? d : mu * buf[i] + damp * d;
      buf[i] = b;
      d = o->nesterov ? d + mu * b : b;
    }
    w[i] -= lr * d;
  }
  return RT_REF_OK;
}
