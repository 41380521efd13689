/* jpegtest.h - writing test pictures as JPEG files with libjpeg's encoder
 * (tests/data only).  jt_write: an RGB (components 3), grey (1) or CMYK (4)
 * picture, 4:4:4 sampling so that colours survive within a few levels.
 * jt_write_as also: 4:2:0 chroma as cameras write (sub), progressive scans
 * (prog), or RGB stored without the YCbCr conversion (rgb). */
#ifndef NETC_TESTS_JPEGTEST_H
#define NETC_TESTS_JPEGTEST_H

#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

static inline int jt_write_as(const char *path, const uint8_t *px, int w, int h, int components, int quality, int sub,
                              int prog, int rgb) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  struct jpeg_compress_struct ci;
  struct jpeg_error_mgr em;
  ci.err = jpeg_std_error(&em);
  jpeg_create_compress(&ci);
  jpeg_stdio_dest(&ci, f);
  ci.image_width = (JDIMENSION)w, ci.image_height = (JDIMENSION)h, ci.input_components = components;
  ci.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&ci);
  jpeg_set_quality(&ci, quality, TRUE);
  if (rgb) jpeg_set_colorspace(&ci, JCS_RGB);
  for (int c = 0; c < ci.num_components; c++) ci.comp_info[c].h_samp_factor = ci.comp_info[c].v_samp_factor = 1;
  if (sub && ci.num_components == 3) ci.comp_info[0].h_samp_factor = ci.comp_info[0].v_samp_factor = 2;
  if (prog) jpeg_simple_progression(&ci);
  jpeg_start_compress(&ci, TRUE);
  while (ci.next_scanline < ci.image_height) {
    JSAMPROW row = (JSAMPROW)(px + (size_t)ci.next_scanline * (size_t)w * (size_t)components);
    jpeg_write_scanlines(&ci, &row, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  return fclose(f);
}

static inline int jt_write(const char *path, const uint8_t *px, int w, int h, int components, int quality) {
  return jt_write_as(path, px, w, h, components, quality, 0, 0, 0);
}

#endif
