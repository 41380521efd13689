/* test_model.c - model.so written by netc and read by rt_model_open.
 *
 *   test_model --write NETC FILE.net DIR [NETC-OPTION...]
 *     netc FILE.net -o DIR/model.so --emit-cuda=DIR/cu [NETC-OPTION...], then:
 *     both graphs read back and print exactly as netc's own
 *     --print-after=memplan --no-loc dump with the same options (training,
 *     and with --inference);
 *     the batch is the plans'; every kernel program of both graphs has a
 *     cubin, an ELF image for CUDA (EM_CUDA) made for sm_90 (the arch in the
 *     ELF flags; cuobjdump reads them when it is installed); and (with the
 *     GPU runtime) the executor's code emits, for an H200 from the read-back
 *     graphs, DIR/cu/{train,infer}.cu (every node's kernels, names as
 *     emitted) and the very same program texts, and so takes the embedded
 *     cubins (cg_prog_build_prebuilt) without NVRTC, but not for another
 *     arch.  No GPU is needed.
 *   test_model --open FILE                 rt_model_open(FILE): "ok ..." and 0,
 *     or "error: MESSAGE" on stderr and 1 (for check_errors.sh).
 *   test_model --seal FILE.so              seals a library made by the test (its
 *     netc_model symbol, found with dlopen: only for the test's own files).
 *   test_model --fuzz GOOD.so DIR          damages copies of GOOD.so in DIR: every
 *     byte of the ELF header and program headers (0-0xe8) flipped, 4 KiB and
 *     single bytes flipped in the middle, every byte of the seal flipped, 150
 *     random bit flips (fixed seed), truncations, appended bytes; each opened
 *     in a child process, which must refuse it with a message naming it and
 *     not die by a signal; the undamaged copy must open. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "cg_model.h"
#include "rt_model.h"

#ifdef NETC_HAVE_CUDA
#include "cg_prog.h"
#endif

enum { EM_CUDA_MACHINE = 190 };

/* stdout of a shell command, malloc'd; NULL when it fails. */
static char *run_capture(const char *cmd) {
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  size_t len = 0, cap = 1 << 16;
  char *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
    len += n;
    if (cap - len < 2) {
      char *q = realloc(buf, cap *= 2);
      if (!q) free(buf);
      buf = q;
    }
  }
  int st = pclose(p);
  if (!buf || st != 0) {
    free(buf);
    return NULL;
  }
  buf[len] = 0;
  return buf;
}

static char *print_graph(const IrGraph *g) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  if (!f) return NULL;
  IrPrintOpts o = {.no_loc = 1, .pass = "memplan"};
  ir_print(f, g, &o);
  fclose(f);
  return s;
}

__attribute__((unused)) static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

/* Where two texts first differ, for the failure message. */
static void show_diff(const char *what, const char *a, const char *b) {
  size_t i = 0, line = 1;
  while (a[i] && a[i] == b[i]) line += a[i++] == '\n';
  fprintf(stderr, "  %s: first difference at line %zu:\n    model: %.100s\n    netc:  %.100s\n", what, line, a + i,
          b + i);
}

static void check_cubin(const char *what, const CgProgram *p, int k, const char *dir) {
  CHECK(p->cubin[k] && p->cubin_size[k] > 64, "%s: program %d has a cubin (%zu bytes)", what, k, p->cubin_size[k]);
  if (!p->cubin[k] || p->cubin_size[k] <= 64) return;
  const unsigned char *e = p->cubin[k];
  CHECK(memcmp(e, "\177ELF", 4) == 0 && e[4] == 2 && e[5] == 1, "%s: the cubin is a 64-bit little-endian ELF", what);
  unsigned machine = e[18] | (unsigned)e[19] << 8;
  CHECK(machine == EM_CUDA_MACHINE, "%s: the cubin is for EM_CUDA (190), not %u", what, machine);
  unsigned flags = e[48] | (unsigned)e[49] << 8 | (unsigned)e[50] << 16 | (unsigned)e[51] << 24;
  /* the SM version sits in e_flags: bits 0-7 in older cubins, 8-15 in newer */
  CHECK((flags & 0xff) == 90 || ((flags >> 8) & 0xff) == 90, "%s: the cubin is for sm_90 (e_flags 0x%x)", what, flags);
  if (system("command -v cuobjdump >/dev/null 2>&1") != 0) return;
  char path[4200], cmd[8600];
  snprintf(path, sizeof path, "%s/%s%d.cubin", dir, what, k);
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(p->cubin[k], 1, p->cubin_size[k], f) == p->cubin_size[k], "writing %s", path);
  if (f) fclose(f);
  snprintf(cmd, sizeof cmd, "cuobjdump -sass '%s' | grep -q 'arch = sm_90'", path);
  CHECK(system(cmd) == 0, "%s: cuobjdump says the cubin is for sm_90", what);
}

#ifdef NETC_HAVE_CUDA
/* The executor's own emission for an H200 reproduces --emit-cuda's file and
 * the embedded texts, and cg_prog_build_prebuilt takes the embedded
 * cubins for sm_90 only. */
static void check_prebuilt(const char *what, const IrGraph *g, int64_t batch, const CgProgram *p, const char *cu_file) {
  CgDevice h200 = {
      .sm_count = 132, .max_threads_per_block = 1024, .max_shared_per_block = 49152, .cc_major = 9, .cc_minor = 0};
  CgProg prog;
  char err[4096];
  int ok = !cg_prog_emit(g, batch, &h200, &prog, err, sizeof err);
  CHECK(ok, "%s: emitting: %s", what, err);
  if (!ok) return;
  char *file = read_file(cu_file);
  CHECK(file && prog.source && strcmp(file, prog.source) == 0, "%s: %s is the executor's whole emission", what,
        cu_file);
  free(file);
  CHECK(prog.npart == p->npart, "%s: %d kernel programs emitted, %d embedded", what, prog.npart, p->npart);
  for (int k = 0; k < prog.npart && k < p->npart; k++) {
    CHECK(prog.part[k].source && p->source[k] && strcmp(prog.part[k].source, p->source[k]) == 0,
          "%s: the read-back graph emits the embedded text of program %d", what, k);
    if (prog.part[k].source && p->source[k] && strcmp(prog.part[k].source, p->source[k]))
      show_diff(what, p->source[k], prog.part[k].source);
  }
  printf("%s: %d launches, %d distinct kernels in %d programs\n", what, prog.nlaunch, prog.ndistinct, prog.npart);
  cg_prog_free(&prog);
  ok = !cg_prog_build_prebuilt(g, batch, &h200, NULL, p, "sm_90", &prog, err, sizeof err);
  CHECK(ok && prog.prebuilt, "%s: the prebuilt cubins are taken for sm_90 (%s)", what, ok ? "" : err);
  for (int k = 0; ok && k < prog.npart && k < p->npart; k++)
    CHECK(prog.part[k].prebuilt && prog.part[k].size == p->cubin_size[k] &&
              !memcmp(prog.part[k].cubin, p->cubin[k], p->cubin_size[k]),
          "%s: program %d's cubin is the embedded one", what, k);
  cg_prog_free(&prog);
  /* same text, another arch: compiled (from the cache netc filled) instead */
  ok = !cg_prog_build_prebuilt(g, batch, &h200, NULL, p, "sm_80", &prog, err, sizeof err);
  CHECK(ok && !prog.prebuilt && prog.npart && prog.part[0].cubin && !prog.part[0].prebuilt,
        "%s: a cubin for another arch is not taken (%s)", what, ok ? "" : err);
  cg_prog_free(&prog);
}
#endif

static int do_write(const char *netc, const char *net, const char *dir, char **opt, int nopt) {
  char so[4200], cu[4200], cmd[17000], opts[4096] = "";
  for (int i = 0; i < nopt; i++) {
    size_t n = strlen(opts);
    snprintf(opts + n, sizeof opts - n, " '%s'", opt[i]);
  }
  mkdir(dir, 0755);
  snprintf(so, sizeof so, "%s/model.so", dir);
  snprintf(cu, sizeof cu, "%s/cu", dir);
  remove(so);
  snprintf(cmd, sizeof cmd, "'%s' '%s' -o '%s' --emit-cuda='%s'%s", netc, net, so, cu, opts);
  CHECK(system(cmd) == 0, "%s", cmd);
  struct stat st;
  CHECK(stat(so, &st) == 0 && st.st_size > 0, "%s exists", so);
  Arena a;
  arena_init(&a);
  RtModel m;
  char err[4096];
  int ok = rt_model_open(so, &a, &m, err, sizeof err) == 0;
  CHECK(ok, "rt_model_open: %s", err);
  if (!ok) {
    arena_free(&a);
    return check_report();
  }
  CHECK(strcmp(m.arch, "sm_90") == 0, "arch is sm_90, not '%s'", m.arch);
  CHECK(m.file != NULL, "the file's bytes stay with the model");
  CHECK(strncmp(m.build, "netc ", 5) == 0 && strstr(m.build, "\narch sm_90\n"),
        "the build section names netc and the arch: %s", m.build);
  const IrGraph *g[2] = {m.train, m.infer};
  const CgProgram *p[2] = {&m.train_prog, &m.infer_prog};
  const char *what[2] = {"train", "infer"};
  for (int i = 0; i < 2; i++) {
    snprintf(cmd, sizeof cmd, "'%s' '%s' --print-after=memplan --no-loc%s%s", netc, net, opts, i ? " --inference" : "");
    char *want = run_capture(cmd), *got = print_graph(g[i]);
    CHECK(want && got && strcmp(want, got) == 0, "%s: the model's graph prints as `%s`", what[i], cmd);
    if (want && got && strcmp(want, got)) show_diff(what[i], got, want);
    CHECK(g[i]->plan_batch == m.batch, "%s: planned for the model's batch %lld", what[i], (long long)m.batch);
    free(want);
    free(got);
    CHECK(p[i]->npart >= 1 && p[i]->npart <= CG_MAX_PART, "%s: %d kernel programs", what[i], p[i]->npart);
    for (int k = 0; k < p[i]->npart; k++) {
      CHECK(p[i]->source[k] && strlen(p[i]->source[k]) > 100, "%s: the CUDA source of program %d is embedded", what[i],
            k);
      check_cubin(what[i], p[i], k, dir);
    }
    char path[4300];
    snprintf(path, sizeof path, "%s/%s.cu", cu, what[i]);
    struct stat cst;
    CHECK(stat(path, &cst) == 0 && cst.st_size > 100, "--emit-cuda wrote %s", path);
#ifdef NETC_HAVE_CUDA
    check_prebuilt(what[i], g[i], m.batch, p[i], path);
#endif
  }
  rt_model_close(&m);
  rt_model_close(NULL);
  arena_free(&a);
  return check_report();
}

static int do_open(const char *path) {
  Arena a;
  arena_init(&a);
  RtModel m;
  char err[4096] = "";
  int rc = rt_model_open(path, &a, &m, err, sizeof err);
  if (rc)
    fprintf(stderr, "error: %s\n", err);
  else {
    size_t bytes = 0;
    for (int k = 0; k < m.train_prog.npart; k++) bytes += m.train_prog.cubin_size[k];
    printf("ok batch=%lld arch=%s train=%d nodes infer=%d nodes programs=%d cubin=%zu\n", (long long)m.batch,
           m.arch[0] ? m.arch : "-", m.train->nnode, m.infer->nnode, m.train_prog.npart, bytes);
  }
  rt_model_close(&m);
  arena_free(&a);
  return rc ? 1 : 0;
}

static int do_seal(const char *path) {
  char local[4200];
  snprintf(local, sizeof local, "%s%s", strchr(path, '/') ? "" : "./", path);
  void *dl = dlopen(local, RTLD_NOW | RTLD_LOCAL);
  const unsigned char *b = dl ? dlsym(dl, CG_MODEL_SYMBOL) : NULL;
  const unsigned long long *n = dl ? dlsym(dl, CG_MODEL_SIZE_SYMBOL) : NULL;
  char err[4400] = "no netc_model or netc_model_size symbol";
  int rc = b && n ? cg_model_seal(path, b, *n, err, sizeof err) : -1;
  if (rc) fprintf(stderr, "error: %s: %s\n", path, err);
  if (dl) dlclose(dl);
  return rc ? 1 : 0;
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char *b = NULL;
  long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (size > 0 && (b = malloc((size_t)size)) &&
      (fseek(f, 0, SEEK_SET) != 0 || fread(b, 1, (size_t)size, f) != (size_t)size)) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *n = (size_t)size;
  return b;
}

/* Writes n bytes of b to path and opens it in a child: 0 when refused with a
 * message naming path, 1 when it opened, 2 when the child died by a signal. */
static int open_damaged(const char *path, const unsigned char *b, size_t n, char *msg, size_t msglen) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) return snprintf(msg, msglen, "cannot write %s", path), 3;
  int fd[2];
  if (pipe(fd) != 0) return 3;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    Arena a;
    arena_init(&a);
    RtModel m;
    char err[4096] = "";
    int rc = rt_model_open(path, &a, &m, err, sizeof err);
    if (write(fd[1], err, strlen(err)) < 0) _exit(4);
    rt_model_close(&m);
    arena_free(&a);
    _exit(rc ? 0 : 1);
  }
  close(fd[1]);
  size_t got = 0;
  ssize_t r;
  while (got + 1 < msglen && (r = read(fd[0], msg + got, msglen - 1 - got)) > 0) got += (size_t)r;
  msg[got] = 0;
  close(fd[0]);
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return 3;
  if (WIFSIGNALED(st)) return snprintf(msg, msglen, "signal %d", WTERMSIG(st)), 2;
  if (WEXITSTATUS(st) == 1) return 1;
  return WEXITSTATUS(st) == 0 && strncmp(msg, path, strlen(path)) == 0 ? 0 : 3;
}

static int ncase, nrefused;

static uint64_t get_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void fuzz_case(const char *path, const unsigned char *b, size_t n, const char *what, long at) {
  char msg[4096];
  int r = open_damaged(path, b, n, msg, sizeof msg);
  ncase++;
  nrefused += r == 0;
  CHECK(r == 0, "%s at %ld: %s (%s)", what, at,
        r == 1   ? "opened"
        : r == 2 ? "crashed"
                 : "not refused with a message naming the file",
        msg);
}

static int do_fuzz(const char *good, const char *dir) {
  size_t n = 0;
  unsigned char *orig = slurp(good, &n), *b = orig ? malloc(n + 4096) : NULL;
  CHECK(b != NULL && n > 0x1000, "read %s", good);
  if (!b) return check_report();
  char path[4200], msg[4096];
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/damaged.so", dir);
  CHECK(open_damaged(path, orig, n, msg, sizeof msg) == 1, "the undamaged copy opens (%s)", msg);
  /* flip one byte: every byte of the ELF header and the program headers, the
   * middle, and the seal */
  long at[1024];
  int nat = 0;
  for (long i = 0; i < 0xe8; i++) at[nat++] = i;
  for (long i = 0; i < 32; i++) at[nat++] = (long)n / 2 - 16 + i;
  for (long i = 1; i <= CG_MODEL_SEAL; i++) at[nat++] = (long)n - i;
  for (int k = 0; k < nat; k++) {
    memcpy(b, orig, n);
    b[at[k]] ^= 0xff;
    fuzz_case(path, b, n, "byte flipped", at[k]);
  }
  memcpy(b, orig, n); /* 4 KiB flipped in the middle */
  for (size_t i = n / 2 - 2048; i < n / 2 + 2048; i++) b[i] ^= 0xff;
  fuzz_case(path, b, n, "4 KiB flipped", (long)n / 2 - 2048);
  uint64_t seed = 22; /* 150 random bit flips: a fixed xorshift sequence */
  for (int k = 0; k < 150; k++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    long pos = (long)(seed % n);
    memcpy(b, orig, n);
    b[pos] ^= (unsigned char)(1u << (seed >> 32) % 8);
    fuzz_case(path, b, n, "bit flipped", pos);
  }
  static const long cuts[] = {0, 1, 4, 63, 64, 0xe8, 4096};
  for (int k = 0; k < (int)(sizeof cuts / sizeof cuts[0]); k++)
    fuzz_case(path, orig, (size_t)cuts[k], "truncated to", cuts[k]);
  for (long c = 1; c <= CG_MODEL_SEAL + 1; c += 9) fuzz_case(path, orig, n - (size_t)c, "truncated by", c);
  fuzz_case(path, orig, n / 2, "truncated by", (long)(n - n / 2));
  memcpy(b, orig, n);
  memset(b + n, 0, 4096);
  fuzz_case(path, b, n + 1, "appended bytes", 1);
  fuzz_case(path, b, n + 4096, "appended bytes", 4096);
  memcpy(b + n, b + n - CG_MODEL_SEAL, CG_MODEL_SEAL); /* the seal twice */
  fuzz_case(path, b, n + CG_MODEL_SEAL, "seal appended again", CG_MODEL_SEAL);
  printf("%d of %d damaged copies of %s refused\n", nrefused, ncase, good);
  /* a forged seal: bits flipped inside the blob and the file sealed again,
   * so the blob's own checks are all that stands; refused or (a flip in a
   * kernel's text or a cubin's body) opened, but never a signal */
  uint64_t boff = get_le64(orig + n - CG_MODEL_SEAL + 8), blen = get_le64(orig + n - CG_MODEL_SEAL + 16);
  int nforged = 0, nopened = 0;
  for (int k = 0; k < 300 && blen; k++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    /* half of them in the header and section table, where every field matters */
    long pos = (long)(boff + (k % 2 ? seed % blen : seed % (40 + 16 * CG_MODEL_NSECTION)));
    memcpy(b, orig, n);
    b[pos] ^= (unsigned char)(1u << (seed >> 32) % 8);
    cg_model_digest(b, n - CG_MODEL_DIGEST, b + n - CG_MODEL_DIGEST);
    int r = open_damaged(path, b, n, msg, sizeof msg);
    nforged++;
    nopened += r == 1;
    CHECK(r == 0 || r == 1, "forged seal, bit flipped at %ld: %s (%s)", pos, r == 2 ? "crashed" : "no message", msg);
  }
  printf("%d of %d resealed copies with a flipped blob bit opened\n", nopened, nforged);
  remove(path);
  free(b);
  free(orig);
  return check_report();
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[1], "--write") == 0) return do_write(argv[2], argv[3], argv[4], argv + 5, argc - 5);
  if (argc == 3 && strcmp(argv[1], "--open") == 0) return do_open(argv[2]);
  if (argc == 3 && strcmp(argv[1], "--seal") == 0) return do_seal(argv[2]);
  if (argc == 4 && strcmp(argv[1], "--fuzz") == 0) return do_fuzz(argv[2], argv[3]);
  fprintf(stderr, "usage: test_model --write NETC FILE.net DIR [NETC-OPTION...] | --open FILE | --seal FILE.so | "
                  "--fuzz GOOD.so DIR\n");
  return 2;
}
