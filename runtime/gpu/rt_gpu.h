/* rt_gpu.h - the GPU executor: runs a final IR graph on one NVIDIA GPU.
 *
 * rt_gpu_new() takes a graph that went through the whole pipeline (its
 * memory plan gives every activation an offset in one arena), allocates the
 * arena and the persistent parameter/state storage on the device, emits and
 * compiles every node's distinct kernels with NVRTC (cg_kernels.h, cg_prog.h),
 * and builds the cuDNN plans of its convolutions (rt_cudnn.h).  rt_gpu_run()
 * launches the whole step on the executor's stream with no host
 * synchronization inside; rt_gpu_capture() records that step once as a CUDA
 * graph, and rt_gpu_run() replays it from then on.
 *
 * Values are read and written by name or id from the host as float (or
 * int64 for integer values), in the IR's layout, with conversion to and
 * from the value's dtype (f16/bf16) done here.  Same error conventions as
 * rt_cuda.h; nothing prints or exits. */
#ifndef NETC_RT_GPU_H
#define NETC_RT_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "rt_cuda.h"
#include "rt_nccl.h"
#include "cg_kernels.h"
#include "cg_prog.h"
#include "opts.h"

typedef struct RtGpu RtGpu;

typedef struct RtGpuOpts {
  int device;            /* ordinal */
  int tune;              /* time cuDNN engine candidates once; winners kept in CACHE/cudnn-tune.txt */
  const char *cache_dir; /* NVRTC/cuDNN caches, or NULL */
  /* A program made ahead of time (a model.so's, rt_model.h), or NULL: its
   * cubin is loaded without compiling when its source is exactly the text
   * this executor emits and prebuilt_arch is the device's sm_XX; otherwise
   * the executor compiles as without it. */
  const CgProgram *prebuilt;
  const char *prebuilt_arch;
  /* Every switch (opts.h), or NULL: read from the environment when made. */
  const NetcOpts *opts;
  /* Bytes the executor may hold (0: no limit): its activation arena,
   * parameters and state, kernel scratch and cuDNN workspace.  The
   * workspace is capped to what is left after the rest; an allocation past
   * the limit fails with RT_CUDA_EDEVMEM.  The CUDA context's own memory
   * and cuDNN's timing buffers, freed before the first step, are outside. */
  size_t memory_limit;
} RtGpuOpts;

/* g must outlive the executor and be planned (g->plan_bytes > 0) for `batch`. */
RtCudaStatus rt_gpu_new(const IrGraph *g, int64_t batch, const RtGpuOpts *o, RtGpu **out, char *err, size_t errlen);
void rt_gpu_free(RtGpu *x);                        /* takes NULL */
int rt_gpu_find(const RtGpu *x, const char *name); /* value id of an input/param/state, or -1 */
int rt_gpu_fused_convs(const RtGpu *x);            /* convolutions that write their batch-norm statistics (GenStats,
                                         * or a data gradient's batch-norm backward weights) */
int rt_gpu_prologue_convs(const RtGpu *x); /* convolutions that apply the previous batch norm + relu themselves */
/* Nodes on the side stream (the weight gradients, unless NETC_BRANCHES=0),
 * and the mean number of main-stream nodes each may overlap. */
int rt_gpu_branch_nodes(const RtGpu *x);
double rt_gpu_branch_window(const RtGpu *x);
int64_t rt_gpu_numel(const RtGpu *x, int v);
/* Host <-> device copies of value v (float for float dtypes, int64 for integer ones). */
RtCudaStatus rt_gpu_write(RtGpu *x, int v, const void *host, char *err, size_t errlen);
RtCudaStatus rt_gpu_read(RtGpu *x, int v, void *host, char *err, size_t errlen);
/* A quantized value's device form (i8 or FP8 dtype dt, n elements, then
 * `scales` f32 scales at ir_scales_offset(n): ir_value_scales) from the
 * host's real values, each slice's scale its largest |value| over the
 * format's largest q; and back, q * scale.  What rt_gpu_write and
 * rt_gpu_read do for such a value. */
void rt_gpu_pack_scaled(IrDtype dt, int64_t n, int64_t scales, const float *f, void *dst);
void rt_gpu_unpack_scaled(IrDtype dt, int64_t n, int64_t scales, const void *src, float *f);
/* One training (or inference) step: launches every node, or replays the graph once captured. */
RtCudaStatus rt_gpu_run(RtGpu *x, char *err, size_t errlen);
/* The GPU's time in the captured step's replays so far (events around
 * each replay, read a few replays later), and how many are counted. */
void rt_gpu_step_time(const RtGpu *x, double *ms, int64_t *steps);
/* The gradients' all-reduce in those replays of the step graph (with
 * rt_gpu_allreduce_set): *ms the milliseconds from its first bucket's
 * start to its last bucket's end, *exposed_ms those the stream waited for
 * it after its own work (the all-reduce not hidden behind the backward
 * pass), summed over *steps replays; read as the step clock's are. */
void rt_gpu_comm_time(const RtGpu *x, double *ms, double *exposed_ms, int64_t *steps);
/* Records the step once as a CUDA graph that rt_gpu_run replays from then
 * on (unless the cuda_graph option is off).  The switches that change what
 * the executor does (CUDA graphs, cuDNN's fusions, the side stream, ...)
 * are RtGpuOpts.opts: compiler/opts.h and docs/runtime_gpu.md list them. */
RtCudaStatus rt_gpu_capture(RtGpu *x, char *err, size_t errlen);
RtCudaStatus rt_gpu_sync(RtGpu *x, char *err, size_t errlen);
/* Milliseconds of `steps` runs back to back, timed with events (after one warm-up run). */
RtCudaStatus rt_gpu_time(RtGpu *x, int steps, double *ms, char *err, size_t errlen);

/* --- the program without a GPU, and what an executor holds --- */

/* What rt_gpu_new compiles, done without a GPU: every node's kernels emitted
 * for dev, its NVRTC programs for sm_<cc_major><cc_minor>, their cubins stored
 * in the cache (cache_dir, or the default below).  A later rt_gpu_new on a
 * device with the same attributes then loads the cubin without compiling.
 * The default cache is $XDG_CACHE_HOME/netc, else ~/.cache/netc. */
RtCudaStatus rt_gpu_precompile(const IrGraph *g, int64_t batch, const CgDevice *dev, const char *cache_dir, char *err,
                               size_t errlen);
/* The device's PCI bus id ("0000:17:00.0"): 0, or -1. */
int rt_gpu_pci_bus_id(const RtGpu *x, char *id, size_t len);
/* Bytes of device memory the executor holds (arena, parameters, scratch). */
size_t rt_gpu_device_bytes(const RtGpu *x);
/* The same in parts: the activation arena, the parameters and state, and
 * the kernel scratch with the cuDNN workspace (any may be NULL). */
void rt_gpu_memory(const RtGpu *x, size_t *arena, size_t *persist, size_t *scratch);
/* 1 when the last rt_gpu_new found its cubin in the cache. */
int rt_gpu_cache_hit(const RtGpu *x);
/* Nodes that launch nothing because a multi-tensor run's head does their
 * work (compiler/codegen/cg_multi.h; 0 with the multi_tensor option off). */
int rt_gpu_multi_folded(const RtGpu *x);
/* 1 when the last rt_gpu_new took RtGpuOpts.prebuilt's cubin (no NVRTC call). */
int rt_gpu_prebuilt_hit(const RtGpu *x);

/* --- gradient accumulation (rt_gpu_accum.c, docs/training.md) --- */

/* Queues nodes lo..hi-1 of the step on the stream, uncaptured (0..nnode is
 * the whole step, but without the all-reduce of rt_gpu_allreduce_set:
 * only rt_gpu_run and rt_gpu_capture queue it). */
RtCudaStatus rt_gpu_launch_nodes(RtGpu *x, int lo, int hi, char *err, size_t errlen);

/* f32 sums on the device of the gradients `grad` (ngrad value ids, each
 * produced before the optimizer section, which starts at x's graph's
 * opt_first) over the k micro-steps of one update, as rt_cpu_accum
 * (rt_cpu.h): two CUDA graphs, captured when made -- a micro-step (the
 * nodes before the section, then sum += gradient) and the last one (the
 * nodes before the section, then
 * gradient = (sum + gradient) / k in its dtype and sum = 0, then the
 * optimizer section).  The executor's whole-step graph is left alone. */
typedef struct RtGpuAccum RtGpuAccum;

RtCudaStatus rt_gpu_accum_new(RtGpu *x, const int *grad, int ngrad, int k, RtGpuAccum **out, char *err, size_t errlen);
void rt_gpu_accum_free(RtGpuAccum *a); /* takes NULL */
int rt_gpu_accum_k(const RtGpuAccum *a);
/* Zeroes the sums (a new update starts). */
RtCudaStatus rt_gpu_accum_reset(RtGpuAccum *a, char *err, size_t errlen);
/* Replays one micro-step (last != 0: the one that updates).  With an
 * all-reduce set (below), the last one all-reduces the finished means,
 * after the sums and before the optimizer section, on the stream itself;
 * the micro-steps all-reduce nothing.  An accumulator made before
 * rt_gpu_allreduce_set captures its last micro-step again on its next run. */
RtCudaStatus rt_gpu_accum_run(RtGpuAccum *a, int last, char *err, size_t errlen);

/* --- data-parallel training (rt_gpu_allreduce.c, rt_gpu_bucket.h) --- */

/* Joins NCCL's communicator of id as rank of world (rt_nccl_join) with the
 * executor's context current, so the communicator is on its device.  Every
 * rank must call it (it waits for all).  *out is the caller's, freed with
 * rt_nccl_free after the executors that use it.  RT_CUDA_ENOLIB when NCCL
 * cannot be loaded (the message says why), RT_CUDA_ECALL when the join
 * fails. */
RtCudaStatus rt_gpu_nccl_join(RtGpu *x, const void *id, int world, int rank, RtNccl **out, char *err, size_t errlen);
/* Averages the gradients grad[0..ngrad) (the values the optimizer section
 * reads, each written by one node before it) over c's ranks in every
 * step, in place, overlapped with the backward pass: the gradients are
 * grouped into buckets of bucket_bytes (0: 25 MiB) in the order the
 * backward pass makes them (rt_gpu_bucket.h); each bucket's all-reduce
 * (one NCCL group, ncclAvg in the gradient's dtype) is queued on a stream
 * of its own as soon as its last gradient is queued, and the optimizer
 * section waits for all of them.  c NULL turns it off.  A captured step
 * graph is dropped and rt_gpu_run captures the step again; an accumulator
 * made before captures its last micro-step again.  c must outlive its use
 * by x.  On failure the all-reduce is off. */
RtCudaStatus rt_gpu_allreduce_set(RtGpu *x, RtNccl *c, const int *grad, int ngrad, size_t bucket_bytes, char *err,
                                  size_t errlen);
/* The buckets of the all-reduce set (0 when off). */
int rt_gpu_allreduce_buckets(const RtGpu *x);
/* Synchronized batch norm over the ranks of the all-reduce set (on; it
 * must be set, and x's kernels generated with the sync_bn switch, which
 * packs every training batch norm's sums into f64 before its finalize:
 * chan_finalize.cu): each such launch's sums are added over the ranks in
 * the step, on the all-reduce's stream, the step waiting for them, so
 * every rank normalizes by the statistics of every rank's batch and its
 * backward's data gradient by their summed terms (dgamma and dbeta stay
 * the rank's own, averaged with the other gradients).  Off (the default,
 * and after rt_gpu_allreduce_set): the same kernels, each rank's own
 * statistics.  The step graph is captured again. */
RtCudaStatus rt_gpu_sync_bn_set(RtGpu *x, int on, char *err, size_t errlen);

/* --- profiling (rt_gpu_profile.c) --- */

/* One timed piece of a step: a node's cuDNN convolution or one of its launches. */
typedef struct RtGpuProfRec {
  int node;                    /* IR node index (its name, op and SrcLoc are in the graph) */
  int launch;                  /* index among the node's launches; -1 for its convolution */
  char kernel[CG_K_NAME + 64]; /* generated kernel name, or "cudnn_conv_fwd f16 [N,H,W,C]x[K,R,S]" */
  double ms;                   /* median over the profiled steps */
  double start_ms;             /* start in the last profiled step, from that step's first event */
  double flops;                /* convolutions and linear layers; 0 for the rest */
  double bytes;                /* estimate: sizes of the distinct tensors its arguments name (scratch not counted) */
} RtGpuProfRec;

typedef struct RtGpuProfile {
  RtGpuProfRec *rec; /* in step order */
  int nrec, reps;
  double step_ms;     /* one replay of the captured step graph (mean of 10) */
  double peak_gbs;    /* 2 * memory clock * bus width / 8 */
  double peak_tflops; /* dense f16 tensor rate: SMs * clock * rt_gpu_tensor_flops_per_clock */
  char device[256];
  int cc_major, cc_minor, sm_count, clock_khz, mem_clock_khz, mem_bus_bits;
} RtGpuProfile;

/* Runs the step uncaptured reps times (after one untimed run) with a CUDA
 * event before and after every convolution and launch, and an NVTX range per
 * node (its layer name) around them; then times the captured graph (captured
 * here when it was not yet).  The step's work is queued while the stream is
 * held, so the timings are the GPU's, not the host's launch rate.  Training
 * steps change the parameters.  The launch-by-launch steps leave out the
 * all-reduce of rt_gpu_allreduce_set (a rank's weights then part from the
 * others'), the timed replays hold it (every rank must profile together).
 * out is freed with rt_gpu_profile_free. */
RtCudaStatus rt_gpu_profile(RtGpu *x, int reps, RtGpuProfile *out, char *err, size_t errlen);
void rt_gpu_profile_free(RtGpuProfile *p); /* takes NULL; leaves *p empty */
/* Dense f16 tensor-core FLOPs per SM per clock for compute capability
 * major.minor (FP32 accumulation); 0 when unknown. */
int rt_gpu_tensor_flops_per_clock(int cc_major, int cc_minor);

#endif
