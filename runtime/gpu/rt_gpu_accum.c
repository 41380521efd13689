/* rt_gpu_accum.c - gradient accumulation on the GPU executor (rt_gpu.h;
 * docs/training.md): one optimizer update from k micro-batches, as the CPU
 * executor's rt_cpu_accum.c, which is its reference.
 *
 * The sums are one f32 allocation (each gradient's at a 256-byte
 * boundary).  codegen_templates/accum.cu (after common.cu) is compiled with
 * NVRTC for the device when the accumulator is made -- two small kernels
 * per gradient dtype -- and two CUDA graphs are captured from the
 * executor's own launches (rt_gpu_launch_nodes): the micro-step (the nodes
 * before the optimizer section, which starts at IrGraph.opt_first, then one
 * add launch per gradient) and the last micro-step (the same nodes, one
 * finish launch per gradient, then the optimizer section).  Every address
 * is fixed, so both graphs stay valid for every later update; k is an
 * argument of the finish launches, so another k needs another accumulator.
 * The executor's whole-step graph (k = 1) is not touched.
 *
 * With the data-parallel all-reduce set (rt_gpu_allreduce.c), the last
 * micro-step all-reduces the finished means on the stream, bucket by
 * bucket, between the finish launches and the optimizer section; the
 * micro-steps all-reduce no gradients (their sums stay each rank's own),
 * only synchronized batch norm's statistics when it is on.
 * rt_gpu_allreduce_set drops the last micro-step's graph of the
 * executor's latest accumulator, and an accumulator whose graphs were
 * captured under an earlier setting (rt_gpu_allreduce_set or
 * rt_gpu_sync_bn_set since) captures each again when it next runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_gpu_impl.h"
#include "cg_templates.h"
#include "rt_gpu_prog.h"

enum { ALIGN = 256, THREADS = 256, MAX_BLOCKS = 1024 };

typedef struct AccLaunch {
  CUfunction add, finish;
  CUdeviceptr sum, g;
  long long n;
  unsigned blocks;
} AccLaunch;

struct RtGpuAccum {
  RtGpu *x;
  int first, n, k;
  float kf;
  AccLaunch *l;
  CUdeviceptr sums;
  size_t bytes;
  RtCudaModule *mod;
  CUgraphExec micro, last;
  unsigned gen;       /* x->allreduce_gen when last was captured */
  unsigned micro_gen; /* and when micro was (synchronized batch norm's sums are in every micro-step) */
};

static const char *dtype_suffix(IrDtype dt) {
  return dt == IR_DT_F32 ? "f32" : dt == IR_DT_F16 ? "f16" : dt == IR_DT_BF16 ? "bf16" : NULL;
}

/* common.cu + accum.cu compiled for the device, loaded into a->mod. */
static RtCudaStatus load_kernels(RtGpuAccum *a, char *err, size_t errlen) {
  RtGpu *x = a->x;
  const char *common = cg_templates_text("common.cu"), *accum = cg_templates_text("accum.cu");
  if (!common || !accum) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_accum: accum.cu is not embedded");
  size_t lc = strlen(common), la = strlen(accum);
  char *src = malloc(lc + la + 2);
  if (!src) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu_accum: out of host memory");
  memcpy(src, common, lc);
  src[lc] = '\n';
  memcpy(src + lc + 1, accum, la + 1);
  RtCudaStatus s = rt_gpu_prog_module(x->ctx, src, "netc_accum", "accum", x->cache_dir, "gradient accumulation kernels",
                                      &a->mod, err, errlen);
  free(src);
  return s;
}

/* The sums' places and each gradient's two kernels. */
static RtCudaStatus prepare(RtGpuAccum *a, const int *grad, char *err, size_t errlen) {
  RtGpu *x = a->x;
  size_t at = 0;
  for (int i = 0; i < a->n; i++) {
    int v = grad[i];
    const char *sfx = v >= 0 && v < x->g->nval ? dtype_suffix(x->g->val[v].type.dtype) : NULL;
    if (!sfx || !x->addr[v])
      return rt_cuda_fail(RT_CUDA_EARG, err, errlen,
                          "rt_gpu_accum: value %%%d is not an f32/f16/bf16 gradient in "
                          "device memory",
                          v);
    AccLaunch *L = &a->l[i];
    L->g = x->addr[v], L->n = x->numel[v];
    L->sum = at; /* an offset until the allocation */
    at += ((size_t)L->n * sizeof(float) + ALIGN - 1) / ALIGN * ALIGN;
    long long blocks = (L->n + THREADS - 1) / THREADS;
    L->blocks = (unsigned)(blocks < 1 ? 1 : blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks);
    char name[64];
    RtCudaStatus s;
    snprintf(name, sizeof name, "netc_accum_add_%s", sfx);
    if ((s = rt_cuda_module_function(a->mod, name, &L->add, err, errlen))) return s;
    snprintf(name, sizeof name, "netc_accum_finish_%s", sfx);
    if ((s = rt_cuda_module_function(a->mod, name, &L->finish, err, errlen))) return s;
  }
  a->bytes = at ? at : ALIGN;
  CUresult r = x->api->MemAlloc(&a->sums, a->bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    return rt_cuda_fail(RT_CUDA_EDEVMEM, err, errlen,
                        "out of GPU memory: the gradient sums of accumulation need %zu "
                        "bytes (%.2f GiB)",
                        a->bytes, a->bytes / 1073741824.0);
  if (r != CUDA_SUCCESS) a->sums = 0;
  RtCudaStatus s =
      rt_cuda_check(x->api, r, __FILE__, __LINE__, "cuMemAlloc(&a->sums, a->bytes)", "gradient sums", err, errlen);
  for (int i = 0; !s && i < a->n; i++) a->l[i].sum += a->sums;
  return s;
}

/* The add (last == 0) or finish launch of every gradient. */
static RtCudaStatus launch_sums(RtGpuAccum *a, int last, char *err, size_t errlen) {
  RtGpu *x = a->x;
  for (int i = 0; i < a->n; i++) {
    AccLaunch *L = &a->l[i];
    void *args[4] = {&L->sum, &L->g, &L->n, &a->kf};
    RtCudaStatus s = RT_CU(x->api, LaunchKernel,
                           (last ? L->finish : L->add, L->blocks, 1, 1, THREADS, 1, 1, 0, x->stream, args, NULL),
                           last ? "gradient accumulation: the mean" : "gradient accumulation: the sum", err, errlen);
    if (s) return s;
  }
  return RT_CUDA_OK;
}

/* One micro-step (or the last) captured as a graph into *exec. */
static RtCudaStatus capture(RtGpuAccum *a, int last, CUgraphExec *exec, char *err, size_t errlen) {
  RtGpu *x = a->x;
  RtCudaStatus s = RT_CU(x->api, StreamBeginCapture, (x->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                         "capturing an accumulation micro-step", err, errlen);
  if (s) return s;
  RtCudaStatus ls = rt_gpu_launch_nodes(x, 0, a->first, err, errlen);
  if (!ls) ls = launch_sums(a, last, err, errlen);
  if (!ls && last) ls = rt_gpu_allreduce_all(x, err, errlen);
  if (!ls && last) ls = rt_gpu_launch_nodes(x, a->first, x->g->nnode, err, errlen);
  CUgraph graph = NULL;
  /* capture must end even after a failed launch, or the stream stays unusable */
  CUresult r = x->api->StreamEndCapture(x->stream, &graph);
  if (ls) {
    if (graph) x->api->GraphDestroy(graph);
    return ls;
  }
  if ((s = rt_cuda_check(x->api, r, __FILE__, __LINE__, "cuStreamEndCapture(stream, &graph)",
                         "capturing an accumulation micro-step", err, errlen)))
    return s;
  s = RT_CU(x->api, GraphInstantiate, (exec, graph, 0), "instantiating an accumulation micro-step", err, errlen);
  if (s) *exec = NULL;
  x->api->GraphDestroy(graph);
  return s;
}

RtCudaStatus rt_gpu_accum_new(RtGpu *x, const int *grad, int ngrad, int k, RtGpuAccum **out, char *err, size_t errlen) {
  if (!out) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_accum_new: out is NULL");
  *out = NULL;
  if (!x || ngrad < 0 || (ngrad && !grad) || k < 1)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_accum_new: bad arguments");
  int first = x->g->opt_first;
  if (first < 0 || first > x->g->nnode)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_accum_new: graph %s has no optimizer section", x->g->name);
  RtGpuAccum *a = calloc(1, sizeof *a);
  if (a) a->l = calloc((size_t)(ngrad ? ngrad : 1), sizeof *a->l);
  if (!a || !a->l) {
    free(a);
    return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu_accum_new: out of host memory");
  }
  a->x = x, a->first = first, a->n = ngrad, a->k = k, a->kf = (float)k;
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  if (!s) s = RT_CU(x->api, StreamSynchronize, (x->stream), "before capturing accumulation", err, errlen);
  if (!s) s = load_kernels(a, err, errlen);
  if (!s) s = prepare(a, grad, err, errlen);
  if (!s) s = rt_gpu_accum_reset(a, err, errlen);
  if (!s) s = capture(a, 0, &a->micro, err, errlen);
  if (!s) s = capture(a, 1, &a->last, err, errlen);
  if (s) {
    rt_gpu_accum_free(a);
    return s;
  }
  a->gen = a->micro_gen = x->allreduce_gen;
  x->accum_last = &a->last;
  *out = a;
  return RT_CUDA_OK;
}

void rt_gpu_accum_free(RtGpuAccum *a) {
  if (!a) return;
  RtGpu *x = a->x;
  if (x->accum_last == &a->last) x->accum_last = NULL;
  /* teardown errors have nobody to report to */
  rt_cuda_ctx_bind(x->ctx, NULL, 0);
  x->api->StreamSynchronize(x->stream);
  if (a->micro) x->api->GraphExecDestroy(a->micro);
  if (a->last) x->api->GraphExecDestroy(a->last);
  if (a->sums) x->api->MemFree(a->sums);
  rt_cuda_module_free(a->mod);
  free(a->l);
  free(a);
}

int rt_gpu_accum_k(const RtGpuAccum *a) { return a ? a->k : 0; }

RtCudaStatus rt_gpu_accum_reset(RtGpuAccum *a, char *err, size_t errlen) {
  if (!a) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_accum_reset: no accumulator");
  RtGpu *x = a->x;
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  return s ? s
           : RT_CU(x->api, MemsetD8Async, (a->sums, 0, a->bytes, x->stream), "zeroing the gradient sums", err, errlen);
}

RtCudaStatus rt_gpu_accum_run(RtGpuAccum *a, int last, char *err, size_t errlen) {
  if (!a) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_accum_run: no accumulator");
  RtGpu *x = a->x;
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  if (s) return s;
  /* synchronized batch norm (its sums in every micro-step) turned on or off, or its communicator changed,
   * since the micro-step was captured */
  if (!last && a->micro_gen != x->allreduce_gen) {
    if ((s = RT_CU(x->api, StreamSynchronize, (x->stream), "before capturing accumulation", err, errlen))) return s;
    if (a->micro) x->api->GraphExecDestroy(a->micro);
    a->micro = NULL;
    if ((s = capture(a, 0, &a->micro, err, errlen))) return s;
    a->micro_gen = x->allreduce_gen;
  }
  /* the all-reduce changed since the last micro-step was captured */
  if (last && (!a->last || a->gen != x->allreduce_gen)) {
    if ((s = RT_CU(x->api, StreamSynchronize, (x->stream), "before capturing accumulation", err, errlen))) return s;
    if (a->last) x->api->GraphExecDestroy(a->last);
    a->last = NULL;
    if ((s = capture(a, 1, &a->last, err, errlen))) return s;
    a->gen = x->allreduce_gen;
  }
  return RT_CU(x->api, GraphLaunch, (last ? a->last : a->micro, x->stream), "replaying a micro-step", err, errlen);
}
