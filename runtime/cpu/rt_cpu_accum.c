/* rt_cpu_accum.c - gradient accumulation on the CPU executor: one optimizer
 * update from k micro-batches (docs/training.md).
 *
 * The training graph ends with its optimizer section (IrGraph.opt_first
 * on: nonfinite checks, sgd_update per parameter, the loss scale's
 * update); everything before it is the forward and backward pass.  A
 * micro-step runs that first part and adds each gradient the optimizer
 * reads into an f32 sum.  The last of the k micro-steps writes (sum + its
 * own gradient) / k back into the gradient -- the mean over the
 * micro-batches, what a batch k times larger gives since the loss is a
 * mean -- rounded to the gradient's dtype, zeroes the sums, and runs the
 * optimizer section unchanged: a nonfinite gradient of any micro-batch
 * makes the mean nonfinite, so the dynamic loss scale's check skips the
 * whole update and lowers the scale. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cpu_op.h"
#include "rt_err.h"

struct RtCpuAccum {
  RtCpu *x;
  int first, n;
  int *grad;   /* value ids */
  float **sum; /* per gradient, numel floats */
};

int rt_cpu_accum_new(RtCpu *x, const int *grad, int ngrad, RtCpuAccum **out, char *err, size_t errlen) {
  *out = NULL;
  if (!x || ngrad < 0 || (ngrad && !grad)) return rt_errf(err, errlen, "rt_cpu_accum_new: bad arguments");
  int first = x->g->opt_first;
  if (first < 0 || first > x->g->nnode)
    return rt_errf(err, errlen, "rt_cpu_accum_new: graph %s has no optimizer section", x->g->name);
  for (int i = 0; i < ngrad; i++)
    if (grad[i] < 0 || grad[i] >= x->g->nval || rt_cpu_is_int(x, grad[i]))
      return rt_errf(err, errlen, "rt_cpu_accum_new: value %d is not a float gradient", grad[i]);
  RtCpuAccum *a = calloc(1, sizeof *a);
  if (!a) return rt_errf(err, errlen, "out of memory");
  a->x = x, a->first = first, a->n = ngrad;
  a->grad = malloc(sizeof(int) * (size_t)(ngrad ? ngrad : 1));
  a->sum = calloc((size_t)(ngrad ? ngrad : 1), sizeof *a->sum);
  int ok = a->grad && a->sum;
  for (int i = 0; ok && i < ngrad; i++) {
    a->grad[i] = grad[i];
    ok = (a->sum[i] = calloc((size_t)(x->numel[grad[i]] ? x->numel[grad[i]] : 1), sizeof(float))) != NULL;
  }
  if (!ok) {
    rt_cpu_accum_free(a);
    return rt_errf(err, errlen, "out of memory for the gradient sums");
  }
  *out = a;
  return 0;
}

void rt_cpu_accum_free(RtCpuAccum *a) {
  if (!a) return;
  for (int i = 0; a->sum && i < a->n; i++) free(a->sum[i]);
  free(a->sum);
  free(a->grad);
  free(a);
}

void rt_cpu_accum_reset(RtCpuAccum *a) {
  for (int i = 0; a && i < a->n; i++) memset(a->sum[i], 0, sizeof(float) * (size_t)a->x->numel[a->grad[i]]);
}

/* g = (sum + g) / k in g's dtype; sum = 0. */
static void finish(RtCpuAccum *a, int i, int k) {
  RtCpu *x = a->x;
  int v = a->grad[i];
  int64_t n = x->numel[v];
  float *g = x->buf[v], *s = a->sum[i];
  for (int64_t j = 0; j < n; j++) g[j] = (s[j] + g[j]) / (float)k, s[j] = 0;
  IrDtype dt = x->g->val[v].type.dtype;
  if (dt == IR_DT_F16) rt_ref_round_f16(n, g, g);
  if (dt == IR_DT_BF16) rt_ref_round_bf16(n, g, g);
}

int rt_cpu_accum_micro(RtCpuAccum *a, int k, int last, char *err, size_t errlen) {
  if (!a || k < 1) return rt_errf(err, errlen, "rt_cpu_accum_run: bad arguments");
  RtCpu *x = a->x;
  if (rt_cpu_run_nodes(x, 0, a->first, err, errlen)) return -1;
  for (int i = 0; i < a->n; i++) {
    if (last) {
      finish(a, i, k);
      continue;
    }
    const float *g = x->buf[a->grad[i]];
    float *s = a->sum[i];
    for (int64_t j = 0; j < x->numel[a->grad[i]]; j++) s[j] += g[j];
  }
  return 0;
}

int rt_cpu_accum_run(RtCpuAccum *a, int k, int last, char *err, size_t errlen) {
  if (rt_cpu_accum_micro(a, k, last, err, errlen)) return -1;
  return last ? rt_cpu_run_nodes(a->x, a->first, a->x->g->nnode, err, errlen) : 0;
}
