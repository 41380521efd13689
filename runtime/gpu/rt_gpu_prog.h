/* rt_gpu_prog.h - the NVRTC programs of a graph (internal to rt_gpu*.c).
 *
 * rt_gpu_prog_build() emits every node's kernels (rt_gpu_kernels.h) for a
 * device, keeps one copy of each distinct kernel, deals the distinct
 * kernels into at most RT_MODEL_MAX_PART NVRTC programs ("parts") and
 * compiles the parts concurrently, one thread each, for the device's sm_XX
 * (or takes each part's cubin from the on-disk cache when one was made
 * from the same text, options and NVRTC version).  No GPU is needed.
 *
 * Distinct kernels: many launches instantiate a template with the very
 * same defines and differ only in their names (k17_..., k23_..., which
 * carry the node index).  A launch's source is compared with the kernel
 * name and its namespace taken out; launches whose sources then agree (and
 * ask for the same shared memory) all call the kernel of the first of
 * them: its symbol is that first launch's name.  RtKLaunch.name stays each
 * launch's own name, which profiles show; rt_gpu_prog_function() gives the
 * CUfunction a launch calls.
 *
 * The parts depend on the emitted text only: their number is a function of
 * the count of distinct kernels, and the kernels are dealt largest first
 * to the lightest part.  The thread count (RtGpuProg.threads, else
 * $NETC_NVRTC_THREADS, else the usable cores, at most RT_GPU_PROG_THREADS)
 * only decides how many compile at once: the cubins and the kernel-to-part
 * map are the same whatever the machine.
 *
 * The halves are separate for the model writer (netc -o,
 * compiler/cg_model.c), which embeds each part's text and cubin in
 * model.so: rt_gpu_prog_emit() makes the texts, rt_gpu_prog_compile() the
 * cubins; rt_gpu_prog_build_prebuilt() takes an embedded cubin instead of
 * compiling a part whose text is exactly the embedded one. */
#ifndef NETC_RT_GPU_PROG_H
#define NETC_RT_GPU_PROG_H

#include <stddef.h>
#include <stdint.h>

#include "rt_gpu.h"
#include "rt_model.h"

enum { RT_GPU_PROG_THREADS = 16 }; /* compile threads at most */

typedef struct RtGpuProgPart {
  char *source;  /* malloc'd program text of the part's distinct kernels */
  size_t source_len;
  void *cubin;   /* malloc'd; NULL until compiled */
  size_t size;
  int cache_hit; /* the cubin came from the cache */
  int prebuilt;  /* the cubin came from a model.so */
  int nkernel;   /* distinct kernels in it */
} RtGpuProgPart;

/* What launch j of node i calls. */
typedef struct RtGpuProgSym {
  int part;              /* the part (module) that defines it */
  char name[RT_K_NAME];  /* its symbol: the name of the first launch with the same source */
} RtGpuProgSym;

typedef struct RtGpuProg {
  RtKNode *kn;   /* one per node of the graph */
  int nnode;
  char *source;  /* malloc'd: every node's kernels joined, names as emitted (--emit-cuda's text);
                    NULL when no node has a kernel */
  size_t source_len;
  int nlaunch;   /* launches of all nodes */
  int ndistinct; /* distinct kernels among them */
  int *first;    /* per node: index of its first launch in sym; first[nnode] = nlaunch */
  RtGpuProgSym *sym;
  int npart;     /* 0 when no node has a kernel */
  RtGpuProgPart part[RT_MODEL_MAX_PART];
  int threads;   /* compile threads; 0: $NETC_NVRTC_THREADS, else the cores */
  int cache_hit; /* every part came from the cache */
  int prebuilt;  /* every part came from a model.so (rt_gpu_prog_build_prebuilt) */
  RtCudaModule *mod[RT_MODEL_MAX_PART]; /* after rt_gpu_prog_load */
} RtGpuProg;

/* The cache directory (want, else $XDG_CACHE_HOME/netc, else
 * ~/.cache/netc) into dir, created when missing; "" when there is none. */
void rt_gpu_prog_cache_dir(const char *want, char *dir, size_t len);
RtCudaStatus rt_gpu_prog_build(const IrGraph *g, int64_t batch, const RtGpuDevice *dev, const char *cache_dir,
                               RtGpuProg *out, char *err, size_t errlen);
/* Only the emission: kn, source, sym and the parts' texts, no cubin. */
RtCudaStatus rt_gpu_prog_emit(const IrGraph *g, int64_t batch, const RtGpuDevice *dev, RtGpuProg *out, char *err,
                              size_t errlen);
/* The cubin of every part that has none yet, for dev (from the cache or
 * NVRTC, parts compiled concurrently).  RT_CUDA_ENODRIVER when NVRTC cannot
 * be loaded.  On failure the message is the lowest failing part's. */
RtCudaStatus rt_gpu_prog_compile(const IrGraph *g, int64_t batch, const RtGpuDevice *dev, const char *cache_dir,
                                 RtGpuProg *p, char *err, size_t errlen);
/* rt_gpu_prog_build, but part k takes pre->cubin[k] (part.prebuilt = 1)
 * when pre->source[k] equals its emitted text and pre_arch is the device's
 * sm_XX; the other parts are compiled as rt_gpu_prog_build does.  pre may
 * be NULL. */
RtCudaStatus rt_gpu_prog_build_prebuilt(const IrGraph *g, int64_t batch, const RtGpuDevice *dev,
                                        const char *cache_dir, const RtModelProgram *pre, const char *pre_arch,
                                        RtGpuProg *out, char *err, size_t errlen);
/* Loads every part's cubin as a module in ctx (unloaded by rt_gpu_prog_free). */
RtCudaStatus rt_gpu_prog_load(RtGpuProg *p, RtCudaCtx *ctx, char *err, size_t errlen);
/* The function launch j of node i calls, from the loaded modules. */
RtCudaStatus rt_gpu_prog_function(const RtGpuProg *p, int node, int launch, CUfunction *fn, char *err,
                                  size_t errlen);
void rt_gpu_prog_free(RtGpuProg *p); /* takes NULL; leaves *p empty */

#endif
