/* rt_gpu_prog.h - a graph's kernel programs (compiler/codegen/cg_prog.h)
 * on the device: each part's cubin loaded as a module, and the function
 * each launch calls.  Also the one place a code generator's status
 * (CgStatus) becomes the executor's (RtCudaStatus).  Internal to the GPU
 * executor. */
#ifndef NETC_RT_GPU_PROG_H
#define NETC_RT_GPU_PROG_H

#include <stddef.h>

#include "cg_nvrtc.h"
#include "cg_prog.h"
#include "ir.h"
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
/* One of codegen_templates/ (file, e.g. "input_u8.cu") after common.cu,
 * instantiated with the nd defines d: *src malloc'd.  No GPU needed. */
RtCudaStatus rt_gpu_prog_template(const char *file, const CgDefine *d, int nd, char **src, char *err, size_t errlen);
/* A kernel of the executor's own: source compiled and loaded as
 * rt_gpu_prog_module does, *fn its function `name`, and *grid the blocks of
 * `block` threads for `total` threads, at most 16 per multiprocessor (a
 * grid-stride loop does the rest). */
RtCudaStatus rt_gpu_prog_kernel(RtCudaCtx *ctx, const char *source, const char *name, const char *kind,
                                const char *cache_dir, const char *what, int64_t total, int block, RtCudaModule **mod,
                                CUfunction *fn, unsigned *grid, char *err, size_t errlen);
/* The storage type a template names for a float dtype ("float",
 * "netc_f16", "netc_bf16"; NULL for others), and whether dt is an integer. */
const char *rt_gpu_storage_type(IrDtype dt);
int rt_gpu_dtype_is_int(IrDtype dt);
/* Unloads the modules (each may be NULL) and leaves mod[] empty. */
void rt_gpu_prog_unload(RtCudaModule *mod[CG_MAX_PART]);

#endif
