/* gexec.h - what the GPU executor's test and benchmark share: models
 * compiled through the whole pipeline, seeded parameters and inputs, the
 * H200's attributes for warming the kernel cache on a machine without a
 * GPU, and comparisons that print the worst element. */
#ifndef NETC_GEXEC_H
#define NETC_GEXEC_H

#include <stdint.h>

#include "ir.h"
#include "rt_gpu.h"

/* ROOT/rel compiled with the whole pipeline for batch (training, or
 * inference), at precision IR_DT_F32 or IR_DT_F16; NULL after printing the
 * errors. */
IrGraph *gexec_compile(Arena *a, const char *root, const char *rel, int64_t batch, int inference, IrDtype precision);
/* The same with --int8=int8_layers (NULL: none; "calibrated": all, with
 * every i8 layer's input at step 0.05 as --int8-scales gives it); precision
 * IR_DT_F8E4M3 is --precision fp8 (FP8 convolutions, f16 elsewhere). */
IrGraph *gexec_compile_int8(Arena *a, const char *root, const char *rel, int64_t batch, int inference,
                            IrDtype precision, const char *int8_layers);
/* The same with pass `off` turned off (NULL: none), as -fno-off. */
IrGraph *gexec_compile_off(Arena *a, const char *root, const char *rel, int64_t batch, int inference, IrDtype precision,
                           const char *int8_layers, const char *off);

/* Host values of every input/param/state of g at batch: float for float
 * dtypes, int64 for integer ones, each rounded to its value's dtype.
 * Weights ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), batchnorm scales around 1,
 * running variances in [0.5, 1.5), labels in [0, classes), lr = 0.05,
 * loss_scale as given.  vals[v] is NULL for activations.  Free with
 * gexec_values_free. */
void **gexec_values(const IrGraph *g, int64_t batch, uint64_t seed, float loss_scale);
void gexec_values_free(const IrGraph *g, void **vals);
int gexec_is_int(IrDtype dt);
int64_t gexec_numel(const IrGraph *g, int v, int64_t batch);

/* Writes every non-activation value of vals into x; 0, or -1 after printing. */
int gexec_write_all(RtGpu *x, const IrGraph *g, void **vals);

/* The attributes rt_gpu_new reads on an H200, for rt_gpu_precompile. */
CgDevice gexec_h200(void);

/* 1 when the driver sees a GPU; else prints "skipped: why" and returns 0. */
int gexec_have_gpu(void);

/* max |got - want| / max(max |want|, 1e-6) over n floats; prints the worst
 * element as "what[i]: got a want b" when it exceeds tol. */
double gexec_compare(const char *what, const float *got, const float *want, int64_t n, double tol);

#endif
