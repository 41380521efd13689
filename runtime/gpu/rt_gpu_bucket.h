/* rt_gpu_bucket.h - the gradients of a data-parallel step grouped into
 * all-reduce buckets, in the order the backward pass makes them.
 *
 * The GPU executor all-reduces the gradients the optimizer section reads
 * (rt_gpu_allreduce_set, rt_gpu.h) while the backward pass still runs: a
 * bucket's all-reduce is queued on a stream of its own right after the
 * node that writes the last of its gradients, so the sooner a bucket is
 * complete the more backward work it overlaps.  The plan is a pure
 * function of the graph: each gradient's producer is the one node before
 * the optimizer section (IrGraph.opt_first) that writes it; gradients are
 * taken in producer order (the order given breaks ties) and a bucket is
 * closed as soon as its bytes reach the bucket size, so every bucket but
 * the last holds at least that many bytes and less than that plus its last
 * gradient's.  Nothing here knows about CUDA or NCCL. */
#ifndef NETC_RT_GPU_BUCKET_H
#define NETC_RT_GPU_BUCKET_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

/* The bucket size when 0 is asked: 25 MiB, as PyTorch's DDP. */
#define RT_GPU_BUCKET_DEFAULT_BYTES ((size_t)25 << 20)

typedef struct RtGpuBucket {
  int first, n; /* its gradients: the plan's grad[first .. first + n) */
  uint64_t bytes;
  int done; /* the node after which all of them are written: their last producer */
} RtGpuBucket;

typedef struct RtGpuBucketPlan {
  int ngrad;
  int *grad;     /* the gradients' value ids in production order */
  int *producer; /* per entry of grad: the node that writes it (< opt_first) */
  int nbucket;
  RtGpuBucket *bucket; /* in production order: bucket[b].done never decreases */
  size_t bucket_bytes; /* the size used (RT_GPU_BUCKET_DEFAULT_BYTES for 0) */
} RtGpuBucketPlan;

/* The buckets of gradients grad[0..ngrad) (value ids of g) with bytes[v]
 * bytes each (indexed by value id), closed at bucket_bytes (0: the
 * default).  Refused, with a message: a graph without an optimizer
 * section, a value that does not exist or is named twice, one that no node
 * before the optimizer section writes, one written by two nodes, and one
 * read by a node between its producer and the optimizer section (the
 * in-place all-reduce would race that read).  0 and *out (free with
 * rt_gpu_bucket_plan_free), or -1 with *out empty. */
int rt_gpu_bucket_plan(const IrGraph *g, const int *grad, int ngrad, const uint64_t *bytes, size_t bucket_bytes,
                       RtGpuBucketPlan *out, char *err, size_t errlen);
void rt_gpu_bucket_plan_free(RtGpuBucketPlan *p); /* takes NULL; leaves *p empty */

#endif
