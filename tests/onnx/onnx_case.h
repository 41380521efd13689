/* onnx_case.h - one ONNX node test as the op mappers see it.
 *
 * The runner (onnx_conformance.c) loads a test's node and one data set into
 * an OnnxCase; the mapper for the node's op_type (the table in onnx_ops.c)
 * checks that the attributes and dtypes are ones netc's reference kernels
 * (runtime/rt_ref.h) can express, runs the kernels and fills every node
 * output.  A mapper that cannot express the case returns ONNX_RUN_SKIP with
 * a one-line reason; it never computes the op itself, only reshapes,
 * transposes or broadcasts operands around the kernel calls. */
#ifndef NETC_ONNX_CASE_H
#define NETC_ONNX_CASE_H

#include <stdarg.h>

#include "onnx_read.h"

enum { ONNX_MAX_IO = 16 };

typedef enum OnnxRunStatus {
  ONNX_RUN_OK,    /* outputs filled */
  ONNX_RUN_SKIP,  /* the kernels cannot express this case; why says so */
  ONNX_RUN_ERROR, /* a kernel or the mapping failed; why says so (a failure) */
} OnnxRunStatus;

typedef struct OnnxCase {
  const Onnx__NodeProto *node;
  int64_t opset; /* version of the node's domain */
  int nin;
  const OnnxTensor *in[ONNX_MAX_IO]; /* node input order; NULL = omitted */
  int nout;
  OnnxTensor out[ONNX_MAX_IO]; /* node output order, set by the mapper */
  char why[256];
  OnnxRunStatus status; /* what onnx_case_skip/error last set */
} OnnxCase;

typedef OnnxRunStatus (*OnnxOpFn)(OnnxCase *c);

typedef struct OnnxOp {
  const char *op_type;
  OnnxOpFn run;
} OnnxOp;

/* The mappers, one per op (onnx_op_*.c). */
OnnxRunStatus onnx_op_conv(OnnxCase *c);
OnnxRunStatus onnx_op_batchnorm(OnnxCase *c);
OnnxRunStatus onnx_op_relu(OnnxCase *c);
OnnxRunStatus onnx_op_add(OnnxCase *c);
OnnxRunStatus onnx_op_maxpool(OnnxCase *c);
OnnxRunStatus onnx_op_avgpool(OnnxCase *c);
OnnxRunStatus onnx_op_global_avgpool(OnnxCase *c);
OnnxRunStatus onnx_op_gemm(OnnxCase *c);
OnnxRunStatus onnx_op_softmax(OnnxCase *c);
OnnxRunStatus onnx_op_sce(OnnxCase *c);
OnnxRunStatus onnx_op_momentum(OnnxCase *c);

/* The ops under test, in report order (onnx_ops.c). */
extern const OnnxOp ONNX_OPS[];
extern const int ONNX_NOPS;

/* Set c->why and c->status and return ONNX_RUN_SKIP / ONNX_RUN_ERROR.  Helpers
 * below that fail leave the status in c->status for the mapper to return. */
OnnxRunStatus onnx_case_skip(OnnxCase *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
OnnxRunStatus onnx_case_error(OnnxCase *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ONNX_RUN_ERROR with the kernel's message when rc != RT_REF_OK, else OK. */
OnnxRunStatus onnx_case_kernel(OnnxCase *c, int rc, const char *kernel);
/* Skip reason when an attribute outside known is present, or NULL. */
const char *onnx_case_unknown_attr(OnnxCase *c, const char *const *known);
/* Input k when present and FLOAT, else NULL (missing: error, other dtype: skip). */
const OnnxTensor *onnx_case_float_in(OnnxCase *c, int k);
/* Allocates output k as a zeroed float tensor; -1 (and c->why) when out of memory. */
int onnx_case_out_f(OnnxCase *c, int k, int ndim, const int64_t *dims);
/* Allocates output k as a zeroed INT64 tensor. */
int onnx_case_out_i64(OnnxCase *c, int k, int ndim, const int64_t *dims);

/* --- shapes (onnx_shape.c) ---------------------------------------------- */

/* numpy broadcasting of a and b's shapes into dims; -1 when incompatible. */
int onnx_shape_broadcast(const OnnxTensor *a, const OnnxTensor *b, int *ndim, int64_t *dims);
/* dst (shape dims) = the float tensor src broadcast to dims by numpy rules. */
int onnx_shape_expand(const OnnxTensor *src, int ndim, const int64_t *dims, float *dst);
/* y[o][i][a] = x[o][a][i]: moves the middle axis of [outer, A, inner] last. */
void onnx_shape_axis_to_last(const float *x, int64_t outer, int64_t A, int64_t inner, float *y);
/* The inverse: y[o][a][i] = x[o][i][a]. */
void onnx_shape_last_to_axis(const float *x, int64_t outer, int64_t A, int64_t inner, float *y);
/* Product of dims[from, to). */
int64_t onnx_shape_count(const int64_t *dims, int from, int to);

/* --- window attributes (onnx_spatial.c) ---------------------------------- */

/* A conv or pool window over x = [N, C, H, W]; a 1-D op on [N, C, L] is
 * mapped onto H = 1, W = L. */
typedef struct OnnxSpatial {
  int N, C, H, W;
  int R, S;
  int stride_h, stride_w;
  int pad_top, pad_left, pad_bottom, pad_right;
  int dil_h, dil_w;
} OnnxSpatial;

/* Reads kernel_shape (or kernel, when not NULL: the filter's spatial dims),
 * strides, pads, dilations and auto_pad (SAME_* turned into explicit pads).
 * Returns 0, or -1 with a skip reason in c->why for 3-D and beyond. */
int onnx_spatial_read(OnnxCase *c, const OnnxTensor *x, const int64_t *kernel, OnnxSpatial *sp);

#endif
