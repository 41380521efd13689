/* pass_prologue.c - batch norm + relu moved into the next convolution's
 * prologue, so that a conv + batch norm + relu's normalized output is never
 * stored.
 *
 * A training graph's conv2d_bn_train P with relu=1 writes z (the conv output)
 * and a = relu(bn(z)); when a is read only by convolutions, each can compute
 * it on the fly from z with the batch norm's equivalent scale and bias
 * (relu(bn(z)) == relu(z * scale + bias), cuDNN's ConvBNfprop and
 * ConvBNwgrad).  P becomes conv2d_bn_stats, which writes z, the batch
 * statistics and sb = [scale; bias] ([2, K] in z's dtype) instead of a, and
 * each reader of a reads z with sb as its prologue input sbx
 * (ir_conv_prologue: input 6 of conv2d_bn_train / conv2d_bn_stats, input 2
 * of conv2d_bwd_weight, before any residual).
 *
 * A max pool may read a too (ResNet's stem, whose max-pool backward the
 * fuse pass made maxpool_bn_relu_bwd): it becomes maxpool_bn_relu(z', beta,
 * gamma, mean, invstd), computing a from z' and the batch statistics by its
 * backward's expression, z' being z or the cast of z to a's dtype the
 * precision pass made (pool_z).  It also writes each window's winner (win,
 * i8, one byte per pooled element), and the backward of the same pool,
 * maxpool_bn_relu_bwd(dy, z', beta, gamma, mean, invstd), becomes
 * maxpool_bwd_win(dy, win): it reads the winners rather than searching every
 * window of the recomputed a again.  When that gradient's only reader is
 * the batch norm's batchnorm_relu_bwd(da, beta, z', gamma, mean, invstd),
 * the two become one batchnorm_relu_bwd_win(dy, win, beta, z', gamma,
 * mean, invstd): da is gathered where the batch norm's backward reads it,
 * never stored.
 *
 * When P's z is f32 and its only reader left is the cast of z to f16 or
 * bf16 that the precision pass made (the f32 stem, whose a only max pools
 * read, as z'), that cast is folded into P: P writes the rounded copy as
 * its fifth result zc, which every reader of the cast reads instead, so the
 * statistics pass reads the f32 z once (zc_cast).
 *
 * Assumes a verified graph after the precision pass.  P qualifies when it has
 * relu=1 (grouped or not), no residual, a is no graph output, and a has at least
 * one use, each input 0 of a conv2d_bn_train or conv2d_bn_stats or input 1
 * of a conv2d_bwd_weight, with groups=1 and no prologue of its own (then z
 * must be f16 or bf16: an f32 z, as in fp32 training or the f32 first conv,
 * is left alone), or input 0 of a maxpool with z' made before it.
 * Nodes are walked in order; a reader that later qualifies itself keeps its
 * sbx.  Guarantees the same nodes in the same order but folded casts and
 * each maxpool_bn_relu_bwd absorbed into its batchnorm_relu_bwd_win (sb
 * and zc are made by P, which precedes every reader), names, SrcLocs and
 * attributes kept (P loses relu; zc has no name of its own: the dump shows
 * it as P's result, the cast was "<P>.z.f16"); ids are renumbered densely.
 * Inference graphs go to pass_prologue_infer (a batch norm + relu read only
 * by a max pool applied by the pool).
 *
 *   before:  %10, %11, %12, %13 = conv2d_bn_train(%0, @c1.weight, ...) {... relu=1} : f16[N,8,8,8] NHWC, ...  # c1
 *            %14, %15, %16, %17 = conv2d_bn_train(%11, @c2.weight, ...) {... relu=1} : ...  # c2
 *            %40 = conv2d_bwd_weight(%39, %11) {...} : f16[8,3,3,8] KRSC  # c2.wgrad
 *   after:   %10, %11, %12, %13 = conv2d_bn_stats(%0, @c1.weight, ...) {...}
 *                : f16[N,8,8,8] NHWC, f32[8], f32[8], f16[2,8]  # c1
 *            %14, %15, %16, %17 = conv2d_bn_train(%10, @c2.weight, ..., %13) {... relu=1} : ...  # c2
 *            %40 = conv2d_bwd_weight(%39, %10, %13) {...} : f16[8,3,3,8] KRSC  # c2.wgrad
 *
 *   before:  %5, %6, %7, %8 = conv2d_bn_train(%3, %4, ...) {... relu=1 precision=f32 y_dtype=f16}
 *                : f32[N,112,112,64] NHWC, f16[N,112,112,64] NHWC, f32[64], f32[64]  # conv1
 *            %9 = cast(%5) {to=f16} : f16[N,112,112,64] NHWC  # conv1.z.f16
 *            %10 = maxpool(%6) {k=3x3 s=2x2 p=1x1} : f16[N,56,56,64] NHWC  # maxpool
 *   after:   %5, %6, %7, %8, %9 = conv2d_bn_stats(%3, %4, ...) {... precision=f32}
 *                : f32[N,112,112,64] NHWC, f32[64], f32[64], f32[2,64], f16[N,112,112,64] NHWC  # conv1
 *            %10, %11 = maxpool_bn_relu(%9, @bn1.bias, @bn1.weight, %6, %7) {k=3x3 s=2x2 p=1x1}
 *                : f16[N,56,56,64] NHWC, i8[N,56,56,64] NHWC  # maxpool
 *
 *   before:  %516 = maxpool_bn_relu_bwd(%514, %9, @bn1.bias, @bn1.weight, %6, %7) {k=3x3 s=2x2 p=1x1}
 *                : f16[N,112,112,64] NHWC  # maxpool.bwd
 *            %517, %518, %519 = batchnorm_relu_bwd(%516, @bn1.bias, %9, @bn1.weight, %6, %7) {dz_dtype=f32}
 *                : f32[N,112,112,64] NHWC, f32[64], f32[64]  # relu.bwd
 *   after:   %516, %517, %518 = batchnorm_relu_bwd_win(%514, %11, @bn1.bias, %9, @bn1.weight, %6, %7)
 *                {k=3x3 s=2x2 p=1x1 in_hw=112x112 dz_dtype=f32} : f32[N,112,112,64] NHWC, f32[64], f32[64]  # relu.bwd
 */
#include <string.h>

#include "pipeline.h"

typedef struct Pro {
  const IrGraph *g;
  char *is_out;   /* per value: a graph output */
  char *stats;    /* per node: becomes conv2d_bn_stats */
  int *sbx_from;  /* per node: the node whose sb it reads as its prologue, or -1 */
  int *pool_from; /* per node: a max pool of that node's a, becoming maxpool_bn_relu, or -1 */
  int *bwd_of;    /* per node: a maxpool_bn_relu_bwd, the max pool whose winners it reads, or -1 */
  int *win;       /* per node: a max pool's winners in the new graph, or -1 */
  int *bnb_of;    /* per node: a batchnorm_relu_bwd, the maxpool_bn_relu_bwd whose gradient it gathers, or -1 */
  char *absorbed; /* per node: a maxpool_bn_relu_bwd made part of its batchnorm_relu_bwd */
  int *subst;     /* per value: the value read instead (a -> z), or itself */
  int *zc_of;     /* per node: a stats node's cast of z, folded into it as zc (zc_cast), or -1 */
  char *folded;   /* per node: a cast folded into its stats node, not rebuilt */
} Pro;

/* The value a max pool of P's a reads instead, z in a's dtype: the cast
 * of z to it that the precision pass made (the f32 stem's f16 z), or z
 * itself when it has that dtype; -1 when neither exists. */
static int pool_z(const Pro *p, int n) {
  const IrGraph *g = p->g;
  const IrNode *node = &g->node[n];
  int z = node->out[0];
  IrDtype dt = g->val[node->out[1]].type.dtype;
  if (g->val[z].type.dtype == dt) return z;
  for (int u = n + 1; u < g->nnode; u++)
    if (g->node[u].op == IR_OP_CAST && g->node[u].in[0] == z && g->val[g->node[u].out[0]].type.dtype == dt)
      return g->node[u].out[0];
  return -1;
}

/* Input k of node u is a max pool of a that may recompute it from z. */
static int pool_use(const Pro *p, int n, int u, int k) {
  if (k != 0 || p->g->node[u].op != IR_OP_MAXPOOL) return 0;
  const IrAttr *w = ir_attr_find(&p->g->node[u], "k"); /* maxpool_bn_relu's winners fit an i8: at most 127 */
  if (w && (w->n >= 2 ? w->i[0] * w->i[1] : w->i[0] * w->i[0]) > 127) return 0;
  int z = pool_z(p, n);
  return z >= 0 && p->g->val[z].def < u;
}

static int is_conv_bn_fwd(const Pro *p, int n) {
  IrOp op = p->g->node[n].op;
  return op == IR_OP_CONV2D_BN_TRAIN || op == IR_OP_CONV2D_BN_STATS || p->stats[n];
}

/* Input k of node u may read a through a prologue. */
static int prologue_use(const Pro *p, int u, int k) {
  const IrNode *n = &p->g->node[u];
  if (ir_attr_int(n, "groups", 1) != 1 || ir_conv_prologue(p->g, n) >= 0 || p->sbx_from[u] >= 0) return 0;
  return (k == 0 && is_conv_bn_fwd(p, u)) || (k == 1 && n->op == IR_OP_CONV2D_BWD_WEIGHT);
}

static int qualifies(const Pro *p, int n) {
  const IrGraph *g = p->g;
  const IrNode *node = &g->node[n];
  if (node->op != IR_OP_CONV2D_BN_TRAIN || ir_attr_int(node, "relu", 0) != 1 || ir_conv_residual(g, node) >= 0)
    return 0;
  IrDtype dt = g->val[node->out[0]].type.dtype;
  int a = node->out[1], convs = 0, pools = 0;
  if (p->is_out[a]) return 0;
  for (int u = n + 1; u < g->nnode; u++)
    for (int k = 0; k < g->node[u].nin; k++) {
      if (g->node[u].in[k] != a) continue;
      if (prologue_use(p, u, k))
        convs++;
      else if (pool_use(p, n, u, k))
        pools++;
      else
        return 0;
    }
  return convs ? dt == IR_DT_F16 || dt == IR_DT_BF16 : pools > 0;
}

static void convert(Pro *p, int n) {
  const IrGraph *g = p->g;
  const IrNode *node = &g->node[n];
  int a = node->out[1];
  p->stats[n] = 1;
  p->subst[a] = node->out[0];
  for (int u = n + 1; u < g->nnode; u++)
    for (int k = 0; k < g->node[u].nin; k++)
      if (g->node[u].in[k] == a) *(g->node[u].op == IR_OP_MAXPOOL ? &p->pool_from[u] : &p->sbx_from[u]) = n;
}

/* The old graph's inputs of the maxpool_bn_relu that max pool n becomes:
 * z', beta, gamma, mean, invstd. */
static void pool_inputs(const Pro *p, int n, int old[5]) {
  const IrNode *P = &p->g->node[p->pool_from[n]];
  old[0] = pool_z(p, p->pool_from[n]), old[1] = P->in[3], old[2] = P->in[2], old[3] = P->out[2], old[4] = P->out[3];
}

static int same_window(const IrNode *a, const IrNode *b) {
  const char *keys[] = {"k", "s", "p"};
  for (int i = 0; i < 3; i++) {
    const IrAttr *x = ir_attr_find(a, keys[i]), *y = ir_attr_find(b, keys[i]);
    if (!x != !y || (x && (x->n != y->n || memcmp(x->i, y->i, sizeof x->i[0] * (size_t)x->n)))) return 0;
  }
  return 1;
}

/* The node after `from` that reads value v, when it is the only reader
 * and reads it once and v is no graph output; else -1. */
static int sole_reader(const Pro *p, int v, int from) {
  return p->is_out[v] ? -1 : ir_sole_reader(p->g, v, from, NULL);
}

/* Max-pool backward b of the pool's inputs old (pool_inputs): its gradient's
 * sole reader when that is the batch norm's batchnorm_relu_bwd(da, beta, z',
 * gamma, mean, invstd), else -1. */
static int bn_backward(const Pro *p, int b, const int old[5]) {
  int u = sole_reader(p, p->g->node[b].out[0], b);
  if (u < 0) return -1;
  const IrNode *node = &p->g->node[u];
  int want[6] = {p->g->node[b].out[0], old[1], old[0], old[2], old[3], old[4]};
  return node->op == IR_OP_BATCHNORM_RELU_BWD && !memcmp(node->in, want, sizeof want) ? u : -1;
}

/* For each max pool that becomes maxpool_bn_relu, its backward: the
 * maxpool_bn_relu_bwd after it of the same z', batch norm and window, and
 * the batch norm's backward that may gather its gradient. */
static void find_backwards(Pro *p) {
  const IrGraph *g = p->g;
  for (int n = 0; n < g->nnode; n++) {
    if (p->pool_from[n] < 0) continue;
    int old[5];
    pool_inputs(p, n, old);
    for (int u = n + 1; u < g->nnode; u++) {
      const IrNode *b = &g->node[u];
      if (b->op != IR_OP_MAXPOOL_BN_RELU_BWD || p->bwd_of[u] >= 0 || !same_window(b, &g->node[n]) ||
          memcmp(&b->in[1], old, sizeof old))
        continue;
      p->bwd_of[u] = n;
      int r = bn_backward(p, u, old);
      if (r >= 0) p->bnb_of[r] = u, p->absorbed[u] = 1;
      break;
    }
  }
}

/* A max pool of P's a as maxpool_bn_relu(z', beta, gamma, mean, invstd)
 * -> a', win: it recomputes a from z (pool_z) with the batch statistics. */
static int rebuild_pool(Pro *p, IrGraph *out, int n, int *map) {
  const IrGraph *g = p->g;
  const IrNode *node = &g->node[n];
  int *in = arena_alloc(out->arena, sizeof(int) * 5);
  IrType *type = arena_alloc(out->arena, sizeof(IrType) * 2);
  if (!in || !type) return -1;
  int old[5];
  pool_inputs(p, n, old);
  for (int i = 0; i < 5; i++) in[i] = map[old[i]];
  type[0] = type[1] = g->val[node->out[0]].type;
  type[1].dtype = IR_DT_I8;
  int id = ir_node_add(out, IR_OP_MAXPOOL_BN_RELU, node->name, node->loc, in, 5, type, 2);
  if (id < 0) return -1;
  out->node[id].attr = node->attr; /* attributes are immutable once made: share them */
  out->node[id].nattr = node->nattr;
  map[node->out[0]] = out->node[id].out[0];
  p->win[n] = out->node[id].out[1];
  return 0;
}

/* Node id of out gets the window attributes k, s, p of the old graph's
 * maxpool_bn_relu_bwd b, then in_hw: the pool's input size. */
static int window_attrs(const Pro *p, IrGraph *out, int id, int b) {
  const IrNode *node = &p->g->node[b];
  const char *keys[] = {"k", "s", "p"};
  for (int i = 0; i < 3; i++) {
    const IrAttr *a = ir_attr_find(node, keys[i]);
    if (a && !(a->kind == IR_ATTR_INT ? ir_attr_set_int(out, id, keys[i], a->i[0])
                                      : ir_attr_set_ints(out, id, keys[i], a->i, a->n)))
      return -1;
  }
  const IrType *type = &p->g->val[node->out[0]].type;
  int h = type->layout == IR_LAYOUT_NHWC ? 1 : 2;
  return ir_attr_set_ints(out, id, "in_hw", &type->dim[h], 2) ? 0 : -1;
}

/* A max pool's maxpool_bn_relu_bwd(dy, z', ...) as maxpool_bwd_win(dy, win). */
static int rebuild_pool_bwd(Pro *p, IrGraph *out, int u, int *map) {
  const IrGraph *g = p->g;
  const IrNode *node = &g->node[u];
  int *in = arena_alloc(out->arena, sizeof(int) * 2);
  IrType *type = arena_alloc(out->arena, sizeof(IrType));
  if (!in || !type) return -1;
  in[0] = map[node->in[0]], in[1] = p->win[p->bwd_of[u]];
  *type = g->val[node->out[0]].type;
  int id = ir_node_add(out, IR_OP_MAXPOOL_BWD_WIN, node->name, node->loc, in, 2, type, 1);
  if (id < 0 || window_attrs(p, out, id, u)) return -1;
  map[node->out[0]] = out->node[id].out[0];
  return 0;
}

/* Batch norm backward u of a max pool's gradient, batchnorm_relu_bwd(da,
 * beta, z', gamma, mean, invstd), as batchnorm_relu_bwd_win(dy, win, beta,
 * z', gamma, mean, invstd), dy and win those of the maxpool_bn_relu_bwd
 * that made da (absorbed: never rebuilt). */
static int rebuild_bn_bwd_win(Pro *p, IrGraph *out, int u, int *map) {
  const IrGraph *g = p->g;
  const IrNode *node = &g->node[u], *b = &g->node[p->bnb_of[u]];
  int *in = arena_alloc(out->arena, sizeof(int) * 7);
  IrType *type = arena_alloc(out->arena, sizeof(IrType) * 3);
  if (!in || !type) return -1;
  in[0] = map[b->in[0]], in[1] = p->win[p->bwd_of[p->bnb_of[u]]];
  for (int i = 1; i < 6; i++) in[i + 1] = map[node->in[i]];
  for (int i = 0; i < 3; i++) type[i] = g->val[node->out[i]].type;
  int id = ir_node_add(out, IR_OP_BATCHNORM_RELU_BWD_WIN, node->name, node->loc, in, 7, type, 3);
  if (id < 0 || window_attrs(p, out, id, p->bnb_of[u])) return -1;
  const IrAttr *dd = ir_attr_find(node, "dz_dtype");
  if (dd && !ir_attr_set_dtype(out, id, "dz_dtype", (IrDtype)dd->i[0])) return -1;
  for (int i = 0; i < 3; i++) map[node->out[i]] = out->node[id].out[i];
  return 0;
}

/* The cast that stats node n folds in as its fifth result zc, or -1: z is
 * f32, no graph output, and that cast to f16 or bf16 is its only reader in
 * the new graph (no prologue reads z through sb, no max pool reads z as z'). */
static int zc_cast(const Pro *p, int n) {
  const IrGraph *g = p->g;
  int z = g->node[n].out[0], cast = -1;
  if (p->is_out[z] || g->val[z].type.dtype != IR_DT_F32) return -1;
  for (int u = n + 1; u < g->nnode; u++) {
    if (p->sbx_from[u] == n || (p->pool_from[u] == n && pool_z(p, n) == z)) return -1;
    for (int k = 0; k < g->node[u].nin; k++) {
      if (g->node[u].in[k] != z) continue;
      if (cast >= 0 || g->node[u].op != IR_OP_CAST) return -1;
      cast = u;
    }
  }
  if (cast < 0) return -1;
  IrDtype to = g->val[g->node[cast].out[0]].type.dtype;
  return to == IR_DT_F16 || to == IR_DT_BF16 ? cast : -1;
}

/* zc_of and folded for every stats node; 0, or -1 when out of memory. */
static int find_copies(Pro *p, Arena *a) {
  const IrGraph *g = p->g;
  p->zc_of = arena_alloc(a, sizeof(int) * ((size_t)g->nnode + 1));
  p->folded = arena_alloc(a, (size_t)g->nnode + 1);
  if (!p->zc_of || !p->folded) return -1;
  memset(p->folded, 0, (size_t)g->nnode + 1);
  for (int n = 0; n < g->nnode; n++) p->zc_of[n] = -1;
  for (int n = 0; n < g->nnode; n++)
    if (p->stats[n] && (p->zc_of[n] = zc_cast(p, n)) >= 0) p->folded[p->zc_of[n]] = 1;
  return 0;
}

/* node's attributes without relu and y_dtype (conv2d_bn_stats has neither:
 * its y is not stored). */
static int attrs_without_relu(Arena *a, const IrNode *node, IrAttr **out) {
  IrAttr *at = arena_alloc(a, sizeof(IrAttr) * ((size_t)node->nattr + 1));
  if (!at) return -1;
  int k = 0;
  for (int i = 0; i < node->nattr; i++)
    if (strcmp(node->attr[i].key, "relu") && strcmp(node->attr[i].key, "y_dtype")) at[k++] = node->attr[i];
  *out = at;
  return k;
}

/* Node n of the old graph into out: inputs mapped (a read as z), the sbx
 * inserted at the prologue's place, a stats node's results (z, mean, invstd,
 * sb [, zc: the folded cast's value]); a folded cast is left out. */
static int rebuild_node(Pro *p, IrGraph *out, int n, int *map, int *sb_of) {
  if (p->folded[n]) return 0;
  if (p->pool_from[n] >= 0) return rebuild_pool(p, out, n, map);
  if (p->absorbed[n]) return 0;
  if (p->bwd_of[n] >= 0) return rebuild_pool_bwd(p, out, n, map);
  if (p->bnb_of[n] >= 0) return rebuild_bn_bwd_win(p, out, n, map);
  const IrGraph *g = p->g;
  const IrNode *node = &g->node[n];
  Arena *a = out->arena;
  int nin = node->nin + (p->sbx_from[n] >= 0), nout = node->nout + (p->zc_of[n] >= 0);
  int *in = arena_alloc(a, sizeof(int) * ((size_t)nin + 1));
  IrType *types = arena_alloc(a, sizeof(IrType) * ((size_t)nout + 1));
  if (!in || !types) return -1;
  int at = node->op == IR_OP_CONV2D_BWD_WEIGHT ? 2 : 6, k = 0;
  for (int i = 0; i < node->nin; i++) {
    if (p->sbx_from[n] >= 0 && i == at) in[k++] = sb_of[p->sbx_from[n]];
    in[k++] = map[p->subst[node->in[i]]];
  }
  if (k < nin) in[k++] = sb_of[p->sbx_from[n]];
  IrOp op = node->op;
  for (int i = 0; i < node->nout; i++) types[i] = g->val[node->out[i]].type;
  if (p->zc_of[n] >= 0) types[4] = g->val[g->node[p->zc_of[n]].out[0]].type;
  if (p->stats[n]) {
    op = IR_OP_CONV2D_BN_STATS;
    int64_t d[2] = {2, g->val[node->in[2]].type.dim[0]};
    types[1] = g->val[node->out[2]].type;
    types[2] = g->val[node->out[3]].type;
    types[3] = ir_type(g->val[node->out[0]].type.dtype, IR_LAYOUT_ROW, 2, d);
  }
  int id = ir_node_add(out, op, node->name, node->loc, in, nin, types, nout);
  if (id < 0) return -1;
  IrNode *copy = &out->node[id];
  if (p->stats[n]) {
    int na = attrs_without_relu(a, node, &copy->attr);
    if (na < 0) return -1;
    copy->nattr = na;
    map[node->out[0]] = copy->out[0];
    map[node->out[2]] = copy->out[1];
    map[node->out[3]] = copy->out[2];
    sb_of[n] = copy->out[3];
    if (p->zc_of[n] >= 0) map[g->node[p->zc_of[n]].out[0]] = copy->out[4];
  } else {
    copy->attr = node->attr; /* attributes are immutable once made: share them */
    copy->nattr = node->nattr;
    for (int i = 0; i < nout; i++) map[node->out[i]] = copy->out[i];
  }
  return 0;
}

IrGraph *pass_prologue(IrGraph *g, PassCtx *cx) {
  if (cx->inference) return pass_prologue_infer(g, cx);
  Arena *a = g->arena;
  Pro p = {.g = g,
           .is_out = arena_alloc(a, (size_t)g->nval + 1),
           .stats = arena_alloc(a, (size_t)g->nnode + 1),
           .sbx_from = arena_alloc(a, sizeof(int) * ((size_t)g->nnode + 1)),
           .pool_from = arena_alloc(a, sizeof(int) * ((size_t)g->nnode + 1)),
           .bwd_of = arena_alloc(a, sizeof(int) * ((size_t)g->nnode + 1)),
           .win = arena_alloc(a, sizeof(int) * ((size_t)g->nnode + 1)),
           .bnb_of = arena_alloc(a, sizeof(int) * ((size_t)g->nnode + 1)),
           .absorbed = arena_alloc(a, (size_t)g->nnode + 1),
           .subst = arena_alloc(a, sizeof(int) * ((size_t)g->nval + 1))};
  int *map = arena_alloc(a, sizeof(int) * ((size_t)g->nval + 1));
  int *sb_of = arena_alloc(a, sizeof(int) * ((size_t)g->nnode + 1));
  if (!p.is_out || !p.stats || !p.sbx_from || !p.pool_from || !p.bwd_of || !p.win || !p.bnb_of || !p.absorbed ||
      !p.subst || !map || !sb_of)
    return NULL;
  memset(p.is_out, 0, (size_t)g->nval + 1);
  memset(p.stats, 0, (size_t)g->nnode + 1);
  memset(p.absorbed, 0, (size_t)g->nnode + 1);
  for (int i = 0; i < g->noutput; i++) p.is_out[g->output[i]] = 1;
  for (int n = 0; n < g->nnode; n++)
    p.sbx_from[n] = p.pool_from[n] = p.bwd_of[n] = p.win[n] = p.bnb_of[n] = sb_of[n] = -1;
  for (int v = 0; v < g->nval; v++) p.subst[v] = v; /* map: ir_graph_rebuild fills it */
  int changed = 0;
  for (int n = 0; n < g->nnode; n++)
    if (qualifies(&p, n)) convert(&p, n), changed = 1;
  if (!changed) return g;
  find_backwards(&p);
  if (find_copies(&p, a)) return NULL;

  IrGraph *out = ir_graph_rebuild(g, map);
  if (!out) return NULL;
  for (int n = 0; n < g->nnode; n++) {
    ir_opt_follow(out, g, n);
    if (rebuild_node(&p, out, n, map, sb_of)) return NULL;
  }
  ir_opt_follow(out, g, g->nnode);
  for (int i = 0; i < g->noutput; i++)
    if (ir_output_add(out, map[g->output[i]])) return NULL;
  return out;
}
