/* rt_gpu_prog.h - a graph's kernel programs (compiler/codegen/cg_prog.h)
 * on the device: each part's cubin loaded as a module, and the function
 * each launch calls.  Also the one place a code generator's status
 * (CgStatus) becomes the executor's (RtCudaStatus).  Internal to the GPU
 * executor. */
#ifndef NETC_RT_GPU_PROG_H
#define NETC_RT_GPU_PROG_H

#include <stddef.h>

#include "cg_prog.h"
#include "rt_cuda.h"

/* The executor's status for a code generator's: CG_ENOLIB (no NVRTC) is
 * RT_CUDA_ENODRIVER, CG_ENOMEM RT_CUDA_ENOMEM, CG_EARG RT_CUDA_EARG (a
 * node with no kernel, a bad argument), a failed compile RT_CUDA_ECALL. */
RtCudaStatus rt_gpu_status_of_cg(CgStatus s);

/* Loads every part's cubin of p as a module in ctx, into mod[0..npart). */
RtCudaStatus rt_gpu_prog_load(const CgProg *p, RtCudaModule *mod[CG_MAX_PART], RtCudaCtx *ctx, char *err,
                              size_t errlen);
/* The function launch j of node i calls, from the loaded modules. */
RtCudaStatus rt_gpu_prog_function(const CgProg *p, RtCudaModule *const mod[CG_MAX_PART], int node, int launch,
                                  CUfunction *fn, char *err, size_t errlen);
/* One program of the executor's own (the multi-tensor, accumulation and
 * input kernels) compiled for ctx's device through the one cache path
 * (cg_cache.h; kind names its files, cache_dir as RtGpuOpts.cache_dir) and
 * loaded as *mod; what says what it is for in messages. */
RtCudaStatus rt_gpu_prog_module(RtCudaCtx *ctx, const char *source, const char *name, const char *kind,
                                const char *cache_dir, const char *what, RtCudaModule **mod, char *err, size_t errlen);
/* Unloads the modules (each may be NULL) and leaves mod[] empty. */
void rt_gpu_prog_unload(RtCudaModule *mod[CG_MAX_PART]);

#endif
