/* test_idx_malformed.c - the IDX loader reads small valid files, plain and
 * gzipped, and refuses broken ones with a message naming the file.
 *
 * Files are made here: a header (magic, dims) plus data, written plain or
 * through gzwrite; some are then damaged byte-wise (cut gzip stream,
 * flipped CRC). */
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "check.h"
#include "rt_idx.h"
#include "tmpdir.h"

static char dir[256];

/* Writes magic + dims (big-endian) + data_len bytes (i % 251) to name;
 * gzipped when gz.  Returns the path in a static buffer. */
static const char *make(const char *name, uint32_t magic, int ndims, const uint32_t *dims, size_t data_len, int gz) {
  static char path[700];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  size_t len = 4 + 4 * (size_t)ndims + data_len;
  unsigned char *buf = malloc(len);
  for (int i = 0; i < 4; i++) buf[i] = (unsigned char)(magic >> (24 - 8 * i));
  for (int d = 0; d < ndims; d++)
    for (int i = 0; i < 4; i++) buf[4 + 4 * d + i] = (unsigned char)(dims[d] >> (24 - 8 * i));
  for (size_t i = 0; i < data_len; i++) buf[4 + 4 * (size_t)ndims + i] = (unsigned char)(i % 251);
  if (gz) {
    gzFile g = gzopen(path, "wb");
    CHECK(g && gzwrite(g, buf, (unsigned)len) == (int)len && gzclose(g) == Z_OK, "gzwrite");
  } else {
    CHECK(file_write(path, buf, len), "write %s", path);
  }
  free(buf);
  return path;
}

static void expect_images(const char *path, RtIdxStatus want, const char *phrase) {
  char err[RT_IDX_ERRMAX];
  uint8_t *px = (uint8_t *)err;
  int64_t n = -1;
  int rows = -1, cols = -1;
  RtIdxStatus st = rt_idx_load_images(path, &px, &n, &rows, &cols, err, sizeof err);
  CHECK(st == want, "%s: status %d, want %d (%s)", path, st, want, err);
  CHECK(px == NULL, "%s: pixels returned on failure", path);
  CHECK(strncmp(err, path, strlen(path)) == 0, "message lacks the path: %s", err);
  CHECK(strstr(err, phrase) != NULL, "%s:\n  got:  %s\n  want: ...%s...", path, err, phrase);
  if (px != NULL && px != (uint8_t *)err) free(px);
}

static void expect_labels(const char *path, RtIdxStatus want, const char *phrase) {
  char err[RT_IDX_ERRMAX];
  uint8_t *lab = NULL;
  int64_t n = -1;
  RtIdxStatus st = rt_idx_load_labels(path, &lab, &n, err, sizeof err);
  CHECK(st == want && lab == NULL, "%s: status %d, want %d (%s)", path, st, want, err);
  CHECK(strstr(err, path) && strstr(err, phrase), "%s:\n  got:  %s\n  want: ...%s...", path, err, phrase);
  free(lab);
}

static void test_valid(void) {
  for (int gz = 0; gz <= 1; gz++) {
    uint32_t idims[3] = {3, 4, 5}, ldims[1] = {3};
    char img[700], lab[700], err[RT_IDX_ERRMAX];
    snprintf(img, sizeof img, "%s", make(gz ? "ok-img.gz" : "ok-img", 0x803, 3, idims, 60, gz));
    snprintf(lab, sizeof lab, "%s", make(gz ? "ok-lab.gz" : "ok-lab", 0x801, 1, ldims, 3, gz));
    RtIdxSet s;
    CHECK(rt_idx_load(img, lab, &s, err, sizeof err) == RT_IDX_OK, "valid (gz=%d): %s", gz, err);
    CHECK(s.n == 3 && s.rows == 4 && s.cols == 5, "dims %lld %d %d", (long long)s.n, s.rows, s.cols);
    CHECK(s.images && s.images[0] == 0 && s.images[59] == 59, "pixels");
    CHECK(s.labels && s.labels[2] == 2, "labels");
    rt_idx_free(&s);
    CHECK(s.images == NULL && s.labels == NULL && s.n == 0, "free zeroes");
  }
  /* An empty label file is valid: N = 0. */
  uint32_t zero[1] = {0};
  char err[RT_IDX_ERRMAX];
  uint8_t *lab = NULL;
  int64_t n = -1;
  CHECK(rt_idx_load_labels(make("zero-lab", 0x801, 1, zero, 0, 0), &lab, &n, err, sizeof err) == RT_IDX_OK && n == 0,
        "empty label file: %s", err);
  free(lab);
}

static void test_malformed(void) {
  uint32_t d3[3] = {2, 3, 3}, d1[1] = {2};
  expect_images(make("bad-magic", 0x01000803, 3, d3, 18, 0), RT_IDX_ERR_FORMAT, "bad magic number 0x01000803");
  expect_images(make("float-type", 0x00000d03, 3, d3, 72, 1), RT_IDX_ERR_FORMAT,
                "element type 0x0d is not unsigned byte");
  expect_images(make("labels-as-images", 0x801, 1, d1, 2, 0), RT_IDX_ERR_FORMAT,
                "has 1 dimensions but image files have 3");
  expect_labels(make("images-as-labels", 0x803, 3, d3, 18, 1), RT_IDX_ERR_FORMAT,
                "has 3 dimensions but label files have 1");
  uint32_t zero_rows[3] = {2, 0, 3};
  expect_images(make("zero-rows", 0x803, 3, zero_rows, 0, 0), RT_IDX_ERR_FORMAT, "dimension 1 is 0");
  expect_images(make("short-data", 0x803, 3, d3, 17, 1), RT_IDX_ERR_FORMAT,
                "data truncated: header promises 18 bytes, file has 17");
  expect_images(make("long-data", 0x803, 3, d3, 19, 0), RT_IDX_ERR_FORMAT, "trailing bytes after the 18 bytes");
  expect_labels(make("short-labels", 0x801, 1, d1, 1, 0), RT_IDX_ERR_FORMAT, "data truncated");
  /* A header promising 16 GiB or more, or overflowing 64 bits. */
  uint32_t huge[3] = {0xffffffffu, 65535, 65535};
  expect_images(make("huge", 0x803, 3, huge, 10, 0), RT_IDX_ERR_FORMAT, "header promises more than 2^34 bytes");
  uint32_t wrap[3] = {0xffffffffu, 0x7fffffffu, 0x7fffffffu}; /* product past 2^64 */
  expect_images(make("wrap", 0x803, 3, wrap, 10, 0), RT_IDX_ERR_FORMAT, "header promises more than 2^34 bytes");
  /* 1.6 GB promised, 10 bytes present: refused without allocating it. */
  uint32_t big[3] = {2000000, 28, 28};
  expect_images(make("big-claim", 0x803, 3, big, 10, 1), RT_IDX_ERR_FORMAT,
                "data truncated: header promises 1568000000 bytes, file has 10");
  char path[700];
  snprintf(path, sizeof path, "%s/two-bytes", dir);
  CHECK(file_write(path, "\0\0", 2), "write %s", path);
  expect_images(path, RT_IDX_ERR_FORMAT, "file too short (2 bytes) for an IDX magic number");
  expect_images(make("cut-header", 0x803, 1, d3, 0, 0), RT_IDX_ERR_FORMAT, "header truncated");

  snprintf(path, sizeof path, "%s/missing.gz", dir);
  expect_images(path, RT_IDX_ERR_IO, "cannot open: No such file or directory");

  /* A gzip stream cut short, and one whose CRC does not match. */
  size_t len = 0;
  unsigned char *gzbytes = file_read(make("good.gz", 0x803, 3, d3, 18, 1), &len);
  CHECK(gzbytes && len > 20, "read gz");
  snprintf(path, sizeof path, "%s/cut.gz", dir);
  file_write(path, gzbytes, len - 12);
  expect_images(path, RT_IDX_ERR_IO, "corrupt or truncated gzip data");
  gzbytes[len - 8] ^= 0xff; /* first CRC-32 byte of the trailer */
  snprintf(path, sizeof path, "%s/crc.gz", dir);
  file_write(path, gzbytes, len);
  expect_images(path, RT_IDX_ERR_IO, "corrupt or truncated gzip data (incorrect data check)");
  free(gzbytes);

  /* Counts that disagree. */
  uint32_t three[1] = {3};
  char img[700], err[RT_IDX_ERRMAX];
  snprintf(img, sizeof img, "%s", make("two-images", 0x803, 3, d3, 18, 0));
  const char *lab = make("three-labels", 0x801, 1, three, 3, 0);
  RtIdxSet s;
  CHECK(rt_idx_load(img, lab, &s, err, sizeof err) == RT_IDX_ERR_FORMAT, "count mismatch");
  CHECK(s.images == NULL && s.labels == NULL, "set not emptied");
  CHECK(strstr(err, "three-labels: has 3 labels but") && strstr(err, "two-images has 2 images"), "count mismatch: %s",
        err);
}

int main(void) {
  if (!tmpdir_make(dir, sizeof dir, "idx")) return check_skip("cannot make a temporary directory");
  test_valid();
  test_malformed();
  tmpdir_remove(dir);
  return check_report();
}
