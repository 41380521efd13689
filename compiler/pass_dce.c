/* pass_dce.c - dead-code elimination.
 *
 * Removes every node none of whose results reaches a graph output, and the
 * parameters and state that only such nodes used.  Assumes a verified graph;
 * guarantees the same outputs computed by a subset of the nodes, in the same
 * order, with the optimizer section starting where it did.  Nodes with no
 * results (in-place updates) are kept.
 *
 *   before:  %5 = relu(%4)          after:  (gone: %5 unused)
 *            output %3                      output %3
 */
#include <string.h>

#include "pipeline.h"

IrGraph *pass_dce(IrGraph *g, PassCtx *cx) {
  Arena *a = g->arena;
  char *live = arena_alloc(a, (size_t)g->nval + 1);
  char *keep = arena_alloc(a, (size_t)g->nnode + 1);
  if (!live || !keep) return NULL;
  for (int i = 0; i < g->noutput; i++) live[g->output[i]] = 1;
  for (int n = g->nnode - 1; n >= 0; n--) {
    const IrNode *node = &g->node[n];
    int used = node->nout == 0;
    for (int i = 0; i < node->nout; i++) used |= live[node->out[i]];
    if (!used) continue;
    keep[n] = 1;
    for (int i = 0; i < node->nin; i++) live[node->in[i]] = 1;
  }
  /* Rebuild with dense ids: inputs stay, unused params/state go. */
  IrGraph *out = ir_graph_new(a, g->name);
  int *map = arena_alloc(a, sizeof(int) * ((size_t)g->nval + 1));
  if (!out || !map) return NULL;
  for (int i = 0; i < g->ntrain; i++) ir_train_set(out, &g->train[i]);
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    map[v] = -1;
    if (val->kind == IR_VAL_ACT || (val->kind != IR_VAL_INPUT && !live[v])) continue;
    if ((map[v] = ir_value_add(out, val->kind, val->type, val->name)) < 0) return NULL;
  }
  for (int n = 0; n < g->nnode; n++) {
    ir_opt_follow(out, g, n);
    if (!keep[n]) continue;
    const IrNode *node = &g->node[n];
    int *in = arena_alloc(a, sizeof(int) * ((size_t)node->nin + 1));
    IrType *types = arena_alloc(a, sizeof(IrType) * ((size_t)node->nout + 1));
    if (!in || !types) return NULL;
    for (int i = 0; i < node->nin; i++) in[i] = map[node->in[i]];
    for (int i = 0; i < node->nout; i++) types[i] = g->val[node->out[i]].type;
    int id = ir_node_add(out, node->op, node->name, node->loc, in, node->nin, types, node->nout);
    if (id < 0) return NULL;
    IrNode *copy = &out->node[id];
    copy->attr = node->attr; /* attributes are immutable once made: share them */
    copy->nattr = node->nattr;
    for (int i = 0; i < node->nout; i++) map[node->out[i]] = copy->out[i];
  }
  ir_opt_follow(out, g, g->nnode);
  for (int i = 0; i < g->noutput; i++)
    if (ir_output_add(out, map[g->output[i]])) return NULL;
  (void)cx;
  return out;
}
