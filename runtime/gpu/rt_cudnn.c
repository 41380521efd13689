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
 * Tuning times the first TUNE_CANDIDATES acceptable configurations and
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
 * read-only afterwards; libcudnn stays loaded until exit. */
#include "rt_cudnn.h"

#include "opts.h"

#include <cudnn_graph.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { UID_X = 1, UID_W = 2, UID_Y = 3, UID_SUM = 4, UID_SQSUM = 5, UID_SCALE = 6, UID_BIAS = 7, UID_VIRT = 8 };
enum { UID_ESCALE = 11, UID_EBIAS = 12, UID_RESIDUAL = 13, UID_MASK = 14, UID_EVIRT = 20 };
enum { UID_Z = 30, UID_BN_IN = 31, UID_BN_OUT = 35, UID_BN_VIRT = 40 };
/* dbn: its per-channel inputs (uids 31..34) and outputs (35..39), in order */
enum { BN_MEAN, BN_INVSTD, BN_GAMMA, BN_BETA, BN_INS };
enum { BN_DGAMMA, BN_DBETA, BN_EQA, BN_EQB, BN_EQC, BN_OUTS };
/* dbn: its pointwise operations, in order (z - mean, * invstd, * gamma, + beta, relu_bwd) */
enum { BN_SUBMEAN, BN_INVSTD_MUL, BN_GAMMA_MUL, BN_BETA_ADD, BN_DRELU, BN_OPS };
enum { PRO_MUL, PRO_ADD, PRO_RELU, PRO_OPS }; /* the prologue's pointwise operations, in order */
enum { EPI_OPS = 4 };                         /* at most: scale, bias, residual, relu */
enum { TUNE_CANDIDATES = 8, TUNE_RUNS = 3 };

typedef struct DnnApi {
  cudnnStatus_t (*Create)(cudnnHandle_t *handle);
  cudnnStatus_t (*Destroy)(cudnnHandle_t handle);
  cudnnStatus_t (*SetStream)(cudnnHandle_t handle, cudaStream_t stream);
  const char *(*GetErrorString)(cudnnStatus_t status);
  void (*GetLastErrorString)(char *message, size_t max_size);
  cudnnStatus_t (*BackendCreateDescriptor)(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t *desc);
  cudnnStatus_t (*BackendDestroyDescriptor)(cudnnBackendDescriptor_t desc);
  cudnnStatus_t (*BackendFinalize)(cudnnBackendDescriptor_t desc);
  cudnnStatus_t (*BackendSetAttribute)(cudnnBackendDescriptor_t desc, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count, const void *values);
  cudnnStatus_t (*BackendGetAttribute)(cudnnBackendDescriptor_t const desc, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested, int64_t *count,
                                       void *values);
  cudnnStatus_t (*BackendExecute)(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                  cudnnBackendDescriptor_t variant_pack);
  size_t (*GetVersion)(void);
} DnnApi;

static struct {
  pthread_once_t once;
  RtCudaStatus status;
  DnnApi api;
  char why[512];
} loaded = {PTHREAD_ONCE_INIT, RT_CUDA_OK, {0}, ""};

struct RtConvPlan {
  CgConvDesc key; /* normalized: zeroed, then field by field */
  cudnnBackendDescriptor_t x, w, y, conv, op, graph, cfg, plan;
  cudnnBackendDescriptor_t sum, sqsum, stats; /* genstats only: its outputs and operation */
  /* prologue only: scale, bias, the virtual results, pointwise descriptors and operations */
  cudnnBackendDescriptor_t scale, bias, virt[PRO_OPS], pw[PRO_OPS], pwop[PRO_OPS];
  /* epilogue only: its operands, the virtual results, pointwise descriptors and operations */
  cudnnBackendDescriptor_t escale, ebias, eres, emask, evirt[EPI_OPS], epw[EPI_OPS], epop[EPI_OPS];
  int nepi;
  /* dbn only: z, the per-channel tensors, the virtual results (bnvirt[0] is the convolution's), the
   * pointwise descriptors and operations, the BN_BWD_WEIGHTS operation */
  cudnnBackendDescriptor_t bnz, bnin[BN_INS], bnout[BN_OUTS], bnvirt[BN_OPS], bnpw[BN_OPS], bnop[BN_OPS], bnw;
  int dbn_sub; /* z - mean as a SUB (the fallback form) rather than an ADD with ALPHA2 = -1 */
  int64_t workspace;
  int mode, index; /* where the chosen configuration was in the heuristics' lists */
  char what[256];
};

typedef struct TuneEntry {
  char what[256];
  int mode, index;
} TuneEntry;

struct RtCudnn {
  const DnnApi *dnn;
  const RtCudaApi *cu;
  cudnnHandle_t handle;
  CUstream stream;
  int tune;
  RtConvPlan **plans;
  int nplans, cap;
  char *tune_path;     /* rt_cudnn_tune_cache's file, or NULL */
  TuneEntry *entries;  /* remembered winners */
  int nentries, entries_cap;
  int cached, timed, heuristic;
  int64_t ws_cap;      /* rt_cudnn_workspace_cap; 0: none */
  int deterministic;   /* rt_cudnn_deterministic */
  int verbose;         /* rt_cudnn_verbose */
  int capped;          /* configurations skipped for the cap by the plan being built */
};


static int load_sym(void *lib, const char *libname, const char *name, void *slot, size_t slot_size) {
  void *p = dlsym(lib, name);
  if (!p || slot_size != sizeof p) {
    snprintf(loaded.why, sizeof loaded.why, "no cuDNN (%s in %s is missing: cuDNN older than 9?)", name, libname);
    return 0;
  }
  memcpy(slot, &p, sizeof p); /* POSIX: object and function pointers agree */
  return 1;
}

#define LOAD(field)                                                                  \
  if (!load_sym(lib, libname, "cudnn" #field, &a->field, sizeof a->field)) return 0

static int load_table(void *lib, const char *libname, DnnApi *a) {
  LOAD(Create);
  LOAD(Destroy);
  LOAD(SetStream);
  LOAD(GetErrorString);
  LOAD(GetLastErrorString);
  LOAD(BackendCreateDescriptor);
  LOAD(BackendDestroyDescriptor);
  LOAD(BackendFinalize);
  LOAD(BackendSetAttribute);
  LOAD(BackendGetAttribute);
  LOAD(BackendExecute);
  LOAD(GetVersion);
  return 1;
}

/* The cudnn option's library (tests name a missing file), then the two usual names. */
static void load_once(void) {
  static NetcOpts o; /* read once, for the library's path only */
  opts_from_env(&o, NULL, 0);
  const char *names[3] = {o.cudnn, "libcudnn.so.9", "libcudnn.so"};
  int first = names[0] && *names[0] ? 0 : 1, last = first ? 2 : 0;
  void *lib = NULL;
  const char *libname = NULL;
  for (int i = first; i <= last && !lib; i++) lib = dlopen(libname = names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    if (first == 0)
      snprintf(loaded.why, sizeof loaded.why, "no cuDNN (%s not found)", names[0]);
    else
      snprintf(loaded.why, sizeof loaded.why, "no cuDNN (libcudnn.so.9, libcudnn.so not found)");
    loaded.status = RT_CUDA_ENODRIVER;
    return;
  }
  DnnApi a;
  memset(&a, 0, sizeof a);
  if (!load_table(lib, libname, &a)) {
    loaded.status = RT_CUDA_ENODRIVER;
    dlclose(lib);
    return;
  }
  loaded.api = a;
  loaded.status = RT_CUDA_OK;
}

/* Formats a failed cuDNN call (status name, then cuDNN's own last message
 * on one line) and returns RT_CUDA_ECALL; RT_CUDA_OK on success. */
static RtCudaStatus dnn_check(const DnnApi *d, cudnnStatus_t status, const char *file, int line, const char *call,
                              const char *what, char *err, size_t errlen) {
  if (status == CUDNN_STATUS_SUCCESS) return RT_CUDA_OK;
  char text[512] = "";
  d->GetLastErrorString(text, sizeof text);
  for (char *p = text; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  size_t n = strlen(text);
  while (n && text[n - 1] == ' ') text[--n] = 0;
  const char *name = d->GetErrorString(status);
  rt_errf(err, errlen, "%s:%d: %s: %s: %s (%s)", file, line, call, name ? name : "CUDNN_STATUS_?",
          *text ? text : "no details", what ? what : "");
  return RT_CUDA_ECALL;
}

/* DNN(h, BackendFinalize, (plan), what) calls h->dnn->BackendFinalize(plan)
 * and reports it as "cudnnBackendFinalize(plan)"; needs err, errlen. */
#define DNN(h, fn, args, what) \
  dnn_check((h)->dnn, (h)->dnn->fn args, __FILE__, __LINE__, "cudnn" #fn #args, (what), err, errlen)
#define SET(h, d, name, type, count, values, what) DNN(h, BackendSetAttribute, (d, name, type, count, values), what)

static size_t dtype_bytes(IrDtype t) { return t == IR_DT_F32 ? 4 : 2; }

static const char *dtype_name(IrDtype t) {
  return t == IR_DT_F32 ? "f32" : t == IR_DT_F16 ? "f16" : "bf16";
}

static const char *KIND_NAMES[] = {"fwd", "bwd-data", "bwd-filter"};

RtCudaStatus rt_cudnn_init(RtCudnn **out, CUstream stream, int tune, char *err, size_t errlen) {
  if (!out) {
    rt_errf(err, errlen, "rt_cudnn_init: out is NULL");
    return RT_CUDA_EARG;
  }
  *out = NULL;
  const RtCudaApi *cu;
  RtCudaStatus s = rt_cuda_api(&cu, err, errlen);
  if (s) return s;
  pthread_once(&loaded.once, load_once);
  if (loaded.status) {
    rt_errf(err, errlen, "%s", loaded.why);
    return loaded.status;
  }
  RtCudnn *h = calloc(1, sizeof *h);
  if (!h) {
    rt_errf(err, errlen, "rt_cudnn_init: out of host memory");
    return RT_CUDA_ENOMEM;
  }
  h->dnn = &loaded.api;
  h->cu = cu;
  h->stream = stream;
  h->tune = tune;
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

static void destroy(const DnnApi *d, cudnnBackendDescriptor_t *p) {
  if (*p) d->BackendDestroyDescriptor(*p);
  *p = NULL;
}

/* Destroys every descriptor of p (each left NULL). */
static void plan_clear(const DnnApi *d, RtConvPlan *p) {
  cudnnBackendDescriptor_t *all[] = {&p->plan, &p->cfg, &p->graph, &p->stats, &p->op,    &p->conv, &p->x,
                                     &p->w,    &p->y,   &p->sum,   &p->sqsum, &p->scale, &p->bias};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) destroy(d, all[i]);
  for (int i = 0; i < PRO_OPS; i++) destroy(d, &p->pwop[i]), destroy(d, &p->pw[i]), destroy(d, &p->virt[i]);
  for (int i = 0; i < EPI_OPS; i++) destroy(d, &p->epop[i]), destroy(d, &p->epw[i]), destroy(d, &p->evirt[i]);
  cudnnBackendDescriptor_t *epi[] = {&p->escale, &p->ebias, &p->eres, &p->emask, &p->bnw, &p->bnz};
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
  if (d->kind < CG_CONV_FWD || d->kind > CG_CONV_BWD_FILTER) bad = "kind";
  else if (d->dtype != IR_DT_F32 && d->dtype != IR_DT_F16 && d->dtype != IR_DT_BF16) bad = "dtype";
  else if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->k < 1 || d->r < 1 || d->s < 1) bad = "dims";
  else if (d->stride[0] < 1 || d->stride[1] < 1 || d->dilation[0] < 1 || d->dilation[1] < 1 || d->pad[0] < 0 ||
           d->pad[1] < 0)
    bad = "stride, pad or dilation";
  else if (d->groups < 1 || d->c % d->groups || d->k % d->groups) bad = "groups (must divide c and k)";
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
  for (int i = 0; i < 2; i++)
    k.stride[i] = d->stride[i], k.pad[i] = d->pad[i], k.dilation[i] = d->dilation[i];
  k.groups = d->groups;
  k.dtype = d->dtype;
  k.tf32 = d->dtype == IR_DT_F32 && d->tf32;
  k.genstats = d->genstats != 0;
  k.prologue = d->prologue != 0;
  k.epilogue = d->epilogue;
  k.dbn = d->dbn != 0;
  return k;
}

/* A dense tensor with logical dims {N, C, H, W} (filters {K, C/g, R, S})
 * laid out channels-last. */
static RtCudaStatus make_tensor_as(RtCudnn *h, cudnnBackendDescriptor_t *t, int64_t uid, IrDtype dtype, int virt,
                                   int64_t d0, int64_t d1, int64_t d2, int64_t d3, const char *what, char *err,
                                   size_t errlen) {
  int64_t dims[4] = {d0, d1, d2, d3};
  bool is_virtual = virt != 0;
  int64_t strides[4] = {d1 * d2 * d3, 1, d3 * d1, d1};
  int64_t align = 16;
  cudnnDataType_t dt = dtype == IR_DT_F32 ? CUDNN_DATA_FLOAT : dtype == IR_DT_F16 ? CUDNN_DATA_HALF
                                                                                   : CUDNN_DATA_BFLOAT16;
  RtCudaStatus s;
  if ((s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_TENSOR_DESCRIPTOR, t), what)) ||
      (s = SET(h, *t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, what)) ||
      (s = SET(h, *t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, what)) ||
      (s = SET(h, *t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, what)) ||
      (s = SET(h, *t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what)) ||
      (s = SET(h, *t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, what)) ||
      (virt && (s = SET(h, *t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, what))) ||
      (s = DNN(h, BackendFinalize, (*t), what)))
    return s;
  return RT_CUDA_OK;
}

static RtCudaStatus make_tensor(RtCudnn *h, cudnnBackendDescriptor_t *t, int64_t uid, IrDtype dtype, int64_t d0,
                                int64_t d1, int64_t d2, int64_t d3, const char *what, char *err, size_t errlen) {
  return make_tensor_as(h, t, uid, dtype, 0, d0, d1, d2, d3, what, err, errlen);
}

static RtCudaStatus make_conv(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  int64_t dims = 2;
  int64_t dil[2] = {d->dilation[0], d->dilation[1]};
  int64_t str[2] = {d->stride[0], d->stride[1]};
  int64_t pad[2] = {d->pad[0], d->pad[1]};
  cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  RtCudaStatus s;
  if ((s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &p->conv), p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims, p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil, p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str, p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad, p->what)) ||
      (s = SET(h, p->conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad, p->what)) ||
      (s = DNN(h, BackendFinalize, (p->conv), p->what)))
    return s;
  return RT_CUDA_OK;
}

/* The operation's descriptor type and attribute names per kind; x, w, y
 * name the attribute that takes the forward role's tensor (dx, dw, dy). */
static const struct {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t alpha, beta, conv, x, w, y;
} OPS[] = {
    [CG_CONV_FWD] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
    [CG_CONV_BWD_DATA] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
    [CG_CONV_BWD_FILTER] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY},
};

/* The *_HANDLE attributes: deprecated in the 9.19 header, needed by 9.14. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const cudnnBackendAttributeName_t GRAPH_HANDLE = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
static const cudnnBackendAttributeName_t PLAN_HANDLE = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

/* The GenStats operation on the convolution's output: per-channel sum and
 * sum of squares into two f32 [1, K, 1, 1] tensors. */
static RtCudaStatus make_genstats(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  RtCudaStatus s;
  if ((s = make_tensor(h, &p->sum, UID_SUM, IR_DT_F32, 1, d->k, 1, 1, p->what, err, errlen)) ||
      (s = make_tensor(h, &p->sqsum, UID_SQSUM, IR_DT_F32, 1, d->k, 1, 1, p->what, err, errlen)) ||
      (s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, &p->stats), p->what)) ||
      (s = SET(h, p->stats, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode, p->what)) ||
      (s = SET(h, p->stats, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, p->what)) ||
      (s = SET(h, p->stats, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->y,
               p->what)) ||
      (s = SET(h, p->stats, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->sum,
               p->what)) ||
      (s = SET(h, p->stats, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->sqsum,
               p->what)) ||
      (s = DNN(h, BackendFinalize, (p->stats), p->what)))
    return s;
  return RT_CUDA_OK;
}

/* One pointwise operation (math in FP32): y = mode(x, alpha2 * b) (b NULL
 * for a unary mode; alpha2 is left at cuDNN's default when 1); RELU_BWD
 * takes x as the forward's tensor and b as dy. */
static RtCudaStatus make_pointwise_a(RtCudnn *h, RtConvPlan *p, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                     cudnnBackendDescriptor_t b, float alpha2, cudnnBackendDescriptor_t y,
                                     cudnnBackendDescriptor_t *pw, cudnnBackendDescriptor_t *op, char *err,
                                     size_t errlen) {
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  int bwd = mode == CUDNN_POINTWISE_RELU_BWD;
  RtCudaStatus s;
  if ((s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_POINTWISE_DESCRIPTOR, pw), p->what)) ||
      (s = SET(h, *pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, p->what)) ||
      (s = SET(h, *pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, p->what)) ||
      (s = DNN(h, BackendFinalize, (*pw), p->what)) ||
      (s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op), p->what)) ||
      (s = SET(h, *op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, pw,
               p->what)) ||
      (s = SET(h, *op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, p->what)) ||
      (b && (s = SET(h, *op, bwd ? CUDNN_ATTR_OPERATION_POINTWISE_DYDESC : CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, p->what))) ||
      (s = SET(h, *op, bwd ? CUDNN_ATTR_OPERATION_POINTWISE_DXDESC : CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, p->what)) ||
      (alpha2 != 1.0f &&
       (s = SET(h, *op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &alpha2, p->what))) ||
      (s = DNN(h, BackendFinalize, (*op), p->what)))
    return s;
  return RT_CUDA_OK;
}

static RtCudaStatus make_pointwise(RtCudnn *h, RtConvPlan *p, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                   cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t *pw,
                                   cudnnBackendDescriptor_t *op, char *err, size_t errlen) {
  return make_pointwise_a(h, p, mode, x, b, 1.0f, y, pw, op, err, errlen);
}

/* relu(x * scale + bias) into p->virt[PRO_RELU], the convolution's input. */
static RtCudaStatus make_prologue(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  static const cudnnPointwiseMode_t MODE[PRO_OPS] = {CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_ADD,
                                                     CUDNN_POINTWISE_RELU_FWD};
  RtCudaStatus s;
  if ((s = make_tensor(h, &p->scale, UID_SCALE, d->dtype, 1, d->c, 1, 1, p->what, err, errlen)) ||
      (s = make_tensor(h, &p->bias, UID_BIAS, d->dtype, 1, d->c, 1, 1, p->what, err, errlen)))
    return s;
  cudnnBackendDescriptor_t in = p->x, operand[PRO_OPS] = {p->scale, p->bias, NULL};
  for (int i = 0; i < PRO_OPS; i++) {
    if ((s = make_tensor_as(h, &p->virt[i], UID_VIRT + i, IR_DT_F32, 1, d->n, d->c, d->h, d->w, p->what, err,
                            errlen)) ||
        (s = make_pointwise(h, p, MODE[i], in, operand[i], p->virt[i], &p->pw[i], &p->pwop[i], err, errlen)))
      return s;
    in = p->virt[i];
  }
  return RT_CUDA_OK;
}

/* The epilogue's operations after the convolution's result, which goes to
 * p->evirt[0] (*conv_out); the last writes p->y (forward) or p->x (dx). */
static RtCudaStatus make_epilogue(RtCudnn *h, RtConvPlan *p, cudnnBackendDescriptor_t *conv_out, char *err,
                                  size_t errlen) {
  const CgConvDesc *d = &p->key;
  int fwd = d->kind == CG_CONV_FWD, e = d->epilogue;
  cudnnPointwiseMode_t mode[EPI_OPS];
  cudnnBackendDescriptor_t operand[EPI_OPS];
  int n = 0;
  RtCudaStatus s;
  if (fwd) {
    if ((s = make_tensor(h, &p->escale, UID_ESCALE, IR_DT_F32, 1, d->k, 1, 1, p->what, err, errlen)) ||
        (s = make_tensor(h, &p->ebias, UID_EBIAS, IR_DT_F32, 1, d->k, 1, 1, p->what, err, errlen)) ||
        ((e & CG_EPI_RESIDUAL) &&
         (s = make_tensor(h, &p->eres, UID_RESIDUAL, d->dtype, d->n, d->k, d->ho, d->wo, p->what, err, errlen))))
      return s;
    mode[n] = CUDNN_POINTWISE_MUL, operand[n++] = p->escale;
    mode[n] = CUDNN_POINTWISE_ADD, operand[n++] = p->ebias;
    if (e & CG_EPI_RESIDUAL) mode[n] = CUDNN_POINTWISE_ADD, operand[n++] = p->eres;
    if (e & CG_EPI_RELU) mode[n] = CUDNN_POINTWISE_RELU_FWD, operand[n++] = NULL;
  } else {
    if ((s = make_tensor(h, &p->emask, UID_MASK, d->dtype, d->n, d->c, d->h, d->w, p->what, err, errlen)) ||
        ((e & CG_EPI_RESIDUAL) &&
         (s = make_tensor(h, &p->eres, UID_RESIDUAL, d->dtype, d->n, d->c, d->h, d->w, p->what, err, errlen))))
      return s;
    if (e & CG_EPI_RESIDUAL) mode[n] = CUDNN_POINTWISE_ADD, operand[n++] = p->eres;
    mode[n] = CUDNN_POINTWISE_RELU_BWD, operand[n++] = NULL;
  }
  int64_t c = fwd ? d->k : d->c, hh = fwd ? d->ho : d->h, ww = fwd ? d->wo : d->w;
  for (int i = 0; i < n; i++)
    if ((s = make_tensor_as(h, &p->evirt[i], UID_EVIRT + i, IR_DT_F32, 1, d->n, c, hh, ww, p->what, err, errlen)))
      return s;
  for (int i = 0; i < n; i++) {
    cudnnBackendDescriptor_t out = i + 1 < n ? p->evirt[i + 1] : fwd ? p->y : p->x;
    /* RELU_BWD: x is the forward's relu output (the mask), dy the data gradient */
    int drelu = mode[i] == CUDNN_POINTWISE_RELU_BWD;
    cudnnBackendDescriptor_t x = drelu ? p->emask : p->evirt[i], b = drelu ? p->evirt[i] : operand[i];
    if ((s = make_pointwise(h, p, mode[i], x, b, out, &p->epw[i], &p->epop[i], err, errlen))) return s;
  }
  p->nepi = n;
  *conv_out = p->evirt[0];
  return RT_CUDA_OK;
}

/* z - mean into p->bnvirt[1]: an ADD with ALPHA2 = -1, or (p->dbn_sub) a SUB. */
static RtCudaStatus make_dbn_center(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  cudnnBackendDescriptor_t mean = p->bnin[BN_MEAN], out = p->bnvirt[BN_SUBMEAN + 1];
  cudnnBackendDescriptor_t *pw = &p->bnpw[BN_SUBMEAN], *op = &p->bnop[BN_SUBMEAN];
  return p->dbn_sub ? make_pointwise(h, p, CUDNN_POINTWISE_SUB, p->bnz, mean, out, pw, op, err, errlen)
                    : make_pointwise_a(h, p, CUDNN_POINTWISE_ADD, p->bnz, mean, -1.0f, out, pw, op, err, errlen);
}

/* The dbn operations after the convolution, whose result goes to
 * p->bnvirt[0] (*conv_out): z's batch norm, RELU_BWD of the result against
 * it into p->x, and BN_BWD_WEIGHTS of (z, p->x). */
static RtCudaStatus make_dbn(RtCudnn *h, RtConvPlan *p, cudnnBackendDescriptor_t *conv_out, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  RtCudaStatus s;
  if ((s = make_tensor(h, &p->bnz, UID_Z, d->dtype, d->n, d->c, d->h, d->w, p->what, err, errlen))) return s;
  for (int i = 0; i < BN_INS; i++)
    if ((s = make_tensor(h, &p->bnin[i], UID_BN_IN + i, IR_DT_F32, 1, d->c, 1, 1, p->what, err, errlen))) return s;
  for (int i = 0; i < BN_OUTS; i++)
    if ((s = make_tensor(h, &p->bnout[i], UID_BN_OUT + i, IR_DT_F32, 1, d->c, 1, 1, p->what, err, errlen)))
      return s;
  /* bnvirt[0]: the convolution's result; bnvirt[i + 1]: the batch norm's i-th step */
  for (int i = 0; i < BN_OPS; i++)
    if ((s = make_tensor_as(h, &p->bnvirt[i], UID_BN_VIRT + i, IR_DT_F32, 1, d->n, d->c, d->h, d->w, p->what, err,
                            errlen)))
      return s;
  static const cudnnPointwiseMode_t MODE[] = {[BN_INVSTD_MUL] = CUDNN_POINTWISE_MUL,
                                              [BN_GAMMA_MUL] = CUDNN_POINTWISE_MUL,
                                              [BN_BETA_ADD] = CUDNN_POINTWISE_ADD};
  static const int OPERAND[] = {[BN_INVSTD_MUL] = BN_INVSTD, [BN_GAMMA_MUL] = BN_GAMMA, [BN_BETA_ADD] = BN_BETA};
  if ((s = make_dbn_center(h, p, err, errlen))) return s;
  for (int i = BN_INVSTD_MUL; i <= BN_BETA_ADD; i++)
    if ((s = make_pointwise(h, p, MODE[i], p->bnvirt[i], p->bnin[OPERAND[i]], p->bnvirt[i + 1], &p->bnpw[i],
                            &p->bnop[i], err, errlen)))
      return s;
  /* RELU_BWD: x is the recomputed batch norm (the forward relu's input), dy the convolution's result */
  if ((s = make_pointwise(h, p, CUDNN_POINTWISE_RELU_BWD, p->bnvirt[BN_BETA_ADD + 1], p->bnvirt[0], p->x,
                          &p->bnpw[BN_DRELU], &p->bnop[BN_DRELU], err, errlen)))
    return s;
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  /* beta is no input of BN_BWD_WEIGHTS: only the mask needs it */
  static const cudnnBackendAttributeName_t IN_ATTR[BN_BETA] = {
      [BN_MEAN] = CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC,
      [BN_INVSTD] = CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC,
      [BN_GAMMA] = CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC};
  static const cudnnBackendAttributeName_t OUT_ATTR[BN_OUTS] = {
      CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC,
      CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC,
      CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS};
  if ((s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR, &p->bnw), p->what)) ||
      (s = SET(h, p->bnw, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, p->what)) ||
      (s = SET(h, p->bnw, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->bnz,
               p->what)) ||
      (s = SET(h, p->bnw, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->x,
               p->what)))
    return s;
  for (int i = 0; i < BN_BETA; i++)
    if ((s = SET(h, p->bnw, IN_ATTR[i], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->bnin[i], p->what))) return s;
  for (int i = 0; i < BN_OUTS; i++)
    if ((s = SET(h, p->bnw, OUT_ATTR[i], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->bnout[i], p->what))) return s;
  if ((s = DNN(h, BackendFinalize, (p->bnw), p->what))) return s;
  *conv_out = p->bnvirt[0];
  return RT_CUDA_OK;
}

/* The operation graph of every operation made for p, in dataflow order. */
static RtCudaStatus make_opgraph(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  cudnnBackendDescriptor_t ops[PRO_OPS + EPI_OPS + BN_OPS + 3];
  int64_t nops = 0;
  for (int i = 0; d->prologue && i < PRO_OPS; i++) ops[nops++] = p->pwop[i];
  ops[nops++] = p->op;
  for (int i = 0; d->epilogue && i < p->nepi; i++) ops[nops++] = p->epop[i];
  for (int i = 0; d->dbn && i < BN_OPS; i++) ops[nops++] = p->bnop[i];
  if (d->dbn) ops[nops++] = p->bnw;
  if (d->genstats) ops[nops++] = p->stats;
  RtCudaStatus s;
  if ((s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &p->graph), p->what)) ||
      (s = SET(h, p->graph, GRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h->handle, p->what)) ||
      (s = SET(h, p->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops, p->what)) ||
      (s = DNN(h, BackendFinalize, (p->graph), p->what)))
    return s;
  return RT_CUDA_OK;
}

static RtCudaStatus make_graph(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  RtCudaStatus s;
  if ((s = make_tensor(h, &p->x, UID_X, d->dtype, d->n, d->c, d->h, d->w, p->what, err, errlen)) ||
      (s = make_tensor(h, &p->w, UID_W, d->dtype, d->k, d->c / d->groups, d->r, d->s, p->what, err, errlen)) ||
      (s = make_tensor(h, &p->y, UID_Y, d->dtype, d->n, d->k, d->ho, d->wo, p->what, err, errlen)) ||
      (s = make_conv(h, p, err, errlen)) || (d->prologue && (s = make_prologue(h, p, err, errlen))))
    return s;
  cudnnBackendDescriptor_t conv_x = d->prologue ? p->virt[PRO_RELU] : p->x, conv_y = p->y;
  /* the epilogue's first operation reads what the convolution writes: y forward, dx backward */
  cudnnBackendDescriptor_t *epi_from = d->kind == CG_CONV_FWD ? &conv_y : &conv_x;
  if (d->epilogue && (s = make_epilogue(h, p, epi_from, err, errlen))) return s;
  if (d->dbn && (s = make_dbn(h, p, &conv_x, err, errlen))) return s;
  float alpha = 1.0f, beta = 0.0f;
  if ((s = DNN(h, BackendCreateDescriptor, (OPS[d->kind].type, &p->op), p->what)) ||
      (s = SET(h, p->op, OPS[d->kind].alpha, CUDNN_TYPE_FLOAT, 1, &alpha, p->what)) ||
      (s = SET(h, p->op, OPS[d->kind].beta, CUDNN_TYPE_FLOAT, 1, &beta, p->what)) ||
      (s = SET(h, p->op, OPS[d->kind].conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->conv, p->what)) ||
      (s = SET(h, p->op, OPS[d->kind].x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv_x, p->what)) ||
      (s = SET(h, p->op, OPS[d->kind].w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->w, p->what)) ||
      (s = SET(h, p->op, OPS[d->kind].y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv_y, p->what)) ||
      (s = DNN(h, BackendFinalize, (p->op), p->what)))
    return s;
  if (d->genstats && (s = make_genstats(h, p, err, errlen))) return s;
  return make_opgraph(h, p, err, errlen);
}

/* The heuristics' engine configurations for the graph, best first; *cfgs
 * is malloc'd, each element a descriptor the caller destroys. */
static RtCudaStatus heuristics(RtCudnn *h, RtConvPlan *p, cudnnBackendHeurMode_t mode,
                               cudnnBackendDescriptor_t **cfgs, int64_t *count, char *err, size_t errlen) {
  cudnnBackendDescriptor_t heur = NULL;
  *cfgs = NULL;
  *count = 0;
  int64_t n = 0;
  RtCudaStatus s;
  if ((s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur), p->what)) ||
      (s = SET(h, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->graph,
               p->what)) ||
      (s = SET(h, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, p->what)) ||
      (s = DNN(h, BackendFinalize, (heur), p->what)) ||
      (s = DNN(h, BackendGetAttribute,
               (heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL), p->what)))
    goto done;
  if (n <= 0) goto done;
  cudnnBackendDescriptor_t *c = calloc((size_t)n, sizeof *c);
  if (!c) {
    rt_errf(err, errlen, "rt_cudnn_conv_plan: out of host memory (%s)", p->what);
    s = RT_CUDA_ENOMEM;
    goto done;
  }
  int64_t got = 0;
  for (int64_t i = 0; i < n && !s; i++)
    s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c[i]), p->what);
  if (!s)
    s = DNN(h, BackendGetAttribute, (heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got, c),
            p->what);
  if (s) {
    for (int64_t i = 0; i < n; i++) destroy(h->dnn, &c[i]);
    free(c);
    goto done;
  }
  for (int64_t i = got; i < n; i++) destroy(h->dnn, &c[i]);
  *cfgs = c;
  *count = got < n ? got : n;
done:
  destroy(h->dnn, &heur);
  return s;
}

/* Whether the configuration's engine keeps the contract (see the top).
 * When its notes cannot be read it is taken: the accuracy tests would
 * show a TF32 engine. */
static int engine_acceptable(RtCudnn *h, cudnnBackendDescriptor_t cfg, IrDtype dtype, int tf32) {
  int determ = h->deterministic;
  cudnnBackendDescriptor_t eng = NULL;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t n = 0, one = 0;
  int ok = 1;
  if (h->dnn->BackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS) return 1;
  if (h->dnn->BackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &one, &eng) ==
          CUDNN_STATUS_SUCCESS &&
      h->dnn->BackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                  CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++) {
      if (notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) ok = 0;
      if (determ && notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) ok = 0;
      if (dtype == IR_DT_F32 && !tf32 &&
          (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
        ok = 0;
    }
  }
  destroy(h->dnn, &eng);
  return ok;
}

/* A finalized execution plan for cfg, or NULL with err set. */
static cudnnBackendDescriptor_t make_plan(RtCudnn *h, RtConvPlan *p, cudnnBackendDescriptor_t cfg,
                                          int64_t *workspace, char *err, size_t errlen) {
  cudnnBackendDescriptor_t plan = NULL;
  int64_t n = 0;
  if (DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan), p->what) ||
      SET(h, plan, PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h->handle, p->what) ||
      SET(h, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg, p->what) ||
      DNN(h, BackendFinalize, (plan), p->what) ||
      DNN(h, BackendGetAttribute,
          (plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, workspace), p->what)) {
    destroy(h->dnn, &plan);
    return NULL;
  }
  return plan;
}

static void *ptr(CUdeviceptr p) { return (void *)(uintptr_t)p; }

/* Runs plan (made from p's graph) on io: x, w, y and, as p's description
 * asks, the GenStats outputs stats[0..K) and stats[K..2K), the prologue's
 * scale sb[0..C) and bias sb[C..2C), the epilogue's operands, dbn's
 * buffers (a, b, c at abc, abc + C and abc + 2C floats). */
static RtCudaStatus execute(RtCudnn *h, const RtConvPlan *p, cudnnBackendDescriptor_t plan, const RtConvIo *io,
                            char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  const char *what = p->what;
  int64_t uids[24] = {UID_X, UID_W, UID_Y};
  void *ptrs[24] = {ptr(io->x), ptr(io->w), ptr(io->y)};
  int64_t n = 3;
  if (d->genstats) {
    uids[n] = UID_SUM, ptrs[n++] = ptr(io->stats);
    uids[n] = UID_SQSUM, ptrs[n++] = ptr(io->stats + (CUdeviceptr)d->k * sizeof(float));
  }
  if (d->prologue) {
    uids[n] = UID_SCALE, ptrs[n++] = ptr(io->sb);
    uids[n] = UID_BIAS, ptrs[n++] = ptr(io->sb + (CUdeviceptr)d->c * dtype_bytes(d->dtype));
  }
  if (d->epilogue & CG_EPI_AFFINE) {
    uids[n] = UID_ESCALE, ptrs[n++] = ptr(io->esb);
    uids[n] = UID_EBIAS, ptrs[n++] = ptr(io->esb + (CUdeviceptr)d->k * sizeof(float));
  }
  if (d->epilogue & CG_EPI_RESIDUAL) uids[n] = UID_RESIDUAL, ptrs[n++] = ptr(io->residual);
  if (d->epilogue & CG_EPI_DRELU) uids[n] = UID_MASK, ptrs[n++] = ptr(io->mask);
  if (d->dbn) {
    const CUdeviceptr in[BN_INS] = {io->bn.mean, io->bn.invstd, io->bn.gamma, io->bn.beta};
    uids[n] = UID_Z, ptrs[n++] = ptr(io->bn.z);
    for (int i = 0; i < BN_INS; i++) uids[n] = UID_BN_IN + i, ptrs[n++] = ptr(in[i]);
    uids[n] = UID_BN_OUT + BN_DGAMMA, ptrs[n++] = ptr(io->bn.dgamma);
    uids[n] = UID_BN_OUT + BN_DBETA, ptrs[n++] = ptr(io->bn.dbeta);
    for (int i = 0; i < 3; i++)
      uids[n] = UID_BN_OUT + BN_EQA + i, ptrs[n++] = ptr(io->bn.abc + (CUdeviceptr)i * d->c * sizeof(float));
  }
  void *ws = ptr(io->workspace);
  cudnnBackendDescriptor_t pack = NULL;
  RtCudaStatus s;
  if (!(s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack), what)) &&
      !(s = SET(h, pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids, what)) &&
      !(s = SET(h, pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs, what)) &&
      !(s = SET(h, pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws, what)) &&
      !(s = DNN(h, BackendFinalize, (pack), what)))
    s = DNN(h, BackendExecute, (h->handle, plan, pack), what);
  destroy(h->dnn, &pack);
  return s;
}

/* Device buffers for timing candidates (contents do not matter). */
typedef struct TuneBufs {
  RtConvIo io;
  size_t ws_bytes;
} TuneBufs;

static void tune_bufs_free(const RtCudaApi *cu, TuneBufs *b) {
  CUdeviceptr *all[] = {&b->io.x,         &b->io.w,         &b->io.y,         &b->io.stats,     &b->io.sb,
                        &b->io.esb,       &b->io.residual,  &b->io.mask,      &b->io.workspace, &b->io.bn.z,
                        &b->io.bn.mean,   &b->io.bn.invstd, &b->io.bn.gamma,  &b->io.bn.beta,   &b->io.bn.dgamma,
                        &b->io.bn.dbeta,  &b->io.bn.abc};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (*all[i]) cu->MemFree(*all[i]);
  memset(b, 0, sizeof *b);
}

/* Runs plan (made from p's graph) on io, first zeroing (when zero_stats
 * is set) the GenStats sums or the dbn outputs its description has. */
static RtCudaStatus run_io(RtCudnn *h, const RtConvPlan *p, cudnnBackendDescriptor_t plan, const RtConvIo *io,
                           int zero_stats, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  const RtCudaApi *cu = h->cu;
  size_t cb = sizeof(float) * (size_t)d->c;
  RtCudaStatus s;
  if (zero_stats && d->genstats &&
      (s = RT_CU(cu, MemsetD8Async, (io->stats, 0, 2 * sizeof(float) * (size_t)d->k, h->stream), p->what, err,
                 errlen)))
    return s;
  if (zero_stats && d->dbn &&
      ((s = RT_CU(cu, MemsetD8Async, (io->bn.dgamma, 0, cb, h->stream), p->what, err, errlen)) ||
       (s = RT_CU(cu, MemsetD8Async, (io->bn.dbeta, 0, cb, h->stream), p->what, err, errlen)) ||
       (s = RT_CU(cu, MemsetD8Async, (io->bn.abc, 0, 3 * cb, h->stream), p->what, err, errlen))))
    return s;
  return execute(h, p, plan, io, err, errlen);
}

/* Milliseconds per run of plan on io (mean of runs after one warm-up,
 * between two events on the handle's stream), or a negative value when it
 * fails to run. */
static float time_runs(RtCudnn *h, const RtConvPlan *p, cudnnBackendDescriptor_t plan, const RtConvIo *io, int runs,
                       int zero_stats, char *err, size_t errlen) {
  const RtCudaApi *cu = h->cu;
  CUevent ev[2] = {NULL, NULL};
  float ms = -1;
  if (RT_CU(cu, EventCreate, (&ev[0], CU_EVENT_DEFAULT), p->what, err, errlen) ||
      RT_CU(cu, EventCreate, (&ev[1], CU_EVENT_DEFAULT), p->what, err, errlen) ||
      run_io(h, p, plan, io, zero_stats, err, errlen) ||
      RT_CU(cu, EventRecord, (ev[0], h->stream), p->what, err, errlen))
    goto done;
  for (int i = 0; i < runs; i++)
    if (run_io(h, p, plan, io, zero_stats, err, errlen)) goto done;
  float t = 0;
  if (RT_CU(cu, EventRecord, (ev[1], h->stream), p->what, err, errlen) ||
      RT_CU(cu, EventSynchronize, (ev[1]), p->what, err, errlen) ||
      RT_CU(cu, EventElapsedTime, (&t, ev[0], ev[1]), p->what, err, errlen))
    goto done;
  ms = t / runs;
done:
  for (int i = 0; i < 2; i++)
    if (ev[i]) cu->EventDestroy(ev[i]);
  return ms;
}

/* Milliseconds per run of a tuning candidate (TUNE_RUNS after one
 * warm-up), its workspace grown in b as needed; negative when it fails. */
static float time_plan(RtCudnn *h, RtConvPlan *p, cudnnBackendDescriptor_t plan, int64_t ws, TuneBufs *b,
                       char *err, size_t errlen) {
  const RtCudaApi *cu = h->cu;
  if ((size_t)ws > b->ws_bytes) {
    if (b->io.workspace) cu->MemFree(b->io.workspace);
    b->io.workspace = 0;
    b->ws_bytes = 0;
    if (RT_CU(cu, MemAlloc, (&b->io.workspace, (size_t)ws), p->what, err, errlen)) return -1;
    b->ws_bytes = (size_t)ws;
  }
  /* dbn's outputs zeroed as in a real run (an engine may accumulate into them) */
  return time_runs(h, p, plan, &b->io, TUNE_RUNS, p->key.dbn, err, errlen);
}

/* dbn's tuning buffers: z, then the per-channel inputs (zeroed: timing
 * needs no meaningful values, only finite ones) and outputs. */
static RtCudaStatus tune_alloc_bn(RtCudnn *h, const RtConvPlan *p, RtConvIo *io, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  const RtCudaApi *cu = h->cu;
  size_t zb = dtype_bytes(d->dtype) * (size_t)d->n * d->h * d->w * d->c, cb = sizeof(float) * (size_t)d->c;
  CUdeviceptr *bufs[] = {&io->bn.z,    &io->bn.mean,   &io->bn.invstd, &io->bn.gamma,
                         &io->bn.beta, &io->bn.dgamma, &io->bn.dbeta,  &io->bn.abc};
  size_t bytes[] = {zb, cb, cb, cb, cb, cb, cb, 3 * cb};
  RtCudaStatus s;
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if ((s = RT_CU(cu, MemAlloc, (bufs[i], bytes[i]), p->what, err, errlen)) ||
        (s = RT_CU(cu, MemsetD8Async, (*bufs[i], 0, bytes[i], h->stream), p->what, err, errlen)))
      return s;
  return RT_CUDA_OK;
}

/* Picks p->plan/p->cfg from cfgs (taking ownership of the chosen one):
 * the first acceptable configuration that finalizes or, when tuning, the
 * fastest of the first TUNE_CANDIDATES that do. */
static RtCudaStatus choose(RtCudnn *h, RtConvPlan *p, int mode, cudnnBackendDescriptor_t *cfgs, int64_t n,
                           TuneBufs *b, int *acceptable, char *err, size_t errlen) {
  float best_ms = 0;
  int tried = 0;
  for (int64_t i = 0; i < n && tried < (h->tune ? TUNE_CANDIDATES : 1); i++) {
    if (!engine_acceptable(h, cfgs[i], p->key.dtype, p->key.tf32)) continue;
    ++*acceptable;
    int64_t ws = 0;
    cudnnBackendDescriptor_t plan = make_plan(h, p, cfgs[i], &ws, err, errlen);
    if (!plan) continue;
    if (h->ws_cap > 0 && ws > h->ws_cap) {
      h->capped++;
      destroy(h->dnn, &plan);
      continue;
    }
    tried++;
    float ms = 0;
    if (h->tune) {
      const CgConvDesc *d = &p->key;
      size_t eb = dtype_bytes(d->dtype);
      const RtCudaApi *cu = h->cu;
      RtConvIo *io = &b->io;
      if (!io->x && (RT_CU(cu, MemAlloc, (&io->x, eb * (size_t)d->n * d->h * d->w * d->c), p->what, err, errlen) ||
                     RT_CU(cu, MemAlloc, (&io->w, eb * (size_t)d->k * d->r * d->s * (d->c / d->groups)), p->what,
                           err, errlen) ||
                     RT_CU(cu, MemAlloc, (&io->y, eb * (size_t)d->n * d->ho * d->wo * d->k), p->what, err, errlen) ||
                     (d->genstats &&
                      RT_CU(cu, MemAlloc, (&io->stats, 2 * sizeof(float) * (size_t)d->k), p->what, err, errlen)) ||
                     (d->prologue &&
                      (RT_CU(cu, MemAlloc, (&io->sb, 2 * eb * (size_t)d->c), p->what, err, errlen) ||
                       RT_CU(cu, MemsetD8Async, (io->sb, 0, 2 * eb * (size_t)d->c, h->stream), p->what, err,
                             errlen))) ||
                     ((d->epilogue & CG_EPI_AFFINE) &&
                      (RT_CU(cu, MemAlloc, (&io->esb, 2 * sizeof(float) * (size_t)d->k), p->what, err, errlen) ||
                       RT_CU(cu, MemsetD8Async, (io->esb, 0, 2 * sizeof(float) * (size_t)d->k, h->stream), p->what,
                             err, errlen))) ||
                     ((d->epilogue & CG_EPI_RESIDUAL) &&
                      RT_CU(cu, MemAlloc,
                            (&io->residual, d->kind == CG_CONV_FWD ? eb * (size_t)d->n * d->ho * d->wo * d->k
                                                                   : eb * (size_t)d->n * d->h * d->w * d->c),
                            p->what, err, errlen)) ||
                     ((d->epilogue & CG_EPI_DRELU) &&
                      RT_CU(cu, MemAlloc, (&io->mask, eb * (size_t)d->n * d->h * d->w * d->c), p->what, err,
                            errlen)) ||
                     (d->dbn && tune_alloc_bn(h, p, io, err, errlen)))) {
        destroy(h->dnn, &plan);
        return RT_CUDA_ECALL;
      }
      ms = time_plan(h, p, plan, ws, b, err, errlen);
      if (ms < 0) {
        destroy(h->dnn, &plan);
        continue;
      }
    }
    if (!p->plan || ms < best_ms) {
      destroy(h->dnn, &p->plan);
      destroy(h->dnn, &p->cfg);
      p->plan = plan;
      p->cfg = cfgs[i];
      cfgs[i] = NULL;
      p->workspace = ws;
      p->mode = mode, p->index = (int)i;
      best_ms = ms;
    } else {
      destroy(h->dnn, &plan);
    }
  }
  return RT_CUDA_OK;
}

static const cudnnBackendHeurMode_t MODES[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};

static TuneEntry *tune_find(RtCudnn *h, const char *what) {
  for (int i = 0; i < h->nentries; i++)
    if (!strcmp(h->entries[i].what, what)) return &h->entries[i];
  return NULL;
}

static int tune_add(RtCudnn *h, const char *what, int mode, int index) {
  TuneEntry *e = tune_find(h, what);
  if (!e) {
    if (h->nentries == h->entries_cap) {
      int cap = h->entries_cap ? 2 * h->entries_cap : 32;
      TuneEntry *grown = realloc(h->entries, sizeof *grown * (size_t)cap);
      if (!grown) return -1;
      h->entries = grown, h->entries_cap = cap;
    }
    e = &h->entries[h->nentries++];
    snprintf(e->what, sizeof e->what, "%s", what);
  }
  e->mode = mode, e->index = index;
  return 0;
}

/* The remembered winner for p, when it still finalizes: 1 taken, 0 not. */
static int take_remembered(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  const TuneEntry *e = tune_find(h, p->what);
  if (!e || e->mode < 0 || e->mode > 1) return 0;
  cudnnBackendDescriptor_t *cfgs = NULL;
  int64_t n = 0;
  if (heuristics(h, p, MODES[e->mode], &cfgs, &n, err, errlen)) return 0;
  if (e->index < n && engine_acceptable(h, cfgs[e->index], p->key.dtype, p->key.tf32)) {
    int64_t ws = 0;
    cudnnBackendDescriptor_t plan = make_plan(h, p, cfgs[e->index], &ws, err, errlen);
    if (plan) {
      p->plan = plan, p->cfg = cfgs[e->index], cfgs[e->index] = NULL;
      p->workspace = ws, p->mode = e->mode, p->index = e->index;
    }
  }
  for (int64_t i = 0; i < n; i++) destroy(h->dnn, &cfgs[i]);
  free(cfgs);
  return p->plan != NULL;
}

/* Rewrites the tuning file with every remembered winner (temporary file,
 * then rename: a reader never sees half a file). */
static void tune_save(RtCudnn *h) {
  if (!h->tune_path) return;
  size_t len = strlen(h->tune_path) + 16;
  char *tmp = malloc(len);
  if (!tmp) return;
  snprintf(tmp, len, "%s.tmp", h->tune_path);
  FILE *f = fopen(tmp, "w");
  int ok = f != NULL;
  if (f) {
    size_t version = h->dnn->GetVersion();
    fprintf(f, "# netc cuDNN tuning cache: cudnn-version heuristics-mode position description\n");
    for (int i = 0; i < h->nentries; i++)
      fprintf(f, "%zu %d %d %s\n", version, h->entries[i].mode, h->entries[i].index, h->entries[i].what);
    ok = !ferror(f);
    ok = fclose(f) == 0 && ok;
  }
  if (ok) ok = rename(tmp, h->tune_path) == 0;
  if (!ok) remove(tmp);
  free(tmp);
}

RtCudaStatus rt_cudnn_tune_cache(RtCudnn *h, const char *path, char *err, size_t errlen) {
  if (!h || !path) {
    rt_errf(err, errlen, "rt_cudnn_tune_cache: NULL argument");
    return RT_CUDA_EARG;
  }
  if (!h->tune) return RT_CUDA_OK;
  free(h->tune_path);
  if (!(h->tune_path = strdup(path))) {
    rt_errf(err, errlen, "rt_cudnn_tune_cache: out of host memory");
    return RT_CUDA_ENOMEM;
  }
  FILE *f = fopen(path, "r");
  if (!f) return RT_CUDA_OK;
  char line[512];
  size_t version = h->dnn->GetVersion();
  while (fgets(line, sizeof line, f)) {
    size_t v;
    int mode, index, at = 0;
    if (line[0] == '#' || sscanf(line, "%zu %d %d %n", &v, &mode, &index, &at) != 3 || !at || v != version) continue;
    line[strcspn(line, "\n")] = 0;
    if (mode >= 0 && mode <= 1 && index >= 0 && tune_add(h, line + at, mode, index)) break;
  }
  fclose(f);
  return RT_CUDA_OK;
}

void rt_cudnn_workspace_cap(RtCudnn *h, size_t bytes) {
  if (h) h->ws_cap = (int64_t)bytes;
}

void rt_cudnn_verbose(RtCudnn *h, int on) {
  if (h) h->verbose = on;
}

void rt_cudnn_deterministic(RtCudnn *h, int on) {
  if (h) h->deterministic = on != 0;
}

void rt_cudnn_tune_counts(const RtCudnn *h, int *cached, int *timed, int *heuristic) {
  if (cached) *cached = h ? h->cached : 0;
  if (timed) *timed = h ? h->timed : 0;
  if (heuristic) *heuristic = h ? h->heuristic : 0;
}

/* p->plan for p's graph: remembered, tuned or heuristics' first. */
static RtCudaStatus select_plan(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  RtCudaStatus s = RT_CUDA_OK;
  if (h->tune && take_remembered(h, p, err, errlen)) {
    h->cached++;
    return RT_CUDA_OK;
  }
  TuneBufs b;
  memset(&b, 0, sizeof b);
  int64_t total = 0;
  int acceptable = 0;
  RtCudaStatus heur = RT_CUDA_OK;
  h->capped = 0;
  int64_t cap = h->ws_cap;
  for (size_t m = 0; m < 2 && !p->plan && !s; m++) {
    /* nothing within the workspace cap: the modes again without it */
    if (m == 1 && !p->plan && h->capped && h->ws_cap) h->ws_cap = 0, m = 0;
    cudnnBackendDescriptor_t *cfgs = NULL;
    int64_t n = 0;
    /* a mode that fails (not every mode covers every graph) leaves the next */
    if ((heur = heuristics(h, p, MODES[m], &cfgs, &n, err, errlen))) continue;
    total += n;
    s = choose(h, p, (int)m, cfgs, n, &b, &acceptable, err, errlen);
    for (int64_t i = 0; i < n; i++) destroy(h->dnn, &cfgs[i]);
    free(cfgs);
  }
  h->ws_cap = cap;
  tune_bufs_free(h->cu, &b);
  if (s) return s;
  if (!p->plan) {
    if (!total && heur) return heur;
    if (!total)
      rt_errf(err, errlen, "%s:%d: cuDNN heuristics gave no engine configuration (%s)", __FILE__, __LINE__, p->what);
    else if (!acceptable)
      rt_errf(err, errlen,
              "%s:%d: none of cuDNN's %lld engine configurations keeps FP32 numerics (no TF32 on f32, FP32 "
              "reductions)%s (%s)",
              __FILE__, __LINE__, (long long)total, h->deterministic ? " and is deterministic" : "", p->what);
    /* otherwise err holds the last configuration's failure */
    return RT_CUDA_ECALL;
  }
  if (!h->tune) {
    h->heuristic++;
  } else {
    h->timed++;
    if (!tune_add(h, p->what, p->mode, p->index)) tune_save(h);
  }
  return RT_CUDA_OK;
}

/* p's graph and plan; a dbn graph that gets none is made again in its
 * SUB form (see the top), and its failure then reports both. */
static RtCudaStatus build(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  RtCudaStatus s = make_graph(h, p, err, errlen);
  if (!s) s = select_plan(h, p, err, errlen);
  if (!s || !p->key.dbn || s == RT_CUDA_ENOMEM) return s;
  char first[1024];
  snprintf(first, sizeof first, "%s", err && errlen ? err : "");
  plan_clear(h->dnn, p);
  p->dbn_sub = 1;
  size_t len = strlen(p->what);
  snprintf(p->what + len, sizeof p->what - len, " sub-mean");
  s = make_graph(h, p, err, errlen);
  if (!s) s = select_plan(h, p, err, errlen);
  if (s && err && errlen) {
    char second[1024];
    snprintf(second, sizeof second, "%s", err);
    rt_errf(err, errlen, "with z - mean as ADD(alpha2 = -1): %s; as SUB: %s", first, second);
  }
  return s;
}

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
  else if (key.epilogue)
    snprintf(epi, sizeof epi, "+scale-bias%s%s", key.epilogue & CG_EPI_RESIDUAL ? "-add" : "",
             key.epilogue & CG_EPI_RELU ? "-relu" : "");
  if (key.dbn) snprintf(epi, sizeof epi, "+dbn");
  snprintf(p->what, sizeof p->what, "conv %s%s%s%s %s%s x%dx%dx%dx%d w%dx%dx%dx%d y%dx%d s%dx%d p%dx%d d%dx%d g%d%s",
           key.prologue ? "scale-bias-relu+" : "", KIND_NAMES[key.kind], key.genstats ? "+genstats" : "", epi,
           dtype_name(key.dtype), key.tf32 ? " (tf32)" : "",
           key.n, key.h, key.w, key.c, key.k, key.r, key.s, key.c / key.groups, key.ho, key.wo, key.stride[0],
           key.stride[1], key.pad[0], key.pad[1], key.dilation[0], key.dilation[1], key.groups,
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

/* Whether io gives exactly the buffers plan's description asks for. */
static RtCudaStatus check_io(RtCudnn *h, const RtConvPlan *plan, const RtConvIo *io, const char *fn, char *err,
                             size_t errlen) {
  if (!h || !plan || !io || !io->x || !io->w || !io->y || (plan->workspace > 0 && !io->workspace)) {
    rt_errf(err, errlen, "%s: NULL argument%s", fn, plan ? "" : " (plan)");
    return RT_CUDA_EARG;
  }
  const CgConvDesc *d = &plan->key;
  if (!io->stats != !d->genstats || !io->sb != !d->prologue) {
    rt_errf(err, errlen, "%s: %s %s statistics and %s scale and bias, the call gives %s and %s", fn,
            plan->what, d->genstats ? "writes" : "writes no", d->prologue ? "reads" : "reads no",
            io->stats ? "statistics" : "none", io->sb ? "scale and bias" : "none");
    return RT_CUDA_EARG;
  }
  int e = d->epilogue;
  if (!io->esb != !(e & CG_EPI_AFFINE) || !io->residual != !(e & CG_EPI_RESIDUAL) || !io->mask != !(e & CG_EPI_DRELU)) {
    rt_errf(err, errlen, "%s: %s: the epilogue's buffers (scale and bias %s, residual %s, mask %s) do not match it",
            fn, plan->what, io->esb ? "given" : "none", io->residual ? "given" : "none", io->mask ? "given" : "none");
    return RT_CUDA_EARG;
  }
  const CUdeviceptr bn[] = {io->bn.z,    io->bn.mean,   io->bn.invstd, io->bn.gamma,
                            io->bn.beta, io->bn.dgamma, io->bn.dbeta,  io->bn.abc};
  int given = 0;
  for (size_t i = 0; i < sizeof bn / sizeof bn[0]; i++) given += bn[i] != 0;
  if (given != (d->dbn ? (int)(sizeof bn / sizeof bn[0]) : 0)) {
    rt_errf(err, errlen, "%s: %s: %s, the call gives %d of them", fn, plan->what,
            d->dbn ? "needs all 8 batch-norm buffers (z, mean, invstd, gamma, beta, dgamma, dbeta, abc)"
                   : "takes no batch-norm buffers",
            given);
    return RT_CUDA_EARG;
  }
  return RT_CUDA_OK;
}

RtCudaStatus rt_cudnn_conv_exec(RtCudnn *h, RtConvPlan *plan, const RtConvIo *io, char *err, size_t errlen) {
  RtCudaStatus s = check_io(h, plan, io, "rt_cudnn_conv_exec", err, errlen);
  return s ? s : run_io(h, plan, plan->plan, io, 1, err, errlen);
}

RtCudaStatus rt_cudnn_conv_time(RtCudnn *h, RtConvPlan *plan, const RtConvIo *io, int runs, float *ms, char *err,
                                size_t errlen) {
  RtCudaStatus s = check_io(h, plan, io, "rt_cudnn_conv_time", err, errlen);
  if (s) return s;
  if (!ms || runs < 1) {
    rt_errf(err, errlen, "rt_cudnn_conv_time: %s", ms ? "runs must be at least 1" : "ms is NULL");
    return RT_CUDA_EARG;
  }
  *ms = time_runs(h, plan, plan->plan, io, runs, 1, err, errlen);
  return *ms < 0 ? RT_CUDA_ECALL : RT_CUDA_OK;
}

RtCudaStatus rt_cudnn_conv_exec_on(RtCudnn *h, RtConvPlan *plan, const RtConvIo *io, CUstream stream, char *err,
                                   size_t errlen) {
  CUstream own = h->stream;
  RtCudaStatus s = DNN(h, SetStream, (h->handle, (cudaStream_t)stream), "cuDNN handle on another stream");
  if (s) return s;
  h->stream = stream;
  s = rt_cudnn_conv_exec(h, plan, io, err, errlen);
  h->stream = own;
  char back_err[512];
  RtCudaStatus back = dnn_check(h->dnn, h->dnn->SetStream(h->handle, (cudaStream_t)own), __FILE__, __LINE__,
                                "cudnnSetStream(h->handle, own)", "cuDNN handle back on its stream", back_err,
                                sizeof back_err);
  if (!s && back) rt_errf(err, errlen, "%s", back_err);
  return s ? s : back;
}
