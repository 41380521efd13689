/* test_gpu_prog.c - a graph's kernel programs (runtime/cg_prog.h):
 *
 *   test_gpu_prog ROOT WORKDIR
 *
 * Emission only (no NVRTC): for ResNet-50's training step and smallcnn's,
 * every launch calls a kernel that exactly one program defines; a launch
 * that calls another launch's kernel has the same template and the same
 * parameters as that one (read from the joined text, which keeps every
 * launch's own name, as --emit-cuda writes it); no program defines a
 * kernel twice or a kernel nobody calls; and the counts of programs follow
 * the count of distinct kernels.
 *
 * With NVRTC (skipped without): smallcnn's programs compiled on one thread
 * and on three give the same cubins; a second build with the same cache
 * takes every cubin from it; prebuilt cubins are taken part by part (a
 * part whose text differs is compiled, the others are not); and a part
 * that does not compile fails the whole build with that part's log and
 * leaves no cubin behind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "compile.h"
#include "cg_prog.h"
#include "cg_nvrtc.h"

static const CgDevice H200 = {
    .sm_count = 132, .max_threads_per_block = 1024, .max_shared_per_block = 49152, .cc_major = 9, .cc_minor = 0};

static IrGraph *compile_net(Arena *a, const char *root, const char *rel, int64_t batch, IrDtype precision) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .precision = precision, .precision_set = 1, .batch = batch};
  return compile_file(a, &d, path, &cx);
}

/* Where "#define NETC_KERNEL_NAME name\n" is in text, or NULL. */
static const char *kernel_define(const char *text, const char *name) {
  char want[160];
  snprintf(want, sizeof want, "#define NETC_KERNEL_NAME %s\n", name);
  return strstr(text, want);
}

/* The instantiation of the kernel whose name is defined at `at` in text:
 * its template banner (the line before) and the #define lines after the
 * name, as one string. */
static void instantiation(const char *text, const char *at, char *out, size_t len) {
  const char *banner = at > text ? at - 1 : at;
  while (banner > text && banner[-1] != '\n') banner--;
  const char *name_end = strchr(at, '\n') + 1, *end = name_end;
  while (strncmp(end, "#define ", 8) == 0) end = strchr(end, '\n') + 1;
  size_t na = (size_t)(at - banner), nb = (size_t)(end - name_end);
  if (na + nb + 1 > len) na = nb = 0;
  memcpy(out, banner, na);
  memcpy(out + na, name_end, nb);
  out[na + nb] = 0;
}

/* Emission-only checks of one graph's programs. */
static void check_emission(const char *what, const IrGraph *g) {
  CgProg p;
  char err[4096];
  int ok = !cg_prog_emit(g, g->plan_batch, &H200, &p, err, sizeof err);
  CHECK(ok, "%s: emitting: %s", what, err);
  if (!ok) return;
  int want_parts = (p.ndistinct + 3) / 4 < CG_MAX_PART ? (p.ndistinct + 3) / 4 : CG_MAX_PART;
  CHECK(p.npart == want_parts, "%s: %d programs for %d distinct kernels", what, p.npart, p.ndistinct);
  CHECK(p.ndistinct > 0 && p.ndistinct < p.nlaunch, "%s: %d distinct kernels of %d launches", what, p.ndistinct,
        p.nlaunch);
  int nk = 0, bad = 0;
  for (int k = 0; k < p.npart; k++) nk += p.part[k].nkernel;
  CHECK(nk == p.ndistinct, "%s: the programs hold %d kernels, %d distinct", what, nk, p.ndistinct);
  for (int i = 0; i < p.nnode && !bad; i++)
    for (int j = 0; j < p.kn[i].nlaunch && !bad; j++) {
      const CgProgSym *s = &p.sym[p.first[i] + j];
      const char *own = p.kn[i].launch[j].name;
      int defined = 0;
      for (int k = 0; k < p.npart; k++) {
        const char *at = kernel_define(p.part[k].source, s->name);
        defined += at != NULL;
        if (at && k != s->part) bad = 1;
        if (at && kernel_define(at + 1, s->name)) bad = 1; /* twice in one program */
      }
      if (defined != 1) bad = 1;
      CHECK(defined == 1, "%s: launch %s calls %s, defined by %d programs", what, own, s->name, defined);
      const char *mine = kernel_define(p.source, own), *theirs = kernel_define(p.source, s->name);
      CHECK(mine && theirs, "%s: the joined text has %s and %s", what, own, s->name);
      if (!mine || !theirs || strcmp(own, s->name) == 0) continue;
      for (int k = 0; k < p.npart; k++)
        CHECK(!kernel_define(p.part[k].source, own), "%s: %s calls %s yet program %d defines it", what, own, s->name,
              k);
      static char a[8192], b[8192];
      instantiation(p.source, mine, a, sizeof a);
      instantiation(p.source, theirs, b, sizeof b);
      if (strcmp(a, b) != 0) bad = 1;
      CHECK(a[0] && strcmp(a, b) == 0, "%s: %s shares %s's kernel but is instantiated otherwise:\n%s\nvs\n%s", what,
            own, s->name, a, b);
    }
  CHECK(!bad, "%s: every launch's kernel is defined once, by the program the map names", what);
  printf("%s: %d launches, %d distinct kernels, %d programs\n", what, p.nlaunch, p.ndistinct, p.npart);
  cg_prog_free(&p);
}

static int same_cubins(const CgProg *a, const CgProg *b) {
  if (a->npart != b->npart || a->nlaunch != b->nlaunch) return 0;
  for (int k = 0; k < a->npart; k++)
    if (!a->part[k].cubin || !b->part[k].cubin || a->part[k].size != b->part[k].size ||
        memcmp(a->part[k].cubin, b->part[k].cubin, a->part[k].size) != 0)
      return 0;
  for (int l = 0; l < a->nlaunch; l++)
    if (a->sym[l].part != b->sym[l].part || strcmp(a->sym[l].name, b->sym[l].name) != 0) return 0;
  return 1;
}

static int count_files(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "ls -A '%s' 2>/dev/null | wc -l", dir);
  FILE *f = popen(cmd, "r");
  int n = -1;
  if (f && fscanf(f, "%d", &n) != 1) n = -1;
  if (f) pclose(f);
  return n;
}

/* Builds g with `threads` threads and cache dir, checking it succeeds. */
static int build(const IrGraph *g, int threads, const char *dir, const CgProgram *pre, const char *pre_arch,
                 CgProg *p) {
  char err[8192], n[16];
  /* the build emits afresh, so the thread count comes from the device's options */
  NetcOpts o;
  opts_default(&o);
  snprintf(n, sizeof n, "%d", threads);
  CHECK(opts_set(&o, "nvrtc_threads", n, err, sizeof err) == 0, "nvrtc_threads=%s: %s", n, err);
  CgDevice dev = H200;
  dev.opts = &o;
  CgStatus s = cg_prog_build_prebuilt(g, g->plan_batch, &dev, dir, pre, pre_arch, p, err, sizeof err);
  CHECK(!s, "building with %d threads: %s", threads, err);
  return s ? -1 : 0;
}

static void check_compile(const IrGraph *g, const char *work) {
  char d1[4200], d2[4200], d3[4200], err[16384];
  snprintf(d1, sizeof d1, "%s/cache1", work);
  snprintf(d2, sizeof d2, "%s/cache3", work);
  snprintf(d3, sizeof d3, "%s/cache_pre", work);
  CgProg one, three, again;
  if (build(g, 1, d1, NULL, NULL, &one)) return;
  CHECK(!one.cache_hit && one.npart > 1, "smallcnn: %d programs compiled", one.npart);
  CHECK(count_files(d1) == one.npart, "smallcnn: one cache file per program (%d)", count_files(d1));
  if (!build(g, 3, d2, NULL, NULL, &three)) {
    CHECK(!three.cache_hit, "smallcnn: compiled again on 3 threads");
    CHECK(same_cubins(&one, &three), "smallcnn: 1 and 3 threads give the same cubins and kernel map");
    cg_prog_free(&three);
  }
  if (!build(g, 2, d1, NULL, NULL, &again)) {
    CHECK(again.cache_hit && same_cubins(&one, &again), "smallcnn: the second build takes every cubin from the cache");
    cg_prog_free(&again);
  }
  /* prebuilt: every part, then all but part 0 (whose text differs) */
  CgProgram pre = {.npart = one.npart};
  for (int k = 0; k < one.npart; k++) {
    pre.source[k] = one.part[k].source;
    pre.cubin[k] = one.part[k].cubin;
    pre.cubin_size[k] = one.part[k].size;
  }
  CgProg p;
  if (!build(g, 2, d3, &pre, "sm_90", &p)) {
    CHECK(p.prebuilt && same_cubins(&one, &p), "smallcnn: every prebuilt cubin is taken");
    CHECK(count_files(d3) <= 0, "smallcnn: nothing compiled (%d files in the cache)", count_files(d3));
    cg_prog_free(&p);
  }
  char *changed = malloc(one.part[0].source_len + 32);
  snprintf(changed, one.part[0].source_len + 32, "%s\n/* changed */\n", one.part[0].source);
  pre.source[0] = changed;
  if (!build(g, 2, d3, &pre, "sm_90", &p)) {
    CHECK(!p.prebuilt && !p.part[0].prebuilt && p.part[0].cubin, "smallcnn: program 0's cubin is compiled");
    for (int k = 1; k < p.npart; k++) CHECK(p.part[k].prebuilt, "smallcnn: program %d's cubin is taken", k);
    CHECK(count_files(d3) == 1 && same_cubins(&one, &p), "smallcnn: only program 0 compiled (%d files)",
          count_files(d3));
    cg_prog_free(&p);
  }
  pre.source[0] = one.part[0].source;
  free(changed);
  /* a part that does not compile: its log, and no cubin left */
  if (!cg_prog_emit(g, g->plan_batch, &H200, &p, err, sizeof err) && p.npart > 1) {
    const char *bad = "\n#error injected failure\n";
    size_t n = p.part[1].source_len + strlen(bad);
    char *s = malloc(n + 1);
    snprintf(s, n + 1, "%s%s", p.part[1].source, bad);
    free(p.part[1].source);
    p.part[1].source = s, p.part[1].source_len = n;
    p.threads = 3;
    setenv("NETC_KERNEL_DIR", work, 1);
    CgStatus st = cg_prog_compile(g, g->plan_batch, &H200, d2, &p, err, sizeof err);
    unsetenv("NETC_KERNEL_DIR");
    CHECK(st == CG_ECOMPILE && strstr(err, "injected failure") && strstr(err, "_p2"),
          "smallcnn: a broken program 2 fails the build with its log: %s", err);
    for (int k = 0; k < p.npart; k++) CHECK(!p.part[k].cubin, "smallcnn: no cubin of program %d is left", k);
    cg_prog_free(&p);
  }
  cg_prog_free(&one);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_gpu_prog ROOT WORKDIR\n");
    return 2;
  }
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", argv[2], argv[2]);
  if (system(cmd) != 0) {
    fprintf(stderr, "cannot make %s\n", argv[2]);
    return 1;
  }
  Arena a;
  arena_init(&a);
  IrGraph *r50 = compile_net(&a, argv[1], "models/resnet50.net", 32, IR_DT_F16);
  IrGraph *small = compile_net(&a, argv[1], "models/smallcnn.net", 8, IR_DT_F32);
  CHECK(r50 && small, "the models compile");
  if (r50) check_emission("resnet50 training, fp16, batch 32", r50);
  if (small) check_emission("smallcnn training, fp32, batch 8", small);
  int major, minor;
  char err[1024];
  if (cg_nvrtc_version(&major, &minor, err, sizeof err) != CG_OK)
    printf("skipped the NVRTC checks: %s\n", err);
  else if (small)
    check_compile(small, argv[2]);
  arena_free(&a);
  return check_report();
}
