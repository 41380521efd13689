/* rt_gpu_optim.h - multi-tensor runs on the device (internal to the GPU
 * executor): the runs code generation found (compiler/codegen/cg_multi.h)
 * compiled through the one cache path and loaded, and the pointer table
 * each run's kernel reads, uploaded once.
 *
 * It knows nothing of the executor: it takes the graph, the device
 * addresses of its values and a context, and tells which runs are usable.
 * The executor (rt_gpu.c) then launches a usable run's kernel at the run's
 * head and nothing at its other nodes. */
#ifndef NETC_RT_GPU_OPTIM_H
#define NETC_RT_GPU_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "cg_multi.h"
#include "ir.h"
#include "rt_cuda.h"

typedef struct RtGpuOptim RtGpuOptim;

/* The runs of g at batch, made for ctx's device: *out NULL (and no error)
 * when there is none or NVRTC cannot be loaded (the nodes then launch one
 * by one).  addr[v]: value v's device address (0: none); a run with a
 * missing or unaligned pointer is left unused.  cache_dir as
 * RtGpuOpts.cache_dir. */
RtCudaStatus rt_gpu_optim_new(const IrGraph *g, int64_t batch, RtCudaCtx *ctx, const CUdeviceptr *addr,
                              const char *cache_dir, RtGpuOptim **out, char *err, size_t errlen);
void rt_gpu_optim_free(RtGpuOptim *o); /* takes NULL; needs the context current */
/* The usable run node is in (-1: none), and whether node is its head. */
int rt_gpu_optim_run_of(const RtGpuOptim *o, int node, int *head);
/* Run k, its kernel and the device address of its pointer table (the
 * kernel's first argument). */
const CgMultiRun *rt_gpu_optim_run(const RtGpuOptim *o, int k, CUfunction *fn, CUdeviceptr *table);

#endif
