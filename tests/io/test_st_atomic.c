/* test_st_atomic.c - the safetensors writer replaces its target whole or
 * not at all, and refuses invalid tensors when they are added.
 *
 * Failures are forced at three stages: the temporary file cannot be made
 * (missing directory; read-only directory, written as nobody when the
 * test runs as root, since root ignores permission bits), the data cannot be written (RLIMIT_FSIZE makes
 * write() fail with EFBIG halfway through), and the target is refused
 * before anything is written (a directory or a FIFO: only a regular file is
 * replaced).  Each time the call reports an I/O error naming
 * the target, the old target is byte-for-byte what it was, and no
 * temporary file is left in the directory. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "check.h"
#include "rt_safetensors.h"
#include "tmpdir.h"

/* A writer holding one F32 tensor of n values i * scale. */
static RtStWriter *writer_with(size_t n, float scale) {
  RtStWriter *w = rt_st_writer_new();
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; v && i < n; i++) v[i] = (float)i * scale;
  int64_t shape[1] = {(int64_t)n};
  RtStStatus st = rt_st_writer_add(w, "layer1.0.conv1.weight", RT_ST_F32, 1, shape, v, n * sizeof *v, RT_ST_COPY);
  CHECK(st == RT_ST_OK, "add: %s", rt_st_writer_error(w));
  free(v);
  return w;
}

/* The target still holds `old` and the directory holds `entries` files. */
static void check_unchanged(const char *what, const char *dir, const char *target, const unsigned char *old,
                            size_t oldlen, int entries) {
  size_t len = 0;
  unsigned char *now = file_read(target, &len);
  CHECK(now && len == oldlen && memcmp(now, old, len) == 0, "%s: target changed", what);
  free(now);
  CHECK(tmpdir_count(dir) == entries, "%s: %d entries in %s, want %d (temporary left?)", what, tmpdir_count(dir), dir,
        entries);
}

static void check_failed(const char *what, RtStWriter *w, RtStStatus st, const char *target, const char *phrase) {
  const char *msg = rt_st_writer_error(w);
  CHECK(st == RT_ST_ERR_IO, "%s: status %d (%s)", what, (int)st, msg);
  CHECK(strncmp(msg, target, strlen(target)) == 0, "%s: message lacks the path: %s", what, msg);
  CHECK(strstr(msg, phrase) != NULL, "%s: got '%s', want ...%s...", what, msg, phrase);
}

static void test_write_failures(const char *dir) {
  char target[600];
  snprintf(target, sizeof target, "%s/ckpt.safetensors", dir);
  RtStWriter *w = writer_with(16, 1.0f);
  CHECK(rt_st_writer_write(w, target) == RT_ST_OK, "first write: %s", rt_st_writer_error(w));
  rt_st_writer_free(w);
  size_t oldlen = 0;
  unsigned char *old = file_read(target, &oldlen);
  CHECK(old != NULL, "read back");

  /* The write itself fails halfway: a 1 MB tensor under a 64 KB file size
   * limit.  SIGXFSZ is ignored so write() returns EFBIG instead. */
  w = writer_with(1 << 18, 0.5f);
  struct rlimit saved, small;
  getrlimit(RLIMIT_FSIZE, &saved);
  small = saved;
  small.rlim_cur = 64 * 1024;
  void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
  int limited = setrlimit(RLIMIT_FSIZE, &small) == 0;
  RtStStatus st = rt_st_writer_write(w, target);
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, oldsig);
  CHECK(limited, "setrlimit failed: %s", strerror(errno));
  check_failed("file too large", w, st, target, "write failed: File too large");
  check_unchanged("file too large", dir, target, old, oldlen, 1);
  /* With the limit lifted the same writer succeeds, and the target is new. */
  CHECK(rt_st_writer_write(w, target) == RT_ST_OK, "retry: %s", rt_st_writer_error(w));
  rt_st_writer_free(w);
  char err[RT_ST_ERRMAX];
  RtStFile *f = NULL;
  CHECK(rt_st_open(target, &f, err, sizeof err) == RT_ST_OK, "reopen: %s", err);
  const RtStTensor *t = f ? rt_st_find(f, "layer1.0.conv1.weight") : NULL;
  CHECK(t && t->numel == 1 << 18 && ((const float *)t->data)[1000] == 500.0f, "new content");
  rt_st_close(f);
  free(old);
  old = file_read(target, &oldlen);
  struct stat sb;
  CHECK(stat(target, &sb) == 0 && (sb.st_mode & 0777) == 0644, "mode %o", sb.st_mode & 0777);

  /* The rename fails: the target is a non-empty directory. */
  char sub[700], inner[800];
  snprintf(sub, sizeof sub, "%s/subdir", dir);
  snprintf(inner, sizeof inner, "%s/keep", sub);
  CHECK(mkdir(sub, 0755) == 0 && file_write(inner, "x", 1), "mkdir %s", sub);
  w = writer_with(4, 2.0f);
  st = rt_st_writer_write(w, sub);
  check_failed("target is a directory", w, st, sub, "not a regular file (a directory)");
  CHECK(tmpdir_count(sub) == 1, "directory target was touched");
  check_unchanged("target is a directory", dir, target, old, oldlen, 2);

  /* A FIFO is not replaced either; a symlink is followed, its target replaced and the link kept. */
  char fifo[700], link[700], dest[700];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  CHECK(mkfifo(fifo, 0644) == 0, "mkfifo %s", fifo);
  st = rt_st_writer_write(w, fifo);
  check_failed("target is a FIFO", w, st, fifo, "not a regular file (a FIFO)");
  struct stat fs;
  CHECK(lstat(fifo, &fs) == 0 && S_ISFIFO(fs.st_mode), "the FIFO was replaced");
  unlink(fifo);
  snprintf(link, sizeof link, "%s/link", dir);
  snprintf(dest, sizeof dest, "%s/dest.safetensors", dir);
  CHECK(symlink("dest.safetensors", link) == 0, "symlink %s", link);
  CHECK(rt_st_writer_write(w, link) == RT_ST_OK, "through a dangling symlink: %s", rt_st_writer_error(w));
  CHECK(lstat(link, &fs) == 0 && S_ISLNK(fs.st_mode), "the symlink was replaced");
  CHECK(stat(dest, &fs) == 0 && S_ISREG(fs.st_mode) && fs.st_size > 0, "the target was not written");
  CHECK(rt_st_writer_write(w, link) == RT_ST_OK, "through a symlink: %s", rt_st_writer_error(w));
  CHECK(lstat(link, &fs) == 0 && S_ISLNK(fs.st_mode), "the symlink was replaced");
  unlink(link);
  unlink(dest);

  /* The temporary cannot be made: no such directory. */
  char nodir[700];
  snprintf(nodir, sizeof nodir, "%s/missing/x.safetensors", dir);
  st = rt_st_writer_write(w, nodir);
  check_failed("missing directory", w, st, nodir, "cannot create a temporary file");

  /* Read-only directory.  Root ignores permission bits, so as root the
   * write is made by a child that has become nobody. */
  CHECK(chmod(dir, 0555) == 0, "chmod");
  if (geteuid() != 0) {
    st = rt_st_writer_write(w, target);
    check_failed("read-only directory", w, st, target, "Permission denied");
  } else {
    pid_t pid = fork();
    if (pid == 0) {
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
      st = rt_st_writer_write(w, target);
      _exit(st == RT_ST_ERR_IO && strstr(rt_st_writer_error(w), "Permission denied") ? 0 : 1);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "read-only directory as nobody: %d", status);
  }
  chmod(dir, 0700);
  check_unchanged("read-only directory", dir, target, old, oldlen, 2);
  rt_st_writer_free(w);
  free(old);
}

static void check_refused(RtStWriter *w, RtStStatus st, const char *phrase) {
  CHECK(st == RT_ST_ERR_ARG, "status %d for ...%s...", (int)st, phrase);
  CHECK(strstr(rt_st_writer_error(w), phrase) != NULL, "got '%s', want ...%s...", rt_st_writer_error(w), phrase);
}

static void test_add_refusals(void) {
  RtStWriter *w = rt_st_writer_new();
  float v[6] = {0};
  int64_t s23[2] = {2, 3}, neg[1] = {-2}, huge[3] = {1LL << 40, 1LL << 40, 1LL << 40};
  CHECK(rt_st_writer_add(w, "a", RT_ST_F32, 2, s23, v, sizeof v, RT_ST_BORROW) == RT_ST_OK, "a");
  check_refused(w, rt_st_writer_add(w, "a", RT_ST_F32, 2, s23, v, sizeof v, RT_ST_COPY), "duplicate tensor name 'a'");
  check_refused(w, rt_st_writer_add(w, "b", RT_ST_F32, 2, s23, v, 20, RT_ST_COPY),
                "tensor 'b': 20 bytes given but its shape and dtype F32 need 24");
  check_refused(w, rt_st_writer_add(w, "c", RT_ST_F16, 1, neg, v, 4, RT_ST_COPY), "tensor 'c': dim 0 is -2");
  check_refused(w, rt_st_writer_add(w, "d", RT_ST_U8, 3, huge, v, 4, RT_ST_COPY), "need more than");
  check_refused(w, rt_st_writer_add(w, "", RT_ST_U8, 0, NULL, v, 1, RT_ST_COPY), "invalid tensor name ''");
  check_refused(w, rt_st_writer_add(w, "__metadata__", RT_ST_U8, 0, NULL, v, 1, RT_ST_COPY),
                "invalid tensor name '__metadata__'");
  check_refused(w, rt_st_writer_add(w, "e", RT_ST_DTYPE_COUNT, 0, NULL, v, 1, RT_ST_COPY), "invalid dtype");
  check_refused(w, rt_st_writer_add(w, "f", RT_ST_U8, 0, NULL, NULL, 1, RT_ST_COPY), "no data");
  check_refused(w, rt_st_writer_set_meta(w, "k", NULL), "must not be NULL");
  CHECK(rt_st_writer_add(w, "g", RT_ST_U8, 0, NULL, v, 1, RT_ST_COPY) == RT_ST_OK, "g");
  CHECK(rt_st_writer_error(w)[0] == '\0', "error kept after success");
  rt_st_writer_free(w);
  rt_st_writer_free(NULL);
  rt_st_close(NULL);
}

static void test_dtype_names(void) {
  for (int i = 0; i < RT_ST_DTYPE_COUNT; i++) {
    RtStDtype back;
    CHECK(rt_st_dtype_parse(rt_st_dtype_name((RtStDtype)i), &back) == RT_ST_OK && (int)back == i, "dtype %d", i);
    size_t sz = rt_st_dtype_size((RtStDtype)i);
    CHECK(sz == 1 || sz == 2 || sz == 4 || sz == 8, "size of %s", rt_st_dtype_name((RtStDtype)i));
  }
  RtStDtype dt;
  CHECK(rt_st_dtype_parse("F4", &dt) == RT_ST_ERR_ARG, "F4 has no whole-byte size");
  CHECK(rt_st_dtype_size(RT_ST_BF16) == 2 && rt_st_dtype_size(RT_ST_I64) == 8, "sizes");
}

int main(void) {
  char dir[256];
  if (!tmpdir_make(dir, sizeof dir, "st-atomic")) return check_skip("cannot make a temporary directory");
  umask(022);
  test_write_failures(dir);
  test_add_refusals();
  test_dtype_names();
  tmpdir_remove(dir);
  return check_report();
}
