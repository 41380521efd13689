/* rt_gpu_mail.c - the pinned ring behind rt_gpu_mail.h.
 *
 * Slot k of the ring is RT_GPU_MAIL_BYTES of one pinned allocation and an
 * event recorded on the executor's stream after the copy that used it.
 * Operation number q (posts and fetches count together) takes slot
 * q % RT_GPU_MAIL_SLOTS once that slot's event is done; a fetch's ticket
 * is its q, whose slot still holds its bytes while q is one of the last
 * RT_GPU_MAIL_SLOTS operations. */
#include "rt_gpu_mail.h"

#include <stdlib.h>

#include "rt_gpu_impl.h"

struct RtGpuMail {
  RtGpu *x;
  const RtCudaApi *api;
  uint8_t *ring;
  CUevent ev[RT_GPU_MAIL_SLOTS];
  int val[RT_GPU_MAIL_SLOTS]; /* the value a fetch copied */
  int64_t next;               /* operations so far */
};

RtCudaStatus rt_gpu_mail_new(RtGpu *x, RtGpuMail **out, char *err, size_t errlen) {
  if (!x || !out) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_mail_new: NULL argument");
  *out = NULL;
  RtGpuMail *m = calloc(1, sizeof *m);
  if (!m) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu_mail_new: out of host memory");
  m->x = x, m->api = x->api;
  void *h = NULL;
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  if (!s) s = RT_CU(m->api, MemHostAlloc, (&h, RT_GPU_MAIL_SLOTS * RT_GPU_MAIL_BYTES, 0), "the mail ring", err, errlen);
  m->ring = h;
  for (int k = 0; k < RT_GPU_MAIL_SLOTS && !s; k++)
    s = RT_CU(m->api, EventCreate, (&m->ev[k], CU_EVENT_DISABLE_TIMING), "the mail ring's events", err, errlen);
  if (s) {
    rt_gpu_mail_free(m);
    return s;
  }
  *out = m;
  return RT_CUDA_OK;
}

void rt_gpu_mail_free(RtGpuMail *m) {
  if (!m) return;
  rt_cuda_ctx_bind(m->x->ctx, NULL, 0);
  m->api->StreamSynchronize(m->x->stream);
  for (int k = 0; k < RT_GPU_MAIL_SLOTS; k++)
    if (m->ev[k]) m->api->EventDestroy(m->ev[k]);
  if (m->ring) m->api->MemFreeHost(m->ring);
  free(m);
}

/* Checks v and takes the next slot once its last copy is done. */
static RtCudaStatus take(RtGpuMail *m, int v, const void *host, int *slot, size_t *bytes, char *err, size_t errlen) {
  RtGpu *x = m->x;
  if (!host || v < 0 || v >= x->g->nval || !x->addr[v])
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_mail: value %d has no device memory (or host is NULL)", v);
  *bytes = (size_t)x->numel[v] * ir_dtype_size(x->g->val[v].type.dtype);
  if (*bytes > RT_GPU_MAIL_BYTES)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_mail: value '%s' has %zu bytes (at most %d)",
                        x->g->val[v].name ? x->g->val[v].name : "?", *bytes, RT_GPU_MAIL_BYTES);
  int k = (int)(m->next % RT_GPU_MAIL_SLOTS);
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  if (!s) s = RT_CU(m->api, EventSynchronize, (m->ev[k]), "waiting for a mail slot", err, errlen);
  *slot = k;
  return s;
}

RtCudaStatus rt_gpu_mail_post(RtGpuMail *m, int v, const void *host, char *err, size_t errlen) {
  int k = 0;
  size_t bytes = 0;
  RtCudaStatus s = take(m, v, host, &k, &bytes, err, errlen);
  uint8_t *slot = m->ring + (size_t)k * RT_GPU_MAIL_BYTES;
  CUstream st = m->x->stream;
  if (!s) s = rt_gpu_pack(m->x, v, host, slot, err, errlen);
  if (!s) s = RT_CU(m->api, MemcpyHtoDAsync, (m->x->addr[v], slot, bytes, st), "posting a value", err, errlen);
  if (!s) rt_gpu_written(m->x, v);
  if (!s) s = RT_CU(m->api, EventRecord, (m->ev[k], st), "posting a value", err, errlen);
  if (!s) m->val[k] = -1, m->next++;
  return s;
}

RtCudaStatus rt_gpu_mail_fetch(RtGpuMail *m, int v, int64_t *ticket, char *err, size_t errlen) {
  int k = 0;
  size_t bytes = 0;
  RtCudaStatus s = take(m, v, ticket, &k, &bytes, err, errlen);
  uint8_t *slot = m->ring + (size_t)k * RT_GPU_MAIL_BYTES;
  CUstream st = m->x->stream;
  if (!s) s = RT_CU(m->api, MemcpyDtoHAsync, (slot, m->x->addr[v], bytes, st), "fetching a value", err, errlen);
  if (!s) s = RT_CU(m->api, EventRecord, (m->ev[k], st), "fetching a value", err, errlen);
  if (s) return s;
  m->val[k] = v, *ticket = m->next++;
  return RT_CUDA_OK;
}

RtCudaStatus rt_gpu_mail_read(RtGpuMail *m, int64_t ticket, int wait, void *host, int *done, char *err, size_t errlen) {
  int k = (int)(ticket % RT_GPU_MAIL_SLOTS);
  if (done) *done = 0;
  if (!host || ticket < 0 || ticket >= m->next || m->next - ticket > RT_GPU_MAIL_SLOTS || m->val[k] < 0)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_mail_read: ticket %lld is not a fetch of the last %d",
                        (long long)ticket, RT_GPU_MAIL_SLOTS);
  RtCudaStatus s = rt_cuda_ctx_bind(m->x->ctx, err, errlen);
  if (s) return s;
  if (wait) {
    if ((s = RT_CU(m->api, EventSynchronize, (m->ev[k]), "reading a fetched value", err, errlen))) return s;
  } else {
    CUresult r = m->api->EventQuery(m->ev[k]);
    if (r == CUDA_ERROR_NOT_READY) return RT_CUDA_OK;
    if ((s = RT_CU(m->api, EventQuery, (m->ev[k]), "reading a fetched value", err, errlen))) return s;
  }
  if ((s = rt_gpu_unpack(m->x, m->val[k], m->ring + (size_t)k * RT_GPU_MAIL_BYTES, host, err, errlen))) return s;
  if (done) *done = 1;
  return RT_CUDA_OK;
}
