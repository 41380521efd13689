/* rt_gpu_profile.c - the GPU executor's step timed piece by piece (rt_gpu.h).
 *
 * A profiled step is the executor's step run uncaptured, with a CUDA event
 * recorded on the stream before and after each node's cuDNN convolution and
 * each of its launches, and an NVTX range per node around them.  Events
 * time what the GPU did between them, but when the GPU outruns the host an
 * event before a kernel fires as soon as it is queued and the kernel only
 * when the host has launched it, so the gap would be the host's.  Each
 * profiled step is therefore queued behind a host function that holds the
 * stream until the host has queued the whole step (or a deadline passes, in
 * case the driver's queue fills up first): the GPU then runs it from a full
 * queue.  Every piece gets the median of its durations over the steps.
 * The profiled steps leave out the data-parallel all-reduce
 * (rt_gpu_allreduce.c): they run the nodes one by one on the main stream;
 * the step time that follows replays the captured step, which holds it.
 *
 * FLOPs are counted where the arithmetic is the point: a convolution of any
 * kind is 2*N*Ho*Wo*K*(C/groups)*R*S, a linear layer (or either of its
 * gradients) 2*M*N*K; every other kernel counts 0.  Bytes are an estimate
 * from below: the sizes of the distinct tensors a launch's arguments name
 * (a tensor both read and written counts once: templates pass unused or
 * in-place pointers twice, which would count memory never touched; node
 * scratch is not counted).
 *
 * The peak rates: memory bandwidth 2 * memory clock * bus width / 8 (double
 * data rate); f16 tensor rate SMs * clock * the dense FLOPs per SM per clock
 * of the compute capability (rt_gpu_tensor_flops_per_clock), at the clock
 * the driver reports (the boost clock, so the peak is an upper bound). */
#include <math.h>
#include <nvtx3/nvToolsExt.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_gpu_impl.h"

enum { STEP_TIME_REPLAYS = 10 };

/* The stream waits in the host function until `open` (or 0.25 s, see above). */
typedef struct Gate {
  atomic_int open;
} Gate;

static void CUDA_CB gate_wait(void *user) {
  Gate *gate = user;
  struct timespec t0, now, nap = {0, 20000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (!atomic_load(&gate->open)) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec) > 0.25) return;
    nanosleep(&nap, NULL);
  }
}

int rt_gpu_tensor_flops_per_clock(int cc_major, int cc_minor) {
  /* dense f16 multiply-adds with f32 accumulation, times 2: V100 and T4 (7.x)
   * 1024, A100 (8.0) 2048, A10/A40/L40 (8.6, 8.9) 1024 (GeForce parts of
   * 8.6/8.9 run f32 accumulation at half that), H100/H200 (9.0) 4096,
   * B200 (10.0) 8192, RTX 50 series (12.0) 1024 */
  switch (cc_major) {
  case 7: return 1024;
  case 8: return cc_minor == 0 ? 2048 : 1024;
  case 9: return 4096;
  case 10: return 8192;
  case 12: return 1024;
  default: return 0;
  }
}

void rt_gpu_nvtx_push(const IrGraph *g, int node) {
  const IrNode *n = &g->node[node];
  const IrOpInfo *op = ir_op_info(n->op);
  nvtxRangePushA(n->name && *n->name ? n->name : op ? op->name : "node");
}

void rt_gpu_nvtx_pop(void) { nvtxRangePop(); }

void rt_gpu_profile_free(RtGpuProfile *p) {
  if (!p) return;
  free(p->rec);
  memset(p, 0, sizeof *p);
}

static double value_bytes(const RtGpu *x, int v) {
  return (double)x->numel[v] * (double)ir_dtype_size(x->g->val[v].type.dtype);
}

/* Value id of a node's kernel argument, or -1 for scratch. */
static int arg_value(const IrNode *n, const CgKArg *a) {
  if (a->kind == CG_KARG_IN && a->index >= 0 && a->index < n->nin) return n->in[a->index];
  if (a->kind == CG_KARG_OUT && a->index >= 0 && a->index < n->nout) return n->out[a->index];
  return -1;
}

static void describe_conv(const RtGpu *x, int i, RtGpuProfRec *r) {
  const CgKNode *k = &x->prog.kn[i];
  const CgConvDesc *d = &k->conv;
  static const char *const KIND[] = {"fwd", "dgrad", "wgrad"};
  char stride[32] = "";
  if (d->stride[0] != 1 || d->stride[1] != 1) snprintf(stride, sizeof stride, " s%d", d->stride[0]);
  snprintf(r->kernel, sizeof r->kernel, "cudnn_conv_%s%s%s%s %s [%d,%d,%d,%d]x[%d,%d,%d]%s",
           (unsigned)d->kind < 3 ? KIND[d->kind] : "?",
           !x->conv[i].fused ? ""
           : d->dbn          ? "+dbn"
                             : "+stats",
           d->prologue && x->conv[i].pro_fused ? "+prologue" : "",
           d->epilogue && x->conv[i].epi_fused ? "+epilogue" : "", ir_dtype_name(d->dtype), d->n, d->h, d->w, d->c,
           d->k, d->r, d->s, stride);
  int g = d->groups > 0 ? d->groups : 1;
  r->flops = 2.0 * d->n * d->ho * d->wo * d->k * (double)(d->c / g) * d->r * d->s;
  /* x, w and y as the convolution sees them (a folded stem's in scratch),
   * plus the residual a fused epilogue reads and the mask a fused data
   * gradient's relu reads */
  double es = (double)ir_dtype_size(d->dtype), px = (double)d->n * d->h * d->w * d->c;
  double py = (double)d->n * d->ho * d->wo * d->k;
  r->bytes = px * es + (double)d->k * d->r * d->s * (d->c / g) * es +
             py * (double)ir_dtype_size(d->kind == CG_CONV_FWD ? d->ydtype : d->dtype);
  if (x->conv[i].epi_fused && d->kind == CG_CONV_FWD && (d->epilogue & CG_EPI_RESIDUAL))
    r->bytes += py * (double)ir_dtype_size(d->rdtype);
  if (x->conv[i].epi_fused && d->kind == CG_CONV_BWD_DATA && (d->epilogue & CG_EPI_DRELU))
    r->bytes += px * es * ((d->epilogue & CG_EPI_RESIDUAL) ? 2 : 1);
}

/* 2*M*N*K of a linear node, from its input types (see emit_linear). */
static double linear_flops(const RtGpu *x, const IrNode *n) {
  if (n->nin < 2) return 0;
  const IrType *t0 = &x->g->val[n->in[0]].type, *t1 = &x->g->val[n->in[1]].type;
  if (t0->rank != 2 || t1->rank != 2) return 0;
  double b = (double)x->batch;
  switch (n->op) {
  case IR_OP_LINEAR: return 2.0 * b * (double)t0->dim[1] * (double)t1->dim[0];
  case IR_OP_LINEAR_BWD_DATA:
  case IR_OP_LINEAR_BWD_WEIGHT: return 2.0 * b * (double)t0->dim[1] * (double)t1->dim[1];
  default: return 0;
  }
}

/* The tensors every node of a multi-tensor run reads and writes. */
static double run_bytes(const RtGpu *x, const CgMultiRun *run) {
  double b = 0;
  for (int m = 0; m < run->n; m++) {
    const IrNode *n = &x->g->node[run->node[m]];
    for (int a = 0; a < n->nin; a++) b += value_bytes(x, n->in[a]);
    for (int a = 0; a < n->nout; a++) b += value_bytes(x, n->out[a]);
  }
  return b;
}

/* 2 * MACs of a generated stem convolution (stem_conv.cu's `_mma_`
 * launch) as it computes them: y's pixels by the folded filter (4C
 * channels, ceil(R/2) x ceil(S/2) taps), the count cuDNN's folded row has. */
static double stem_mma_flops(const RtGpu *x, const IrNode *n) {
  const IrType *tw = &x->g->val[n->in[1]].type;
  return 2.0 * (double)x->numel[n->out[0]] * 4.0 * (double)tw->dim[3] * (double)((tw->dim[1] + 1) / 2) *
         (double)((tw->dim[2] + 1) / 2);
}

static void describe_launch(const RtGpu *x, int i, int j, RtGpuProfRec *r) {
  const IrNode *n = &x->g->node[i];
  const CgKLaunch *l = x->launch[x->first[i] + j].l;
  snprintf(r->kernel, sizeof r->kernel, "%s", l->name);
  const CgMultiRun *run = j == 0 ? rt_gpu_run_at(x, i) : NULL;
  if (run) {
    r->bytes = run_bytes(x, run);
    return;
  }
  for (int a = 0; a < l->nargs; a++) {
    int v = arg_value(n, &l->args[a]), seen = 0;
    for (int b = 0; b < a && !seen; b++) seen = arg_value(n, &l->args[b]) == v;
    if (v >= 0 && !seen) r->bytes += value_bytes(x, v);
  }
  if (j == 0 && !x->conv[i].plan) r->flops = linear_flops(x, n); /* on cuDNN: describe_conv counts them */
  if (strstr(l->name, "_mma_") && n->nin == 2 && n->nout == 1) r->flops = stem_mma_flops(x, n);
}

/* The records of every piece, in step order. */
static RtCudaStatus list_pieces(const RtGpu *x, RtGpuProfile *p, char *err, size_t errlen) {
  const IrGraph *g = x->g;
  int total = 0;
  for (int i = 0; i < g->nnode; i++)
    total += x->once[i] ? 0 : (x->conv[i].plan != NULL) + x->first[i + 1] - x->first[i];
  p->rec = calloc((size_t)total + 1, sizeof *p->rec);
  if (!p->rec) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu_profile: out of host memory");
  for (int i = 0; i < g->nnode; i++) {
    for (int j = 0; !x->once[i] && j <= x->first[i + 1] - x->first[i]; j++) {
      if (j == x->conv[i].pre && x->conv[i].plan) {
        RtGpuProfRec *r = &p->rec[p->nrec++];
        r->node = i, r->launch = -1;
        describe_conv(x, i, r);
      }
      if (j == x->first[i + 1] - x->first[i]) break;
      RtGpuProfRec *r = &p->rec[p->nrec++];
      r->node = i, r->launch = j;
      describe_launch(x, i, j, r);
    }
  }
  return RT_CUDA_OK;
}

/* One step on the stream, events ev[2k] and ev[2k+1] around piece k (ev may
 * be NULL: no events), an NVTX range per node. */
static RtCudaStatus queue_step(RtGpu *x, CUevent *ev, char *err, size_t errlen) {
  RtCudaStatus s = RT_CUDA_OK;
  int k = 0;
  for (int i = 0; !s && i < x->g->nnode; i++) {
    if (x->once[i]) continue; /* not in the step: rt_gpu_prepare's */
    rt_gpu_nvtx_push(x->g, i);
    s = rt_gpu_launch_node(x, i, x->stream, ev, &k, err, errlen);
    rt_gpu_nvtx_pop();
  }
  return s;
}

/* One profiled step: queued behind the gate, run, its times read into t[k]
 * (durations) and start[k]. */
static RtCudaStatus timed_step(RtGpu *x, CUevent *ev, int n, float *t, float *start, char *err, size_t errlen) {
  Gate gate;
  atomic_init(&gate.open, 0);
  RtCudaStatus s = RT_CU(x->api, LaunchHostFunc, (x->stream, gate_wait, &gate), "holding the stream", err, errlen);
  if (s) return s;
  s = queue_step(x, ev, err, errlen);
  atomic_store(&gate.open, 1);
  /* the host function reads the gate until it returns: wait for it even after a failure */
  RtCudaStatus sync = RT_CU(x->api, StreamSynchronize, (x->stream), "profiling the step", err, errlen);
  if (!s) s = sync;
  for (int k = 0; !s && k < n; k++) {
    s = RT_CU(x->api, EventElapsedTime, (&t[k], ev[2 * k], ev[2 * k + 1]), "reading the timings", err, errlen);
    if (!s) s = RT_CU(x->api, EventElapsedTime, (&start[k], ev[0], ev[2 * k]), "reading the timings", err, errlen);
  }
  return s;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static RtCudaStatus device_limits(RtGpu *x, RtGpuProfile *p, char *err, size_t errlen) {
  CUdevice dev = rt_cuda_ctx_device(x->ctx);
  const struct {
    CUdevice_attribute attr;
    int *v;
  } A[] = {
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &p->sm_count},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &p->cc_major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &p->cc_minor},
      {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, &p->clock_khz},
      {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &p->mem_clock_khz},
      {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &p->mem_bus_bits},
  };
  RtCudaStatus s = RT_CU(x->api, DeviceGetName, (p->device, (int)sizeof p->device, dev), "device name", err, errlen);
  for (size_t i = 0; !s && i < sizeof A / sizeof A[0]; i++)
    s = RT_CU(x->api, DeviceGetAttribute, (A[i].v, A[i].attr, dev), "device limits", err, errlen);
  if (s) return s;
  p->peak_gbs = 2.0 * p->mem_clock_khz * 1e3 * p->mem_bus_bits / 8.0 / 1e9;
  p->peak_tflops =
      (double)p->sm_count * p->clock_khz * 1e3 * rt_gpu_tensor_flops_per_clock(p->cc_major, p->cc_minor) / 1e12;
  return RT_CUDA_OK;
}

/* reps profiled steps into p->rec[].ms (median) and .start_ms (last step). */
static RtCudaStatus profile_steps(RtGpu *x, int reps, RtGpuProfile *p, char *err, size_t errlen) {
  int n = p->nrec;
  CUevent *ev = calloc(2 * (size_t)n + 1, sizeof *ev);
  float *t = malloc(sizeof(float) * ((size_t)n * (size_t)reps + 1));
  float *start = malloc(sizeof(float) * ((size_t)n + 1));
  float *col = malloc(sizeof(float) * ((size_t)reps + 1));
  RtCudaStatus s = RT_CUDA_OK;
  if (!ev || !t || !start || !col) s = rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu_profile: out of host memory");
  for (int e = 0; !s && e < 2 * n; e++)
    s = RT_CU(x->api, EventCreate, (&ev[e], CU_EVENT_DEFAULT), "profiling events", err, errlen);
  /* one untimed step first: cuDNN and the module load lazily */
  if (!s) s = queue_step(x, NULL, err, errlen);
  if (!s) s = RT_CU(x->api, StreamSynchronize, (x->stream), "profiling the step", err, errlen);
  for (int r = 0; !s && r < reps; r++) s = timed_step(x, ev, n, t + (size_t)r * (size_t)n, start, err, errlen);
  for (int k = 0; !s && k < n; k++) {
    for (int r = 0; r < reps; r++) col[r] = t[(size_t)r * (size_t)n + (size_t)k];
    qsort(col, (size_t)reps, sizeof *col, cmp_float);
    p->rec[k].ms = reps % 2 ? col[reps / 2] : 0.5 * ((double)col[reps / 2 - 1] + col[reps / 2]);
    p->rec[k].start_ms = start[k];
  }
  for (int e = 0; ev && e < 2 * n; e++)
    if (ev[e]) x->api->EventDestroy(ev[e]);
  free(ev);
  free(t);
  free(start);
  free(col);
  return s;
}

RtCudaStatus rt_gpu_profile(RtGpu *x, int reps, RtGpuProfile *out, char *err, size_t errlen) {
  if (!out) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_profile: out is NULL");
  memset(out, 0, sizeof *out);
  if (!x || reps < 1 || reps > 1000)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_profile: %s", x ? "reps must be in 1..1000" : "no executor");
  out->reps = reps;
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  if (!s) s = RT_CU(x->api, StreamSynchronize, (x->stream), "before profiling", err, errlen);
  if (!s) s = device_limits(x, out, err, errlen);
  if (!s) s = list_pieces(x, out, err, errlen);
  if (!s) s = rt_gpu_prepare(x, err, errlen); /* the weights' casts, which the step reads and does not time */
  if (!s) s = profile_steps(x, reps, out, err, errlen);
  if (!s && !x->exec) s = rt_gpu_capture(x, err, errlen);
  double ms = 0;
  if (!s) s = rt_gpu_time(x, STEP_TIME_REPLAYS, &ms, err, errlen);
  out->step_ms = ms / STEP_TIME_REPLAYS;
  if (s) rt_gpu_profile_free(out);
  return s;
}
