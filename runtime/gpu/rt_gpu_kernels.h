/* rt_gpu_kernels.h - the generated CUDA kernels of an IR node.
 *
 * For a node of a final graph (after the layout, precision and memplan
 * passes: NHWC activations, KRSC filters, f16/bf16/f32 values) at a given
 * batch size, rt_gpu_kernels_emit() instantiates the templates in
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
 * convolution the executor runs first (see rt_cudnn.h; its x/w/y are the
 * node's tensors listed in conv_x/conv_w/conv_y), and the launches cover the
 * rest of the node (batch statistics, normalization, relu, masks), reading
 * the convolution's result. */
#ifndef NETC_RT_GPU_KERNELS_H
#define NETC_RT_GPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "rt_cudnn.h"

enum { RT_K_MAX_LAUNCH = 6, RT_K_MAX_ARGS = 16, RT_K_NAME = 96 };

typedef enum RtKArgKind {
  RT_KARG_IN,      /* the node's input `index` */
  RT_KARG_OUT,     /* the node's output `index` */
  RT_KARG_SCRATCH, /* `offset` bytes into the node's scratch (zeroed by a launch of the node when needed) */
} RtKArgKind;

typedef struct RtKArg {
  RtKArgKind kind;
  int index;
  size_t offset;
} RtKArg;

/* When a launch runs.  A convolution whose description asks for its
 * output's statistics (conv.genstats) comes with both ways of getting
 * them; the executor runs the FUSED launches when cuDNN gave it a plan
 * with the statistics, the UNFUSED ones otherwise.  One whose description
 * has a prologue (conv.prologue) comes with a PROLOGUE launch that writes
 * relu(x * scale + bias) into scratch at pro_offset; the executor runs it,
 * BEFORE the convolution (PROLOGUE launches come first in the list), and
 * points the convolution's x there when its cuDNN plan has no prologue. */
typedef enum RtKWhen { RT_K_ALWAYS, RT_K_UNFUSED, RT_K_FUSED, RT_K_PROLOGUE, RT_K_EPI_UNFUSED } RtKWhen;
/* RT_K_EPI_UNFUSED: what a convolution's epilogue (conv.epilogue) does, run
 * after it when its cuDNN plan has no epilogue. */

typedef struct RtKLaunch {
  char name[RT_K_NAME];   /* kernel name in the source */
  RtKWhen when;
  int before;             /* runs before the node's convolution (such launches come first) */
  unsigned grid[3], block[3];
  unsigned smem;          /* dynamic shared memory bytes */
  int nargs;
  RtKArg args[RT_K_MAX_ARGS];
} RtKLaunch;

/* The buffers of a data gradient with cuDNN's batch-norm backward (conv.dbn). */
enum { RT_KBN_Z, RT_KBN_MEAN, RT_KBN_INVSTD, RT_KBN_GAMMA, RT_KBN_BETA, RT_KBN_DGAMMA, RT_KBN_DBETA, RT_KBN_ABC,
       RT_KBN_COUNT };

typedef struct RtKNode {
  char *source;           /* malloc'd CUDA C defining every kernel below (may be NULL when none) */
  int nlaunch;
  RtKLaunch launch[RT_K_MAX_LAUNCH]; /* in order, after the convolution if any */
  size_t scratch_bytes;   /* device scratch the launches need (PROLOGUE's output excluded) */
  size_t pro_offset, pro_bytes; /* a PROLOGUE launch's output in scratch (offset >= scratch_bytes) */
  int has_conv;
  RtConvDesc conv;        /* when has_conv */
  RtKArg conv_x, conv_w, conv_y;
  RtKArg conv_stats;      /* conv.genstats: where the fused statistics go (2*K floats) */
  RtKArg conv_sb;         /* conv.prologue: the scale and bias (2*C of x's dtype) */
  RtKArg conv_esb, conv_res, conv_mask; /* conv.epilogue: RtConvIo.esb, residual, mask */
  RtKArg conv_bn[RT_KBN_COUNT];         /* conv.dbn: RtConvIo.bn's buffers, RT_KBN_* */
} RtKNode;

/* What the emitter needs to know of the device.  max_threads_per_sm (the
 * resident threads an SM holds; 0 reads as 2048, sm_80's and sm_90's)
 * sizes a grid-stride kernel's grid to one full wave. */
typedef struct RtGpuDevice {
  int sm_count, max_threads_per_block, max_shared_per_block, cc_major, cc_minor, max_threads_per_sm;
} RtGpuDevice;

/* Fills *out for node `node` of g at batch `batch`.  Returns 0, or -1 with
 * a message naming the node and op ("op X has no GPU kernel yet"). */
int rt_gpu_kernels_emit(const IrGraph *g, int node, int64_t batch, const RtGpuDevice *dev, RtKNode *out,
                        char *err, size_t errlen);
void rt_gpu_kernels_free(RtKNode *k); /* frees source; takes NULL */

#endif
