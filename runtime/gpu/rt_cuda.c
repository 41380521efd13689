/* rt_cuda.c - loads the CUDA driver with dlopen and wraps its contexts and
 * modules in handles (rt_cuda.h gives the contract).  The only static
 * state is the loaded table and the reason it could not be loaded, both
 * written once under pthread_once and read-only afterwards. */
#include "rt_cuda.h"

#include "opts.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SYM_NAME(cuMemAlloc) is "cuMemAlloc_v2": the argument is macro-expanded
 * by cuda.h's own versioning defines before it is stringified. */
#define SYM_STR(f)  #f
#define SYM_NAME(f) SYM_STR(f)

static struct {
  pthread_once_t once;
  RtCudaStatus status;
  RtCudaApi api;
  char why[512];
} loaded = {PTHREAD_ONCE_INIT, RT_CUDA_OK, {0}, ""};

RtCudaStatus rt_cuda_fail(RtCudaStatus s, char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rt_verrf(err, errlen, fmt, ap);
  va_end(ap);
  return s;
}

void *rt_cuda_dlsym(void *lib, const char *name, void *slot, size_t slot_size) {
  void *p = dlsym(lib, name);
  if (slot_size != sizeof p) p = NULL;
  memcpy(slot, &p, sizeof p); /* POSIX: object and function pointers agree */
  return p;
}

/* Resolves name (or, when that is missing, fallback) into *slot. */
static int load_sym(void *lib, const char *name, const char *fallback, void *slot, size_t slot_size) {
  if (rt_cuda_dlsym(lib, name, slot, slot_size) || (fallback && rt_cuda_dlsym(lib, fallback, slot, slot_size)))
    return 1;
  snprintf(loaded.why, sizeof loaded.why, "no CUDA driver (%s in libcuda.so.1 is missing: driver too old?)", name);
  return 0;
}

#define LOAD(field, fn, fallback) \
  if (!load_sym(lib, SYM_NAME(fn), (fallback), &a->field, sizeof a->field)) return 0
/* a symbol the table may lack: the field stays NULL */
#define LOAD_OPTIONAL(field, fn) rt_cuda_dlsym(lib, SYM_NAME(fn), &a->field, sizeof a->field)

static int load_table(void *lib, RtCudaApi *a) {
  LOAD(Init, cuInit, NULL);
  LOAD(DriverGetVersion, cuDriverGetVersion, NULL);
  LOAD(DeviceGetCount, cuDeviceGetCount, NULL);
  LOAD(DeviceGet, cuDeviceGet, NULL);
  LOAD(DeviceGetAttribute, cuDeviceGetAttribute, NULL);
  LOAD(DeviceGetName, cuDeviceGetName, NULL);
  LOAD(DeviceTotalMem, cuDeviceTotalMem, NULL);
  LOAD(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, NULL);
  LOAD(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, NULL);
  LOAD(CtxSetCurrent, cuCtxSetCurrent, NULL);
  LOAD(ModuleLoadData, cuModuleLoadData, NULL);
  LOAD(ModuleUnload, cuModuleUnload, NULL);
  LOAD(ModuleGetFunction, cuModuleGetFunction, NULL);
  LOAD(LaunchKernel, cuLaunchKernel, NULL);
  LOAD(MemAlloc, cuMemAlloc, NULL);
  LOAD(MemFree, cuMemFree, NULL);
  LOAD(MemcpyHtoD, cuMemcpyHtoD, NULL);
  LOAD(MemcpyDtoH, cuMemcpyDtoH, NULL);
  LOAD(StreamCreate, cuStreamCreate, NULL);
  LOAD(StreamDestroy, cuStreamDestroy, NULL);
  LOAD(StreamSynchronize, cuStreamSynchronize, NULL);
  LOAD(EventCreate, cuEventCreate, NULL);
  LOAD(EventRecord, cuEventRecord, NULL);
  LOAD(EventSynchronize, cuEventSynchronize, NULL);
  /* _v2 arrived with driver 12.8; the first version has the same signature */
  LOAD(EventElapsedTime, cuEventElapsedTime, "cuEventElapsedTime");
  LOAD(EventDestroy, cuEventDestroy, NULL);
  LOAD(GetErrorName, cuGetErrorName, NULL);
  LOAD(GetErrorString, cuGetErrorString, NULL);
  LOAD(MemGetInfo, cuMemGetInfo, NULL);
  LOAD(MemsetD8Async, cuMemsetD8Async, NULL);
  LOAD(MemcpyHtoDAsync, cuMemcpyHtoDAsync, NULL);
  LOAD(MemcpyDtoHAsync, cuMemcpyDtoHAsync, NULL);
  LOAD(FuncSetAttribute, cuFuncSetAttribute, NULL);
  LOAD(StreamBeginCapture, cuStreamBeginCapture, NULL);
  LOAD(StreamEndCapture, cuStreamEndCapture, NULL);
  LOAD(GraphInstantiate, cuGraphInstantiate, NULL);
  LOAD(GraphLaunch, cuGraphLaunch, NULL);
  LOAD(GraphDestroy, cuGraphDestroy, NULL);
  LOAD(GraphExecDestroy, cuGraphExecDestroy, NULL);
  LOAD(LaunchHostFunc, cuLaunchHostFunc, NULL);
  LOAD(MemHostAlloc, cuMemHostAlloc, NULL);
  LOAD(MemFreeHost, cuMemFreeHost, NULL);
  LOAD(StreamWaitEvent, cuStreamWaitEvent, NULL);
  LOAD(MemcpyDtoDAsync, cuMemcpyDtoDAsync, NULL);
  LOAD(EventQuery, cuEventQuery, NULL);
  LOAD(DeviceGetPCIBusId, cuDeviceGetPCIBusId, NULL);
  /* optional: without them the all-reduce's clock is off (rt_gpu_allreduce.c), nothing else */
  LOAD_OPTIONAL(CtxGetCurrent, cuCtxGetCurrent); /* rt_nvjpeg_pool.c's context tags */
  LOAD_OPTIONAL(CtxGetStreamPriorityRange, cuCtxGetStreamPriorityRange);
  LOAD_OPTIONAL(StreamCreateWithPriority, cuStreamCreateWithPriority);
  LOAD_OPTIONAL(EventRecordWithFlags, cuEventRecordWithFlags);
  LOAD_OPTIONAL(GraphGetNodes, cuGraphGetNodes);
  LOAD_OPTIONAL(GraphNodeGetType, cuGraphNodeGetType);
  LOAD_OPTIONAL(GraphEventRecordNodeGetEvent, cuGraphEventRecordNodeGetEvent);
  LOAD_OPTIONAL(GraphExecEventRecordNodeSetEvent, cuGraphExecEventRecordNodeSetEvent);
  return 1;
}

static void load_once(void) {
  static NetcOpts o; /* read once, for the library's path only */
  opts_from_env(&o, NULL, 0);
  const char *path = *o.cuda_driver ? o.cuda_driver : "libcuda.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(loaded.why, sizeof loaded.why, "no CUDA driver (%s not found)", path);
    loaded.status = RT_CUDA_ENODRIVER;
    return;
  }
  RtCudaApi a;
  memset(&a, 0, sizeof a);
  if (!load_table(lib, &a)) {
    loaded.status = RT_CUDA_ENODRIVER;
    dlclose(lib);
    return;
  }
  CUresult r = a.Init(0);
  if (r != CUDA_SUCCESS) {
    const char *name = "?", *text = "?";
    a.GetErrorName(r, &name);
    a.GetErrorString(r, &text);
    snprintf(loaded.why, sizeof loaded.why, "no usable GPU (%s:%d: cuInit(0): %s: %s (starting the driver))", __FILE__,
             __LINE__, name, text);
    loaded.status = RT_CUDA_ENODEVICE;
    return; /* the library stays loaded: the driver may hold references */
  }
  loaded.api = a;
  loaded.status = RT_CUDA_OK;
}

RtCudaStatus rt_cuda_api(const RtCudaApi **api, char *err, size_t errlen) {
  if (!api) {
    rt_errf(err, errlen, "rt_cuda_api: api is NULL");
    return RT_CUDA_EARG;
  }
  pthread_once(&loaded.once, load_once);
  *api = loaded.status == RT_CUDA_OK ? &loaded.api : NULL;
  if (loaded.status != RT_CUDA_OK) rt_errf(err, errlen, "%s", loaded.why);
  return loaded.status;
}

RtCudaStatus rt_cuda_check(const RtCudaApi *api, CUresult status, const char *file, int line, const char *call,
                           const char *what, char *err, size_t errlen) {
  if (status == CUDA_SUCCESS) return RT_CUDA_OK;
  const char *name = NULL, *text = NULL;
  if (api) {
    if (api->GetErrorName(status, &name) != CUDA_SUCCESS) name = NULL;
    if (api->GetErrorString(status, &text) != CUDA_SUCCESS) text = NULL;
  }
  char code[32];
  snprintf(code, sizeof code, "CUresult %d", (int)status);
  rt_errf(err, errlen, "%s:%d: %s: %s: %s (%s)", file, line, call, name ? name : code, text ? text : "unknown status",
          what ? what : "");
  return RT_CUDA_ECALL;
}

RtCudaStatus rt_cuda_device_count(int *count, char *err, size_t errlen) {
  const RtCudaApi *api;
  RtCudaStatus s = rt_cuda_api(&api, err, errlen);
  if (s) return s;
  if (!count) {
    rt_errf(err, errlen, "rt_cuda_device_count: count is NULL");
    return RT_CUDA_EARG;
  }
  return RT_CU(api, DeviceGetCount, (count), "counting devices", err, errlen);
}

RtCudaStatus rt_cuda_device_info(int ordinal, RtCudaDeviceInfo *info, char *err, size_t errlen) {
  const RtCudaApi *api;
  RtCudaStatus s = rt_cuda_api(&api, err, errlen);
  if (s) return s;
  if (!info) {
    rt_errf(err, errlen, "rt_cuda_device_info: info is NULL");
    return RT_CUDA_EARG;
  }
  memset(info, 0, sizeof *info);
  info->ordinal = ordinal;
  CUdevice dev;
  if ((s = RT_CU(api, DeviceGet, (&dev, ordinal), "device info", err, errlen))) return s;
  if ((s = RT_CU(api, DriverGetVersion, (&info->driver_version), "device info", err, errlen)) ||
      (s = RT_CU(api, DeviceGetName, (info->name, (int)sizeof info->name, dev), "device info", err, errlen)) ||
      (s = RT_CU(api, DeviceTotalMem, (&info->total_mem, dev), "device info", err, errlen)))
    return s;
  static const struct {
    CUdevice_attribute attr;
    size_t offset;
  } ATTRS[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, offsetof(RtCudaDeviceInfo, cc_major)},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, offsetof(RtCudaDeviceInfo, cc_minor)},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(RtCudaDeviceInfo, sm_count)},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, offsetof(RtCudaDeviceInfo, l2_bytes)},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, offsetof(RtCudaDeviceInfo, smem_per_block_optin)},
      {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, offsetof(RtCudaDeviceInfo, clock_khz)},
      {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, offsetof(RtCudaDeviceInfo, mem_clock_khz)},
      {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, offsetof(RtCudaDeviceInfo, mem_bus_bits)},
  };
  for (size_t i = 0; i < sizeof ATTRS / sizeof ATTRS[0]; i++) {
    int v = 0;
    if ((s = RT_CU(api, DeviceGetAttribute, (&v, ATTRS[i].attr, dev), "device info", err, errlen))) return s;
    memcpy((char *)info + ATTRS[i].offset, &v, sizeof v);
  }
  return RT_CUDA_OK;
}

struct RtCudaCtx {
  const RtCudaApi *api;
  CUdevice dev;
  CUcontext ctx; /* the device's primary context, retained by us */
  CUstream stream;
};

RtCudaStatus rt_cuda_stream_first(const RtCudaApi *a, CUstream *st, int *prioritized, char *err, size_t errlen) {
  int least = 0, greatest = 0,
      prio = a->StreamCreateWithPriority && a->CtxGetStreamPriorityRange &&
             a->CtxGetStreamPriorityRange(&least, &greatest) == CUDA_SUCCESS;
  if (prioritized) *prioritized = prio;
  if (prio)
    return RT_CU(a, StreamCreateWithPriority, (st, CU_STREAM_NON_BLOCKING, greatest),
                 "a stream of the greatest priority", err, errlen);
  return RT_CU(a, StreamCreate, (st, CU_STREAM_NON_BLOCKING), "a stream", err, errlen);
}

RtCudaStatus rt_cuda_ctx_init(RtCudaCtx **out, int ordinal, char *err, size_t errlen) {
  if (!out) {
    rt_errf(err, errlen, "rt_cuda_ctx_init: out is NULL");
    return RT_CUDA_EARG;
  }
  *out = NULL;
  const RtCudaApi *api;
  RtCudaStatus s = rt_cuda_api(&api, err, errlen);
  if (s) return s;
  int count = 0;
  if ((s = RT_CU(api, DeviceGetCount, (&count), "context", err, errlen))) return s;
  if (ordinal < 0 || ordinal >= count) {
    rt_errf(err, errlen, "no GPU %d (the driver sees %d)", ordinal, count);
    return count ? RT_CUDA_EARG : RT_CUDA_ENODEVICE;
  }
  RtCudaCtx *c = calloc(1, sizeof *c);
  if (!c) {
    rt_errf(err, errlen, "rt_cuda_ctx_init: out of host memory");
    return RT_CUDA_ENOMEM;
  }
  c->api = api;
  if ((s = RT_CU(api, DeviceGet, (&c->dev, ordinal), "context", err, errlen)) ||
      (s = RT_CU(api, DevicePrimaryCtxRetain, (&c->ctx, c->dev), "primary context", err, errlen))) {
    free(c);
    return s;
  }
  if ((s = RT_CU(api, CtxSetCurrent, (c->ctx), "binding the context", err, errlen)) ||
      (s = RT_CU(api, StreamCreate, (&c->stream, CU_STREAM_NON_BLOCKING), "the context's stream", err, errlen))) {
    rt_cuda_ctx_free(c);
    return s;
  }
  *out = c;
  return RT_CUDA_OK;
}

void rt_cuda_ctx_free(RtCudaCtx *c) {
  if (!c) return;
  /* teardown errors have nobody to report to; the context goes either way */
  if (c->ctx) c->api->CtxSetCurrent(c->ctx);
  if (c->stream) c->api->StreamDestroy(c->stream);
  if (c->ctx) {
    c->api->CtxSetCurrent(NULL);
    c->api->DevicePrimaryCtxRelease(c->dev);
  }
  free(c);
}

RtCudaStatus rt_cuda_ctx_bind(RtCudaCtx *c, char *err, size_t errlen) {
  if (!c) {
    rt_errf(err, errlen, "rt_cuda_ctx_bind: context is NULL");
    return RT_CUDA_EARG;
  }
  return RT_CU(c->api, CtxSetCurrent, (c->ctx), "binding the context", err, errlen);
}

const RtCudaApi *rt_cuda_ctx_api(const RtCudaCtx *c) { return c->api; }
CUstream rt_cuda_ctx_stream(const RtCudaCtx *c) { return c->stream; }
CUdevice rt_cuda_ctx_device(const RtCudaCtx *c) { return c->dev; }

struct RtCudaModule {
  RtCudaCtx *ctx;
  CUmodule mod;
  char what[96];
};

RtCudaStatus rt_cuda_module_init(RtCudaModule **out, RtCudaCtx *c, const void *image, const char *what, char *err,
                                 size_t errlen) {
  if (!out || !c || !image) {
    rt_errf(err, errlen, "rt_cuda_module_init: NULL argument");
    return RT_CUDA_EARG;
  }
  *out = NULL;
  RtCudaModule *m = calloc(1, sizeof *m);
  if (!m) {
    rt_errf(err, errlen, "rt_cuda_module_init: out of host memory");
    return RT_CUDA_ENOMEM;
  }
  m->ctx = c;
  snprintf(m->what, sizeof m->what, "%s", what ? what : "module");
  char buf[160];
  snprintf(buf, sizeof buf, "loading %s", m->what);
  RtCudaStatus s = RT_CU(c->api, ModuleLoadData, (&m->mod, image), buf, err, errlen);
  if (s) {
    free(m);
    return s;
  }
  *out = m;
  return RT_CUDA_OK;
}

void rt_cuda_module_free(RtCudaModule *m) {
  if (!m) return;
  m->ctx->api->CtxSetCurrent(m->ctx->ctx);
  m->ctx->api->ModuleUnload(m->mod);
  free(m);
}

RtCudaStatus rt_cuda_module_function(RtCudaModule *m, const char *name, CUfunction *fn, char *err, size_t errlen) {
  if (!m || !name || !fn) {
    rt_errf(err, errlen, "rt_cuda_module_function: NULL argument");
    return RT_CUDA_EARG;
  }
  char buf[256];
  snprintf(buf, sizeof buf, "kernel %s in %s", name, m->what);
  return RT_CU(m->ctx->api, ModuleGetFunction, (fn, m->mod, name), buf, err, errlen);
}
