/* summary.c - the per-layer table and totals printed by `netc --summary`.
 *
 * Parameters are the trained values (weights, biases, batch-norm scale and
 * shift), not running statistics, matching PyTorch's parameter count.  MACs
 * count the multiply-accumulates of convolutions and linear layers in one
 * forward pass of one sample, as the usual published figures do. */
#include "summary.h"

#include <inttypes.h>
#include <string.h>

#include "pipeline.h"

int64_t summary_node_macs(const IrGraph *g, const IrNode *n) {
  if (n->nout == 0) return 0;
  const IrType *out = &g->val[n->out[0]].type;
  if (n->op == IR_OP_CONV2D) {
    const IrType *w = &g->val[n->in[1]].type; /* K x C/g x R x S, any order */
    int64_t wmacs = w->dim[0] * w->dim[1] * w->dim[2] * w->dim[3];
    int64_t spatial = out->layout == IR_LAYOUT_NHWC ? out->dim[1] * out->dim[2] : out->dim[2] * out->dim[3];
    return wmacs * spatial;
  }
  if (n->op == IR_OP_LINEAR) {
    const IrType *w = &g->val[n->in[1]].type;
    return w->dim[0] * w->dim[1];
  }
  return 0;
}

static int64_t node_params(const IrGraph *g, const IrNode *n) {
  int64_t p = 0;
  for (int i = 0; i < n->nin; i++) {
    const IrValue *v = &g->val[n->in[i]];
    if (v->kind == IR_VAL_PARAM) p += ir_type_numel(&v->type, 1);
  }
  return p;
}

SummaryTotals summary_totals(const IrGraph *g) {
  SummaryTotals t = {0, 0};
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_PARAM) t.params += ir_type_numel(&g->val[v].type, 1);
  for (int n = 0; n < g->nnode; n++) t.macs += summary_node_macs(g, &g->node[n]);
  return t;
}

/* "64x112x112": the per-sample shape (the batch dimension left out). */
static void shape_str(const IrType *t, char *buf, size_t len) {
  size_t o = 0;
  int first = 1;
  buf[0] = 0;
  for (int i = 0; i < t->rank && o < len; i++) {
    if (t->dim[i] == IR_DIM_N) continue;
    o += (size_t)snprintf(buf + o, len - o, "%s%" PRId64, first ? "" : "x", t->dim[i]);
    first = 0;
  }
  if (first) snprintf(buf, len, "scalar");
}

void summary_print(FILE *f, const IrGraph *g) {
  size_t w = 5;
  for (int n = 0; n < g->nnode; n++)
    if (g->node[n].name && strlen(g->node[n].name) > w) w = strlen(g->node[n].name);
  fprintf(f, "%-*s  %-22s %-16s %12s %14s\n", (int)w, "layer", "op", "output", "params", "macs");
  for (int n = 0; n < g->nnode; n++) {
    const IrNode *node = &g->node[n];
    if (node->nout == 0) continue;
    char shape[96];
    shape_str(&g->val[node->out[0]].type, shape, sizeof shape);
    fprintf(f, "%-*s  %-22s %-16s %12" PRId64 " %14" PRId64 "\n", (int)w, node->name ? node->name : "-",
            ir_op_info(node->op)->name, shape, node_params(g, node), summary_node_macs(g, node));
  }
  SummaryTotals t = summary_totals(g);
  fprintf(f, "params: %" PRId64 "\nmacs: %" PRId64 "\n", t.params, t.macs);
}

/* Bytes of the persistent values (weights, running statistics, optimizer
 * buffers), which live outside the activation arena; -1 on overflow. */
static int64_t persistent_bytes(const IrGraph *g) {
  int64_t total = 0;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind != IR_VAL_PARAM && val->kind != IR_VAL_STATE) continue;
    int64_t n = (int64_t)ir_dtype_size(val->type.dtype);
    for (int i = 0; i < val->type.rank; i++)
      if (__builtin_mul_overflow(n, val->type.dim[i] == IR_DIM_N ? 1 : val->type.dim[i], &n)) return -1;
    if (__builtin_add_overflow(total, n, &total)) return -1;
  }
  return total;
}

void summary_print_memory(FILE *f, const IrGraph *g) {
  if (g->plan_batch > 0)
    fprintf(f, "activation memory: %" PRId64 " bytes (batch %" PRId64 ", lower bound %" PRId64 " bytes)\n",
            g->plan_bytes, g->plan_batch, pass_memplan_lower_bound(g));
  else
    fprintf(f, "activation memory: not planned (memplan is off)\n");
  fprintf(f, "parameter and state memory: %" PRId64 " bytes\n", persistent_bytes(g));
}
