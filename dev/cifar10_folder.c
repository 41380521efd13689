/* cifar10_folder.c - CIFAR-10's binary version to the ImageFolder layout
 * that `netrun train --data DIR` reads:
 *
 *   cifar10_folder BATCHES OUT
 *
 * BATCHES is the folder of cifar-10-binary.tar.gz (cifar-10-batches-bin/:
 * data_batch_1.bin ... data_batch_5.bin, test_batch.bin, batches.meta.txt).
 * Each record there is one label byte and 32x32 pixels as three planes (R, G,
 * B).  Writes OUT/train/<class>/NNNN.jpg (50,000 images) and
 * OUT/test/<class>/NNNN.jpg (10,000), numbered from 0000 within each class
 * in file order, as JPEG quality 95 without chroma subsampling.  Class names
 * come from batches.meta.txt.  dev/cifar10_folder.sh builds and runs it.
 * Exit status 0, or 1 with a message naming the file. */
#define _POSIX_C_SOURCE 200809L /* mkdir */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>

enum { NCLASS = 10, SIDE = 32, PLANE = SIDE * SIDE, RECORD = 1 + 3 * PLANE };

static char classes[NCLASS][64];
static int counts[2][NCLASS]; /* [train/test][class]: images written so far */

static int fail(const char *what, const char *path) {
  fprintf(stderr, "cifar10_folder: %s '%s': %s\n", what, path, errno ? strerror(errno) : "bad format");
  return -1;
}

static int make_dir(const char *path) {
  if (mkdir(path, 0777) && errno != EEXIST) return fail("cannot create", path);
  return 0;
}

/* The ten names of batches.meta.txt, one a line. */
static int read_classes(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/batches.meta.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f) return fail("cannot open", path);
  int n = 0;
  char line[256];
  while (n < NCLASS && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0]) continue;
    if (strlen(line) >= sizeof classes[0] || strchr(line, '/')) break;
    snprintf(classes[n++], sizeof classes[0], "%s", line);
  }
  fclose(f);
  errno = 0;
  return n == NCLASS ? 0 : fail("not ten class names in", path);
}

/* One 32x32 RGB image (interleaved) as a JPEG file. */
static int write_jpeg(const char *path, const unsigned char *rgb) {
  FILE *f = fopen(path, "wb");
  if (!f) return fail("cannot write", path);
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = SIDE, c.image_height = SIDE, c.input_components = 3, c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  for (int i = 0; i < 3; i++) c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < SIDE) {
    JSAMPROW row = (JSAMPROW)(rgb + c.next_scanline * SIDE * 3);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return fclose(f) ? fail("cannot write", path) : 0;
}

/* Every record of one batch file into OUT/SPLIT/<class>/. */
static int convert_batch(const char *path, const char *out, int split) {
  static const char *splits[2] = {"train", "test"};
  FILE *f = fopen(path, "rb");
  if (!f) return fail("cannot open", path);
  unsigned char rec[RECORD], rgb[3 * PLANE];
  size_t got;
  int status = 0;
  while (status == 0 && (got = fread(rec, 1, RECORD, f)) == RECORD) {
    if (rec[0] >= NCLASS) {
      errno = 0;
      status = fail("label above 9 in", path);
      break;
    }
    for (int p = 0; p < PLANE; p++)
      for (int ch = 0; ch < 3; ch++) rgb[3 * p + ch] = rec[1 + ch * PLANE + p];
    char file[4096];
    snprintf(file, sizeof file, "%s/%s/%s/%04d.jpg", out, splits[split], classes[rec[0]], counts[split][rec[0]]++);
    status = write_jpeg(file, rgb);
  }
  if (status == 0 && (ferror(f) || got != 0)) {
    errno = ferror(f) ? errno : 0;
    status = fail(ferror(f) ? "cannot read" : "truncated record in", path);
  }
  fclose(f);
  return status;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: cifar10_folder BATCHES_DIR OUT_DIR  (BATCHES_DIR: cifar-10-batches-bin/)\n");
    return 2;
  }
  const char *in = argv[1], *out = argv[2];
  if (read_classes(in) || make_dir(out)) return 1;
  static const char *splits[2] = {"train", "test"};
  for (int s = 0; s < 2; s++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", out, splits[s]);
    if (make_dir(dir)) return 1;
    for (int k = 0; k < NCLASS; k++) {
      snprintf(dir, sizeof dir, "%s/%s/%s", out, splits[s], classes[k]);
      if (make_dir(dir)) return 1;
    }
  }
  char path[4096];
  for (int b = 1; b <= 5; b++) {
    snprintf(path, sizeof path, "%s/data_batch_%d.bin", in, b);
    if (convert_batch(path, out, 0)) return 1;
  }
  snprintf(path, sizeof path, "%s/test_batch.bin", in);
  if (convert_batch(path, out, 1)) return 1;
  for (int s = 0; s < 2; s++) {
    int total = 0;
    for (int k = 0; k < NCLASS; k++) total += counts[s][k];
    printf("%s/%s: %d images in %d classes\n", out, splits[s], total, NCLASS);
  }
  return 0;
}
