/* rt_cudnn_exec.c - running a plan: the variant pack of its device
 * pointers (x, w, y and whatever GenStats, the prologue, the epilogue or
 * dbn read and write), the outputs zeroed before each run, timed runs, and
 * the public rt_cudnn_conv_exec, rt_cudnn_conv_time and
 * rt_cudnn_conv_exec_on with their checks of the buffers. */
#include "rt_cudnn_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *ptr(CUdeviceptr p) { return (void *)(uintptr_t)p; }

/* Runs plan (made from p's graph) on io: x, w, y and, as p's description
 * asks, the GenStats outputs stats[0..K) and stats[K..2K), the prologue's
 * scale sb[0..C) and bias sb[C..2C), the epilogue's operands, dbn's
 * buffers (a, b, c at abc, abc + C and abc + 2C floats). */
static RtCudaStatus execute(RtCudnn *h, const RtConvPlan *p, cudnnBackendDescriptor_t plan, const RtConvIo *io,
                            char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  const char *what = p->what;
  int64_t uids[24] = {UID_X, UID_W, UID_Y};
  void *ptrs[24] = {ptr(io->x), ptr(io->w), ptr(io->y)};
  int64_t n = 3;
  if (d->genstats) {
    uids[n] = UID_SUM, ptrs[n++] = ptr(io->stats);
    uids[n] = UID_SQSUM, ptrs[n++] = ptr(io->stats + (CUdeviceptr)d->k * sizeof(float));
  }
  if (d->prologue) {
    uids[n] = UID_SCALE, ptrs[n++] = ptr(io->sb);
    uids[n] = UID_BIAS, ptrs[n++] = ptr(io->sb + (CUdeviceptr)d->c * dtype_bytes(d->dtype));
  }
  if (d->epilogue & CG_EPI_AFFINE) { /* with OUTSCALE: the three vectors from 2K floats in (RtConvIo.esb) */
    CUdeviceptr e = io->esb + (d->epilogue & CG_EPI_OUTSCALE ? (CUdeviceptr)2 * d->k * sizeof(float) : 0);
    uids[n] = UID_ESCALE, ptrs[n++] = ptr(e);
    uids[n] = UID_EBIAS, ptrs[n++] = ptr(e + (CUdeviceptr)d->k * sizeof(float));
    if (d->epilogue & CG_EPI_OUTSCALE)
      uids[n] = UID_EOSCALE, ptrs[n++] = ptr(e + (CUdeviceptr)2 * d->k * sizeof(float));
  }
  if (d->epilogue & CG_EPI_RESIDUAL) uids[n] = UID_RESIDUAL, ptrs[n++] = ptr(io->residual);
  if (d->epilogue & CG_EPI_DRELU) uids[n] = UID_MASK, ptrs[n++] = ptr(io->mask);
  if (d->dbn) {
    const CUdeviceptr in[BN_INS] = {io->bn.mean, io->bn.invstd, io->bn.gamma, io->bn.beta};
    uids[n] = UID_Z, ptrs[n++] = ptr(io->bn.z);
    for (int i = 0; i < BN_INS; i++) uids[n] = UID_BN_IN + i, ptrs[n++] = ptr(in[i]);
    uids[n] = UID_BN_OUT + BN_DGAMMA, ptrs[n++] = ptr(io->bn.dgamma);
    uids[n] = UID_BN_OUT + BN_DBETA, ptrs[n++] = ptr(io->bn.dbeta);
    for (int i = 0; i < 3; i++)
      uids[n] = UID_BN_OUT + BN_EQA + i, ptrs[n++] = ptr(io->bn.abc + (CUdeviceptr)i * d->c * sizeof(float));
  }
  void *ws = ptr(io->workspace);
  cudnnBackendDescriptor_t pack = NULL;
  RtCudaStatus s;
  if (!(s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack), what)) &&
      !(s = SET(h, pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids, what)) &&
      !(s = SET(h, pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs, what)) &&
      !(s = SET(h, pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws, what)) &&
      !(s = DNN(h, BackendFinalize, (pack), what)))
    s = DNN(h, BackendExecute, (h->handle, plan, pack), what);
  destroy(h->dnn, &pack);
  return s;
}

/* Runs plan (made from p's graph) on io, first zeroing (when zero_stats
 * is set) the GenStats sums or the dbn outputs its description has. */
RtCudaStatus rt_cudnn_exec_run(RtCudnn *h, const RtConvPlan *p, cudnnBackendDescriptor_t plan, const RtConvIo *io,
                               int zero_stats, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  const RtCudaApi *cu = h->cu;
  size_t cb = sizeof(float) * (size_t)d->c;
  RtCudaStatus s;
  if (zero_stats && d->genstats &&
      (s = RT_CU(cu, MemsetD8Async, (io->stats, 0, 2 * sizeof(float) * (size_t)d->k, h->stream), p->what, err, errlen)))
    return s;
  if (zero_stats && d->dbn &&
      ((s = RT_CU(cu, MemsetD8Async, (io->bn.dgamma, 0, cb, h->stream), p->what, err, errlen)) ||
       (s = RT_CU(cu, MemsetD8Async, (io->bn.dbeta, 0, cb, h->stream), p->what, err, errlen)) ||
       (s = RT_CU(cu, MemsetD8Async, (io->bn.abc, 0, 3 * cb, h->stream), p->what, err, errlen))))
    return s;
  return execute(h, p, plan, io, err, errlen);
}

/* Milliseconds per run of plan on io (mean of runs after one warm-up,
 * between two events on the handle's stream), or a negative value when it
 * fails to run. */
float rt_cudnn_exec_time(RtCudnn *h, const RtConvPlan *p, cudnnBackendDescriptor_t plan, const RtConvIo *io, int runs,
                         int zero_stats, char *err, size_t errlen) {
  const RtCudaApi *cu = h->cu;
  CUevent ev[2] = {NULL, NULL};
  float ms = -1;
  if (RT_CU(cu, EventCreate, (&ev[0], CU_EVENT_DEFAULT), p->what, err, errlen) ||
      RT_CU(cu, EventCreate, (&ev[1], CU_EVENT_DEFAULT), p->what, err, errlen) ||
      rt_cudnn_exec_run(h, p, plan, io, zero_stats, err, errlen) ||
      RT_CU(cu, EventRecord, (ev[0], h->stream), p->what, err, errlen))
    goto done;
  for (int i = 0; i < runs; i++)
    if (rt_cudnn_exec_run(h, p, plan, io, zero_stats, err, errlen)) goto done;
  float t = 0;
  if (RT_CU(cu, EventRecord, (ev[1], h->stream), p->what, err, errlen) ||
      RT_CU(cu, EventSynchronize, (ev[1]), p->what, err, errlen) ||
      RT_CU(cu, EventElapsedTime, (&t, ev[0], ev[1]), p->what, err, errlen))
    goto done;
  ms = t / runs;
done:
  for (int i = 0; i < 2; i++)
    if (ev[i]) cu->EventDestroy(ev[i]);
  return ms;
}

/* Whether io gives exactly the buffers plan's description asks for. */
static RtCudaStatus check_io(RtCudnn *h, const RtConvPlan *plan, const RtConvIo *io, const char *fn, char *err,
                             size_t errlen) {
  if (!h || !plan || !io || !io->x || !io->w || !io->y || (plan->workspace > 0 && !io->workspace)) {
    rt_errf(err, errlen, "%s: NULL argument%s", fn, plan ? "" : " (plan)");
    return RT_CUDA_EARG;
  }
  const CgConvDesc *d = &plan->key;
  if (!io->stats != !d->genstats || !io->sb != !d->prologue) {
    rt_errf(err, errlen, "%s: %s %s statistics and %s scale and bias, the call gives %s and %s", fn, plan->what,
            d->genstats ? "writes" : "writes no", d->prologue ? "reads" : "reads no", io->stats ? "statistics" : "none",
            io->sb ? "scale and bias" : "none");
    return RT_CUDA_EARG;
  }
  int e = d->epilogue;
  if (!io->esb != !(e & CG_EPI_AFFINE) || !io->residual != !(e & CG_EPI_RESIDUAL) || !io->mask != !(e & CG_EPI_DRELU)) {
    rt_errf(err, errlen, "%s: %s: the epilogue's buffers (scale and bias %s, residual %s, mask %s) do not match it", fn,
            plan->what, io->esb ? "given" : "none", io->residual ? "given" : "none", io->mask ? "given" : "none");
    return RT_CUDA_EARG;
  }
  const CUdeviceptr bn[] = {io->bn.z,    io->bn.mean,   io->bn.invstd, io->bn.gamma,
                            io->bn.beta, io->bn.dgamma, io->bn.dbeta,  io->bn.abc};
  int given = 0;
  for (size_t i = 0; i < sizeof bn / sizeof bn[0]; i++) given += bn[i] != 0;
  if (given != (d->dbn ? (int)(sizeof bn / sizeof bn[0]) : 0)) {
    rt_errf(err, errlen, "%s: %s: %s, the call gives %d of them", fn, plan->what,
            d->dbn ? "needs all 8 batch-norm buffers (z, mean, invstd, gamma, beta, dgamma, dbeta, abc)"
                   : "takes no batch-norm buffers",
            given);
    return RT_CUDA_EARG;
  }
  return RT_CUDA_OK;
}

RtCudaStatus rt_cudnn_conv_exec(RtCudnn *h, RtConvPlan *plan, const RtConvIo *io, char *err, size_t errlen) {
  RtCudaStatus s = check_io(h, plan, io, "rt_cudnn_conv_exec", err, errlen);
  return s ? s : rt_cudnn_exec_run(h, plan, plan->plan, io, 1, err, errlen);
}

RtCudaStatus rt_cudnn_conv_time(RtCudnn *h, RtConvPlan *plan, const RtConvIo *io, int runs, float *ms, char *err,
                                size_t errlen) {
  RtCudaStatus s = check_io(h, plan, io, "rt_cudnn_conv_time", err, errlen);
  if (s) return s;
  if (!ms || runs < 1) {
    rt_errf(err, errlen, "rt_cudnn_conv_time: %s", ms ? "runs must be at least 1" : "ms is NULL");
    return RT_CUDA_EARG;
  }
  *ms = rt_cudnn_exec_time(h, plan, plan->plan, io, runs, 1, err, errlen);
  return *ms < 0 ? RT_CUDA_ECALL : RT_CUDA_OK;
}

RtCudaStatus rt_cudnn_conv_exec_on(RtCudnn *h, RtConvPlan *plan, const RtConvIo *io, CUstream stream, char *err,
                                   size_t errlen) {
  CUstream own = h->stream;
  RtCudaStatus s = DNN(h, SetStream, (h->handle, (cudaStream_t)stream), "cuDNN handle on another stream");
  if (s) return s;
  h->stream = stream;
  s = rt_cudnn_conv_exec(h, plan, io, err, errlen);
  h->stream = own;
  char back_err[512];
  RtCudaStatus back = rt_cudnn_lib_check(h->dnn, h->dnn->SetStream(h->handle, (cudaStream_t)own), __FILE__, __LINE__,
                                         "cudnnSetStream(h->handle, own)", "cuDNN handle back on its stream", back_err,
                                         sizeof back_err);
  if (!s && back) rt_errf(err, errlen, "%s", back_err);
  return s ? s : back;
}
