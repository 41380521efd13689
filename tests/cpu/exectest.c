/* exectest.c - helpers of the CPU executor tests (see exectest.h). */
#include "exectest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"

IrGraph *exectest_read(Arena *a, const char *text) {
  Diag d;
  diag_init(&d, stderr);
  IrGraph *g = ir_read(a, &d, "test.ir", text, strlen(text));
  if (!g || d.nerrors) return NULL;
  if (ir_verify(g, &d, "test")) return NULL;
  return g;
}

IrGraph *exectest_model(Arena *a, const char *root, const char *rel) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  Diag d;
  diag_init(&d, stderr);
  return compile_file(a, &d, path, NULL);
}

IrGraph *exectest_compile(Arena *a, const char *root, const char *rel, PassCtx cx) {
  IrGraph *g = exectest_model(a, root, rel);
  Diag d;
  diag_init(&d, stderr);
  cx.d = &d, cx.out = stdout;
  return g && !pipeline_run(&g, &cx) ? g : NULL;
}

RtCpu *exectest_new(const IrGraph *g, int64_t batch) {
  char err[512];
  RtCpu *x = NULL;
  if (!g || rt_cpu_new(g, batch, &x, err, sizeof err)) {
    fprintf(stderr, "rt_cpu_new: %s\n", g ? err : "no graph");
    return NULL;
  }
  return x;
}

int exectest_run(RtCpu *x) {
  char err[512];
  int rc = rt_cpu_run(x, err, sizeof err);
  if (rc) fprintf(stderr, "rt_cpu_run: %s\n", err);
  return rc;
}

int exectest_open(ExectestCase *c, const char *text, int64_t batch) {
  arena_init(&c->arena);
  c->x = NULL;
  c->g = exectest_read(&c->arena, text);
  if (!c->g) return -1;
  c->x = exectest_new(c->g, batch);
  return c->x ? 0 : -1;
}

void exectest_close(ExectestCase *c) {
  rt_cpu_free(c->x);
  c->x = NULL;
  arena_free(&c->arena);
}

float *exectest_out(ExectestCase *c, int k) { return k < c->g->noutput ? rt_cpu_data(c->x, c->g->output[k]) : NULL; }

float exectest_rand(uint64_t *s, float lo, float hi) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return lo + (hi - lo) * (float)((*s >> 40) * (1.0 / (double)(1ull << 24)));
}

float *exectest_fill(RtCpu *x, int v, uint64_t *state, float lo, float hi) {
  float *p = rt_cpu_data(x, v);
  for (int64_t i = 0; p && i < rt_cpu_numel(x, v); i++) p[i] = exectest_rand(state, lo, hi);
  return p;
}

int exectest_val(RtCpu *x, const char *name) {
  int v = rt_cpu_find(x, name);
  if (v < 0) fprintf(stderr, "no value called %s\n", name);
  return v;
}

float *exectest_f(RtCpu *x, const char *name) { return rt_cpu_data(x, exectest_val(x, name)); }

double exectest_compare(const char *what, const float *got, const float *want, int64_t n, double tol) {
  double scale = 1, worst = 0;
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++)
    if (fabs(want[i]) > scale) scale = fabs(want[i]);
  for (int64_t i = 0; i < n; i++) {
    double d = got[i] == want[i] ? 0 : fabs((double)got[i] - want[i]);
    if (!(d <= worst)) worst = d, at = i;
    if (isnan(d)) break;
  }
  double rel = worst / scale;
  if (!(rel <= tol) && n > 0)
    fprintf(stderr, "%s[%lld]: got %.9g want %.9g (max error %.3g relative, tolerance %.3g)\n", what, (long long)at,
            got[at], want[at], rel, tol);
  return n > 0 ? rel : 0;
}

int exectest_verify_msg(const IrGraph *g, const char *pass, char *buf, size_t len) {
  memset(buf, 0, len);
  FILE *f = fmemopen(buf, len - 1, "w");
  if (!f) return -1;
  Diag d;
  diag_init(&d, f);
  int rc = ir_verify(g, &d, pass);
  fclose(f);
  return rc;
}
