/* rt_cudnn.c - convolutions through cuDNN 9's backend (graph) API, with
 * libcudnn loaded by dlopen (rt_cudnn.h gives the contract).
 *
 * A plan is one single-operation graph: three NHWC/KRSC tensors described
 * by dims in N,C,H,W order with NHWC strides (uids 1 = x, 2 = w, 3 = y,
 * whatever the kind), a convolution descriptor (cross-correlation, FP32
 * compute, symmetric padding) and a forward, backward-data or
 * backward-filter operation.  Grouped convolution is expressed as cuDNN
 * expects it: the filter's C dim is C / groups and cuDNN infers the group
 * count.  Heuristics (mode A, then the fallback list) rank engine
 * configurations; configurations whose numerical notes break the contract
 * are skipped: on f32 data any tensor-core or down-converting engine (TF32
 * would miss the FP32 reference by 1e-3) unless the description allows
 * TF32, on every dtype reduced-precision reductions (the header promises
 * FP32 accumulation).
 *
 * Tuning times the first TUNE_CANDIDATES acceptable configurations (rt_cudnn_tune_candidates) and
 * keeps the fastest; its winner is remembered as (heuristics mode, position
 * in that mode's list) under the description's text and cuDNN's version,
 * in memory and, with rt_cudnn_tune_cache, in a file: heuristics are
 * deterministic for one cuDNN version and device, so the same position
 * names the same engine configuration in a later process.
 *
 * A forward description with genstats adds a GenStats operation on y to
 * the graph (uids 4 and 5: per-channel sum and sum of squares, f32), the
 * fused batch-norm statistics; deterministic handles skip engines noted
 * NONDETERMINISTIC.  A description with prologue puts three pointwise
 * operations before the convolution's x (forward or weight gradient):
 * x * scale, + bias, relu, through FP32 virtual tensors (uids 8..10), with
 * scale and bias [1, C, 1, 1] tensors of x's dtype (uids 6 and 7): the
 * graph of cuDNN's ConvBNfprop and ConvBNwgrad engines.  A description with
 * an epilogue puts pointwise operations after the convolution's result (an
 * FP32 virtual tensor): on a forward one MUL by scale and ADD bias (f32
 * [1, K, 1, 1], uids 11 and 12), ADD the residual (uid 13), RELU_FWD, as
 * its flags ask, the last writing y; on a data gradient ADD the residual
 * (uid 13, shaped like dx: the other gradient of a block input) when asked,
 * then RELU_BWD against the mask (uid 14), writing dx.  Their virtual
 * tensors are uids 20 on.
 *
 * A data gradient with dbn is cuDNN's DgradDreluBNBwdWeight graph: the
 * convolution's FP32 result r (virtual), the batch norm of z (uid 30)
 * recomputed by four FP32 pointwise operations with the per-channel f32
 * mean, invstd, gamma and beta (uids 31..34), RELU_BWD(r, that) writing
 * dx (the mask), and a BN_BWD_WEIGHTS operation reading z and dx that
 * writes dgamma, dbeta and the coefficients a, b, c (uids 35..39);
 * virtual tensors are uids 40 on.  The first operation, z - mean, is an
 * ADD with ALPHA2 = -1, the form cuDNN's documentation gives for this
 * pattern (its specialized pre-compiled engine matches the graph's shape);
 * when that graph gets no plan the same graph with a SUB is tried, and the
 * plan's text then says "sub-mean".  Its outputs are zeroed on the stream
 * before each run, like GenStats's sums.
 *
 * Only attributes cuDNN 9.14 has are used: the handle goes to the graph and
 * the plan through the *_HANDLE attributes, which 9.19's header marks
 * deprecated in favour of DEVICEPROP descriptors (9.14 lacks those).
 *
 * The library table is process-wide, built once under pthread_once and
 * read-only afterwards; libcudnn stays loaded until exit.
 *
 * This file keeps the public entry points (handles, plans, options); the
 * loading, the graphs, the engine choice and the execution have files of
 * their own (rt_cudnn_impl.h has the map). */
#include "rt_cudnn_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

RtCudaStatus rt_cudnn_init(RtCudnn **out, CUstream stream, int tune, char *err, size_t errlen) {
  if (!out) {
    rt_errf(err, errlen, "rt_cudnn_init: out is NULL");
    return RT_CUDA_EARG;
  }
  *out = NULL;
  const RtCudaApi *cu;
  RtCudaStatus s = rt_cuda_api(&cu, err, errlen);
  if (s) return s;
  const DnnApi *dnn;
  if ((s = rt_cudnn_lib_load(&dnn, err, errlen))) return s;
  RtCudnn *h = calloc(1, sizeof *h);
  if (!h) {
    rt_errf(err, errlen, "rt_cudnn_init: out of host memory");
    return RT_CUDA_ENOMEM;
  }
  h->dnn = dnn;
  h->cu = cu;
  h->stream = stream;
  h->tune = tune;
  h->candidates = TUNE_CANDIDATES;
  if ((s = DNN(h, Create, (&h->handle), "cuDNN handle"))) {
    free(h);
    return s;
  }
  if ((s = DNN(h, SetStream, (h->handle, (cudaStream_t)stream), "cuDNN handle"))) {
    rt_cudnn_free(h);
    return s;
  }
  *out = h;
  return RT_CUDA_OK;
}

/* Destroys every descriptor of p (each left NULL). */
static void plan_clear(const DnnApi *d, RtConvPlan *p) {
  cudnnBackendDescriptor_t *all[] = {&p->plan, &p->cfg, &p->graph, &p->stats, &p->op,    &p->conv, &p->x,
                                     &p->w,    &p->y,   &p->sum,   &p->sqsum, &p->scale, &p->bias};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) destroy(d, all[i]);
  for (int i = 0; i < PRO_OPS; i++) destroy(d, &p->pwop[i]), destroy(d, &p->pw[i]), destroy(d, &p->virt[i]);
  for (int i = 0; i < EPI_OPS; i++) destroy(d, &p->epop[i]), destroy(d, &p->epw[i]), destroy(d, &p->evirt[i]);
  cudnnBackendDescriptor_t *epi[] = {&p->escale, &p->ebias, &p->eres, &p->emask, &p->eoscale, &p->bnw, &p->bnz};
  for (size_t i = 0; i < sizeof epi / sizeof epi[0]; i++) destroy(d, epi[i]);
  for (int i = 0; i < BN_OPS; i++) destroy(d, &p->bnop[i]), destroy(d, &p->bnpw[i]), destroy(d, &p->bnvirt[i]);
  for (int i = 0; i < BN_INS; i++) destroy(d, &p->bnin[i]);
  for (int i = 0; i < BN_OUTS; i++) destroy(d, &p->bnout[i]);
}

static void plan_free(const DnnApi *d, RtConvPlan *p) {
  if (!p) return;
  plan_clear(d, p);
  free(p);
}

void rt_cudnn_free(RtCudnn *h) {
  if (!h) return;
  for (int i = 0; i < h->nplans; i++) plan_free(h->dnn, h->plans[i]);
  free(h->plans);
  free(h->entries);
  free(h->tune_path);
  if (h->handle) h->dnn->Destroy(h->handle);
  free(h);
}

static int out_size(int in, int k, int stride, int pad, int dil) {
  return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

static RtCudaStatus check_desc(const CgConvDesc *d, char *err, size_t errlen) {
  const char *bad = NULL;
  if (d->kind < CG_CONV_FWD || d->kind > CG_CONV_BWD_FILTER)
    bad = "kind";
  else if (d->dtype != IR_DT_F32 && d->dtype != IR_DT_F16 && d->dtype != IR_DT_BF16 && !dtype_quantized(d->dtype))
    bad = "dtype";
  else if (dtype_quantized(d->dtype) &&
           (d->kind != CG_CONV_FWD || !(d->epilogue & CG_EPI_AFFINE) || d->genstats || d->prologue || d->dbn ||
            (d->ydtype != IR_DT_F32 && d->ydtype != IR_DT_F16 && d->ydtype != IR_DT_BF16 &&
             !(d->ydtype == IR_DT_I8 && d->dtype == IR_DT_I8 && d->k % 4 == 0)) ||
            d->c % (d->dtype == IR_DT_I8 ? 4 : 16)))
    bad = "i8 or f8e4m3 convolution (forward only, with the epilogue's scale, into f32, f16 or bf16, or i8 into i8, "
          "C a multiple of 4 for i8, 16 for f8e4m3)";
  else if (d->kind == CG_CONV_FWD && (d->epilogue & CG_EPI_RESIDUAL) && dtype_quantized(d->dtype) &&
           (d->rdtype == IR_DT_I8 ? d->dtype != IR_DT_I8 || !(d->rscale > 0)
                                  : d->rdtype != IR_DT_F32 && d->rdtype != IR_DT_F16 && d->rdtype != IR_DT_BF16))
    bad = "residual of a quantized convolution (f32, f16, bf16, or i8 on an i8 convolution with its scale)";
  else if (d->kind == CG_CONV_FWD && (d->epilogue & CG_EPI_RESIDUAL) && d->rscale != 0.0f &&
           (!(d->rscale > 0) || !isfinite(d->rscale)))
    bad = "residual scale (a finite number above 0)";
  else if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->k < 1 || d->r < 1 || d->s < 1)
    bad = "dims";
  else if (d->stride[0] < 1 || d->stride[1] < 1 || d->dilation[0] < 1 || d->dilation[1] < 1 || d->pad[0] < 0 ||
           d->pad[1] < 0)
    bad = "stride, pad or dilation";
  else if (d->groups < 1 || d->c % d->groups || d->k % d->groups)
    bad = "groups (must divide c and k)";
  else if (d->ho != out_size(d->h, d->r, d->stride[0], d->pad[0], d->dilation[0]) ||
           d->wo != out_size(d->w, d->s, d->stride[1], d->pad[1], d->dilation[1]) || d->ho < 1 || d->wo < 1)
    bad = "output size";
  else if (d->genstats && (d->kind != CG_CONV_FWD || d->dtype == IR_DT_F32))
    bad = "genstats (forward convolutions on f16 or bf16 only)";
  else if (d->prologue && (d->kind == CG_CONV_BWD_DATA || d->dtype == IR_DT_F32 || d->groups != 1))
    bad = "prologue (ungrouped forward or weight-gradient convolutions on f16 or bf16 only)";
  else if (d->epilogue && (d->kind == CG_CONV_BWD_FILTER || d->genstats || d->prologue ||
                           (d->kind == CG_CONV_FWD ? (d->epilogue & CG_EPI_DRELU) || !(d->epilogue & CG_EPI_AFFINE)
                                                   : (d->epilogue & ~CG_EPI_RESIDUAL) != CG_EPI_DRELU)))
    bad = "epilogue (a forward one scales, a data gradient's [adds and] masks; neither with genstats or a "
          "prologue)";
  else if ((d->epilogue & CG_EPI_OUTSCALE) && d->kind != CG_CONV_FWD)
    bad = "epilogue out scale (forward convolutions only)";
  else if (d->dbn && (d->kind != CG_CONV_BWD_DATA || d->dtype == IR_DT_F32 || d->epilogue))
    bad = "dbn (data gradients on f16 or bf16 only, without an epilogue)";
  else if (d->dbn && d->c % 4)
    bad = "dbn channels (C must be a multiple of 4: b and c start C and 2C floats into abc, 16-byte aligned)";
  if (!bad) return RT_CUDA_OK;
  rt_errf(err, errlen, "rt_cudnn_conv_plan: invalid %s (n%d c%d h%d w%d k%d r%d s%d ho%d wo%d g%d)", bad, d->n, d->c,
          d->h, d->w, d->k, d->r, d->s, d->ho, d->wo, d->groups);
  return RT_CUDA_EARG;
}

static CgConvDesc normalize(const CgConvDesc *d) {
  CgConvDesc k;
  memset(&k, 0, sizeof k);
  k.kind = d->kind;
  k.n = d->n, k.c = d->c, k.h = d->h, k.w = d->w;
  k.k = d->k, k.r = d->r, k.s = d->s, k.ho = d->ho, k.wo = d->wo;
  for (int i = 0; i < 2; i++) k.stride[i] = d->stride[i], k.pad[i] = d->pad[i], k.dilation[i] = d->dilation[i];
  k.groups = d->groups;
  k.dtype = d->dtype;
  k.ydtype = dtype_quantized(d->dtype) ? d->ydtype : d->dtype;
  k.tf32 = d->dtype == IR_DT_F32 && d->tf32;
  k.genstats = d->genstats != 0;
  k.prologue = d->prologue != 0;
  k.epilogue = d->epilogue;
  k.dbn = d->dbn != 0;
  int res = k.kind == CG_CONV_FWD && (k.epilogue & CG_EPI_RESIDUAL);
  k.rscale = res && d->rscale != 1.0f ? d->rscale : 0.0f;
  /* a quantized convolution's residual may differ from y (cg_emit_bn.c): i8, or a float one scaled into a
   * requantized y; otherwise (and in a description that leaves it 0) y's dtype */
  k.rdtype = res && dtype_quantized(k.dtype) && (d->rdtype != IR_DT_F32 || k.rscale != 0.0f) ? d->rdtype : k.ydtype;
  return k;
}

void rt_cudnn_workspace_cap(RtCudnn *h, size_t bytes) {
  if (h) h->ws_cap = (int64_t)bytes;
}

void rt_cudnn_verbose(RtCudnn *h, int on) {
  if (h) h->verbose = on;
}

void rt_cudnn_tune_candidates(RtCudnn *h, int n) {
  if (h && n >= 0) h->candidates = n;
}

void rt_cudnn_deterministic(RtCudnn *h, int on) {
  if (h) h->deterministic = on != 0;
}

void rt_cudnn_tune_counts(const RtCudnn *h, int *cached, int *timed, int *heuristic) {
  if (cached) *cached = h ? h->cached : 0;
  if (timed) *timed = h ? h->timed : 0;
  if (heuristic) *heuristic = h ? h->heuristic : 0;
}

/* p's graph and plan; where cuDNN has none, the one other form of the
 * same graph tried: dbn's z - mean as a SUB, an i8 convolution's result as
 * an i32 tensor before the epilogue's f32 math (see the top); a failure
 * then reports both. */
static RtCudaStatus build(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  RtCudaStatus s = rt_cudnn_graph_make(h, p, err, errlen);
  if (!s) s = rt_cudnn_tune_select(h, p, err, errlen);
  int i8 = p->key.dtype == IR_DT_I8;
  if (!s || !(p->key.dbn || i8) || s == RT_CUDA_ENOMEM) return s;
  char first[1024];
  snprintf(first, sizeof first, "%s", err && errlen ? err : "");
  plan_clear(h->dnn, p);
  if (i8)
    p->acc_i32 = 1;
  else
    p->dbn_sub = 1;
  size_t len = strlen(p->what);
  snprintf(p->what + len, sizeof p->what - len, i8 ? " i32-acc" : " sub-mean");
  s = rt_cudnn_graph_make(h, p, err, errlen);
  if (!s) s = rt_cudnn_tune_select(h, p, err, errlen);
  if (s && err && errlen) {
    char second[1024];
    snprintf(second, sizeof second, "%s", err);
    rt_errf(err, errlen,
            i8 ? "with the result in f32: %s; in i32: %s" : "with z - mean as ADD(alpha2 = -1): %s; as SUB: %s", first,
            second);
  }
  return s;
}

static const char *KIND_NAMES[] = {"fwd", "bwd-data", "bwd-filter"};

RtCudaStatus rt_cudnn_conv_plan(RtCudnn *h, const CgConvDesc *d, RtConvPlan **plan, size_t *workspace, char *err,
                                size_t errlen) {
  if (!h || !d || !plan || !workspace) {
    rt_errf(err, errlen, "rt_cudnn_conv_plan: NULL argument");
    return RT_CUDA_EARG;
  }
  RtCudaStatus s = check_desc(d, err, errlen);
  if (s) return s;
  CgConvDesc key = normalize(d);
  for (int i = 0; i < h->nplans; i++)
    if (!memcmp(&h->plans[i]->key, &key, sizeof key)) {
      *plan = h->plans[i];
      *workspace = (size_t)h->plans[i]->workspace;
      return RT_CUDA_OK;
    }
  if (h->nplans == h->cap) {
    int cap = h->cap ? 2 * h->cap : 16;
    RtConvPlan **grown = realloc(h->plans, sizeof *grown * (size_t)cap);
    if (!grown) {
      rt_errf(err, errlen, "rt_cudnn_conv_plan: out of host memory");
      return RT_CUDA_ENOMEM;
    }
    h->plans = grown;
    h->cap = cap;
  }
  RtConvPlan *p = calloc(1, sizeof *p);
  if (!p) {
    rt_errf(err, errlen, "rt_cudnn_conv_plan: out of host memory");
    return RT_CUDA_ENOMEM;
  }
  p->key = key;
  char epi[56] = "";
  if (key.epilogue & CG_EPI_DRELU)
    snprintf(epi, sizeof epi, "+%sdrelu", key.epilogue & CG_EPI_RESIDUAL ? "add-" : "");
  else if (key.epilogue) {
    char add[40] = "";
    if ((key.epilogue & CG_EPI_RESIDUAL) && (key.rscale != 0.0f || key.rdtype != key.ydtype))
      snprintf(add, sizeof add, "-add(%s*%.9g)", dtype_name(key.rdtype), key.rscale != 0.0f ? (double)key.rscale : 1.0);
    else if (key.epilogue & CG_EPI_RESIDUAL)
      snprintf(add, sizeof add, "-add");
    snprintf(epi, sizeof epi, "+scale-bias%s%s%s", add, key.epilogue & CG_EPI_RELU ? "-relu" : "",
             key.epilogue & CG_EPI_OUTSCALE ? "-scale" : "");
  }
  if (key.dbn) snprintf(epi, sizeof epi, "+dbn");
  char dt[24];
  snprintf(dt, sizeof dt, "%s%s%s", dtype_name(key.dtype), key.ydtype != key.dtype ? "->" : "",
           key.ydtype != key.dtype ? dtype_name(key.ydtype) : "");
  snprintf(p->what, sizeof p->what, "conv %s%s%s%s %s%s x%dx%dx%dx%d w%dx%dx%dx%d y%dx%d s%dx%d p%dx%d d%dx%d g%d%s",
           key.prologue ? "scale-bias-relu+" : "", KIND_NAMES[key.kind], key.genstats ? "+genstats" : "", epi, dt,
           key.tf32 ? " (tf32)" : "", key.n, key.h, key.w, key.c, key.k, key.r, key.s, key.c / key.groups, key.ho,
           key.wo, key.stride[0], key.stride[1], key.pad[0], key.pad[1], key.dilation[0], key.dilation[1], key.groups,
           h->deterministic ? " deterministic" : "");
  if ((s = build(h, p, err, errlen))) {
    plan_free(h->dnn, p);
    return s;
  }
  h->plans[h->nplans++] = p;
  *plan = p;
  *workspace = (size_t)p->workspace;
  /* which plan holds how much workspace: the executor's workspace is the largest */
  if (h->verbose)
    fprintf(stderr, "netc: cudnn plan %s: workspace %.1f MiB (configuration %d of the %s list)\n", p->what,
            (double)p->workspace / (1024.0 * 1024.0), p->index, p->mode == 0 ? "mode A" : "fallback");
  return RT_CUDA_OK;
}
