/* net_exec.c - the API's executor interface over rt_cpu and rt_gpu (see
 * net_exec.h).  Built without the CUDA toolkit (NET_HAVE_GPU undefined),
 * only the CPU side exists and asking for the GPU says so. */
#include "net_exec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_cpu.h"
#ifdef NET_HAVE_GPU
#include "rt_gpu.h"
#include "rt_gpu_input.h"
#include "rt_err.h"
#endif

/* The CPU side of the input pipeline: two byte buffers taken in turn. */
typedef struct CpuFeed {
  uint8_t *host; /* 2 * bytes */
  size_t bytes;
  int filling, next_fill, next_feed, sent;
} CpuFeed;

struct NetExec {
  int gpu;
  RtCpu *cpu;
#ifdef NET_HAVE_GPU
  RtGpu *dev;
  int captured;
  RtGpuInput *gfeed;
  RtGpuAccum *gacc;
#endif
  const IrGraph *g;
  int accum, accum_i; /* accumulation: micro-steps per update (1: off), and those run of this update */
  RtCpuAccum *cacc;
  int feeding, feed_v; /* a pipeline feeds input feed_v */
  RtRefInput feed_in;
  CpuFeed cfeed;
};

static NetStatus fail(NetStatus s, char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static NetStatus fail(NetStatus s, char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rt_verrf(err, len, fmt, ap);
  va_end(ap);
  return s;
}

NetStatus net_exec_cuda_status(int s) {
#ifdef NET_HAVE_GPU
  switch ((RtCudaStatus)s) {
  case RT_CUDA_OK: return NET_OK;
  case RT_CUDA_ENODRIVER:
  case RT_CUDA_ENODEVICE: return NET_ERR_NO_GPU;
  case RT_CUDA_EARG: return NET_ERR_ARG;
  case RT_CUDA_ENOMEM: return NET_ERR_NOMEM;
  default: return NET_ERR_DEVICE;
  }
#else
  return s ? NET_ERR_NO_GPU : NET_OK;
#endif
}

int net_exec_gpu_present(char *why, size_t len) {
#ifdef NET_HAVE_GPU
  int count = 0;
  if (rt_cuda_device_count(&count, why, len)) return 0;
  if (count < 1) {
    snprintf(why, len, "the CUDA driver sees no GPU");
    return 0;
  }
  return 1;
#else
  snprintf(why, len, "this netrt was built without the GPU back end (no CUDA toolkit at build time)");
  return 0;
#endif
}

NetStatus net_exec_new(int gpu, int ordinal, const char *cache_dir, int tune, const RtModelProgram *prebuilt,
                       const char *arch, const IrGraph *g, int64_t batch, NetExec **out,
                       char *err, size_t len) {
  *out = NULL;
  NetExec *x = calloc(1, sizeof *x);
  if (!x) return fail(NET_ERR_NOMEM, err, len, "out of memory");
  x->gpu = gpu;
  x->g = g, x->accum = 1;
  NetStatus s = NET_OK;
  if (!gpu) {
    if (rt_cpu_new(g, batch, &x->cpu, err, len)) s = NET_ERR_MODEL;
  } else {
#ifdef NET_HAVE_GPU
    RtGpuOpts o = {.device = ordinal, .cache_dir = cache_dir, .tune = tune, .prebuilt = prebuilt, .prebuilt_arch = arch};
    s = net_exec_cuda_status(rt_gpu_new(g, batch, &o, &x->dev, err, len));
#else
    (void)ordinal, (void)cache_dir, (void)tune, (void)prebuilt, (void)arch;
    char why[256];
    net_exec_gpu_present(why, sizeof why);
    s = fail(NET_ERR_NO_GPU, err, len, "no GPU: %s", why);
#endif
  }
  if (s) {
    net_exec_free(x);
    return s;
  }
  *out = x;
  return NET_OK;
}

void net_exec_free(NetExec *x) {
  if (!x) return;
  net_exec_input_stop(x);
  rt_cpu_accum_free(x->cacc);
  rt_cpu_free(x->cpu);
#ifdef NET_HAVE_GPU
  rt_gpu_accum_free(x->gacc);
  rt_gpu_free(x->dev);
#endif
  free(x);
}

int net_exec_find(const NetExec *x, const char *name) {
#ifdef NET_HAVE_GPU
  if (x->gpu) return rt_gpu_find(x->dev, name);
#endif
  return rt_cpu_find(x->cpu, name);
}

int64_t net_exec_numel(const NetExec *x, int v) {
#ifdef NET_HAVE_GPU
  if (x->gpu) return rt_gpu_numel(x->dev, v);
#endif
  return rt_cpu_numel(x->cpu, v);
}

static size_t elem_bytes(const NetExec *x, int v) {
#ifdef NET_HAVE_GPU
  (void)x, (void)v;
  if (x->gpu) return 0; /* unused on the GPU */
#endif
  return rt_cpu_is_int(x->cpu, v) ? sizeof(int64_t) : sizeof(float);
}

NetStatus net_exec_write(NetExec *x, int v, const void *host, char *err, size_t len) {
  if (x->feeding && v == x->feed_v) return NET_OK; /* the step reads the pipeline's batch */
#ifdef NET_HAVE_GPU
  if (x->gpu) return net_exec_cuda_status(rt_gpu_write(x->dev, v, host, err, len));
#endif
  (void)err, (void)len;
  memcpy(rt_cpu_data(x->cpu, v), host, elem_bytes(x, v) * (size_t)rt_cpu_numel(x->cpu, v));
  return NET_OK;
}

NetStatus net_exec_read(NetExec *x, int v, void *host, char *err, size_t len) {
#ifdef NET_HAVE_GPU
  if (x->gpu) return net_exec_cuda_status(rt_gpu_read(x->dev, v, host, err, len));
#endif
  (void)err, (void)len;
  memcpy(host, rt_cpu_data(x->cpu, v), elem_bytes(x, v) * (size_t)rt_cpu_numel(x->cpu, v));
  return NET_OK;
}

static NetStatus run_accum(NetExec *x, char *err, size_t len);

NetStatus net_exec_run(NetExec *x, char *err, size_t len) {
  if (x->accum > 1) return run_accum(x, err, len);
#ifdef NET_HAVE_GPU
  if (x->gpu) {
    if (!x->captured) {
      NetStatus s = net_exec_cuda_status(rt_gpu_capture(x->dev, err, len));
      if (s) return s;
      x->captured = 1;
    }
    return net_exec_cuda_status(rt_gpu_run(x->dev, err, len));
  }
#endif
  return rt_cpu_run(x->cpu, err, len) ? NET_ERR_RUN : NET_OK;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

NetStatus net_exec_time(NetExec *x, int warmup, int steps, double *ms, char *err, size_t len) {
  NetStatus s = NET_OK;
#ifdef NET_HAVE_GPU
  if (x->gpu) {
    if (!x->captured) {
      if ((s = net_exec_cuda_status(rt_gpu_capture(x->dev, err, len)))) return s;
      x->captured = 1;
    }
    /* rt_gpu_time runs once untimed itself, then times `steps` replays */
    if (warmup > 0 && (s = net_exec_cuda_status(rt_gpu_time(x->dev, warmup, ms, err, len)))) return s;
    return net_exec_cuda_status(rt_gpu_time(x->dev, steps, ms, err, len));
  }
#endif
  for (int i = 0; i < warmup && !s; i++) s = net_exec_run(x, err, len);
  double t0 = now_s();
  for (int i = 0; i < steps && !s; i++) s = net_exec_run(x, err, len);
  *ms = (now_s() - t0) * 1000.0;
  return s;
}

size_t net_exec_device_bytes(const NetExec *x) {
#ifdef NET_HAVE_GPU
  if (x && x->gpu) return rt_gpu_device_bytes(x->dev);
#endif
  (void)x;
  return 0;
}

void net_exec_memory(const NetExec *x, size_t part[3]) {
  part[0] = part[1] = part[2] = 0;
#ifdef NET_HAVE_GPU
  if (x && x->gpu) rt_gpu_memory(x->dev, &part[0], &part[1], &part[2]);
#endif
  (void)x;
}

int net_exec_cache_hit(const NetExec *x) {
#ifdef NET_HAVE_GPU
  if (x && x->gpu) return rt_gpu_cache_hit(x->dev);
#endif
  (void)x;
  return 0;
}

void net_exec_input_stop(NetExec *x) {
  if (!x) return;
#ifdef NET_HAVE_GPU
  rt_gpu_input_free(x->gfeed);
  x->gfeed = NULL;
#endif
  free(x->cfeed.host);
  memset(&x->cfeed, 0, sizeof x->cfeed);
  x->feeding = 0;
}

NetStatus net_exec_input_start(NetExec *x, int v, const RtRefInput *in, char *err, size_t len) {
  net_exec_input_stop(x);
  if (!rt_ref_input_ok(in) || v < 0 || net_exec_numel(x, v) != in->n * in->dc * in->h * in->w)
    return fail(NET_ERR_ARG, err, len, "input pipeline: value %d does not hold a batch of %lldx%lldx%lld images", v,
                in ? (long long)in->dc : 0, in ? (long long)in->h : 0, in ? (long long)in->w : 0);
#ifdef NET_HAVE_GPU
  if (x->gpu) {
    NetStatus s = net_exec_cuda_status(rt_gpu_input_new(x->dev, v, in, &x->gfeed, err, len));
    if (s) return s;
  }
#endif
  if (!x->gpu) {
    if (rt_cpu_is_int(x->cpu, v)) return fail(NET_ERR_ARG, err, len, "input pipeline: value %d is not a float", v);
    x->cfeed.bytes = (size_t)(in->n * in->c * in->h * in->w);
    if (!(x->cfeed.host = malloc(2 * x->cfeed.bytes)))
      return fail(NET_ERR_NOMEM, err, len, "out of memory for two batches of %zu bytes", x->cfeed.bytes);
    x->cfeed.filling = -1;
  }
  x->feeding = 1, x->feed_v = v, x->feed_in = *in;
  return NET_OK;
}

NetStatus net_exec_input_buffer(NetExec *x, uint8_t **host, char *err, size_t len) {
  if (!x->feeding) return fail(NET_ERR_ARG, err, len, "input pipeline: not started");
#ifdef NET_HAVE_GPU
  if (x->gpu) return net_exec_cuda_status(rt_gpu_input_buffer(x->gfeed, host, err, len));
#endif
  CpuFeed *f = &x->cfeed;
  if (f->filling < 0 && f->sent == 2) return fail(NET_ERR_ARG, err, len, "input pipeline: two batches not fed");
  if (f->filling < 0) f->filling = f->next_fill;
  *host = f->host + (size_t)f->filling * f->bytes;
  return NET_OK;
}

NetStatus net_exec_input_send(NetExec *x, char *err, size_t len) {
  if (!x->feeding) return fail(NET_ERR_ARG, err, len, "input pipeline: not started");
#ifdef NET_HAVE_GPU
  if (x->gpu) return net_exec_cuda_status(rt_gpu_input_send(x->gfeed, err, len));
#endif
  CpuFeed *f = &x->cfeed;
  if (f->filling < 0) return fail(NET_ERR_ARG, err, len, "input pipeline: no buffer to send");
  f->next_fill = (f->filling + 1) % 2, f->filling = -1, f->sent++;
  return NET_OK;
}

NetStatus net_exec_input_feed(NetExec *x, char *err, size_t len) {
  if (!x->feeding) return fail(NET_ERR_ARG, err, len, "input pipeline: not started");
#ifdef NET_HAVE_GPU
  if (x->gpu) return net_exec_cuda_status(rt_gpu_input_feed(x->gfeed, err, len));
#endif
  CpuFeed *f = &x->cfeed;
  if (!f->sent) return fail(NET_ERR_ARG, err, len, "input pipeline: no batch sent");
  rt_ref_input_u8(&x->feed_in, f->host + (size_t)f->next_feed * f->bytes, rt_cpu_data(x->cpu, x->feed_v));
  f->next_feed = (f->next_feed + 1) % 2, f->sent--;
  return NET_OK;
}

/* --- gradient accumulation ------------------------------------------------ */

/* The distinct gradients the sgd_updates of g's optimizer section
 * (IrGraph.opt_first on, the verifier's to keep pure) read (*grad
 * malloc'd), each made before the section. */
static NetStatus optimizer_section(const IrGraph *g, int **grad, int *ngrad, char *err, size_t len) {
  int first = g->opt_first;
  *grad = NULL, *ngrad = 0;
  if (first < 0)
    return fail(NET_ERR_MODEL, err, len, "gradient accumulation: graph %s has no optimizer section",
                g->name ? g->name : "?");
  int *out = malloc(sizeof(int) * (size_t)(g->nnode - first + 1));
  if (!out) return fail(NET_ERR_NOMEM, err, len, "out of memory");
  for (int i = first; i < g->nnode; i++) {
    const IrNode *n = &g->node[i];
    if (n->op != IR_OP_SGD_UPDATE) continue;
    int v = n->in[1], seen = 0;
    if (g->val[v].kind != IR_VAL_ACT || g->val[v].def < 0 || g->val[v].def >= first) {
      free(out);
      return fail(NET_ERR_MODEL, err, len, "gradient accumulation: %s reads a gradient not made by the backward pass",
                  n->name ? n->name : "an sgd_update");
    }
    for (int k = 0; k < *ngrad; k++) seen |= out[k] == v;
    if (!seen) out[(*ngrad)++] = v;
  }
  *grad = out;
  return NET_OK;
}

NetStatus net_exec_accum_set(NetExec *x, int k, char *err, size_t len) {
  if (k < 1) return fail(NET_ERR_ARG, err, len, "gradient accumulation over %d micro-batches (at least 1)", k);
  x->accum = k, x->accum_i = 0;
  if (k == 1) return NET_OK;
  int *grad, ngrad;
  NetStatus s = optimizer_section(x->g, &grad, &ngrad, err, len);
  if (s) {
    x->accum = 1;
    return s;
  }
#ifdef NET_HAVE_GPU
  if (x->gpu) {
    if (x->gacc && rt_gpu_accum_k(x->gacc) != k) rt_gpu_accum_free(x->gacc), x->gacc = NULL;
    if (x->gacc) s = net_exec_cuda_status(rt_gpu_accum_reset(x->gacc, err, len));
    else s = net_exec_cuda_status(rt_gpu_accum_new(x->dev, grad, ngrad, k, &x->gacc, err, len));
  }
#endif
  if (!x->gpu && !x->cacc && rt_cpu_accum_new(x->cpu, grad, ngrad, &x->cacc, err, len)) s = NET_ERR_NOMEM;
  if (!s && !x->gpu) rt_cpu_accum_reset(x->cacc);
  free(grad);
  if (s) x->accum = 1;
  return s;
}

int net_exec_accum_pending(const NetExec *x) { return x ? x->accum_i : 0; }

static NetStatus run_accum(NetExec *x, char *err, size_t len) {
  int last = x->accum_i + 1 == x->accum;
  NetStatus s = NET_OK;
#ifdef NET_HAVE_GPU
  if (x->gpu) s = net_exec_cuda_status(rt_gpu_accum_run(x->gacc, last, err, len));
#endif
  if (!x->gpu && rt_cpu_accum_run(x->cacc, x->accum, last, err, len)) s = NET_ERR_RUN;
  if (!s) x->accum_i = last ? 0 : x->accum_i + 1;
  return s;
}
