/* net_calib_hist.c - INT8 calibration's histogram and thresholds
 * (net_calib_hist.h). */
#include "net_calib_hist.h"

#include <math.h>
#include <string.h>

enum { HIST_BINS = NET_HIST_BINS, LEVELS = 128 };

void net_hist_add(NetHist *h, const float *x, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
  if (m > h->max) h->max = m;
  if (h->top <= 0) h->top = m > 0 ? m * 1.0001 : 1;
  while (m >= h->top) { /* double the range: bins merge in pairs */
    for (int b = 0; b < HIST_BINS / 2; b++) h->count[b] = h->count[2 * b] + h->count[2 * b + 1];
    memset(h->count + HIST_BINS / 2, 0, sizeof(double) * HIST_BINS / 2);
    h->top *= 2;
  }
  double per = HIST_BINS / h->top;
  for (int64_t i = 0; i < n; i++) {
    int b = (int)(fabs((double)x[i]) * per);
    h->count[b < HIST_BINS ? b : HIST_BINS - 1] += 1;
  }
  h->total += (double)n;
}

static double bin_width(const NetHist *h) { return h->top / HIST_BINS; }

double net_hist_percentile(const NetHist *h, double pct) {
  double want = h->total * pct / 100, seen = 0;
  for (int b = 0; b < HIST_BINS; b++) {
    seen += h->count[b];
    if (seen >= want) return fmin((b + 1) * bin_width(h), h->max);
  }
  return h->max;
}

/* Mean squared error of quantizing the histogram's values with threshold t
 * (bin centres standing for their values): rounding inside, clipping above. */
static double mse_at(const NetHist *h, double t) {
  double step = t / 127, err = 0;
  for (int b = 0; b < HIST_BINS; b++) {
    if (!h->count[b]) continue;
    double x = (b + 0.5) * bin_width(h);
    double q = x >= t ? t : step * nearbyint(x / step);
    err += h->count[b] * (x - q) * (x - q);
  }
  return err;
}

double net_hist_mse(const NetHist *h) {
  double best = h->max, best_err = INFINITY;
  for (int k = 1; k <= LEVELS; k++) {
    double t = h->max * k / LEVELS, e = mse_at(h, t);
    if (e < best_err) best_err = e, best = t;
  }
  return best;
}

/* KL(P || Q) of the first i bins (P: the counts c, the `outliers` counted
 * in bins i and above added to bin i-1; Q: the counts merged into LEVELS -
 * 1 levels and spread back over the nonzero bins of each level). */
static double kl_at(const double *c, int i, double outliers, double *p, double *q) {
  memcpy(p, c, sizeof(double) * (size_t)i);
  p[i - 1] += outliers;
  int levels = LEVELS - 1;
  for (int l = 0; l < levels; l++) {
    int lo = (int)((int64_t)l * i / levels), hi = (int)((int64_t)(l + 1) * i / levels);
    double sum = 0;
    int nonzero = 0;
    for (int b = lo; b < hi; b++) sum += c[b], nonzero += c[b] > 0;
    for (int b = lo; b < hi; b++) q[b] = c[b] > 0 ? sum / nonzero : 0;
  }
  double ps = 0, qs = 0;
  for (int b = 0; b < i; b++) ps += p[b], qs += q[b];
  if (ps <= 0 || qs <= 0) return INFINITY;
  double kl = 0;
  for (int b = 0; b < i; b++) {
    if (p[b] <= 0) continue;
    double pp = p[b] / ps, qq = q[b] / qs;
    kl += qq > 0 ? pp * log(pp / qq) : pp * log(pp / 1e-12); /* a P mass Q lacks: heavily penalized */
  }
  return kl;
}

double net_hist_entropy(const NetHist *h) {
  double c[HIST_BINS], p[HIST_BINS], q[HIST_BINS], best_kl = INFINITY;
  memcpy(c, h->count, sizeof c);
  c[0] = c[1]; /* a relu's exact zeros quantize to 0 at any threshold: they do not choose it (net_calib_hist.h) */
  int best = HIST_BINS;
  int last = HIST_BINS; /* only thresholds below the largest magnitude's bin */
  while (last > LEVELS && h->count[last - 1] == 0) last--;
  double outliers = 0; /* the counts of bins LEVELS and above, less those below i as i grows */
  for (int b = LEVELS; b < HIST_BINS; b++) outliers += h->count[b];
  for (int i = LEVELS; i <= last; i++) {
    if (i > LEVELS) outliers -= h->count[i - 1];
    double kl = kl_at(c, i, outliers, p, q);
    if (kl < best_kl) best_kl = kl, best = i;
  }
  return fmin(best * bin_width(h), h->max);
}
