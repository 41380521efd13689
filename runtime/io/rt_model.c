/* rt_model.c - opens a model.so written by `netc -o` (rt_model.h gives the
 * contract, compiler/codegen/cg_model.h the blob's format).
 *
 * The library is loaded RTLD_NOW | RTLD_LOCAL, so two models in one process
 * never see each other's symbols.  Nothing in it is trusted: the blob must
 * lie inside the symbol the library defines (its ELF size, from dladdr1),
 * start with the magic and this runtime's format version, and keep every
 * section inside it; text sections must end in their NUL and cubins start
 * with an ELF header.  The two IR texts are read with ir_read and checked
 * with ir_verify into the caller's arena, so the graphs outlive the
 * library; the program pointers point into the library and live until
 * rt_model_close.  Before dlopen, the file's ELF header, program headers
 * and section header table must lie inside the file: the loader maps
 * segments without that check, and touching a page past the end of a
 * truncated file is a SIGBUS, not an error.  A path ending in ".net" (or ".onnx", with the default
 * train section: docs/onnx.md) is compiled in-process with netc's defaults instead (no programs:
 * the executor generates them). */
#define _GNU_SOURCE /* dladdr1: the size of the blob's symbol */
#include "rt_model.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cg_model.h"
#include "compile.h"
#include "rt_err.h"

_Static_assert(CG_MAX_PART == CG_MAX_PART, "a model holds as many programs as the executor makes");

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
  if (memchr(b + 24, 0, CG_MODEL_ARCH_LEN) == NULL)
    return rt_errf(err, errlen, "%s: corrupt model (the arch field is not a string)", path);
  for (int i = 0; i < CG_MODEL_NSECTION; i++) {
    uint64_t off = get_u64(b + 40 + 16 * i), len = get_u64(b + 48 + 16 * i);
    int text = cg_model_section_is_text(i);
    sec_off[i] = off, sec_len[i] = len;
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
  if (!sec_len[CG_MODEL_TRAIN_IR] || !sec_len[CG_MODEL_INFER_IR])
    return rt_errf(err, errlen, "%s: corrupt model (no IR for the %s graph)", path,
                   sec_len[CG_MODEL_TRAIN_IR] ? "inference" : "training");
  return 0;
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

/* The ELF file at path is whole: headers and every loaded segment inside it. */
static int check_elf_file(const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0; /* dlopen says why */
  struct stat st;
  Elf64_Ehdr eh;
  int rc = 0;
  if (fstat(fileno(f), &st) != 0 || fread(&eh, sizeof eh, 1, f) != 1 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64) {
    fclose(f);
    return 0; /* not a 64-bit ELF: dlopen refuses it with its own message */
  }
  uint64_t size = (uint64_t)st.st_size;
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > size ||
      (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > size - eh.e_phoff ||
      (eh.e_shnum && (eh.e_shoff > size || (uint64_t)eh.e_shnum * eh.e_shentsize > size - eh.e_shoff)))
    rc = rt_errf(err, errlen, "%s: truncated or corrupt library (ELF headers past its %llu bytes)", path,
                 (unsigned long long)size);
  for (int i = 0; !rc && i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    if (fseek(f, (long)(eh.e_phoff + (uint64_t)i * sizeof ph), SEEK_SET) != 0 || fread(&ph, sizeof ph, 1, f) != 1)
      rc = rt_errf(err, errlen, "%s: cannot read its program headers", path);
    else if (ph.p_type == PT_LOAD && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset))
      rc = rt_errf(err, errlen, "%s: truncated library (a segment ends at byte %llu of %llu)", path,
                   (unsigned long long)(ph.p_offset + ph.p_filesz), (unsigned long long)size);
  }
  fclose(f);
  return rc;
}

static int open_so(const char *path, Arena *a, RtModel *m, char *err, size_t errlen) {
  char local[4200];
  /* a bare name would be searched for on the library path, not here */
  snprintf(local, sizeof local, "%s%s", strchr(path, '/') ? "" : "./", path);
  if (check_elf_file(local, err, errlen)) return -1;
  dlerror();
  m->dl = dlopen(local, RTLD_NOW | RTLD_LOCAL);
  if (!m->dl) {
    const char *why = dlerror();
    return rt_errf(err, errlen, "%s: cannot load: %s", path, why ? why : "unknown error");
  }
  const unsigned char *b = dlsym(m->dl, CG_MODEL_SYMBOL);
  const unsigned long long *size = dlsym(m->dl, CG_MODEL_SIZE_SYMBOL);
  if (!b || !size)
    return rt_errf(err, errlen, "%s: not a netc model (no %s symbol; models are written by netc FILE.net -o %s)", path,
                   !b ? CG_MODEL_SYMBOL : CG_MODEL_SIZE_SYMBOL, path);
  Dl_info info;
  const ElfW(Sym) *sym = NULL;
  if (!dladdr1(b, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || sym->st_size < *size)
    return rt_errf(err, errlen, "%s: corrupt model (%s says %llu bytes but the symbol holds %llu)", path,
                   CG_MODEL_SIZE_SYMBOL, *size, sym ? (unsigned long long)sym->st_size : 0ull);
  uint64_t off[CG_MODEL_NSECTION], len[CG_MODEL_NSECTION];
  if (check_blob(path, b, *size, off, len, err, errlen)) return -1;
  m->batch = (int64_t)get_u64(b + 16);
  snprintf(m->arch, sizeof m->arch, "%s", (const char *)b + 24);
  snprintf(m->code_opts, sizeof m->code_opts, "%s", len[CG_MODEL_OPTS] ? (const char *)b + off[CG_MODEL_OPTS] : "");
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
  if (m->dl) dlclose(m->dl);
  m->dl = NULL;
  m->train_prog = (CgProgram){0};
  m->infer_prog = (CgProgram){0};
}
