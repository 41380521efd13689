/* preserve.h - "a pass does not change what the step computes", checked on
 * the CPU executor (shared by the layout and precision tests).
 *
 * A case compiles one .net file twice, with two pass contexts (typically the
 * pass off, then on), feeds both graphs the same seeded inputs, parameters
 * and state (matched by name; a KCRS filter is transposed into a KRSC one),
 * runs one step, and compares the outputs (loss and logits) and every
 * parameter and state value afterwards (read back in the first graph's
 * layout).  The measure is per tensor: max |a - b| / max |a|; tolerance 0
 * asks for bitwise equality.  A graph the executor cannot run yet (an op
 * "not implemented yet") makes the case report a skip. */
#ifndef NETC_TESTS_PRESERVE_H
#define NETC_TESTS_PRESERVE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"
#include "rt_cpu.h"

enum { PRESERVE_BATCH = 4, PRESERVE_SKIP = 77 };

typedef struct PreserveSide {
  const char *off;   /* comma-separated passes to turn off, e.g. "layout,memplan" */
  IrDtype precision; /* with precision_set */
  int precision_set;
  const char *int8;
} PreserveSide;

typedef struct PreserveCase {
  const char *what;
  const char *path;
  int inference;
  PreserveSide a, b;
  double tol;       /* outputs, parameters, state; 0: bitwise */
  double tol_after; /* parameters and state after the step, when looser than tol (0: tol) */
  float loss_scale; /* fed to both */
} PreserveCase;

static unsigned preserve_mask(const char *off) {
  unsigned m = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", off ? off : "");
  for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
    int p = pipeline_find(s);
    if (p >= 0) m |= 1u << p;
  }
  return m;
}

static IrGraph *preserve_compile(Arena *a, const PreserveCase *c, const PreserveSide *s) {
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d,
                .out = stdout,
                .inference = c->inference,
                .disabled = preserve_mask(s->off),
                .precision = s->precision_set ? s->precision : IR_DT_F16,
                .precision_set = s->precision_set,
                .int8_layers = s->int8};
  IrGraph *g = compile_file(a, &d, c->path, &cx);
  diag_finish(&d);
  return g;
}

static uint64_t preserve_hash(const char *s) {
  uint64_t h = 1469598103934665603u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

static float preserve_uniform(uint64_t *r, float lo, float hi) {
  *r = *r * 6364136223846793005u + 1442695040888963407u;
  return lo + (hi - lo) * (float)((*r >> 40) / (double)(1u << 24));
}

/* Offset of logical element (a, c, h, w) of a rank-4 image or filter type. */
static int64_t preserve_off4(const IrType *t, const int64_t l[4], int64_t a, int64_t c, int64_t h, int64_t w) {
  if (t->layout == IR_LAYOUT_NHWC || t->layout == IR_LAYOUT_KRSC) return ((a * l[2] + h) * l[3] + w) * l[1] + c;
  return ((a * l[1] + c) * l[2] + h) * l[3] + w;
}

/* Logical dims (N|K, C, H|R, W|S) of a rank-4 type with a fixed dim[0]. */
static void preserve_dims4(const IrType *t, int64_t l[4]) {
  int last = t->layout == IR_LAYOUT_NHWC || t->layout == IR_LAYOUT_KRSC;
  l[0] = t->dim[0];
  l[1] = t->dim[last ? 3 : 1];
  l[2] = t->dim[last ? 1 : 2];
  l[3] = t->dim[last ? 2 : 3];
}

/* Copies src (type ts) into dst (type td): same elements, maybe another layout. */
static int preserve_convert(const IrType *ts, const float *src, const IrType *td, float *dst, int64_t n) {
  if (ts->layout == td->layout || ts->rank != 4) {
    memcpy(dst, src, sizeof(float) * (size_t)n);
    return 0;
  }
  int64_t ls[4], ld[4];
  preserve_dims4(ts, ls);
  preserve_dims4(td, ld);
  if (memcmp(ls, ld, sizeof ls)) return -1;
  for (int64_t a = 0; a < ls[0]; a++)
    for (int64_t c = 0; c < ls[1]; c++)
      for (int64_t h = 0; h < ls[2]; h++)
        for (int64_t w = 0; w < ls[3]; w++)
          dst[preserve_off4(td, ld, a, c, h, w)] = src[preserve_off4(ts, ls, a, c, h, w)];
  return 0;
}

/* Seeds every input, parameter and state of x (graph g) by name. */
static void preserve_seed(RtCpu *x, const IrGraph *g, float loss_scale) {
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT) continue;
    int64_t n = rt_cpu_numel(x, v);
    uint64_t r = preserve_hash(val->name);
    if (rt_cpu_is_int(x, v)) {
      int64_t *lab = rt_cpu_data(x, v);
      int classes = (int)g->val[g->output[g->noutput - 1]].type.dim[1];
      for (int64_t i = 0; i < n; i++) lab[i] = (i * 7 + 3) % classes;
      continue;
    }
    float *p = rt_cpu_data(x, v);
    const char *nm = val->name;
    size_t len = strlen(nm);
    int ends_weight = len > 7 && strcmp(nm + len - 7, ".weight") == 0;
    float lo = -1, hi = 1;
    if (strcmp(nm, "lr") == 0)
      lo = hi = 0.05f;
    else if (strcmp(nm, "loss_scale") == 0)
      lo = hi = loss_scale;
    else if (strstr(nm, "running_var"))
      lo = 0.8f, hi = 1.5f;
    else if (strstr(nm, "running_mean") || strstr(nm, "momentum_buffer"))
      lo = -0.1f, hi = 0.1f;
    else if (val->kind == IR_VAL_PARAM && val->type.rank >= 2)
      hi = (float)(1 / sqrt((double)n / (double)val->type.dim[0])), lo = -hi;
    else if (val->kind == IR_VAL_PARAM && ends_weight)
      lo = 0.5f, hi = 1.5f;
    else if (val->kind == IR_VAL_PARAM)
      lo = -0.5f, hi = 0.5f;
    for (int64_t i = 0; i < n; i++) p[i] = preserve_uniform(&r, lo, hi);
  }
}

/* max |a - b| / max |a| over n values; prints the worst element when above tol. */
static int preserve_close(const char *what, const char *name, const float *a, const float *b, int64_t n, double tol) {
  if (tol == 0) {
    int same = memcmp(a, b, sizeof(float) * (size_t)n) == 0;
    CHECK(same, "%s: %s differs (bitwise equality expected)", what, name);
    return same;
  }
  double amax = 0, dmax = 0;
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= dmax)) dmax = d, at = i;
    if (fabs((double)a[i]) > amax) amax = fabs((double)a[i]);
  }
  double rel = amax > 0 ? dmax / amax : dmax;
  int ok = rel <= tol;
  CHECK(ok, "%s: %s: max difference %.3g relative to max |a| %.3g = %.3g > %.3g (element %lld: %.9g vs %.9g)", what,
        name, dmax, amax, rel, tol, (long long)at, a[at], b[at]);
  return ok;
}

/* Runs one case; returns 0, or PRESERVE_SKIP when the executor lacks an op. */
static int preserve_case(const PreserveCase *c) {
  Arena aa, ab;
  arena_init(&aa);
  arena_init(&ab);
  IrGraph *ga = preserve_compile(&aa, c, &c->a), *gb = preserve_compile(&ab, c, &c->b);
  RtCpu *xa = NULL, *xb = NULL;
  char err[512] = "";
  int rc = 0;
  CHECK(ga && gb, "%s: compiles", c->what);
  if (!ga || !gb) goto done;
  if (rt_cpu_new(ga, PRESERVE_BATCH, &xa, err, sizeof err) || rt_cpu_new(gb, PRESERVE_BATCH, &xb, err, sizeof err)) {
    CHECK(0, "%s: executor: %s", c->what, err);
    goto done;
  }
  preserve_seed(xa, ga, c->loss_scale);
  for (int v = 0; v < ga->nval; v++) {
    if (ga->val[v].kind == IR_VAL_ACT) continue;
    int w = rt_cpu_find(xb, ga->val[v].name);
    CHECK(w >= 0, "%s: %s exists after the pass", c->what, ga->val[v].name);
    if (w < 0) goto done;
    if (rt_cpu_is_int(xa, v)) {
      memcpy(rt_cpu_data(xb, w), rt_cpu_data(xa, v), sizeof(int64_t) * (size_t)rt_cpu_numel(xa, v));
      continue;
    }
    int bad = rt_cpu_numel(xa, v) != rt_cpu_numel(xb, w) ||
              preserve_convert(&ga->val[v].type, rt_cpu_data(xa, v), &gb->val[w].type, rt_cpu_data(xb, w),
                               rt_cpu_numel(xa, v));
    CHECK(!bad, "%s: %s has the same elements before and after", c->what, ga->val[v].name);
    if (bad) goto done;
  }
  if (rt_cpu_run(xa, err, sizeof err) || rt_cpu_run(xb, err, sizeof err)) {
    if (strstr(err, "not implemented")) {
      printf("%s: skipped: %s\n", c->what, err);
      rc = PRESERVE_SKIP;
    } else {
      CHECK(0, "%s: run: %s", c->what, err);
    }
    goto done;
  }
  CHECK(ga->noutput == gb->noutput, "%s: same outputs", c->what);
  for (int i = 0; i < ga->noutput && i < gb->noutput; i++) {
    int64_t n = rt_cpu_numel(xa, ga->output[i]);
    CHECK(n == rt_cpu_numel(xb, gb->output[i]), "%s: output %d sizes", c->what, i);
    if (n == rt_cpu_numel(xb, gb->output[i]))
      preserve_close(c->what, i == 0 && !c->inference ? "loss" : "logits", rt_cpu_data(xa, ga->output[i]),
                     rt_cpu_data(xb, gb->output[i]), n, c->tol);
  }
  for (int v = 0; v < ga->nval; v++) {
    IrValueKind k = ga->val[v].kind;
    if (k != IR_VAL_PARAM && k != IR_VAL_STATE) continue;
    int w = rt_cpu_find(xb, ga->val[v].name);
    int64_t n = rt_cpu_numel(xa, v);
    float *back = malloc(sizeof(float) * (size_t)n + 1);
    if (back && !preserve_convert(&gb->val[w].type, rt_cpu_data(xb, w), &ga->val[v].type, back, n))
      preserve_close(c->what, ga->val[v].name, rt_cpu_data(xa, v), back, n, c->tol_after > 0 ? c->tol_after : c->tol);
    free(back);
  }
done:
  rt_cpu_free(xa);
  rt_cpu_free(xb);
  arena_free(&aa);
  arena_free(&ab);
  return rc;
}

#endif
