/* rt_gpu_prog.h - the one NVRTC program of a graph (internal to rt_gpu*.c).
 *
 * rt_gpu_prog_build() emits every node's kernels (rt_gpu_kernels.h) for a
 * device, joins their sources into one CUDA C program, and compiles it for
 * the device's sm_XX, or takes the cubin from the on-disk cache when one
 * was made from the same program text, options and NVRTC version.  No GPU
 * is needed.  The two halves are separate for the model writer (netc -o,
 * compiler/cg_model.c), which embeds the text and the cubin in model.so:
 * rt_gpu_prog_emit() makes the program text, rt_gpu_prog_compile() its
 * cubin; rt_gpu_prog_build_prebuilt() takes such an embedded cubin instead
 * of compiling when its text is exactly the text emitted here. */
#ifndef NETC_RT_GPU_PROG_H
#define NETC_RT_GPU_PROG_H

#include <stddef.h>
#include <stdint.h>

#include "rt_gpu.h"
#include "rt_model.h"

typedef struct RtGpuProg {
  RtKNode *kn;   /* one per node of the graph */
  int nnode;
  void *cubin;   /* malloc'd; NULL when no node has a kernel */
  size_t size;
  int cache_hit; /* the cubin came from the cache */
  char *source;  /* malloc'd: the joined program text; NULL when no node has a kernel */
  size_t source_len;
  int prebuilt;  /* the cubin came from a model.so (rt_gpu_prog_build_prebuilt) */
} RtGpuProg;

/* The cache directory (want, else $XDG_CACHE_HOME/netc, else
 * ~/.cache/netc) into dir, created when missing; "" when there is none. */
void rt_gpu_prog_cache_dir(const char *want, char *dir, size_t len);
RtCudaStatus rt_gpu_prog_build(const IrGraph *g, int64_t batch, const RtGpuDevice *dev, const char *cache_dir,
                               RtGpuProg *out, char *err, size_t errlen);
/* Only the emission: kn and source, no cubin. */
RtCudaStatus rt_gpu_prog_emit(const IrGraph *g, int64_t batch, const RtGpuDevice *dev, RtGpuProg *out, char *err,
                              size_t errlen);
/* The cubin of p->source for dev (from the cache or NVRTC); nothing when p
 * has no source.  RT_CUDA_ENODRIVER when NVRTC cannot be loaded.  p is left
 * as it was on failure. */
RtCudaStatus rt_gpu_prog_compile(const IrGraph *g, int64_t batch, const RtGpuDevice *dev, const char *cache_dir,
                                 RtGpuProg *p, char *err, size_t errlen);
/* rt_gpu_prog_build, but pre->cubin is taken (out->prebuilt = 1) when
 * pre->source equals the emitted text and pre_arch is the device's sm_XX;
 * otherwise it compiles as rt_gpu_prog_build does.  pre may be NULL. */
RtCudaStatus rt_gpu_prog_build_prebuilt(const IrGraph *g, int64_t batch, const RtGpuDevice *dev,
                                        const char *cache_dir, const RtModelProgram *pre, const char *pre_arch,
                                        RtGpuProg *out, char *err, size_t errlen);
void rt_gpu_prog_free(RtGpuProg *p); /* takes NULL; leaves *p empty */

#endif
