/* rt_nvjpeg.h - nvJPEG (libnvjpeg.so.13 with CUDA 13, loaded with dlopen at
 * run time; the prototypes used are declared in rt_nvjpeg.c): JPEG files
 * decoded on the GPU into interleaved RGB images in device memory.
 *
 * The decoder takes the hardware JPEG engines (A100, H100, H200) in
 * batched mode where nvJPEG offers them, else the GPU-assisted hybrid
 * backend; rt_nvjpeg_backend says which.  An image the engine cannot take
 * (per rt_nvjpeg_decode's `failed` flags) is left to the caller, who
 * decodes it on the CPU.  A decoder belongs to one CUDA context (the
 * current one when made) and one thread at a time.  Errors as rt_cuda.h;
 * a missing library is RT_CUDA_ENOLIB with the dlopen message. */
#ifndef NETC_RT_NVJPEG_H
#define NETC_RT_NVJPEG_H

#include <stddef.h>
#include <stdint.h>

#include "rt_cuda.h"

typedef struct RtNvjpeg RtNvjpeg;

typedef enum RtNvjpegBackend {
  RT_NVJPEG_AUTO = 0,   /* the hardware engines where present, else the GPU hybrid */
  RT_NVJPEG_HARDWARE,   /* the JPEG engines, batched */
  RT_NVJPEG_GPU_HYBRID, /* Huffman on the GPU (on the CPU for what that refuses), the rest on the SMs */
} RtNvjpegBackend;

/* Loads libnvjpeg.so.13 (else libnvjpeg.so) and resolves every entry
 * point the decoder uses, once per process; needs no GPU.  RT_CUDA_ENOLIB
 * with the dlopen message, or the missing symbol, when it cannot. */
RtCudaStatus rt_nvjpeg_load(char *err, size_t errlen);

/* A decoder for batches of up to max_batch images, on the current context. */
RtCudaStatus rt_nvjpeg_new(int max_batch, RtNvjpegBackend want, RtNvjpeg **out, char *err, size_t errlen);
void rt_nvjpeg_free(RtNvjpeg *j); /* takes NULL */
RtNvjpegBackend rt_nvjpeg_backend(const RtNvjpeg *j);
const char *rt_nvjpeg_backend_name(RtNvjpegBackend b); /* "hardware", "gpu-hybrid", "auto" */

/* Decodes n <= max_batch images on stream: image i's len[i] bytes at
 * data[i] (host memory) into dst[i], a device buffer of at least h rows of
 * pitch[i] >= w * 3 bytes, where w x h is the size in its header.  On
 * return the host may reuse data; the pixels are ready in stream order.
 * failed[i] = 1 for an image the decoder refused (dst[i] untouched, unless
 * it parsed but broke off a hardware batch already under way); the status
 * is an error only when the decoder itself failed. */
/* The caller has read every image's header (rt_jpeg_header's gpu_ok:
 * baseline, 1 or 3 components, complete): the hardware path then skips
 * its own parse and support check of each image before the batch -- an
 * image the engines still refuse breaks the batch, which is decoded again
 * one image at a time to find it. */
void rt_nvjpeg_set_prechecked(RtNvjpeg *j, int on);
/* Decoders made from now on take their memory from rt_nvjpeg_pool (on,
 * the default) or from nvJPEG's own allocators (off: cudaMalloc and
 * cudaFree, which wait for the whole device); off is there only to measure
 * the difference (test_gpu_nvjpeg). */
void rt_nvjpeg_set_pool(int on);
RtCudaStatus rt_nvjpeg_decode(RtNvjpeg *j, int n, const uint8_t *const *data, const size_t *len, uint8_t *const *dst,
                              const size_t *pitch, CUstream stream, uint8_t *failed, char *err, size_t errlen);

#endif
