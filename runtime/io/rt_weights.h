/* rt_weights.h - a graph's parameters and state in and out of safetensors
 * files under torchvision's state_dict names.
 *
 * Every PARAM and STATE value of a graph is one tensor named as the value
 * ("layer1.0.conv1.weight", "bn1.running_var", and the optimizer's
 * "fc.weight.momentum_buffer").  Files hold filters as PyTorch does, KCRS
 * [K,C,R,S]; a value whose layout is KRSC (after the layout pass) is
 * transposed on the way in and out, so a file written from a graph before
 * the layout pass and one written after it are the same bytes.  Files are
 * written in F32; F32, F16 and BF16 files are read (converted to float).
 *
 * Loading checks the whole file before it writes anything: every tensor the
 * graph needs is present with the right shape and a float dtype, and the
 * file has no tensor the graph does not know, and every element is finite
 * (no NaN, no infinity) and no running variance (`*.running_var`) is below
 * 0.  All problems are listed by name in one message, a bad value as
 * "tensor 'layer1.0.conv1.weight': element 17 is NaN" (the first bad
 * element of the tensor, its index in the file's row-major order).  PyTorch's `*.num_batches_tracked` buffers (batch
 * norm's step counters, which netc does not keep) are ignored, not extra.
 * Saving goes through rt_st_writer, which replaces the file atomically.
 *
 * Two kinds of file are written.  rt_weights_save writes every PARAM and
 * STATE, optimizer state included (for checkpoints: a run resumes from it).
 * rt_weights_export writes a PyTorch state_dict, exactly the keys
 * torchvision's model has: no optimizer state, and for every batch norm
 * (a STATE "<bn>.running_mean") "<bn>.num_batches_tracked", an I64 scalar,
 * so that load_state_dict(..., strict=True) takes it.
 *
 * The value storage belongs to whoever runs the graph: the caller gives a
 * function returning value v's buffer, ir_type_numel(type, 1) floats in the
 * value's memory order (the CPU executor's layout; rt_weights_*_cpu wrap
 * it).  Nothing is printed; failures return a status and a message. */
#ifndef NETC_RT_WEIGHTS_H
#define NETC_RT_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "rt_cpu.h"
#include "rt_safetensors.h"

typedef enum RtWeightsStatus {
  RT_WEIGHTS_OK = 0,
  RT_WEIGHTS_ERR_IO,       /* the file cannot be opened, read, parsed or written */
  RT_WEIGHTS_ERR_MISMATCH, /* missing, extra, mis-shaped or non-float tensors (named in the message) */
  RT_WEIGHTS_ERR_VALUE,    /* a NaN or infinite element, a negative running variance (tensor and element named) */
  RT_WEIGHTS_ERR_GRAPH,    /* a parameter or state value the files cannot hold (integer, symbolic N) */
  RT_WEIGHTS_ERR_NOMEM,
} RtWeightsStatus;

enum {
  RT_WEIGHTS_ERRMAX = 2048,
  /* Load flags. */
  RT_WEIGHTS_OPTIM_OPTIONAL = 1, /* absent optimizer state (`*.momentum_buffer`, `loss_scale`,
                                    `loss_scale_good_steps`) is left as it is */
  RT_WEIGHTS_EXTRA_OK = 2,       /* tensors the graph does not have are ignored */
  RT_WEIGHTS_TRAINING_OK = 4,    /* optimizer state the graph does not have (`*.momentum_buffer`, `loss_scale`,
                                    `loss_scale_good_steps`) is ignored: an inference graph reading a checkpoint;
                                    any other tensor the graph lacks is still extra */
  /* With any flags, FP8's amax histories (`*.amax_history`) may be absent (left as they are), extra, or of
     another length (ignored). */
};

/* Value v's storage (see above), or NULL when the caller has none. */
typedef float *(*RtWeightsBufFn)(void *user, int v);

/* Reads every PARAM and STATE of g from path into buf(user, v). */
RtWeightsStatus rt_weights_load(const IrGraph *g, const char *path, unsigned flags, RtWeightsBufFn buf, void *user,
                                char *err, size_t errlen);
/* Writes every PARAM and STATE of g to path. */
RtWeightsStatus rt_weights_save(const IrGraph *g, const char *path, RtWeightsBufFn buf, void *user, char *err,
                                size_t errlen);
/* The same with more "__metadata__" entries, set by meta(w, meta_user)
 * (non-zero: fail) before the one atomic write; meta may be NULL. */
typedef int (*RtWeightsMetaFn)(RtStWriter *w, void *meta_user);
RtWeightsStatus rt_weights_save_meta(const IrGraph *g, const char *path, RtWeightsBufFn buf, void *user,
                                     RtWeightsMetaFn meta, void *meta_user, char *err, size_t errlen);

/* Writes g's PyTorch state_dict (see above): every PARAM and STATE but
 * the optimizer's, and "<bn>.num_batches_tracked" = batches_tracked (>= 0)
 * beside every "<bn>.running_mean". */
RtWeightsStatus rt_weights_export(const IrGraph *g, const char *path, RtWeightsBufFn buf, void *user,
                                  int64_t batches_tracked, char *err, size_t errlen);

/* The same for the CPU executor x made from g. */
RtWeightsStatus rt_weights_load_cpu(RtCpu *x, const IrGraph *g, const char *path, unsigned flags, char *err,
                                    size_t errlen);
RtWeightsStatus rt_weights_save_cpu(RtCpu *x, const IrGraph *g, const char *path, char *err, size_t errlen);

/* Adds data (a value of type t at batch size `batch`, in its memory order)
 * to w as an F32 tensor called name, each element times scale: KRSC filters
 * become KCRS, NHWC activations NCHW, N becomes batch; a rank-0 value is a
 * scalar.  The writer keeps its own copy. */
RtWeightsStatus rt_weights_add(RtStWriter *w, const char *name, const IrType *t, int64_t batch, const float *data,
                               float scale, char *err, size_t errlen);

/* The rule a load applies to each tensor's values (see above), for any
 * file's float tensor t (F32, F16, BF16; other dtypes pass): 1, with
 * "tensor 'NAME': element I is NaN" (or "is inf", "is -inf", "is X, a
 * variance below 0" for a `*.running_var`) in msg, at its first bad
 * element (row-major, the file's order); 0 when every element is fine. */
int rt_weights_bad_value(const RtStTensor *t, char *msg, size_t cap);

/* The shape a value of type t has in a file at batch size batch (KCRS for
 * filters, NCHW for activations); returns the rank. */
int rt_weights_file_shape(const IrType *t, int64_t batch, int64_t *shape);

#endif
