/* pass_fuse.c - operator fusion: conv + batch norm (+ relu), add + relu, and
 * their backward forms, so that a back end runs each group as one kernel.
 *
 * Assumes a verified graph: the training step autodiff makes, its inference
 * form (--inference), or the forward graph (-fno-autodiff).  Guarantees the
 * same results computed by fewer nodes (no pattern takes an optimizer-section
 * node: the section starts where it did); every rewrite is one of these
 * patterns, tried in this order (a node joins at most one fusion):
 *
 *   conv2d(x, w) -> batchnorm_train [-> relu]   => conv2d_bn_train {... relu}
 *   conv2d(x, w) -> batchnorm [-> relu]         => conv2d_bn {... relu}
 *   conv2d -> batchnorm[_train] -> add(., r) -> relu
 *                                  => conv2d_bn[_train](x, w, ..., r) {... relu=1}
 *   add -> relu                                 => add_relu
 *   relu_bwd(dy, y) -> batchnorm_bwd(., z, ...) => batchnorm_relu_bwd(dy, beta, z, ...)
 *   conv2d_bwd_data(dy, w) -> relu_bwd(., y) -> batchnorm_bwd(., z, ...)
 *                                  => conv2d_bwd_data_bn_relu(dy, w, beta, z, ...)
 *   conv2d_bwd_data(dy, w) -> relu_bwd(., y)    => conv2d_bwd_data_relu(dy, w, y)
 *   conv2d_bwd_data(dy, w) -> add(., g) -> relu_bwd(., y)
 *                                  => conv2d_bwd_data_relu(dy, w, y, g)
 *   add(a, b) -> relu_bwd(., y)                 => sum_relu_bwd(a, b, y)
 *   maxpool_bwd(dy, y), y = relu(batchnorm_train(z)) read only by its max pool
 *                                  => maxpool_bn_relu_bwd(dy, z, beta, gamma, mean, invstd)
 *
 * The third is a residual block's end: the batch norm's output plus the
 * shortcut r, then relu, in one pass (r must be made before the conv; of
 * a block whose shortcut is itself a conv + batch norm, the later of the two
 * takes the other's output as r).
 * The last two are the gradient at a residual block's input: its two
 * branches' gradients are summed, then masked by the previous block's relu;
 * when one of them is a data gradient made after the other, the convolution
 * adds and masks in its epilogue.  A relu_bwd that a batch norm's backward
 * can take goes there instead.
 * A value that disappears (the conv output at inference, the batch norm's
 * output before its relu, the add's output, the masked gradient, the
 * unmasked data gradient, the gradient sum) must have exactly one use, by the next node of the
 * pattern, and not be a graph output; otherwise the pattern is left alone.
 * In training the conv output z survives as conv2d_bn_train's first result,
 * so besides the batch norm it may be read by that batch norm's backward
 * (batchnorm_bwd with x = z and the batch mean of that batch norm).  Uses of
 * a removed node's surviving result (relu_bwd's y, batchnorm_bwd's z and
 * batch statistics) are rewired to the fused node's result.  The fused node
 * stands where its first node stood, takes that node's name, SrcLoc and
 * precision= attribute (a later node asking for a different precision keeps
 * the pattern apart), and its attributes follow the op table.  A pattern
 * whose later node reads a value made after the first node is left alone, so
 * the order stays topological.
 *
 *   before:  %4 = conv2d(%0, @conv.weight) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,4,4,4] NCHW  # conv
 *            %5, %6, %7 = batchnorm_train(%4, @bn.weight, @bn.bias, @bn.running_mean, @bn.running_var) {eps=1e-05 momentum=0.1} : ...  # bn
 *            %8 = relu(%5) : f32[N,4,4,4] NCHW  # act
 *   after:   %4, %5, %6, %7 = conv2d_bn_train(%0, @conv.weight, @bn.weight, @bn.bias, @bn.running_mean, @bn.running_var)
 *                {k=3x3 s=1x1 p=1x1 d=1x1 groups=1 eps=1e-05 momentum=0.1 relu=1} : ...  # conv
 *
 * docs/passes/fuse.md has every pattern before and after. */
#include <string.h>

#include "pipeline.h"

enum { MAX_IN = 7, MAX_OUT = 4, MAX_ATTR = 9, MAX_MEMBERS = 4 };
enum { ROLE_COPY = -1, ROLE_ABSORBED = -2 };

/* One rewrite: the node that replaces the members, in terms of old value ids. */
typedef struct Fusion {
  IrOp op;
  int member[MAX_MEMBERS], nmember; /* old node indices, first one first */
  int in[MAX_IN], nin;              /* old value ids */
  IrAttr attr[MAX_ATTR];
  int nattr;
  IrType type[MAX_OUT];
  int from[MAX_OUT]; /* the old value each result stands for */
  int nout;
} Fusion;

typedef struct Fz {
  const IrGraph *g;
  int *use_at;   /* value v's uses are use_node[use_at[v] .. use_at[v+1]-1] */
  int *use_node; /* consuming node, once per input slot */
  char *is_out;  /* value is a graph output */
  int *role;     /* per node: ROLE_COPY, ROLE_ABSORBED or its fusion's index */
  Fusion *fus;
  int nfus;
} Fz;

static int nuses(const Fz *f, int v) { return f->use_at[v + 1] - f->use_at[v]; }

/* The one node reading v, when v has exactly one use and is not an output; else -1. */
static int sole_user(const Fz *f, int v) {
  if (f->is_out[v] || nuses(f, v) != 1) return -1;
  return f->use_node[f->use_at[v]];
}

static const IrNode *node(const Fz *f, int n) { return &f->g->node[n]; }

static int is_free(const Fz *f, int n, IrOp op) { return f->role[n] == ROLE_COPY && node(f, n)->op == op; }

/* Later members may not ask for a precision other than the first's. */
static int same_precision(const Fz *f, int first, int later) {
  const IrAttr *a = ir_attr_find(node(f, first), "precision"), *b = ir_attr_find(node(f, later), "precision");
  return !b || (a && a->i[0] == b->i[0]);
}

/* v is a param, input or state, or made by a node before index `at`. */
static int ready_before(const Fz *f, int v, int at) { return f->g->val[v].def < at; }

static void add_attr(Fusion *u, const IrNode *from, const char *key) {
  const IrAttr *a = ir_attr_find(from, key);
  if (a && u->nattr < MAX_ATTR) u->attr[u->nattr++] = *a;
}

static void add_int(Fusion *u, const char *key, int64_t v) {
  if (u->nattr < MAX_ATTR) u->attr[u->nattr++] = (IrAttr){.key = key, .kind = IR_ATTR_INT, .n = 1, .i = {v}};
}

/* Types u with the op's rule against the old graph and checks that every
 * result has the type of the value it stands for (1), or 0. */
static int typed(Fz *f, Fusion *u) {
  const IrNode *first = node(f, u->member[0]);
  add_attr(u, first, "precision");
  const IrOpInfo *info = ir_op_info(u->op);
  IrNode probe = {.op = u->op, .nin = u->nin, .in = u->in, .nattr = u->nattr, .attr = u->attr};
  char err[256];
  if (info->nout != u->nout || ir_infer(f->g, &probe, u->type, err, sizeof err)) return 0;
  /* e.g. a hand-written graph mixing dtypes where the fused rule types differently */
  for (int k = 0; k < u->nout; k++)
    if (!ir_type_equal(&u->type[k], &f->g->val[u->from[k]].type)) return 0;
  return 1;
}

/* Records u as fusion k (claiming its members); 1. */
static int claim(Fz *f, int k, const Fusion *u) {
  f->role[u->member[0]] = k;
  for (int m = 1; m < u->nmember; m++) f->role[u->member[m]] = ROLE_ABSORBED;
  f->fus[k] = *u;
  return 1;
}

/* u, when typed, as a new fusion: 1 recorded, 0 left alone. */
static int commit(Fz *f, Fusion *u) { return typed(f, u) ? claim(f, f->nfus++, u) : 0; }

/* u, when typed, in place of fusion k, whose members it includes. */
static int replace(Fz *f, int k, Fusion *u) { return typed(f, u) ? claim(f, k, u) : 0; }

/* --- patterns: each gets a free node and tries to make it a fusion's first -- */

/* Every use of z other than batch norm b is the backward of b (x = z, its batch mean). */
static int z_only_for(const Fz *f, int z, int b) {
  if (f->is_out[z]) return 0;
  for (int i = f->use_at[z]; i < f->use_at[z + 1]; i++) {
    const IrNode *u = node(f, f->use_node[i]);
    if (f->use_node[i] == b) continue;
    if (u->op != IR_OP_BATCHNORM_BWD || u->in[1] != z || u->in[0] == z || u->in[3] != node(f, b)->out[1]) return 0;
  }
  return 1;
}

/* conv2d (no bias) -> batchnorm_train | batchnorm, then relu when the batch
 * norm's output goes only there. */
static int match_conv_bn(Fz *f, int c) {
  const IrNode *conv = node(f, c);
  if (conv->op != IR_OP_CONV2D || conv->nin != 2) return 0;
  int z = conv->out[0], b = -1;
  for (int i = f->use_at[z]; i < f->use_at[z + 1] && b < 0; i++) {
    int u = f->use_node[i];
    if ((is_free(f, u, IR_OP_BATCHNORM_TRAIN) || is_free(f, u, IR_OP_BATCHNORM)) && node(f, u)->in[0] == z) b = u;
  }
  if (b < 0 || !same_precision(f, c, b)) return 0;
  const IrNode *bn = node(f, b);
  int training = bn->op == IR_OP_BATCHNORM_TRAIN;
  if (training ? !z_only_for(f, z, b) : sole_user(f, z) != b) return 0;
  for (int i = 1; i < 5; i++)
    if (!ready_before(f, bn->in[i], c)) return 0;
  int r = sole_user(f, bn->out[0]), a = -1, res = -1;
  if (r >= 0 && is_free(f, r, IR_OP_ADD) && same_precision(f, c, r)) { /* bn -> add -> relu */
    const IrNode *add = node(f, r);
    res = add->in[0] == bn->out[0] ? add->in[1] : add->in[0];
    a = r, r = sole_user(f, add->out[0]);
    if (res == bn->out[0] || !ready_before(f, res, c) || r < 0 || !is_free(f, r, IR_OP_RELU) ||
        !same_precision(f, c, r))
      a = res = r = -1;
  } else if (r >= 0 && !(is_free(f, r, IR_OP_RELU) && same_precision(f, c, r))) {
    r = -1;
  }

  Fusion u = {.op = training ? IR_OP_CONV2D_BN_TRAIN : IR_OP_CONV2D_BN,
              .member = {c, b, a >= 0 ? a : r, r},
              .nmember = a >= 0   ? 4
                         : r >= 0 ? 3
                                  : 2,
              .nin = res >= 0 ? 7 : 6};
  u.in[0] = conv->in[0], u.in[1] = conv->in[1];
  for (int i = 1; i < 5; i++) u.in[i + 1] = bn->in[i];
  if (res >= 0) u.in[6] = res;
  static const char *const conv_keys[] = {"k", "s", "p", "d", "groups"};
  for (int i = 0; i < 5; i++) add_attr(&u, conv, conv_keys[i]);
  add_attr(&u, bn, "eps");
  if (training) add_attr(&u, bn, "momentum");
  add_int(&u, "relu", r >= 0);
  int y = r >= 0 ? node(f, r)->out[0] : bn->out[0];
  if (training) {
    u.nout = 4;
    u.from[0] = z, u.from[1] = y, u.from[2] = bn->out[1], u.from[3] = bn->out[2];
  } else {
    u.nout = 1;
    u.from[0] = y;
  }
  return commit(f, &u);
}

static int match_add_relu(Fz *f, int a) {
  const IrNode *add = node(f, a);
  if (add->op != IR_OP_ADD) return 0;
  int r = sole_user(f, add->out[0]);
  if (r < 0 || !is_free(f, r, IR_OP_RELU) || !same_precision(f, a, r)) return 0;
  Fusion u = {.op = IR_OP_ADD_RELU,
              .member = {a, r},
              .nmember = 2,
              .in = {add->in[0], add->in[1]},
              .nin = 2,
              .from = {node(f, r)->out[0]},
              .nout = 1};
  return commit(f, &u);
}

/* relu_bwd(dy, y) -> batchnorm_bwd(masked, z, gamma, mean, invstd) where y
 * is relu of that batch norm's output: the fused node recomputes the mask
 * from z (z's normalization and beta), so the backward never reads y. */
static int match_bn_relu_bwd(Fz *f, int rb) {
  const IrNode *mask = node(f, rb);
  if (mask->op != IR_OP_RELU_BWD) return 0;
  int b = sole_user(f, mask->out[0]);
  if (b < 0 || !is_free(f, b, IR_OP_BATCHNORM_BWD) || node(f, b)->in[0] != mask->out[0] || !same_precision(f, rb, b))
    return 0;
  const IrNode *bb = node(f, b);
  int fwd = f->g->val[bb->in[3]].def, relu = f->g->val[mask->in[1]].def; /* the batch norm, the relu */
  if (fwd < 0 || relu < 0 || node(f, fwd)->op != IR_OP_BATCHNORM_TRAIN || node(f, fwd)->out[1] != bb->in[3] ||
      node(f, fwd)->in[0] != bb->in[1] || node(f, relu)->op != IR_OP_RELU ||
      node(f, relu)->in[0] != node(f, fwd)->out[0])
    return 0;
  int beta = node(f, fwd)->in[2];
  for (int i = 1; i < 5; i++)
    if (!ready_before(f, bb->in[i], rb)) return 0;
  Fusion u = {.op = IR_OP_BATCHNORM_RELU_BWD,
              .member = {rb, b},
              .nmember = 2,
              .in = {mask->in[0], beta, bb->in[1], bb->in[2], bb->in[3], bb->in[4]},
              .nin = 6,
              .from = {bb->out[0], bb->out[1], bb->out[2]},
              .nout = 3};
  return commit(f, &u);
}

/* conv2d_bwd_data(dy, w) [-> add(., g)] -> relu_bwd(., y), after the
 * relu_bwd was not taken by a batch norm's backward.  With the add, g is the
 * other branch's gradient at a residual block's input and must be ready
 * before the data gradient: of two data gradients summed (a block with a
 * shortcut convolution), the later one takes the earlier as g. */
static int match_dgrad_relu(Fz *f, int d) {
  const IrNode *dgrad = node(f, d);
  if (dgrad->op != IR_OP_CONV2D_BWD_DATA) return 0;
  int dx = dgrad->out[0], rb = sole_user(f, dx), a = -1, g = -1;
  if (rb >= 0 && is_free(f, rb, IR_OP_ADD) && same_precision(f, d, rb)) {
    const IrNode *add = node(f, rb);
    g = add->in[0] == dx ? add->in[1] : add->in[0];
    if (g == dx || !ready_before(f, g, d)) return 0;
    a = rb, dx = add->out[0], rb = sole_user(f, dx);
  }
  if (rb < 0 || !is_free(f, rb, IR_OP_RELU_BWD) || node(f, rb)->in[0] != dx || !same_precision(f, d, rb) ||
      !ready_before(f, node(f, rb)->in[1], d))
    return 0;
  Fusion u = {.op = IR_OP_CONV2D_BWD_DATA_RELU,
              .member = {d, a >= 0 ? a : rb, rb},
              .nmember = a >= 0 ? 3 : 2,
              .in = {dgrad->in[0], dgrad->in[1], node(f, rb)->in[1], g},
              .nin = a >= 0 ? 4 : 3,
              .from = {node(f, rb)->out[0]},
              .nout = 1};
  static const char *const keys[] = {"k", "s", "p", "d", "groups", "in_hw"};
  for (int i = 0; i < 6; i++) add_attr(&u, dgrad, keys[i]);
  return commit(f, &u);
}

/* Channels of activation v (NCHW or NHWC; rank 4), else -1. */
static int64_t channels(const Fz *f, int v) {
  const IrType *t = &f->g->val[v].type;
  if (t->rank != 4) return -1;
  return t->layout == IR_LAYOUT_NHWC ? t->dim[3] : t->dim[1];
}

/* conv2d_bwd_data(dy, w) -> the relu_bwd that begins a batchnorm_relu_bwd
 * fusion (match_bn_relu_bwd): that fusion grows to start at the data
 * gradient, conv2d_bwd_data_bn_relu(dy, w, beta, z, gamma, mean, invstd),
 * when its batch-norm inputs are ready before the data gradient (they are
 * the forward's), it is the data gradient's only use, and z has a multiple
 * of 16 channels (the layout pass pads no such count, for any dtype: the
 * fused op has no padded form).  A back end runs the convolution with the
 * mask and the batch norm's backward sums in its epilogue (cuDNN's
 * DgradDreluBNBwdWeight), so the gradient is read once less. */
static int match_dgrad_bn_relu(Fz *f, int d) {
  const IrNode *dgrad = node(f, d);
  if (dgrad->op != IR_OP_CONV2D_BWD_DATA) return 0;
  int rb = sole_user(f, dgrad->out[0]);
  if (rb < 0 || f->role[rb] < 0 || node(f, rb)->in[0] != dgrad->out[0] || !same_precision(f, d, rb)) return 0;
  int k = f->role[rb];
  const Fusion *bn = &f->fus[k];
  if (bn->op != IR_OP_BATCHNORM_RELU_BWD || bn->member[0] != rb || channels(f, bn->in[2]) % 16) return 0;
  for (int i = 1; i < bn->nin; i++)
    if (!ready_before(f, bn->in[i], d)) return 0;
  Fusion u = {.op = IR_OP_CONV2D_BWD_DATA_BN_RELU,
              .member = {d, rb, bn->member[1]},
              .nmember = 3,
              .nin = 7,
              .from = {bn->from[0], bn->from[1], bn->from[2]},
              .nout = 3};
  u.in[0] = dgrad->in[0], u.in[1] = dgrad->in[1];
  for (int i = 1; i < 6; i++) u.in[i + 1] = bn->in[i];
  static const char *const keys[] = {"k", "s", "p", "d", "groups", "in_hw"};
  for (int i = 0; i < 6; i++) add_attr(&u, dgrad, keys[i]);
  return replace(f, k, &u);
}

/* maxpool_bwd(dy, y) where y = relu(batchnorm_train(z)) is read only by
 * its max pool, this backward and relu backwards fused already (whose mask
 * is recomputed from z): ResNet's stem.  The backward recomputes y from z
 * and the batch statistics, maxpool_bn_relu_bwd(dy, z, beta, gamma, mean,
 * invstd), so y dies after the max pool instead of living through the
 * whole step (z is kept for the batch norm's backward anyway). */
static int match_maxpool_bn_relu_bwd(Fz *f, int m) {
  const IrNode *mb = node(f, m);
  if (mb->op != IR_OP_MAXPOOL_BWD) return 0;
  int y = mb->in[1], r = f->g->val[y].def;
  if (r < 0 || node(f, r)->op != IR_OP_RELU || f->is_out[y]) return 0;
  int b = f->g->val[node(f, r)->in[0]].def;
  if (b < 0 || node(f, b)->op != IR_OP_BATCHNORM_TRAIN || node(f, b)->out[0] != node(f, r)->in[0]) return 0;
  for (int i = f->use_at[y]; i < f->use_at[y + 1]; i++) {
    const IrNode *u = node(f, f->use_node[i]);
    if (f->use_node[i] != m && !(u->op == IR_OP_MAXPOOL && u->in[0] == y) &&
        !(u->op == IR_OP_RELU_BWD && u->in[1] == y && f->role[f->use_node[i]] != ROLE_COPY))
      return 0;
  }
  const IrNode *bn = node(f, b);
  Fusion u = {.op = IR_OP_MAXPOOL_BN_RELU_BWD,
              .member = {m},
              .nmember = 1,
              .in = {mb->in[0], bn->in[0], bn->in[2], bn->in[1], bn->out[1], bn->out[2]},
              .nin = 6,
              .from = {mb->out[0]},
              .nout = 1};
  static const char *const keys[] = {"k", "s", "p"};
  for (int i = 0; i < 3; i++) add_attr(&u, mb, keys[i]);
  return commit(f, &u);
}

/* add(a, b) -> relu_bwd(sum, y), unless a batch norm's backward takes the
 * relu_bwd alone (batchnorm_relu_bwd saves more). */
static int match_sum_relu_bwd(Fz *f, int a) {
  const IrNode *add = node(f, a);
  if (add->op != IR_OP_ADD) return 0;
  int rb = sole_user(f, add->out[0]);
  if (rb < 0 || !is_free(f, rb, IR_OP_RELU_BWD) || node(f, rb)->in[0] != add->out[0] || !same_precision(f, a, rb) ||
      !ready_before(f, node(f, rb)->in[1], a))
    return 0;
  int b = sole_user(f, node(f, rb)->out[0]);
  if (b >= 0 && is_free(f, b, IR_OP_BATCHNORM_BWD) && node(f, b)->in[0] == node(f, rb)->out[0]) return 0;
  Fusion u = {.op = IR_OP_SUM_RELU_BWD,
              .member = {a, rb},
              .nmember = 2,
              .in = {add->in[0], add->in[1], node(f, rb)->in[1]},
              .nin = 3,
              .from = {node(f, rb)->out[0]},
              .nout = 1};
  return commit(f, &u);
}

typedef int (*MatchFn)(Fz *f, int n);

/* In priority order: a relu_bwd goes to its batch norm before its conv. */
static const MatchFn PATTERNS[] = {match_conv_bn,    match_add_relu,     match_bn_relu_bwd,        match_dgrad_bn_relu,
                                   match_dgrad_relu, match_sum_relu_bwd, match_maxpool_bn_relu_bwd};

/* --- the pass ---------------------------------------------------------------- */

static int index_uses(Fz *f, Arena *a) {
  const IrGraph *g = f->g;
  size_t nv = (size_t)g->nval;
  f->use_at = arena_alloc(a, sizeof(int) * (nv + 2));
  f->is_out = arena_alloc(a, nv + 1);
  int total = 0;
  for (int n = 0; n < g->nnode; n++) total += g->node[n].nin;
  f->use_node = arena_alloc(a, sizeof(int) * ((size_t)total + 1));
  int *fill = arena_alloc(a, sizeof(int) * (nv + 1));
  f->role = arena_alloc(a, sizeof(int) * ((size_t)g->nnode + 1));
  f->fus = arena_alloc(a, sizeof(Fusion) * ((size_t)g->nnode / 2 + 1)); /* each takes two nodes or more */
  if (!f->use_at || !f->is_out || !f->use_node || !fill || !f->role || !f->fus) return -1;
  for (int n = 0; n < g->nnode; n++)
    for (int i = 0; i < g->node[n].nin; i++) f->use_at[g->node[n].in[i] + 1]++;
  for (size_t v = 0; v < nv; v++) f->use_at[v + 1] += f->use_at[v];
  for (int n = 0; n < g->nnode; n++) {
    const IrNode *nd = &g->node[n];
    f->role[n] = ROLE_COPY;
    for (int i = 0; i < nd->nin; i++) f->use_node[f->use_at[nd->in[i]] + fill[nd->in[i]]++] = n;
  }
  for (int i = 0; i < g->noutput; i++) f->is_out[g->output[i]] = 1;
  return 0;
}

/* Adds node (op, inputs mapped from old ids, attrs shared) to out; -1 when out of memory. */
static int emit(IrGraph *out, const int *map, IrOp op, const IrNode *like, const int *old_in, int nin,
                const IrType *types, int nout, IrAttr *attr, int nattr) {
  int *in = arena_alloc(out->arena, sizeof(int) * ((size_t)nin + 1));
  if (!in) return -1;
  for (int i = 0; i < nin; i++) in[i] = map[old_in[i]];
  int id = ir_node_add(out, op, like->name, like->loc, in, nin, types, nout);
  if (id < 0) return -1;
  out->node[id].attr = attr;
  out->node[id].nattr = nattr;
  return id;
}

static IrGraph *rebuild(const Fz *f) {
  const IrGraph *g = f->g;
  Arena *a = g->arena;
  int *map = arena_alloc(a, sizeof(int) * ((size_t)g->nval + 1));
  IrGraph *out = map ? ir_graph_rebuild(g, map) : NULL;
  if (!out) return NULL;
  for (int n = 0; n < g->nnode; n++) {
    const IrNode *nd = &g->node[n];
    int id;
    ir_opt_follow(out, g, n);
    if (f->role[n] == ROLE_ABSORBED) continue;
    if (f->role[n] == ROLE_COPY) {
      IrType *types = arena_alloc(a, sizeof(IrType) * ((size_t)nd->nout + 1));
      if (!types) return NULL;
      for (int i = 0; i < nd->nout; i++) types[i] = g->val[nd->out[i]].type;
      /* attributes are immutable once made: share them */
      if ((id = emit(out, map, nd->op, nd, nd->in, nd->nin, types, nd->nout, nd->attr, nd->nattr)) < 0) return NULL;
      for (int i = 0; i < nd->nout; i++) map[nd->out[i]] = out->node[id].out[i];
      continue;
    }
    const Fusion *u = &f->fus[f->role[n]];
    IrAttr *attr = u->nattr ? arena_alloc(a, sizeof(IrAttr) * (size_t)u->nattr) : NULL;
    if (u->nattr && !attr) return NULL;
    if (u->nattr) memcpy(attr, u->attr, sizeof(IrAttr) * (size_t)u->nattr);
    if ((id = emit(out, map, u->op, nd, u->in, u->nin, u->type, u->nout, attr, u->nattr)) < 0) return NULL;
    for (int k = 0; k < u->nout; k++) map[u->from[k]] = out->node[id].out[k];
  }
  ir_opt_follow(out, g, g->nnode);
  for (int i = 0; i < g->noutput; i++)
    if (ir_output_add(out, map[g->output[i]])) return NULL;
  return out;
}

IrGraph *pass_fuse(IrGraph *g, PassCtx *cx) {
  Fz f = {.g = g};
  IrGraph *out = NULL;
  if (!index_uses(&f, g->arena)) {
    for (size_t p = 0; p < sizeof PATTERNS / sizeof PATTERNS[0]; p++)
      for (int n = 0; n < g->nnode; n++)
        if (f.role[n] == ROLE_COPY) PATTERNS[p](&f, n);
    out = rebuild(&f);
  }
  if (!out) diag_error(cx->d, (SrcLoc){0}, "fuse: out of memory");
  return out;
}
