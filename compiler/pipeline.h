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
  int no_loc;                           /* dumps without source locations */
  unsigned disabled;                    /* bit i: pass i turned off */
  int inference;                        /* --inference: no backward, no optimizer */
  IrDtype precision;                    /* --precision: default dtype of the precision policy (IR_DT_F16 unless set) */
  int precision_set;                    /* --precision given: it overrides the train section's `precision` */
  const char *int8_layers;              /* --int8=NAME,NAME: layers to run in i8, or NULL */
  const char *fp8_layers;               /* the same for FP8 (E4M3 forward): "all" from --precision fp8 */
  const struct Int8Scales *int8_scales; /* --int8-scales: calibrated input scales of i8 layers, or NULL */
  int64_t batch;          /* --batch: batch size the memory plan is made for (0: the train section's, else 1) */
  const char *train_file; /* --train: the train section of an ONNX model, or NULL (compile.h's default) */
  int64_t image_hw[2];    /* --image-size: the image input's height and width (0: as the file declares; resize.h) */
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
/* The PassCtx.disabled bit of pass `name` (-fno-NAME), or 0 for no such pass. */
unsigned pipeline_bit(const char *name);
/* PassCtx.disabled bits of every pass after `name` (all passes for "parse"):
 * to stop the pipeline there. */
unsigned pipeline_mask_after(const char *name);
/* Runs every enabled pass on *g (replacing it), verifying and dumping after
 * each, starting with a dump of the input as 00-parse.  Returns 0, or -1
 * after reporting errors to cx->d. */
int pipeline_run(IrGraph **g, PassCtx *cx);

/* Passes (one file each). */
IrGraph *pass_dce(IrGraph *g, PassCtx *cx);
IrGraph *pass_autodiff(IrGraph *g, PassCtx *cx);
IrGraph *pass_fuse(IrGraph *g, PassCtx *cx);
IrGraph *pass_layout(IrGraph *g, PassCtx *cx);
IrGraph *pass_precision(IrGraph *g, PassCtx *cx);
/* The dtype the precision policy gives node n of g (the layout pass pads
 * channels for it before the precision pass runs). */
IrDtype pass_precision_policy(const IrGraph *g, int n, const PassCtx *cx);
/* A --precision name into cx: fp32, fp16 or bf16 the default dtype; fp8
 * the default f16 with every convolution but the first in FP8 (E4M3
 * forward; fp8_layers "all").  0, or -1 for another name. */
int pass_precision_parse(const char *name, PassCtx *cx);
#define PASS_PRECISION_NAMES "fp32, fp16, bf16 or fp8"
IrGraph *pass_requant(IrGraph *g, PassCtx *cx);
IrGraph *pass_prologue(IrGraph *g, PassCtx *cx);
/* pass_prologue on an inference graph (pass_prologue_infer.c): a batch norm + relu read only by a max pool
 * applied by the pool. */
IrGraph *pass_prologue_infer(IrGraph *g, PassCtx *cx);
IrGraph *pass_overlap(IrGraph *g, PassCtx *cx);
IrGraph *pass_hoist(IrGraph *g, PassCtx *cx);
IrGraph *pass_memplan(IrGraph *g, PassCtx *cx);
/* The least any plan of g's activations can use: the largest sum of the
 * sizes of values live at one time, at g->plan_batch. */
int64_t pass_memplan_lower_bound(const IrGraph *g);

#endif
