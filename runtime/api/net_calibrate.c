/* net_calibrate.c - INT8 calibration (net.h's net_calibrate).
 *
 * The float model's inference graph runs on the calibration images a batch
 * at a time, on the CPU executor, which keeps every value after a run; the
 * input of every layer that --int8=LAYERS would quantize (those whose
 * input the model compiled with --int8=LAYERS casts to i8) is read back and its magnitudes added
 * to a histogram.  The histogram has HIST_BINS bins over [0, top]; when a
 * batch holds a larger magnitude, top doubles (bins merge in pairs) until
 * it fits, so one pass over the data suffices.  From each histogram the
 * method picks a clipping threshold T, and the scale is T / 127:
 *
 *   max         T = the largest magnitude seen
 *   percentile  T = the magnitude below which `percentile` % of the values lie
 *   mse         T minimizing the mean squared quantization error, clipping
 *               included, over 128 candidates up to the largest magnitude
 *   entropy     T minimizing the KL divergence between the histogram up to T
 *               (what lies above added to its last bin) and its 127-level
 *               quantization, as TensorRT's entropy calibrator chooses
 *
 * The scales go to the file int8_scales.h describes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "int8_scales.h"
#include "net_impl.h"
#include "net_model.h"

enum { HIST_BINS = 2048, LEVELS = 128 };

typedef struct Hist {
  int node, value; /* the layer's node and its input in the inference graph */
  double top;      /* the bins cover [0, top) */
  double max;      /* the largest magnitude seen */
  double count[HIST_BINS];
  double total;
} Hist;

static void hist_add(Hist *h, const float *x, int64_t n) {
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

static double bin_width(const Hist *h) { return h->top / HIST_BINS; }

static double by_percentile(const Hist *h, double pct) {
  double want = h->total * pct / 100, seen = 0;
  for (int b = 0; b < HIST_BINS; b++) {
    seen += h->count[b];
    if (seen >= want) return fmin((b + 1) * bin_width(h), h->max);
  }
  return h->max;
}

/* Mean squared error of quantizing the histogram's values with threshold t
 * (bin centres standing for their values): rounding inside, clipping above. */
static double mse_at(const Hist *h, double t) {
  double step = t / 127, err = 0;
  for (int b = 0; b < HIST_BINS; b++) {
    if (!h->count[b]) continue;
    double x = (b + 0.5) * bin_width(h);
    double q = x >= t ? t : step * nearbyint(x / step);
    err += h->count[b] * (x - q) * (x - q);
  }
  return err;
}

static double by_mse(const Hist *h) {
  double best = h->max, best_err = INFINITY;
  for (int k = 1; k <= LEVELS; k++) {
    double t = h->max * k / LEVELS, e = mse_at(h, t);
    if (e < best_err) best_err = e, best = t;
  }
  return best;
}

/* KL(P || Q) of the first i bins (P: the counts, the `outliers` counted in
 * bins i and above added to bin i-1; Q: the counts merged into LEVELS - 1
 * levels and spread back over the nonzero bins of each level). */
static double kl_at(const Hist *h, int i, double outliers, double *p, double *q) {
  memcpy(p, h->count, sizeof(double) * (size_t)i);
  p[i - 1] += outliers;
  int levels = LEVELS - 1;
  for (int l = 0; l < levels; l++) {
    int lo = (int)((int64_t)l * i / levels), hi = (int)((int64_t)(l + 1) * i / levels);
    double sum = 0;
    int nonzero = 0;
    for (int b = lo; b < hi; b++) sum += h->count[b], nonzero += h->count[b] > 0;
    for (int b = lo; b < hi; b++) q[b] = h->count[b] > 0 ? sum / nonzero : 0;
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

static double by_entropy(const Hist *h) {
  double p[HIST_BINS], q[HIST_BINS], best_kl = INFINITY;
  int best = HIST_BINS;
  int last = HIST_BINS; /* only thresholds below the largest magnitude's bin */
  while (last > LEVELS && h->count[last - 1] == 0) last--;
  double outliers = 0; /* the counts of bins LEVELS and above, less those below i as i grows */
  for (int b = LEVELS; b < HIST_BINS; b++) outliers += h->count[b];
  for (int i = LEVELS; i <= last; i++) {
    if (i > LEVELS) outliers -= h->count[i - 1];
    double kl = kl_at(h, i, outliers, p, q);
    if (kl < best_kl) best_kl = kl, best = i;
  }
  return fmin(best * bin_width(h), h->max);
}

static const char *const METHODS[] = {"percentile", "max", "mse", "entropy"};

NetStatus net_calibrate(NetModel *m, const float *images, int64_t n, const NetCalibrateOpts *o, const char *path) {
  if (!m || !images || !o || !path)
    return net_fail(NET_ERR_ARG, "net_calibrate: %s is NULL",
                    !m        ? "the model"
                    : !images ? "images"
                    : !o      ? "opts"
                              : "path");
  const char *method = o->method ? o->method : "percentile";
  int which = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(method, METHODS[i]) == 0) which = i;
  if (which < 0) return net_fail(NET_ERR_ARG, "calibration method '%s': percentile, max, mse or entropy", method);
  double pct = o->percentile > 0 ? o->percentile : 99.99;
  if (!(pct > 0 && pct <= 100)) return net_fail(NET_ERR_ARG, "percentile %g: give one in (0, 100]", pct);
  if (m->gpu)
    return net_fail(NET_ERR_ARG, "net_calibrate: the model runs on the GPU; calibration reads every layer's input "
                                 "back and needs the CPU executor (load it with device \"cpu\")");
  int64_t B = m->batch, per = m->sample;
  if (n < B)
    return net_fail(NET_ERR_ARG, "net_calibrate: %lld images, fewer than one batch of %lld", (long long)n,
                    (long long)B);
  NetStatus s = net_infer_ready(m);
  if (s) return s;
  const IrGraph *g = m->gi;
  const char *layers = o->layers && *o->layers ? o->layers : "all";
  /* which layers: those whose input the same model compiled with --int8=layers casts to i8 (the precision
   * pass decides, as it will for the quantized model) */
  Arena a;
  arena_init(&a);
  NetGraphs q;
  NetLoadOpts qo = {.precision = m->precision, .batch = B, .inference_only = 1, .int8 = layers};
  char why[NET_ERRMAX];
  s = net_model_open(m->path, &a, &qo, &q, why, sizeof why);
  if (s) {
    arena_free(&a);
    return net_fail(s, "net_calibrate: %s", why);
  }
  Hist *h = NULL;
  int nh = 0;
  for (int k = 0; k < q.infer->nnode && !s; k++) {
    const IrNode *node = &q.infer->node[k];
    if (!node->name || node->nin < 1 || node->op == IR_OP_CAST) continue;
    int x = node->in[0], d = q.infer->val[x].def;
    if (d < 0 || q.infer->node[d].op != IR_OP_CAST || q.infer->val[x].type.dtype != IR_DT_I8) continue;
    int at = -1; /* the layer in the float graph */
    for (int j = 0; j < g->nnode && at < 0; j++)
      if (g->node[j].name && strcmp(g->node[j].name, node->name) == 0 && g->node[j].op != IR_OP_CAST) at = j;
    if (at < 0) continue;
    Hist *more = realloc(h, sizeof *h * (size_t)(nh + 1));
    if (!more) {
      s = net_fail(NET_ERR_NOMEM, "out of memory");
      break;
    }
    h = more;
    memset(&h[nh], 0, sizeof *h);
    h[nh].node = at, h[nh].value = g->node[at].in[0];
    nh++;
  }
  net_model_close(&q);
  arena_free(&a);
  if (s || !nh) {
    free(h);
    return s ? s : net_fail(NET_ERR_ARG, "net_calibrate: --int8=%s quantizes no layer of this model", layers);
  }
  int64_t most = 0;
  for (int i = 0; i < nh; i++) {
    int64_t k = net_exec_numel(m->xi, h[i].value);
    if (k > most) most = k;
  }
  float *buf = malloc(sizeof(float) * (size_t)(most > 0 ? most : 1));
  float *logits = malloc(sizeof(float) * (size_t)(B * m->classes));
  int64_t batches = n / B;
  for (int64_t b = 0; b < batches && buf && logits && !s; b++) {
    s = net_infer(m, images + b * B * per, B, logits);
    for (int i = 0; i < nh && !s; i++) {
      s = net_failed(net_exec_read(m->xi, h[i].value, buf, net_err_buf(), NET_ERRMAX));
      if (!s) hist_add(&h[i], buf, net_exec_numel(m->xi, h[i].value));
    }
  }
  if (!buf || !logits) s = net_fail(NET_ERR_NOMEM, "out of memory");
  const char **layer = calloc((size_t)nh, sizeof *layer);
  double *scale = calloc((size_t)nh, sizeof *scale);
  if (!s && (!layer || !scale)) s = net_fail(NET_ERR_NOMEM, "out of memory");
  for (int i = 0; i < nh && !s; i++) {
    double t = which == 1   ? h[i].max
               : which == 2 ? by_mse(&h[i])
               : which == 3 ? by_entropy(&h[i])
                            : by_percentile(&h[i], pct);
    layer[i] = g->node[h[i].node].name;
    scale[i] = t > 0 ? t / 127 : 1.0 / 127; /* an input that is all zeros: any scale */
  }
  if (!s) {
    char tmp[4200], comment[512];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    if (which == 0)
      snprintf(comment, sizeof comment, "method percentile %g over %lld images", pct, (long long)(batches * B));
    else
      snprintf(comment, sizeof comment, "method %s over %lld images", method, (long long)(batches * B));
    FILE *f = fopen(tmp, "w");
    int bad = !f || int8_scales_write(f, comment, layer, scale, nh) != 0;
    if (f && fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
      remove(tmp);
      s = net_fail(NET_ERR_IO, "%s: cannot write the scales", path);
    }
  }
  free(layer);
  free(scale);
  free(buf);
  free(logits);
  free(h);
  return s;
}
