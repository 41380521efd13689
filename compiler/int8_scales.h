/* int8_scales.h - calibrated INT8 scales: the file `netrun calibrate` writes
 * and `netc --int8-scales` (or netrun's) reads.
 *
 * A text file, a layer a line: `LAYER SCALE`, SCALE the quantization step of
 * the layer's input (x becomes round(x / SCALE), clamped to +-127), with `#`
 * comments (calibrate writes its method and image count there):
 *
 *   # netc int8 scales: LAYER SCALE (the input's step: x -> round(x / SCALE))
 *   # method percentile 99.99 over 512 images of models/resnet20.net
 *   layer1.0.conv1 0.0123456
 *
 * The precision pass gives an i8 layer's input cast `scale=SCALE` when the
 * file lists the layer; a weight's cast is per output channel (axis=0)
 * either way (docs/passes/precision.md). */
#ifndef NETC_INT8_SCALES_H
#define NETC_INT8_SCALES_H

#include <stdio.h>

#include "arena.h"
#include "diag.h"
#include "ir.h"

typedef struct Int8Scales {
  const char **layer;
  double *scale;
  int n;
} Int8Scales;

/* Reads path into *out (its strings in a).  0, or -1 after an error in d
 * naming the file and line (a malformed line, a scale that is not a
 * positive finite number, a layer given twice). */
int int8_scales_read(Arena *a, Diag *d, const char *path, Int8Scales *out);

/* A table giving every i8 layer of g (a node with precision=i8 and a
 * name) the same step: calibrated INT8 before any calibration (the tests'
 * and benchmarks' graphs, whose speed no step changes).  NULL when a is out
 * of memory. */
Int8Scales *int8_scales_every(Arena *a, const IrGraph *g, double step);

/* The scale of layer, or 0 when the table (may be NULL) has none. */
double int8_scales_find(const Int8Scales *t, const char *layer);

/* Writes n layers and their scales to f, with `comment` (one line, may be
 * NULL) after the header.  0, or -1 when a write fails. */
int int8_scales_write(FILE *f, const char *comment, const char *const *layer, const double *scale, int n);

#endif
