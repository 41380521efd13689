/* rt_nvjpeg_pool.h - the device and pinned memory nvJPEG asks for, kept
 * for it instead of returned to the driver.
 *
 * nvJPEG allocates its buffers through allocator callbacks (cudaMalloc and
 * cudaHostAlloc by default) and may free and allocate them again between
 * batches as image sizes change.  A cudaFree or cudaFreeHost waits for the
 * whole device, so on the decode thread it would hold each batch's decode
 * until the training step in flight ends, coupling the decoder to the step
 * it should overlap.  These callbacks (handed to nvjpegCreateEx) give a
 * freed block back to a pool and serve a later request of up to its size
 * from it; the driver is called only to grow the pool.  A freed block may
 * still be read or written by work nvJPEG queued (a copy from a pinned
 * buffer, say), which cudaFree would have waited for; so it is held until
 * rt_nvjpeg_pool_fence, which the decoder calls once its stream's earlier
 * work is done (rt_nvjpeg_decode, after synchronizing that stream).  The
 * fence is the process's, so it is right for one decoder at a time (one a
 * pipeline, one pipeline an executor, one executor a training process).  Blocks are tagged
 * with the context that was current when they were made and served only
 * to the same one (a thread with none current gets the last one seen).  rt_nvjpeg_pool_trim returns the free blocks of the
 * current context to the driver (when the last decoder goes).
 *
 * The callbacks have no user argument, so the pool is the process's: one
 * mutex, the driver's table set by rt_nvjpeg_pool_use before the first
 * handle is made.  They return 0 on success as nvJPEG expects. */
#ifndef NETC_RT_NVJPEG_POOL_H
#define NETC_RT_NVJPEG_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "rt_cuda.h"

void rt_nvjpeg_pool_use(const RtCudaApi *api);
int rt_nvjpeg_pool_dev_malloc(void **p, size_t size);
int rt_nvjpeg_pool_dev_free(void *p);
int rt_nvjpeg_pool_pinned_malloc(void **p, size_t size, unsigned int flags);
int rt_nvjpeg_pool_pinned_free(void *p);
/* The blocks freed so far may be served again (their users' work is done). */
void rt_nvjpeg_pool_fence(void);
void rt_nvjpeg_pool_trim(void);

/* Requests served so far, of them the ones that called the driver, and
 * the bytes the pool holds now (in use or free). */
typedef struct RtNvjpegPoolStats {
  int64_t requests, allocations;
  size_t bytes;
} RtNvjpegPoolStats;
RtNvjpegPoolStats rt_nvjpeg_pool_stats(void);

#endif
