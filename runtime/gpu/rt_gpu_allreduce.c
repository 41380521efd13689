/* rt_gpu_allreduce.c - data-parallel training on the GPU executor: every
 * step's gradients averaged over the ranks with NCCL, inside the step
 * (rt_gpu.h gives the contract; docs/runtime_gpu.md).
 *
 * The gradients the optimizer section reads are planned into buckets in
 * the order the backward pass writes them (rt_gpu_bucket.h).  While the
 * whole step is queued (launch_all in rt_gpu.c, captured or not), right
 * after the node that completes a bucket the stream records the bucket's
 * event, and comm_stream waits for it -- and for the done event of the
 * bucket's latest producer on the side stream, when one of its producers
 * runs there (the side stream is in order, so that covers the earlier
 * ones) -- then queues one NCCL group of in-place ncclAvg all-reduces, one
 * per gradient in its own dtype.  The main stream goes on with the
 * backward pass meanwhile; right before the optimizer section's first node
 * (or at the end of the step when the section is empty) it waits for
 * comm_ev, recorded on comm_stream after the last bucket, so a captured
 * step joins every stream and the optimizer reads averaged gradients.
 *
 * The memory plan keeps a gradient's bytes from its producer to the
 * optimizer node that reads it, and the planner refuses a gradient read in
 * between, so nothing the main or side stream does meanwhile touches a
 * bucket in flight.  Gradient accumulation (rt_gpu_accum.c) all-reduces
 * the finished means of its last micro-step with rt_gpu_allreduce_all, on
 * the main stream, bucket by bucket; rt_gpu_launch_nodes never
 * all-reduces, so its micro-steps do not either. */
#include <stdlib.h>
#include <string.h>

#include "rt_gpu_impl.h"

/* the all-reduce clock's events in a row of x->comm_clock */
enum { COMM_START, COMM_END, COMM_READY };

/* The driver has what the clock needs (else the clock is off). */
static int clock_api(const RtCudaApi *a) {
  return a->EventRecordWithFlags && a->GraphGetNodes && a->GraphNodeGetType && a->GraphEventRecordNodeGetEvent &&
         a->GraphExecEventRecordNodeSetEvent;
}

/* Event i of the clock's row 0 on st, as an event record node of the
 * step graph; nothing outside a capture (the clock runs with the graph). */
static RtCudaStatus clock_mark(RtGpu *x, int i, CUstream st, char *err, size_t errlen) {
  if (!x->capturing || !x->comm_clock[0][i]) return RT_CUDA_OK;
  return RT_CU(x->api, EventRecordWithFlags, (x->comm_clock[0][i], st, CU_EVENT_RECORD_EXTERNAL),
               "the all-reduce's clock", err, errlen);
}

/* The all-reduce of bucket b's gradients as one NCCL group on stream st. */
static RtCudaStatus reduce_bucket(RtGpu *x, int b, CUstream st, char *err, size_t errlen) {
  const RtGpuBucket *k = &x->buckets.bucket[b];
  if (rt_nccl_group_begin(err, errlen)) return RT_CUDA_ECALL;
  int bad = 0;
  for (int j = k->first; !bad && j < k->first + k->n; j++) {
    int v = x->buckets.grad[j];
    if (x->numel[v] > 0)
      bad = rt_nccl_allreduce(x->nccl, x->addr[v], x->addr[v], (size_t)x->numel[v], x->g->val[v].type.dtype, 1, st, err,
                              errlen) != 0;
  }
  /* a group that began must end, even after a failed all-reduce */
  int end = rt_nccl_group_end(bad ? NULL : err, bad ? 0 : errlen);
  return bad || end ? RT_CUDA_ECALL : RT_CUDA_OK;
}

RtCudaStatus rt_gpu_allreduce_after(RtGpu *x, int node, GpuReduceCursor *c, char *err, size_t errlen) {
  const char *what = "forking a gradient bucket's all-reduce";
  RtCudaStatus s = RT_CUDA_OK;
  for (; !s && x->nccl && c->next < x->buckets.nbucket && x->buckets.bucket[c->next].done <= node; c->next++) {
    int b = c->next, side = x->bucket_side[b];
    s = RT_CU(x->api, EventRecord, (x->bucket_ev[b], x->stream), what, err, errlen);
    if (!s) s = RT_CU(x->api, StreamWaitEvent, (x->comm_stream, x->bucket_ev[b], 0), what, err, errlen);
    if (s) break;
    c->open = 1; /* comm_stream depends on the stream: it must be joined back, even after a failure */
    if (side >= 0) s = RT_CU(x->api, StreamWaitEvent, (x->comm_stream, x->done_ev[side], 0), what, err, errlen);
    if (!s && b == 0) s = clock_mark(x, COMM_START, x->comm_stream, err, errlen);
    if (!s) s = reduce_bucket(x, b, x->comm_stream, err, errlen);
  }
  return s;
}

RtCudaStatus rt_gpu_allreduce_join(RtGpu *x, GpuReduceCursor *c, char *err, size_t errlen) {
  if (!c->open) return RT_CUDA_OK;
  const char *what = "joining the gradients' all-reduce";
  RtCudaStatus s = clock_mark(x, COMM_END, x->comm_stream, err, errlen);
  if (!s) s = RT_CU(x->api, EventRecord, (x->comm_ev, x->comm_stream), what, err, errlen);
  if (!s) s = clock_mark(x, COMM_READY, x->stream, err, errlen);
  if (!s) s = RT_CU(x->api, StreamWaitEvent, (x->stream, x->comm_ev, 0), what, err, errlen);
  if (!s) c->open = 0;
  return s;
}

RtCudaStatus rt_gpu_allreduce_all(RtGpu *x, char *err, size_t errlen) {
  RtCudaStatus s = RT_CUDA_OK;
  for (int b = 0; !s && x->nccl && b < x->buckets.nbucket; b++) s = reduce_bucket(x, b, x->stream, err, errlen);
  return s;
}

int rt_gpu_allreduce_buckets(const RtGpu *x) { return x && x->nccl ? x->buckets.nbucket : 0; }

RtCudaStatus rt_gpu_sync_sums(RtGpu *x, int j, CUstream st, char *err, size_t errlen) {
  const GpuLaunch *L = &x->launch[j];
  int n = L->l->sum_f64;
  if (!x->sync_bn || !x->nccl || n <= 0) return RT_CUDA_OK;
  const char *what = "synchronized batch norm's sums";
  RtCudaStatus s = RT_CU(x->api, EventRecord, (x->sync_ev[0], st), what, err, errlen);
  if (!s) s = RT_CU(x->api, StreamWaitEvent, (x->comm_stream, x->sync_ev[0], 0), what, err, errlen);
  if (s) return s;
  /* comm_stream now depends on st: st waits for it below even after a failed call (a capture must join) */
  int bad = rt_nccl_sum_f64(x->nccl, L->arg[L->l->nargs - 1], (size_t)n, x->comm_stream, err, errlen) != 0;
  s = RT_CU(x->api, EventRecord, (x->sync_ev[1], x->comm_stream), what, bad ? NULL : err, bad ? 0 : errlen);
  if (!s) s = RT_CU(x->api, StreamWaitEvent, (st, x->sync_ev[1], 0), what, bad ? NULL : err, bad ? 0 : errlen);
  return bad ? RT_CUDA_ECALL : s;
}

/* What was captured holds the old all-reduce or statistics: the step graph is
 * dropped (rt_gpu_run captures again), the accumulator's last micro-step too,
 * and allreduce_gen moves on (an accumulator captures each graph again). */
static void stale_graphs(RtGpu *x) {
  if (x->exec) {
    rt_gpu_drop_exec(x);
    x->recapture = 1;
  }
  if (x->accum_last && *x->accum_last) {
    x->api->GraphExecDestroy(*x->accum_last);
    *x->accum_last = NULL;
  }
  x->allreduce_gen++;
}

RtCudaStatus rt_gpu_sync_bn_set(RtGpu *x, int on, char *err, size_t errlen) {
  if (!x) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_sync_bn_set: no executor");
  if (on && !x->nccl)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "synchronized batch norm: the all-reduce is not set (no ranks)");
  if (on && !x->opts.sync_bn)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen,
                        "synchronized batch norm: the step's kernels were generated without the sync_bn switch "
                        "(load the model with the option sync_bn=1, as netrun --sync-bn does)");
  if (!!on == x->sync_bn) return RT_CUDA_OK;
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  if (!s) s = RT_CU(x->api, StreamSynchronize, (x->stream), "before setting synchronized batch norm", err, errlen);
  for (int i = 0; !s && on && i < 2; i++)
    if (!x->sync_ev[i])
      s = RT_CU(x->api, EventCreate, (&x->sync_ev[i], CU_EVENT_DISABLE_TIMING), "synchronized batch norm", err, errlen);
  if (s) return s;
  stale_graphs(x);
  x->sync_bn = !!on;
  return RT_CUDA_OK;
}

/* The buckets and their events, not the comm stream. */
static void drop_buckets(RtGpu *x) {
  for (int b = 0; x->bucket_ev && b < x->buckets.nbucket; b++)
    if (x->bucket_ev[b]) x->api->EventDestroy(x->bucket_ev[b]);
  free(x->bucket_ev);
  free(x->bucket_side);
  x->bucket_ev = NULL, x->bucket_side = NULL;
  rt_gpu_bucket_plan_free(&x->buckets);
  x->nccl = NULL, x->sync_bn = 0;
}

void rt_gpu_allreduce_free(RtGpu *x) {
  if (x->comm_stream) x->api->StreamSynchronize(x->comm_stream);
  drop_buckets(x);
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 3; i++)
      if (x->comm_clock[k][i]) x->api->EventDestroy(x->comm_clock[k][i]);
  memset(x->comm_clock, 0, sizeof x->comm_clock);
  if (x->comm_ev) x->api->EventDestroy(x->comm_ev);
  for (int i = 0; i < 2; i++)
    if (x->sync_ev[i]) x->api->EventDestroy(x->sync_ev[i]);
  x->sync_ev[0] = x->sync_ev[1] = NULL;
  if (x->comm_stream) x->api->StreamDestroy(x->comm_stream);
  x->comm_ev = NULL, x->comm_stream = NULL;
}

RtCudaStatus rt_gpu_nccl_join(RtGpu *x, const void *id, int world, int rank, RtNccl **out, char *err, size_t errlen) {
  if (!out) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_nccl_join: out is NULL");
  *out = NULL;
  if (!x || !id || world < 1 || rank < 0 || rank >= world)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_nccl_join: bad arguments (rank %d of %d%s%s)", rank, world,
                        id ? "" : ", no id", x ? "" : ", no executor");
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  if (s) return s;
  if (rt_nccl_load(NULL, err, errlen)) return RT_CUDA_ENOLIB;
  return rt_nccl_join(id, world, rank, out, err, errlen) ? RT_CUDA_ECALL : RT_CUDA_OK;
}

/* The buckets of grad for x, each gradient checked (a float dtype NCCL
 * sums, device memory), each bucket's latest side-stream producer, and
 * the events; the comm stream made once. */
static RtCudaStatus plan(RtGpu *x, const int *grad, int ngrad, size_t bucket_bytes, char *err, size_t errlen) {
  const IrGraph *g = x->g;
  uint64_t *bytes = calloc((size_t)g->nval + 1, sizeof *bytes);
  if (!bytes) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu_allreduce_set: out of host memory");
  for (int k = 0; k < ngrad; k++)
    if (grad[k] >= 0 && grad[k] < g->nval) bytes[grad[k]] = (uint64_t)ir_value_bytes(g, grad[k], x->batch);
  int bad = rt_gpu_bucket_plan(g, grad, ngrad, bytes, bucket_bytes, &x->buckets, err, errlen);
  free(bytes);
  if (bad) return RT_CUDA_EARG;
  for (int j = 0; j < x->buckets.ngrad; j++) {
    int v = x->buckets.grad[j];
    IrDtype dt = g->val[v].type.dtype;
    if ((dt != IR_DT_F32 && dt != IR_DT_F16 && dt != IR_DT_BF16) || !x->addr[v])
      return rt_cuda_fail(RT_CUDA_EARG, err, errlen,
                          "rt_gpu_allreduce_set: gradient %%%d (%s, from node %d) is not an f32/f16/bf16 value in "
                          "device memory",
                          v, ir_dtype_name(dt), x->buckets.producer[j]);
  }
  int n = x->buckets.nbucket;
  x->bucket_side = malloc(sizeof(int) * ((size_t)n + 1));
  x->bucket_ev = calloc((size_t)n + 1, sizeof *x->bucket_ev);
  if (!x->bucket_side || !x->bucket_ev)
    return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu_allreduce_set: out of host memory");
  for (int b = 0; b < n; b++) {
    const RtGpuBucket *k = &x->buckets.bucket[b];
    x->bucket_side[b] = -1;
    for (int j = k->first; j < k->first + k->n; j++) {
      int p = x->buckets.producer[j];
      if (x->conv[p].side && p > x->bucket_side[b]) x->bucket_side[b] = p;
    }
  }
  const char *what = "the gradients' all-reduce";
  RtCudaStatus s = RT_CUDA_OK;
  if (!x->comm_stream)
    s = RT_CU(x->api, StreamCreate, (&x->comm_stream, CU_STREAM_NON_BLOCKING), "the all-reduce stream", err, errlen);
  if (!s && !x->comm_ev) s = RT_CU(x->api, EventCreate, (&x->comm_ev, CU_EVENT_DISABLE_TIMING), what, err, errlen);
  for (int b = 0; !s && b < n; b++)
    s = RT_CU(x->api, EventCreate, (&x->bucket_ev[b], CU_EVENT_DISABLE_TIMING), what, err, errlen);
  for (int k = 0; !s && clock_api(x->api) && k < 4; k++)
    for (int i = 0; !s && i < 3; i++)
      if (!x->comm_clock[k][i])
        s = RT_CU(x->api, EventCreate, (&x->comm_clock[k][i], CU_EVENT_DEFAULT), what, err, errlen);
  return s;
}

RtCudaStatus rt_gpu_allreduce_set(RtGpu *x, RtNccl *c, const int *grad, int ngrad, size_t bucket_bytes, char *err,
                                  size_t errlen) {
  if (!x) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_allreduce_set: no executor");
  if (c && (ngrad < 0 || (ngrad && !grad)))
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_allreduce_set: bad arguments (%d gradients)", ngrad);
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  if (!s) s = RT_CU(x->api, StreamSynchronize, (x->stream), "before setting the all-reduce", err, errlen);
  if (!s && x->comm_stream)
    s = RT_CU(x->api, StreamSynchronize, (x->comm_stream), "before setting the all-reduce", err, errlen);
  if (s) return s;
  stale_graphs(x);
  drop_buckets(x);
  if (!c) return RT_CUDA_OK;
  if ((s = plan(x, grad, ngrad, bucket_bytes, err, errlen))) {
    drop_buckets(x);
    return s;
  }
  x->nccl = c;
  return RT_CUDA_OK;
}

RtCudaStatus rt_gpu_allreduce_clock_find(RtGpu *x, CUgraph graph, char *err, size_t errlen) {
  memset(x->comm_node, 0, sizeof x->comm_node);
  if (!x->nccl || !x->comm_clock[0][0] || !x->buckets.nbucket) return RT_CUDA_OK;
  const char *what = "finding the all-reduce's clock in the step graph";
  size_t n = 0;
  RtCudaStatus s = RT_CU(x->api, GraphGetNodes, (graph, NULL, &n), what, err, errlen);
  CUgraphNode *node = s ? NULL : malloc(sizeof *node * (n + 1));
  if (!node) return RT_CUDA_OK; /* no clock, as below */
  s = RT_CU(x->api, GraphGetNodes, (graph, node, &n), what, err, errlen);
  for (size_t j = 0; !s && j < n; j++) {
    CUgraphNodeType type;
    CUevent ev = NULL;
    s = RT_CU(x->api, GraphNodeGetType, (node[j], &type), what, err, errlen);
    if (s || type != CU_GRAPH_NODE_TYPE_EVENT_RECORD) continue;
    s = RT_CU(x->api, GraphEventRecordNodeGetEvent, (node[j], &ev), what, err, errlen);
    for (int i = 0; !s && i < 3; i++)
      if (ev == x->comm_clock[0][i]) x->comm_node[i] = node[j];
  }
  free(node);
  /* a clock whose nodes cannot be found is off (rt_gpu_comm_time counts no
   * replay), not a failed step: it only tells the time */
  if (s || !x->comm_node[COMM_START] || !x->comm_node[COMM_END] || !x->comm_node[COMM_READY])
    memset(x->comm_node, 0, sizeof x->comm_node);
  return RT_CUDA_OK;
}

void rt_gpu_allreduce_clock_place(RtGpu *x, int k) {
  if (!x->exec || !x->comm_node[COMM_START]) return;
  CUevent *row = x->comm_clock[k];
  float span = 0, exposed = 0;
  /* a replay not done yet (or a row never recorded) reads as not ready: not counted */
  if (x->comm_timed[k] == 1 && x->api->EventElapsedTime(&span, row[COMM_START], row[COMM_END]) == CUDA_SUCCESS &&
      x->api->EventElapsedTime(&exposed, row[COMM_READY], row[COMM_END]) == CUDA_SUCCESS) {
    x->comm_ms += span, x->comm_exposed_ms += exposed > 0 ? exposed : 0;
    x->comm_steps++;
  }
  x->comm_timed[k] = 0;
  for (int i = 0; i < 3; i++)
    if (x->api->GraphExecEventRecordNodeSetEvent(x->exec, x->comm_node[i], row[i]) != CUDA_SUCCESS) {
      memset(x->comm_node, 0, sizeof x->comm_node); /* the clock off, the step unharmed */
      return;
    }
  x->comm_timed[k] = 2; /* rt_gpu_allreduce_clock_launched makes it 1 */
}

void rt_gpu_allreduce_clock_launched(RtGpu *x, int k, int ok) {
  if (x->comm_timed[k] == 2) x->comm_timed[k] = ok ? 1 : 0;
}

void rt_gpu_comm_time(const RtGpu *x, double *ms, double *exposed_ms, int64_t *steps) {
  *ms = x ? x->comm_ms : 0, *exposed_ms = x ? x->comm_exposed_ms : 0, *steps = x ? x->comm_steps : 0;
}

/* here, beside the clock: the graph is kept for its nodes */
void rt_gpu_drop_exec(RtGpu *x) {
  if (x->exec) x->api->GraphExecDestroy(x->exec);
  if (x->graph) x->api->GraphDestroy(x->graph);
  x->exec = NULL, x->graph = NULL;
  memset(x->comm_node, 0, sizeof x->comm_node);
  memset(x->comm_timed, 0, sizeof x->comm_timed); /* rows a new graph has not recorded */
}
