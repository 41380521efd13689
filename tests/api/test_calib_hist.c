/* test_calib_hist.c - INT8 calibration's thresholds (runtime/api/
 * net_calib_hist.h) on magnitudes drawn as a relu's output is: half exact
 * zeros, half |N(0, 1)|.  Each method's threshold T must lie where its
 * criterion puts it -- max at the largest draw, percentile 99.99 near
 * 3.9, mse and entropy in the tail (between 2 and the largest) -- and the
 * zeros must not matter: the same draws without them give entropy's T
 * within 10%.  Before the zero bin was counted as its neighbour, entropy
 * chose 0.4 here: the half of the mass in the first bin made the KL search
 * favour the shortest ranges. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net_calib_hist.h"

enum { N = 1 << 20 };

static uint64_t state = 0x9e3779b97f4a7c15ull;
static double uniform(void) {
  state ^= state << 13, state ^= state >> 7, state ^= state << 17;
  return ((double)(state >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void) { return sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform()); }

int main(void) {
  float *x = malloc(sizeof(float) * N), *nz = malloc(sizeof(float) * N);
  NetHist *with = calloc(1, sizeof *with), *without = calloc(1, sizeof *without);
  if (!x || !nz || !with || !without) return 1;
  int64_t k = 0;
  for (int i = 0; i < N; i++) {
    x[i] = i % 2 ? (float)fabs(gauss()) : 0.0f; /* a relu's output */
    if (x[i] > 0) nz[k++] = x[i];
  }
  /* in batches, as calibration adds them: the range grows as larger magnitudes come */
  for (int b = 0; b < 16; b++) net_hist_add(with, x + b * (N / 16), N / 16);
  net_hist_add(without, nz, k);
  double mx = with->max, pct = net_hist_percentile(with, 99.99), mse = net_hist_mse(with);
  double ent = net_hist_entropy(with), ent_nz = net_hist_entropy(without);
  printf("max %.3f  percentile 99.99 %.3f  mse %.3f  entropy %.3f (without the zeros %.3f)\n", mx, pct, mse, ent,
         ent_nz);
  CHECK(mx > 4 && mx < 6.5, "max %g: the largest of 2^19 draws of |N(0,1)| lies near 5", mx);
  CHECK(with->total == N, "the histogram counted %g of %d values", with->total, N);
  /* 99.99% of all values: half are zeros, so the 99.98th percentile of |N(0,1)|, about 3.7 */
  CHECK(pct > 3.4 && pct < 4.1 && pct <= mx, "percentile 99.99: %g", pct);
  CHECK(mse > 2 && mse <= mx, "mse: %g (in the tail, not at the first levels)", mse);
  CHECK(ent > 2 && ent <= mx, "entropy: %g (in the tail; a threshold near 0 clips the bulk)", ent);
  CHECK(fabs(ent - ent_nz) <= 0.1 * ent_nz, "entropy with a relu's zeros %g, without %g: the zeros weigh in", ent,
        ent_nz);
  free(x), free(nz), free(with), free(without);
  return check_report();
}
