/* rt_cpu.h - the CPU reference executor: runs any IR graph in plain C.
 *
 * It is the oracle for pass tests (a graph before and after a pass computes
 * the same), for gradient checks, and the runtime's fallback without a GPU.
 * Every value gets its own buffer: float dtypes (f32, f16, bf16, i8) are
 * stored as float, with results rounded to the value's dtype after each op
 * (f16/bf16 round to nearest even; i8 is simulated by the precision pass's
 * scales), integer dtypes (i32, i64, u8) as int64.  The batch size N is fixed
 * when the executor is made.  In-place ops (batchnorm_train's running
 * statistics, sgd_update's weight and momentum buffer) write their inputs. */
#ifndef NETC_RT_CPU_H
#define NETC_RT_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

typedef struct RtCpu RtCpu;

/* Prepares g (which must outlive the executor) for batch size `batch`;
 * parameters and state start at zero.  Returns 0, or -1 with a message. */
int rt_cpu_new(const IrGraph *g, int64_t batch, RtCpu **out, char *err, size_t errlen);
/* Bytes rt_cpu_new would allocate for g at batch (every value has its own
 * buffer), or -1 when a value's size cannot be counted; the machine's
 * physical memory in bytes (0: unknown). */
double rt_cpu_plan_bytes(const IrGraph *g, int64_t batch);
double rt_cpu_host_memory(void);
void rt_cpu_free(RtCpu *x); /* takes NULL */
struct RtRefSync;
/* Synchronized batch norm: from now on the batch statistics of x's
 * training batch norms (and their backward's data-gradient terms) are
 * summed over sync's processes (rt_ref.h, RtRefSync; it must outlive x's
 * runs); NULL: x's own batch only, as made. */
void rt_cpu_set_sync(RtCpu *x, const struct RtRefSync *sync);
/* Value id of the input, parameter or state called name, or -1. */
int rt_cpu_find(const RtCpu *x, const char *name);
/* Storage of value v: float* for float dtypes, int64_t* for integer dtypes;
 * rt_cpu_numel gives its element count at this batch size.  Handing out a
 * parameter's or state's storage counts as a write: the nodes marked
 * `once` (pass_hoist) run again before the next step. */
void *rt_cpu_data(RtCpu *x, int v);
int64_t rt_cpu_numel(const RtCpu *x, int v);
int rt_cpu_is_int(const RtCpu *x, int v);
/* Runs every node once, in order, but those marked `once` (pass_hoist:
 * casts of weights), which run first, and only when the weights may have
 * changed since they last ran.  Returns 0, or -1 with a message naming the
 * node (its printed name and op) that failed. */
int rt_cpu_run(RtCpu *x, char *err, size_t errlen);
/* Runs nodes lo..hi-1 of the graph, in order (rt_cpu_run: all of them),
 * the once nodes as rt_cpu_run does. */
int rt_cpu_run_nodes(RtCpu *x, int lo, int hi, char *err, size_t errlen);

/* --- gradient accumulation (rt_cpu_accum.c, docs/training.md) --- */

/* f32 sums of the gradients `grad` (ngrad value ids, each produced before
 * the optimizer section, which starts at x's graph's opt_first) over the
 * micro-steps of one update. */
typedef struct RtCpuAccum RtCpuAccum;

int rt_cpu_accum_new(RtCpu *x, const int *grad, int ngrad, RtCpuAccum **out, char *err, size_t errlen);
void rt_cpu_accum_free(RtCpuAccum *a); /* takes NULL */
/* Zeroes the sums (a new update starts). */
void rt_cpu_accum_reset(RtCpuAccum *a);
/* One micro-step of k: runs the nodes before the section and adds every
 * gradient into its sum; the last one instead writes (sum + gradient) / k
 * into the gradient (rounded to its dtype), zeroes the sums and runs the
 * optimizer section.  Returns 0, or -1 with a message. */
int rt_cpu_accum_run(RtCpuAccum *a, int k, int last, char *err, size_t errlen);
/* rt_cpu_accum_run without the last micro-step's optimizer section, which
 * the caller runs (rt_cpu_run_nodes from opt_first) after doing what comes
 * between: a data-parallel run's average over the ranks. */
int rt_cpu_accum_micro(RtCpuAccum *a, int k, int last, char *err, size_t errlen);

#endif
