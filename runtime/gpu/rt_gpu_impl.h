/* rt_gpu_impl.h - what a GPU executor holds, shared by the files that make
 * and run it (rt_gpu.c) and that time it launch by launch
 * (rt_gpu_profile.c).  Internal to netrt_gpuexec; users see only rt_gpu.h. */
#ifndef NETC_RT_GPU_IMPL_H
#define NETC_RT_GPU_IMPL_H

#include "rt_cudnn.h"
#include "rt_gpu.h"
#include "rt_gpu_branch.h"
#include "rt_gpu_bucket.h"
#include "rt_gpu_optim.h"
#include "rt_gpu_prog.h"

typedef struct GpuLaunch {
  CUfunction fn;
  const CgKLaunch *l;
  CUdeviceptr arg[CG_K_MAX_ARGS];
  void *argp[CG_K_MAX_ARGS]; /* argp[i] = &arg[i]: cuLaunchKernel's parameter block */
} GpuLaunch;

typedef struct GpuConv {
  RtConvPlan *plan;
  int fused;      /* the plan writes the statistics (CgConvDesc.genstats) into io.stats */
  int pro_fused;  /* the plan applies the node's prologue (CgConvDesc.prologue) itself */
  int epi_fused;  /* the plan applies the node's epilogue (CgConvDesc.epilogue) itself */
  int qout_fused; /* the plan writes the node's requantized i8 result itself (else f16, rounded by a launch) */
  int res_fused;  /* the plan adds the node's i8 residual itself (else an f16 copy a launch made) */
  int pre;        /* launches of the node that run before the convolution (its PROLOGUE) */
  RtConvIo io;    /* workspace: the executor's */
  size_t ws;      /* the plan's workspace bytes */
  int side;       /* the node runs on the side stream (rt_gpu_branch.h), with the side scratch */
} GpuConv;

struct RtGpu {
  const IrGraph *g;
  int64_t batch;
  RtCudaCtx *ctx;
  const RtCudaApi *api;
  CUstream stream;
  RtCudnn *dnn;
  CgProg prog;
  NetcOpts opts;                  /* RtGpuOpts.opts, else the environment's, read when made */
  char cache_dir[4096];           /* the kernel cache (cg_cache_dir of RtGpuOpts.cache_dir); "" for none */
  RtCudaModule *mod[CG_MAX_PART]; /* prog's parts, loaded */
  CUdeviceptr arena, persist, scratch, workspace;
  size_t arena_bytes, persist_bytes, scratch_bytes;
  size_t memory_limit, held; /* RtGpuOpts.memory_limit (0: none); bytes dev_alloc handed out */
  CUdeviceptr *addr;         /* per value: its device address, 0 when it has none */
  int64_t *numel;
  GpuConv *conv;     /* per node (plan NULL when none) */
  GpuLaunch *launch; /* every launch of every node, in step order */
  int *first;        /* per node: index of its first launch; first[nnode] = total */
  CUgraphExec exec;
  void *stage; /* host staging buffer for conversions */
  size_t stage_bytes;
  RtGpuOptim *optim; /* multi-tensor runs (rt_gpu_optim.h), or NULL */
  int folded;        /* nodes that launch nothing because their run's head does their work */
  /* nodes marked `once` (pass_hoist: casts of weights) run outside the step,
   * before the next one after a parameter or state was written */
  char *once; /* per node */
  /* launches marked `once` (CgKLaunch.once: an inference batch norm's
   * folding) of the other nodes: kept out of launch[] and run with the once
   * nodes; they write their node's kept memory, kept + kept_at[node] */
  GpuLaunch *olaunch;
  int nolaunch;
  CUdeviceptr kept;
  size_t kept_bytes, *kept_at;
  int nonce, stale;
  /* the weight gradients' branch (NETC_BRANCHES): side nodes (GpuConv.side)
   * run on side_stream with their own scratch and workspace; per side node
   * a fork event (recorded on the stream, waited for by side_stream) and a
   * done event (the reverse, before branch.wait_at's node) */
  CUstream side_stream;
  CUdeviceptr side_scratch, side_workspace;
  CUevent *fork_ev, *done_ev;
  RtBranchPlan branch;
  /* the step clock (rt_gpu_step_time): events around the last CLOCK runs,
   * each pair read when its place comes round again */
  CUevent clock_ev[2][4];
  int64_t clock_runs, clock_steps;
  double clock_ms;
  /* the data-parallel all-reduce (rt_gpu_allreduce.c), off while nccl is
   * NULL: the gradients in buckets, each bucket's all-reduce queued on
   * comm_stream once the node that completes it is queued (after the
   * stream's bucket_ev and, when one of its producers runs on the side
   * stream, the latest such producer's done event), joined back by
   * comm_ev right before the optimizer section */
  RtNccl *nccl; /* the caller's */
  /* synchronized batch norm (rt_gpu_sync_bn_set): after each launch with
   * CgKLaunch.sum_f64, its sums added over the ranks on comm_stream (the
   * one order of NCCL calls every rank shares), between sync_ev[0] (the
   * launch's stream to comm_stream) and sync_ev[1] (back) */
  int sync_bn;
  CUevent sync_ev[2];
  RtGpuBucketPlan buckets;
  int *bucket_side;     /* per bucket: its latest side-stream producer, or -1 */
  CUevent *bucket_ev;   /* per bucket */
  CUstream comm_stream; /* made by the first rt_gpu_allreduce_set, kept */
  CUevent comm_ev;
  /* the all-reduce's clock (rt_gpu_comm_time), one row of events per
   * place of the step clock: COMM_START on comm_stream before the first
   * bucket, COMM_END after the last, COMM_READY on the stream where it
   * starts to wait for them.  The capture records row 0 as event record
   * nodes (comm_node; graph is exec's, kept for them) and every replay
   * points them at its place's row; a row is read when its place comes
   * round again, as the step clock's are (comm_timed: 1 when a launched
   * replay recorded it, 2 while its replay is being launched) */
  CUevent comm_clock[4][3];
  CUgraphNode comm_node[3];
  CUgraph graph;
  int capturing;
  unsigned char comm_timed[4];
  int64_t comm_steps;
  double comm_ms, comm_exposed_ms;
  int recapture;           /* rt_gpu_allreduce_set dropped the step graph: rt_gpu_run captures again */
  unsigned allreduce_gen;  /* rt_gpu_allreduce_set calls so far: an accumulator captured before recaptures */
  CUgraphExec *accum_last; /* the last micro-step graph of the latest accumulator made, or NULL */
};

/* The whole step's all-reduce while launch_all queues it: the next bucket,
 * and whether comm_stream waits for the stream since its last join. */
typedef struct GpuReduceCursor {
  int next, open;
} GpuReduceCursor;

/* With synchronized batch norm on, launch j (just queued on st) has sums
 * (CgKLaunch.sum_f64): queues their sum over the ranks, st waiting for it;
 * else nothing. */
RtCudaStatus rt_gpu_sync_sums(RtGpu *x, int j, CUstream st, char *err, size_t errlen);
/* Queues the all-reduce of every bucket that node completes (the node is
 * queued), on comm_stream. */
RtCudaStatus rt_gpu_allreduce_after(RtGpu *x, int node, GpuReduceCursor *c, char *err, size_t errlen);
/* The stream waits for everything queued on comm_stream (nothing when
 * comm_stream does not wait for it since the last join). */
RtCudaStatus rt_gpu_allreduce_join(RtGpu *x, GpuReduceCursor *c, char *err, size_t errlen);
/* Every bucket's all-reduce on the stream itself, in order (gradient
 * accumulation's last micro-step); nothing when the all-reduce is off. */
RtCudaStatus rt_gpu_allreduce_all(RtGpu *x, char *err, size_t errlen);
/* Frees the buckets, their events and the comm stream (teardown; the
 * executor's context is current). */
void rt_gpu_allreduce_free(RtGpu *x);
/* The all-reduce's clock (x->comm_clock): the places of comm_clock's row
 * 0 found among the event record nodes of graph, the step graph just
 * captured (not found: the clock stays off, never an error); before
 * replay k, place k's row read into the sums (when it was recorded and its
 * replay is done) and the nodes pointed at it. */
RtCudaStatus rt_gpu_allreduce_clock_find(RtGpu *x, CUgraph graph, char *err, size_t errlen);
void rt_gpu_allreduce_clock_place(RtGpu *x, int k);
/* Replay k's launch went (ok) or failed: its row counts, or not. */
void rt_gpu_allreduce_clock_launched(RtGpu *x, int k, int ok);
/* Drops the step graph (exec and the graph it came from). */
void rt_gpu_drop_exec(RtGpu *x);

/* The usable multi-tensor run whose head is node (launched there), else NULL. */
const CgMultiRun *rt_gpu_run_at(const RtGpu *x, int node);
/* NVTX ranges named after node i's layer (else its op), for Nsight Systems;
 * inert unless a tool injects itself (the profiler pushes them). */
/* Queues node i on stream st: its prologue launches, its convolution, its
 * other launches -- the one order a node's work runs in.  A side node's
 * convolution uses the side workspace on either stream (the profiler runs
 * side nodes on the main stream).  With ev (the profiler), events ev[2k]
 * and ev[2k+1] on st around each of them, k counting on from *k. */
RtCudaStatus rt_gpu_launch_node(RtGpu *x, int i, CUstream st, CUevent *ev, int *k, char *err, size_t errlen);
/* Value v's numel elements between the host's form (float, or int64 for
 * integer dtypes) and its dtype's bytes: the conversions of rt_gpu_write
 * and rt_gpu_read, for the pipelines that copy without the staging buffer. */
RtCudaStatus rt_gpu_pack(const RtGpu *x, int v, const void *host, void *dst, char *err, size_t errlen);
RtCudaStatus rt_gpu_unpack(const RtGpu *x, int v, const void *src, void *host, char *err, size_t errlen);
void rt_gpu_nvtx_push(const IrGraph *g, int node);
void rt_gpu_nvtx_pop(void);

/* Value v was written from the host: a parameter or state makes the once
 * nodes' results stale (rt_gpu_write, rt_gpu_mail_post). */
void rt_gpu_written(RtGpu *x, int v);
/* The once nodes, launched on the stream outside any capture when their
 * results are stale (rt_gpu_run, rt_gpu_profile). */
RtCudaStatus rt_gpu_prepare(RtGpu *x, char *err, size_t errlen);

#endif
