/* onnx_case.c - the small checks every op mapper needs: skip and error
 * messages, attribute and dtype guards, output allocation. */
#include "onnx_case.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_ref.h"

OnnxRunStatus onnx_case_skip(OnnxCase *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
  return c->status = ONNX_RUN_SKIP;
}

OnnxRunStatus onnx_case_error(OnnxCase *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
  return c->status = ONNX_RUN_ERROR;
}

OnnxRunStatus onnx_case_kernel(OnnxCase *c, int rc, const char *kernel) {
  if (rc == RT_REF_OK) return ONNX_RUN_OK;
  return onnx_case_error(c, "%s returned %d (%s)", kernel, rc, rt_ref_strerror(rc));
}

const char *onnx_case_unknown_attr(OnnxCase *c, const char *const *known) {
  const char *name = onnx_attr_unknown(c->node, known);
  if (!name) return NULL;
  onnx_case_skip(c, "attribute '%s' not mapped", name);
  return c->why;
}

const OnnxTensor *onnx_case_float_in(OnnxCase *c, int k) {
  if (k >= c->nin || !c->in[k]) {
    onnx_case_error(c, "input %d missing", k);
    return NULL;
  }
  if (c->in[k]->dtype != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
    onnx_case_skip(c, "input %d is %s; the kernels are float32 only", k, onnx_dtype_name(c->in[k]->dtype));
    return NULL;
  }
  return c->in[k];
}

static int out_check(OnnxCase *c, int k) {
  if (k >= c->nout || k >= ONNX_MAX_IO) {
    onnx_case_error(c, "node has no output %d", k);
    return -1;
  }
  onnx_tensor_free(&c->out[k]);
  return 0;
}

int onnx_case_out_f(OnnxCase *c, int k, int ndim, const int64_t *dims) {
  if (out_check(c, k)) return -1;
  if (onnx_tensor_alloc_f(&c->out[k], ndim, dims)) {
    onnx_case_error(c, "out of memory for output %d", k);
    return -1;
  }
  return 0;
}

int onnx_case_out_i64(OnnxCase *c, int k, int ndim, const int64_t *dims) {
  if (onnx_case_out_f(c, k, ndim, dims)) return -1;
  OnnxTensor *t = &c->out[k];
  free(t->f);
  t->f = NULL;
  t->dtype = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
  t->i = calloc(t->n ? t->n : 1, sizeof *t->i);
  if (!t->i) {
    onnx_case_error(c, "out of memory for output %d", k);
    return -1;
  }
  return 0;
}
