/* rt_gpu_jpeg.c - the GPU decoder's input pipeline (rt_gpu_jpeg.h gives
 * the contract and the order of decodes, conversions and waits).
 *
 * Slot k (0 or 1) holds one batch: its pictures in one device buffer
 * (grown when a batch needs more; picture i at an offset of its own, rows
 * of its pitch), a pinned and a device table of the batch's items (the
 * kernel's netc_jpeg_item, with the labels 8-byte aligned after them), a
 * pinned buffer for the pictures decoded on the host, and two events:
 * `copied` on the decode stream after the batch's decode and copies,
 * `consumed` on the executor's stream after the kernel that read them.
 * The host waits for `consumed` before it reuses a slot, so every buffer
 * of the slot is free then; it may also grow them.  The kernel is compiled
 * once per pipeline as a program of its own (common.cu + input_jpeg.cu),
 * outside the step, like rt_gpu_input's.
 *
 * The decode thread.  nvJPEG's batched hardware decode returns only when
 * the engines are done (longer than a step of ResNet-50 at batch 256), and
 * the hybrid backend's Huffman stages run on the calling thread, so the
 * decoding is a thread's of its own.  rt_gpu_jpeg_send copies the batch
 * -- its items, their bytes into the slot's pinned buffer, their names,
 * its labels into the table -- and queues the slot (QUEUED); the thread
 * takes slots in the order they were sent, decodes each on the decode
 * stream as above and marks it DONE with its status and counts;
 * rt_gpu_jpeg_feed waits for DONE before it orders the step after the
 * `copied` event.  A slot is the sender's while IDLE, the thread's while
 * QUEUED, the feeder's when DONE; `mu` guards the states and `cv` signals
 * each change, so nothing else of a slot is touched by two threads at
 * once.  The per-batch arrays (jdata and the rest) are the thread's. */
#include "rt_gpu_jpeg.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cg_nvrtc.h"
#include "cg_templates.h"
#include "rt_gpu_impl.h"
#include "rt_gpu_prog.h"

enum { SLOTS = RT_GPU_JPEG_SLOTS, BLOCK = 256, PITCH_ALIGN = 128, MSG = 512 };

/* The kernel's netc_jpeg_item. */
typedef struct Item {
  uint64_t src;
  int32_t w, h, pitch, flip;
  int32_t bx, by;
  double x0, y0, sx, sy;
} Item;

typedef struct Norm {
  float scale[3], shift[3];
} Norm;

typedef enum { IDLE = 0, QUEUED, DONE } SlotState;

typedef struct Slot {
  CUdeviceptr pics, table;
  size_t pics_cap;
  uint8_t *table_host; /* pinned: in.n items, then the labels */
  uint8_t *rgb;        /* pinned: the pictures the fallback decoded */
  size_t rgb_cap;
  uint8_t *bytes; /* pinned: the batch's JPEG files and RGB boxes, copied by send */
  size_t bytes_cap;
  char *names; /* the items' names, copied by send */
  size_t names_cap;
  RtGpuJpegItem *items; /* in.n: the batch's items, pointing into bytes and names */
  size_t *at;           /* in.n: each picture's offset in pics */
  CUevent copied, consumed;
  CUevent t0, t1; /* timing: around the batch's decode and copies */
  int n, nj;      /* items, and of them JPEGs given to nvJPEG (set by the decode thread) */
  SlotState state;
  /* the decode thread's results, read by the feeder */
  RtCudaStatus status;
  char err[MSG];
  int64_t host_decoded, failed;
  double host_s;
  char first_failure[MSG];
} Slot;

struct RtGpuJpeg {
  RtGpu *x;
  const RtCudaApi *api;
  RtGpuJpegConfig c;
  RtNvjpeg *dec;
  RtCudaModule *mod;
  CUfunction fn;
  unsigned grid;
  CUstream stream;   /* decodes and copies */
  CUdeviceptr black; /* one black pixel: the picture of an image nobody could decode */
  Slot slot[SLOTS];
  size_t table_bytes, label_at, label_bytes;
  int next_fill, next_feed, sent;
  /* per batch, reused: the JPEG items' arguments to rt_nvjpeg_decode */
  const uint8_t **jdata;
  size_t *jlen, *jpitch;
  uint8_t **jdst, *jfailed;
  int *jitem;
  int64_t host_decoded, failed; /* of the batches fed */
  int64_t decoded, jpegs;       /* images of batches whose decode time is counted, and of them nvJPEG's */
  int64_t host_jpegs;           /* nvJPEG's images of the batches fed */
  double gpu_ms_j, host_s_j;    /* the decode times of the batches that gave nvJPEG any JPEG */
  double gpu_ms, host_s;        /* their decode time on the stream; the decode thread's time on the batches fed */
  int64_t host_n;               /* images fed */
  char first_failure[MSG];
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int threaded, quit, next_job;
  int busy; /* the decode thread is in decode_slot */
};

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

RtCudaStatus rt_gpu_jpeg_source(const RtRefInput *in, IrDtype dt, char **src, char *name, size_t namelen, char *err,
                                size_t errlen) {
  *src = NULL;
  if (!rt_ref_input_ok(in) || in->c != 3 || !rt_gpu_storage_type(dt))
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_jpeg: an input of %s, or not 3 channels of pictures",
                        ir_dtype_name(dt));
  snprintf(name, namelen, "k_input_jpeg_%s_%s", ir_dtype_name(dt), in->dst_nhwc ? "nhwc" : "nchw");
  char v[4][32];
  const int64_t num[4] = {in->dc, in->h, in->w, in->dst_nhwc != 0};
  for (int i = 0; i < 4; i++) snprintf(v[i], sizeof v[i], "%lld", (long long)num[i]);
  const CgDefine d[] = {{"NETC_KERNEL_NAME", name}, {"NETC_TY", rt_gpu_storage_type(dt)},
                        {"NETC_DC", v[0]},          {"NETC_H", v[1]},
                        {"NETC_W", v[2]},           {"NETC_DST_LAST", v[3]}};
  return rt_gpu_prog_template("input_jpeg.cu", d, (int)(sizeof d / sizeof d[0]), src, err, errlen);
}

static RtCudaStatus make_kernel(RtGpuJpeg *p, IrDtype dt, char *err, size_t errlen) {
  char name[64], *src = NULL;
  RtCudaStatus s = rt_gpu_jpeg_source(&p->c.in, dt, &src, name, sizeof name, err, errlen);
  if (!s)
    s = rt_gpu_prog_kernel(p->x->ctx, src, name, "input", p->x->cache_dir, "the decoder's crop kernel",
                           p->c.in.n * p->c.in.h * p->c.in.w, BLOCK, &p->mod, &p->fn, &p->grid, err, errlen);
  free(src);
  return s;
}

/* The checks of rt_gpu_jpeg_new: an image input of the batch's size, labels of its length. */
static RtCudaStatus check_config(const RtGpu *x, const RtGpuJpegConfig *c, char *err, size_t errlen) {
  const RtRefInput *in = &c->in;
  if (c->v < 0 || c->v >= x->g->nval || !rt_ref_input_ok(in) || in->c != 3)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_jpeg_new: no image input, or not 3 channels");
  const IrValue *val = &x->g->val[c->v];
  if (val->kind != IR_VAL_INPUT || !rt_gpu_storage_type(val->type.dtype) || !x->addr[c->v] ||
      x->numel[c->v] != in->n * in->dc * in->h * in->w)
    return rt_cuda_fail(
        RT_CUDA_EARG, err, errlen, "rt_gpu_jpeg_new: value '%s' is not a float input of %lldx%lldx%lldx%lld",
        val->name ? val->name : "?", (long long)in->n, (long long)in->dc, (long long)in->h, (long long)in->w);
  if (c->label_v >= 0 && (c->label_v >= x->g->nval || !x->addr[c->label_v] ||
                          !rt_gpu_dtype_is_int(x->g->val[c->label_v].type.dtype) || x->numel[c->label_v] != in->n))
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_jpeg_new: value %d is not an integer input of %lld",
                        c->label_v, (long long)in->n);
  return RT_CUDA_OK;
}

static RtCudaStatus make_slots(RtGpuJpeg *p, char *err, size_t errlen) {
  const RtCudaApi *a = p->api;
  RtCudaStatus s = RT_CUDA_OK;
  size_t n = (size_t)p->c.in.n;
  for (int k = 0; k < SLOTS && !s; k++) {
    Slot *sl = &p->slot[k];
    sl->items = calloc(n, sizeof *sl->items), sl->at = calloc(n, sizeof *sl->at);
    if (!sl->items || !sl->at) s = rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu_jpeg_new: out of host memory");
    void *h = NULL;
    if (!s) s = RT_CU(a, MemHostAlloc, (&h, p->table_bytes, 0), "the decoder's item table", err, errlen);
    sl->table_host = h;
    if (!s) s = RT_CU(a, MemAlloc, (&sl->table, p->table_bytes), "the decoder's item table", err, errlen);
    if (!s) s = RT_CU(a, EventCreate, (&sl->copied, CU_EVENT_DISABLE_TIMING), "decoder events", err, errlen);
    if (!s) s = RT_CU(a, EventCreate, (&sl->consumed, CU_EVENT_DISABLE_TIMING), "decoder events", err, errlen);
    if (!s) s = RT_CU(a, EventCreate, (&sl->t0, CU_EVENT_DEFAULT), "decoder events", err, errlen);
    if (!s) s = RT_CU(a, EventCreate, (&sl->t1, CU_EVENT_DEFAULT), "decoder events", err, errlen);
  }
  return s;
}

static void *decode_main(void *arg);

RtCudaStatus rt_gpu_jpeg_new(RtGpu *x, const RtGpuJpegConfig *c, RtGpuJpeg **out, char *err, size_t errlen) {
  if (!out || !x || !c) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_jpeg_new: NULL argument");
  *out = NULL;
  RtCudaStatus s = check_config(x, c, err, errlen);
  if (s) return s;
  RtGpuJpeg *p = calloc(1, sizeof *p);
  int64_t n = c->in.n;
  if (p) {
    p->jdata = calloc((size_t)n, sizeof *p->jdata), p->jlen = calloc((size_t)n, sizeof *p->jlen);
    p->jpitch = calloc((size_t)n, sizeof *p->jpitch), p->jdst = calloc((size_t)n, sizeof *p->jdst);
    p->jfailed = calloc((size_t)n, 1), p->jitem = calloc((size_t)n, sizeof *p->jitem);
  }
  if (!p || !p->jdata || !p->jlen || !p->jpitch || !p->jdst || !p->jfailed || !p->jitem) {
    rt_gpu_jpeg_free(p);
    return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu_jpeg_new: out of host memory");
  }
  p->x = x, p->api = x->api, p->c = *c;
  p->label_at = (sizeof(Item) * (size_t)n + 7) / 8 * 8;
  p->label_bytes = c->label_v >= 0 ? (size_t)n * ir_dtype_size(x->g->val[c->label_v].type.dtype) : 0;
  p->table_bytes = p->label_at + p->label_bytes;
  s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  if (!s) s = make_kernel(p, x->g->val[c->v].type.dtype, err, errlen);
  if (!s) s = rt_nvjpeg_new((int)n, c->backend, &p->dec, err, errlen);
  if (!s) rt_nvjpeg_set_prechecked(p->dec, c->prechecked);
  /* at the greatest priority, so that its own kernels take the SMs as the step's blocks finish; nvJPEG's
   * hardware decode still waits for the step (it waits on work of its own: test_gpu_nvjpeg, docs/PERF.md) */
  if (!s) s = rt_cuda_stream_first(p->api, &p->stream, NULL, err, errlen);
  if (!s) s = RT_CU(p->api, MemAlloc, (&p->black, 4), "a black pixel", err, errlen);
  if (!s) s = RT_CU(p->api, MemsetD8Async, (p->black, 0, 4, p->stream), "a black pixel", err, errlen);
  if (!s) s = make_slots(p, err, errlen);
  if (!s) {
    pthread_mutex_init(&p->mu, NULL), pthread_cond_init(&p->cv, NULL);
    p->threaded = pthread_create(&p->thread, NULL, decode_main, p) == 0 ? 1 : -1;
    if (p->threaded < 0)
      s = rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu_jpeg_new: cannot start the decode thread");
  }
  if (s) {
    rt_gpu_jpeg_free(p);
    return s;
  }
  *out = p;
  return RT_CUDA_OK;
}

void rt_gpu_jpeg_free(RtGpuJpeg *p) {
  if (!p) return;
  if (p->threaded) {
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->threaded > 0) pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cv), pthread_mutex_destroy(&p->mu);
  }
  const RtCudaApi *a = p->api;
  if (a) {
    rt_cuda_ctx_bind(p->x->ctx, NULL, 0);
    if (p->stream) a->StreamSynchronize(p->stream);
    a->StreamSynchronize(p->x->stream);
    for (int k = 0; k < SLOTS; k++) {
      Slot *sl = &p->slot[k];
      if (sl->copied) a->EventDestroy(sl->copied);
      if (sl->consumed) a->EventDestroy(sl->consumed);
      if (sl->t0) a->EventDestroy(sl->t0);
      if (sl->t1) a->EventDestroy(sl->t1);
      if (sl->pics) a->MemFree(sl->pics);
      if (sl->table) a->MemFree(sl->table);
      if (sl->table_host) a->MemFreeHost(sl->table_host);
      if (sl->rgb) a->MemFreeHost(sl->rgb);
      if (sl->bytes) a->MemFreeHost(sl->bytes);
    }
    if (p->black) a->MemFree(p->black);
    rt_nvjpeg_free(p->dec);
    if (p->stream) a->StreamDestroy(p->stream);
    rt_cuda_module_free(p->mod);
  }
  for (int k = 0; k < SLOTS; k++) free(p->slot[k].items), free(p->slot[k].at), free(p->slot[k].names);
  free(p->jdata), free(p->jlen), free(p->jpitch), free(p->jdst), free(p->jfailed), free(p->jitem);
  free(p);
}

RtNvjpegBackend rt_gpu_jpeg_backend(const RtGpuJpeg *p) { return rt_nvjpeg_backend(p->dec); }

void rt_gpu_jpeg_failures(const RtGpuJpeg *p, int64_t *host_decoded, int64_t *failed, char *msg, size_t cap) {
  if (host_decoded) *host_decoded = p->host_decoded;
  if (failed) *failed = p->failed;
  if (msg && cap) snprintf(msg, cap, "%s", p->first_failure);
}

void rt_gpu_jpeg_rates(const RtGpuJpeg *p, double *gpu, double *host) {
  *gpu = p->gpu_ms > 0 ? (double)p->decoded / (p->gpu_ms / 1000) : 0;
  *host = p->host_s > 0 ? (double)p->host_n / p->host_s : 0;
}

double rt_gpu_jpeg_jpeg_rate(const RtGpuJpeg *p) {
  double gpu = p->gpu_ms_j > 0 ? (double)p->jpegs / (p->gpu_ms_j / 1000) : 0;
  double host = p->host_s_j > 0 ? (double)p->host_jpegs / p->host_s_j : 0;
  return gpu > 0 && host > 0 ? (gpu < host ? gpu : host) : 0;
}

double rt_gpu_jpeg_rate(const RtGpuJpeg *p) {
  double gpu, host;
  rt_gpu_jpeg_rates(p, &gpu, &host);
  return gpu > 0 && host > 0 ? (gpu < host ? gpu : host) : 0;
}

static size_t pitch_of(int w) { return ((size_t)w * 3 + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN; }

/* Grows *buf, pinned host memory of *cap bytes, to hold `need`; its old
 * contents are dropped (the slot is idle). */
static RtCudaStatus grow_pinned(const RtCudaApi *a, uint8_t **buf, size_t *cap, size_t need, const char *what,
                                char *err, size_t errlen) {
  if (need <= *cap) return RT_CUDA_OK;
  if (*buf) a->MemFreeHost(*buf), *buf = NULL, *cap = 0;
  size_t want = need + need / 4;
  void *h = NULL;
  RtCudaStatus s = RT_CU(a, MemHostAlloc, (&h, want, 0), what, err, errlen);
  if (!s) *buf = h, *cap = want;
  return s;
}

/* Grows a slot's device pictures to `need` bytes; the slot is idle (its
 * `consumed` was waited for). */
static RtCudaStatus grow_pics(RtGpuJpeg *p, Slot *sl, size_t need, char *err, size_t errlen) {
  if (need <= sl->pics_cap) return RT_CUDA_OK;
  if (sl->pics) p->api->MemFree(sl->pics), sl->pics = 0, sl->pics_cap = 0;
  size_t cap = need + need / 4;
  RtCudaStatus s = RT_CU(p->api, MemAlloc, (&sl->pics, cap), "the decoded pictures of a batch", err, errlen);
  if (!s) sl->pics_cap = cap;
  return s;
}

static void note_failure(Slot *sl, const char *msg) {
  sl->failed++;
  if (!sl->first_failure[0]) snprintf(sl->first_failure, sizeof sl->first_failure, "%s", msg);
}

/* Item i's entry: its picture of w x h at src (pitch bytes a row; from
 * (bx, by) on when it holds a part) and its window. */
static void set_item(Item *t, const RtGpuJpegItem *it, uint64_t src, int w, int h, size_t pitch, int bx, int by, int H,
                     int W) {
  double fx = it->w > 0 ? (double)w / it->w : 1, fy = it->h > 0 ? (double)h / it->h : 1;
  *t = (Item){.src = src, .w = w, .h = h, .pitch = (int32_t)pitch, .flip = it->flip != 0, .bx = bx, .by = by};
  t->x0 = it->x0 * fx, t->y0 = it->y0 * fy;
  t->sx = it->cw * fx / W, t->sy = it->ch * fy / H;
}

/* The host-side pictures of the batch to their device places: RGB items
 * straight from the slot's pinned bytes, and the JPEGs nvJPEG refused,
 * decoded by the fallback, through the slot's pinned rgb buffer.  On the
 * decode thread. */
static RtCudaStatus host_pictures(RtGpuJpeg *p, Slot *sl, Item *table, char *err, size_t errlen) {
  int H = (int)p->c.in.h, W = (int)p->c.in.w, n = sl->n;
  const RtGpuJpegItem *items = sl->items;
  const size_t *at = sl->at;
  uint8_t **dec = calloc((size_t)n, sizeof *dec);
  int *dw = calloc((size_t)n, sizeof *dw), *dh = calloc((size_t)n, sizeof *dh);
  RtCudaStatus s = dec && dw && dh ? RT_CUDA_OK : rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "out of host memory");
  size_t need = 0;
  for (int i = 0; i < n && !s; i++) {
    const RtGpuJpegItem *it = &items[i];
    if (it->rgb) {
      s = RT_CU(p->api, MemcpyHtoDAsync, (sl->pics + at[i], it->data, (size_t)it->bw * it->bh * 3, p->stream),
                "copying a picture decoded on the host", err, errlen);
      /* a part of the picture: the window stays in the picture's pixels */
      set_item(&table[i], it, sl->pics + at[i], it->w, it->h, (size_t)it->bw * 3, it->bx, it->by, H, W);
      continue;
    }
    if (!p->jfailed[i]) continue;
    char msg[MSG] = "";
    if (!p->c.fallback ||
        p->c.fallback(p->c.user, it->data, it->len, it->name, &dec[i], &dw[i], &dh[i], msg, sizeof msg) != 0 ||
        (size_t)dw[i] * dh[i] * 3 > (size_t)it->h * pitch_of(it->w)) {
      if (!msg[0]) snprintf(msg, sizeof msg, "%s: neither nvJPEG nor the CPU decoder reads it", it->name);
      note_failure(sl, msg);
      free(dec[i]), dec[i] = NULL;
      set_item(&table[i], it, p->black, 1, 1, 3, 0, 0, H, W);
      continue;
    }
    sl->host_decoded++;
    need += (size_t)dw[i] * dh[i] * 3;
  }
  if (!s && need)
    s = grow_pinned(p->api, &sl->rgb, &sl->rgb_cap, need, "pinned pictures decoded on the host", err, errlen);
  size_t off = 0;
  for (int i = 0; i < n && !s; i++) {
    if (!dec[i]) continue;
    size_t bytes = (size_t)dw[i] * dh[i] * 3;
    memcpy(sl->rgb + off, dec[i], bytes);
    s = RT_CU(p->api, MemcpyHtoDAsync, (sl->pics + at[i], sl->rgb + off, bytes, p->stream),
              "copying a picture decoded on the host", err, errlen);
    set_item(&table[i], &items[i], sl->pics + at[i], dw[i], dh[i], (size_t)dw[i] * 3, 0, 0, H, W);
    off += bytes;
  }
  for (int i = 0; dec && i < n; i++) free(dec[i]);
  free(dec), free(dw), free(dh);
  return s;
}

/* The decode thread's work on a queued slot: its JPEGs through nvJPEG,
 * the rest through host_pictures, the item table after them, and the
 * events; the status and message into the slot. */
static void decode_slot(RtGpuJpeg *p, Slot *sl) {
  const RtCudaApi *a = p->api;
  char *err = sl->err;
  size_t errlen = sizeof sl->err;
  int H = (int)p->c.in.h, W = (int)p->c.in.w, n = sl->n;
  double h0 = seconds();
  Item *table = (Item *)sl->table_host;
  RtCudaStatus s = rt_cuda_ctx_bind(p->x->ctx, err, errlen);
  if (!s) s = RT_CU(a, EventRecord, (sl->t0, p->stream), "timing a decode", err, errlen);
  int nj = 0;
  for (int i = 0; i < n && !s; i++) {
    const RtGpuJpegItem *it = &sl->items[i];
    p->jfailed[i] = 0;
    if (it->rgb) continue;
    p->jitem[nj] = i, p->jdata[nj] = it->data, p->jlen[nj] = it->len;
    p->jdst[nj] = (uint8_t *)(uintptr_t)(sl->pics + sl->at[i]), p->jpitch[nj] = pitch_of(it->w);
    set_item(&table[i], it, sl->pics + sl->at[i], it->w, it->h, pitch_of(it->w), 0, 0, H, W);
    nj++;
  }
  sl->nj = nj;
  if (!s && nj) {
    uint8_t *flags = calloc((size_t)nj, 1);
    if (!flags) s = rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "the decode thread: out of host memory");
    if (!s) s = rt_nvjpeg_decode(p->dec, nj, p->jdata, p->jlen, p->jdst, p->jpitch, p->stream, flags, err, errlen);
    for (int j = 0; j < nj && !s; j++) p->jfailed[p->jitem[j]] = flags[j];
    free(flags);
  }
  if (!s) s = host_pictures(p, sl, table, err, errlen);
  if (!s)
    s = RT_CU(a, MemcpyHtoDAsync, (sl->table, sl->table_host, p->table_bytes, p->stream), "the decoder's item table",
              err, errlen);
  if (!s) s = RT_CU(a, EventRecord, (sl->t1, p->stream), "timing a decode", err, errlen);
  if (!s) s = RT_CU(a, EventRecord, (sl->copied, p->stream), "the decoder's item table", err, errlen);
  sl->status = s;
  sl->host_s = seconds() - h0;
}

static void *decode_main(void *arg) {
  RtGpuJpeg *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    Slot *sl = &p->slot[p->next_job];
    while (!p->quit && sl->state != QUEUED) pthread_cond_wait(&p->cv, &p->mu);
    if (p->quit) break;
    p->busy = 1;
    pthread_mutex_unlock(&p->mu);
    decode_slot(p, sl);
    pthread_mutex_lock(&p->mu);
    p->busy = 0;
    sl->state = DONE;
    p->next_job = (p->next_job + 1) % SLOTS;
    pthread_cond_broadcast(&p->cv);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* Waits until the decode thread has done every queued slot.  A slot's
 * buffers grow by freeing the old ones, and cuMemFree and cuMemFreeHost
 * wait for the whole device: beside an nvJPEG decode in flight (which waits
 * for the device too) they hung the run (seen on an H100 with two batches
 * sent ahead), so they run only while no decode does. */
static void quiesce(RtGpuJpeg *p) {
  pthread_mutex_lock(&p->mu);
  for (;;) {
    int queued = p->busy;
    for (int k = 0; k < SLOTS; k++) queued |= p->slot[k].state == QUEUED;
    if (!queued || p->threaded <= 0) break;
    pthread_cond_wait(&p->cv, &p->mu);
  }
  pthread_mutex_unlock(&p->mu);
}

/* Checks the items and copies them into slot sl: each picture's place in
 * pics (at the size its header gives), the bytes into the pinned buffer,
 * the names beside them. */
static RtCudaStatus copy_batch(RtGpuJpeg *p, Slot *sl, const RtGpuJpegItem *items, int n, char *err, size_t errlen) {
  size_t total = 0, bytes = 0, names = 0;
  for (int i = 0; i < n; i++) {
    const RtGpuJpegItem *it = &items[i];
    int box_ok = !it->rgb || (it->bw > 0 && it->bh > 0 && it->bx >= 0 && it->by >= 0 && it->bx + it->bw <= it->w &&
                              it->by + it->bh <= it->h && it->len >= (size_t)it->bw * it->bh * 3);
    if (it->w < 1 || it->h < 1 || !it->data || !box_ok)
      return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_jpeg_send: item %d (%s) has no picture of %dx%d%s", i,
                          it->name ? it->name : "?", it->w, it->h, box_ok ? "" : " (or its part is not in it)");
    sl->at[i] = total, total += (size_t)it->h * pitch_of(it->w);
    bytes += it->rgb ? (size_t)it->bw * it->bh * 3 : it->len;
    names += strlen(it->name ? it->name : "?") + 1;
  }
  if ((total ? total : 1) > sl->pics_cap || (bytes ? bytes : 1) > sl->bytes_cap) quiesce(p);
  RtCudaStatus s = grow_pics(p, sl, total ? total : 1, err, errlen);
  if (!s) s = grow_pinned(p->api, &sl->bytes, &sl->bytes_cap, bytes ? bytes : 1, "pinned JPEG files", err, errlen);
  if (!s && names > sl->names_cap) {
    free(sl->names), sl->names_cap = 0;
    if (!(sl->names = malloc(names))) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "out of host memory");
    sl->names_cap = names;
  }
  size_t off = 0, noff = 0;
  for (int i = 0; i < n && !s; i++) {
    const RtGpuJpegItem *it = &items[i];
    size_t len = it->rgb ? (size_t)it->bw * it->bh * 3 : it->len, nlen = strlen(it->name ? it->name : "?") + 1;
    memcpy(sl->bytes + off, it->data, len);
    memcpy(sl->names + noff, it->name ? it->name : "?", nlen);
    sl->items[i] = *it;
    sl->items[i].data = sl->bytes + off, sl->items[i].len = len, sl->items[i].name = sl->names + noff;
    off += len, noff += nlen;
  }
  return s;
}

RtCudaStatus rt_gpu_jpeg_send(RtGpuJpeg *p, const RtGpuJpegItem *items, int n, const int64_t *labels, char *err,
                              size_t errlen) {
  if (!p || (!items && n) || n < 0 || n > p->c.in.n)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_jpeg_send: %d items for a batch of %lld", n,
                        p ? (long long)p->c.in.n : 0LL);
  if ((p->c.label_v >= 0) != (labels != NULL))
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_jpeg_send: labels %s",
                        labels ? "given to a pipeline without a label value" : "missing");
  if (p->sent == SLOTS)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_jpeg_send: all %d batches are sent and not fed", SLOTS);
  int k = p->next_fill;
  Slot *sl = &p->slot[k]; /* IDLE: its last batch was fed */
  const RtCudaApi *a = p->api;
  RtCudaStatus s = rt_cuda_ctx_bind(p->x->ctx, err, errlen);
  if (!s) s = RT_CU(a, EventSynchronize, (sl->consumed), "waiting for a free decoder slot", err, errlen);
  float ms = 0;
  if (!s && sl->n && a->EventElapsedTime(&ms, sl->t0, sl->t1) == CUDA_SUCCESS)
    p->gpu_ms += ms, p->decoded += sl->n, p->jpegs += sl->nj, p->gpu_ms_j += sl->nj ? ms : 0;
  sl->n = sl->nj = 0;
  if (!s) s = copy_batch(p, sl, items, n, err, errlen);
  if (!s && labels) s = rt_gpu_pack(p->x, p->c.label_v, labels, sl->table_host + p->label_at, err, errlen);
  if (s) return s;
  sl->n = n, sl->status = RT_CUDA_OK, sl->err[0] = 0;
  sl->host_decoded = sl->failed = 0, sl->host_s = 0, sl->first_failure[0] = 0;
  pthread_mutex_lock(&p->mu);
  sl->state = QUEUED;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  p->next_fill = (k + 1) % SLOTS, p->sent++;
  return RT_CUDA_OK;
}

/* Waits for the decode thread to finish slot sl, then takes its counts. */
static RtCudaStatus take_done(RtGpuJpeg *p, Slot *sl, char *err, size_t errlen) {
  pthread_mutex_lock(&p->mu);
  while (sl->state != DONE) pthread_cond_wait(&p->cv, &p->mu);
  sl->state = IDLE;
  pthread_mutex_unlock(&p->mu);
  p->host_decoded += sl->host_decoded, p->failed += sl->failed;
  p->host_s += sl->host_s, p->host_n += sl->n, p->host_jpegs += sl->nj, p->host_s_j += sl->nj ? sl->host_s : 0;
  if (!p->first_failure[0] && sl->first_failure[0])
    snprintf(p->first_failure, sizeof p->first_failure, "%s", sl->first_failure);
  if (sl->status) {
    sl->n = sl->nj = 0; /* no timing of a batch that failed */
    return rt_cuda_fail(sl->status, err, errlen, "%s", sl->err);
  }
  return RT_CUDA_OK;
}

RtCudaStatus rt_gpu_jpeg_feed(RtGpuJpeg *p, char *err, size_t errlen) {
  if (!p || p->sent == 0) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_jpeg_feed: no batch was sent");
  int k = p->next_feed;
  Slot *sl = &p->slot[k];
  const RtCudaApi *a = p->api;
  p->next_feed = (k + 1) % SLOTS, p->sent--;
  RtCudaStatus s = take_done(p, sl, err, errlen);
  if (s) return s;
  Norm norm;
  memcpy(norm.scale, p->c.in.scale, sizeof norm.scale);
  memcpy(norm.shift, p->c.in.shift, sizeof norm.shift);
  CUdeviceptr table = sl->table, dst = p->x->addr[p->c.v];
  int n = sl->n;
  void *args[] = {&table, &dst, &norm, &n};
  CUstream st = p->x->stream;
  const RtRefInput *in = &p->c.in;
  size_t per = (size_t)(in->dc * in->h * in->w) * ir_dtype_size(p->x->g->val[p->c.v].type.dtype);
  s = rt_cuda_ctx_bind(p->x->ctx, err, errlen);
  if (!s) s = RT_CU(a, StreamWaitEvent, (st, sl->copied, 0), "waiting for a decoded batch", err, errlen);
  if (!s && n)
    s = RT_CU(a, LaunchKernel, (p->fn, p->grid, 1, 1, BLOCK, 1, 1, 0, st, args, NULL), "the decoder's crop kernel", err,
              errlen);
  if (!s && n < in->n)
    s = RT_CU(a, MemsetD8Async, (dst + per * (size_t)n, 0, per * (size_t)(in->n - n), st), "a short batch's rest", err,
              errlen);
  if (!s && p->c.label_v >= 0)
    s = RT_CU(a, MemcpyDtoDAsync, (p->x->addr[p->c.label_v], table + p->label_at, p->label_bytes, st),
              "the batch's labels", err, errlen);
  if (!s) s = RT_CU(a, EventRecord, (sl->consumed, st), "the decoder's crop kernel", err, errlen);
  return s;
}
