/* compile.c - read, parse, lower, run the passes (see compile.h). */
#include "compile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ast.h"
#include "lower.h"
#include "onnx_import.h"

#define MAX_SOURCE_BYTES ((size_t)256 << 20)
#define MAX_ONNX_BYTES   ((size_t)2 << 30) /* protobuf's limit on one message: the weights are inside */

char *compile_read_file(const char *path, size_t *len, Diag *d) {
  SrcLoc none = {0};
  struct stat st;
  *len = 0;
  /* only a regular file, opened without blocking (a FIFO with no writer
   * returns at once), its kind taken from the descriptor; the runtime's
   * rt_file_open_regular (runtime/base/rt_file.c) does the same for what
   * the runtime reads */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0 || fstat(fd, &st)) {
    diag_error(d, none, "cannot open '%s': %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    diag_error(d, none, "'%s': not a regular file (%s)", path,
               S_ISDIR(st.st_mode)    ? "a directory"
               : S_ISFIFO(st.st_mode) ? "a FIFO"
               : S_ISSOCK(st.st_mode) ? "a socket"
               : S_ISCHR(st.st_mode)  ? "a character device"
               : S_ISBLK(st.st_mode)  ? "a block device"
                                      : "not a file");
    close(fd);
    return NULL;
  }
  int fl = fcntl(fd, F_GETFL);
  FILE *f = fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    diag_error(d, none, "cannot open '%s': %s", path, strerror(errno));
    close(fd);
    return NULL;
  }
  size_t len_path = strlen(path);
  size_t most = len_path > 5 && strcmp(path + len_path - 5, ".onnx") == 0 ? MAX_ONNX_BYTES : MAX_SOURCE_BYTES;
  size_t cap = 1 << 16, n = 0;
  /* the size the file has now as the first guess (it may still grow) */
  if (st.st_size > 0 && (uint64_t)st.st_size < most) cap = (size_t)st.st_size + 1;
  char *buf = malloc(cap + 1);
  while (buf) {
    if (n == cap) {
      if (cap >= most) {
        diag_error(d, none, "'%s' is larger than %zu MB", path, most >> 20);
        free(buf);
        buf = NULL;
        break;
      }
      cap = cap * 2 < most ? cap * 2 : most;
      char *nb = realloc(buf, cap + 1);
      if (!nb) free(buf);
      buf = nb;
      if (!buf) break;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) {
        diag_error(d, none, "cannot read '%s': %s", path, strerror(errno));
        free(buf);
        buf = NULL;
      }
      break;
    }
  }
  fclose(f);
  if (!buf) {
    if (!d->nerrors) diag_error(d, none, "out of memory reading '%s'", path);
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

IrGraph *compile_source(Arena *a, Diag *d, const char *path, const char *src, size_t len, PassCtx *cx) {
  int before = d->nerrors;
  AstFile *file = ast_parse(a, d, path, src, len);
  IrGraph *g = file && d->nerrors == before ? lower_file(a, d, file) : NULL;
  if (g && cx && pipeline_run(&g, cx)) return NULL;
  return d->nerrors == before ? g : NULL;
}

int compile_is_onnx(const char *path) {
  size_t n = strlen(path);
  return n >= 5 && strcmp(path + n - 5, ".onnx") == 0;
}

const char COMPILE_DEFAULT_TRAIN[] = "train {\n"
                                     "  batch     = 64\n"
                                     "  optimizer = sgd(lr=0.1, momentum=0.9, weight_decay=0.0001)\n"
                                     "}\n";

IrGraph *compile_onnx(Arena *a, Diag *d, const char *path, const void *bytes, size_t len, const char *train_file,
                      const char *weights_out, PassCtx *cx) {
  int before = d->nerrors;
  SrcLoc none = {0};
  if (!onnx_import_available()) {
    onnx_import(a, d, path, bytes, len, NULL, NULL); /* says why */
    return NULL;
  }
  size_t tlen = sizeof COMPILE_DEFAULT_TRAIN - 1;
  char *tsrc = train_file ? compile_read_file(train_file, &tlen, d) : NULL;
  if (train_file && !tsrc) return NULL;
  const char *tpath = train_file ? train_file : "<default train section>";
  AstFile *tf = ast_parse(a, d, tpath, tsrc ? tsrc : COMPILE_DEFAULT_TRAIN, tlen);
  IrGraph *g = NULL;
  if (tf && d->nerrors == before) {
    if (tf->network || tf->blocks)
      diag_error(d, none, "'%s' holds a network or blocks; a --train file holds only a train section", tpath);
    else if (!tf->train)
      diag_error(d, none, "'%s' has no train section (train { batch = ... optimizer = ... })", tpath);
    else
      g = onnx_import(a, d, path, bytes, len, tf->train, weights_out);
  }
  diag_set_source(d, NULL, NULL, 0);
  free(tsrc);
  if (g && cx && pipeline_run(&g, cx)) return NULL;
  return d->nerrors == before ? g : NULL;
}

IrGraph *compile_file(Arena *a, Diag *d, const char *path, PassCtx *cx) {
  size_t len;
  char *src = compile_read_file(path, &len, d);
  if (!src) return NULL;
  IrGraph *g = compile_is_onnx(path) ? compile_onnx(a, d, path, src, len, cx ? cx->train_file : NULL, NULL, cx)
                                     : compile_source(a, d, path, src, len, cx);
  diag_set_source(d, NULL, NULL, 0);
  free(src);
  return g;
}
