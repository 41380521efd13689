/* rt_jpeg.h - decode a JPEG file or buffer to 8-bit RGB with libjpeg(-turbo).
 *
 * Grey images are expanded to RGB (R = G = B); CMYK/YCCK images, files
 * that are not JPEG, and truncated or corrupt data are errors with "NAME:
 * what is wrong" in the caller's buffer, and so is a header claiming more
 * than RT_JPEG_MAX_PIXELS pixels.  A decode may ask for a smaller
 * picture: with min_short > 0, libjpeg's DCT scaling (1/2, 1/4, 1/8)
 * decodes at the smallest of those sizes whose shorter side is still at
 * least min_short, which is several times faster than decoding a large
 * photo in full and resizing it down.  Nothing is printed; the functions
 * keep no state and may run on many threads at once. */
#ifndef NETC_RT_JPEG_H
#define NETC_RT_JPEG_H

#include <stddef.h>
#include <stdint.h>

/* The most pixels (width x height in the file's header) a file may claim:
 * Pillow's decompression-bomb limit (2 x PIL.Image.MAX_IMAGE_PIXELS), so
 * that what torchvision's ImageFolder reads, this reads too.  A header
 * over it is an error before anything is allocated for the picture. */
#define RT_JPEG_MAX_PIXELS 178956970LL

typedef enum RtJpegStatus {
  RT_JPEG_OK = 0,
  RT_JPEG_ERR_IO,     /* cannot open or read the file */
  RT_JPEG_ERR_FORMAT, /* not a JPEG, truncated, corrupt, or CMYK */
  RT_JPEG_ERR_NOMEM
} RtJpegStatus;

/* An RGB picture, rows top to bottom: px[(y * w + x) * 3 + channel]. */
typedef struct RtImage {
  uint8_t *px;
  int w, h;
  int full_w, full_h; /* the size stored in the file, before DCT scaling */
} RtImage;

/* Decodes path into *out (px malloc'ed; free with rt_image_free). */
RtJpegStatus rt_jpeg_decode_file(const char *path, int min_short, RtImage *out, char *err, size_t errmax);
/* Decodes n bytes; name is used in messages. */
RtJpegStatus rt_jpeg_decode_mem(const uint8_t *buf, size_t n, const char *name, int min_short, RtImage *out, char *err,
                                size_t errmax);
/* A partial decode for a transform that reads only part of the picture:
 * box is columns box[0]..box[2] and rows box[1]..box[3] (inclusive) of the
 * picture as decoded at min_short (rt_jpeg_scaled_size).  *out has the
 * whole decoded size, but only the box is written (the rest is undefined);
 * within the box the pixels equal a full decode's. */
RtJpegStatus rt_jpeg_decode_part(const uint8_t *buf, size_t n, const char *name, int min_short, const int box[4],
                                 RtImage *out, char *err, size_t errmax);
/* The size a decode at min_short gives a w x h picture. */
void rt_jpeg_scaled_size(int w, int h, int min_short, int *sw, int *sh);
/* The header alone (no pixels decoded): the size in the file, and whether
 * a baseline GPU decoder can take it (*gpu_ok: not progressive, not
 * arithmetic-coded, 3-component YCbCr or 1-component grey, and complete:
 * its data end with the EOI marker).  CMYK files, broken headers and
 * sizes over RT_JPEG_MAX_PIXELS are errors, as in a decode. */
RtJpegStatus rt_jpeg_header(const uint8_t *buf, size_t n, const char *name, int *w, int *h, int *gpu_ok, char *err,
                            size_t errmax);
void rt_image_free(RtImage *im); /* takes NULL; leaves *im zeroed */

#endif
