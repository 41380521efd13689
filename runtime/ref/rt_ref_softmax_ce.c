/* rt_ref_softmax_ce.c - softmax cross-entropy with label smoothing, mean
 * over the batch, PyTorch's CrossEntropyLoss(label_smoothing=eps):
 *   loss_n = (1-eps) * -log p[label] + eps * mean_j -log p[j]
 * with log p = z - max z - log sum exp(z - max z), summed in double.
 * A label outside [0, classes) is an error, never silently ignored. */
#include <math.h>

#include "rt_ref.h"

static int ce_check(int N, int classes, const float *logits, const int32_t *labels, float eps) {
  if (N < 1 || classes < 1) return RT_REF_ESHAPE;
  if (!logits || !labels || !(eps >= 0 && eps <= 1)) return RT_REF_EARG;
  for (int n = 0; n < N; n++)
    if (labels[n] < 0 || labels[n] >= classes) return RT_REF_ELABEL;
  return RT_REF_OK;
}

/* Row max and log sum exp(z - max). */
static double row_lse(const float *z, int classes, float *zmax) {
  float m = z[0];
  for (int j = 1; j < classes; j++) m = z[j] > m ? z[j] : m;
  double s = 0;
  for (int j = 0; j < classes; j++) s += exp((double)z[j] - m);
  *zmax = m;
  return log(s);
}

int rt_ref_softmax_ce_fwd(int N, int classes, const float *logits, const int32_t *labels, float eps, float *loss,
                          float *prob) {
  int rc = ce_check(N, classes, logits, labels, eps);
  if (rc) return rc;
  if (!loss) return RT_REF_EARG;
  double total = 0;
  for (int n = 0; n < N; n++) {
    const float *z = logits + (int64_t)n * classes;
    float m;
    double lse = row_lse(z, classes, &m), sum_nlp = 0;
    for (int j = 0; j < classes; j++) {
      double lp = (double)z[j] - m - lse;
      sum_nlp -= lp;
      if (prob) prob[(int64_t)n * classes + j] = (float)exp(lp);
    }
    double nll = -((double)z[labels[n]] - m - lse);
    total += (1.0 - eps) * nll + eps * sum_nlp / classes;
  }
  *loss = (float)(total / N);
  return RT_REF_OK;
}

int rt_ref_softmax_ce_bwd(int N, int classes, const float *logits, const float *prob, const int32_t *labels, float eps,
                          float dloss, float *dlogits) {
  int rc = ce_check(N, classes, logits, labels, eps);
  if (rc) return rc;
  if (!dlogits) return RT_REF_EARG;
  double scale = (double)dloss / N, off = (double)eps / classes;
  for (int n = 0; n < N; n++) {
    const float *z = logits + (int64_t)n * classes;
    float *d = dlogits + (int64_t)n * classes;
    float m = 0;
    double lse = prob ? 0 : row_lse(z, classes, &m);
    for (int j = 0; j < classes; j++) {
      double p = prob ? prob[(int64_t)n * classes + j] : exp((double)z[j] - m - lse);
      double t = off + (j == labels[n] ? 1.0 - eps : 0.0);
      d[j] = (float)(scale * (p - t));
    }
  }
  return RT_REF_OK;
}
