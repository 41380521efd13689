/* gexec.c - shared pieces of the GPU executor's test and benchmark (see
 * gexec.h). */
#include "gexec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "int8_scales.h"
#include "pipeline.h"
#include "rt_ref.h"

IrGraph *gexec_compile_int8(Arena *a, const char *root, const char *rel, int64_t batch, int inference,
                            IrDtype precision, const char *int8_layers) {
  return gexec_compile_off(a, root, rel, batch, inference, precision, int8_layers, NULL);
}

IrGraph *gexec_compile_off(Arena *a, const char *root, const char *rel, int64_t batch, int inference, IrDtype precision,
                           const char *int8_layers, const char *off) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  Diag d;
  diag_init(&d, stderr);
  int fp8 = precision == IR_DT_F8E4M3; /* --precision fp8: every convolution but the first in FP8, f16 elsewhere */
  /* "calibrated": "all", every i8 layer's input at step 0.05 (as --int8-scales would give; pass requant folds
   * the casts of results only i8 layers read into the convolutions) */
  int calibrated = int8_layers && strcmp(int8_layers, "calibrated") == 0;
  PassCtx cx = {.d = &d,
                .inference = inference,
                .precision = precision,
                .precision_set = 1,
                .batch = batch,
                .int8_layers = calibrated ? "all" : int8_layers,
                .disabled = off ? pipeline_bit(off) : 0};
  if (fp8) pass_precision_parse("fp8", &cx);
  IrGraph *g = compile_file(a, &d, path, &cx);
  if (!g || !calibrated) return g;
  if (!(cx.int8_scales = int8_scales_every(a, g, 0.05))) return NULL;
  return compile_file(a, &d, path, &cx);
}

IrGraph *gexec_compile(Arena *a, const char *root, const char *rel, int64_t batch, int inference, IrDtype precision) {
  return gexec_compile_int8(a, root, rel, batch, inference, precision, NULL);
}

int gexec_is_int(IrDtype dt) { return dt == IR_DT_I32 || dt == IR_DT_I64 || dt == IR_DT_U8; }

int64_t gexec_numel(const IrGraph *g, int v, int64_t batch) { return ir_type_numel(&g->val[v].type, batch); }

static float urand(uint64_t *s, float lo, float hi) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return lo + (hi - lo) * (float)((*s >> 40) * (1.0 / 16777216.0));
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

/* The number of classes: the last dim of the logits (output 1 when
 * training, 0 for inference). */
static int64_t classes_of(const IrGraph *g) {
  for (int k = 0; k < g->noutput; k++) {
    const IrType *t = &g->val[g->output[k]].type;
    if (t->rank == 2) return t->dim[1];
  }
  return 10;
}

void **gexec_values(const IrGraph *g, int64_t batch, uint64_t seed, float loss_scale) {
  void **vals = calloc((size_t)g->nval, sizeof *vals);
  if (!vals) return NULL;
  uint64_t s = seed * 2654435761u + 1;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT) continue;
    int64_t n = gexec_numel(g, v, batch);
    vals[v] = malloc((size_t)(n ? n : 1) * 8);
    if (!vals[v]) {
      gexec_values_free(g, vals);
      return NULL;
    }
    if (gexec_is_int(val->type.dtype)) {
      int64_t *q = vals[v];
      for (int64_t i = 0; i < n; i++) q[i] = (int64_t)urand(&s, 0, (float)classes_of(g)) % classes_of(g);
      continue;
    }
    float *f = vals[v], lo = -0.2f, hi = 0.2f;
    const char *name = val->name ? val->name : "";
    if (strcmp(name, "lr") == 0)
      lo = hi = 0.05f;
    else if (strcmp(name, "loss_scale") == 0)
      lo = hi = loss_scale;
    else if (val->kind == IR_VAL_INPUT)
      lo = -1, hi = 1;
    else if (ends_with(name, ".running_var"))
      lo = 0.5f, hi = 1.5f;
    else if (ends_with(name, ".momentum_buffer"))
      lo = -0.01f, hi = 0.01f;
    else if (val->kind == IR_VAL_PARAM && val->type.rank >= 2) {
      float r = 1.0f / sqrtf((float)(n / val->type.dim[0]));
      lo = -r, hi = r;
    } else if (ends_with(name, ".weight"))
      lo = 0.8f, hi = 1.2f;
    for (int64_t i = 0; i < n; i++) f[i] = lo == hi ? lo : urand(&s, lo, hi);
    if (val->type.dtype == IR_DT_F16) rt_ref_round_f16(n, f, f);
    if (val->type.dtype == IR_DT_BF16) rt_ref_round_bf16(n, f, f);
  }
  return vals;
}

void gexec_values_free(const IrGraph *g, void **vals) {
  if (!vals) return;
  for (int v = 0; v < g->nval; v++) free(vals[v]);
  free(vals);
}

int gexec_write_all(RtGpu *x, const IrGraph *g, void **vals) {
  char err[1024];
  for (int v = 0; v < g->nval; v++) {
    if (!vals[v]) continue;
    if (rt_gpu_write(x, v, vals[v], err, sizeof err)) {
      fprintf(stderr, "writing %s: %s\n", g->val[v].name ? g->val[v].name : "?", err);
      return -1;
    }
  }
  return 0;
}

CgDevice gexec_h200(void) {
  CgDevice d = {
      .sm_count = 132, .max_threads_per_block = 1024, .max_shared_per_block = 49152, .cc_major = 9, .cc_minor = 0};
  return d;
}

int gexec_have_gpu(void) {
  char err[512];
  int count = 0;
  if (rt_cuda_device_count(&count, err, sizeof err)) {
    printf("skipped: %s\n", err);
    return 0;
  }
  if (count < 1) {
    printf("skipped: the CUDA driver sees no GPU\n");
    return 0;
  }
  return 1;
}

double gexec_compare(const char *what, const float *got, const float *want, int64_t n, double tol) {
  double scale = 1e-6, worst = -1;
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)got[i] - (double)want[i]);
    if (isnan(e)) e = INFINITY;
    if (e > worst) worst = e, at = i;
  }
  double rel = n ? worst / scale : 0;
  if (rel > tol)
    fprintf(stderr, "  %s[%lld]: got %.7g want %.7g (relative error %.3g > %.3g, %lld elements)\n", what, (long long)at,
            got[at], want[at], rel, tol, (long long)n);
  return rel;
}
