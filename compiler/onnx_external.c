/* onnx_external.c - initializer values in files beside the model (onnx_external.h). */
#ifdef NETC_HAVE_ONNX
#include "onnx_external.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int onnx_external_is(const Onnx__TensorProto *t) {
  return t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

/* A decimal entry (offset, length): 0, or -1 when it is not a number. */
static int parse_size(const char *s, uint64_t *v) {
  if (!s || !*s) return -1;
  uint64_t r = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || r > (UINT64_MAX - 9) / 10) return -1;
    r = r * 10 + (uint64_t)(*s - '0');
  }
  *v = r;
  return 0;
}

/* Whether location stays inside the model's folder: relative, no ".." part. */
static int inside(const char *loc) {
  if (!*loc || loc[0] == '/') return 0;
  for (const char *p = loc; *p;) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') return 0;
    p += n + (e != NULL);
  }
  return 1;
}

static OnnxExternalFile *open_file(OnnxExternal *x, const char *loc, char *err, size_t errlen) {
  for (int i = 0; i < x->nfile; i++)
    if (strcmp(x->file[i].location, loc) == 0) return &x->file[i];
  const char *slash = strrchr(x->model_path, '/');
  int dirlen = slash ? (int)(slash - x->model_path + 1) : 0;
  char path[4096];
  if (snprintf(path, sizeof path, "%.*s%s", dirlen, x->model_path, loc) >= (int)sizeof path) {
    snprintf(err, errlen, "keeps its values in '%s', a path too long", loc);
    return NULL;
  }
  /* O_NONBLOCK: a FIFO with no writer must not hang the open */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int e = fd < 0 ? errno : 0;
    snprintf(err, errlen, "keeps its values in '%s' (external data), which cannot be opened: %s", path,
             e ? strerror(e) : "not a regular file");
    if (fd >= 0) close(fd);
    return NULL;
  }
  char *name = strdup(loc);
  if (x->nfile == x->cap) {
    int cap = x->cap ? 2 * x->cap : 4;
    OnnxExternalFile *f = name ? realloc(x->file, sizeof *f * (size_t)cap) : NULL;
    if (f) x->file = f, x->cap = cap;
  }
  if (!name || x->nfile == x->cap) {
    free(name);
    close(fd);
    snprintf(err, errlen, "out of host memory");
    return NULL;
  }
  x->file[x->nfile] = (OnnxExternalFile){.location = name, .fd = fd, .size = (uint64_t)st.st_size};
  return &x->file[x->nfile++];
}

const uint8_t *onnx_external_data(OnnxExternal *x, const Onnx__TensorProto *t, size_t nbytes, char *err,
                                  size_t errlen) {
  const char *loc = NULL, *off_s = NULL, *len_s = NULL;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = t->external_data[i];
    if (!e || !e->key) continue;
    if (strcmp(e->key, "location") == 0) loc = e->value;
    if (strcmp(e->key, "offset") == 0) off_s = e->value;
    if (strcmp(e->key, "length") == 0) len_s = e->value;
  }
  if (!loc || !*loc) {
    snprintf(err, errlen, "keeps its values outside the model, but names no file (no external_data 'location')");
    return NULL;
  }
  if (!inside(loc)) {
    snprintf(err, errlen, "keeps its values in '%s', outside the model's folder (an absolute path or '..')", loc);
    return NULL;
  }
  uint64_t off = 0, len = nbytes;
  if ((off_s && parse_size(off_s, &off)) || (len_s && parse_size(len_s, &len))) {
    snprintf(err, errlen, "has external data at offset '%s', length '%s': not numbers", off_s ? off_s : "0",
             len_s ? len_s : "-");
    return NULL;
  }
  if (len != nbytes) {
    snprintf(err, errlen, "has %" PRIu64 " bytes of external data in '%s'; its shape needs %zu", len, loc, nbytes);
    return NULL;
  }
  OnnxExternalFile *f = open_file(x, loc, err, errlen);
  if (!f) return NULL;
  if (off > f->size || nbytes > f->size - off) {
    snprintf(err, errlen,
             "keeps its values at bytes %" PRIu64 "..%" PRIu64 " of '%s', which holds %" PRIu64 " bytes (truncated?)",
             off, off + nbytes, loc, f->size);
    return NULL;
  }
  if (x->nbytes == x->capbytes) {
    int cap = x->capbytes ? 2 * x->capbytes : 64;
    uint8_t **b = realloc(x->bytes, sizeof *b * (size_t)cap);
    if (!b) {
      snprintf(err, errlen, "out of host memory");
      return NULL;
    }
    x->bytes = b, x->capbytes = cap;
  }
  uint8_t *buf = malloc(nbytes ? nbytes : 1);
  if (!buf) {
    snprintf(err, errlen, "out of host memory (%zu bytes of external data)", nbytes);
    return NULL;
  }
  size_t got = 0;
  while (got < nbytes) {
    ssize_t r = pread(f->fd, buf + got, nbytes - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      snprintf(err, errlen, "keeps its values at bytes %" PRIu64 "..%" PRIu64 " of '%s', which cannot be read: %s", off,
               off + nbytes, loc, r < 0 ? strerror(errno) : "the file ends first");
      free(buf);
      return NULL;
    }
    got += (size_t)r;
  }
  x->bytes[x->nbytes++] = buf;
  return buf;
}

void onnx_external_close(OnnxExternal *x) {
  for (int i = 0; i < x->nfile; i++) {
    close(x->file[i].fd);
    free(x->file[i].location);
  }
  for (int i = 0; i < x->nbytes; i++) free(x->bytes[i]);
  free(x->file);
  free(x->bytes);
  x->file = NULL, x->nfile = x->cap = 0;
  x->bytes = NULL, x->nbytes = x->capbytes = 0;
}

#else
typedef int onnx_external_unused; /* built only with the ONNX front end */
#endif
