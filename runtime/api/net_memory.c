/* net_memory.c - the memory limit's arithmetic (see net_memory.h).
 *
 * The need grows with the batch (activations) on top of a constant part
 * (parameters and state), so the largest batch that fits is found by
 * bisection on it, on one copy of the graph planned again for each batch. */
#include "net_memory.h"

#include "net_model.h"
#include "rt_cpu.h"

/* The need of g at batch; on the GPU from g's own plan when it is made for
 * that batch, else from *copy, a copy of g made on first use (in g's arena)
 * and planned again for each batch asked. */
static double need(const IrGraph *g, IrGraph **copy, int64_t batch, int gpu) {
  if (!gpu) return rt_cpu_plan_bytes(g, batch);
  const IrGraph *planned = g;
  if (g->plan_bytes <= 0 || g->plan_batch != batch) {
    char err[256];
    if ((!*copy && !(*copy = ir_graph_clone(g))) || net_model_plan(*copy, batch, err, sizeof err)) return -1;
    planned = *copy;
  }
  double persist = 0;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *x = &g->val[v];
    if (x->kind == IR_VAL_PARAM || x->kind == IR_VAL_STATE)
      persist += (double)ir_type_numel(&x->type, batch) * (double)ir_dtype_size(x->type.dtype);
  }
  return (double)planned->plan_bytes + persist;
}

double net_memory_need(const IrGraph *g, int64_t batch, int gpu) {
  IrGraph *copy = NULL;
  return need(g, &copy, batch, gpu);
}

int64_t net_memory_largest_batch(const IrGraph *g, const IrGraph *also, int64_t below, int gpu, double budget) {
  IrGraph *copy = NULL, *also_copy = NULL;
  int64_t lo = 0, hi = below; /* need(lo) fits (or lo is 0), need(hi) does not */
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    double n = need(g, &copy, mid, gpu), more = also ? need(also, &also_copy, mid, gpu) : 0;
    if (n >= 0 && more >= 0 && n + more <= budget)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}
