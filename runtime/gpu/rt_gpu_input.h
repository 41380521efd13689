/* rt_gpu_input.h - the input pipeline of the GPU executor: batches of
 * image bytes from pinned host memory to the step's image input.
 *
 * The bytes of a batch (uint8, as the data set holds them) go into one of
 * two pinned host buffers, are copied with cuMemcpyHtoDAsync on a copy
 * stream of the pipeline's own into one of two device buffers, and a
 * generated kernel (codegen_templates/input_u8.cu) turns them into the
 * image input in its dtype and layout on the executor's stream, right
 * before the step.  Events order the three: the executor's stream waits
 * for the copy of the batch it converts (cuStreamWaitEvent), the copy
 * stream waits until the conversion that read a device buffer is done
 * before filling it again, and the host waits, before it writes a pinned
 * buffer, until the copy that read it is done.  So with batch i + 1 sent
 * before step i is launched, its copy runs during step i.
 *
 *   rt_gpu_input_buffer   the next pinned buffer, once free (the host may wait)
 *   rt_gpu_input_send     its copy, queued on the copy stream
 *   rt_gpu_input_feed     the oldest sent batch converted into the input
 *                         (and its labels into theirs)
 *
 * At most two batches are sent and not yet fed.  The pipeline belongs to
 * one executor and is freed before it.  Errors as rt_cuda.h. */
#ifndef NETC_RT_GPU_INPUT_H
#define NETC_RT_GPU_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "rt_gpu.h"
#include "rt_ref_input.h"

typedef struct RtGpuInput RtGpuInput;

/* The conversion kernel's source for in (shapes and layouts baked in)
 * writing dtype dt (f32, f16 or bf16), and its name, e.g.
 * "k_input_u8_f16_nchw"; no GPU is needed.  *src is malloc'd. */
RtCudaStatus rt_gpu_input_source(const RtRefInput *in, IrDtype dt, char **src, char *name, size_t namelen, char *err,
                                 size_t errlen);
/* A pipeline into value v (an input of x) whose dtype is f32, f16 or bf16
 * and whose size is in->n * in->dc * in->h * in->w; compiles the kernel
 * for x's device. */
RtCudaStatus rt_gpu_input_new(RtGpu *x, int v, const RtRefInput *in, RtGpuInput **out, char *err, size_t errlen);
void rt_gpu_input_free(RtGpuInput *p); /* takes NULL; waits for its copies */
/* The pinned buffer (n * c * h * w bytes) for the next batch, once the
 * copy that last read it is done.  RT_CUDA_EARG when two batches are
 * already sent and not fed. */
RtCudaStatus rt_gpu_input_buffer(RtGpuInput *p, uint8_t **host, char *err, size_t errlen);
/* The batches' labels travel with their bytes into integer input label_v
 * (of in->n elements): given to rt_gpu_input_send (int64, converted to
 * label_v's dtype into the pinned buffer), copied with the bytes, and
 * written into label_v when the batch is fed.  Without this call the
 * pipeline carries images only. */
RtCudaStatus rt_gpu_input_labels(RtGpuInput *p, int label_v, char *err, size_t errlen);
/* Queues the copy of the buffer rt_gpu_input_buffer gave, with the batch's
 * in->n labels (NULL for a pipeline without a label value). */
RtCudaStatus rt_gpu_input_send(RtGpuInput *p, const int64_t *labels, char *err, size_t errlen);
/* Converts the oldest sent batch into the input, on the executor's stream
 * after its copy.  RT_CUDA_EARG when no batch is sent. */
RtCudaStatus rt_gpu_input_feed(RtGpuInput *p, char *err, size_t errlen);

#endif
