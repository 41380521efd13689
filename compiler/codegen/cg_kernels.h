/* cg_kernels.h - the generated CUDA kernels of an IR node.
 *
 * For a node of a final graph (after the layout, precision and memplan
 * passes: NHWC activations, KRSC filters, f16/bf16/f32 values) at a given
 * batch size, cg_kernels_emit() instantiates the templates in
 * codegen_templates/ (embedded in the library) into CUDA C source with
 * every shape, dtype and vector width baked in as constants, and says how to
 * launch each kernel: grid, block, shared memory and, for every kernel
 * parameter (all are device pointers), which of the node's tensors it is.
 * Kernel names carry the node index and op so a profile reads well:
 * "k17_batchnorm_apply_f16_nhwc".
 *
 * Convolutions are not generated: for a node that contains one (conv2d,
 * conv2d_bn_train, conv2d_bn, conv2d_bwd_data, conv2d_bwd_weight,
 * conv2d_bwd_data_relu, conv2d_bwd_data_bn_relu, and linear,
 * linear_bwd_data, linear_bwd_weight as 1x1 convolutions of [N, 1, 1, C]
 * unless they fall back to linear.cu) `conv` says which cuDNN
 * convolution the executor runs first (see cg_conv.h; its x/w/y are the
 * node's tensors listed in conv_x/conv_w/conv_y), and the launches cover the
 * rest of the node (batch statistics, normalization, relu, masks), reading
 * the convolution's result. */
#ifndef NETC_CG_KERNELS_H
#define NETC_CG_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "opts.h"
#include "cg_conv.h"

enum { CG_K_MAX_LAUNCH = 8, CG_K_MAX_ARGS = 16, CG_K_NAME = 96 };

typedef enum CgKArgKind {
  CG_KARG_IN,      /* the node's input `index` */
  CG_KARG_OUT,     /* the node's output `index` */
  CG_KARG_SCRATCH, /* `offset` bytes into the node's scratch (zeroed by a launch of the node when needed) */
  CG_KARG_KEPT,    /* `offset` bytes into the node's kept memory (kept_bytes): its own, lasting from step to step,
                    * written only by the node's `once` launches */
} CgKArgKind;

typedef struct CgKArg {
  CgKArgKind kind;
  int index;
  size_t offset;
} CgKArg;

/* When a launch runs.  A convolution whose description asks for its
 * output's statistics (conv.genstats) comes with both ways of getting
 * them; the executor runs the FUSED launches when cuDNN gave it a plan
 * with the statistics, the UNFUSED ones otherwise.  One whose description
 * has a prologue (conv.prologue) comes with a PROLOGUE launch that writes
 * relu(x * scale + bias) into scratch at pro_offset; the executor runs it,
 * BEFORE the convolution (PROLOGUE launches come first in the list), and
 * points the convolution's x there when its cuDNN plan has no prologue. */
typedef enum CgKWhen {
  CG_K_ALWAYS,
  CG_K_UNFUSED,
  CG_K_FUSED,
  CG_K_PROLOGUE,
  CG_K_EPI_UNFUSED,
  CG_K_QOUT_UNFUSED,
  CG_K_RES_UNFUSED
} CgKWhen;
/* CG_K_EPI_UNFUSED: what a convolution's epilogue (conv.epilogue) does, run
 * after it when its cuDNN plan has no epilogue.  CG_K_QOUT_UNFUSED: the
 * rounding of a requantized i8 result (conv.ydtype i8, pass requant) when
 * cuDNN has no plan that writes i8: the plan then writes the result in f16
 * to scratch at qout_offset, and this launch rounds it into y.
 * CG_K_RES_UNFUSED: an i8 residual's f16 copy, scaled (conv.rscale), into
 * scratch at rin_offset, before the convolution, when cuDNN has no plan
 * that adds the i8 residual itself; the plan then adds that copy. */

typedef struct CgKLaunch {
  char name[CG_K_NAME]; /* kernel name in the source */
  CgKWhen when;
  int before; /* runs before the node's convolution (such launches come first) */
  unsigned grid[3], block[3];
  unsigned smem; /* dynamic shared memory bytes */
  /* synchronized batch norm (the sync_bn code switch): after this launch
   * (chan_finalize.cu's PACK), a data-parallel run that asked for it adds
   * the sum_f64 doubles at its last argument over the ranks, in place
   * (0: none) */
  int sum_f64;
  /* reads only parameters and state and writes only the node's kept
   * memory (an inference batch norm's folded scale and bias): the executor
   * runs it before a step when those were written (rt_gpu_prepare, as it
   * runs pass hoist's `once` nodes), never in the step itself */
  int once;
  int nargs;
  CgKArg args[CG_K_MAX_ARGS];
} CgKLaunch;

/* The buffers of a data gradient with cuDNN's batch-norm backward (conv.dbn). */
enum {
  CG_KBN_Z,
  CG_KBN_MEAN,
  CG_KBN_INVSTD,
  CG_KBN_GAMMA,
  CG_KBN_BETA,
  CG_KBN_DGAMMA,
  CG_KBN_DBETA,
  CG_KBN_ABC,
  CG_KBN_COUNT
};

typedef struct CgKNode {
  char *source; /* malloc'd CUDA C defining every kernel below (may be NULL when none) */
  int nlaunch;
  CgKLaunch launch[CG_K_MAX_LAUNCH]; /* in order, after the convolution if any */
  size_t scratch_bytes;              /* device scratch the launches need (PROLOGUE's output excluded) */
  size_t kept_bytes;                 /* the node's kept memory (CG_KARG_KEPT), 0 for none */
  size_t pro_offset, pro_bytes;      /* a PROLOGUE launch's output in scratch (offset >= scratch_bytes) */
  size_t qout_offset, qout_bytes;    /* a requantized result's f16 copy in scratch (QOUT_UNFUSED; likewise) */
  size_t rin_offset, rin_bytes;      /* an i8 residual's f16 copy in scratch (RES_UNFUSED; before qout's) */
  int has_conv;
  CgConvDesc conv; /* when has_conv */
  CgKArg conv_x, conv_w, conv_y;
  CgKArg conv_stats;                    /* conv.genstats: where the fused statistics go (2*K floats) */
  CgKArg conv_sb;                       /* conv.prologue: the scale and bias (2*C of x's dtype) */
  CgKArg conv_esb, conv_res, conv_mask; /* conv.epilogue: RtConvIo.esb, residual, mask */
  CgKArg conv_bn[CG_KBN_COUNT];         /* conv.dbn: RtConvIo.bn's buffers, CG_KBN_* */
} CgKNode;

/* What the emitter targets: the device's attributes and the switches
 * that change generated code.  max_threads_per_sm (the resident threads an
 * SM holds; 0 reads as 2048, sm_80's and sm_90's) sizes a grid-stride
 * kernel's grid to one full wave.  opts: the code generation rows of
 * opts.h (s2d, pbb, pool_tile, linear_cudnn) and nvrtc_threads; NULL reads
 * as opts_default's. */
typedef struct CgDevice {
  int sm_count, max_threads_per_block, max_shared_per_block, cc_major, cc_minor, max_threads_per_sm;
  const NetcOpts *opts;
} CgDevice;

/* dev's options, or the defaults when it has none. */
const NetcOpts *cg_device_opts(const CgDevice *dev);

/* Fills *out for node `node` of g at batch `batch`.  Returns 0, or -1 with
 * a message naming the node and op ("op X has no GPU kernel yet"). */
int cg_kernels_emit(const IrGraph *g, int node, int64_t batch, const CgDevice *dev, CgKNode *out, char *err,
                    size_t errlen);
void cg_kernels_free(CgKNode *k); /* frees source; takes NULL */

#endif
