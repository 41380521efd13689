/* rt_cudnn_impl.h - what the files of the cuDNN executor share (internal
 * to runtime/gpu/; rt_cudnn.h is the contract, rt_cudnn.c's opening the design):
 *
 *   rt_cudnn.c        the public entry points: handles, plans (check, normalize, build), options
 *   rt_cudnn_lib.c    libcudnn loaded with dlopen: the function table, the error check
 *   rt_cudnn_graph.c  the operation graph of each description: convolution, GenStats,
 *                     prologue, epilogue, dbn
 *   rt_cudnn_tune.c   engine choice: heuristics, acceptable numerics, timing, the tuning cache
 *   rt_cudnn_exec.c   execution: variant packs, zeroed outputs, timed runs, rt_cudnn_conv_exec* */
#ifndef NETC_RT_CUDNN_IMPL_H
#define NETC_RT_CUDNN_IMPL_H

#include <cudnn_graph.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt_cudnn.h"

enum { UID_X = 1, UID_W = 2, UID_Y = 3, UID_SUM = 4, UID_SQSUM = 5, UID_SCALE = 6, UID_BIAS = 7, UID_VIRT = 8 };
enum { UID_ESCALE = 11, UID_EBIAS = 12, UID_RESIDUAL = 13, UID_MASK = 14, UID_EOSCALE = 15, UID_EVIRT = 20 };
enum { UID_Z = 30, UID_BN_IN = 31, UID_BN_OUT = 35, UID_BN_VIRT = 40 };
/* dbn: its per-channel inputs (uids 31..34) and outputs (35..39), in order */
enum { BN_MEAN, BN_INVSTD, BN_GAMMA, BN_BETA, BN_INS };
enum { BN_DGAMMA, BN_DBETA, BN_EQA, BN_EQB, BN_EQC, BN_OUTS };
/* dbn: its pointwise operations, in order (z - mean, * invstd, * gamma, + beta, relu_bwd) */
enum { BN_SUBMEAN, BN_INVSTD_MUL, BN_GAMMA_MUL, BN_BETA_ADD, BN_DRELU, BN_OPS };
enum { PRO_MUL, PRO_ADD, PRO_RELU, PRO_OPS }; /* the prologue's pointwise operations, in order */
enum { EPI_OPS = 5 };                         /* at most: scale, bias, residual, relu, out scale */
enum { TUNE_CANDIDATES = 8, TUNE_RUNS = 3 };  /* TUNE_CANDIDATES: rt_cudnn_tune_candidates's default */

typedef struct DnnApi {
  cudnnStatus_t (*Create)(cudnnHandle_t *handle);
  cudnnStatus_t (*Destroy)(cudnnHandle_t handle);
  cudnnStatus_t (*SetStream)(cudnnHandle_t handle, cudaStream_t stream);
  const char *(*GetErrorString)(cudnnStatus_t status);
  void (*GetLastErrorString)(char *message, size_t max_size);
  cudnnStatus_t (*BackendCreateDescriptor)(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *desc);
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

struct RtConvPlan {
  CgConvDesc key; /* normalized: zeroed, then field by field */
  cudnnBackendDescriptor_t x, w, y, conv, op, graph, cfg, plan;
  cudnnBackendDescriptor_t sum, sqsum, stats; /* genstats only: its outputs and operation */
  /* prologue only: scale, bias, the virtual results, pointwise descriptors and operations */
  cudnnBackendDescriptor_t scale, bias, virt[PRO_OPS], pw[PRO_OPS], pwop[PRO_OPS];
  /* epilogue only: its operands, the virtual results, pointwise descriptors and operations */
  cudnnBackendDescriptor_t escale, ebias, eres, emask, eoscale, evirt[EPI_OPS], epw[EPI_OPS], epop[EPI_OPS];
  int nepi;
  /* dbn only: z, the per-channel tensors, the virtual results (bnvirt[0] is the convolution's), the
   * pointwise descriptors and operations, the BN_BWD_WEIGHTS operation */
  cudnnBackendDescriptor_t bnz, bnin[BN_INS], bnout[BN_OUTS], bnvirt[BN_OPS], bnpw[BN_OPS], bnop[BN_OPS], bnw;
  int dbn_sub; /* z - mean as a SUB (the fallback form) rather than an ADD with ALPHA2 = -1 */
  int acc_i32; /* i8: the convolution's result (the epilogue's first input) an i32 tensor, not f32 */
  int64_t workspace;
  int mode, index; /* where the chosen configuration was in the heuristics' lists */
  char what[320];
};

typedef struct TuneEntry {
  char what[320];
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
  char *tune_path;    /* rt_cudnn_tune_cache's file, or NULL */
  TuneEntry *entries; /* remembered winners */
  int nentries, entries_cap;
  int cached, timed, heuristic;
  int64_t ws_cap;    /* rt_cudnn_workspace_cap; 0: none */
  int deterministic; /* rt_cudnn_deterministic */
  int verbose;       /* rt_cudnn_verbose */
  int candidates;    /* rt_cudnn_tune_candidates; 0: all */
  int capped;        /* configurations skipped for the cap by the plan being built */
};

/* --- rt_cudnn_lib.c ---------------------------------------------------------- */

/* The process-wide function table (*api), loaded on first use; else
 * RT_CUDA_ENODRIVER with why ("no cuDNN (...)"). */
RtCudaStatus rt_cudnn_lib_load(const DnnApi **api, char *err, size_t errlen);

/* Formats a failed cuDNN call (status name, then cuDNN's own last message
 * on one line) and returns RT_CUDA_ECALL; RT_CUDA_OK on success. */
RtCudaStatus rt_cudnn_lib_check(const DnnApi *d, cudnnStatus_t status, const char *file, int line, const char *call,
                                const char *what, char *err, size_t errlen);

/* DNN(h, BackendFinalize, (plan), what) calls h->dnn->BackendFinalize(plan)
 * and reports it as "cudnnBackendFinalize(plan)"; needs err, errlen. */
#define DNN(h, fn, args, what) \
  rt_cudnn_lib_check((h)->dnn, (h)->dnn->fn args, __FILE__, __LINE__, "cudnn" #fn #args, (what), err, errlen)
#define SET(h, d, name, type, count, values, what) DNN(h, BackendSetAttribute, (d, name, type, count, values), what)

/* A quantized convolution's operand dtype (i8, FP8 E4M3): products
 * dequantized by the epilogue's scale. */
static inline int dtype_quantized(IrDtype t) { return t == IR_DT_I8 || t == IR_DT_F8E4M3; }

static inline size_t dtype_bytes(IrDtype t) {
  return t == IR_DT_F32 ? 4 : t == IR_DT_I8 || t == IR_DT_F8E4M3 || t == IR_DT_F8E5M2 ? 1 : 2;
}

static inline const char *dtype_name(IrDtype t) {
  return t == IR_DT_F32      ? "f32"
         : t == IR_DT_F16    ? "f16"
         : t == IR_DT_I8     ? "i8"
         : t == IR_DT_F8E4M3 ? "f8e4m3"
         : t == IR_DT_F8E5M2 ? "f8e5m2"
                             : "bf16";
}

static inline void destroy(const DnnApi *d, cudnnBackendDescriptor_t *p) {
  if (*p) d->BackendDestroyDescriptor(*p);
  *p = NULL;
}

/* --- rt_cudnn_graph.c, rt_cudnn_tune.c, rt_cudnn_exec.c ---------------------- */

/* p's operation graph (p->graph and its parts) from its description p->key. */
RtCudaStatus rt_cudnn_graph_make(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen);

/* p's execution plan (p->plan, p->cfg, p->workspace) for its graph: the
 * remembered winner, the fastest acceptable candidate when tuning, or
 * the first acceptable one. */
RtCudaStatus rt_cudnn_tune_select(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen);

/* Runs plan (made from p's graph) on io, first zeroing (when zero_stats
 * is set) the GenStats sums or the dbn outputs its description has. */
RtCudaStatus rt_cudnn_exec_run(RtCudnn *h, const RtConvPlan *p, cudnnBackendDescriptor_t plan, const RtConvIo *io,
                               int zero_stats, char *err, size_t errlen);
/* Milliseconds per run of plan on io (mean of runs after one warm-up), or
 * a negative value when it fails to run. */
float rt_cudnn_exec_time(RtCudnn *h, const RtConvPlan *p, cudnnBackendDescriptor_t plan, const RtConvIo *io, int runs,
                         int zero_stats, char *err, size_t errlen);

#endif
