/* kerntest.h - what the generated-kernel tests share: the final graphs
 * they emit kernels for (real models through the whole pipeline) and the
 * device description used when no GPU is asked. */
#ifndef NETC_KERNTEST_H
#define NETC_KERNTEST_H

#include "arena.h"
#include "ir.h"
#include "cg_kernels.h"

typedef struct KerntestGraph {
  const char *name;  /* "smallcnn-train" */
  const char *model; /* path below the source root */
  int inference;
  const char *off;   /* a pass turned off (-fno-NAME), or NULL */
  IrDtype precision; /* the default dtype; IR_DT_F8E4M3: --precision fp8; IR_DT_I8: f16 with --int8=all and
                      * every i8 layer's input at a calibrated step (int8_scales_every) */
  int linear_cu;     /* the linear ops on linear.cu, not cuDNN ($NETC_LINEAR_CUDNN=0) */
  int sync_bn;       /* synchronized batch norm's kernels ($NETC_SYNC_BN=1) */
  int stem_mma;      /* an f16 inference stem on stem_conv.cu, not s2d.cu + cuDNN ($NETC_STEM_MMA=1) */
} KerntestGraph;

/* The graphs every test walks; *n receives the count. */
const KerntestGraph *kerntest_graphs(int *n);
/* Compiles root/model with the variant's options (the memory plan at its
 * train batch) and sets $NETC_LINEAR_CUDNN, $NETC_SYNC_BN and
 * $NETC_STEM_MMA for the emission that follows (linear_cu: "0", sync_bn,
 * stem_mma: "1", else unset); NULL
 * after printing the diagnostics. */
IrGraph *kerntest_compile(Arena *a, const char *root, const KerntestGraph *kg);
/* A hand-written graph of what the models lack: f32 -> i8 (with a tail),
 * f16 -> bf16 -> f32 casts, nesterov SGD with a bf16 gradient. */
IrGraph *kerntest_extra(Arena *a);
/* 1 for the nodes of mixed dtypes the f32 first convolution gets in a
 * mixed-precision training graph: conv2d_bn_train with y (output 1) in
 * another dtype than z, batchnorm_relu_bwd with dz in another than z
 * (the narrow copy of that z). */
int kerntest_stem_mixed(const IrGraph *g, const IrNode *n);
/* An H200: 132 SMs, 1024 threads and 48 KiB shared memory a block, sm_90. */
CgDevice kerntest_h200(void);
/* The switches a kerntest device emits under: the environment's when
 * kerntest_compile or kerntest_h200 last ran (so a graph's linear_cu). */
const NetcOpts *kerntest_opts(void);

#endif
