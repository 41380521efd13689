/* rt_gpu_jpeg.h - the GPU decoder's input pipeline: batches of JPEG files
 * decoded by nvJPEG (rt_nvjpeg.h) into pictures in device memory, then
 * cropped, resized, flipped, normalized, padded and laid out into the
 * step's image input by one generated kernel (codegen_templates/
 * input_jpeg.cu), with the batch's labels beside them.
 *
 * It has the order of rt_gpu_input.h with decoding in place of the copy:
 * a batch is decoded (and its item table and labels copied) by a thread of
 * the pipeline's own, on a stream of its own, and fed -- the crop kernel and the labels' copy --
 * on the executor's stream right before the step, which waits for the
 * decode by event.  So with batch i + 1 sent before step i is launched,
 * the JPEG engines decode it during step i.  RT_GPU_JPEG_SLOTS slots of
 * pictures, as many batches sent and not fed.  With three and batch i + 2
 * sent too, the decode thread would go on to it as soon as batch i + 1 is
 * done instead of waiting for the host to send it after step i's launch;
 * but two runs so on an H100 hung mid-epoch (docs/PERF.md, 2026-12-07,
 * twenty-first session; a slot's growth beside a decode in flight is the
 * suspect, and the send now waits for the decodes before a slot grows),
 * so it stays at two until a GPU run shows three safe.
 *
 * An item is a JPEG file's bytes, or pictures already decoded on the CPU
 * (RGB, h rows of w * 3 bytes), with its transform as one window
 * (rt_augment.h's RtAugWindow: the region x0, y0, cw, ch of the w x h
 * picture and a flip).  A JPEG nvJPEG refuses is given to the fallback,
 * which decodes it on the host; one the fallback refuses too becomes a
 * black picture and is counted (rt_gpu_jpeg_failures).  Errors as
 * rt_cuda.h. */
#ifndef NETC_RT_GPU_JPEG_H
#define NETC_RT_GPU_JPEG_H

#include <stddef.h>
#include <stdint.h>

#include "rt_gpu.h"
#include "rt_nvjpeg.h"
#include "rt_ref_input.h"

typedef struct RtGpuJpeg RtGpuJpeg;

enum { RT_GPU_JPEG_SLOTS = 2 };

typedef struct RtGpuJpegItem {
  int rgb;             /* 0: data is a JPEG file; 1: RGB pixels of the box below */
  const uint8_t *data; /* host memory, needed only until rt_gpu_jpeg_send returns (it copies) */
  size_t len;
  int w, h;              /* JPEG: the size its header gives; RGB: the picture's */
  double x0, y0, cw, ch; /* the window, in (w, h)'s pixels */
  int flip;
  const char *name;   /* for messages */
  int bx, by, bw, bh; /* RGB: data hold columns bx..bx+bw-1, rows by..by+bh-1 of the w x h picture (bw * 3 bytes a
                       * row), all the window reads */
} RtGpuJpegItem;

/* Decodes a JPEG nvJPEG refused: 0 with *rgb (malloc'd, w * h * 3 bytes
 * at the header's size), or -1 with a message in err. */
typedef int (*RtGpuJpegFallback)(void *user, const uint8_t *data, size_t len, const char *name, uint8_t **rgb, int *w,
                                 int *h, char *err, size_t errlen);

typedef struct RtGpuJpegConfig {
  int v;         /* the image input: f32, f16 or bf16 of in.n * in.dc * in.h * in.w */
  int label_v;   /* the labels' integer input of in.n, or -1 */
  RtRefInput in; /* n, dc, h, w, dst_nhwc, scale and shift (c = 3; the source is the pictures) */
  RtNvjpegBackend backend;
  RtGpuJpegFallback fallback; /* NULL: refused images are black and counted */
  int prechecked;             /* every JPEG's header was read (rt_nvjpeg_set_prechecked) */
  void *user;
} RtGpuJpegConfig;

/* The kernel's source for in (sizes and layout baked in) writing dtype dt,
 * and its name, e.g. "k_input_jpeg_f16_nhwc"; no GPU is needed. */
RtCudaStatus rt_gpu_jpeg_source(const RtRefInput *in, IrDtype dt, char **src, char *name, size_t namelen, char *err,
                                size_t errlen);
RtCudaStatus rt_gpu_jpeg_new(RtGpu *x, const RtGpuJpegConfig *c, RtGpuJpeg **out, char *err, size_t errlen);
void rt_gpu_jpeg_free(RtGpuJpeg *p); /* takes NULL; waits for its work */
RtNvjpegBackend rt_gpu_jpeg_backend(const RtGpuJpeg *p);
/* Decodes n <= in.n items (fewer: the rest of the input is zeros) with
 * their labels (NULL without a label value) into the next slot, once the
 * crop kernel that read that slot RT_GPU_JPEG_SLOTS batches ago is done. */
RtCudaStatus rt_gpu_jpeg_send(RtGpuJpeg *p, const RtGpuJpegItem *items, int n, const int64_t *labels, char *err,
                              size_t errlen);
/* The oldest sent batch into the input (and its labels into theirs). */
RtCudaStatus rt_gpu_jpeg_feed(RtGpuJpeg *p, char *err, size_t errlen);
/* Images/s the decoder can make: the images of the batches timed so far
 * over the longer of their decode time on the GPU (events around each
 * batch's decode and copies) and the decode thread's time on them
 * (parsing, Huffman stages of the hybrid backend, launches, the wait for
 * the hardware engines); 0 before a batch is timed. */
double rt_gpu_jpeg_rate(const RtGpuJpeg *p);
/* The two sides of it: images/s of the GPU's decode time and of the host's. */
void rt_gpu_jpeg_rates(const RtGpuJpeg *p, double *gpu, double *host);
/* The same as rt_gpu_jpeg_rate per JPEG nvJPEG decoded, over the batches
 * that gave it any (one of only RGB items would add time and no JPEG): the
 * batches' pictures decoded on the host are left out of the count, not out
 * of the time (their copies are a small part of it).  What the decoder could make
 * were the workers to decode a different share of the batch (net_train.c's
 * balance); 0 before a batch is timed. */
double rt_gpu_jpeg_jpeg_rate(const RtGpuJpeg *p);
/* Images decoded on the host because nvJPEG refused them, and images
 * neither could decode (black); msg (may be NULL) gets the first failure. */
void rt_gpu_jpeg_failures(const RtGpuJpeg *p, int64_t *host_decoded, int64_t *failed, char *msg, size_t cap);

#endif
