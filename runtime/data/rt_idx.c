/* rt_idx.c - the IDX loader behind rt_idx.h.
 *
 * One routine reads any unsigned-byte IDX file of a given rank through
 * zlib (gzread passes plain files through unchanged).  The header's dims
 * are only a promise: the buffer grows as data actually arrives, so a
 * corrupt header claiming gigabytes costs nothing, and the file must end
 * exactly where the header says.  A gzip stream's own check (CRC, length)
 * is verified by reading one byte past the data, which makes zlib finish
 * the stream. */
#include "rt_idx.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "rt_file.h"

enum { IDX_UBYTE = 0x08, CHUNK = 1 << 20 };

static RtIdxStatus fail(char *err, size_t errcap, RtIdxStatus st, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static RtIdxStatus fail(char *err, size_t errcap, RtIdxStatus st, const char *path, const char *fmt, ...) {
  if (!err || errcap == 0) return st;
  int n = snprintf(err, errcap, "%s: ", path);
  if (n >= 0 && (size_t)n < errcap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errcap - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return st;
}

/* Reads up to len bytes; returns how many, or -1 when zlib reports an
 * error (a corrupt or truncated gzip stream, or a read error). */
static int64_t read_some(gzFile gz, uint8_t *buf, uint64_t len) {
  uint64_t got = 0;
  while (got < len) {
    unsigned want = len - got > CHUNK ? CHUNK : (unsigned)(len - got);
    int r = gzread(gz, buf + got, want);
    if (r < 0) return -1;
    if (r == 0) break;
    got += (uint64_t)r;
  }
  int errnum = Z_OK;
  gzerror(gz, &errnum);
  return errnum == Z_OK ? (int64_t)got : -1;
}

static RtIdxStatus gz_failure(gzFile gz, const char *path, char *err, size_t errcap) {
  int errnum = Z_OK;
  const char *msg = gzerror(gz, &errnum);
  if (errnum == Z_ERRNO) return fail(err, errcap, RT_IDX_ERR_IO, path, "read failed: %s", strerror(errno));
  if (errnum == Z_MEM_ERROR) return fail(err, errcap, RT_IDX_ERR_NOMEM, path, "out of memory in zlib");
  /* zlib prefixes its message with the path (or "<fd:N>" for a descriptor), which ours already has. */
  size_t plen = strlen(path);
  if (strncmp(msg, path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0) msg += plen + 2;
  const char *fdend = strncmp(msg, "<fd:", 4) == 0 ? strstr(msg, ">: ") : NULL;
  if (fdend) msg = fdend + 3;
  return fail(err, errcap, RT_IDX_ERR_IO, path, "corrupt or truncated gzip data (%s)", msg);
}

/* Loads an unsigned-byte IDX file of rank `rank` (what names the file's
 * kind in messages); dims gets the rank sizes, *out the data. */
static RtIdxStatus load_idx(const char *path, int rank, const char *what, uint32_t *dims, uint8_t **out, char *err,
                            size_t errcap) {
  *out = NULL;
  if (err && errcap) err[0] = '\0';
  /* a regular file only, opened without blocking (rt_file.h) */
  char why[128];
  int fd = rt_file_open_regular(path, NULL, why, sizeof why);
  if (fd < 0) return fail(err, errcap, RT_IDX_ERR_IO, path, "%s", why);
  gzFile gz = gzdopen(fd, "rb");
  if (!gz) {
    close(fd);
    return fail(err, errcap, RT_IDX_ERR_NOMEM, path, "out of memory opening");
  }
  gzbuffer(gz, 1 << 17);

  RtIdxStatus st = RT_IDX_OK;
  uint8_t *data = NULL;
  uint8_t head[4 + 4 * 3];
  size_t hlen = 4 + 4 * (size_t)rank;
  int64_t got = read_some(gz, head, 4);
  if (got < 0) {
    st = gz_failure(gz, path, err, errcap);
    goto done;
  }
  if (got < 4) {
    st = fail(err, errcap, RT_IDX_ERR_FORMAT, path, "file too short (%" PRId64 " bytes) for an IDX magic number", got);
    goto done;
  }
  uint32_t magic = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
  if (head[0] != 0 || head[1] != 0) {
    st = fail(err, errcap, RT_IDX_ERR_FORMAT, path,
              "bad magic number 0x%08" PRIx32 " (an IDX file starts with two zero bytes)", magic);
    goto done;
  }
  if (head[2] != IDX_UBYTE) {
    st = fail(err, errcap, RT_IDX_ERR_FORMAT, path,
              "element type 0x%02x is not unsigned byte (0x08) (magic 0x%08" PRIx32 ")", head[2], magic);
    goto done;
  }
  if (head[3] != rank) {
    st = fail(err, errcap, RT_IDX_ERR_FORMAT, path, "has %d dimensions but %s files have %d (magic 0x%08" PRIx32 ")",
              head[3], what, rank, magic);
    goto done;
  }
  got = read_some(gz, head + 4, hlen - 4);
  if (got < 0) {
    st = gz_failure(gz, path, err, errcap);
    goto done;
  }
  if ((size_t)got < hlen - 4) {
    st = fail(err, errcap, RT_IDX_ERR_FORMAT, path, "header truncated: %d dimensions need %zu bytes, file has %" PRId64,
              rank, hlen, 4 + got);
    goto done;
  }
  uint64_t total = 1;
  int overflow = 0;
  for (int i = 0; i < rank; i++) {
    const uint8_t *b = head + 4 + 4 * i;
    dims[i] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    overflow |= __builtin_mul_overflow(total, dims[i], &total);
  }
  for (int i = 1; i < rank; i++) {
    if (dims[i] == 0 || dims[i] > INT32_MAX) {
      st = fail(err, errcap, RT_IDX_ERR_FORMAT, path, "dimension %d is %" PRIu32 " (must be 1..%d)", i, dims[i],
                INT32_MAX);
      goto done;
    }
  }
  if (overflow || total >> RT_IDX_MAX_BYTES_LOG2) {
    st = fail(err, errcap, RT_IDX_ERR_FORMAT, path,
              "header promises more than 2^%d bytes of data (dims %" PRIu32 " x ...)", RT_IDX_MAX_BYTES_LOG2, dims[0]);
    goto done;
  }

  /* Grow with what arrives, not with what the header promises. */
  uint64_t cap = total < CHUNK ? total : CHUNK, have = 0;
  data = malloc(cap ? cap : 1);
  if (!data) {
    st = fail(err, errcap, RT_IDX_ERR_NOMEM, path, "out of memory");
    goto done;
  }
  while (have < total) {
    if (have == cap) {
      uint64_t ncap = cap * 2 < total ? cap * 2 : total;
      uint8_t *nd = realloc(data, ncap);
      if (!nd) {
        st = fail(err, errcap, RT_IDX_ERR_NOMEM, path, "out of memory");
        goto done;
      }
      data = nd;
      cap = ncap;
    }
    got = read_some(gz, data + have, cap - have);
    if (got < 0) {
      st = gz_failure(gz, path, err, errcap);
      goto done;
    }
    have += (uint64_t)got;
    if (have < cap) break;
  }
  if (have < total) {
    st = fail(err, errcap, RT_IDX_ERR_FORMAT, path,
              "data truncated: header promises %" PRIu64 " bytes, file has %" PRIu64, total, have);
    goto done;
  }
  uint8_t extra[64];
  got = read_some(gz, extra, sizeof extra);
  if (got < 0) {
    st = gz_failure(gz, path, err, errcap);
    goto done;
  }
  if (got > 0) {
    st = fail(err, errcap, RT_IDX_ERR_FORMAT, path,
              "trailing bytes after the %" PRIu64 " bytes of data the header promises", total);
    goto done;
  }
done:
  if (gzclose(gz) != Z_OK && st == RT_IDX_OK) st = fail(err, errcap, RT_IDX_ERR_IO, path, "closing failed");
  if (st != RT_IDX_OK)
    free(data);
  else
    *out = data;
  return st;
}

RtIdxStatus rt_idx_load_images(const char *path, uint8_t **pixels, int64_t *n, int *rows, int *cols, char *err,
                               size_t errcap) {
  uint32_t dims[3] = {0, 0, 0};
  RtIdxStatus st = load_idx(path, 3, "image", dims, pixels, err, errcap);
  if (st == RT_IDX_OK) {
    *n = dims[0];
    *rows = (int)dims[1];
    *cols = (int)dims[2];
  }
  return st;
}

RtIdxStatus rt_idx_load_labels(const char *path, uint8_t **labels, int64_t *n, char *err, size_t errcap) {
  uint32_t dims[1] = {0};
  RtIdxStatus st = load_idx(path, 1, "label", dims, labels, err, errcap);
  if (st == RT_IDX_OK) *n = dims[0];
  return st;
}

RtIdxStatus rt_idx_load(const char *images_path, const char *labels_path, RtIdxSet *out, char *err, size_t errcap) {
  memset(out, 0, sizeof *out);
  int64_t nimg = 0, nlab = 0;
  RtIdxStatus st = rt_idx_load_images(images_path, &out->images, &nimg, &out->rows, &out->cols, err, errcap);
  if (st == RT_IDX_OK) st = rt_idx_load_labels(labels_path, &out->labels, &nlab, err, errcap);
  if (st == RT_IDX_OK && nimg != nlab)
    st = fail(err, errcap, RT_IDX_ERR_FORMAT, labels_path, "has %" PRId64 " labels but %s has %" PRId64 " images", nlab,
              images_path, nimg);
  if (st != RT_IDX_OK) {
    rt_idx_free(out);
    return st;
  }
  out->n = nimg;
  return RT_IDX_OK;
}

void rt_idx_free(RtIdxSet *s) {
  if (!s) return;
  free(s->images);
  free(s->labels);
  memset(s, 0, sizeof *s);
}
