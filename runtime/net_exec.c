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
#endif

struct NetExec {
  int gpu;
  RtCpu *cpu;
#ifdef NET_HAVE_GPU
  RtGpu *dev;
  int captured;
#endif
};

static NetStatus fail(NetStatus s, char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static NetStatus fail(NetStatus s, char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
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

NetStatus net_exec_new(int gpu, int ordinal, const char *cache_dir, int tune, const IrGraph *g, int64_t batch, NetExec **out,
                       char *err, size_t len) {
  *out = NULL;
  NetExec *x = calloc(1, sizeof *x);
  if (!x) return fail(NET_ERR_NOMEM, err, len, "out of memory");
  x->gpu = gpu;
  NetStatus s = NET_OK;
  if (!gpu) {
    if (rt_cpu_new(g, batch, &x->cpu, err, len)) s = NET_ERR_MODEL;
  } else {
#ifdef NET_HAVE_GPU
    RtGpuOpts o = {.device = ordinal, .cache_dir = cache_dir, .tune = tune};
    s = net_exec_cuda_status(rt_gpu_new(g, batch, &o, &x->dev, err, len));
#else
    (void)ordinal, (void)cache_dir, (void)tune;
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
  rt_cpu_free(x->cpu);
#ifdef NET_HAVE_GPU
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

NetStatus net_exec_run(NetExec *x, char *err, size_t len) {
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
