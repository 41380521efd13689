/* rt_gpu_optim.c - multi-tensor runs on the device (rt_gpu_optim.h).
 *
 * The runs' kernels are one NVRTC program of their own, compiled when the
 * executor is made (after the step's program) through the one cache path
 * (cg_cache.h) as <cache>/netc-multi-<key>.cubin.  Each run's kernel reads
 * its tensors' pointers from a table in one small device allocation owned
 * here (an entry per tensor: {w, g, buf} or {x, y}, 8 bytes a pointer),
 * written once. */
#include "rt_gpu_optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_gpu_prog.h"

struct RtGpuOptim {
  CgMultiPlan plan;
  const RtCudaApi *api;
  RtCudaModule *mod;
  CUdeviceptr table;
  CUfunction *fn;  /* per run */
  int *use;        /* per run: usable (every pointer present and 16-byte aligned) */
  size_t *tab_off; /* per run: its entries' offset in the table */
  int *run_of;     /* per node: its usable run, or -1 */
};

/* Value ids whose pointers make up run r's table entry for its k-th node. */
static int entry_values(const IrGraph *g, const CgMultiRun *r, int k, int v[3]) {
  const IrNode *n = &g->node[r->node[k]];
  if (r->kind == CG_MULTI_SGD) {
    v[0] = n->in[0], v[1] = n->in[1], v[2] = n->in[2];
    return 3;
  }
  v[0] = n->in[0], v[1] = n->out[0];
  return 2;
}

/* The pointer tables of the runs, uploaded; use[k] = 0 for a run with a
 * pointer that is missing or not 16-byte aligned. */
static RtCudaStatus upload_tables(RtGpuOptim *o, const IrGraph *g, const CUdeviceptr *addr, char *err, size_t errlen) {
  const CgMultiPlan *p = &o->plan;
  size_t n = 0;
  for (int k = 0; k < p->nrun; k++) n += (size_t)p->run[k].n * 3;
  uint64_t *host = calloc(n ? n : 1, sizeof *host);
  if (!host) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory");
  size_t at = 0;
  for (int k = 0; k < p->nrun; k++) {
    o->tab_off[k] = at * sizeof *host;
    o->use[k] = 1;
    for (int j = 0; j < p->run[k].n; j++) {
      int v[3], m = entry_values(g, &p->run[k], j, v);
      for (int e = 0; e < m; e++) {
        CUdeviceptr a = addr[v[e]];
        if (!a || a % 16) o->use[k] = 0;
        host[at++] = (uint64_t)a;
      }
    }
  }
  RtCudaStatus s =
      RT_CU(o->api, MemAlloc, (&o->table, at ? at * sizeof *host : 16), "multi-tensor tables", err, errlen);
  if (s) o->table = 0;
  if (!s && at) s = RT_CU(o->api, MemcpyHtoD, (o->table, host, at * sizeof *host), "multi-tensor tables", err, errlen);
  free(host);
  return s;
}

RtCudaStatus rt_gpu_optim_new(const IrGraph *g, int64_t batch, RtCudaCtx *ctx, const CUdeviceptr *addr,
                              const char *cache_dir, RtGpuOptim **out, char *err, size_t errlen) {
  *out = NULL;
  RtGpuOptim *o = calloc(1, sizeof *o);
  if (!o) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory");
  o->api = rt_cuda_ctx_api(ctx);
  CgMultiPlan *p = &o->plan;
  if (cg_multi_plan(g, batch, p, err, errlen)) {
    rt_gpu_optim_free(o);
    return RT_CUDA_EARG;
  }
  if (!p->nrun) {
    rt_gpu_optim_free(o);
    return RT_CUDA_OK;
  }
  char name[160];
  snprintf(name, sizeof name, "netc_%s_multi", g->name ? g->name : "graph");
  RtCudaStatus s =
      rt_gpu_prog_module(ctx, p->source, name, "multi", cache_dir, "the multi-tensor kernels", &o->mod, err, errlen);
  if (s == RT_CUDA_ENODRIVER) { /* no NVRTC here: the nodes launch one by one */
    rt_gpu_optim_free(o);
    return RT_CUDA_OK;
  }
  o->fn = calloc((size_t)p->nrun, sizeof *o->fn);
  o->use = calloc((size_t)p->nrun, sizeof *o->use);
  o->tab_off = calloc((size_t)p->nrun, sizeof *o->tab_off);
  o->run_of = malloc(sizeof *o->run_of * (size_t)(g->nnode + 1));
  if (!s && (!o->fn || !o->use || !o->tab_off || !o->run_of))
    s = rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory");
  for (int k = 0; !s && k < p->nrun; k++)
    s = rt_cuda_module_function(o->mod, p->run[k].launch.name, &o->fn[k], err, errlen);
  if (!s) s = upload_tables(o, g, addr, err, errlen);
  if (s) {
    rt_gpu_optim_free(o);
    return s;
  }
  for (int i = 0; i < g->nnode; i++) o->run_of[i] = -1;
  for (int k = 0; k < p->nrun; k++)
    for (int j = 0; o->use[k] && j < p->run[k].n; j++) o->run_of[p->run[k].node[j]] = k;
  *out = o;
  return RT_CUDA_OK;
}

void rt_gpu_optim_free(RtGpuOptim *o) {
  if (!o) return;
  if (o->table) o->api->MemFree(o->table);
  rt_cuda_module_free(o->mod);
  cg_multi_free(&o->plan);
  free(o->fn);
  free(o->use);
  free(o->tab_off);
  free(o->run_of);
  free(o);
}

int rt_gpu_optim_run_of(const RtGpuOptim *o, int node, int *head) {
  int k = o ? o->run_of[node] : -1;
  if (head) *head = k >= 0 && o->plan.run[k].node[0] == node;
  return k;
}

const CgMultiRun *rt_gpu_optim_run(const RtGpuOptim *o, int k, CUfunction *fn, CUdeviceptr *table) {
  if (fn) *fn = o->fn[k];
  if (table) *table = o->table + o->tab_off[k];
  return &o->plan.run[k];
}
