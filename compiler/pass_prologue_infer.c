/* pass_prologue_infer.c - pass prologue on an inference graph: a batch
 * norm + relu whose only reader is a max pool is applied by the pool, as
 * it reads each window, and never stored.
 *
 * An inference conv2d_bn P with relu=1, no residual and no prologue, whose
 * result y is a float (ResNet's stem: an f32 convolution has no fused
 * epilogue, so the batch norm would run as a kernel of its own over y,
 * which the pool then reads again; an f16 one's convolution, without its
 * epilogue, is folded 2x2 on the GPU), no graph output, and read only by
 * one maxpool M:
 * P becomes conv2d(x, w) -> z, and M becomes maxpool_bn_relu_infer(z,
 * gamma, beta, running_mean, running_var) {k s p of M, eps of P}.  When M's
 * result is no graph output and its only reader is a cast to f16 or bf16
 * (the precision pass's, before the next layer), the cast is folded into
 * the pool as y_dtype: the maximum is rounded once, which gives the same
 * value as rounding each element first.  So is a cast to i8 by a
 * calibrated step (an INT8 model's layer1): y_dtype=i8, y_scale= the
 * cast's scale, the maximum quantized as the cast would.
 *
 * Assumes a verified inference graph after the precision pass; guarantees
 * the same nodes in the same order but each folded cast, names, SrcLocs
 * and attributes kept (P loses eps and relu; the pool's attributes are
 * M's and eps [, y_dtype [, y_scale]]); ids are renumbered densely.  Graphs without
 * such a P are returned unchanged.
 *
 *   before:  %4 = conv2d_bn(%2, %3, @bn1.weight, @bn1.bias, @bn1.running_mean, @bn1.running_var)
 *                {k=7x7 s=2x2 p=3x3 d=1x1 groups=1 eps=1e-05 relu=1 precision=f32 math="tf32"}
 *                : f32[N,112,112,64] NHWC  # conv1
 *            %5 = maxpool(%4) {k=3x3 s=2x2 p=1x1} : f32[N,56,56,64] NHWC  # maxpool
 *            %6 = cast(%5) {to=f16} : f16[N,56,56,64] NHWC  # maxpool.f16
 *   after:   %4 = conv2d(%2, %3) {k=7x7 s=2x2 p=3x3 d=1x1 groups=1 precision=f32 math="tf32"}
 *                : f32[N,112,112,64] NHWC  # conv1
 *            %5 = maxpool_bn_relu_infer(%4, @bn1.weight, @bn1.bias, @bn1.running_mean, @bn1.running_var)
 *                {k=3x3 s=2x2 p=1x1 eps=1e-05 y_dtype=f16} : f16[N,56,56,64] NHWC  # maxpool
 */
#include <string.h>

#include "pipeline.h"

typedef struct Inf {
  const IrGraph *g;
  char *is_out; /* per value: a graph output */
  int *pool_of; /* per node: a conv2d_bn P, its max pool; or -1 */
  int *bn_of;   /* per node: a max pool that becomes maxpool_bn_relu_infer, its P; or -1 */
  int *cast_of; /* per node: such a max pool, the cast folded into it; or -1 */
  char *folded; /* per node: a cast folded into its pool, not rebuilt */
} Inf;

/* The node after `from` that reads value v, when it is the only reader,
 * reads it once as input 0, and v is no graph output; else -1. */
static int sole_reader(const Inf *p, int v, int from) {
  int k = -1, r = p->is_out[v] ? -1 : ir_sole_reader(p->g, v, from, &k);
  return r >= 0 && k == 0 ? r : -1;
}

/* P = node n qualifies (above): its max pool, else -1. */
static int pool_reader(const Inf *p, int n) {
  const IrGraph *g = p->g;
  const IrNode *node = &g->node[n];
  IrDtype dt = g->val[node->out[0]].type.dtype;
  if (node->op != IR_OP_CONV2D_BN || node->nin != 6 || ir_attr_int(node, "relu", 0) != 1 ||
      (dt != IR_DT_F32 && dt != IR_DT_F16 && dt != IR_DT_BF16))
    return -1;
  int m = sole_reader(p, node->out[0], n);
  return m >= 0 && g->node[m].op == IR_OP_MAXPOOL ? m : -1;
}

/* Max pool m's cast to fold, else -1: to f16 or bf16, or to i8 by a
 * calibrated step (scale=, no axis: an INT8 model's next layer). */
static int pool_cast(const Inf *p, int m) {
  const IrGraph *g = p->g;
  int c = sole_reader(p, g->node[m].out[0], m);
  if (c < 0 || g->node[c].op != IR_OP_CAST) return -1;
  IrDtype to = g->val[g->node[c].out[0]].type.dtype;
  return to == IR_DT_F16 || to == IR_DT_BF16 || (to == IR_DT_I8 && ir_value_step(g, g->node[c].out[0]) > 0) ? c : -1;
}

/* Attribute `key` of node `from` copied onto node id of out (absent: nothing). */
static int copy_attr(IrGraph *out, int id, const IrNode *from, const char *key) {
  const IrAttr *a = ir_attr_find(from, key);
  if (!a) return 0;
  IrAttr *b = ir_attr_set_int(out, id, key, 0);
  if (!b) return -1;
  const char *k = b->key;
  *b = *a;
  b->key = k;
  return 0;
}

/* P as conv2d(x, w) -> z, its attributes but eps and relu. */
static int rebuild_conv(const Inf *p, IrGraph *out, int n, int *map) {
  const IrNode *node = &p->g->node[n];
  int in[2] = {map[node->in[0]], map[node->in[1]]};
  int id = ir_node_add(out, IR_OP_CONV2D, node->name, node->loc, in, 2, &p->g->val[node->out[0]].type, 1);
  if (id < 0) return -1;
  for (int i = 0; i < node->nattr; i++)
    if (strcmp(node->attr[i].key, "eps") && strcmp(node->attr[i].key, "relu") &&
        copy_attr(out, id, node, node->attr[i].key))
      return -1;
  map[node->out[0]] = out->node[id].out[0];
  return 0;
}

/* Max pool m as maxpool_bn_relu_infer(z, gamma, beta, mean, var) {k s p eps [y_dtype]}. */
static int rebuild_pool(const Inf *p, IrGraph *out, int m, int *map) {
  const IrGraph *g = p->g;
  const IrNode *node = &g->node[m], *bn = &g->node[p->bn_of[m]];
  int in[5] = {map[node->in[0]]};
  for (int i = 1; i < 5; i++) in[i] = map[bn->in[i + 1]];
  int c = p->cast_of[m];
  const IrType *t = &g->val[(c >= 0 ? g->node[c].out[0] : node->out[0])].type;
  int id = ir_node_add(out, IR_OP_MAXPOOL_BN_RELU_INFER, node->name, node->loc, in, 5, t, 1);
  if (id < 0 || copy_attr(out, id, node, "k") || copy_attr(out, id, node, "s") || copy_attr(out, id, node, "p") ||
      copy_attr(out, id, bn, "eps") || (c >= 0 && !ir_attr_set_dtype(out, id, "y_dtype", t->dtype)) ||
      (t->dtype == IR_DT_I8 && !ir_attr_set_float(out, id, "y_scale", ir_value_step(g, g->node[c].out[0]))))
    return -1;
  map[node->out[0]] = out->node[id].out[0];
  if (c >= 0) map[g->node[c].out[0]] = out->node[id].out[0];
  return 0;
}

static int rebuild_node(const Inf *p, IrGraph *out, int n, int *map) {
  if (p->folded[n]) return 0;
  if (p->pool_of[n] >= 0) return rebuild_conv(p, out, n, map);
  if (p->bn_of[n] >= 0) return rebuild_pool(p, out, n, map);
  const IrNode *node = &p->g->node[n];
  int *in = arena_alloc(out->arena, sizeof(int) * ((size_t)node->nin + 1));
  IrType *types = arena_alloc(out->arena, sizeof(IrType) * ((size_t)node->nout + 1));
  if (!in || !types) return -1;
  for (int i = 0; i < node->nin; i++) in[i] = map[node->in[i]];
  for (int i = 0; i < node->nout; i++) types[i] = p->g->val[node->out[i]].type;
  int id = ir_node_add(out, node->op, node->name, node->loc, in, node->nin, types, node->nout);
  if (id < 0) return -1;
  out->node[id].attr = node->attr; /* attributes are immutable once made: share them */
  out->node[id].nattr = node->nattr;
  for (int i = 0; i < node->nout; i++) map[node->out[i]] = out->node[id].out[i];
  return 0;
}

IrGraph *pass_prologue_infer(IrGraph *g, PassCtx *cx) {
  (void)cx;
  Arena *a = g->arena;
  size_t nn = (size_t)g->nnode + 1;
  Inf p = {.g = g,
           .is_out = arena_alloc(a, (size_t)g->nval + 1),
           .pool_of = arena_alloc(a, sizeof(int) * nn),
           .bn_of = arena_alloc(a, sizeof(int) * nn),
           .cast_of = arena_alloc(a, sizeof(int) * nn),
           .folded = arena_alloc(a, nn)};
  int *map = arena_alloc(a, sizeof(int) * ((size_t)g->nval + 1));
  if (!p.is_out || !p.pool_of || !p.bn_of || !p.cast_of || !p.folded || !map) return NULL;
  memset(p.is_out, 0, (size_t)g->nval + 1);
  memset(p.folded, 0, nn);
  for (int i = 0; i < g->noutput; i++) p.is_out[g->output[i]] = 1;
  for (int n = 0; n < g->nnode; n++) p.pool_of[n] = p.bn_of[n] = p.cast_of[n] = -1;
  int changed = 0;
  for (int n = 0; n < g->nnode; n++) {
    int m = pool_reader(&p, n);
    if (m < 0) continue;
    p.pool_of[n] = m, p.bn_of[m] = n, changed = 1;
    if ((p.cast_of[m] = pool_cast(&p, m)) >= 0) p.folded[p.cast_of[m]] = 1;
  }
  if (!changed) return g;

  IrGraph *out = ir_graph_rebuild(g, map);
  if (!out) return NULL;
  for (int n = 0; n < g->nnode; n++) {
    ir_opt_follow(out, g, n);
    if (rebuild_node(&p, out, n, map)) return NULL;
  }
  ir_opt_follow(out, g, g->nnode);
  for (int i = 0; i < g->noutput; i++)
    if (ir_output_add(out, map[g->output[i]])) return NULL;
  return out;
}
