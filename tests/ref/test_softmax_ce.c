/* test_softmax_ce.c - softmax cross-entropy with label smoothing: values by
 * hand (PyTorch's formula), large logits, bad labels as errors, the saved
 * probabilities, and dlogits against central differences of the loss. */
#include "ref_test.h"

static void hand_cases(void) {
  const float z2[2] = {0, 0};
  const int32_t l0[1] = {0};
  float loss, prob[3];
  rt_ref_softmax_ce_fwd(1, 2, z2, l0, 0, &loss, NULL);
  CHECK_CLOSE(loss, log(2.0), 1e-7, "uniform, no smoothing");
  rt_ref_softmax_ce_fwd(1, 2, z2, l0, 0.1f, &loss, NULL);
  CHECK_CLOSE(loss, log(2.0), 1e-7, "uniform, smoothing");
  /* z = [1, 2, 3], label 2, eps 0.1: -log p = [2.40760596, 1.40760596, 0.40760596]
   * loss = 0.9*0.40760596 + 0.1*(sum/3) = 0.50760596 */
  const float z3[3] = {1, 2, 3};
  const int32_t l2[1] = {2};
  CHECK(rt_ref_softmax_ce_fwd(1, 3, z3, l2, 0.1f, &loss, prob) == 0, "fwd");
  CHECK_CLOSE(loss, 0.50760596, 1e-6, "smoothed loss");
  CHECK_CLOSE(prob[0], 0.09003057, 1e-6, "p0");
  CHECK_CLOSE(prob[2], 0.66524096, 1e-6, "p2");
  float d[3];
  rt_ref_softmax_ce_bwd(1, 3, z3, NULL, l2, 0.1f, 1, d);
  CHECK_CLOSE(d[0], 0.09003057 - 0.1 / 3, 1e-6, "d0");
  CHECK_CLOSE(d[2], 0.66524096 - 0.9 - 0.1 / 3, 1e-6, "d2");
  /* mean over the batch: two rows, the second with loss log 2 */
  const float zb[6] = {1, 2, 3, 5, 5, -1e30f};
  const int32_t lb[2] = {2, 1};
  rt_ref_softmax_ce_fwd(2, 3, zb, lb, 0, &loss, NULL);
  CHECK_CLOSE(loss, (0.40760596 + log(2.0)) / 2, 1e-6, "batch mean");
  const float big[2] = {1000, 0};
  const int32_t l1[1] = {1};
  rt_ref_softmax_ce_fwd(1, 2, big, l1, 0, &loss, NULL);
  CHECK_CLOSE(loss, 1000, 1e-7, "large logits stay finite");
  rt_ref_softmax_ce_bwd(1, 2, big, NULL, l1, 0, 1, d);
  CHECK(d[0] == 1 && d[1] == -1, "large logits grad %g %g", d[0], d[1]);
  const int32_t bad[2] = {2, 3}, neg[2] = {-1, 0};
  CHECK(rt_ref_softmax_ce_fwd(2, 3, zb, bad, 0, &loss, NULL) == RT_REF_ELABEL, "label == classes");
  CHECK(rt_ref_softmax_ce_fwd(2, 3, zb, neg, 0, &loss, NULL) == RT_REF_ELABEL, "label -1");
  CHECK(rt_ref_softmax_ce_bwd(2, 3, zb, NULL, bad, 0, 1, d) == RT_REF_ELABEL, "bwd label");
}

typedef struct CeCtx {
  int N, K;
  const int32_t *labels;
  float eps;
} CeCtx;

static void ce_as_fn(void *vc, const float *z, float *loss) {
  CeCtx *c = vc;
  rt_ref_softmax_ce_fwd(c->N, c->K, z, c->labels, c->eps, loss, NULL);
}

static void grads(float eps) {
  enum { N = 4, K = 10 };
  int32_t labels[N];
  for (int i = 0; i < N; i++) labels[i] = rng_int(0, K - 1);
  CeCtx c = {N, K, labels, eps};
  float *z = rand_array(N * K, -3, 3), *p = zero_array(N * K);
  float d1[N * K], d2[N * K], loss, dloss = 2.5f;
  rt_ref_softmax_ce_fwd(N, K, z, labels, eps, &loss, p);
  rt_ref_softmax_ce_bwd(N, K, z, p, labels, eps, dloss, d1);
  rt_ref_softmax_ce_bwd(N, K, z, NULL, labels, eps, dloss, d2);
  compare_arrays("dlogits: saved vs recomputed p", d1, d2, N * K, 1e-6);
  double rowsum = 0;
  for (int j = 0; j < K; j++) rowsum += d1[j];
  CHECK(fabs(rowsum) < 1e-6, "a row of dlogits sums to 0: %g", rowsum);
  grad_check(eps > 0 ? "softmax_ce (smoothed) dlogits" : "softmax_ce dlogits", ce_as_fn, &c, z, N * K, 1, &dloss, d1,
             1e-2f, 1e-3, N * K);
  free(z), free(p);
}

int main(void) {
  hand_cases();
  grads(0);
  grads(0.1f);
  return check_report();
}
