/* rt_gpu_input.c - the GPU executor's input pipeline (rt_gpu_input.h gives
 * the contract and the order of copies, conversions and waits).
 *
 * Slot k (0 or 1) is a pinned host buffer, a device buffer and two events
 * (the buffers hold the batch's bytes and, 8-byte aligned after them, its
 * labels in the label value's dtype, copied in the same copy):
 * `copied` recorded on the copy stream after the buffer's copy, `consumed`
 * on the executor's stream after the conversion that read the device
 * buffer.  Slots are filled and fed in turn.  The kernel is compiled once
 * per pipeline as a program of its own (common.cu + input_u8.cu, shapes
 * baked in): it is outside the step, so the executor's program, its cache
 * and its captured graph are untouched, and it runs on the executor's
 * stream before the step's replay. */
#include "rt_gpu_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_gpu_impl.h"
#include "cg_templates.h"
#include "cg_nvrtc.h"
#include "rt_gpu_prog.h"

enum { SLOTS = 2, BLOCK = 256 };

struct RtGpuInput {
  RtGpu *x;
  const RtCudaApi *api;
  int v;
  RtRefInput in;
  size_t bytes;  /* of one batch of bytes */
  int64_t total; /* elements of the input value */
  unsigned grid;
  RtCudaModule *mod;
  CUfunction fn;
  CUstream copy;
  uint8_t *host[SLOTS];
  CUdeviceptr dev[SLOTS];
  CUevent copied[SLOTS], consumed[SLOTS];
  int label_v;                    /* the labels' value (rt_gpu_input_labels), or -1 */
  size_t label_bytes;             /* of one batch's labels in label_v's dtype, after the image bytes */
  int filling;                    /* slot handed out by rt_gpu_input_buffer and not sent, or -1 */
  int next_fill, next_feed, sent; /* sent: batches sent and not fed */
};

/* The kernel's norm argument, as input_u8.cu declares it. */
typedef struct Norm {
  float scale[3], shift[3];
} Norm;

RtCudaStatus rt_gpu_input_source(const RtRefInput *in, IrDtype dt, char **src, char *name, size_t namelen, char *err,
                                 size_t errlen) {
  *src = NULL;
  if (!rt_ref_input_ok(in) || !rt_gpu_storage_type(dt))
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_input: an input of %s, or dims that do not add up",
                        ir_dtype_name(dt));
  snprintf(name, namelen, "k_input_u8_%s_%s", ir_dtype_name(dt), in->dst_nhwc ? "nhwc" : "nchw");
  char v[7][32];
  const int64_t num[7] = {in->n, in->c, in->dc, in->h, in->w, in->src_nhwc != 0, in->dst_nhwc != 0};
  for (int i = 0; i < 7; i++) snprintf(v[i], sizeof v[i], "%lld", (long long)num[i]);
  const CgDefine d[] = {{"NETC_KERNEL_NAME", name}, {"NETC_TY", rt_gpu_storage_type(dt)},
                        {"NETC_N", v[0]},           {"NETC_C", v[1]},
                        {"NETC_DC", v[2]},          {"NETC_H", v[3]},
                        {"NETC_W", v[4]},           {"NETC_SRC_LAST", v[5]},
                        {"NETC_DST_LAST", v[6]}};
  return rt_gpu_prog_template("input_u8.cu", d, (int)(sizeof d / sizeof d[0]), src, err, errlen);
}

/* The kernel compiled for x's device and loaded. */
static RtCudaStatus make_kernel(RtGpuInput *p, IrDtype dt, char *err, size_t errlen) {
  char name[64], *src = NULL;
  RtCudaStatus s = rt_gpu_input_source(&p->in, dt, &src, name, sizeof name, err, errlen);
  if (!s)
    s = rt_gpu_prog_kernel(p->x->ctx, src, name, "input", p->x->cache_dir, "the input kernel", p->total, BLOCK, &p->mod,
                           &p->fn, &p->grid, err, errlen);
  free(src);
  return s;
}

RtCudaStatus rt_gpu_input_new(RtGpu *x, int v, const RtRefInput *in, RtGpuInput **out, char *err, size_t errlen) {
  if (!out) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_input_new: out is NULL");
  *out = NULL;
  if (!x || !in || v < 0 || v >= x->g->nval || !rt_ref_input_ok(in))
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_input_new: no executor, value or batch description");
  const IrValue *val = &x->g->val[v];
  int64_t total = in->n * in->dc * in->h * in->w;
  if (val->kind != IR_VAL_INPUT || !rt_gpu_storage_type(val->type.dtype) || x->numel[v] != total || !x->addr[v])
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen,
                        "rt_gpu_input_new: value '%s' is not a float input of %lld elements in the arena (%s, %lld)",
                        val->name ? val->name : "?", (long long)total, ir_dtype_name(val->type.dtype),
                        (long long)x->numel[v]);
  RtGpuInput *p = calloc(1, sizeof *p);
  if (!p) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu_input_new: out of host memory");
  p->x = x, p->api = x->api, p->v = v, p->in = *in, p->total = total, p->filling = -1, p->label_v = -1;
  p->bytes = (size_t)(in->n * in->c * in->h * in->w);
  /* room for the labels of any integer value of n elements, 8-byte aligned */
  size_t room = (p->bytes + 7) / 8 * 8 + (size_t)in->n * 8;
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  if (!s) s = make_kernel(p, val->type.dtype, err, errlen);
  if (!s) s = RT_CU(p->api, StreamCreate, (&p->copy, CU_STREAM_NON_BLOCKING), "the input copy stream", err, errlen);
  for (int k = 0; k < SLOTS && !s; k++) {
    void *h = NULL;
    CUdeviceptr d = 0;
    s = RT_CU(p->api, MemHostAlloc, (&h, room, 0), "a pinned input batch", err, errlen);
    p->host[k] = s ? NULL : h;
    if (!s) s = RT_CU(p->api, MemAlloc, (&d, room), "a device input batch", err, errlen);
    p->dev[k] = s ? 0 : d;
    if (s || (s = RT_CU(p->api, EventCreate, (&p->copied[k], CU_EVENT_DISABLE_TIMING), "input events", err, errlen)) ||
        (s = RT_CU(p->api, EventCreate, (&p->consumed[k], CU_EVENT_DISABLE_TIMING), "input events", err, errlen)))
      break;
  }
  if (s) {
    rt_gpu_input_free(p);
    return s;
  }
  *out = p;
  return RT_CUDA_OK;
}

void rt_gpu_input_free(RtGpuInput *p) {
  if (!p) return;
  const RtCudaApi *a = p->api;
  /* teardown errors have nobody to report to; both streams finish first,
   * since a copy or a conversion may still read the buffers */
  rt_cuda_ctx_bind(p->x->ctx, NULL, 0);
  if (p->copy) a->StreamSynchronize(p->copy);
  a->StreamSynchronize(p->x->stream);
  for (int k = 0; k < SLOTS; k++) {
    if (p->copied[k]) a->EventDestroy(p->copied[k]);
    if (p->consumed[k]) a->EventDestroy(p->consumed[k]);
    if (p->dev[k]) a->MemFree(p->dev[k]);
    if (p->host[k]) a->MemFreeHost(p->host[k]);
  }
  if (p->copy) a->StreamDestroy(p->copy);
  rt_cuda_module_free(p->mod);
  free(p);
}

/* Where a slot's labels start, after its image bytes. */
static size_t label_at(const RtGpuInput *p) { return (p->bytes + 7) / 8 * 8; }

RtCudaStatus rt_gpu_input_labels(RtGpuInput *p, int label_v, char *err, size_t errlen) {
  RtGpu *x = p->x;
  if (label_v < 0 || label_v >= x->g->nval || !x->addr[label_v] ||
      !rt_gpu_dtype_is_int(x->g->val[label_v].type.dtype) || x->numel[label_v] != p->in.n)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_input_labels: value %d is not an integer input of %lld",
                        label_v, (long long)p->in.n);
  p->label_v = label_v;
  p->label_bytes = (size_t)p->in.n * ir_dtype_size(x->g->val[label_v].type.dtype);
  return RT_CUDA_OK;
}

RtCudaStatus rt_gpu_input_buffer(RtGpuInput *p, uint8_t **host, char *err, size_t errlen) {
  if (!p || !host) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_input_buffer: NULL argument");
  if (p->filling < 0 && p->sent == SLOTS)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_input_buffer: both batches are sent and not fed");
  int k = p->filling >= 0 ? p->filling : p->next_fill;
  RtCudaStatus s = rt_cuda_ctx_bind(p->x->ctx, err, errlen);
  if (!s) s = RT_CU(p->api, EventSynchronize, (p->copied[k]), "waiting for a pinned input batch", err, errlen);
  if (s) return s;
  p->filling = k;
  *host = p->host[k];
  return RT_CUDA_OK;
}

RtCudaStatus rt_gpu_input_send(RtGpuInput *p, const int64_t *labels, char *err, size_t errlen) {
  if (!p || p->filling < 0)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_input_send: no buffer taken with rt_gpu_input_buffer");
  if ((p->label_v >= 0) != (labels != NULL))
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_input_send: labels %s",
                        labels ? "given to a pipeline without a label value" : "missing");
  int k = p->filling;
  size_t bytes = labels ? label_at(p) + p->label_bytes : p->bytes;
  RtCudaStatus s = labels ? rt_gpu_pack(p->x, p->label_v, labels, p->host[k] + label_at(p), err, errlen) : RT_CUDA_OK;
  if (!s) s = rt_cuda_ctx_bind(p->x->ctx, err, errlen);
  /* the device buffer's last conversion must be done before it is overwritten */
  if (!s) s = RT_CU(p->api, StreamWaitEvent, (p->copy, p->consumed[k], 0), "ordering an input copy", err, errlen);
  if (!s)
    s = RT_CU(p->api, MemcpyHtoDAsync, (p->dev[k], p->host[k], bytes, p->copy), "copying an input batch", err, errlen);
  if (!s) s = RT_CU(p->api, EventRecord, (p->copied[k], p->copy), "copying an input batch", err, errlen);
  if (s) return s;
  p->filling = -1, p->next_fill = (k + 1) % SLOTS, p->sent++;
  return RT_CUDA_OK;
}

RtCudaStatus rt_gpu_input_feed(RtGpuInput *p, char *err, size_t errlen) {
  if (!p || p->sent == 0) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_input_feed: no batch was sent");
  int k = p->next_feed;
  Norm norm;
  memcpy(norm.scale, p->in.scale, sizeof norm.scale);
  memcpy(norm.shift, p->in.shift, sizeof norm.shift);
  CUdeviceptr src = p->dev[k], dst = p->x->addr[p->v];
  void *args[] = {&src, &dst, &norm};
  CUstream st = p->x->stream;
  RtCudaStatus s = rt_cuda_ctx_bind(p->x->ctx, err, errlen);
  if (!s) s = RT_CU(p->api, StreamWaitEvent, (st, p->copied[k], 0), "waiting for an input copy", err, errlen);
  if (!s)
    s = RT_CU(p->api, LaunchKernel, (p->fn, p->grid, 1, 1, BLOCK, 1, 1, 0, st, args, NULL), "the input kernel", err,
              errlen);
  if (!s && p->label_v >= 0)
    s = RT_CU(p->api, MemcpyDtoDAsync, (p->x->addr[p->label_v], src + label_at(p), p->label_bytes, st),
              "the batch's labels", err, errlen);
  if (!s) s = RT_CU(p->api, EventRecord, (p->consumed[k], st), "the input kernel", err, errlen);
  if (s) return s;
  p->next_feed = (k + 1) % SLOTS, p->sent--;
  return RT_CUDA_OK;
}
