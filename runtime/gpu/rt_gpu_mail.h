/* rt_gpu_mail.h - small per-step values between the host and a GPU
 * executor without waiting for the GPU: the learning rate written before a
 * step, the loss read after it.
 *
 * rt_gpu_mail_post converts the host's value (float, or int64 for integer
 * dtypes, as rt_gpu_write takes it) into a pinned slot at once and queues
 * its copy to the device on the executor's stream, so the step queued next
 * reads it; rt_gpu_mail_fetch queues the copy of a value into a pinned slot
 * after the work queued so far and returns a ticket, and rt_gpu_mail_read
 * waits for that copy (or, with wait 0, says whether it is done) and
 * converts it.  Slots are a ring of RT_GPU_MAIL_SLOTS, each of
 * RT_GPU_MAIL_BYTES; a slot is reused only after the copy that used it
 * finished, so the host runs at most that many copies ahead of the GPU.
 * A ticket can be read until its slot is reused.  Errors as rt_cuda.h. */
#ifndef NETC_RT_GPU_MAIL_H
#define NETC_RT_GPU_MAIL_H

#include <stddef.h>
#include <stdint.h>

#include "rt_gpu.h"

enum { RT_GPU_MAIL_SLOTS = 64, RT_GPU_MAIL_BYTES = 256 };

typedef struct RtGpuMail RtGpuMail;

RtCudaStatus rt_gpu_mail_new(RtGpu *x, RtGpuMail **out, char *err, size_t errlen);
void rt_gpu_mail_free(RtGpuMail *m); /* takes NULL; waits for its copies */
/* Value v (at most RT_GPU_MAIL_BYTES in its dtype) from host, in stream order. */
RtCudaStatus rt_gpu_mail_post(RtGpuMail *m, int v, const void *host, char *err, size_t errlen);
/* Value v's bytes after the work queued so far; *ticket names them. */
RtCudaStatus rt_gpu_mail_fetch(RtGpuMail *m, int v, int64_t *ticket, char *err, size_t errlen);
/* The fetched value into host (wait 0: *done = 0 and nothing read while
 * its copy runs).  RT_CUDA_EARG for a ticket never given or reused. */
RtCudaStatus rt_gpu_mail_read(RtGpuMail *m, int64_t ticket, int wait, void *host, int *done, char *err, size_t errlen);

#endif
