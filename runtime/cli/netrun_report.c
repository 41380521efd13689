/* netrun_report.c - `netrun infer --report` (see netrun_report.h). */
#include "netrun_report.h"

#include <math.h>
#include <stdlib.h>

/* How many classes score higher than class `label` in row (ties to the
 * lower index, as argmax takes the first); classes when label is no class
 * or a logit is not finite. */
static int64_t rank(const float *row, int64_t classes, int64_t label) {
  if (label < 0 || label >= classes) return classes;
  int64_t above = 0;
  for (int64_t c = 0; c < classes; c++) {
    if (!isfinite(row[c])) return classes;
    above += row[c] > row[label] || (row[c] == row[label] && c < label);
  }
  return above;
}

static int64_t argmax(const float *row, int64_t classes) {
  int64_t best = 0;
  for (int64_t c = 0; c < classes; c++) {
    if (!isfinite(row[c])) return -1;
    if (row[c] > row[best]) best = c;
  }
  return best;
}

NetrunReport netrun_report(const float *ref, const float *q, const int64_t *labels, int64_t n, int64_t classes) {
  NetrunReport r = {.n = n};
  double diff2 = 0, ref2 = 0;
  for (int64_t i = 0; i < n; i++) {
    const float *row[2] = {ref + i * classes, q + i * classes};
    int64_t top[2];
    for (int k = 0; k < 2; k++) {
      int64_t at = rank(row[k], classes, labels[i]);
      r.top1[k] += at < 1;
      r.top5[k] += at < 5;
      top[k] = argmax(row[k], classes);
      r.nonfinite[k] += top[k] < 0;
    }
    r.agree += top[0] >= 0 && top[0] == top[1];
    if (top[0] < 0 || top[1] < 0) continue;
    for (int64_t c = 0; c < classes; c++) {
      double d = (double)row[1][c] - (double)row[0][c];
      diff2 += d * d, ref2 += (double)row[0][c] * row[0][c];
      if (fabs(d) > r.max_diff) r.max_diff = fabs(d);
    }
  }
  r.rel_l2 = ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
  return r;
}

static double pct(int64_t k, int64_t n) { return n > 0 ? 100.0 * (double)k / (double)n : 0; }

void netrun_report_print(FILE *f, const NetrunReport *r, const char *ref_name, const char *q_name) {
  fprintf(f, "report on %lld labelled images:\n", (long long)r->n);
  const char *name[2] = {ref_name, q_name};
  for (int k = 0; k < 2; k++)
    fprintf(f, "  %-28s top-1 %6.2f%%  top-5 %6.2f%%%s\n", name[k], pct(r->top1[k], r->n), pct(r->top5[k], r->n),
            r->nonfinite[k] ? "  (rows with NaN or inf counted wrong)" : "");
  fprintf(f, "  top-1 agreement %.2f%% (%lld of %lld); logits: largest difference %.4g, relative L2 %.3g\n",
          pct(r->agree, r->n), (long long)r->agree, (long long)r->n, r->max_diff, r->rel_l2);
}

typedef struct Ranked {
  const NetQuantLayer *l;
  double own; /* the output's error less the error of the input it was handed */
} Ranked;

static int by_own(const void *a, const void *b) {
  double x = ((const Ranked *)a)->own, y = ((const Ranked *)b)->own;
  if (isnan(x) || isnan(y)) return isnan(x) - isnan(y); /* unknown last */
  return (x < y) - (x > y);
}

void netrun_report_layers(FILE *f, const NetQuantLayer *l, int n, int show) {
  Ranked *r = malloc(sizeof *r * (size_t)(n ? n : 1));
  if (!r) return;
  for (int i = 0; i < n; i++) r[i] = (Ranked){&l[i], l[i].out - l[i].in};
  qsort(r, (size_t)n, sizeof *r, by_own);
  fprintf(f, "  the %d of %d quantized layers whose error grows most (relative L2 against the reference):\n",
          show < n ? show : n, n);
  fprintf(f, "    %-32s %10s %10s %10s %10s %10s\n", "layer", "handed", "input q", "weight q", "output", "growth");
  int folded = 0;
  for (int i = 0; i < n && i < show; i++) {
    const NetQuantLayer *x = r[i].l;
    char v[5][16];
    const double col[5] = {x->in, x->act, x->weight, x->out, r[i].own};
    for (int k = 0; k < 5; k++) /* an error that cannot be told apart is "-", never a number */
      if (isnan(col[k]))
        snprintf(v[k], sizeof v[k], "-");
      else if (k == 4)
        snprintf(v[k], sizeof v[k], "%+.3g", col[k]);
      else
        snprintf(v[k], sizeof v[k], "%.3g", col[k]);
    folded += isnan(x->act);
    fprintf(f, "    %-32s %10s %10s %10s %10s %10s\n", x->layer, v[0], v[1], v[2], v[3], v[4]);
  }
  if (folded)
    fprintf(f, "  input q \"-\": the layer before wrote this input in int8 itself (pass requant), so its quantization\n"
               "  is part of the error handed to the layer\n");
  free(r);
}
