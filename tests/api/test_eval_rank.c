/* test_eval_rank.c - how evaluation ranks a label in a row of logits
 * (net_eval_rank, runtime/api/net_run.c): ties go to the lower class as
 * argmax does, and a row with a NaN or an infinity is a miss at every k, so
 * a diverged model is never reported as accurate. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "net_impl.h"

int main(void) {
  const float row[6] = {0.1f, 2.0f, -1.0f, 2.0f, 0.5f, 0.3f};
  CHECK(net_eval_rank(row, 6, 1) == 0, "the largest logit ranks first");
  CHECK(net_eval_rank(row, 6, 3) == 1, "a tie goes to the lower class");
  CHECK(net_eval_rank(row, 6, 2) == 5, "the smallest ranks last");
  CHECK(net_eval_rank(row, 6, 6) == 6 && net_eval_rank(row, 6, -1) == 6, "a label that is not a class is a miss");
  float bad[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
  for (int64_t k = 0; k < 6; k++) CHECK(net_eval_rank(bad, 6, k) == 6, "all-NaN row, label %d: a miss", (int)k);
  float one_nan[6] = {0.1f, 2.0f, -1.0f, NAN, 0.5f, 0.3f};
  CHECK(net_eval_rank(one_nan, 6, 1) == 6, "one NaN anywhere in the row: a miss");
  float inf[6] = {0.1f, INFINITY, -1.0f, 2.0f, 0.5f, 0.3f};
  CHECK(net_eval_rank(inf, 6, 1) == 6, "+Inf on the label: a miss, not a sure hit");
  inf[1] = -INFINITY;
  CHECK(net_eval_rank(inf, 6, 3) == 6, "-Inf elsewhere: a miss");
  return check_report();
}
