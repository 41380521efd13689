/* rt_gpu_prog.h - the one NVRTC program of a graph (internal to rt_gpu*.c).
 *
 * rt_gpu_prog_build() emits every node's kernels (rt_gpu_kernels.h) for a
 * device, joins their sources into one CUDA C program, and compiles it for
 * the device's sm_XX, or takes the cubin from the on-disk cache when one
 * was made from the same program text, options and NVRTC version.  No GPU
 * is needed. */
#ifndef NETC_RT_GPU_PROG_H
#define NETC_RT_GPU_PROG_H

#include <stddef.h>
#include <stdint.h>

#include "rt_gpu.h"

typedef struct RtGpuProg {
  RtKNode *kn;   /* one per node of the graph */
  int nnode;
  void *cubin;   /* malloc'd; NULL when no node has a kernel */
  size_t size;
  int cache_hit; /* the cubin came from the cache */
} RtGpuProg;

RtCudaStatus rt_gpu_prog_build(const IrGraph *g, int64_t batch, const RtGpuDevice *dev, const char *cache_dir,
                               RtGpuProg *out, char *err, size_t errlen);
void rt_gpu_prog_free(RtGpuProg *p); /* takes NULL; leaves *p empty */

#endif
