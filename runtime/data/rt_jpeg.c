/* rt_jpeg.c - JPEG to RGB bytes through libjpeg's decompressor.
 *
 * libjpeg reports fatal errors through error_exit, which must not return:
 * ours formats the library's message into the caller's buffer and
 * longjmps back to the decode call, which frees what it made.  Warnings
 * about damaged data are tolerated (real photo collections have them and
 * the picture still decodes) except a premature end of file, which leaves
 * the picture's bottom made up by the library: a truncated file is an
 * error.  The scale 1/d is the largest d in 8, 4, 2 that keeps the
 * shorter side at least min_short (libjpeg rounds scaled sizes up). */
#include "rt_jpeg.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

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

static int pick_denom(int w, int h, int min_short) {
  int shorter = w < h ? w : h;
  if (min_short <= 0) return 1;
  for (int d = 8; d > 1; d /= 2)
    if ((shorter + d - 1) / d >= min_short) return d;
  return 1;
}

/* Runs the decompressor on a prepared source.  Everything it allocates is
 * in *out or freed before it returns. */
static RtJpegStatus decode(struct jpeg_decompress_struct *ci, Fail *f, const char *name, int min_short, RtImage *out,
                           char *err, size_t errmax) {
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
  ci->out_color_space = JCS_RGB;
  ci->scale_num = 1;
  ci->scale_denom = (unsigned)pick_denom((int)ci->image_width, (int)ci->image_height, min_short);
  jpeg_start_decompress(ci);
  size_t row = (size_t)ci->output_width * 3;
  px = malloc(row * ci->output_height);
  if (!px) {
    snprintf(err, errmax, "%s: out of memory for a %ux%u picture", name, ci->output_width, ci->output_height);
    return RT_JPEG_ERR_NOMEM;
  }
  while (ci->output_scanline < ci->output_height) {
    JSAMPROW r = px + row * ci->output_scanline;
    jpeg_read_scanlines(ci, &r, 1);
  }
  jpeg_finish_decompress(ci);
  if (f->truncated) {
    snprintf(err, errmax, "%s: truncated JPEG (the data ends before the picture does)", name);
    free(px);
    return RT_JPEG_ERR_FORMAT;
  }
  *out = (RtImage){px, (int)ci->output_width, (int)ci->output_height, (int)ci->image_width, (int)ci->image_height};
  return RT_JPEG_OK;
}

static void setup(struct jpeg_decompress_struct *ci, Fail *f) {
  memset(f, 0, sizeof *f);
  ci->err = jpeg_std_error(&f->mgr);
  f->mgr.error_exit = on_error;
  f->mgr.emit_message = on_message;
}

/* One decoder over a file (fp) or a buffer (buf, n); name for messages. */
static RtJpegStatus decode_from(FILE *fp, const uint8_t *buf, size_t n, const char *name, int min_short, RtImage *out,
                                char *err, size_t errmax) {
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
    s = decode(&ci, &f, name, min_short, out, err, errmax);
  }
  jpeg_destroy_decompress(&ci);
  return s;
}

RtJpegStatus rt_jpeg_decode_file(const char *path, int min_short, RtImage *out, char *err, size_t errmax) {
  memset(out, 0, sizeof *out);
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    snprintf(err, errmax, "%s: cannot open", path);
    return RT_JPEG_ERR_IO;
  }
  RtJpegStatus s = decode_from(fp, NULL, 0, path, min_short, out, err, errmax);
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
  return decode_from(NULL, buf, n, name, min_short, out, err, errmax);
}

void rt_image_free(RtImage *im) {
  if (!im) return;
  free(im->px);
  memset(im, 0, sizeof *im);
}
