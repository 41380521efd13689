/* net_exec_gpu.c - the GPU backend of the API's executor (net_exec.h's
 * NetExecBackend) over rt_gpu: the first whole-step run (or timing)
 * captures the step as a CUDA graph and every run replays it; accumulation
 * is rt_gpu_accum's partial-step graphs; the input pipeline is
 * rt_gpu_input's pinned buffers and copy stream.  Every rt_gpu status
 * becomes a NetStatus through net_status_of_cuda.  CMake compiles this
 * file only when the GPU library is built (runtime/api/CMakeLists.txt), and
 * net_exec.c lists it in its backend table only then. */
#include <stdio.h>
#include <stdlib.h>

#include "net_exec.h"
#include "net_status.h"
#include "rt_gpu.h"
#include "rt_gpu_input.h"
#include "rt_gpu_jpeg.h"
#include "rt_jpeg.h"
#include "rt_nvml.h"
#include "rt_gpu_mail.h"

/* How often NVML is read for net_exec_watch, on a thread of its own. */
#define WATCH_EVERY_S 0.5

typedef struct Gpu {
  RtGpu *dev;
  int captured; /* the step's graph exists */
  RtGpuInput *feed;
  RtGpuAccum *acc;
  RtGpuMail *mail; /* net_exec_post/fetch, made on first use */
  RtGpuJpeg *jpeg; /* the GPU decoder, in place of feed */
  RtNvml *nvml;    /* net_exec_watch's, opened on first use */
  int nvml_tried;
  RtNccl *nccl; /* data parallel: the communicator the step's all-reduce uses (net_exec_dist_set) */
} Gpu;

static void gpu_free(void *self);

static int gpu_present(char *why, size_t len) {
  int count = 0;
  if (rt_cuda_device_count(&count, why, len)) return 0;
  if (count < 1) {
    snprintf(why, len, "the CUDA driver sees no GPU");
    return 0;
  }
  return 1;
}

static int gpu_count(void) {
  int count = 0;
  char why[256];
  return rt_cuda_device_count(&count, why, sizeof why) ? 0 : count;
}

static double gpu_total_memory(int ordinal) {
  RtCudaDeviceInfo info;
  char why[256];
  return rt_cuda_device_info(ordinal, &info, why, sizeof why) ? 0 : (double)info.total_mem;
}

static NetStatus gpu_new(const NetExecOpts *o, const IrGraph *g, int64_t batch, void **self, char *err, size_t len) {
  *self = NULL;
  Gpu *x = calloc(1, sizeof *x);
  if (!x) return net_status_errf(NET_ERR_NOMEM, err, len, "out of memory");
  RtGpuOpts go = {.device = o->ordinal,
                  .cache_dir = o->cache_dir,
                  .tune = o->tune,
                  .prebuilt = o->prebuilt,
                  .opts = o->opts,
                  .prebuilt_arch = o->arch,
                  .memory_limit = o->memory_limit};
  NetStatus s = net_status_of_cuda(rt_gpu_new(g, batch, &go, &x->dev, err, len));
  if (s) {
    gpu_free(x);
    return s;
  }
  *self = x;
  return NET_OK;
}

static void gpu_free(void *self) {
  Gpu *x = self;
  if (!x) return;
  rt_gpu_input_free(x->feed);
  rt_gpu_jpeg_free(x->jpeg);
  rt_gpu_mail_free(x->mail);
  rt_nvml_close(x->nvml);
  rt_gpu_accum_free(x->acc);
  rt_gpu_free(x->dev);
  rt_nccl_free(x->nccl, 0); /* after the executor whose graphs use it */
  free(x);
}

static int gpu_find(const void *self, const char *name) { return rt_gpu_find(((const Gpu *)self)->dev, name); }

static int64_t gpu_numel(const void *self, int v) { return rt_gpu_numel(((const Gpu *)self)->dev, v); }

static NetStatus gpu_write(void *self, int v, const void *host, char *err, size_t len) {
  return net_status_of_cuda(rt_gpu_write(((Gpu *)self)->dev, v, host, err, len));
}

static NetStatus gpu_read(void *self, int v, void *host, char *err, size_t len) {
  return net_status_of_cuda(rt_gpu_read(((Gpu *)self)->dev, v, host, err, len));
}

/* The step's CUDA graph, captured once. */
static NetStatus capture(Gpu *x, char *err, size_t len) {
  if (x->captured) return NET_OK;
  NetStatus s = net_status_of_cuda(rt_gpu_capture(x->dev, err, len));
  if (!s) x->captured = 1;
  return s;
}

static NetStatus gpu_run(void *self, char *err, size_t len) {
  Gpu *x = self;
  NetStatus s = capture(x, err, len);
  return s ? s : net_status_of_cuda(rt_gpu_run(x->dev, err, len));
}

/* Replays timed by events; rt_gpu_time runs once untimed itself, then times `steps` replays. */
static NetStatus gpu_time(void *self, int warmup, int steps, double *ms, char *err, size_t len) {
  Gpu *x = self;
  NetStatus s = capture(x, err, len);
  if (s) return s;
  if (warmup > 0 && (s = net_status_of_cuda(rt_gpu_time(x->dev, warmup, ms, err, len)))) return s;
  return net_status_of_cuda(rt_gpu_time(x->dev, steps, ms, err, len));
}

static size_t gpu_device_bytes(const void *self) { return rt_gpu_device_bytes(((const Gpu *)self)->dev); }

static void gpu_memory(const void *self, size_t part[3]) {
  rt_gpu_memory(((const Gpu *)self)->dev, &part[0], &part[1], &part[2]);
}

static int gpu_cache_hit(const void *self) { return rt_gpu_cache_hit(((const Gpu *)self)->dev); }

/* The sums are kept while k stays the same (reset for a new update), made again for another k. */
static NetStatus gpu_accum_set(void *self, const int *grad, int ngrad, int k, char *err, size_t len) {
  Gpu *x = self;
  if (x->acc && rt_gpu_accum_k(x->acc) != k) rt_gpu_accum_free(x->acc), x->acc = NULL;
  if (x->acc) return net_status_of_cuda(rt_gpu_accum_reset(x->acc, err, len));
  return net_status_of_cuda(rt_gpu_accum_new(x->dev, grad, ngrad, k, &x->acc, err, len));
}

static NetStatus gpu_accum_run(void *self, int k, int last, char *err, size_t len) {
  (void)k; /* the accumulator's own */
  return net_status_of_cuda(rt_gpu_accum_run(((Gpu *)self)->acc, last, err, len));
}

static NetStatus gpu_input_start(void *self, int v, int label_v, const RtRefInput *in, char *err, size_t len) {
  Gpu *x = self;
  NetStatus s = net_status_of_cuda(rt_gpu_input_new(x->dev, v, in, &x->feed, err, len));
  if (!s && label_v >= 0) s = net_status_of_cuda(rt_gpu_input_labels(x->feed, label_v, err, len));
  return s;
}

static void gpu_input_stop(void *self) {
  Gpu *x = self;
  rt_gpu_input_free(x->feed);
  rt_gpu_jpeg_free(x->jpeg);
  x->feed = NULL, x->jpeg = NULL;
}

static NetStatus gpu_input_buffer(void *self, uint8_t **host, char *err, size_t len) {
  return net_status_of_cuda(rt_gpu_input_buffer(((Gpu *)self)->feed, host, err, len));
}

static NetStatus gpu_input_send(void *self, const int64_t *labels, char *err, size_t len) {
  return net_status_of_cuda(rt_gpu_input_send(((Gpu *)self)->feed, labels, err, len));
}

static NetStatus gpu_input_feed(void *self, char *err, size_t len) {
  Gpu *x = self;
  return net_status_of_cuda(x->jpeg ? rt_gpu_jpeg_feed(x->jpeg, err, len) : rt_gpu_input_feed(x->feed, err, len));
}

/* A JPEG nvJPEG refused, decoded by libjpeg at its full size. */
static int decode_on_host(void *user, const uint8_t *data, size_t n, const char *name, uint8_t **rgb, int *w, int *h,
                          char *err, size_t errlen) {
  (void)user;
  RtImage im = {0};
  if (rt_jpeg_decode_mem(data, n, name ? name : "image", 0, &im, err, errlen)) return -1;
  *rgb = im.px, *w = im.w, *h = im.h;
  return 0;
}

static NetStatus gpu_jpeg_start(void *self, int v, int label_v, const RtRefInput *in, int backend, char *err,
                                size_t len) {
  Gpu *x = self;
  RtGpuJpegConfig c = {.v = v,
                       .label_v = label_v,
                       .in = *in,
                       .backend = (RtNvjpegBackend)backend,
                       .fallback = decode_on_host,
                       .prechecked = 1}; /* the loader read every header (RT_LOADER_DEFER) */
  return net_status_of_cuda(rt_gpu_jpeg_new(x->dev, &c, &x->jpeg, err, len));
}

static NetStatus gpu_jpeg_send(void *self, const RtLoaderItem *items, int n, const int64_t *labels, char *err,
                               size_t len) {
  Gpu *x = self;
  RtGpuJpegItem *it = malloc(sizeof *it * (size_t)(n > 0 ? n : 1));
  if (!it) return net_status_errf(NET_ERR_NOMEM, err, len, "out of memory for %d items", n);
  for (int i = 0; i < n; i++) {
    const RtLoaderItem *s = &items[i];
    it[i] = (RtGpuJpegItem){.rgb = s->kind == RT_ITEM_RGB,
                            .data = s->data,
                            .len = s->len,
                            .w = s->w,
                            .h = s->h,
                            .x0 = s->win.x0,
                            .y0 = s->win.y0,
                            .cw = s->win.cw,
                            .ch = s->win.ch,
                            .flip = s->win.flip,
                            .name = s->name,
                            .bx = s->bx,
                            .by = s->by,
                            .bw = s->bw,
                            .bh = s->bh};
  }
  NetStatus s = net_status_of_cuda(rt_gpu_jpeg_send(x->jpeg, it, n, labels, err, len));
  free(it);
  return s;
}

static void gpu_jpeg_info(const void *self, char *name, size_t cap, int64_t *host_decoded, int64_t *failed,
                          double rate[NET_DECODER_RATES]) {
  const Gpu *x = self;
  if (name && cap) snprintf(name, cap, "nvJPEG %s", rt_nvjpeg_backend_name(rt_gpu_jpeg_backend(x->jpeg)));
  rt_gpu_jpeg_failures(x->jpeg, host_decoded, failed, NULL, 0);
  rate[0] = rt_gpu_jpeg_rate(x->jpeg);
  rt_gpu_jpeg_rates(x->jpeg, &rate[1], &rate[2]);
  rate[3] = rt_gpu_jpeg_jpeg_rate(x->jpeg);
}

/* NVML on the executor's device (found by its PCI bus id); a machine
 * without NVML leaves every field unknown. */
static void gpu_watch(void *self, NetGpuWatch *w) {
  Gpu *x = self;
  if (!x->nvml_tried) {
    char bus[64], why[256];
    x->nvml_tried = 1;
    if (!rt_gpu_pci_bus_id(x->dev, bus, sizeof bus) && !rt_nvml_open(bus, &x->nvml, why, sizeof why))
      rt_nvml_watch(x->nvml, WATCH_EVERY_S); /* the loop reads it after every step: never wait for NVML there */
  }
  RtNvmlSample s;
  if (!x->nvml || rt_nvml_sample(x->nvml, &s)) return;
  w->power_w = s.power_w, w->sm_clock_mhz = s.sm_clock_mhz, w->temp_c = s.temp_c;
  if (s.have_ecc) w->ecc_corrected = s.ecc_corrected, w->ecc_uncorrected = s.ecc_uncorrected;
  w->pcie_tx_mb_s = s.pcie_tx_mb_s, w->pcie_rx_mb_s = s.pcie_rx_mb_s;
  w->nvlink_tx_mb_s = s.nvlink_tx_mb_s, w->nvlink_rx_mb_s = s.nvlink_rx_mb_s;
}

static void gpu_step_time(const void *self, double *seconds, int64_t *steps) {
  double ms = 0;
  rt_gpu_step_time(((const Gpu *)self)->dev, &ms, steps);
  *seconds = ms / 1000;
}

static void gpu_comm_time(const void *self, double *seconds, double *exposed_s, int64_t *steps) {
  double ms = 0, exposed = 0;
  rt_gpu_comm_time(((const Gpu *)self)->dev, &ms, &exposed, steps);
  *seconds = ms / 1000, *exposed_s = exposed / 1000;
}

/* The mail ring, made on the first post or fetch. */
static NetStatus mail(Gpu *x, char *err, size_t len) {
  return x->mail ? NET_OK : net_status_of_cuda(rt_gpu_mail_new(x->dev, &x->mail, err, len));
}

static NetStatus gpu_post(void *self, int v, const void *host, char *err, size_t len) {
  Gpu *x = self;
  NetStatus s = mail(x, err, len);
  return s ? s : net_status_of_cuda(rt_gpu_mail_post(x->mail, v, host, err, len));
}

static NetStatus gpu_fetch(void *self, int v, int64_t *ticket, char *err, size_t len) {
  Gpu *x = self;
  NetStatus s = mail(x, err, len);
  return s ? s : net_status_of_cuda(rt_gpu_mail_fetch(x->mail, v, ticket, err, len));
}

static NetStatus gpu_fetched(void *self, int64_t ticket, int wait, void *host, int *done, char *err, size_t len) {
  Gpu *x = self;
  NetStatus s = mail(x, err, len);
  return s ? s : net_status_of_cuda(rt_gpu_mail_read(x->mail, ticket, wait, host, done, err, len));
}

/* Joins the ranks' NCCL communicator and puts its all-reduce into the step. */
static NetStatus gpu_dist_set(void *self, const NetExecDist *d, const int *grad, int ngrad, char *err, size_t len) {
  if (!d) { /* alone again: no all-reduce in the step, the communicator aborted */
    Gpu *x = self;
    if (!x->nccl) return NET_OK;
    NetStatus s = net_status_of_cuda(rt_gpu_allreduce_set(x->dev, NULL, NULL, 0, 0, err, len));
    rt_nccl_free(x->nccl, 1);
    x->nccl = NULL, x->captured = 0;
    return s;
  }
  Gpu *x = self;
  if (x->nccl) return net_status_errf(NET_ERR_ARG, err, len, "data parallel: the executor is in a run already");
  if (!d->nccl_id) return net_status_errf(NET_ERR_ARG, err, len, "data parallel on the GPU: no NCCL id");
  NetStatus s = net_status_of_cuda(rt_gpu_nccl_join(x->dev, d->nccl_id, d->world, d->rank, &x->nccl, err, len));
  if (!s) s = net_status_of_cuda(rt_gpu_allreduce_set(x->dev, x->nccl, grad, ngrad, d->bucket_bytes, err, len));
  if (!s && d->sync_bn) s = net_status_of_cuda(rt_gpu_sync_bn_set(x->dev, 1, err, len));
  if (s) {
    if (x->nccl) rt_gpu_allreduce_set(x->dev, NULL, NULL, 0, 0, NULL, 0); /* nothing points at the communicator */
    rt_nccl_free(x->nccl, 1);
    x->nccl = NULL;
    return s;
  }
  x->captured = 0; /* the step is captured again, with the all-reduce */
  return NET_OK;
}

const NetExecBackend net_exec_gpu = {
    .name = "gpu",
    .present = gpu_present,
    .total_memory = gpu_total_memory,
    .new = gpu_new,
    .free = gpu_free,
    .find = gpu_find,
    .numel = gpu_numel,
    .write = gpu_write,
    .read = gpu_read,
    .run = gpu_run,
    .time = gpu_time,
    .device_bytes = gpu_device_bytes,
    .memory = gpu_memory,
    .cache_hit = gpu_cache_hit,
    .accum_set = gpu_accum_set,
    .accum_run = gpu_accum_run,
    .input_start = gpu_input_start,
    .input_stop = gpu_input_stop,
    .input_buffer = gpu_input_buffer,
    .input_send = gpu_input_send,
    .input_feed = gpu_input_feed,
    .jpeg_start = gpu_jpeg_start,
    .jpeg_send = gpu_jpeg_send,
    .jpeg_info = gpu_jpeg_info,
    .jpeg_depth = RT_GPU_JPEG_SLOTS,
    .watch = gpu_watch,
    .step_time = gpu_step_time,
    .post = gpu_post,
    .fetch = gpu_fetch,
    .fetched = gpu_fetched,
    .dist_set = gpu_dist_set,
    .comm_time = gpu_comm_time,
    .count = gpu_count,
};
