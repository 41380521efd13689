/* rt_cuda.h - the CUDA driver API, loaded at run time.
 *
 * Nothing links libcuda: the first call to rt_cuda_api() dlopens
 * "libcuda.so.1" (or the file named by $NETC_CUDA_DRIVER, for tests),
 * resolves every entry point below with dlsym and calls cuInit(0).  The
 * result (the table, or the reason there is none) is made once per process
 * under pthread_once and never changes afterwards, so any thread may call
 * rt_cuda_api() and read the table at any time.  The library stays loaded
 * until the process ends.  Symbol names follow cuda.h's own mapping
 * (cuMemAlloc is cuMemAlloc_v2, cuEventElapsedTime is
 * cuEventElapsedTime_v2, ...), so the table calls what a program compiled
 * against this header would call.
 *
 * Everything else is per user: a context handle (RtCudaCtx: device,
 * retained primary context, one stream) and module handles (RtCudaModule:
 * one loaded cubin or PTX image) come in init/free pairs (rt_cuda_*_init, rt_cuda_*_free), and every
 * free takes NULL.  A thread that uses a context calls rt_cuda_ctx_bind()
 * first (the driver's current context is per thread).
 *
 * Every function returns an RtCudaStatus and, on failure, writes one
 * message to the caller's err buffer (errlen bytes, may be 0).  A failed
 * driver call reads
 *
 *   runtime/rt_cuda.c:88: cuMemAlloc(&p, bytes): CUDA_ERROR_OUT_OF_MEMORY:
 *   out of memory (input buffer)
 *
 * (one line): where, the call as written, the status name and text, and
 * what the call was for.  Nothing here prints or exits. */
#ifndef NETC_RT_CUDA_H
#define NETC_RT_CUDA_H

#include <stddef.h>

#include <cuda.h> /* types and constants only; no libcuda symbol is linked */

#include "rt_err.h"

typedef enum RtCudaStatus {
  RT_CUDA_OK = 0,
  RT_CUDA_ENODRIVER, /* libcuda.so.1 missing, or an entry point missing */
  RT_CUDA_ENODEVICE, /* the driver loaded but sees no usable GPU */
  RT_CUDA_ECALL,     /* a driver call failed (the message names it) */
  RT_CUDA_EARG,      /* a caller's argument is invalid */
  RT_CUDA_ENOMEM,    /* host memory ran out */
  RT_CUDA_EDEVMEM,   /* device memory ran out (the message says how much was asked and free) */
  RT_CUDA_ENOLIB     /* an optional CUDA library (nvJPEG) missing, or an entry point of it (the message says which) */
} RtCudaStatus;

/* The driver entry points netc uses, named after the driver's functions
 * without their "cu" prefix (api->MemAlloc is cuMemAlloc_v2). */
/* The GPU runtime's one failure path: writes a one-line message to the
 * caller's err buffer (errlen bytes, may be 0; rt_errf of rt_err.h) and
 * returns s. */
RtCudaStatus rt_cuda_fail(RtCudaStatus s, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

typedef struct RtCudaApi {
  CUresult (*Init)(unsigned int flags);
  CUresult (*DriverGetVersion)(int *version);
  CUresult (*DeviceGetCount)(int *count);
  CUresult (*DeviceGet)(CUdevice *dev, int ordinal);
  CUresult (*DeviceGetAttribute)(int *value, CUdevice_attribute attr, CUdevice dev);
  CUresult (*DeviceGetName)(char *name, int len, CUdevice dev);
  CUresult (*DeviceTotalMem)(size_t *bytes, CUdevice dev);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
  CUresult (*DevicePrimaryCtxRelease)(CUdevice dev);
  CUresult (*CtxSetCurrent)(CUcontext ctx);
  CUresult (*CtxGetCurrent)(CUcontext *ctx); /* optional: NULL where the driver lacks it */
  /* optional: a stream of a priority (rt_gpu_jpeg.c's decode stream); NULL where the driver lacks them */
  CUresult (*CtxGetStreamPriorityRange)(int *least, int *greatest);
  CUresult (*StreamCreateWithPriority)(CUstream *s, unsigned int flags, int priority);
  CUresult (*ModuleLoadData)(CUmodule *mod, const void *image);
  CUresult (*ModuleUnload)(CUmodule mod);
  CUresult (*ModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
  CUresult (*LaunchKernel)(CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                           unsigned int by, unsigned int bz, unsigned int shared_bytes, CUstream stream, void **params,
                           void **extra);
  CUresult (*MemAlloc)(CUdeviceptr *ptr, size_t bytes);
  CUresult (*MemFree)(CUdeviceptr ptr);
  CUresult (*MemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
  CUresult (*MemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
  CUresult (*StreamCreate)(CUstream *stream, unsigned int flags);
  CUresult (*StreamDestroy)(CUstream stream);
  CUresult (*StreamSynchronize)(CUstream stream);
  CUresult (*EventCreate)(CUevent *ev, unsigned int flags);
  CUresult (*EventRecord)(CUevent ev, CUstream stream);
  CUresult (*EventSynchronize)(CUevent ev);
  CUresult (*EventElapsedTime)(float *ms, CUevent start, CUevent end);
  CUresult (*EventDestroy)(CUevent ev);
  CUresult (*GetErrorName)(CUresult status, const char **name);
  CUresult (*GetErrorString)(CUresult status, const char **text);
  /* the GPU executor (rt_gpu.c): async copies on its stream, free memory
   * for out-of-memory messages, big dynamic shared memory, CUDA graphs */
  CUresult (*MemGetInfo)(size_t *free_bytes, size_t *total_bytes);
  CUresult (*MemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream);
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream);
  CUresult (*MemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*FuncSetAttribute)(CUfunction fn, CUfunction_attribute attr, int value);
  CUresult (*StreamBeginCapture)(CUstream stream, CUstreamCaptureMode mode);
  CUresult (*StreamEndCapture)(CUstream stream, CUgraph *graph);
  CUresult (*GraphInstantiate)(CUgraphExec *exec, CUgraph graph, unsigned long long flags);
  CUresult (*GraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*GraphDestroy)(CUgraph graph);
  CUresult (*GraphExecDestroy)(CUgraphExec exec);
  /* the profiler (rt_gpu_profile.c): holds the stream while a step is queued */
  CUresult (*LaunchHostFunc)(CUstream stream, CUhostFn fn, void *user);
  /* the input pipeline (rt_gpu_input.c): pinned batches copied on a
   * stream of their own, which the step's stream waits for by event */
  CUresult (*MemHostAlloc)(void **p, size_t bytes, unsigned int flags);
  CUresult (*MemFreeHost)(void *p);
  CUresult (*StreamWaitEvent)(CUstream stream, CUevent ev, unsigned int flags);
  /* the executor's prologue choice (rt_gpu.c plan_convs): a device copy
   * times the traffic of a materialized prologue */
  CUresult (*MemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  /* the per-step mail (rt_gpu_mail.c) polls its copies; NVML finds the
   * device by its PCI bus id */
  CUresult (*EventQuery)(CUevent ev);
  CUresult (*DeviceGetPCIBusId)(char *id, int len, CUdevice dev);
  /* the all-reduce's clock (rt_gpu_allreduce.c): events captured as
   * record nodes of the step graph, pointed at another event each replay;
   * NULL when the driver lacks them (the clock is then off) */
  CUresult (*EventRecordWithFlags)(CUevent ev, CUstream stream, unsigned int flags);
  CUresult (*GraphGetNodes)(CUgraph graph, CUgraphNode *nodes, size_t *n);
  CUresult (*GraphNodeGetType)(CUgraphNode node, CUgraphNodeType *type);
  CUresult (*GraphEventRecordNodeGetEvent)(CUgraphNode node, CUevent *ev);
  CUresult (*GraphExecEventRecordNodeSetEvent)(CUgraphExec exec, CUgraphNode node, CUevent ev);
} RtCudaApi;

/* *slot (a function pointer of slot_size bytes) = the function called
 * name in the dlopen'ed lib, or NULL when it is missing; returns it.  The
 * one lookup of every library this folder loads at run time. */
void *rt_cuda_dlsym(void *lib, const char *name, void *slot, size_t slot_size);

/* The process-wide driver table (loaded on first use).  On failure *api is
 * NULL, the status is RT_CUDA_ENODRIVER or RT_CUDA_ENODEVICE and err says
 * why, e.g. "no CUDA driver (libcuda.so.1 not found)". */
RtCudaStatus rt_cuda_api(const RtCudaApi **api, char *err, size_t errlen);

/* Formats a failed driver call as described above and returns
 * RT_CUDA_ECALL; returns RT_CUDA_OK and writes nothing when status is
 * CUDA_SUCCESS.  Use through RT_CU. */
RtCudaStatus rt_cuda_check(const RtCudaApi *api, CUresult status, const char *file, int line, const char *call,
                           const char *what, char *err, size_t errlen);

/* RT_CU(api, MemAlloc, (&p, bytes), "input buffer", err, errlen) calls
 * api->MemAlloc(&p, bytes) and reports it as "cuMemAlloc(&p, bytes)". */
#define RT_CU(api, fn, args, what, err, errlen) \
  rt_cuda_check((api), (api)->fn args, __FILE__, __LINE__, "cu" #fn #args, (what), (err), (errlen))

/* What netc-gpu-info and the planner want to know about a device. */
typedef struct RtCudaDeviceInfo {
  char name[256];
  int ordinal;
  int cc_major, cc_minor;   /* compute capability */
  int sm_count;             /* multiprocessors */
  size_t total_mem;         /* bytes */
  int l2_bytes;             /* L2 cache */
  int smem_per_block_optin; /* shared memory a block may opt in to */
  int clock_khz, mem_clock_khz, mem_bus_bits;
  int driver_version; /* e.g. 13000 for CUDA 13.0 */
} RtCudaDeviceInfo;

/* Number of devices the driver sees (0 is not an error). */
RtCudaStatus rt_cuda_device_count(int *count, char *err, size_t errlen);
RtCudaStatus rt_cuda_device_info(int ordinal, RtCudaDeviceInfo *info, char *err, size_t errlen);

/* A device's primary context (retained) and one stream of its own. */
typedef struct RtCudaCtx RtCudaCtx;

/* Retains device `ordinal`'s primary context, makes it current on the
 * calling thread and creates a non-blocking stream. */
RtCudaStatus rt_cuda_ctx_init(RtCudaCtx **out, int ordinal, char *err, size_t errlen);
/* Destroys the stream and releases the primary context.  Takes NULL. */
void rt_cuda_ctx_free(RtCudaCtx *c);
/* Makes c's context current on the calling thread. */
RtCudaStatus rt_cuda_ctx_bind(RtCudaCtx *c, char *err, size_t errlen);
const RtCudaApi *rt_cuda_ctx_api(const RtCudaCtx *c);
CUstream rt_cuda_ctx_stream(const RtCudaCtx *c);
CUdevice rt_cuda_ctx_device(const RtCudaCtx *c);
/* A non-blocking stream at the device's greatest priority (its kernels
 * take the SMs before those of the default priority as blocks finish) in
 * the current context, else an ordinary one where the driver has no
 * priorities; *prioritized (may be NULL) says which. */
RtCudaStatus rt_cuda_stream_first(const RtCudaApi *a, CUstream *st, int *prioritized, char *err, size_t errlen);

/* One loaded code image (cubin, fatbin or NUL-terminated PTX). */
typedef struct RtCudaModule RtCudaModule;

/* Loads image into c's context (which must be current on this thread);
 * what names the image in messages, e.g. "eltwise kernels". */
RtCudaStatus rt_cuda_module_init(RtCudaModule **out, RtCudaCtx *c, const void *image, const char *what, char *err,
                                 size_t errlen);
/* Unloads the module (binding its context first).  Takes NULL. */
void rt_cuda_module_free(RtCudaModule *m);
/* The kernel called name (an extern "C" symbol) in m. */
RtCudaStatus rt_cuda_module_function(RtCudaModule *m, const char *name, CUfunction *fn, char *err, size_t errlen);

#endif
