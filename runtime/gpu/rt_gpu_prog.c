/* rt_gpu_prog.c - a graph's kernel programs loaded as modules
 * (rt_gpu_prog.h). */
#include "rt_gpu_prog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_cache.h"
#include "cg_templates.h"

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

RtCudaStatus rt_gpu_prog_template(const char *file, const CgDefine *d, int nd, char **src, char *err, size_t errlen) {
  *src = NULL;
  const char *text = cg_templates_text(file), *common = cg_templates_text("common.cu");
  if (!text || !common) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "codegen_templates/%s is not embedded", file);
  size_t lc = strlen(common), lt = strlen(text);
  char *joined = malloc(lc + lt + 2);
  if (!joined) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "out of host memory for %s", file);
  memcpy(joined, common, lc);
  joined[lc] = '\n';
  memcpy(joined + lc + 1, text, lt + 1);
  char path[128];
  snprintf(path, sizeof path, "codegen_templates/%s", file);
  CgStatus s = cg_nvrtc_instantiate(path, joined, d, nd, src, err, errlen);
  free(joined);
  return rt_gpu_status_of_cg(s);
}

RtCudaStatus rt_gpu_prog_kernel(RtCudaCtx *ctx, const char *source, const char *name, const char *kind,
                                const char *cache_dir, const char *what, int64_t total, int block, RtCudaModule **mod,
                                CUfunction *fn, unsigned *grid, char *err, size_t errlen) {
  const RtCudaApi *api = rt_cuda_ctx_api(ctx);
  int sms = 0;
  RtCudaStatus s = RT_CU(api, DeviceGetAttribute,
                         (&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, rt_cuda_ctx_device(ctx)), what, err, errlen);
  if (!s) s = rt_gpu_prog_module(ctx, source, name, kind, cache_dir, what, mod, err, errlen);
  if (!s) s = rt_cuda_module_function(*mod, name, fn, err, errlen);
  int64_t blocks = (total + block - 1) / block, cap = sms > 0 ? (int64_t)sms * 16 : 4096;
  *grid = (unsigned)(blocks < cap ? (blocks > 0 ? blocks : 1) : cap);
  return s;
}

const char *rt_gpu_storage_type(IrDtype dt) {
  return dt == IR_DT_F32 ? "float" : dt == IR_DT_F16 ? "netc_f16" : dt == IR_DT_BF16 ? "netc_bf16" : NULL;
}

int rt_gpu_dtype_is_int(IrDtype dt) { return dt == IR_DT_I32 || dt == IR_DT_I64 || dt == IR_DT_U8; }

void rt_gpu_prog_unload(RtCudaModule *mod[CG_MAX_PART]) {
  for (int k = 0; k < CG_MAX_PART; k++) {
    rt_cuda_module_free(mod[k]);
    mod[k] = NULL;
  }
}
