/* net_graph.c - what the API's executor reads from the IR beyond running
 * it: where the optimizer section starts and which values are the
 * gradients it reads, for gradient accumulation (net_exec_accum_set,
 * docs/training.md), which runs the nodes before the section per
 * micro-batch and the section once per update.  The section is the one
 * the IR marks (IrGraph.opt_first, docs/ir.md); the verifier keeps it
 * last and pure. */
#include <stdlib.h>

#include "net_exec.h"
#include "net_status.h"

/* The distinct gradients the sgd_updates of g's optimizer section
 * (IrGraph.opt_first on, kept pure by the verifier) read, each made
 * before the section. */
NetStatus net_graph_optimizer_section(const IrGraph *g, int **grad, int *ngrad, char *err, size_t len) {
  int first = g->opt_first;
  *grad = NULL, *ngrad = 0;
  if (first < 0)
    return net_status_errf(NET_ERR_MODEL, err, len, "gradient accumulation: graph %s has no optimizer section",
                           g->name ? g->name : "?");
  int *out = malloc(sizeof(int) * (size_t)(g->nnode - first + 1));
  if (!out) return net_status_errf(NET_ERR_NOMEM, err, len, "out of memory");
  for (int i = first; i < g->nnode; i++) {
    const IrNode *n = &g->node[i];
    if (n->op != IR_OP_SGD_UPDATE) continue;
    int v = n->in[1], seen = 0;
    if (g->val[v].kind != IR_VAL_ACT || g->val[v].def < 0 || g->val[v].def >= first) {
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
