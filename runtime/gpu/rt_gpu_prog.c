/* rt_gpu_prog.c - a graph's kernel programs loaded as modules
 * (rt_gpu_prog.h). */
#include "rt_gpu_prog.h"

#include <stdio.h>
#include <stdlib.h>

#include "cg_cache.h"

RtCudaStatus rt_gpu_status_of_cg(CgStatus s) {
  switch (s) {
  case CG_OK: return RT_CUDA_OK;
  case CG_ENOLIB: return RT_CUDA_ENODRIVER;
  case CG_ENOMEM: return RT_CUDA_ENOMEM;
  case CG_EARG: return RT_CUDA_EARG;
  case CG_ECOMPILE:
  case CG_ECALL: break;
  }
  return RT_CUDA_ECALL;
}

RtCudaStatus rt_gpu_prog_load(const CgProg *p, RtCudaModule *mod[CG_MAX_PART], RtCudaCtx *ctx, char *err,
                              size_t errlen) {
  for (int k = 0; k < p->npart; k++) {
    char what[96];
    snprintf(what, sizeof what, "the step's kernels, program %d of %d", k + 1, p->npart);
    if (!p->part[k].cubin) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: %s is not compiled", what);
    RtCudaStatus s = rt_cuda_module_init(&mod[k], ctx, p->part[k].cubin, what, err, errlen);
    if (s) return s;
  }
  return RT_CUDA_OK;
}

RtCudaStatus rt_gpu_prog_function(const CgProg *p, RtCudaModule *const mod[CG_MAX_PART], int node, int launch,
                                  CUfunction *fn, char *err, size_t errlen) {
  const CgProgSym *s = cg_prog_sym(p, node, launch);
  if (!s) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: node %d has no launch %d", node, launch);
  if (s->part < 0 || s->part >= p->npart || !mod[s->part])
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: kernel %s but no program", p->kn[node].launch[launch].name);
  return rt_cuda_module_function(mod[s->part], s->name, fn, err, errlen);
}

RtCudaStatus rt_gpu_prog_module(RtCudaCtx *ctx, const char *source, const char *name, const char *kind,
                                const char *cache_dir, const char *what, RtCudaModule **mod, char *err, size_t errlen) {
  const RtCudaApi *api = rt_cuda_ctx_api(ctx);
  CUdevice dev = rt_cuda_ctx_device(ctx);
  int cc[2] = {0, 0};
  RtCudaStatus s = RT_CU(api, DeviceGetAttribute, (&cc[0], CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                         "the device's architecture", err, errlen);
  if (!s)
    s = RT_CU(api, DeviceGetAttribute, (&cc[1], CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
              "the device's architecture", err, errlen);
  if (s) return s;
  char arch[32];
  snprintf(arch, sizeof arch, "sm_%d%d", cc[0], cc[1]);
  CgCompile c = {.source = source, .name = name, .arch = arch, .kind = kind};
  void *cubin = NULL;
  size_t size = 0;
  s = rt_gpu_status_of_cg(cg_cache_compile(&c, cache_dir, &cubin, &size, NULL, err, errlen));
  if (!s) s = rt_cuda_module_init(mod, ctx, cubin, what, err, errlen);
  free(cubin);
  return s;
}

void rt_gpu_prog_unload(RtCudaModule *mod[CG_MAX_PART]) {
  for (int k = 0; k < CG_MAX_PART; k++) {
    rt_cuda_module_free(mod[k]);
    mod[k] = NULL;
  }
}
