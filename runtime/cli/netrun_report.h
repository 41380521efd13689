/* netrun_report.h - `netrun infer --report`: what INT8 costs.  The logits
 * of the quantized model (netrun --int8) and of the same network and
 * weights without it, on one labelled batch, side by side: top-1 and top-5
 * of each, how often their top-1 agree, and the largest logit difference.
 * A row with a NaN or an infinity is never a correct prediction, and never
 * an agreement.  Then the layers where the error grows most (net.h's
 * net_quant_errors). */
#ifndef NETC_NETRUN_REPORT_H
#define NETC_NETRUN_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "net.h"

typedef struct NetrunReport {
  int64_t n;                /* images */
  int64_t top1[2], top5[2]; /* correct, [0] the reference, [1] the quantized model */
  int64_t agree;            /* rows whose top-1 class is the same in both */
  int64_t nonfinite[2];     /* rows with a NaN or an infinity */
  double max_diff, rel_l2;  /* largest |q - ref| and ||q - ref|| / ||ref|| over the finite rows */
} NetrunReport;

/* ref and q: n x classes logits; labels: n classes (a label outside
 * 0..classes-1 counts as a miss). */
NetrunReport netrun_report(const float *ref, const float *q, const int64_t *labels, int64_t n, int64_t classes);

/* The report as lines for a user; `what` names the quantized layers. */
void netrun_report_print(FILE *f, const NetrunReport *r, const char *ref_name, const char *q_name);

/* The `show` layers of l[0..n) whose own error is largest -- the growth of
 * the output's error over that of the input the layer was handed, what
 * quantizing it added -- with those errors and its quantization errors. */
void netrun_report_layers(FILE *f, const NetQuantLayer *l, int n, int show);

#endif
