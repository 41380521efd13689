/* cg_model.c - writes model.so (cg_model.h gives the format and contract).
 *
 * The two graphs are compiled here rather than taken from the caller so
 * that both come from one set of options.  Kernel programs come from the
 * GPU executor's own code (cg_prog_emit/cg_prog_compile, which
 * compiles a graph's programs on several threads) for the target's
 * attributes, so on a device with those attributes the executor emits the
 * same texts and takes the embedded cubins.  When NVRTC cannot be
 * loaded the model is written with sources only (a warning): the executor
 * then compiles them when it starts.
 *
 * The library is made from one generated C file holding the blob as a
 * string literal (printable bytes as themselves, the rest as 3-digit octal
 * escapes: about 1.5 source bytes per blob byte, quick for cc to read),
 * compiled with $CC (else `cc`) -shared -fPIC.  Both the C file and the
 * library are written beside the output under temporary names; the library
 * is renamed into place only when cc succeeded, and the C file is always
 * removed.  Before the rename the library is sealed (cg_model_seal): the
 * blob's place in the file and a SHA-256 of the whole file are appended, so
 * the runtime can refuse any changed byte before it reads anything else.
 * Nothing here needs the CUDA toolkit: without NVRTC at run
 * time the model carries sources only. */
#define _GNU_SOURCE /* memmem: the blob in the linked library */
#include "cg_model.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile.h"

#include "cg_prog.h"

extern char **environ;

/* The SM count is that of the arch's reference data-center part (sm_90:
 * H100 SXM and H200), the resident threads per SM the arch's.  They only
 * size grids (a full wave of grid-stride kernels, reductions' partial
 * sums), which are correct for any device; a device with other numbers
 * emits other text and compiles it itself instead of taking the embedded
 * cubin. */
static const struct {
  const char *arch;
  int sm_count, threads_per_sm;
} TARGETS[] = {
    {"sm_75", 40, 1024},  {"sm_80", 108, 2048},  {"sm_86", 72, 1536},   {"sm_89", 58, 1536},
    {"sm_90", 132, 2048}, {"sm_100", 148, 2048}, {"sm_120", 170, 1536},
};
enum { NTARGET = sizeof TARGETS / sizeof TARGETS[0] };

int cg_model_target(const char *arch, CgModelTarget *t) {
  for (int i = 0; arch && i < NTARGET; i++) {
    if (strcmp(arch, TARGETS[i].arch) != 0) continue;
    int cc = atoi(arch + 3);
    memset(t, 0, sizeof *t);
    snprintf(t->arch, sizeof t->arch, "%s", arch);
    t->cc_major = cc / 10, t->cc_minor = cc % 10;
    t->sm_count = TARGETS[i].sm_count;
    t->max_threads_per_sm = TARGETS[i].threads_per_sm;
    t->max_threads_per_block = 1024;
    t->max_shared_per_block = 48 * 1024;
    return 0;
  }
  return -1;
}

const char *cg_model_arches(void) { return "sm_75, sm_80, sm_86, sm_89, sm_90, sm_100, sm_120"; }

/* One graph's contributions to the blob. */
typedef struct Part {
  char *ir;
  size_t ir_len;
  char *cu; /* every node's kernels (--emit-cuda); NULL when the graph has no generated kernel */
  size_t cu_len;
  int nprog; /* its kernel programs (cg_prog.h's parts) */
  char *prog[CG_MAX_PART];
  size_t prog_len[CG_MAX_PART];
  void *cubin[CG_MAX_PART];
  size_t cubin_size[CG_MAX_PART];
} Part;

static const SrcLoc NOLOC = {0};

static int print_ir(const IrGraph *g, Part *p, Diag *d) {
  FILE *f = open_memstream(&p->ir, &p->ir_len);
  if (!f) {
    diag_error(d, NOLOC, "out of memory printing the IR of graph %s", g->name ? g->name : "?");
    return -1;
  }
  IrPrintOpts po = {.no_loc = 0, .pass = NULL};
  ir_print(f, g, &po);
  if (fclose(f) != 0) {
    diag_error(d, NOLOC, "out of memory printing the IR of graph %s", g->name ? g->name : "?");
    return -1;
  }
  return 0;
}

/* The kernel programs of g for t, and their cubins when *nvrtc is still 1
 * (set to 0, with one warning, when NVRTC cannot be loaded).  A graph with
 * an op that has no GPU kernel gets no program, with a warning. */
static int program(const IrGraph *g, const char *what, const CgModelTarget *t, const NetcOpts *opts, int want_cubin,
                   int *nvrtc, Part *part, Diag *d) {
  CgDevice dev = {.opts = opts,
                  .sm_count = t->sm_count,
                  .max_threads_per_block = t->max_threads_per_block,
                  .max_shared_per_block = t->max_shared_per_block,
                  .cc_major = t->cc_major,
                  .cc_minor = t->cc_minor,
                  .max_threads_per_sm = t->max_threads_per_sm};
  CgProg p;
  char err[8192];
  if (cg_prog_emit(g, g->plan_batch, &dev, &p, err, sizeof err)) {
    /* the CPU executor still runs the graph; the GPU executor will refuse it with this same message */
    diag_warning(d, NOLOC, "the %s graph gets no GPU program: %s", what, err);
    return 0;
  }
  if (p.npart > CG_MAX_PART) { /* cg_prog.h makes at most CG_MAX_PART */
    diag_error(d, NOLOC, "the %s graph has %d kernel programs, more than a model holds", what, p.npart);
    cg_prog_free(&p);
    return -1;
  }
  if (want_cubin && *nvrtc && p.npart) {
    CgStatus s = cg_prog_compile(g, g->plan_batch, &dev, NULL, &p, err, sizeof err);
    if (s == CG_ENOLIB) {
      diag_warning(d, NOLOC,
                   "NVRTC cannot be loaded, so the model holds CUDA sources only (compiled when it "
                   "starts on a GPU): %s",
                   err);
      *nvrtc = 0;
    } else if (s) {
      diag_error(d, NOLOC, "compiling the kernels of graph %s for %s: %s", g->name ? g->name : "?", t->arch, err);
      cg_prog_free(&p);
      return -1;
    }
  }
  part->cu = p.source, part->cu_len = p.source_len;
  p.source = NULL;
  part->nprog = p.npart;
  for (int k = 0; k < p.npart; k++) {
    part->prog[k] = p.part[k].source, part->prog_len[k] = p.part[k].source_len;
    part->cubin[k] = p.part[k].cubin, part->cubin_size[k] = p.part[k].cubin ? p.part[k].size : 0;
    p.part[k].source = NULL, p.part[k].cubin = NULL;
  }
  cg_prog_free(&p);
  return 0;
}

static int write_file(const char *path, const char *data, size_t len, Diag *d) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    diag_error(d, NOLOC, "cannot write '%s': %s", path, strerror(errno));
    return -1;
  }
  int ok = fwrite(data, 1, len, f) == len;
  ok = fclose(f) == 0 && ok;
  if (!ok) {
    diag_error(d, NOLOC, "cannot write '%s': %s", path, strerror(errno));
    remove(path);
  }
  return ok ? 0 : -1;
}

static int emit_cuda(const char *dir, const Part parts[2], Diag *d) {
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    diag_error(d, NOLOC, "cannot create directory '%s': %s", dir, strerror(errno));
    return -1;
  }
  static const char *names[2] = {"train.cu", "infer.cu"};
  for (int i = 0; i < 2; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (write_file(path, parts[i].cu ? parts[i].cu : "", parts[i].cu ? parts[i].cu_len : 0, d)) return -1;
  }
  return 0;
}

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

/* The blob of cg_model.h (malloc'd), or NULL when out of memory. */
int cg_model_section_is_text(int i) { return i < CG_MODEL_TRAIN_CUBIN || i >= CG_MODEL_OPTS; }

static unsigned char *make_blob(const Part parts[2], int64_t batch, const char *arch, const char *opts,
                                const char *build, size_t *size) {
  const void *data[CG_MODEL_NSECTION] = {parts[0].ir, parts[1].ir};
  size_t len[CG_MODEL_NSECTION] = {parts[0].ir_len, parts[1].ir_len};
  data[CG_MODEL_OPTS] = opts, len[CG_MODEL_OPTS] = strlen(opts);
  data[CG_MODEL_BUILD] = build, len[CG_MODEL_BUILD] = strlen(build);
  int any_cubin = 0;
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < parts[i].nprog; k++) {
      int cu = (i ? CG_MODEL_INFER_CU : CG_MODEL_TRAIN_CU) + k;
      int bin = (i ? CG_MODEL_INFER_CUBIN : CG_MODEL_TRAIN_CUBIN) + k;
      data[cu] = parts[i].prog[k], len[cu] = parts[i].prog_len[k];
      data[bin] = parts[i].cubin[k], len[bin] = parts[i].cubin[k] ? parts[i].cubin_size[k] : 0;
      any_cubin |= len[bin] != 0;
    }
  size_t off[CG_MODEL_NSECTION], total = align64(CG_MODEL_HEADER);
  for (int i = 0; i < CG_MODEL_NSECTION; i++) {
    int text = cg_model_section_is_text(i);
    off[i] = len[i] ? total : 0;
    if (len[i]) total = align64(total + len[i] + (size_t)text);
  }
  unsigned char *b = calloc(1, total);
  if (!b) return NULL;
  memcpy(b, CG_MODEL_MAGIC, 8);
  put_u32(b + 8, CG_MODEL_VERSION);
  put_u32(b + 12, CG_MODEL_HEADER);
  put_u64(b + 16, (uint64_t)batch);
  snprintf((char *)b + 24, CG_MODEL_ARCH_LEN, "%s", any_cubin ? arch : "");
  for (int i = 0; i < CG_MODEL_NSECTION; i++) {
    put_u64(b + 40 + 16 * i, off[i]);
    put_u64(b + 48 + 16 * i, len[i]);
    if (len[i]) memcpy(b + off[i], data[i], len[i]);
  }
  *size = total;
  return b;
}

/* The blob as a C file defining the two exported symbols. */
static int write_c(const char *path, const char *out, const char *net, const unsigned char *b, size_t n, Diag *d) {
  FILE *f = fopen(path, "w");
  if (!f) {
    diag_error(d, NOLOC, "cannot write '%s': %s (writing its temporary '%s')", out, strerror(errno), path);
    return -1;
  }
  fprintf(f, "/* model.so of %s, written by netc %s (docs/model_so.md); do not edit. */\n", net, NETC_VERSION);
  fprintf(f, "__attribute__((visibility(\"default\"), aligned(64)))\nconst unsigned char %s[%zu] =\n\"",
          CG_MODEL_SYMBOL, n);
  size_t col = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned c = b[i];
    /* '?' is escaped too: no trigraphs whatever the compiler's mode */
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '?') {
      putc((int)c, f);
      col++;
    } else {
      fprintf(f, "\\%03o", c);
      col += 4;
    }
    if ((c == '\n' || col >= 120) && i + 1 < n) {
      fputs("\"\n\"", f);
      col = 0;
    }
  }
  fprintf(f, "\";\n__attribute__((visibility(\"default\")))\nconst unsigned long long %s = %zuull;\n",
          CG_MODEL_SIZE_SYMBOL, n);
  if (ferror(f) | (fclose(f) != 0)) {
    diag_error(d, NOLOC, "cannot write '%s': %s (writing its temporary '%s')", out, strerror(errno), path);
    return -1;
  }
  return 0;
}

/* $CC (split at blanks) -shared -fPIC -o so c.  0, or -1 after a message. */
static int run_cc(const char *c_path, const char *so_path, Diag *d) {
  const char *cc = getenv("CC");
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", cc && *cc ? cc : "cc");
  char *argv[40];
  int argc = 0;
  for (char *tok = strtok(buf, " \t"); tok && argc < 32; tok = strtok(NULL, " \t")) argv[argc++] = tok;
  if (!argc) argv[argc++] = "cc";
  const char *name = argv[0];
  static char shared[] = "-shared", fpic[] = "-fPIC", o0[] = "-O0", dash_o[] = "-o";
  argv[argc++] = shared, argv[argc++] = fpic, argv[argc++] = o0;
  argv[argc++] = dash_o, argv[argc++] = (char *)so_path, argv[argc++] = (char *)c_path;
  argv[argc] = NULL;
  pid_t pid;
  int e = posix_spawnp(&pid, name, NULL, NULL, argv, environ);
  if (e) {
    diag_error(d, NOLOC,
               "cannot run the C compiler '%s' (%s): netc -o links model.so with it; install cc or "
               "set $CC",
               name, strerror(e));
    return -1;
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) {
      diag_error(d, NOLOC, "waiting for the C compiler '%s': %s", name, strerror(errno));
      return -1;
    }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    diag_error(d, NOLOC, "the C compiler '%s' failed (%s %d) building '%s' from '%s'", name,
               WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), so_path,
               c_path);
    return -1;
  }
  return 0;
}

void cg_model_digest(const void *data, size_t n, unsigned char out[CG_MODEL_DIGEST]) {
  struct sha256_ctx c;
  sha256_init(&c);
  sha256_update(&c, n, data);
  sha256_digest(&c, CG_MODEL_DIGEST, out);
}

int cg_model_seal(const char *path, const unsigned char *blob, size_t n, char *err, size_t errlen) {
  FILE *f = fopen(path, "r+b");
  if (!f) return snprintf(err, errlen, "cannot open '%s' to seal it: %s", path, strerror(errno)), -1;
  unsigned char *buf = NULL;
  long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  int rc = -1;
  if (size > 0 && (buf = malloc((size_t)size + CG_MODEL_SEAL)) && fseek(f, 0, SEEK_SET) == 0 &&
      fread(buf, 1, (size_t)size, f) == (size_t)size) {
    const unsigned char *at = n ? memmem(buf, (size_t)size, blob, n) : NULL;
    if (!at) {
      snprintf(err, errlen, "sealing '%s': its %zu-byte blob is not in the file", path, n);
    } else {
      unsigned char *seal = buf + size;
      memset(seal, 0, CG_MODEL_SEAL);
      memcpy(seal, CG_MODEL_SEAL_MAGIC, 8);
      put_u64(seal + 8, (uint64_t)(at - buf));
      put_u64(seal + 16, n);
      cg_model_digest(buf, (size_t)size + CG_MODEL_SEAL - CG_MODEL_DIGEST, seal + CG_MODEL_SEAL - CG_MODEL_DIGEST);
      rc = fseek(f, 0, SEEK_END) == 0 && fwrite(seal, 1, CG_MODEL_SEAL, f) == CG_MODEL_SEAL ? 0 : -1;
      if (rc) snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    }
  } else {
    snprintf(err, errlen, "cannot read '%s' to seal it: %s", path,
             buf || size <= 0 ? strerror(errno) : "out of memory");
  }
  free(buf);
  if (fclose(f) != 0 && !rc) rc = -1, snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
  return rc;
}

static int write_so(const char *out, const char *net, const Part parts[2], int64_t batch, const char *arch,
                    const char *opts, const char *build, Diag *d) {
  size_t n = 0;
  unsigned char *blob = make_blob(parts, batch, arch, opts, build, &n);
  if (!blob) {
    diag_error(d, NOLOC, "out of memory writing '%s'", out);
    return -1;
  }
  char c_path[4200], so_path[4200];
  snprintf(c_path, sizeof c_path, "%s.%ld.tmp.c", out, (long)getpid());
  snprintf(so_path, sizeof so_path, "%s.%ld.tmp", out, (long)getpid());
  int rc = write_c(c_path, out, net, blob, n, d);
  if (!rc) rc = run_cc(c_path, so_path, d);
  remove(c_path);
  char err[4400];
  if (!rc && cg_model_seal(so_path, blob, n, err, sizeof err)) {
    diag_error(d, NOLOC, "%s", err);
    rc = -1;
  }
  free(blob);
  if (!rc && rename(so_path, out) != 0) {
    diag_error(d, NOLOC, "cannot write '%s': %s", out, strerror(errno));
    rc = -1;
  }
  if (rc) remove(so_path);
  return rc;
}

int cg_model_write(const char *path, const PassCtx *cx, const CgModelOpts *o) {
  Diag *d = cx->d;
  CgModelTarget t;
  const char *arch = o->arch ? o->arch : "sm_90";
  if (cg_model_target(arch, &t)) {
    diag_error(d, NOLOC, "unknown --arch '%s' (known: %s)", arch, cg_model_arches());
    return -1;
  }
  if (!o->out && !o->emit_cuda) return 0;
  Arena arena;
  arena_init(&arena);
  Part parts[2];
  memset(parts, 0, sizeof parts);
  IrGraph *g[2] = {NULL, NULL};
  int rc = 0, nvrtc = 1;
  for (int i = 0; i < 2 && !rc; i++) {
    PassCtx c = *cx;
    c.inference = i, c.print_after = NULL, c.dump_dir = NULL;
    g[i] = compile_file(&arena, d, path, &c);
    rc = !g[i] || print_ir(g[i], &parts[i], d) ||
                 program(g[i], i ? "inference" : "training", &t, o->opts, o->out != NULL, &nvrtc, &parts[i], d)
             ? -1
             : 0;
  }
  if (!rc && g[0]->plan_batch != g[1]->plan_batch) {
    diag_error(d, NOLOC, "the training plan is for batch %lld but the inference plan for %lld",
               (long long)g[0]->plan_batch, (long long)g[1]->plan_batch);
    rc = -1;
  }
  if (!rc && o->emit_cuda) rc = emit_cuda(o->emit_cuda, parts, d);
  if (!rc && o->out) {
    char key[256]; /* the switches the programs above were emitted under: o->opts, else the defaults */
    opts_code_key(cg_device_opts(&(CgDevice){.opts = o->opts}), key, sizeof key);
    char build[1024]; /* netc's version and the options both graphs were compiled with */
    snprintf(build, sizeof build, "netc %s\nsource %s\narch %s\nbatch %lld\nprecision %s\nint8 %s\ncode %s\n",
             NETC_VERSION, path, t.arch, (long long)g[0]->plan_batch,
             cx->precision_set ? ir_dtype_name(cx->precision) : "the network's",
             cx->int8_layers ? cx->int8_layers : "-", key);
    rc = write_so(o->out, path, parts, g[0]->plan_batch, t.arch, key, build, d);
  }
  for (int i = 0; i < 2; i++) {
    free(parts[i].ir);
    free(parts[i].cu);
    for (int k = 0; k < parts[i].nprog; k++) {
      free(parts[i].prog[k]);
      free(parts[i].cubin[k]);
    }
  }
  arena_free(&arena);
  return rc;
}
