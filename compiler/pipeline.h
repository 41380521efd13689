/* pipeline.h - the ordered list of passes and the context they share.
 *
 * Every pass is a function from IR to IR with a name, a doc page under
 * docs/passes/, and a flag that turns it off (-fno-NAME).  The pipeline
 * verifies the graph after every pass and can dump it. */
#ifndef NETC_PIPELINE_H
#define NETC_PIPELINE_H

#include <stdio.h>

#include "ir.h"

typedef struct PassCtx {
  Diag *d;
  const char *dump_dir;    /* write NN-name.ir here after each pass, or NULL */
  const char *print_after; /* print the graph to `out` after this pass, or NULL */
  FILE *out;
  int no_loc;              /* dumps without source locations */
  unsigned disabled;       /* bit i: pass i turned off */
  int inference;           /* --inference: no backward, no optimizer */
} PassCtx;

typedef IrGraph *(*PassFn)(IrGraph *g, PassCtx *cx);

typedef struct Pass {
  const char *name;
  PassFn run;
  const char *what; /* one line for --help */
} Pass;

/* The passes in order; *n receives the count. */
const Pass *pipeline_passes(int *n);
/* Index of the pass called name, or -1.  "parse" is the lowering itself. */
int pipeline_find(const char *name);
/* Runs every enabled pass on *g (replacing it), verifying and dumping after
 * each, starting with a dump of the input as 00-parse.  Returns 0, or -1
 * after reporting errors to cx->d. */
int pipeline_run(IrGraph **g, PassCtx *cx);

/* Passes (one file each). */
IrGraph *pass_dce(IrGraph *g, PassCtx *cx);
IrGraph *pass_autodiff(IrGraph *g, PassCtx *cx);

#endif
