/* rt_model.c - opens a model.so written by `netc -o` (rt_model.h gives the
 * contract, compiler/codegen/cg_model.h the blob's format).
 *
 * The library is never dlopened: nothing in it runs (no constructor, no
 * relocation), whatever its bytes.  The file is read whole into memory
 * (read(), so a file that shrinks is a short read, not SIGBUS), and must
 * end in netc's seal (cg_model.h) whose SHA-256 matches every byte before
 * it: a flipped, truncated or appended-to file is refused before any of it
 * is parsed.  Only then is the blob, at the offset the seal records, read
 * as data.  Even so nothing in the blob is trusted (a seal can be forged):
 * it must start with the magic and this runtime's format version and keep
 * every section inside it; text sections must end in their NUL and cubins
 * start with an ELF header.  The two IR texts are read with ir_read and
 * checked with ir_verify into the caller's arena, so the graphs outlive the
 * model; the program pointers point into the file's bytes, which live until
 * rt_model_close.  A file without a seal is an older model (refused with
 * its format version and "recompile it") or a damaged one.  A path ending
 * in ".net" (or ".onnx", with the default train section: docs/onnx.md) is
 * compiled in-process with netc's defaults instead (no programs: the
 * executor generates them). */
#define _GNU_SOURCE /* memmem: an unsealed file's format version */
#include "rt_model.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cg_model.h"
#include "compile.h"
#include "rt_err.h"
#include "rt_file.h"

_Static_assert(CG_MAX_PART == CG_MAX_PART, "a model holds as many programs as the executor makes");

/* Bigger than any model netc writes (16 cubins of 16 MiB a graph) */
#define MODEL_MAX_BYTES (1ull << 30)

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static uint32_t get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The first error line a Diag wrote into a memstream, without its newline. */
static void first_line(char *dst, size_t len, const char *text) {
  size_t n = text ? strcspn(text, "\n") : 0;
  if (n >= len) n = len - 1;
  if (n) memcpy(dst, text, n);
  dst[n] = 0;
}

/* Compiles path twice (training, inference) into *a with Diag output
 * captured; g[0], g[1] or -1 with the first message. */
static int compile_net(const char *path, Arena *a, IrGraph *g[2], char *err, size_t errlen) {
  char *log = NULL;
  size_t loglen = 0;
  FILE *f = open_memstream(&log, &loglen);
  if (!f) return rt_errf(err, errlen, "%s: out of memory", path);
  Diag d;
  diag_init(&d, f);
  for (int i = 0; i < 2; i++) {
    PassCtx cx = {.d = &d, .out = f, .precision = IR_DT_F16, .inference = i};
    if (!(g[i] = compile_file(a, &d, path, &cx))) break;
  }
  fclose(f);
  char line[512];
  first_line(line, sizeof line, log);
  free(log);
  if (!g[0] || !g[1]) return rt_errf(err, errlen, "%s", line[0] ? line : "compile failed");
  return 0;
}

/* ir_read + ir_verify of one IR text; NULL with the first message. */
static IrGraph *read_graph(const char *path, const char *what, const char *text, size_t len, Arena *a, char *err,
                           size_t errlen) {
  char *log = NULL;
  size_t loglen = 0;
  FILE *f = open_memstream(&log, &loglen);
  if (!f) {
    rt_errf(err, errlen, "%s: out of memory", path);
    return NULL;
  }
  char name[4200];
  snprintf(name, sizeof name, "%s(%s)", path, what);
  Diag d;
  diag_init(&d, f);
  IrGraph *g = ir_read(a, &d, name, text, len);
  if (g && ir_verify(g, &d, "loading the model")) g = NULL;
  fclose(f);
  if (!g) {
    char line[512];
    first_line(line, sizeof line, log);
    rt_errf(err, errlen, "%s: the %s graph does not read back: %s", path, what, line[0] ? line : "unknown error");
  }
  free(log);
  return g;
}

/* Checks the blob's header and sections; fills sec_off/sec_len. */
static int check_blob(const char *path, const unsigned char *b, uint64_t n, uint64_t sec_off[], uint64_t sec_len[],
                      char *err, size_t errlen) {
  if (n < 16 || memcmp(b, CG_MODEL_MAGIC, 8) != 0)
    return rt_errf(err, errlen, "%s: not a netc model (the %s blob does not start with %s)", path, CG_MODEL_SYMBOL,
                   CG_MODEL_MAGIC);
  uint32_t version = get_u32(b + 8), header = get_u32(b + 12);
  if (version != CG_MODEL_VERSION)
    return rt_errf(err, errlen,
                   "%s: model format version %u, but this runtime reads version %d (the model was written by %s "
                   "netc): recompile it with this netc (netc FILE.net -o %s)",
                   path, version, CG_MODEL_VERSION, version < CG_MODEL_VERSION ? "an older" : "a newer", path);
  if (header != CG_MODEL_HEADER || n < CG_MODEL_HEADER)
    return rt_errf(err, errlen, "%s: corrupt model (header of %u bytes in a %llu-byte blob)", path, header,
                   (unsigned long long)n);
  CgModelTarget target;
  if (memchr(b + 24, 0, CG_MODEL_ARCH_LEN) == NULL)
    return rt_errf(err, errlen, "%s: corrupt model (the arch field is not a string)", path);
  if (b[24] && cg_model_target((const char *)b + 24, &target))
    return rt_errf(err, errlen, "%s: corrupt model (arch '%s' is none netc writes: %s)", path, (const char *)b + 24,
                   cg_model_arches());
  for (int i = 0; i < CG_MODEL_NSECTION; i++) {
    uint64_t off = get_u64(b + 40 + 16 * i), len = get_u64(b + 48 + 16 * i);
    int text = cg_model_section_is_text(i);
    sec_off[i] = off, sec_len[i] = len;
    if (!len && off)
      return rt_errf(err, errlen, "%s: corrupt model (section %d is absent but has offset %llu)", path, i,
                     (unsigned long long)off);
    if (!len) continue;
    if (off < CG_MODEL_HEADER || off > n || len > n - off || (text && len == n - off) || (text && b[off + len] != 0) ||
        (!text && (len < 16 || memcmp(b + off, "\177ELF", 4) != 0)))
      return rt_errf(err, errlen, "%s: corrupt model (section %d: %llu bytes at %llu of a %llu-byte blob)", path, i,
                     (unsigned long long)len, (unsigned long long)off, (unsigned long long)n);
  }
  for (int g = 0; g < 2; g++)
    for (int k = 0; k < CG_MAX_PART; k++) {
      int cu = (g ? CG_MODEL_INFER_CU : CG_MODEL_TRAIN_CU) + k;
      int bin = (g ? CG_MODEL_INFER_CUBIN : CG_MODEL_TRAIN_CUBIN) + k;
      if ((k && !sec_len[cu - 1] && sec_len[cu]) || (sec_len[bin] && !sec_len[cu]))
        return rt_errf(err, errlen, "%s: corrupt model (the %s graph's kernel program %d is %s)", path,
                       g ? "inference" : "training", k, sec_len[cu] ? "after a missing one" : "a cubin without source");
    }
  int any_cubin = 0;
  for (int i = CG_MODEL_TRAIN_CUBIN; i < CG_MODEL_OPTS; i++) any_cubin |= sec_len[i] != 0;
  if (any_cubin != (b[24] != 0))
    return rt_errf(err, errlen, "%s: corrupt model (%s)", path,
                   any_cubin ? "cubins without an arch" : "an arch but no cubin");
  if (!sec_len[CG_MODEL_TRAIN_IR] || !sec_len[CG_MODEL_INFER_IR])
    return rt_errf(err, errlen, "%s: corrupt model (no IR for the %s graph)", path,
                   sec_len[CG_MODEL_TRAIN_IR] ? "inference" : "training");
  return 0;
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

/* The whole file at path, malloc'd into *data (*n bytes), read with read():
 * no mapping, so a file that shrinks meanwhile is a short read, not SIGBUS. */
static int read_model_file(const char *path, unsigned char **data, size_t *n, char *err, size_t errlen) {
  struct stat st;
  char why[256]; /* a regular file, opened without blocking (rt_file.h) */
  int fd = rt_file_open_regular(path, &st, why, sizeof why);
  if (fd < 0) return rt_errf(err, errlen, "%s: %s", path, why);
  int rc = 0;
  if ((uint64_t)st.st_size > MODEL_MAX_BYTES)
    rc = rt_errf(err, errlen, "%s: %lld bytes, more than a model may have (%llu)", path, (long long)st.st_size,
                 (unsigned long long)MODEL_MAX_BYTES);
  /* 64-aligned, as the blob's sections are in the file: cubins are handed to the driver as they lie */
  else if (!(*data = aligned_alloc(64, ((size_t)st.st_size + 64) / 64 * 64)))
    rc = rt_errf(err, errlen, "%s: out of memory reading %lld bytes", path, (long long)st.st_size);
  size_t got = 0;
  while (!rc && got <= (size_t)st.st_size) {
    ssize_t r = read(fd, *data + got, (size_t)st.st_size + 1 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) rc = rt_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    if (r <= 0) break;
    got += (size_t)r;
  }
  if (!rc && got != (size_t)st.st_size)
    rc = rt_errf(err, errlen, "%s: changed while being read (%zu of %lld bytes)", path, got, (long long)st.st_size);
  close(fd);
  *n = got;
  return rc;
}

/* A file without a valid seal: an older model (say which version) or a damaged one. */
static int unsealed(const char *path, const unsigned char *f, size_t n, char *err, size_t errlen) {
  const unsigned char *b = memmem(f, n, CG_MODEL_MAGIC, 8);
  if (b && (size_t)(b - f) + 16 <= n && get_u32(b + 8) != CG_MODEL_VERSION) {
    uint32_t version = get_u32(b + 8);
    return rt_errf(err, errlen,
                   "%s: model format version %u, but this runtime reads version %d (the model was written by %s "
                   "netc): recompile it with this netc (netc FILE.net -o %s)",
                   path, version, CG_MODEL_VERSION, version < CG_MODEL_VERSION ? "an older" : "a newer", path);
  }
  return rt_errf(err, errlen,
                 "%s: not a netc model, or a damaged one (no netc seal at its end: truncated, appended to, or not "
                 "written by netc FILE.net -o %s)",
                 path, path);
}

/* The file's bytes are exactly what netc sealed; *blob and *size: the blob in them. */
static int check_seal(const char *path, const unsigned char *f, size_t n, const unsigned char **blob, uint64_t *size,
                      char *err, size_t errlen) {
  if (n < SELFMAG || memcmp(f, ELFMAG, SELFMAG) != 0)
    return rt_errf(err, errlen,
                   "%s: not a netc model (not an ELF shared library; models are written by netc "
                   "FILE.net -o %s)",
                   path, path);
  if (n < CG_MODEL_SEAL + sizeof(Elf64_Ehdr) || memcmp(f + n - CG_MODEL_SEAL, CG_MODEL_SEAL_MAGIC, 8) != 0)
    return unsealed(path, f, n, err, errlen);
  const unsigned char *seal = f + n - CG_MODEL_SEAL;
  unsigned char digest[CG_MODEL_DIGEST];
  cg_model_digest(f, n - CG_MODEL_DIGEST, digest);
  if (memcmp(digest, seal + CG_MODEL_SEAL - CG_MODEL_DIGEST, CG_MODEL_DIGEST) != 0)
    return rt_errf(err, errlen,
                   "%s: damaged model (its SHA-256 differs from the digest netc sealed it with: the file changed "
                   "after netc wrote it): recompile it with netc FILE.net -o %s",
                   path, path);
  uint64_t off = get_u64(seal + 8), len = get_u64(seal + 16), body = n - CG_MODEL_SEAL;
  if (off > body || len > body - off)
    return rt_errf(err, errlen, "%s: corrupt model (the seal puts a %llu-byte blob at %llu of %llu bytes)", path,
                   (unsigned long long)len, (unsigned long long)off, (unsigned long long)body);
  *blob = f + off, *size = len;
  return 0;
}

static int open_so(const char *path, Arena *a, RtModel *m, char *err, size_t errlen) {
  unsigned char *f = NULL;
  size_t n = 0;
  int rc = read_model_file(path, &f, &n, err, errlen);
  m->file = f; /* the programs point into it; rt_model_close frees it */
  const unsigned char *b = NULL;
  uint64_t size = 0;
  if (rc || check_seal(path, f, n, &b, &size, err, errlen)) return -1;
  uint64_t off[CG_MODEL_NSECTION], len[CG_MODEL_NSECTION];
  if (check_blob(path, b, size, off, len, err, errlen)) return -1;
  m->batch = (int64_t)get_u64(b + 16);
  snprintf(m->arch, sizeof m->arch, "%s", (const char *)b + 24);
  snprintf(m->code_opts, sizeof m->code_opts, "%s", len[CG_MODEL_OPTS] ? (const char *)b + off[CG_MODEL_OPTS] : "");
  snprintf(m->build, sizeof m->build, "%s", len[CG_MODEL_BUILD] ? (const char *)b + off[CG_MODEL_BUILD] : "");
  if (!(m->train = read_graph(path, "training", (const char *)b + off[CG_MODEL_TRAIN_IR], len[CG_MODEL_TRAIN_IR], a,
                              err, errlen)) ||
      !(m->infer = read_graph(path, "inference", (const char *)b + off[CG_MODEL_INFER_IR], len[CG_MODEL_INFER_IR], a,
                              err, errlen)))
    return -1;
  if (m->train->plan_batch != m->batch || m->infer->plan_batch != m->batch)
    return rt_errf(err, errlen, "%s: corrupt model (plans for batch %lld and %lld, header says %lld)", path,
                   (long long)m->train->plan_batch, (long long)m->infer->plan_batch, (long long)m->batch);
  CgProgram *prog[2] = {&m->train_prog, &m->infer_prog};
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < CG_MAX_PART; k++) {
      int cu = (i ? CG_MODEL_INFER_CU : CG_MODEL_TRAIN_CU) + k;
      int bin = (i ? CG_MODEL_INFER_CUBIN : CG_MODEL_TRAIN_CUBIN) + k;
      if (!len[cu]) break;
      prog[i]->npart = k + 1;
      prog[i]->source[k] = (const char *)b + off[cu];
      prog[i]->cubin[k] = len[bin] ? b + off[bin] : NULL;
      prog[i]->cubin_size[k] = len[bin];
      prog[i]->opts = m->code_opts;
    }
  return 0;
}

int rt_model_open(const char *path, Arena *a, RtModel *out, char *err, size_t errlen) {
  if (!out) return rt_errf(err, errlen, "rt_model_open: out is NULL");
  memset(out, 0, sizeof *out);
  if (!path || !a) return rt_errf(err, errlen, "rt_model_open: no path or arena");
  int rc;
  if (ends_with(path, ".net") || compile_is_onnx(path)) {
    IrGraph *g[2] = {NULL, NULL};
    rc = compile_net(path, a, g, err, errlen);
    if (!rc && g[0]->plan_batch != g[1]->plan_batch)
      rc = rt_errf(err, errlen, "%s: training planned for batch %lld, inference for %lld", path,
                   (long long)g[0]->plan_batch, (long long)g[1]->plan_batch);
    if (!rc) out->train = g[0], out->infer = g[1], out->batch = g[0]->plan_batch;
  } else {
    rc = open_so(path, a, out, err, errlen);
  }
  if (rc) {
    rt_model_close(out);
    memset(out, 0, sizeof *out);
  }
  return rc;
}

void rt_model_close(RtModel *m) {
  if (!m) return;
  free(m->file);
  m->file = NULL;
  m->train_prog = (CgProgram){0};
  m->infer_prog = (CgProgram){0};
}
