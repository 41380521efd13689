/* gpu_eltwise.h - instantiating codegen_templates/eltwise.cu: one kernel
 * per (op, dtype, element count), named k<index>_<op>_<dtype> so that a
 * profile reads like the IR (k3_relu_f16 is kernel 3 of the plan).
 *
 * This is the slice of the future code generator (compiler/cg_emit.c)
 * that the GPU tests need; it writes the parameters eltwise.cu documents
 * and leaves the text to cg_nvrtc_instantiate.  The launch geometry
 * (gpu_eltwise_grid) is part of the contract: 256 threads a block, and
 * any grid works because the kernel strides. */
#ifndef NETC_GPU_ELTWISE_H
#define NETC_GPU_ELTWISE_H

#include <stddef.h>
#include <stdint.h>

#include "cg_nvrtc.h"

typedef enum GpuEltOp {
  GPU_ELT_RELU_FWD,
  GPU_ELT_RELU_BWD,
  GPU_ELT_ADD_FWD,
  GPU_ELT_ADD_BWD,
  GPU_ELT_ADD_RELU_FWD,
  GPU_ELT_ADD_RELU_BWD,
  GPU_ELT_OP_COUNT
} GpuEltOp;

typedef enum GpuDtype { GPU_F32, GPU_F16, GPU_DTYPE_COUNT } GpuDtype;

enum { GPU_ELTWISE_BLOCK = 256 };

/* The op's name in kernel names ("relu", "relu_bwd", "add_relu", ...). */
const char *gpu_eltwise_op_name(GpuEltOp op);
const char *gpu_dtype_name(GpuDtype dt); /* "f32", "f16" */
size_t gpu_dtype_size(GpuDtype dt);
/* Inputs read and outputs written (the kernel's in0/in1, out0/out1). */
int gpu_eltwise_nin(GpuEltOp op);
int gpu_eltwise_nout(GpuEltOp op);
/* Elements per 16-byte access: 4 for f32, 8 for f16. */
int gpu_eltwise_vec(GpuDtype dt);

/* Writes the kernel name into name[namelen] and a malloc'd source into
 * *src.  vec 0 picks gpu_eltwise_vec(dt).  n >= 0. */
CgStatus gpu_eltwise_source(int index, GpuEltOp op, GpuDtype dt, int64_t n, int vec, char *name, size_t namelen,
                            char **src, char *err, size_t errlen);

/* Blocks of GPU_ELTWISE_BLOCK threads for n elements of vec-wide
 * accesses: one vector per thread, at most max_blocks (> 0). */
unsigned gpu_eltwise_grid(int64_t n, int vec, unsigned max_blocks);

#endif
