/* rt_gpu_optim.h - multi-tensor launches (internal to the GPU executor).
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
 *             the nodes before and after it separately).
 *
 * rt_gpu_optim_plan() finds the runs and writes their kernels without a
 * GPU (no addresses are needed: the tensors' pointers come from a device
 * table).  rt_gpu_optim_apply() compiles them (NVRTC, cubin cached beside
 * the step's), uploads the pointer tables and rewrites the executor's
 * launch list; with $NETC_MULTI_TENSOR = 0, or without NVRTC (a prebuilt
 * model.so on a machine without it), it leaves the per-node launches. */
#ifndef NETC_RT_GPU_OPTIM_H
#define NETC_RT_GPU_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "rt_cuda.h"
#include "rt_gpu.h"

typedef enum RtOptimKind { RT_OPTIM_SGD, RT_OPTIM_CAST } RtOptimKind;

typedef struct RtOptimRun {
  RtOptimKind kind;
  int n;          /* nodes in the run (2 or more) */
  int *node;      /* the nodes, node[0] the head; n of them, in step order */
  int64_t blocks; /* the launch's grid */
  CgKLaunch launch; /* name, grid, block; args: the head's scalars (lr, loss scale, skip), after the table */
  char *unit;     /* malloc'd: this run's kernel alone (common.cu + template), for nvcc */
} RtOptimRun;

typedef struct RtOptimPlan {
  int nrun;
  RtOptimRun *run;
  char *source;   /* malloc'd: every run's kernel, each in a namespace of its own; NULL when no run */
  size_t source_len;
} RtOptimPlan;

/* The runs of g at batch.  0, or -1 with a message (out of memory, a
 * template missing). */
int rt_gpu_optim_plan(const IrGraph *g, int64_t batch, RtOptimPlan *out, char *err, size_t errlen);
void rt_gpu_optim_plan_free(RtOptimPlan *p); /* takes NULL; leaves *p empty */

/* Applies the plan to executor x (after its launches are prepared);
 * cache_dir as RtGpuOpts.cache_dir. */
RtCudaStatus rt_gpu_optim_apply(RtGpu *x, const char *cache_dir, char *err, size_t errlen);
/* Releases what apply made (module, tables); needs x's context current. */
void rt_gpu_optim_free(RtGpu *x);
/* Nodes of x that launch nothing because a run's head does their work. */
int rt_gpu_optim_folded(const RtGpu *x);
/* The run whose head is node `node` when it was applied, else NULL. */
const RtOptimRun *rt_gpu_optim_run_at(const RtGpu *x, int node);

#endif
