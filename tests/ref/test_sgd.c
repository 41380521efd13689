/* test_sgd.c - SGD steps against values worked by hand from PyTorch's
 * update rule: plain, weight decay, momentum (buffer seeded with the first
 * gradient), dampening and Nesterov. */
#include "ref_test.h"

static void two_steps(const char *what, RtRefSgd o, float w1, float w2) {
  float w[1] = {1}, g[1] = {0.5f}, buf[1] = {123}; /* buf's old value is ignored at step 1 */
  CHECK(rt_ref_sgd_update(1, w, g, buf, &o, 1) == 0, "%s", what);
  CHECK_CLOSE(w[0], w1, 1e-6, what);
  rt_ref_sgd_update(1, w, g, buf, &o, 0);
  CHECK_CLOSE(w[0], w2, 1e-6, what);
}

int main(void) {
  /* lr 0.1, g 0.5, w 1, wd 0.01: d1 = 0.51 */
  two_steps("plain", (RtRefSgd){0.1f, 0, 0, 0, 0}, 0.95f, 0.9f);
  /* w1 = 1 - 0.051; d2 = 0.5 + 0.00949 = 0.50949 -> w2 = 0.949 - 0.050949 */
  two_steps("weight decay", (RtRefSgd){0.1f, 0, 0, 0.01f, 0}, 0.949f, 0.898051f);
  /* buf1 = 0.51; buf2 = 0.9*0.51 + 0.50949 = 0.96849 -> w2 = 0.949 - 0.096849 */
  two_steps("momentum", (RtRefSgd){0.1f, 0.9f, 0, 0.01f, 0}, 0.949f, 0.852151f);
  /* dampening 0.5: buf2 = 0.459 + 0.5*0.50949 = 0.713745 -> w2 = 0.949 - 0.0713745 */
  two_steps("dampening", (RtRefSgd){0.1f, 0.9f, 0.5f, 0.01f, 0}, 0.949f, 0.8776255f);
  /* nesterov: d1 = 0.51 + 0.9*0.51 = 0.969 -> w1 = 0.9031;
   * d2 = 0.5 + 0.009031 = 0.509031; buf2 = 0.459 + 0.509031 = 0.968031;
   * d = 0.509031 + 0.9*0.968031 = 1.3802589 -> w2 = 0.9031 - 0.13802589 */
  two_steps("nesterov", (RtRefSgd){0.1f, 0.9f, 0, 0.01f, 1}, 0.9031f, 0.76507411f);
  /* many elements: each follows the scalar rule */
  enum { N = 100 };
  float *w = rand_array(N, -1, 1), *g = rand_array(N, -1, 1), buf[N];
  float w0[N];
  memcpy(w0, w, sizeof w0);
  RtRefSgd o = {0.05f, 0.9f, 0, 1e-4f, 1};
  rt_ref_sgd_update(N, w, g, buf, &o, 1);
  for (int i = 0; i < N; i++) {
    double d = g[i] + 1e-4 * w0[i], b = d;
    CHECK_CLOSE(buf[i], b, 1e-6, "buffer");
    CHECK_CLOSE(w[i], w0[i] - 0.05 * (d + 0.9 * b), 1e-6, "array step");
  }
  CHECK(rt_ref_sgd_update(N, w, g, NULL, &o, 0) == RT_REF_EARG, "momentum needs a buffer");
  o.momentum = 0;
  CHECK(rt_ref_sgd_update(N, w, g, NULL, &o, 0) == 0, "no momentum, no buffer");
  free(w), free(g);
  return check_report();
}
