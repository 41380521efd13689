/* onnx_weights.h - F32 tensors written as a safetensors file: an ONNX
 * model's initializers, as the IR names and shapes its parameters and
 * state (netc FILE.onnx --weights-out=W.safetensors; onnx_weights.c). */
#ifndef NETC_ONNX_WEIGHTS_H
#define NETC_ONNX_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

typedef struct OnnxWeight {
  const char *name; /* [A-Za-z0-9_.] only (the IR's name) */
  int rank;
  int64_t dim[IR_MAX_RANK]; /* the IR's shape */
  const float *f;           /* the values: f, or little-endian bytes raw */
  const uint8_t *raw;
  int transposed; /* rank 2: the values are [dim[1], dim[0]] (MatMul's [in, out]) */
} OnnxWeight;

/* Writes w[0..n-1] to path; 0, or -1 with a message in err. */
int onnx_weights_write(const char *path, const OnnxWeight *w, int n, char *err, size_t errlen);

#endif
