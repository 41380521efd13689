/* rt_cudnn.h - convolutions through cuDNN 9's graph (backend) API, from C.
 *
 * libcudnn.so.9 is loaded with dlopen at run time (like the driver: the
 * tools start on machines without a GPU).  A convolution is described by
 * CgConvDesc; rt_cudnn_conv_plan() builds (once per distinct description:
 * plans are cached in the RtCudnn handle) the operation graph, asks the
 * heuristics for engine configurations, and keeps the first that
 * finalizes (or, with tune set, the fastest of them, timed once).
 * Activations are NHWC, filters KRSC, all dense; FP32 accumulation.
 *
 * CgConvDesc (compiler/codegen/cg_conv.h: the code generator says which
 * convolution a node runs) describes the convolution.  Tensor roles are those of the forward convolution y = conv(x, w) in every
 * kind: CG_CONV_FWD reads x, w and writes y; CG_CONV_BWD_DATA reads y (dy)
 * and w and writes x (dx); CG_CONV_BWD_FILTER reads x and y (dy) and
 * writes w (dw).  Status codes and messages as in rt_cuda.h: a failed cuDNN
 * call is reported as `file:line: cudnnX(...): STATUS: text (what)`. */
#ifndef NETC_RT_CUDNN_H
#define NETC_RT_CUDNN_H

#include <stddef.h>
#include <stdint.h>

#include "cg_conv.h"
#include "ir.h"
#include "rt_cuda.h"

/* The device buffers of one run.  stats: 2*K floats when the plan's
 * description has genstats (zeroed first, on the stream), else 0.  sb: when
 * it has prologue, the per-channel scale (C elements of x's dtype) followed
 * by the bias (C more), 16-byte aligned; else 0.  workspace: the plan's
 * workspace bytes (may be 0 when it needs none). */
typedef struct RtConvIo {
  CUdeviceptr x, w, y, stats, sb, workspace;
  CUdeviceptr esb;      /* epilogue CG_EPI_AFFINE: K f32 scales, then K f32 biases; with CG_EPI_OUTSCALE
                         * the plan reads scales, biases and the K out scales from 2K floats in (the
                         * first 2K hold what the plan without it reads: cg_conv_esb_floats) */
  CUdeviceptr residual; /* epilogue CG_EPI_RESIDUAL: shaped and typed like y (forward), dx (data gradient) */
  CUdeviceptr mask;     /* epilogue CG_EPI_DRELU: shaped and typed like x (dx) */
  struct {              /* dbn: z shaped and typed like x (dx); the rest C f32 each (C = x's channels) */
    CUdeviceptr z, mean, invstd, gamma, beta; /* read */
    CUdeviceptr dgamma, dbeta, abc;           /* written; abc: 3*C, a then b then c */
  } bn;
} RtConvIo;

typedef struct RtCudnn RtCudnn;
typedef struct RtConvPlan RtConvPlan; /* owned by the RtCudnn handle */

/* A cuDNN handle on `stream` (of the current context).  RT_CUDA_ENODRIVER
 * when libcudnn.so.9 cannot be loaded. */
RtCudaStatus rt_cudnn_init(RtCudnn **out, CUstream stream, int tune, char *err, size_t errlen);
void rt_cudnn_free(RtCudnn *h); /* takes NULL; frees every plan */
/* The plan for d (cached); *workspace receives the bytes it needs.  With
 * rt_cudnn_verbose on, each new plan prints its description and workspace
 * to stderr (the executor holds the largest workspace of all). */
RtCudaStatus rt_cudnn_conv_plan(RtCudnn *h, const CgConvDesc *d, RtConvPlan **plan, size_t *workspace, char *err,
                                size_t errlen);
/* With tuning on, remember each convolution's winner in `path` (a text
 * file, one line per description, keyed by cuDNN's version): a later plan
 * for a description found there takes that configuration without timing
 * the candidates again.  The file is read now and rewritten (to a
 * temporary file, then renamed) whenever a new winner is found; an
 * unreadable or malformed file is ignored (the tuning simply runs).  No-op
 * when the handle does not tune. */
RtCudaStatus rt_cudnn_tune_cache(RtCudnn *h, const char *path, char *err, size_t errlen);
/* Plans made from now on skip engine configurations that need more than
 * `bytes` of workspace (0: no limit), unless none within it finalizes.
 * The workspace is device memory held for the executor's lifetime. */
void rt_cudnn_workspace_cap(RtCudnn *h, size_t bytes);
/* How the handle chose its plans so far: from the tuning cache, by timing
 * the candidates, or heuristics' first choice. */
void rt_cudnn_tune_counts(const RtCudnn *h, int *cached, int *timed, int *heuristic);
/* Runs plan on io's buffers, on the handle's stream (no host
 * synchronization): io must give exactly the buffers the plan's
 * description asks for. */
RtCudaStatus rt_cudnn_conv_exec(RtCudnn *h, RtConvPlan *plan, const RtConvIo *io, char *err, size_t errlen);
/* Times plan on io's buffers: one warm-up run, then `runs` runs between
 * two events on the handle's stream; *ms = their mean in milliseconds.
 * Waits for the second event (so for all earlier work on the stream);
 * writes what rt_cudnn_conv_exec writes. */
RtCudaStatus rt_cudnn_conv_time(RtCudnn *h, RtConvPlan *plan, const RtConvIo *io, int runs, float *ms, char *err,
                                size_t errlen);
/* Plans made from now on take only engines cuDNN marks deterministic (no
 * atomics in the reductions): bit-identical results run to run, for
 * comparisons; none such is an error.  Off by default. */
void rt_cudnn_deterministic(RtCudnn *h, int on);
/* Plans made from now on print their description and workspace, and when
 * tuning each engine configuration with its numerical notes and time (the
 * cudnn_verbose option).  Off by default. */
void rt_cudnn_verbose(RtCudnn *h, int on);
/* When tuning, plans made from now on time the first n acceptable engine
 * configurations (0: every one; the cudnn_tune_candidates option).  8 by
 * default. */
void rt_cudnn_tune_candidates(RtCudnn *h, int n);

/* rt_cudnn_conv_exec on `stream` rather than the handle's (the GPU
 * executor's side stream); the handle is set back to its own stream after. */
RtCudaStatus rt_cudnn_conv_exec_on(RtCudnn *h, RtConvPlan *plan, const RtConvIo *io, CUstream stream, char *err,
                                   size_t errlen);

#endif
