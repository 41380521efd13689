/* rt_file.c - regular-file opens and output-versus-input checks (rt_file.h). */
#include "rt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_err.h"

const char *rt_file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a file";
}

int rt_file_open_regular(const char *path, struct stat *st, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return rt_errf(err, errlen, "cannot open: %s", strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return rt_errf(err, errlen, "cannot stat: %s", strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return rt_errf(err, errlen, "not a regular file (%s)", rt_file_kind(sb.st_mode));
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
    int e = errno;
    close(fd);
    return rt_errf(err, errlen, "cannot open: %s", strerror(e));
  }
  if (st) *st = sb;
  return fd;
}

FILE *rt_file_fopen_regular(const char *path, char *err, size_t errlen) {
  int fd = rt_file_open_regular(path, NULL, err, errlen);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    int e = errno;
    close(fd);
    rt_errf(err, errlen, "cannot open: %s", strerror(e));
  }
  return f;
}

/* The directory part of path ("." for none) and where its last part starts. */
static char *dir_of(const char *path, const char **base) {
  const char *slash = strrchr(path, '/');
  *base = slash ? slash + 1 : path;
  return slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
}

int rt_file_same(const char *a, const char *b) {
  struct stat sa, sb;
  if (!a || !b) return 0;
  int ha = stat(a, &sa) == 0, hb = stat(b, &sb) == 0;
  if (ha && hb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (ha || hb) return 0;
  /* neither exists yet (two outputs): the same name in the same directory */
  const char *ba, *bb;
  char *da = dir_of(a, &ba), *db = dir_of(b, &bb);
  int same = da && db && strcmp(ba, bb) == 0 && stat(da, &sa) == 0 && stat(db, &sb) == 0 && sa.st_dev == sb.st_dev &&
             sa.st_ino == sb.st_ino;
  free(da);
  free(db);
  return same;
}

int rt_file_check_writable(const char *path, int replace, char *err, size_t errlen) {
  struct stat sb;
  char *real = NULL;
  if (stat(path, &sb) == 0) {
    if (!replace)
      return access(path, W_OK) == 0 ? 0 : rt_errf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
      return rt_errf(err, errlen, "%s: not a regular file (%s): refusing to replace it", path,
                     rt_file_kind(sb.st_mode));
    /* a symlink's target is what the atomic writer replaces: its directory is the one to write */
    real = realpath(path, NULL);
  }
  const char *base;
  char *dir = dir_of(real ? real : path, &base);
  free(real);
  if (!dir) return rt_errf(err, errlen, "%s: out of memory", path);
  int rc = 0;
  if (stat(dir, &sb) != 0)
    rc = rt_errf(err, errlen, "%s: cannot write there: directory %s: %s", path, dir, strerror(errno));
  else if (!S_ISDIR(sb.st_mode))
    rc = rt_errf(err, errlen, "%s: cannot write there: %s is not a directory", path, dir);
  else if (access(dir, W_OK | X_OK) != 0)
    rc = rt_errf(err, errlen, "%s: cannot write there: directory %s: %s", path, dir, strerror(errno));
  free(dir);
  return rc;
}
