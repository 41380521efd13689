/* rt_idx.h - load MNIST-style IDX files (images and labels).
 *
 * An IDX file is a big-endian magic (0, 0, element type, rank), one
 * big-endian u32 per dimension, then the elements.  netc reads the
 * unsigned-byte kind that MNIST and Fashion-MNIST ship: images of rank 3
 * [N, rows, cols] and labels of rank 1 [N].  Files may be gzip-compressed
 * or plain; zlib reads both.  Everything is checked -- magic, element
 * type, rank, non-zero image dims, that the data is exactly as long as the
 * header says, and that image and label counts agree -- and a failure
 * returns a status with "path: what is wrong" in the caller's buffer.
 * Nothing is printed. */
#ifndef NETC_RT_IDX_H
#define NETC_RT_IDX_H

#include <stddef.h>
#include <stdint.h>

typedef enum RtIdxStatus {
  RT_IDX_OK = 0,
  RT_IDX_ERR_IO,     /* cannot open or read the file, or its gzip is corrupt */
  RT_IDX_ERR_FORMAT, /* the bytes are not what an IDX file of this kind holds */
  RT_IDX_ERR_NOMEM
} RtIdxStatus;

enum {
  RT_IDX_ERRMAX = 512,
  RT_IDX_MAX_BYTES_LOG2 = 34 /* refuse headers promising more than 16 GiB */
};

/* A labelled image set: images[i * rows * cols + r * cols + c], labels[i]. */
typedef struct RtIdxSet {
  uint8_t *images;
  uint8_t *labels;
  int64_t n;
  int rows, cols;
} RtIdxSet;

/* Loads an image file; *pixels is malloc'ed (free it) with n*rows*cols
 * bytes.  On failure *pixels is NULL. */
RtIdxStatus rt_idx_load_images(const char *path, uint8_t **pixels, int64_t *n, int *rows, int *cols, char *err,
                               size_t errcap);
/* Loads a label file; *labels is malloc'ed (free it) with n bytes. */
RtIdxStatus rt_idx_load_labels(const char *path, uint8_t **labels, int64_t *n, char *err, size_t errcap);
/* Loads both files of a set and checks that their counts agree.  On
 * failure *out is zeroed and holds nothing. */
RtIdxStatus rt_idx_load(const char *images_path, const char *labels_path, RtIdxSet *out, char *err, size_t errcap);
void rt_idx_free(RtIdxSet *s); /* takes NULL; leaves *s zeroed */

#endif
