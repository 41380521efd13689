/* test_nccl.c - NCCL loaded at run time (runtime/gpu/rt_nccl.c).
 *
 * Everywhere: a library that is not there, and one that is not NCCL
 * (libz.so.1), are refused with a message naming the file, and a later
 * load may still succeed.  With a GPU and NCCL: a communicator of one rank
 * from a fresh unique id; the all-reduce of f32 and f16 buffers (sum and
 * mean of one rank: the buffer itself, in place and into another buffer),
 * queued on a stream and captured into a CUDA graph that is replayed
 * twice, as a training step's gradient all-reduce is; two of them in one
 * group (rt_nccl_group_begin/_end).  Exits 77 without a
 * GPU or without NCCL.  (Ranks on several GPUs need a machine with several;
 * NCCL refuses two ranks on one device.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rt_cuda.h"
#include "rt_nccl.h"
#include "rt_ref.h"

enum { N = 1000003 }; /* not a multiple of any vector width */

static char err[2048];

static void test_refusals(void) {
  CHECK(rt_nccl_load("libnccl-not-there.so.2", err, sizeof err) == -1 && strstr(err, "no NCCL") &&
            strstr(err, "libnccl-not-there.so.2"),
        "a missing library: %s", err);
  CHECK(rt_nccl_load("libz.so.1", err, sizeof err) == -1 && strstr(err, "libz.so.1 has no ncclGetVersion"),
        "a library that is not NCCL: %s", err);
  CHECK(rt_nccl_join(NULL, 1, 0, NULL, err, sizeof err) == -1 && strstr(err, "bad arguments"), "no id: %s", err);
}

/* Runs the all-reduces of n elements of dtype on a one-rank communicator:
 * launched, then captured and replayed twice.  Every result must equal
 * the input bit for bit (one rank's sum and mean are its own values). */
static void test_allreduce(const RtCudaApi *cu, CUstream stream, RtNccl *c, IrDtype dtype) {
  size_t el = dtype == IR_DT_F32 ? 4 : 2, bytes = el * N;
  unsigned char *host = malloc(bytes), *back = malloc(bytes);
  CUdeviceptr a = 0, b = 0;
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  CHECK(host && back, "host memory");
  if (!host || !back) goto done;
  uint64_t s = 88172645463325252ull;
  for (size_t i = 0; i < N; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    float v = (float)((double)(s >> 11) / 9007199254740992.0 * 8.0 - 4.0);
    if (dtype == IR_DT_F32)
      memcpy(host + 4 * i, &v, 4);
    else {
      uint16_t h = rt_ref_f32_to_f16(v);
      memcpy(host + 2 * i, &h, 2);
    }
  }
  int ok = !RT_CU(cu, MemAlloc, (&a, bytes), "nccl test", err, sizeof err) &&
           !RT_CU(cu, MemAlloc, (&b, bytes), "nccl test", err, sizeof err) &&
           !RT_CU(cu, MemcpyHtoD, (a, host, bytes), "nccl test", err, sizeof err);
  CHECK(ok, "buffers: %s", err);
  if (!ok) goto done;
  for (int mean = 0; mean < 2; mean++) {
    ok = !rt_nccl_allreduce(c, a, b, N, dtype, mean, stream, err, sizeof err) &&
         !rt_nccl_allreduce(c, a, a, N, dtype, mean, stream, err, sizeof err) &&
         !RT_CU(cu, StreamSynchronize, (stream), "nccl test", err, sizeof err);
    CHECK(ok, "%s %s: %s", ir_dtype_name(dtype), mean ? "mean" : "sum", err);
    for (int which = 0; ok && which < 2; which++) {
      ok = !RT_CU(cu, MemcpyDtoH, (back, which ? a : b, bytes), "nccl test", err, sizeof err);
      CHECK(ok && !memcmp(back, host, bytes), "%s %s %s: one rank's result is its input", ir_dtype_name(dtype),
            mean ? "mean" : "sum", which ? "in place" : "into another buffer");
    }
  }
  /* a group of two, launched together when it ends (a bucket's gradients) */
  ok = !RT_CU(cu, MemcpyHtoD, (b, host, bytes), "nccl test", err, sizeof err) && !rt_nccl_group_begin(err, sizeof err);
  if (ok) {
    int queued = !rt_nccl_allreduce(c, a, a, N, dtype, 1, stream, err, sizeof err) &&
                 !rt_nccl_allreduce(c, b, b, N, dtype, 1, stream, err, sizeof err);
    ok = !rt_nccl_group_end(queued ? err : NULL, queued ? sizeof err : 0) && queued;
  }
  ok = ok && !RT_CU(cu, StreamSynchronize, (stream), "nccl test", err, sizeof err);
  CHECK(ok, "%s: a group of two all-reduces: %s", ir_dtype_name(dtype), err);
  for (int which = 0; ok && which < 2; which++) {
    ok = !RT_CU(cu, MemcpyDtoH, (back, which ? a : b, bytes), "nccl test", err, sizeof err);
    CHECK(ok && !memcmp(back, host, bytes), "%s group: one rank's mean is its input (buffer %d)", ir_dtype_name(dtype),
          which);
  }
  /* captured: the graph holds the all-reduce; each replay gives the same */
  ok = !RT_CU(cu, MemsetD8Async, (b, 0, bytes, stream), "nccl test", err, sizeof err) &&
       !RT_CU(cu, StreamSynchronize, (stream), "nccl test", err, sizeof err) &&
       !RT_CU(cu, StreamBeginCapture, (stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "capture", err, sizeof err);
  int queued = ok && !rt_nccl_allreduce(c, a, b, N, dtype, 1, stream, err, sizeof err);
  char qerr[sizeof err];
  snprintf(qerr, sizeof qerr, "%s", queued ? "" : err);
  ok = ok && !RT_CU(cu, StreamEndCapture, (stream, &graph), "capture", err, sizeof err) && queued &&
       !RT_CU(cu, GraphInstantiate, (&exec, graph, 0), "capture", err, sizeof err);
  CHECK(ok, "%s: the all-reduce captured into a CUDA graph: %s%s", ir_dtype_name(dtype), qerr, err);
  for (int r = 0; ok && r < 2; r++) {
    ok = !RT_CU(cu, GraphLaunch, (exec, stream), "replay", err, sizeof err) &&
         !RT_CU(cu, StreamSynchronize, (stream), "replay", err, sizeof err) &&
         !RT_CU(cu, MemcpyDtoH, (back, b, bytes), "replay", err, sizeof err);
    CHECK(ok && !memcmp(back, host, bytes), "%s: replay %d gives the input", ir_dtype_name(dtype), r + 1);
  }
done:
  if (exec) cu->GraphExecDestroy(exec);
  if (graph) cu->GraphDestroy(graph);
  if (a) cu->MemFree(a);
  if (b) cu->MemFree(b);
  free(host), free(back);
}

int main(void) {
  test_refusals();
  int count = 0;
  RtCudaStatus s = rt_cuda_device_count(&count, err, sizeof err);
  if (s == RT_CUDA_ENODRIVER || s == RT_CUDA_ENODEVICE || (!s && !count))
    return check_nfail ? check_report() : check_skip(s ? err : "no GPU");
  if (rt_nccl_load(NULL, err, sizeof err)) return check_nfail ? check_report() : check_skip(err);
  int v = rt_nccl_version();
  printf("NCCL %d.%d.%d\n", v / 10000, v / 100 % 100, v % 100);
  RtCudaCtx *ctx = NULL;
  CHECK(!rt_cuda_ctx_init(&ctx, 0, err, sizeof err), "context: %s", err);
  if (!ctx) return check_report();
  unsigned char id[RT_NCCL_ID_BYTES], zero[RT_NCCL_ID_BYTES] = {0};
  RtNccl *c = NULL;
  CHECK(!rt_nccl_unique_id(id, err, sizeof err) && memcmp(id, zero, sizeof id), "unique id: %s", err);
  CHECK(!rt_nccl_join(id, 1, 0, &c, err, sizeof err), "a one-rank communicator: %s", err);
  if (c) {
    test_allreduce(rt_cuda_ctx_api(ctx), rt_cuda_ctx_stream(ctx), c, IR_DT_F32);
    test_allreduce(rt_cuda_ctx_api(ctx), rt_cuda_ctx_stream(ctx), c, IR_DT_F16);
    CHECK(rt_nccl_allreduce(c, 0, 0, 1, IR_DT_I8, 0, NULL, err, sizeof err) == -1 && strstr(err, "i8"),
          "i8 refused: %s", err);
  }
  rt_nccl_free(c, 0);
  rt_cuda_ctx_free(ctx);
  return check_report();
}
