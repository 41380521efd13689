/* test_sgd.c - sgd_update against PyTorch's SGD computed by hand: the
 * gradient is unscaled by the loss scale first, then weight decay, momentum
 * (plain and Nesterov, and none) over three steps, all in place. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "exectest.h"

static const char *TEXT =
    "graph t {\n"
    "  input %0 g : f32[6]\n"
    "  input %1 lr : f32[]\n"
    "  input %2 ls : f32[]\n"
    "  param @w0 : f32[6]\n  state @b0 : f32[6]\n"
    "  param @w1 : f32[6]\n  state @b1 : f32[6]\n"
    "  param @w2 : f32[6]\n  state @b2 : f32[6]\n"
    "  optimizer:\n"
    "  sgd_update(@w0, %0, @b0, %1, %2) {momentum=0.9 nesterov=0 weight_decay=0.01}  # plain\n"
    "  sgd_update(@w1, %0, @b1, %1, %2) {momentum=0.8 nesterov=1 weight_decay=0.001}  # nesterov\n"
    "  sgd_update(@w2, %0, @b2, %1, %2) {momentum=0 nesterov=0 weight_decay=0.1}  # none\n"
    "}\n";

int main(void) {
  ExectestCase c;
  if (exectest_open(&c, TEXT, 1)) {
    CHECK(0, "sgd graph did not load");
    exectest_close(&c);
    return check_report();
  }
  static const double mom[3] = {0.9, 0.8, 0}, wd[3] = {0.01, 0.001, 0.1};
  static const int nest[3] = {0, 1, 0};
  double w[3][6], buf[3][6] = {{0}};
  float *g = exectest_f(c.x, "g");
  uint64_t seed = 5;
  const char *wn[3] = {"w0", "w1", "w2"}, *bn[3] = {"b0", "b1", "b2"};
  for (int k = 0; k < 3; k++) {
    float *p = exectest_fill(c.x, exectest_val(c.x, wn[k]), &seed, -1, 1);
    for (int i = 0; i < 6; i++) w[k][i] = p[i];
  }
  const float scales[3] = {1024, 1, 0.5f}, lrs[3] = {0.1f, 0.05f, 0.2f};
  for (int step = 0; step < 3; step++) {
    exectest_fill(c.x, exectest_val(c.x, "g"), &seed, -100, 100);
    exectest_f(c.x, "lr")[0] = lrs[step];
    exectest_f(c.x, "ls")[0] = scales[step];
    CHECK(exectest_run(c.x) == 0, "sgd step %d", step);
    for (int k = 0; k < 3; k++) {
      for (int i = 0; i < 6; i++) {
        double d = (double)g[i] / scales[step] + wd[k] * w[k][i];
        if (mom[k] != 0) {
          buf[k][i] = step == 0 ? d : mom[k] * buf[k][i] + d;
          d = nest[k] ? d + mom[k] * buf[k][i] : buf[k][i];
        }
        w[k][i] -= lrs[step] * d;
      }
      const float *pw = exectest_f(c.x, wn[k]), *pb = exectest_f(c.x, bn[k]);
      for (int i = 0; i < 6; i++) {
        char what[64];
        snprintf(what, sizeof what, "step %d %s[%d]", step, wn[k], i);
        CHECK_CLOSE(pw[i], w[k][i], 1e-5, what);
        snprintf(what, sizeof what, "step %d %s[%d]", step, bn[k], i);
        CHECK_CLOSE(pb[i], buf[k][i], 1e-5, what);
      }
    }
  }
  /* A loss scale of zero is an error, not a division by zero. */
  exectest_f(c.x, "ls")[0] = 0;
  char err[256] = "";
  CHECK(rt_cpu_run(c.x, err, sizeof err) == -1, "loss scale 0 fails");
  CHECK(strstr(err, "plain") && strstr(err, "sgd_update"), "message names the node: %s", err);
  exectest_close(&c);
  return check_report();
}
