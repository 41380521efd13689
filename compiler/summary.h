/* summary.h - the layer table of `netc --summary`. */
#ifndef NETC_SUMMARY_H
#define NETC_SUMMARY_H

#include <stdio.h>

#include "ir.h"

typedef struct SummaryTotals {
  int64_t params; /* trained parameters (not running statistics) */
  int64_t macs;   /* multiply-accumulates of one forward pass of one sample */
} SummaryTotals;

/* Multiply-accumulates of one node for one sample (convolutions and linear
 * layers; 0 for everything else). */
int64_t summary_node_macs(const IrGraph *g, const IrNode *n);
SummaryTotals summary_totals(const IrGraph *g);
/* Prints one row per node (layer, op, per-sample output shape, parameters,
 * MACs), then `params: N` and `macs: N`. */
void summary_print(FILE *f, const IrGraph *g);
/* After the pipeline: `activation memory: N bytes (batch B, lower bound M
 * bytes)` from g's memory plan, and `parameter and state memory: N bytes`. */
void summary_print_memory(FILE *f, const IrGraph *g);

#endif
