/* rt_jpeg.c - JPEG to RGB bytes through libjpeg's decompressor.
 *
 * libjpeg reports fatal errors through error_exit, which must not return:
 * ours formats the library's message into the caller's buffer and
 * longjmps back to the decode call, which frees what it made.  Warnings
 * about damaged data are tolerated (real photo collections have them and
 * the picture still decodes) except a premature end of file, which leaves
 * the picture's bottom made up by the library: a truncated file is an
 * error.  A header claiming more than RT_JPEG_MAX_PIXELS is refused before
 * jpeg_start_decompress, which would allocate for the whole picture.  The
 * scale 1/d is the largest d in 8, 4, 2 that keeps the shorter side at
 * least min_short (libjpeg rounds scaled sizes up).
 *
 * A partial decode (rt_jpeg_decode_part) skips the rows above its box
 * (jpeg_skip_scanlines), crops the columns to the box and a margin
 * (jpeg_crop_scanline, which widens it to whole iMCUs) and stops after the
 * box's last row, aborting the decompressor there.  Skipped rows are still
 * entropy-decoded, so damage above the box is found as in a full decode;
 * a file without its EOI marker at the end is decoded in full, so that a
 * truncated file is an error whatever the box. */
#include "rt_jpeg.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "rt_file.h"

typedef struct Fail {
  struct jpeg_error_mgr mgr;
  jmp_buf jump;
  int truncated;
} Fail;

static void on_error(j_common_ptr ci) {
  Fail *f = (Fail *)ci->err;
  longjmp(f->jump, 1);
}

static void on_message(j_common_ptr ci, int level) {
  Fail *f = (Fail *)ci->err;
  if (level < 0 && ci->err->msg_code == JWRN_JPEG_EOF) f->truncated = 1;
}

/* MARGIN: columns decoded beyond a crop, whose edge pixels libjpeg-turbo's
 * fancy upsampling may make differently from a full decode.  TAIL: how far
 * from the end of a file its EOI marker may be. */
enum { MARGIN = 2, TAIL = 1024 };

/* jpeg_crop_scanline and jpeg_skip_scanlines: libjpeg-turbo 1.5 and later;
 * elsewhere a partial decode reads from the top and stops at the box */
#if defined(LIBJPEG_TURBO_VERSION_NUMBER) && LIBJPEG_TURBO_VERSION_NUMBER >= 1005000
#define CAN_SKIP 1
#else
#define CAN_SKIP 0
#endif

static int pick_denom(int w, int h, int min_short) {
  int shorter = w < h ? w : h;
  if (min_short <= 0) return 1;
  for (int d = 8; d > 1; d /= 2)
    if ((shorter + d - 1) / d >= min_short) return d;
  return 1;
}

/* A header's size over RT_JPEG_MAX_PIXELS: the message, 1. */
static int too_large(const struct jpeg_decompress_struct *ci, const char *name, char *err, size_t errmax) {
  long long w = (long long)ci->image_width, h = (long long)ci->image_height;
  if (w * h <= RT_JPEG_MAX_PIXELS) return 0;
  snprintf(err, errmax,
           "%s: a %lldx%lld JPEG: %lld pixels, over the limit of %lld (a picture this large is refused "
           "before it is decoded)",
           name, w, h, w * h, RT_JPEG_MAX_PIXELS);
  return 1;
}

/* The decoded size at scale 1/d: libjpeg rounds up. */
static int scaled(int n, int d) { return (n + d - 1) / d; }

/* Runs the decompressor on a prepared source.  With box (x0, y0, x1, y1,
 * inclusive, in the pixels of the picture as decoded), only those rows
 * and, where libjpeg-turbo can crop, those columns (and a margin of
 * MARGIN) are decoded; the rest of px is left unwritten.  Everything it
 * allocates is in *out or freed before it returns. */
static RtJpegStatus decode(struct jpeg_decompress_struct *ci, Fail *f, const char *name, int min_short, const int *box,
                           RtImage *out, char *err, size_t errmax) {
  uint8_t *volatile px = NULL;
  if (setjmp(f->jump)) {
    char msg[JMSG_LENGTH_MAX];
    f->mgr.format_message((j_common_ptr)ci, msg);
    snprintf(err, errmax, "%s: not a readable JPEG: %s", name, msg);
    free(px);
    return RT_JPEG_ERR_FORMAT;
  }
  jpeg_read_header(ci, TRUE);
  if (ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK) {
    snprintf(err, errmax, "%s: a CMYK JPEG (only RGB and grey images are read)", name);
    return RT_JPEG_ERR_FORMAT;
  }
  if (too_large(ci, name, err, errmax)) return RT_JPEG_ERR_FORMAT;
  ci->out_color_space = JCS_RGB;
  ci->scale_num = 1;
  ci->scale_denom = (unsigned)pick_denom((int)ci->image_width, (int)ci->image_height, min_short);
  jpeg_start_decompress(ci);
  int W = (int)ci->output_width, H = (int)ci->output_height;
  size_t row = (size_t)W * 3;
  px = malloc(row * (size_t)H);
  if (!px) {
    snprintf(err, errmax, "%s: out of memory for a %dx%d picture", name, W, H);
    return RT_JPEG_ERR_NOMEM;
  }
  JDIMENSION xoff = 0, last = (JDIMENSION)H - 1;
  if (box) {
    int x0 = box[0] - MARGIN, x1 = box[2] + MARGIN, y0 = box[1] < 0 ? 0 : box[1];
    x0 = x0 < 0 ? 0 : x0 >= W ? W - 1 : x0;
    x1 = x1 >= W ? W - 1 : x1 < x0 ? x0 : x1;
    last = (JDIMENSION)(box[3] < y0 ? y0 : box[3] >= H ? H - 1 : box[3]);
#if CAN_SKIP
    JDIMENSION width = (JDIMENSION)(x1 - x0 + 1);
    xoff = (JDIMENSION)x0;
    if ((int)width < W) jpeg_crop_scanline(ci, &xoff, &width);
    if (y0 > 0) jpeg_skip_scanlines(ci, (JDIMENSION)(y0 < H ? y0 : H - 1));
#else
    (void)x1, (void)y0;
#endif
  }
  while (ci->output_scanline <= last) {
    JSAMPROW r = px + row * ci->output_scanline + (size_t)xoff * 3;
    jpeg_read_scanlines(ci, &r, 1);
  }
  if (ci->output_scanline < ci->output_height)
    jpeg_abort_decompress(ci);
  else
    jpeg_finish_decompress(ci);
  if (f->truncated) {
    snprintf(err, errmax, "%s: truncated JPEG (the data ends before the picture does)", name);
    free(px);
    return RT_JPEG_ERR_FORMAT;
  }
  *out = (RtImage){px, W, H, (int)ci->image_width, (int)ci->image_height};
  return RT_JPEG_OK;
}

static void setup(struct jpeg_decompress_struct *ci, Fail *f) {
  memset(f, 0, sizeof *f);
  ci->err = jpeg_std_error(&f->mgr);
  f->mgr.error_exit = on_error;
  f->mgr.emit_message = on_message;
}

/* One decoder over a file (fp) or a buffer (buf, n); name for messages. */
static RtJpegStatus decode_from(FILE *fp, const uint8_t *buf, size_t n, const char *name, int min_short, const int *box,
                                RtImage *out, char *err, size_t errmax) {
  struct jpeg_decompress_struct ci;
  Fail f;
  setup(&ci, &f);
  RtJpegStatus s;
  if (setjmp(f.jump)) {
    snprintf(err, errmax, "%s: cannot start the JPEG decoder", name);
    s = RT_JPEG_ERR_NOMEM;
  } else {
    jpeg_create_decompress(&ci);
    if (fp)
      jpeg_stdio_src(&ci, fp);
    else
      jpeg_mem_src(&ci, buf, (unsigned long)n);
    s = decode(&ci, &f, name, min_short, box, out, err, errmax);
  }
  jpeg_destroy_decompress(&ci);
  return s;
}

RtJpegStatus rt_jpeg_decode_file(const char *path, int min_short, RtImage *out, char *err, size_t errmax) {
  memset(out, 0, sizeof *out);
  char why[128];
  FILE *fp = rt_file_fopen_regular(path, why, sizeof why);
  if (!fp) {
    snprintf(err, errmax, "%s: %s", path, why);
    return RT_JPEG_ERR_IO;
  }
  RtJpegStatus s = decode_from(fp, NULL, 0, path, min_short, NULL, out, err, errmax);
  fclose(fp);
  return s;
}

RtJpegStatus rt_jpeg_decode_mem(const uint8_t *buf, size_t n, const char *name, int min_short, RtImage *out, char *err,
                                size_t errmax) {
  memset(out, 0, sizeof *out);
  if (!buf || n == 0) {
    snprintf(err, errmax, "%s: empty file", name);
    return RT_JPEG_ERR_FORMAT;
  }
  return decode_from(NULL, buf, n, name, min_short, NULL, out, err, errmax);
}

/* A file whose data end with the EOI marker (allowing some padding after
 * it) is complete.  Entropy-coded data never hold FF D9, so a file cut
 * inside its scan has none in its tail. */
static int complete(const uint8_t *buf, size_t n) {
  size_t from = n > TAIL ? n - TAIL : 0;
  for (size_t i = n - 1; i > from; i--)
    if (buf[i] == 0xd9 && buf[i - 1] == 0xff) return 1;
  return 0;
}

RtJpegStatus rt_jpeg_decode_part(const uint8_t *buf, size_t n, const char *name, int min_short, const int box[4],
                                 RtImage *out, char *err, size_t errmax) {
  memset(out, 0, sizeof *out);
  if (!buf || n == 0) {
    snprintf(err, errmax, "%s: empty file", name);
    return RT_JPEG_ERR_FORMAT;
  }
  /* rows below the box are never read: only a complete file may skip them,
   * so that a truncated one is an error whatever the box */
  return decode_from(NULL, buf, n, name, min_short, complete(buf, n) ? box : NULL, out, err, errmax);
}

void rt_jpeg_scaled_size(int w, int h, int min_short, int *sw, int *sh) {
  int d = pick_denom(w, h, min_short);
  *sw = scaled(w, d), *sh = scaled(h, d);
}

RtJpegStatus rt_jpeg_header(const uint8_t *buf, size_t n, const char *name, int *w, int *h, int *gpu_ok, char *err,
                            size_t errmax) {
  *w = *h = *gpu_ok = 0;
  if (!buf || n == 0) {
    snprintf(err, errmax, "%s: empty file", name);
    return RT_JPEG_ERR_FORMAT;
  }
  struct jpeg_decompress_struct ci;
  Fail f;
  setup(&ci, &f);
  RtJpegStatus s = RT_JPEG_OK;
  if (setjmp(f.jump)) {
    char msg[JMSG_LENGTH_MAX];
    f.mgr.format_message((j_common_ptr)&ci, msg);
    snprintf(err, errmax, "%s: not a readable JPEG: %s", name, msg);
    s = RT_JPEG_ERR_FORMAT;
  } else {
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, buf, (unsigned long)n);
    jpeg_read_header(&ci, TRUE);
    if (ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK) {
      snprintf(err, errmax, "%s: a CMYK JPEG (only RGB and grey images are read)", name);
      s = RT_JPEG_ERR_FORMAT;
    } else if (too_large(&ci, name, err, errmax)) {
      s = RT_JPEG_ERR_FORMAT;
    } else {
      int ycc = ci.num_components == 3 && ci.jpeg_color_space == JCS_YCbCr;
      int grey = ci.num_components == 1 && ci.jpeg_color_space == JCS_GRAYSCALE;
      *w = (int)ci.image_width, *h = (int)ci.image_height;
      *gpu_ok = (ycc || grey) && !ci.progressive_mode && !ci.arith_code && complete(buf, n);
    }
  }
  jpeg_destroy_decompress(&ci);
  return s;
}

void rt_image_free(RtImage *im) {
  if (!im) return;
  free(im->px);
  memset(im, 0, sizeof *im);
}
