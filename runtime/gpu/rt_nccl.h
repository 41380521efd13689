/* rt_nccl.h - gradients summed over the GPUs of a data-parallel run with
 * NCCL (libnccl.so.2, loaded with dlopen at run time; the few prototypes
 * used are declared in rt_nccl.c, so nccl.h is not needed to build).
 *
 * One process per GPU.  Rank 0 makes the communicator's unique id
 * (rt_nccl_unique_id), the rendezvous (runtime/dist/rt_rendezvous.h)
 * hands those bytes to every rank, and each rank joins with its CUDA
 * context current (rt_nccl_join).  An all-reduce is queued on a stream
 * like a kernel, so it may be captured into the step's CUDA graph.  A
 * machine without NCCL is not an error until a run needs it: rt_nccl_load
 * says why, in one line. */
#ifndef NETC_RT_NCCL_H
#define NETC_RT_NCCL_H

#include <cuda.h>
#include <stddef.h>

#include "ir.h"

enum { RT_NCCL_ID_BYTES = 128 };

typedef struct RtNccl RtNccl;

/* Loads the library once per process (path: the nccl option's file, or
 * NULL for libnccl.so.2).  0, or -1 with why ("no NCCL (libnccl.so.2:
 * cannot open shared object file)"). */
int rt_nccl_load(const char *path, char *why, size_t len);
/* NCCL's version as major * 10000 + minor * 100 + patch, or -1. */
int rt_nccl_version(void);
/* A fresh unique id for a communicator, into id (RT_NCCL_ID_BYTES). */
int rt_nccl_unique_id(void *id, char *err, size_t len);
/* Joins the communicator of id as rank of world on the current CUDA
 * context's device (every rank must call it: it waits for all).  0 and
 * *out, or -1 with NCCL's message. */
int rt_nccl_join(const void *id, int world, int rank, RtNccl **out, char *err, size_t len);
/* Queues on stream the all-reduce of count elements of dtype (f32, f16 or
 * bf16) from send into recv (the same buffer: in place): their sum over
 * the ranks, or their mean when mean is set.  0, or -1 with why. */
int rt_nccl_allreduce(RtNccl *c, CUdeviceptr send, CUdeviceptr recv, size_t count, IrDtype dtype, int mean,
                      CUstream stream, char *err, size_t len);
/* Queues on stream the in-place sum over the ranks of count doubles at
 * buf (synchronized batch norm's statistics).  0, or -1 with why. */
int rt_nccl_sum_f64(RtNccl *c, CUdeviceptr buf, size_t count, CUstream stream, char *err, size_t len);
/* ncclGroupStart and ncclGroupEnd: the all-reduces queued between them
 * are launched together, as one operation (a bucket's gradients).  Every
 * begin that succeeded needs its end, even after a failed all-reduce.  0,
 * or -1 with why. */
int rt_nccl_group_begin(char *err, size_t len);
int rt_nccl_group_end(char *err, size_t len);
/* Leaves and frees the communicator (takes NULL); abort (a rank failed)
 * does not wait for the others. */
void rt_nccl_free(RtNccl *c, int abort);

#endif
