/* rt_gpu.c - the GPU executor (rt_gpu.h gives the contract).
 *
 * Device memory is three allocations made once: the activation arena
 * (g->plan_bytes: every ACT and INPUT value at its IrValue.offset), the
 * persistent storage (every PARAM and STATE value, packed at 256-byte
 * boundaries) and the scratch (the largest node scratch, then the largest
 * cuDNN workspace: nodes run one after another on one stream, so they share
 * it; the side stream's nodes, below, have a scratch and workspace of their
 * own after those).  Every address a step uses is therefore fixed when the executor is
 * made: the kernel parameters are resolved once into each launch's argument
 * block, and a CUDA graph captured from one step stays valid for every
 * later step; per-step inputs are rewritten in place with rt_gpu_write.
 *
 * A step is, for each node in order, its cuDNN convolution (when it has
 * one) and then its launches, all on the executor's stream with no host
 * synchronization.  The weight gradients (conv2d_bwd_weight) go to a
 * second stream, forked from the main one by an event at their place and
 * joined back by another right before the first later node that touches
 * their memory (rt_gpu_branch.h; $NETC_BRANCHES=0 keeps them on the main
 * stream): captured, the step graph gets a branch that overlaps the data
 * gradients.  With a data-parallel all-reduce set (rt_gpu_allreduce.c),
 * the whole step also forks each bucket of gradients to a third stream
 * for its NCCL all-reduce once the bucket is complete, and joins that
 * stream right before the optimizer section.  Every launched range of
 * nodes ends with all branches joined, so the main stream alone orders a
 * step against what follows it.  Host
 * copies go through a staging buffer that converts
 * float <-> f16/bf16/i8 and int64 <-> i32/u8 and synchronize the stream, so
 * they see (and are seen by) the steps in order. */
#include "rt_gpu.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cudnn.h"
#include "rt_gpu_impl.h"
#include "rt_gpu_optim.h"
#include "cg_cache.h"
#include "rt_gpu_prog.h"
#include "rt_ref.h"

/* No workspace limit by default: on the H200 at ResNet-50 batch 256 a cap
 * of 256 MiB saved 0.77 GiB and cost 8% of the step (the weight-gradient
 * engines cuDNN ranks first want about 1 GiB); docs/PERF.md. */
enum { ALIGN = 256, SMEM_DEFAULT = 48 * 1024, WORKSPACE_CAP_MB = 0 };

static size_t align_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static int64_t type_numel(const IrType *t, int64_t batch) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    int64_t d = t->dim[i] == IR_DIM_N ? batch : t->dim[i];
    if (d < 0 || (d && n > INT64_MAX / 16 / d)) return -1;
    n *= d;
  }
  return n;
}

/* cuMemAlloc with an out-of-memory message that says what was asked and
 * what is free. */
static RtCudaStatus dev_alloc(RtGpu *x, CUdeviceptr *p, size_t bytes, const char *what, char *err, size_t errlen) {
  const double gib = 1073741824.0;
  if (x->memory_limit && (bytes > x->memory_limit || x->held > x->memory_limit - bytes))
    return rt_cuda_fail(RT_CUDA_EDEVMEM, err, errlen,
                        "over the memory limit: the %s needs %.2f GiB at batch %lld beside the %.2f GiB held, and "
                        "the limit is %.2f GiB",
                        what, bytes / gib, (long long)x->batch, x->held / gib, x->memory_limit / gib);
  CUresult r = x->api->MemAlloc(p, bytes);
  if (r == CUDA_SUCCESS) x->held += bytes;
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    size_t free_b = 0, total = 0;
    x->api->MemGetInfo(&free_b, &total);
    return rt_cuda_fail(RT_CUDA_EDEVMEM, err, errlen,
                        "out of GPU memory: the %s needs %zu bytes (%.2f GiB) at batch %lld, but only %zu bytes "
                        "(%.2f GiB) of %.2f GiB are free (try a smaller batch)",
                        what, bytes, bytes / 1073741824.0, (long long)x->batch, free_b, free_b / 1073741824.0,
                        total / 1073741824.0);
  }
  *p = r == CUDA_SUCCESS ? *p : 0;
  return rt_cuda_check(x->api, r, __FILE__, __LINE__, "cuMemAlloc(p, bytes)", what, err, errlen);
}

/* Addresses of every value: ACT/INPUT in the arena, the rest packed in the
 * persistent storage (allocated here). */
static RtCudaStatus place_values(RtGpu *x, char *err, size_t errlen) {
  const IrGraph *g = x->g;
  size_t persist = 0;
  size_t *poff = calloc((size_t)g->nval + 1, sizeof *poff);
  if (!poff) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory");
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    x->numel[v] = type_numel(&val->type, x->batch);
    int64_t vb = ir_value_bytes(g, v, x->batch);
    size_t bytes = (size_t)vb;
    if (x->numel[v] < 0 || vb < 0 || ir_dtype_size(val->type.dtype) == 0) {
      free(poff);
      return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: value %%%d has a shape or dtype the GPU cannot hold", v);
    }
    if (val->kind == IR_VAL_ACT || (val->kind == IR_VAL_INPUT && val->offset >= 0)) {
      if (val->offset < 0) continue; /* never read: the plan gave it no place */
      if ((uint64_t)val->offset + bytes > (uint64_t)g->plan_bytes) {
        free(poff);
        return rt_cuda_fail(RT_CUDA_EARG, err, errlen,
                            "rt_gpu: value %%%d (%zu bytes at offset %lld) lies outside the %lld-byte arena", v, bytes,
                            (long long)val->offset, (long long)g->plan_bytes);
      }
    } else {
      poff[v] = persist;
      persist += align_up(bytes ? bytes : 1);
    }
  }
  x->persist_bytes = persist ? persist : ALIGN;
  RtCudaStatus s = dev_alloc(x, &x->persist, x->persist_bytes, "parameter and state storage", err, errlen);
  if (!s)
    s = RT_CU(x->api, MemsetD8Async, (x->persist, 0, x->persist_bytes, x->stream), "zeroing the parameters", err,
              errlen);
  for (int v = 0; !s && v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT || (val->kind == IR_VAL_INPUT && val->offset >= 0))
      x->addr[v] = val->offset >= 0 ? x->arena + (CUdeviceptr)val->offset : 0;
    else
      x->addr[v] = x->persist + poff[v];
  }
  free(poff);
  return s;
}

/* Scratch bytes node i uses: its launches', and the prologue's activation
 * when a kernel writes it (the plan does not apply the prologue). */
/* The end of node k's scratch: its launches', and past them the copies
 * of those of the prologue's activation, the i8 residual and the
 * requantized result a kernel writes (pro, rin, qout: its plan leaves that
 * part to a kernel). */
static size_t scratch_end(const CgKNode *k, int pro, int rin, int qout) {
  size_t n = k->scratch_bytes;
  if (pro && k->pro_bytes && k->pro_offset + k->pro_bytes > n) n = k->pro_offset + k->pro_bytes;
  if (rin && k->rin_bytes && k->rin_offset + k->rin_bytes > n) n = k->rin_offset + k->rin_bytes;
  if (qout && k->qout_bytes && k->qout_offset + k->qout_bytes > n) n = k->qout_offset + k->qout_bytes;
  return n;
}

static size_t node_scratch(const RtGpu *x, int i) {
  const GpuConv *c = &x->conv[i];
  return scratch_end(&x->prog.kn[i], !c->pro_fused, !c->res_fused, !c->qout_fused);
}

/* Device address of a kernel argument of node i. */
static RtCudaStatus resolve_arg(RtGpu *x, int i, const CgKArg *a, CUdeviceptr *out, char *err, size_t errlen) {
  const IrNode *n = &x->g->node[i];
  const char *nm = n->name ? n->name : "";
  const char *op = ir_op_info(n->op) ? ir_op_info(n->op)->name : "?";
  if (a->kind == CG_KARG_KEPT) {
    size_t have = x->prog.kn[i].kept_bytes;
    if (a->offset >= have || !x->kept)
      return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: node %d (%s %s): kept offset %zu beyond its %zu bytes", i,
                          op, nm, a->offset, have);
    *out = x->kept + x->kept_at[i] + a->offset;
    return RT_CUDA_OK;
  }
  if (a->kind == CG_KARG_SCRATCH) {
    size_t have = node_scratch(x, i);
    if (a->offset >= have)
      return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: node %d (%s %s): scratch offset %zu beyond its %zu bytes",
                          i, op, nm, a->offset, have);
    *out = (x->conv[i].side ? x->side_scratch : x->scratch) + a->offset;
    return RT_CUDA_OK;
  }
  int count = a->kind == CG_KARG_IN ? n->nin : n->nout;
  if ((a->kind != CG_KARG_IN && a->kind != CG_KARG_OUT) || a->index < 0 || a->index >= count)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: node %d (%s %s): argument %s %d does not exist", i, op, nm,
                        a->kind == CG_KARG_IN ? "input" : "output", a->index);
  int v = a->kind == CG_KARG_IN ? n->in[a->index] : n->out[a->index];
  *out = x->addr[v];
  if (!*out)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: node %d (%s %s): value %%%d has no memory", i, op, nm, v);
  return RT_CUDA_OK;
}

/* The buffers of node i's data gradient with cuDNN's batch-norm backward
 * (conv.dbn) into io->bn. */
static RtCudaStatus resolve_bn(RtGpu *x, int i, const CgKNode *k, RtConvIo *io, char *err, size_t errlen) {
  CUdeviceptr *to[CG_KBN_COUNT] = {
      [CG_KBN_Z] = &io->bn.z,         [CG_KBN_MEAN] = &io->bn.mean, [CG_KBN_INVSTD] = &io->bn.invstd,
      [CG_KBN_GAMMA] = &io->bn.gamma, [CG_KBN_BETA] = &io->bn.beta, [CG_KBN_DGAMMA] = &io->bn.dgamma,
      [CG_KBN_DBETA] = &io->bn.dbeta, [CG_KBN_ABC] = &io->bn.abc};
  RtCudaStatus s = RT_CUDA_OK;
  for (int b = 0; !s && b < CG_KBN_COUNT; b++) s = resolve_arg(x, i, &k->conv_bn[b], to[b], err, errlen);
  return s;
}

/* Whether launch l runs, given its node's convolution plan. */
static int launch_runs(const CgKLaunch *l, const GpuConv *c) {
  switch (l->when) {
  case CG_K_ALWAYS: return 1;
  case CG_K_PROLOGUE: return !c->pro_fused;
  case CG_K_EPI_UNFUSED: return !c->epi_fused;
  case CG_K_QOUT_UNFUSED: return !c->qout_fused;
  case CG_K_RES_UNFUSED: return !c->res_fused;
  case CG_K_FUSED: return c->fused;
  default: return !c->fused;
  }
}

/* Launch l of node i, given its plan, as one of the node's list (in_step:
 * x->launch, which rt_gpu_prepare runs whole for a once node) or as one of
 * olaunch (a once launch of a node in the step). */
static int runs_in(const RtGpu *x, int i, const CgKLaunch *l, int in_step) {
  if (!launch_runs(l, &x->conv[i])) return 0;
  return x->once[i] ? in_step : (l->once == 0) == (in_step != 0);
}

/* The function and arguments of launch j of node i into *L. */
static RtCudaStatus prepare_launch(RtGpu *x, int i, int j, GpuLaunch *L, char *err, size_t errlen) {
  L->l = &x->prog.kn[i].launch[j];
  if (L->l->nargs < 0 || L->l->nargs > CG_K_MAX_ARGS)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: kernel %s: %d arguments", L->l->name, L->l->nargs);
  RtCudaStatus s = rt_gpu_prog_function(&x->prog, x->mod, i, j, &L->fn, err, errlen);
  if (!s && L->l->smem > SMEM_DEFAULT)
    s = RT_CU(x->api, FuncSetAttribute, (L->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)L->l->smem),
              L->l->name, err, errlen);
  for (int a = 0; !s && a < L->l->nargs; a++) {
    s = resolve_arg(x, i, &L->l->args[a], &L->arg[a], err, errlen);
    L->argp[a] = &L->arg[a];
  }
  return s;
}

/* Kernels from the module, argument blocks and convolution plans (made by
 * plan_convs) for every node; the `once` launches of nodes in the step
 * apart, in olaunch. */
static RtCudaStatus prepare_nodes(RtGpu *x, char *err, size_t errlen) {
  const IrGraph *g = x->g;
  int total = 0, nonce = 0;
  for (int i = 0; i < g->nnode; i++) {
    if (x->prog.kn[i].nlaunch < 0 || x->prog.kn[i].nlaunch > CG_K_MAX_LAUNCH)
      return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: node %d: %d launches", i, x->prog.kn[i].nlaunch);
    x->first[i] = total;
    x->conv[i].pre = 0;
    for (int j = 0; j < x->prog.kn[i].nlaunch; j++) {
      const CgKLaunch *l = &x->prog.kn[i].launch[j];
      int in_step = runs_in(x, i, l, 1);
      total += in_step;
      nonce += runs_in(x, i, l, 0);
      x->conv[i].pre += l->before && in_step;
    }
  }
  x->first[g->nnode] = total;
  x->launch = calloc((size_t)(total ? total : 1), sizeof *x->launch);
  x->olaunch = calloc((size_t)(nonce ? nonce : 1), sizeof *x->olaunch);
  if (!x->launch || !x->olaunch) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory");
  x->nonce += nonce > 0;
  RtCudaStatus s = RT_CUDA_OK;
  for (int i = 0; !s && i < g->nnode; i++) {
    const CgKNode *k = &x->prog.kn[i];
    if (k->has_conv) {
      GpuConv *c = &x->conv[i];
      CgKArg pro_x = {.kind = CG_KARG_SCRATCH, .offset = k->pro_offset};
      CgKArg qout_y = {.kind = CG_KARG_SCRATCH, .offset = k->qout_offset};
      CgKArg rin_res = {.kind = CG_KARG_SCRATCH, .offset = k->rin_offset};
      int materialized = k->conv.prologue && !c->pro_fused, rounded = k->qout_bytes && !c->qout_fused;
      if ((s = resolve_arg(x, i, materialized ? &pro_x : &k->conv_x, &c->io.x, err, errlen)) ||
          (s = resolve_arg(x, i, &k->conv_w, &c->io.w, err, errlen)) ||
          (s = resolve_arg(x, i, rounded ? &qout_y : &k->conv_y, &c->io.y, err, errlen)) ||
          (c->fused && k->conv.genstats && (s = resolve_arg(x, i, &k->conv_stats, &c->io.stats, err, errlen))) ||
          (k->conv.prologue && c->pro_fused && (s = resolve_arg(x, i, &k->conv_sb, &c->io.sb, err, errlen))))
        break;
      int epi = c->epi_fused ? k->conv.epilogue : 0;
      if (((epi & CG_EPI_AFFINE) && (s = resolve_arg(x, i, &k->conv_esb, &c->io.esb, err, errlen))) ||
          ((epi & CG_EPI_RESIDUAL) && (s = resolve_arg(x, i, k->rin_bytes && !c->res_fused ? &rin_res : &k->conv_res,
                                                       &c->io.residual, err, errlen))) ||
          ((epi & CG_EPI_DRELU) && (s = resolve_arg(x, i, &k->conv_mask, &c->io.mask, err, errlen))) ||
          (c->fused && k->conv.dbn && (s = resolve_bn(x, i, k, &c->io, err, errlen))))
        break;
    }
    for (int j = 0, at = x->first[i]; !s && j < k->nlaunch; j++) {
      if (runs_in(x, i, &k->launch[j], 1))
        s = prepare_launch(x, i, j, &x->launch[at++], err, errlen);
      else if (runs_in(x, i, &k->launch[j], 0))
        s = prepare_launch(x, i, j, &x->olaunch[x->nolaunch++], err, errlen);
    }
  }
  return s;
}

enum { PICK_RUNS = 5 };

/* Temporary device buffers for plan_convs' timings, grown as needed and
 * freed when planning ends (the scratch does not exist yet). */
typedef struct PickBufs {
  CUdeviceptr stats, workspace, copy, esb;
  size_t stats_bytes, workspace_bytes, copy_bytes, esb_bytes;
} PickBufs;

/* One timed pair of descriptions and its outcome: the fused plan or not. */
typedef struct PickMemo {
  CgConvDesc fused_desc, plain_desc;
  int fused;
} PickMemo;

static RtCudaStatus pick_grow(RtGpu *x, CUdeviceptr *p, size_t *have, size_t need, char *err, size_t errlen) {
  if (need <= *have) return RT_CUDA_OK;
  if (*p) x->api->MemFree(*p);
  *p = 0, *have = 0;
  RtCudaStatus s = RT_CU(x->api, MemAlloc, (p, need), "timing a convolution's fusion", err, errlen);
  if (!s) s = RT_CU(x->api, MemsetD8Async, (*p, 0, need, x->stream), "timing a convolution's fusion", err, errlen);
  if (!s) *have = need;
  return s;
}

static void pick_bufs_free(RtGpu *x, PickBufs *b) {
  CUdeviceptr all[] = {b->stats, b->workspace, b->copy, b->esb};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]) x->api->MemFree(all[i]);
  memset(b, 0, sizeof *b);
}

/* Milliseconds per device copy of bytes from src into b->copy (mean of
 * PICK_RUNS after one warm-up): the read and write of a tensor that the
 * kernel doing a prologue's or an epilogue's work adds. */
static RtCudaStatus time_copy(RtGpu *x, CUdeviceptr src, size_t bytes, PickBufs *b, float *ms, char *err,
                              size_t errlen) {
  const char *what = "timing an unfused prologue or epilogue";
  CUevent ev[2] = {NULL, NULL};
  RtCudaStatus s = pick_grow(x, &b->copy, &b->copy_bytes, bytes, err, errlen);
  for (int i = 0; !s && i < 2; i++) s = RT_CU(x->api, EventCreate, (&ev[i], CU_EVENT_DEFAULT), what, err, errlen);
  for (int i = 0; !s && i <= PICK_RUNS; i++) {
    if (i == 1) s = RT_CU(x->api, EventRecord, (ev[0], x->stream), what, err, errlen);
    if (!s) s = RT_CU(x->api, MemcpyDtoDAsync, (b->copy, src, bytes, x->stream), what, err, errlen);
  }
  float t = 0;
  if (!s) s = RT_CU(x->api, EventRecord, (ev[1], x->stream), what, err, errlen);
  if (!s) s = RT_CU(x->api, EventSynchronize, (ev[1]), what, err, errlen);
  if (!s) s = RT_CU(x->api, EventElapsedTime, (&t, ev[0], ev[1]), what, err, errlen);
  *ms = t / PICK_RUNS;
  for (int i = 0; i < 2; i++)
    if (ev[i]) x->api->EventDestroy(ev[i]);
  return s;
}

/* Times node i's convolution as planned from desc (fused) against the
 * plan from plain_desc, which leaves out some of what desc fuses, plus what
 * the kernels doing that part move: a copy of x's bytes for a prologue, of
 * the output's for an epilogue (half a copy more for each residual or mask
 * it also reads), half a copy of the output for statistics (one read).
 * On the node's own value addresses (they hold nothing yet) and temporary
 * statistics, scale and bias, workspace and copy buffers; *use_fused =
 * whether the fused one is no slower. */
static RtCudaStatus time_fusion(RtGpu *x, int i, const CgConvDesc *desc, RtConvPlan *fused, size_t ws_fused,
                                const CgConvDesc *plain_desc, RtConvPlan *plain, size_t ws_plain, PickBufs *b,
                                int *use_fused, char *err, size_t errlen) {
  const CgKNode *k = &x->prog.kn[i];
  int e = desc->epilogue;
  RtConvIo io;
  memset(&io, 0, sizeof io);
  size_t ws = ws_fused > ws_plain ? ws_fused : ws_plain, el = ir_dtype_size(desc->dtype);
  size_t x_bytes = (size_t)desc->n * desc->h * desc->w * desc->c * el;
  size_t y_bytes = (size_t)desc->n * desc->ho * desc->wo * desc->k * el;
  RtCudaStatus s;
  if ((s = resolve_arg(x, i, &k->conv_x, &io.x, err, errlen)) ||
      (s = resolve_arg(x, i, &k->conv_w, &io.w, err, errlen)) ||
      (s = resolve_arg(x, i, &k->conv_y, &io.y, err, errlen)) ||
      (desc->prologue && (s = resolve_arg(x, i, &k->conv_sb, &io.sb, err, errlen))) ||
      ((e & CG_EPI_RESIDUAL) && (s = resolve_arg(x, i, &k->conv_res, &io.residual, err, errlen))) ||
      ((e & CG_EPI_DRELU) && (s = resolve_arg(x, i, &k->conv_mask, &io.mask, err, errlen))) ||
      ((e & CG_EPI_AFFINE) &&
       (s = pick_grow(x, &b->esb, &b->esb_bytes, (size_t)cg_conv_esb_floats(desc) * sizeof(float) * (size_t)desc->k,
                      err, errlen))) ||
      (desc->genstats &&
       (s = pick_grow(x, &b->stats, &b->stats_bytes, 2 * sizeof(float) * (size_t)desc->k, err, errlen))) ||
      (ws && (s = pick_grow(x, &b->workspace, &b->workspace_bytes, ws, err, errlen))))
    return s;
  io.esb = e & CG_EPI_AFFINE ? b->esb : 0;
  io.stats = desc->genstats ? b->stats : 0;
  io.workspace = ws ? b->workspace : 0;
  float t_fused = 0, t_plain = 0, t_x = 0, t_y = 0;
  if ((s = rt_cudnn_conv_time(x->dnn, fused, &io, PICK_RUNS, &t_fused, err, errlen))) return s;
  RtConvIo pio = io;
  if (!plain_desc->prologue) pio.sb = 0;
  if (!plain_desc->epilogue) pio.esb = pio.residual = pio.mask = 0;
  if (!plain_desc->genstats) pio.stats = 0;
  int pro = desc->prologue && !plain_desc->prologue, epi = e && !plain_desc->epilogue;
  int stats = desc->genstats && !plain_desc->genstats;
  int epi_y = desc->kind == CG_CONV_FWD; /* a forward epilogue rewrites y, a backward one x */
  if ((s = rt_cudnn_conv_time(x->dnn, plain, &pio, PICK_RUNS, &t_plain, err, errlen)) ||
      ((pro || (epi && !epi_y)) && (s = time_copy(x, io.x, x_bytes, b, &t_x, err, errlen))) ||
      ((stats || (epi && epi_y)) && (s = time_copy(x, io.y, y_bytes, b, &t_y, err, errlen))))
    return s;
  float extra = stats ? t_y / 2 : 0; /* tensors read and written, in copies */
  if (pro) extra += t_x;
  if (epi) extra += (epi_y ? t_y : t_x) * (2 + !!(e & CG_EPI_RESIDUAL) + !!(e & CG_EPI_DRELU)) / 2.0f;
  *use_fused = t_fused <= t_plain + extra;
  if (x->opts.cudnn_verbose)
    fprintf(stderr, "netc: node %d: fused %.4f ms, plain %.4f ms + %.4f ms of kernels: %s\n", i, (double)t_fused,
            (double)t_plain, (double)extra, *use_fused ? "fused" : "plain");
  return RT_CUDA_OK;
}

/* c runs a plan made from desc for a node that asks for want: what the
 * plan itself does (the node's launches do the rest). */
static void take_desc(GpuConv *c, const CgConvDesc *want, const CgConvDesc *desc) {
  c->fused = desc->genstats || desc->dbn;
  c->pro_fused = desc->prologue || !want->prologue;
  c->epi_fused = desc->epilogue || !want->epilogue;
  c->qout_fused = desc->ydtype == want->ydtype;
  c->res_fused = desc->rdtype == want->rdtype && desc->rscale == want->rscale &&
                 (desc->epilogue & CG_EPI_OUTSCALE) == (want->epilogue & CG_EPI_OUTSCALE);
}

/* Whether node i (its fused plan made from fused_desc) keeps that plan or
 * takes plain_desc's (without some of what fused_desc fuses) with the
 * kernels doing that part: timed once per pair of descriptions (memo), the
 * fused plan kept on any failure.  Returns whether it took plain_desc's. */
static int pick_fusion(RtGpu *x, int i, const CgConvDesc *fused_desc, const CgConvDesc *plain_desc, size_t *ws,
                       PickMemo *memo, int *nmemo, PickBufs *b) {
  GpuConv *c = &x->conv[i];
  char err[1024];
  int m = 0;
  while (m < *nmemo && (memcmp(&memo[m].fused_desc, fused_desc, sizeof *fused_desc) ||
                        memcmp(&memo[m].plain_desc, plain_desc, sizeof *plain_desc)))
    m++;
  int use_fused = m < *nmemo ? memo[m].fused : 1;
  if (m < *nmemo && use_fused) return 0;
  RtConvPlan *plain = NULL;
  size_t ws_plain = 0;
  int planned = !rt_cudnn_conv_plan(x->dnn, plain_desc, &plain, &ws_plain, err, sizeof err);
  if (m == *nmemo) {
    if (!planned ||
        time_fusion(x, i, fused_desc, c->plan, *ws, plain_desc, plain, ws_plain, b, &use_fused, err, sizeof err))
      use_fused = 1;
    memo[*nmemo].fused_desc = *fused_desc, memo[*nmemo].plain_desc = *plain_desc, memo[*nmemo].fused = use_fused;
    ++*nmemo;
  }
  if (use_fused || !planned) return 0;
  c->plan = plain, *ws = ws_plain;
  take_desc(c, &x->prog.kn[i].conv, plain_desc);
  return 1;
}

/* Every node's cuDNN plan, into x->conv; *ws_max = the largest workspace.
 * A convolution gets the most fused plan cuDNN has an engine for, trying
 * in order: its description (statistics and prologue as the node asks),
 * without the prologue, then plain; the node runs the launches that make
 * up for what its plan leaves out.  Where a fused prologue, epilogue or
 * GenStats plans, it is timed against the plan without it plus the kernel
 * doing that part (pick_fusion), and the faster is kept. */
static RtCudaStatus plan_convs(RtGpu *x, size_t *ws_max, char *err, size_t errlen) {
  *ws_max = 0;
  /* Switches for comparisons, each "0" to turn its fusion off: GenStats
   * (off in the deterministic mode too: the fused sums are added in no fixed
   * order; on the H200 a replay of the same step differs in the last bits,
   * though cuDNN notes no NONDETERMINISTIC on the engine), the prologue
   * (cuDNN's ConvBNfprop and ConvBNwgrad; a kernel writes the activation
   * first instead), the epilogue (its own kernel after), and the timing
   * (every fusion cuDNN plans kept). */
  int stats_ok = !x->opts.cudnn_deterministic && x->opts.genstats;
  int pro_ok = x->opts.prologue, epi_ok = x->opts.epilogue;
  /* cuDNN's DgradDreluBNBwdWeight (NETC_DBN=0 turns it off; off in the
   * deterministic mode, its sums have no fixed order): where cuDNN has no
   * engine for it (bf16 on cuDNN 9.14), the batch norm's backward kernels
   * run on the plain data gradient. */
  int dbn_ok = x->opts.dbn && !x->opts.cudnn_deterministic;
  int pick = x->opts.fusion_pick, nmemo = 0;
  PickMemo *memo = pick ? calloc(2 * (size_t)x->g->nnode + 1, sizeof *memo) : NULL;
  PickBufs bufs;
  memset(&bufs, 0, sizeof bufs);
  RtCudaStatus s = RT_CUDA_OK;
  for (int i = 0; !s && i < x->g->nnode; i++) {
    if (!x->prog.kn[i].has_conv) continue;
    const CgConvDesc *want = &x->prog.kn[i].conv;
    CgConvDesc cand[3] = {*want, *want, *want};
    cand[0].genstats = cand[1].genstats = want->genstats && stats_ok;
    cand[0].dbn = cand[1].dbn = want->dbn && dbn_ok;
    cand[0].prologue = want->prologue && pro_ok;
    cand[1].prologue = cand[2].prologue = 0;
    cand[0].epilogue = cand[1].epilogue = epi_ok ? want->epilogue : 0;
    cand[2].genstats = cand[2].epilogue = cand[2].dbn = 0;
    /* an i8 or f8e4m3 convolution dequantizes in its epilogue: it has no other plan; one whose result is
     * requantized to i8 (pass requant) may write it in f16 for a launch to round (QOUT_UNFUSED) */
    if (want->dtype == IR_DT_I8 || want->dtype == IR_DT_F8E4M3) {
      cand[0] = cand[1] = cand[2] = *want;
      int copy = x->prog.kn[i].rin_bytes != 0; /* a residual an f16 copy can stand in for (RES_UNFUSED) */
      if (copy) cand[1].rdtype = cand[2].rdtype = IR_DT_F16, cand[1].rscale = cand[2].rscale = 0;
      /* the out scale's form (cg_conv.h) has the residual as it is; the plans without it read the copy */
      for (int f = 1; copy && f < 3; f++) cand[f].epilogue &= ~CG_EPI_OUTSCALE;
      if (want->ydtype == IR_DT_I8) cand[copy ? 2 : 1].ydtype = cand[2].ydtype = IR_DT_F16;
    }
    GpuConv *c = &x->conv[i];
    size_t ws = 0;
    s = RT_CUDA_EARG;
    int t = 0;
    for (; t < 3 && s; t++) {
      if (t && !memcmp(&cand[t], &cand[t - 1], sizeof cand[t])) continue;
      s = rt_cudnn_conv_plan(x->dnn, &cand[t], &c->plan, &ws, err, errlen);
      take_desc(c, want, &cand[t]);
    }
    if (s) break;
    CgConvDesc got = cand[t - 1];
    /* not timed: a convolution on scratch copies (an FP8 gradient's widened operands; the scratch is not
     * allocated yet), or of quantized values (its other plan writes f16 where y holds i8) */
    const CgKNode *kn = &x->prog.kn[i];
    int timed = memo && kn->conv_x.kind != CG_KARG_SCRATCH && kn->conv_w.kind != CG_KARG_SCRATCH &&
                kn->conv_y.kind != CG_KARG_SCRATCH && want->dtype != IR_DT_I8 && want->dtype != IR_DT_F8E4M3;
    if (timed && t == 1 && cand[0].prologue && x->prog.kn[i].pro_bytes) {
      if (pick_fusion(x, i, &cand[0], &cand[1], &ws, memo, &nmemo, &bufs)) got = cand[1];
    } else if (timed && t == 1 && cand[0].epilogue) {
      if (pick_fusion(x, i, &cand[0], &cand[2], &ws, memo, &nmemo, &bufs)) got = cand[2];
    }
    /* statistics from the convolution against the plain convolution and
     * the statistics kernel: for some shapes (grouped convolutions with
     * few channels a group) cuDNN's only GenStats engine is many times
     * slower than its plain convolution */
    if (timed && got.genstats && !got.prologue) {
      CgConvDesc nostats = got;
      nostats.genstats = 0;
      pick_fusion(x, i, &got, &nostats, &ws, memo, &nmemo, &bufs);
    }
    c->ws = ws;
    if (ws > *ws_max) *ws_max = ws;
  }
  pick_bufs_free(x, &bufs);
  free(memo);
  return s;
}

static RtCudaStatus device_of(RtGpu *x, CgDevice *d, char *err, size_t errlen) {
  CUdevice dev = rt_cuda_ctx_device(x->ctx);
  const struct {
    CUdevice_attribute attr;
    int *v;
  } A[] = {
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &d->sm_count},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &d->max_threads_per_block},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &d->max_shared_per_block},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &d->cc_major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &d->cc_minor},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, &d->max_threads_per_sm},
  };
  d->opts = &x->opts;
  for (size_t i = 0; i < sizeof A / sizeof A[0]; i++) {
    RtCudaStatus s = RT_CU(x->api, DeviceGetAttribute, (A[i].v, A[i].attr, dev), "device attributes", err, errlen);
    if (s) return s;
  }
  return RT_CUDA_OK;
}

/* Every node's kept memory (CgKNode.kept_bytes) in one allocation, before
 * the workspace limit is worked out (it counts what is held). */
static RtCudaStatus alloc_kept(RtGpu *x, char *err, size_t errlen) {
  x->kept_at = calloc((size_t)x->g->nnode + 1, sizeof *x->kept_at);
  if (!x->kept_at) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory");
  size_t total = 0;
  for (int i = 0; i < x->g->nnode; i++) {
    x->kept_at[i] = total;
    total += align_up(x->prog.kn[i].kept_bytes);
  }
  x->kept_bytes = total;
  return total ? dev_alloc(x, &x->kept, total, "batch-norm coefficients kept between steps", err, errlen) : RT_CUDA_OK;
}

/* The cuDNN workspace limit: the cudnn_workspace_mb option (0: none), else
 * WORKSPACE_CAP_MB (0: none).  The workspace is held as long as the
 * executor, so a cap trades speed for memory. */
static size_t workspace_cap(const RtGpu *x) {
  long long mb = x->opts.cudnn_workspace_mb >= 0 ? x->opts.cudnn_workspace_mb : WORKSPACE_CAP_MB;
  size_t cap = (size_t)mb << 20;
  if (!x->memory_limit) return cap;
  /* under a memory limit: what the arena and parameters leave, less the
   * largest scratch any node may take (twice: the side stream has its
   * own), shared by the two streams' workspaces; 1 byte when nothing is
   * left (the engines that need none) */
  size_t scratch = 0;
  for (int i = 0; i < x->g->nnode; i++) {
    size_t n = scratch_end(&x->prog.kn[i], 1, 1, 1);
    if (n > scratch) scratch = n;
  }
  size_t used = x->held + 2 * (scratch + ALIGN) + 4 * ALIGN;
  size_t left = x->memory_limit > used ? (x->memory_limit - used) / 2 : 0;
  left = left > (size_t)ALIGN ? left & ~(size_t)(ALIGN - 1) : 1;
  return cap && cap < left ? cap : left;
}

/* The ranges node i touches when it runs (its launches and convolution):
 * its values, or every value of the multi-tensor run it heads (none when
 * a run's head does its work), its scratch and its workspace. */
static int node_ranges(RtGpu *x, int i, const uint64_t *addr, const uint64_t *bytes, RtBranchSet *set) {
  const GpuConv *c = &x->conv[i];
  const CgMultiRun *r = rt_gpu_run_at(x, i);
  int works = r || c->plan || x->first[i] < x->first[i + 1];
  for (int k = 0; works && k < (r ? r->n : 1); k++)
    if (rt_gpu_branch_add_node(set, x->g, r ? r->node[k] : i, addr, bytes)) return -1;
  CUdeviceptr scratch = c->side ? x->side_scratch : x->scratch, ws = c->side ? x->side_workspace : x->workspace;
  if (works &&
      (rt_gpu_branch_add(set, scratch, node_scratch(x, i), 1) || (c->plan && rt_gpu_branch_add(set, ws, c->ws, 1))))
    return -1;
  return rt_gpu_branch_end_node(set, c->side);
}

/* The side nodes' joins (rt_gpu_branch.h) from the ranges every node
 * touches; the side stream and the events when there is any side node.
 * $NETC_BRANCHES=verbose prints how many there are and how much main-stream
 * work each may overlap. */
static RtCudaStatus plan_branches(RtGpu *x, char *err, size_t errlen) {
  const IrGraph *g = x->g;
  RtBranchSet set;
  rt_gpu_branch_set_init(&set);
  uint64_t *addr = calloc((size_t)g->nval + 1, sizeof *addr), *bytes = calloc((size_t)g->nval + 1, sizeof *bytes);
  int bad = !addr || !bytes;
  for (int v = 0; !bad && v < g->nval; v++) {
    addr[v] = x->addr[v];
    bytes[v] = (uint64_t)ir_value_bytes(g, v, x->batch);
  }
  for (int i = 0; !bad && i < g->nnode; i++) bad = node_ranges(x, i, addr, bytes, &set) != 0;
  if (!bad) bad = rt_gpu_branch_plan(&set, &x->branch) != 0;
  rt_gpu_branch_set_free(&set);
  free(addr);
  free(bytes);
  if (bad) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory");
  const RtBranchPlan *b = &x->branch;
  if (x->opts.branches == 2)
    fprintf(stderr,
            "netc: branches: %d of %d nodes on the side stream; overlap window (main-stream nodes between fork "
            "and join) mean %.2f, min %d, max %d; %d of them 0-1 nodes\n",
            b->nside, g->nnode, b->window_mean, b->window_min, b->window_max, b->narrow);
  if (!b->nside) return RT_CUDA_OK;
  x->fork_ev = calloc((size_t)g->nnode, sizeof *x->fork_ev);
  x->done_ev = calloc((size_t)g->nnode, sizeof *x->done_ev);
  if (!x->fork_ev || !x->done_ev) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory");
  RtCudaStatus s =
      RT_CU(x->api, StreamCreate, (&x->side_stream, CU_STREAM_NON_BLOCKING), "the side stream", err, errlen);
  for (int i = 0; !s && i < g->nnode; i++) {
    if (!x->conv[i].side) continue;
    s = RT_CU(x->api, EventCreate, (&x->fork_ev[i], CU_EVENT_DISABLE_TIMING), "a side-stream fork", err, errlen);
    if (!s)
      s = RT_CU(x->api, EventCreate, (&x->done_ev[i], CU_EVENT_DISABLE_TIMING), "a side-stream join", err, errlen);
  }
  return s;
}

/* --- multi-tensor runs (rt_gpu_optim.h) ------------------------------------------ */

const CgMultiRun *rt_gpu_run_at(const RtGpu *x, int node) {
  int head = 0, k = rt_gpu_optim_run_of(x->optim, node, &head);
  return k >= 0 && head ? rt_gpu_optim_run(x->optim, k, NULL, NULL) : NULL;
}

int rt_gpu_multi_folded(const RtGpu *x) { return x ? x->folded : 0; }

/* The launch list with every usable run folded into its head: the head
 * launches the run's kernel, the run's other nodes nothing (unless the
 * multi_tensor option is off, or there is no run). */
static RtCudaStatus fold_runs(RtGpu *x, char *err, size_t errlen) {
  if (!x->opts.multi_tensor) return RT_CUDA_OK;
  RtCudaStatus s = rt_gpu_optim_new(x->g, x->batch, x->ctx, x->addr, x->cache_dir, &x->optim, err, errlen);
  if (s || !x->optim) return s;
  const IrGraph *g = x->g;
  int *first = malloc(sizeof(int) * (size_t)(g->nnode + 1)), total = 0;
  if (!first) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory");
  for (int i = 0; i < g->nnode; i++) {
    int head = 0, k = rt_gpu_optim_run_of(x->optim, i, &head);
    first[i] = total;
    total += k < 0 ? x->first[i + 1] - x->first[i] : head;
  }
  first[g->nnode] = total;
  GpuLaunch *launch = calloc((size_t)(total ? total : 1), sizeof *launch);
  if (!launch) {
    free(first);
    return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory");
  }
  int folded = 0;
  for (int i = 0; i < g->nnode; i++) {
    GpuLaunch *L = &launch[first[i]];
    int head = 0, k = rt_gpu_optim_run_of(x->optim, i, &head);
    if (k < 0) {
      for (int j = x->first[i]; j < x->first[i + 1]; j++, L++) {
        *L = x->launch[j];
        for (int a = 0; a < L->l->nargs; a++) L->argp[a] = &L->arg[a];
      }
      continue;
    }
    if (!head) {
      folded++;
      continue;
    }
    CUdeviceptr table;
    const CgMultiRun *r = rt_gpu_optim_run(x->optim, k, &L->fn, &table);
    L->l = &r->launch;
    L->arg[0] = table;
    for (int a = 1; a < r->launch.nargs; a++) L->arg[a] = x->addr[g->node[i].in[r->launch.args[a].index]];
    for (int a = 0; a < r->launch.nargs; a++) L->argp[a] = &L->arg[a];
  }
  free(x->launch);
  free(x->first);
  x->launch = launch, x->first = first, x->folded = folded;
  return RT_CUDA_OK;
}

static RtCudaStatus build(RtGpu *x, const RtGpuOpts *o, char *err, size_t errlen) {
  if (o && o->opts)
    x->opts = *o->opts;
  else if (opts_from_env(&x->opts, err, errlen))
    return RT_CUDA_EARG;
  const IrGraph *g = x->g;
  RtCudaStatus s;
  if ((s = rt_cuda_ctx_init(&x->ctx, o ? o->device : 0, err, errlen))) return s;
  x->api = rt_cuda_ctx_api(x->ctx);
  x->stream = rt_cuda_ctx_stream(x->ctx);
  x->arena_bytes = (size_t)g->plan_bytes;
  /* the big allocation first: a batch too large fails before any compile */
  if ((s = dev_alloc(x, &x->arena, x->arena_bytes, "activation arena", err, errlen)) ||
      (s = RT_CU(x->api, MemsetD8Async, (x->arena, 0, x->arena_bytes, x->stream), "zeroing the arena", err, errlen)) ||
      (s = place_values(x, err, errlen)))
    return s;
  CgDevice dev;
  cg_cache_dir(o ? o->cache_dir : NULL, x->cache_dir, sizeof x->cache_dir);
  if ((s = device_of(x, &dev, err, errlen)) ||
      (s = rt_gpu_status_of_cg(cg_prog_build_prebuilt(g, x->batch, &dev, x->cache_dir, o ? o->prebuilt : NULL,
                                                      o ? o->prebuilt_arch : NULL, &x->prog, err, errlen))))
    return s;
  if ((s = rt_gpu_prog_load(&x->prog, x->mod, x->ctx, err, errlen))) return s;
  if ((s = rt_cudnn_init(&x->dnn, x->stream, o ? o->tune : 0, err, errlen))) return s;
  rt_cudnn_workspace_cap(x->dnn, workspace_cap(x));
  rt_cudnn_deterministic(x->dnn, x->opts.cudnn_deterministic);
  rt_cudnn_verbose(x->dnn, x->opts.cudnn_verbose);
  rt_cudnn_tune_candidates(x->dnn, x->opts.cudnn_tune_candidates);
  if (o && o->tune) { /* the winners of earlier tuning runs, and where new ones go */
    char path[4200];
    snprintf(path, sizeof path, "%s/cudnn-tune.txt", x->cache_dir);
    if (x->cache_dir[0] && (s = rt_cudnn_tune_cache(x->dnn, path, err, errlen))) return s;
  }
  size_t ws = 0, need[4] = {0, 0, 0, 0}; /* scratch and workspace of the main stream, then of the side stream */
  if ((s = alloc_kept(x, err, errlen)) || (s = plan_convs(x, &ws, err, errlen))) return s;
  int branches = x->opts.branches != 0;
  for (int i = 0; i < g->nnode; i++) {
    GpuConv *c = &x->conv[i];
    c->side = branches && c->plan && g->node[i].op == IR_OP_CONV2D_BWD_WEIGHT;
    size_t *n = &need[2 * c->side];
    if (node_scratch(x, i) > n[0]) n[0] = node_scratch(x, i);
    if (c->ws > n[1]) n[1] = c->ws;
  }
  x->scratch_bytes = align_up(need[0]) + align_up(need[1]) + align_up(need[2]) + align_up(need[3]) + ALIGN;
  if ((s = dev_alloc(x, &x->scratch, x->scratch_bytes, "kernel scratch and cuDNN workspace", err, errlen)) ||
      (s = RT_CU(x->api, MemsetD8Async, (x->scratch, 0, x->scratch_bytes, x->stream), "zeroing the scratch", err,
                 errlen)))
    return s;
  x->workspace = x->scratch + align_up(need[0]);
  x->side_scratch = x->workspace + align_up(need[1]);
  x->side_workspace = x->side_scratch + align_up(need[2]);
  if ((s = prepare_nodes(x, err, errlen)) || (s = fold_runs(x, err, errlen)) || (s = plan_branches(x, err, errlen)))
    return s;
  return RT_CU(x->api, StreamSynchronize, (x->stream), "setting up the executor", err, errlen);
}

RtCudaStatus rt_gpu_new(const IrGraph *g, int64_t batch, const RtGpuOpts *o, RtGpu **out, char *err, size_t errlen) {
  if (!out) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_new: out is NULL");
  *out = NULL;
  if (!g) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_new: no graph");
  if (g->plan_bytes <= 0)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_new: graph %s has no memory plan (run the memplan pass)",
                        g->name ? g->name : "?");
  if (batch < 1 || batch > INT_MAX || g->plan_batch != batch)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen,
                        "rt_gpu_new: plan made for batch %lld, not %lld (compile with --batch=%lld)",
                        (long long)g->plan_batch, (long long)batch, (long long)batch);
  RtGpu *x = calloc(1, sizeof *x);
  if (x) {
    x->g = g, x->batch = batch;
    x->memory_limit = o ? o->memory_limit : 0;
    x->addr = calloc((size_t)g->nval + 1, sizeof *x->addr);
    x->numel = calloc((size_t)g->nval + 1, sizeof *x->numel);
    x->conv = calloc((size_t)g->nnode + 1, sizeof *x->conv);
    x->first = calloc((size_t)g->nnode + 1, sizeof *x->first);
    x->once = calloc((size_t)g->nnode + 1, 1);
  }
  if (!x || !x->addr || !x->numel || !x->conv || !x->first || !x->once) {
    rt_gpu_free(x);
    return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu_new: out of host memory");
  }
  for (int i = 0; i < g->nnode; i++) x->nonce += x->once[i] = (char)ir_node_once(&g->node[i]);
  x->stale = 1;
  RtCudaStatus s = build(x, o, err, errlen);
  if (s) {
    rt_gpu_free(x);
    return s;
  }
  *out = x;
  return RT_CUDA_OK;
}

void rt_gpu_free(RtGpu *x) {
  if (!x) return;
  if (x->ctx) {
    /* teardown errors have nobody to report to */
    rt_cuda_ctx_bind(x->ctx, NULL, 0);
    x->api->StreamSynchronize(x->stream);
    rt_gpu_drop_exec(x);
    rt_gpu_allreduce_free(x);
    for (int e = 0; e < 2; e++)
      for (int k = 0; k < 4; k++)
        if (x->clock_ev[e][k]) x->api->EventDestroy(x->clock_ev[e][k]);
    if (x->side_stream) {
      x->api->StreamSynchronize(x->side_stream);
      x->api->StreamDestroy(x->side_stream);
    }
    for (int i = 0; x->fork_ev && i < x->g->nnode; i++) {
      if (x->fork_ev[i]) x->api->EventDestroy(x->fork_ev[i]);
      if (x->done_ev && x->done_ev[i]) x->api->EventDestroy(x->done_ev[i]);
    }
    rt_gpu_optim_free(x->optim);
    rt_cudnn_free(x->dnn);
    if (x->arena) x->api->MemFree(x->arena);
    if (x->persist) x->api->MemFree(x->persist);
    if (x->scratch) x->api->MemFree(x->scratch);
    if (x->kept) x->api->MemFree(x->kept);
  }
  rt_gpu_prog_unload(x->mod);
  cg_prog_free(&x->prog);
  rt_cuda_ctx_free(x->ctx);
  free(x->addr);
  free(x->numel);
  free(x->conv);
  free(x->first);
  free(x->once);
  free(x->launch);
  free(x->olaunch);
  free(x->kept_at);
  free(x->stage);
  free(x->fork_ev);
  free(x->done_ev);
  rt_gpu_branch_plan_free(&x->branch);
  free(x);
}

int rt_gpu_find(const RtGpu *x, const char *name) {
  if (!x || !name) return -1;
  for (int v = 0; v < x->g->nval; v++)
    if (x->g->val[v].kind != IR_VAL_ACT && x->g->val[v].name && strcmp(x->g->val[v].name, name) == 0) return v;
  return -1;
}

int64_t rt_gpu_numel(const RtGpu *x, int v) { return x && v >= 0 && v < x->g->nval ? x->numel[v] : -1; }
size_t rt_gpu_device_bytes(const RtGpu *x) {
  return x ? x->arena_bytes + x->persist_bytes + x->kept_bytes + x->scratch_bytes : 0;
}
void rt_gpu_memory(const RtGpu *x, size_t *arena, size_t *persist, size_t *scratch) {
  if (arena) *arena = x ? x->arena_bytes : 0;
  if (persist) *persist = x ? x->persist_bytes + x->kept_bytes : 0;
  if (scratch) *scratch = x ? x->scratch_bytes : 0;
}
int rt_gpu_cache_hit(const RtGpu *x) { return x ? x->prog.cache_hit : 0; }

int rt_gpu_fused_convs(const RtGpu *x) {
  int n = 0;
  for (int i = 0; x && i < x->g->nnode; i++) n += x->conv[i].fused;
  return n;
}

int rt_gpu_prologue_convs(const RtGpu *x) {
  int n = 0;
  for (int i = 0; x && i < x->g->nnode; i++)
    n += x->conv[i].plan && x->prog.kn[i].conv.prologue && x->conv[i].pro_fused;
  return n;
}
int rt_gpu_prebuilt_hit(const RtGpu *x) { return x ? x->prog.prebuilt : 0; }
int rt_gpu_branch_nodes(const RtGpu *x) { return x ? x->branch.nside : 0; }
double rt_gpu_branch_window(const RtGpu *x) { return x ? x->branch.window_mean : 0; }

/* Checks v and makes the staging buffer hold it; *bytes = its device size. */
static RtCudaStatus stage_for(RtGpu *x, int v, const void *host, size_t *bytes, char *err, size_t errlen) {
  if (!x || !host || v < 0 || v >= x->g->nval)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: value %d does not exist (or a NULL argument)", v);
  if (!x->addr[v]) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: value %%%d has no memory", v);
  *bytes = (size_t)ir_value_bytes(x->g, v, x->batch);
  if (*bytes > x->stage_bytes) {
    void *p = realloc(x->stage, *bytes);
    if (!p) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory (%zu bytes staging)", *bytes);
    x->stage = p, x->stage_bytes = *bytes;
  }
  return rt_cuda_ctx_bind(x->ctx, err, errlen);
}

int rt_gpu_pci_bus_id(const RtGpu *x, char *id, size_t len) {
  return x->api->DeviceGetPCIBusId(id, (int)len, rt_cuda_ctx_device(x->ctx)) == CUDA_SUCCESS ? 0 : -1;
}

/* A quantized value's device form (ir_value_scales): q, then its scales.
 * From the host's real values (the CPU executor's scale * q), each slice's
 * scale is its largest |value| over the format's largest q (1 for none),
 * q the value over it rounded to the format; back, q * scale. */
static float quant_max(IrDtype dt) {
  return dt == IR_DT_I8 ? 127.0f : rt_ref_f8_max(dt == IR_DT_F8E4M3 ? RT_REF_E4M3 : RT_REF_E5M2);
}

void rt_gpu_pack_scaled(IrDtype dt, int64_t n, int64_t scales, const float *f, void *dst) {
  int64_t per = n / scales > 0 ? n / scales : 1;
  float *tail = (float *)((char *)dst + ir_scales_offset(n));
  for (int64_t k = 0; k < scales; k++) {
    float amax = 0;
    for (int64_t i = k * per; i < (k + 1) * per && i < n; i++)
      if (isfinite(f[i])) amax = fmaxf(amax, fabsf(f[i]));
    float scale = amax > 0 ? amax / quant_max(dt) : 1.0f;
    tail[k] = scale;
    for (int64_t i = k * per; i < (k + 1) * per && i < n; i++) {
      if (dt == IR_DT_I8)
        ((int8_t *)dst)[i] = (int8_t)(isnan(f[i]) ? 0 : fmaxf(-127, fminf(127, rintf(f[i] / scale))));
      else
        ((uint8_t *)dst)[i] = rt_ref_f32_to_f8(f[i] / scale, dt == IR_DT_F8E4M3 ? RT_REF_E4M3 : RT_REF_E5M2);
    }
  }
}

void rt_gpu_unpack_scaled(IrDtype dt, int64_t n, int64_t scales, const void *src, float *f) {
  int64_t per = n / scales > 0 ? n / scales : 1;
  const float *tail = (const float *)((const char *)src + ir_scales_offset(n));
  for (int64_t i = 0; i < n; i++) {
    int64_t k = i / per < scales ? i / per : scales - 1;
    float q = dt == IR_DT_I8
                  ? ((const int8_t *)src)[i]
                  : rt_ref_f8_to_f32(((const uint8_t *)src)[i], dt == IR_DT_F8E4M3 ? RT_REF_E4M3 : RT_REF_E5M2);
    f[i] = q * tail[k];
  }
}

RtCudaStatus rt_gpu_pack(const RtGpu *x, int v, const void *host, void *dst, char *err, size_t errlen) {
  int64_t n = x->numel[v], scales = ir_value_scales(x->g, v, x->batch);
  const float *f = host;
  const int64_t *q = host;
  IrDtype dt = x->g->val[v].type.dtype;
  if (scales) {
    rt_gpu_pack_scaled(dt, n, scales, f, dst);
    return RT_CUDA_OK;
  }
  for (int64_t i = 0; i < n; i++) {
    switch (dt) {
    case IR_DT_F32: ((float *)dst)[i] = f[i]; break;
    case IR_DT_F16: ((uint16_t *)dst)[i] = rt_ref_f32_to_f16(f[i]); break;
    case IR_DT_BF16: ((uint16_t *)dst)[i] = rt_ref_f32_to_bf16(f[i]); break;
    case IR_DT_I8: ((int8_t *)dst)[i] = (int8_t)(isnan(f[i]) ? 0 : fmaxf(-128, fminf(127, rintf(f[i])))); break;
    case IR_DT_I64: ((int64_t *)dst)[i] = q[i]; break;
    case IR_DT_I32:
    case IR_DT_U8:
      if (dt == IR_DT_I32 ? q[i] < INT32_MIN || q[i] > INT32_MAX : q[i] < 0 || q[i] > 255)
        return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_write: %s[%lld] = %lld does not fit %s",
                            x->g->val[v].name ? x->g->val[v].name : "value", (long long)i, (long long)q[i],
                            ir_dtype_name(dt));
      if (dt == IR_DT_I32)
        ((int32_t *)dst)[i] = (int32_t)q[i];
      else
        ((uint8_t *)dst)[i] = (uint8_t)q[i];
      break;
    default: return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_write: dtype %s", ir_dtype_name(dt));
    }
  }
  return RT_CUDA_OK;
}

RtCudaStatus rt_gpu_unpack(const RtGpu *x, int v, const void *src, void *host, char *err, size_t errlen) {
  int64_t n = x->numel[v], scales = ir_value_scales(x->g, v, x->batch);
  float *f = host;
  int64_t *q = host;
  IrDtype dt = x->g->val[v].type.dtype;
  if (scales) {
    rt_gpu_unpack_scaled(dt, n, scales, src, f);
    return RT_CUDA_OK;
  }
  for (int64_t i = 0; i < n; i++) {
    switch (dt) {
    case IR_DT_F32: f[i] = ((const float *)src)[i]; break;
    case IR_DT_F16: f[i] = rt_ref_f16_to_f32(((const uint16_t *)src)[i]); break;
    case IR_DT_BF16: f[i] = rt_ref_bf16_to_f32(((const uint16_t *)src)[i]); break;
    case IR_DT_I8: f[i] = ((const int8_t *)src)[i]; break;
    case IR_DT_I64: q[i] = ((const int64_t *)src)[i]; break;
    case IR_DT_I32: q[i] = ((const int32_t *)src)[i]; break;
    case IR_DT_U8: q[i] = ((const uint8_t *)src)[i]; break;
    default: return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_read: dtype %s", ir_dtype_name(dt));
    }
  }
  return RT_CUDA_OK;
}

void rt_gpu_written(RtGpu *x, int v) {
  if (ir_value_is_weight(x->g, v)) x->stale = 1;
}

RtCudaStatus rt_gpu_write(RtGpu *x, int v, const void *host, char *err, size_t errlen) {
  size_t bytes = 0;
  RtCudaStatus s = stage_for(x, v, host, &bytes, err, errlen);
  if (s || (s = rt_gpu_pack(x, v, host, x->stage, err, errlen))) return s;
  if ((s = RT_CU(x->api, MemcpyHtoDAsync, (x->addr[v], x->stage, bytes, x->stream), "writing a value", err, errlen)))
    return s;
  rt_gpu_written(x, v);
  return RT_CU(x->api, StreamSynchronize, (x->stream), "writing a value", err, errlen);
}

RtCudaStatus rt_gpu_read(RtGpu *x, int v, void *host, char *err, size_t errlen) {
  size_t bytes = 0;
  RtCudaStatus s = stage_for(x, v, host, &bytes, err, errlen);
  if (s ||
      (s = RT_CU(x->api, MemcpyDtoHAsync, (x->stage, x->addr[v], bytes, x->stream), "reading a value", err, errlen)) ||
      (s = RT_CU(x->api, StreamSynchronize, (x->stream), "reading a value", err, errlen)))
    return s;
  return rt_gpu_unpack(x, v, x->stage, host, err, errlen);
}

/* Launch L's kernel on stream st. */
static RtCudaStatus launch_kernel(RtGpu *x, GpuLaunch *L, CUstream st, char *err, size_t errlen) {
  const CgKLaunch *l = L->l;
  return RT_CU(
      x->api, LaunchKernel,
      (L->fn, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2], l->smem, st, L->argp, NULL),
      l->name, err, errlen);
}

/* Node i's convolution (j < 0) or its launch j, on stream st. */
static RtCudaStatus run_one(RtGpu *x, int i, int j, CUstream st, char *err, size_t errlen) {
  if (j < 0) {
    const GpuConv *c = &x->conv[i];
    RtConvIo io = c->io;
    io.workspace = c->side ? x->side_workspace : x->workspace;
    return st == x->stream ? rt_cudnn_conv_exec(x->dnn, c->plan, &io, err, errlen)
                           : rt_cudnn_conv_exec_on(x->dnn, c->plan, &io, st, err, errlen);
  }
  return launch_kernel(x, &x->launch[j], st, err, errlen);
}

/* run_one between events ev[2 * *k] and ev[2 * *k + 1] when ev is given. */
static RtCudaStatus run_timed(RtGpu *x, int i, int j, CUstream st, CUevent *ev, int *k, char *err, size_t errlen) {
  const char *what = "profiling the step";
  RtCudaStatus s = ev ? RT_CU(x->api, EventRecord, (ev[2 * *k], st), what, err, errlen) : RT_CUDA_OK;
  if (!s) s = run_one(x, i, j, st, err, errlen);
  if (!s && ev) s = RT_CU(x->api, EventRecord, (ev[2 * *k + 1], st), what, err, errlen);
  if (k) ++*k;
  return s;
}

RtCudaStatus rt_gpu_launch_node(RtGpu *x, int i, CUstream st, CUevent *ev, int *k, char *err, size_t errlen) {
  const GpuConv *c = &x->conv[i];
  RtCudaStatus s = RT_CUDA_OK;
  for (int j = x->first[i]; !s && j <= x->first[i + 1]; j++) {
    if (j == x->first[i] + c->pre && c->plan) s = run_timed(x, i, -1, st, ev, k, err, errlen);
    if (!s && j < x->first[i + 1]) s = run_timed(x, i, j, st, ev, k, err, errlen);
    /* the profiler's launch-by-launch steps leave the ranks out, as they do the gradients' all-reduce */
    if (!s && !ev && j < x->first[i + 1]) s = rt_gpu_sync_sums(x, j, st, err, errlen);
  }
  return s;
}

/* Side node i forked from the stream: the side stream waits for everything
 * queued so far, runs the node and records its done event.  *forked = 1
 * once the side stream depends on the stream (so it must be joined back,
 * even after a failure). */
static RtCudaStatus launch_side(RtGpu *x, int i, int *forked, char *err, size_t errlen) {
  const char *what = "forking a weight gradient to the side stream";
  RtCudaStatus s = RT_CU(x->api, EventRecord, (x->fork_ev[i], x->stream), what, err, errlen);
  if (!s) s = RT_CU(x->api, StreamWaitEvent, (x->side_stream, x->fork_ev[i], 0), what, err, errlen);
  if (s) return s;
  *forked = 1;
  s = rt_gpu_launch_node(x, i, x->side_stream, NULL, NULL, err, errlen);
  RtCudaStatus d = RT_CU(x->api, EventRecord, (x->done_ev[i], x->side_stream), "ending a side-stream node",
                         s ? NULL : err, s ? 0 : errlen);
  return s ? s : d;
}

/* Nodes lo..hi-1 on the stream, the side nodes forked.  The stream waits
 * for a side node right before its join (one wait for the latest side node
 * joining there covers the earlier ones: the side stream runs in order)
 * and for the last one at the end of the range, so a range never leaves a
 * branch open (a capture could not end).  With reduce (the whole step),
 * each gradient bucket's all-reduce is forked after the node that
 * completes it and joined right before the optimizer section (or at the
 * end), through the same kind of wait (rt_gpu_allreduce.c). */
static RtCudaStatus launch_range(RtGpu *x, int lo, int hi, GpuReduceCursor *reduce, char *err, size_t errlen) {
  int last = -1, joined = -1; /* the latest side node queued, and the latest the stream waited for */
  const char *what = "joining the side stream";
  RtCudaStatus s = RT_CUDA_OK;
  for (int i = lo; !s && i < hi; i++) {
    int w = rt_gpu_branch_wait(&x->branch, lo, i, joined);
    if (w >= 0 && w <= last) {
      s = RT_CU(x->api, StreamWaitEvent, (x->stream, x->done_ev[w], 0), what, err, errlen);
      joined = w;
    }
    if (!s && reduce && i == x->g->opt_first) s = rt_gpu_allreduce_join(x, reduce, err, errlen);
    if (s) break;
    if (x->once[i]) continue; /* rt_gpu_prepare's */
    if (!x->conv[i].side) {
      s = rt_gpu_launch_node(x, i, x->stream, NULL, NULL, err, errlen);
    } else {
      int forked = 0;
      s = launch_side(x, i, &forked, err, errlen);
      if (forked) last = i;
    }
    if (!s && reduce) s = rt_gpu_allreduce_after(x, i, reduce, err, errlen);
  }
  if (last > joined) {
    RtCudaStatus j =
        RT_CU(x->api, StreamWaitEvent, (x->stream, x->done_ev[last], 0), what, s ? NULL : err, s ? 0 : errlen);
    if (!s) s = j;
  }
  if (reduce) { /* joined even after a failure */
    RtCudaStatus j = rt_gpu_allreduce_join(x, reduce, s ? NULL : err, s ? 0 : errlen);
    if (!s) s = j;
  }
  return s;
}

/* accumulation (rt_gpu_accum.c) captures parts of the step: without the
 * all-reduce, which only the whole step queues. */
RtCudaStatus rt_gpu_launch_nodes(RtGpu *x, int lo, int hi, char *err, size_t errlen) {
  return launch_range(x, lo, hi, NULL, err, errlen);
}

/* Every node's convolution and launches, on the stream, with the
 * gradients' all-reduce when one is set. */
static RtCudaStatus launch_all(RtGpu *x, char *err, size_t errlen) {
  GpuReduceCursor reduce = {0, 0};
  return launch_range(x, 0, x->g->nnode, x->nccl ? &reduce : NULL, err, errlen);
}

/* The step clock's place for the next run, its last pair read into the
 * sums; 0 when the events cannot be made (the clock then stays still). */
static CUevent *clock_place(RtGpu *x) {
  int k = (int)(x->clock_runs % 4);
  const RtCudaApi *a = x->api;
  for (int e = 0; e < 2; e++)
    if (!x->clock_ev[e][k] && a->EventCreate(&x->clock_ev[e][k], CU_EVENT_DEFAULT) != CUDA_SUCCESS) return NULL;
  float ms = 0;
  if (x->clock_runs >= 4 && a->EventSynchronize(x->clock_ev[1][k]) == CUDA_SUCCESS &&
      a->EventElapsedTime(&ms, x->clock_ev[0][k], x->clock_ev[1][k]) == CUDA_SUCCESS)
    x->clock_ms += ms, x->clock_steps++;
  return &x->clock_ev[0][k];
}

void rt_gpu_step_time(const RtGpu *x, double *ms, int64_t *steps) { *ms = x->clock_ms, *steps = x->clock_steps; }

RtCudaStatus rt_gpu_prepare(RtGpu *x, char *err, size_t errlen) {
  RtCudaStatus s = RT_CUDA_OK;
  if (!x->stale || !x->nonce || x->capturing) return s;
  for (int i = 0; !s && i < x->g->nnode; i++)
    if (x->once[i]) s = rt_gpu_launch_node(x, i, x->stream, NULL, NULL, err, errlen);
  for (int j = 0; !s && j < x->nolaunch; j++) s = launch_kernel(x, &x->olaunch[j], x->stream, err, errlen);
  if (!s) x->stale = 0;
  return s;
}

RtCudaStatus rt_gpu_run(RtGpu *x, char *err, size_t errlen) {
  if (!x) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_run: no executor");
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  if (!s) s = rt_gpu_prepare(x, err, errlen); /* on the stream, before the step that reads them */
  if (s) return s;
  /* rt_gpu_allreduce_set dropped the graph captured before */
  if (!x->exec && x->recapture && (s = rt_gpu_capture(x, err, errlen))) return s;
  if (!x->exec) return launch_all(x, err, errlen);
  CUevent *ev = clock_place(x);
  int k = (int)(x->clock_runs % 4);
  if (ev) rt_gpu_allreduce_clock_place(x, k);
  if (ev) x->api->EventRecord(x->clock_ev[0][k], x->stream);
  s = RT_CU(x->api, GraphLaunch, (x->exec, x->stream), "replaying the step", err, errlen);
  int timed = ev && !s && x->api->EventRecord(x->clock_ev[1][k], x->stream) == CUDA_SUCCESS;
  if (timed) x->clock_runs++;
  if (ev) rt_gpu_allreduce_clock_launched(x, k, timed);
  return s;
}

RtCudaStatus rt_gpu_capture(RtGpu *x, char *err, size_t errlen) {
  if (!x) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_capture: no executor");
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  if (s || (s = RT_CU(x->api, StreamSynchronize, (x->stream), "before capturing the step", err, errlen))) return s;
  rt_gpu_drop_exec(x);
  x->recapture = 0;
  if (!x->opts.cuda_graph) return RT_CUDA_OK; /* launch node by node, for comparisons */
  if ((s = RT_CU(x->api, StreamBeginCapture, (x->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "capturing the step",
                 err, errlen)))
    return s;
  x->capturing = 1;
  RtCudaStatus ls = launch_all(x, err, errlen);
  x->capturing = 0;
  CUgraph graph = NULL;
  /* capture must end even after a failed launch, or the stream stays unusable */
  CUresult r = x->api->StreamEndCapture(x->stream, &graph);
  if (ls) {
    if (graph) x->api->GraphDestroy(graph);
    return ls;
  }
  if ((s = rt_cuda_check(x->api, r, __FILE__, __LINE__, "cuStreamEndCapture(stream, &graph)", "capturing the step", err,
                         errlen)))
    return s;
  s = RT_CU(x->api, GraphInstantiate, (&x->exec, graph, 0), "instantiating the step graph", err, errlen);
  if (s) x->exec = NULL;
  x->graph = graph; /* kept beside exec: the all-reduce clock's nodes are its */
  if (!s) s = rt_gpu_allreduce_clock_find(x, graph, err, errlen);
  if (s) rt_gpu_drop_exec(x);
  return s;
}

RtCudaStatus rt_gpu_sync(RtGpu *x, char *err, size_t errlen) {
  if (!x) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_sync: no executor");
  RtCudaStatus s = rt_cuda_ctx_bind(x->ctx, err, errlen);
  return s ? s : RT_CU(x->api, StreamSynchronize, (x->stream), "finishing the step", err, errlen);
}

RtCudaStatus rt_gpu_time(RtGpu *x, int steps, double *ms, char *err, size_t errlen) {
  if (!x || !ms || steps < 1) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu_time: bad arguments");
  *ms = 0;
  CUevent ev[2] = {NULL, NULL};
  RtCudaStatus s = rt_gpu_run(x, err, errlen);
  if (!s) s = rt_gpu_sync(x, err, errlen);
  for (int i = 0; !s && i < 2; i++)
    s = RT_CU(x->api, EventCreate, (&ev[i], CU_EVENT_DEFAULT), "timing events", err, errlen);
  if (!s) s = RT_CU(x->api, EventRecord, (ev[0], x->stream), "timing the steps", err, errlen);
  for (int i = 0; !s && i < steps; i++) s = rt_gpu_run(x, err, errlen);
  if (!s) s = RT_CU(x->api, EventRecord, (ev[1], x->stream), "timing the steps", err, errlen);
  if (!s) s = RT_CU(x->api, EventSynchronize, (ev[1]), "timing the steps", err, errlen);
  float t = 0;
  if (!s) s = RT_CU(x->api, EventElapsedTime, (&t, ev[0], ev[1]), "timing the steps", err, errlen);
  *ms = t;
  for (int i = 0; i < 2; i++)
    if (ev[i]) x->api->EventDestroy(ev[i]);
  return s;
}

RtCudaStatus rt_gpu_precompile(const IrGraph *g, int64_t batch, const CgDevice *dev, const char *cache_dir, char *err,
                               size_t errlen) {
  if (g && g->plan_batch != batch)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: plan made for batch %lld, not %lld",
                        (long long)g->plan_batch, (long long)batch);
  CgProg p;
  CgStatus s = cg_prog_build(g, batch, dev, cache_dir, &p, err, errlen);
  cg_prog_free(&p);
  return rt_gpu_status_of_cg(s);
}
