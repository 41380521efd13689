/* net_calib_hist.h - the histogram INT8 calibration keeps of a layer's
 * input (net_calibrate.c), and the four ways a clipping threshold T is
 * picked from it (the scale is then T / 127).
 *
 * The histogram has NET_HIST_BINS bins of magnitudes over [0, top); when a
 * batch holds a larger magnitude, top doubles (bins merge in pairs) until
 * it fits, so one pass over the data suffices.
 *
 *   max         T = the largest magnitude seen
 *   percentile  T = the magnitude below which `percentile` % of the values lie
 *   mse         T minimizing the mean squared quantization error, clipping
 *               included, over 128 candidates up to the largest magnitude
 *   entropy     T minimizing the KL divergence between the histogram up to T
 *               (what lies above added to its last bin) and its 127-level
 *               quantization, as TensorRT's entropy calibrator chooses --
 *               with the first bin counted as its neighbour: the exact
 *               zeros a relu makes (often half the values) quantize to 0
 *               at any threshold, and counted as they are they make the
 *               search favour short ranges, whose first level is narrow
 *               (NVIDIA's pytorch-quantization does the same) */
#ifndef NETC_NET_CALIB_HIST_H
#define NETC_NET_CALIB_HIST_H

#include <stdint.h>

enum { NET_HIST_BINS = 2048 };

typedef struct NetHist {
  int node, value; /* the layer's node and its input in the inference graph (the caller's) */
  double top;      /* the bins cover [0, top) */
  double max;      /* the largest magnitude seen */
  double count[NET_HIST_BINS];
  double total;
} NetHist;

/* Adds the magnitudes of x[0..n) (h zeroed to start). */
void net_hist_add(NetHist *h, const float *x, int64_t n);
double net_hist_percentile(const NetHist *h, double pct);
double net_hist_mse(const NetHist *h);
double net_hist_entropy(const NetHist *h);

#endif
