/* cg_multi.h - multi-tensor runs: one kernel for many optimizer nodes.
 *
 * A ResNet-50 step ends with ~160 sgd_update nodes and starts with ~50
 * casts of f32 master weights to f16, most on tensors of a few hundred
 * elements: one launch each is mostly launch and tail overhead.  Here such
 * nodes are gathered into runs, each run one kernel (sgd_multi.cu,
 * cast_multi.cu) launched at the run's first node (its head) that does the
 * work of every node of the run; the other nodes of the run launch nothing.
 *
 *   sgd run   sgd_update nodes of one unbroken stretch of sgd_updates with
 *             the same lr, loss scale and skip inputs, attributes and
 *             dtypes (w, g, buf), and distinct w and buf.  They touch
 *             disjoint tensors, so their order does not matter.
 *   cast run  casts of a PARAM (f32 -> f16/bf16, one dtype pair) moved up
 *             to the first of them: a later cast joins when no node between
 *             the head and it uses memory its output overlaps (the memory
 *             plan may reuse that space until the cast), and the
 *             optimizer section's start (IrGraph.opt_first) does not come
 *             first.  So a run never crosses it (rt_gpu_accum.c launches
 *             the nodes before and after it separately).  Casts marked
 *             `once` (pass_hoist) and unmarked ones never share a run: the
 *             executor launches the former outside the step.
 *
 * cg_multi_plan() finds the runs and writes their kernels without a GPU
 * (no addresses are needed: the tensors' pointers come from a device
 * table).  The GPU executor compiles them through the one cache path,
 * uploads the tables and launches each run at its head
 * (runtime/gpu/rt_gpu_optim.h); with the multi_tensor option off, or
 * without NVRTC (a prebuilt model.so on a machine without it), the nodes
 * launch one by one. */
#ifndef NETC_CG_MULTI_H
#define NETC_CG_MULTI_H

#include <stddef.h>
#include <stdint.h>

#include "cg_kernels.h"
#include "ir.h"

typedef enum CgMultiKind { CG_MULTI_SGD, CG_MULTI_CAST } CgMultiKind;

typedef struct CgMultiRun {
  CgMultiKind kind;
  int n;            /* nodes in the run (2 or more) */
  int *node;        /* the nodes, node[0] the head; n of them, in step order */
  int64_t blocks;   /* the launch's grid */
  CgKLaunch launch; /* name, grid, block; args: the head's scalars (lr, loss scale, skip), after the table */
  char *unit;       /* malloc'd: this run's kernel alone (common.cu + template), for nvcc */
} CgMultiRun;

typedef struct CgMultiPlan {
  int nrun;
  CgMultiRun *run;
  char *source; /* malloc'd: every run's kernel, each in a namespace of its own; NULL when no run */
  size_t source_len;
} CgMultiPlan;

/* The runs of g at batch.  0, or -1 with a message (out of memory, a
 * template missing). */
int cg_multi_plan(const IrGraph *g, int64_t batch, CgMultiPlan *out, char *err, size_t errlen);
void cg_multi_free(CgMultiPlan *p); /* takes NULL; leaves *p empty */

#endif
