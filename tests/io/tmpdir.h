/* tmpdir.h - scratch directories and small file helpers for the tensor
 * I/O tests.  Each test makes one directory under $TMPDIR (or /tmp),
 * writes its files there, and removes it, contents included, at the end. */
#ifndef NETC_TESTS_TMPDIR_H
#define NETC_TESTS_TMPDIR_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Makes a fresh directory named after the test into buf; 0 on failure. */
static inline int tmpdir_make(char *buf, size_t cap, const char *test) {
  const char *base = getenv("TMPDIR");
  snprintf(buf, cap, "%s/netc-%s-XXXXXX", base && *base ? base : "/tmp", test);
  return mkdtemp(buf) != NULL;
}

/* Removes name (relative to the directory parent) and, when it is a
 * directory, everything under it; symlinks are removed, not followed. */
static inline void tmpdir_remove_at(int parent, const char *name) {
  if (unlinkat(parent, name, 0) == 0) return;
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (fd >= 0 && !d) close(fd);
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) tmpdir_remove_at(dirfd(d), e->d_name);
  if (d) closedir(d);
  unlinkat(parent, name, AT_REMOVEDIR);
}

static inline void tmpdir_remove(const char *dir) {
  chmod(dir, 0700);
  tmpdir_remove_at(AT_FDCWD, dir);
}

/* Number of entries in dir other than . and .. (-1 when unreadable). */
static inline int tmpdir_count(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

static inline int file_write(const char *path, const void *bytes, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  int ok = fwrite(bytes, 1, len, f) == len;
  return fclose(f) == 0 && ok;
}

/* Reads a whole file into a malloc'ed buffer; NULL on failure. */
static inline unsigned char *file_read(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  unsigned char *buf = malloc(cap);
  for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += r;
    if (n == cap) {
      unsigned char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  *len = n;
  return buf;
}

#endif
