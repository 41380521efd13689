/* compile.c - read, parse, lower, run the passes (see compile.h). */
#include "compile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ast.h"
#include "lower.h"

#define MAX_SOURCE_BYTES ((size_t)256 << 20)

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
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    if (n == cap) {
      if (cap >= MAX_SOURCE_BYTES) {
        diag_error(d, none, "'%s' is larger than %zu MB", path, MAX_SOURCE_BYTES >> 20);
        free(buf);
        buf = NULL;
        break;
      }
      char *nb = realloc(buf, (cap *= 2) + 1);
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

IrGraph *compile_file(Arena *a, Diag *d, const char *path, PassCtx *cx) {
  size_t len;
  char *src = compile_read_file(path, &len, d);
  if (!src) return NULL;
  IrGraph *g = compile_source(a, d, path, src, len, cx);
  diag_set_source(d, NULL, NULL, 0);
  free(src);
  return g;
}
