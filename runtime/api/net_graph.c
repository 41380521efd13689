/* net_graph.c - what the API's executor reads from the IR beyond running
 * it: where the optimizer section starts and which values are the
 * gradients it reads, for gradient accumulation (net_exec_accum_set,
 * docs/training.md), which runs the nodes before the section per
 * micro-batch and the section once per update.  It assumes autodiff's
 * order: the forward and backward passes, then the optimizer last. */
#include <stdlib.h>

#include "net_exec.h"
#include "net_status.h"

static int is_optimizer_op(IrOp op) {
  return op == IR_OP_SGD_UPDATE || op == IR_OP_NONFINITE_CHECK || op == IR_OP_LOSS_SCALE_UPDATE;
}

/* The section starts at g's first sgd_update or nonfinite_check; it must be
 * last: only optimizer ops and the adds of their overflow flags, reading
 * gradients made before it. */
NetStatus net_graph_optimizer_section(const IrGraph *g, int *first, int **grad, int *ngrad, char *err, size_t len) {
  *first = -1, *grad = NULL, *ngrad = 0;
  for (int i = 0; i < g->nnode && *first < 0; i++)
    if (g->node[i].op == IR_OP_SGD_UPDATE || g->node[i].op == IR_OP_NONFINITE_CHECK) *first = i;
  if (*first < 0)
    return net_status_errf(NET_ERR_MODEL, err, len, "gradient accumulation: graph %s has no optimizer (sgd_update)",
                           g->name ? g->name : "?");
  int *out = malloc(sizeof(int) * (size_t)(g->nnode - *first));
  if (!out) return net_status_errf(NET_ERR_NOMEM, err, len, "out of memory");
  for (int i = *first; i < g->nnode; i++) {
    const IrNode *n = &g->node[i];
    int flag_add = n->op == IR_OP_ADD && n->nin == 2;
    for (int k = 0; flag_add && k < 2; k++) {
      int d = g->val[n->in[k]].kind == IR_VAL_ACT ? g->val[n->in[k]].def : -1;
      flag_add = d >= *first && d < i;
    }
    if (!is_optimizer_op(n->op) && !flag_add) {
      free(out);
      return net_status_errf(NET_ERR_MODEL, err, len,
                             "gradient accumulation: node %d (%s, %s) follows the optimizer section's start (node "
                             "%d); the optimizer must end the graph",
                             i, n->name ? n->name : "?", ir_op_info(n->op)->name, *first);
    }
    if (n->op != IR_OP_SGD_UPDATE) continue;
    int v = n->in[1], seen = 0;
    if (g->val[v].kind != IR_VAL_ACT || g->val[v].def < 0 || g->val[v].def >= *first) {
      free(out);
      return net_status_errf(NET_ERR_MODEL, err, len,
                             "gradient accumulation: %s reads a gradient not made by the backward pass",
                             n->name ? n->name : "an sgd_update");
    }
    for (int k = 0; k < *ngrad; k++) seen |= out[k] == v;
    if (!seen) out[(*ngrad)++] = v;
  }
  *grad = out;
  return NET_OK;
}
