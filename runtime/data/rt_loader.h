/* rt_loader.h - batches of decoded, transformed images from an ImageFolder
 * set, made by a pool of threads ahead of the training loop.
 *
 * A loader serves epochs.  In training mode an epoch is a permutation of
 * the images drawn from (seed, epoch) and cut into n / batch full batches
 * (the remainder is dropped, as PyTorch's drop_last); the image at
 * position p gets the training transform seeded from (seed, epoch, p).
 * The bytes of every batch therefore depend on the seed alone, never on
 * the number of threads.  An image that cannot be read is counted (once,
 * with the first messages kept for one warning) and position p takes the
 * next readable image of the permutation instead, so batches stay full;
 * only a set with no readable image at all is an error.
 *
 * In evaluation mode an epoch visits every image once, in the set's
 * order, with the evaluation transform, in ceil(n / batch) batches whose
 * last may be partial; an unreadable image is counted and left out of its
 * batch (which is then shorter).
 *
 * A data-parallel run gives each of its `world` processes a loader with its
 * `rank`: the epoch is then cut into batches of batch * world, and rank r
 * serves positions [r * batch, (r + 1) * batch) of each -- the same
 * images, with the same transforms (seeded by the position in the whole
 * batch), as one process with batch * world would, so a run on N GPUs
 * sees one GPU's order.  Evaluation batches go round the ranks: rank r
 * takes batches r, r + world, ... of batch images each.
 *
 * Threads take one image at a time and write it straight into a ring of
 * `depth` batch buffers; they run at most depth - 1 batches ahead of the
 * one the caller holds.  A batch returned by rt_loader_next stays valid
 * until the next call of rt_loader_next or rt_loader_start. */
#ifndef NETC_RT_LOADER_H
#define NETC_RT_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "rt_augment.h"
#include "rt_folder.h"

typedef struct RtLoader RtLoader;

typedef enum RtLoaderStatus {
  RT_LOADER_OK = 0,
  RT_LOADER_ERR_ARG,
  RT_LOADER_ERR_DATA,
  RT_LOADER_ERR_NOMEM
} RtLoaderStatus;

/* Who makes the pixels.  RT_LOADER_DECODE: the threads decode and
 * transform, and a batch is bytes (RtLoaderBatch.images).  RT_LOADER_DEFER
 * (inputs of 64 pixels and more, transforms that are one window): the
 * threads read each file and draw its transform's window on the size in
 * its header, and a batch is items (RtLoaderBatch.items) for a decoder
 * elsewhere (the GPU's, runtime/gpu/rt_gpu_jpeg.h).  A file that decoder
 * cannot take -- progressive, or neither 3-component YCbCr nor grey -- is
 * decoded here (with DCT scaling) and travels as RGB pixels with the
 * window mapped onto them.  The windows are drawn on the full size in
 * both modes, so the two crop the same region of every picture. */
typedef enum RtLoaderDecode { RT_LOADER_DECODE = 0, RT_LOADER_DEFER } RtLoaderDecode;

typedef enum RtItemKind { RT_ITEM_JPEG = 0, RT_ITEM_RGB } RtItemKind;

typedef struct RtLoaderItem {
  RtItemKind kind;
  const uint8_t *data; /* JPEG: the file's bytes; RGB: the box's bh rows of bw * 3 bytes */
  size_t len;
  int w, h;           /* JPEG: the size its header gives; RGB: the picture's */
  RtAugWindow win;    /* the transform, in (w, h)'s pixels */
  const char *name;   /* the file, for messages */
  int bx, by, bw, bh; /* RGB: the part of the w x h picture data holds -- all the
                       * window reads (0, 0, w, h: the whole picture) */
} RtLoaderItem;

typedef struct RtLoaderConfig {
  const RtFolder *set; /* borrowed: must outlive the loader */
  int64_t limit;       /* use this many images, evenly spread over the set (0: all) */
  int64_t batch;
  int H, W;          /* the output: u8 [batch, 3, H, W] */
  int train;         /* 1: shuffled, augmented, full batches; 0: evaluation */
  RtAugKind augment; /* training transform (RT_AUG_AUTO: by input size) */
  uint64_t seed;
  int workers; /* threads (0: every processor online) */
  int depth;   /* batch buffers (0: 3; at least 2) */
  RtLoaderDecode decode;
  /* RT_LOADER_DEFER: the percentage of each epoch's positions decoded here
   * anyway, spread evenly over it, so that the threads share the work of a
   * GPU decoder that cannot keep up alone: decoded with DCT scaling and
   * only the part the window reads (RT_ITEM_RGB with its box), the same
   * bytes RT_LOADER_DECODE makes of them.  0..100. */
  int cpu_share;
  int rank, world; /* this process's share of a data-parallel run (world 0 or 1: the whole epoch) */
} RtLoaderConfig;

typedef struct RtLoaderBatch {
  const uint8_t *images;     /* RT_LOADER_DECODE: n * 3 * H * W bytes, NCHW */
  const RtLoaderItem *items; /* RT_LOADER_DEFER: n items (valid as images are) */
  const int64_t *labels;     /* n */
  int64_t n;
} RtLoaderBatch;

RtLoaderStatus rt_loader_new(const RtLoaderConfig *c, RtLoader **out, char *err, size_t errmax);
void rt_loader_free(RtLoader *l); /* takes NULL; joins the threads */

/* Images used, batches in an epoch, and threads. */
int64_t rt_loader_size(const RtLoader *l);
int64_t rt_loader_batches(const RtLoader *l);
int rt_loader_workers(const RtLoader *l);

/* Begins epoch `epoch` (threads start filling at once); drops what is left
 * of the previous one. */
void rt_loader_start(RtLoader *l, int64_t epoch);
/* The same from batch `first` of the epoch on: the batches before it are
 * not made (a resumed run, or a loader that takes over from another one);
 * the ones after are those a start at 0 gives. */
void rt_loader_start_at(RtLoader *l, int64_t epoch, int64_t first);
/* The next batch of the epoch: 1 and *b, 0 at the end of the epoch, or -1
 * with a message (no readable image, or rt_loader_start never called). */
int rt_loader_next(RtLoader *l, RtLoaderBatch *b, char *err, size_t errmax);

/* The images/s the threads can make: images filled so far over the
 * seconds they took, times the threads (0 before the first).  The time a
 * thread waits for a free buffer is not counted, so this is what the
 * loader could deliver to a consumer that never keeps it waiting. */
double rt_loader_rate(RtLoader *l);
/* The same per kind of work: images/s for files read and handed on
 * (RT_ITEM_JPEG) and for files decoded here (RT_ITEM_RGB); 0 for a kind
 * not met yet. */
void rt_loader_rates(RtLoader *l, double *handed_on, double *decoded);
/* The cpu_share (0..100) that makes the most images/s of a GPU decoder
 * and the threads together, and that rate in *most: the GPU decodes
 * gpu_jpeg images/s of the JPEGs it is given, the threads hand files on at
 * handed_on and decode at decoded images/s (rt_loader_rates).  At share s
 * the threads make 1 / ((1 - s) / handed_on + s / decoded) and the GPU
 * gpu_jpeg / (1 - s); the pipeline, the lesser of the two.  -1 and 0 when
 * a rate is not positive (not measured yet). */
int rt_loader_best_share(double gpu_jpeg, double handed_on, double decoded, double *most);
/* cpu_share from the next rt_loader_start on (0..100, clamped). */
void rt_loader_set_cpu_share(RtLoader *l, int percent);
int rt_loader_cpu_share(RtLoader *l);

/* Distinct unreadable images met so far; names (may be NULL) gets the
 * first few messages, "; "-separated. */
int64_t rt_loader_unreadable(RtLoader *l, char *names, size_t cap);

#endif
