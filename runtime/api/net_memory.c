/* net_memory.c - the memory limit's arithmetic (see net_memory.h).
 *
 * The need grows with the batch (activations) on top of a constant part
 * (parameters and state), so the largest batch that fits is found by
 * bisection on it. */
#include "net_memory.h"

#include "net_model.h"
#include "rt_cpu.h"

double net_memory_need(const IrGraph *g, int64_t batch, int gpu) {
  if (!gpu) return rt_cpu_plan_bytes(g, batch);
  IrGraph *copy = ir_graph_clone(g);
  char err[256];
  if (!copy || net_model_plan(copy, batch, err, sizeof err)) return -1;
  double persist = 0;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *x = &g->val[v];
    if (x->kind == IR_VAL_PARAM || x->kind == IR_VAL_STATE)
      persist += (double)ir_type_numel(&x->type, batch) * (double)ir_dtype_size(x->type.dtype);
  }
  return (double)copy->plan_bytes + persist;
}

int64_t net_memory_largest_batch(const IrGraph *g, const IrGraph *also, int64_t below, int gpu, double budget) {
  int64_t lo = 0, hi = below; /* need(lo) fits (or lo is 0), need(hi) does not */
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    double need = net_memory_need(g, mid, gpu), more = also ? net_memory_need(also, mid, gpu) : 0;
    if (need >= 0 && more >= 0 && need + more <= budget)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}
