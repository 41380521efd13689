/* pass_autodiff.c - reverse-mode differentiation: forward graph -> training step.
 *
 * Assumes a verified forward graph whose outputs are [loss, logits], the
 * loss made by softmax_cross_entropy (as lowering and dce leave it).
 * Training (cx->inference == 0) rebuilds the graph as: the forward nodes in
 * their order, batchnorm turned into batchnorm_train (batch statistics, the
 * running ones updated in place); then the backward nodes in reverse
 * topological order, seeded by softmax_cross_entropy_bwd scaled by the new
 * input loss_scale; then the optimizer section (IrGraph.opt_first, the
 * dump's `optimizer:` line): one sgd_update per parameter with a gradient,
 * with a new state `<param>.momentum_buffer` and the new input lr.  Gradients are
 * made only where they can reach a parameter (none for the image), a value
 * used twice gets its gradients summed by `add` in a fixed order, and every
 * new node carries its forward node's location and layer name plus a suffix
 * (.dgrad .wgrad .bgrad .bwd .grad_sum .sgd).  Outputs stay [loss, logits].
 * With cx->inference the loss node is dropped, batchnorm keeps its running
 * statistics and the only output is the logits.  An op with no rule below
 * is an error at its location.  Guarantees a graph that ir_verify accepts.
 *
 *   before:  %6 = flatten(%5) : f32[N,4]  # flat
 *            %7 = linear(%6, @fc.weight, @fc.bias) : f32[N,2]  # fc
 *            %8 = softmax_cross_entropy(%7, %1) {smoothing=0.0} : f32[]  # loss
 *   after:   ... %12 = softmax_cross_entropy(%11, %1) {smoothing=0.0} : f32[]  # loss
 *            %13 = softmax_cross_entropy_bwd(%11, %1, %3) {smoothing=0.0} : f32[N,2]  # loss.bwd
 *            %14 = linear_bwd_data(%13, @fc.weight) : f32[N,4]  # fc.dgrad
 *            %15 = linear_bwd_weight(%13, %10) : f32[2,4]  # fc.wgrad
 *            %16 = channel_sum(%13) : f32[2]  # fc.bgrad
 *            %17 = unflatten(%14) {shape=4x1x1} : f32[N,4,1,1] NCHW  # flat.bwd
 *            ...
 *            optimizer:
 *            sgd_update(@fc.weight, %15, @fc.weight.momentum_buffer, %2, %3) {momentum=0.9 nesterov=1 weight_decay=0.0005}  # fc.weight.sgd
 *
 * The rule table and a whole before/after are in docs/passes/autodiff.md.
 */
#include <string.h>

#include "pipeline.h"

enum { MAX_EMIT_IN = 5, MAX_EMIT_ATTR = 8 };

typedef struct Ad {
  const IrGraph *g; /* the forward graph */
  IrGraph *out;     /* the graph being built */
  Diag *d;
  int *map;       /* forward value -> its copy in out, or -1 */
  int *grad;      /* forward value -> its gradient in out, or -1 */
  char *needs;    /* forward value depends on a parameter: its gradient is wanted */
  int *node_at;   /* forward node -> its copy's index in out, or -1 */
  int *first_use; /* forward value -> first forward node reading it, or -1 */
  int loss;       /* index of the loss node in g */
  int lr, scale;  /* the new inputs, ids in out */
} Ad;

/* A node to be added: inputs are ids in `out`, attributes in the op table's order. */
typedef struct Emit {
  IrOp op;
  int in[MAX_EMIT_IN];
  int nin;
  IrAttr attr[MAX_EMIT_ATTR];
  int nattr;
} Emit;

static int fail_oom(Ad *ad) {
  diag_error(ad->d, (SrcLoc){0}, "autodiff: out of memory");
  return -1;
}

static void attr_copy(Emit *e, const IrNode *from, const char *key) {
  const IrAttr *a = ir_attr_find(from, key);
  if (a && e->nattr < MAX_EMIT_ATTR) e->attr[e->nattr++] = *a;
}

static void attr_ints(Emit *e, const char *key, const int64_t *v, int n) {
  IrAttr a = {.key = key, .kind = IR_ATTR_INTS, .n = n};
  memcpy(a.i, v, sizeof(int64_t) * (size_t)n);
  if (e->nattr < MAX_EMIT_ATTR) e->attr[e->nattr++] = a;
}

/* The spatial size of a rank-4 activation as an in_hw attribute. */
static void attr_hw(Emit *e, const IrType *t) {
  int h = t->layout == IR_LAYOUT_NHWC ? 1 : 2;
  attr_ints(e, "in_hw", &t->dim[h], 2);
}

/* "<base><suffix>", or NULL when the forward node has no name. */
static const char *suffixed(Ad *ad, const char *base, const char *suffix) {
  return base ? arena_printf(ad->out->arena, "%s%s", base, suffix) : NULL;
}

/* Types e with ir_infer and adds it to out; returns the node index, or -1
 * after reporting (a failure here is a bug in a rule, not the user's). */
static int emit(Ad *ad, const char *name, SrcLoc loc, const Emit *e) {
  IrNode tmp = {.op = e->op,
                .name = name,
                .nin = e->nin,
                .in = (int *)e->in,
                .nattr = e->nattr,
                .attr = (IrAttr *)e->attr,
                .loc = loc};
  const IrOpInfo *info = ir_op_info(e->op);
  IrType types[3];
  char err[256];
  if (ir_infer(ad->out, &tmp, types, err, sizeof err)) {
    diag_error(ad->d, loc, "autodiff: cannot build %s%s%s: %s", info->name, name ? " " : "", name ? name : "", err);
    return -1;
  }
  int id = ir_node_add(ad->out, e->op, name, loc, e->in, e->nin, types, info->nout);
  IrAttr *attrs = e->nattr ? arena_alloc(ad->out->arena, sizeof(IrAttr) * (size_t)e->nattr) : NULL;
  if (id < 0 || (e->nattr && !attrs)) return fail_oom(ad);
  if (e->nattr) memcpy(attrs, e->attr, sizeof(IrAttr) * (size_t)e->nattr);
  ad->out->node[id].attr = attrs;
  ad->out->node[id].nattr = e->nattr;
  return id;
}

/* A backward node of forward node n: named after it, at its location, and
 * computed at the precision the source asked of the layer. */
static int emit_bwd(Ad *ad, int n, const char *suffix, Emit *e) {
  const IrNode *fwd = &ad->g->node[n];
  attr_copy(e, fwd, "precision");
  const char *name = suffixed(ad, fwd->name, suffix);
  if (fwd->name && !name) return fail_oom(ad);
  return emit(ad, name, fwd->loc, e);
}

/* The first output of a node just emitted. */
static int out0(Ad *ad, int node) { return ad->out->node[node].out[0]; }

/* Adds gradient gv (an id in out) to forward value v; a second and later
 * contribution is summed with `add`, in the order contributions arrive. */
static int grad_add(Ad *ad, int v, int gv) {
  if (!ad->needs[v]) return 0;
  if (ad->grad[v] < 0) {
    ad->grad[v] = gv;
    return 0;
  }
  const IrValue *val = &ad->g->val[v];
  const IrNode *def = val->def >= 0 ? &ad->g->node[val->def] : NULL;
  const char *base = def ? def->name : val->name;
  int at = def ? val->def : ad->first_use[v];
  SrcLoc loc = at >= 0 ? ad->g->node[at].loc : (SrcLoc){0};
  const char *name = suffixed(ad, base, ".grad_sum");
  if (base && !name) return fail_oom(ad);
  Emit e = {.op = IR_OP_ADD, .in = {ad->grad[v], gv}, .nin = 2};
  int id = emit(ad, name, loc, &e);
  if (id < 0) return -1;
  ad->grad[v] = out0(ad, id);
  return 0;
}

/* --- rules: one per forward op -------------------------------------------
 * Each reads dy = the gradient of node n's output and adds the gradients of
 * the inputs that need one. */

typedef int (*GradFn)(Ad *ad, int n);

static const IrNode *fwd_node(Ad *ad, int n) { return &ad->g->node[n]; }
static int dy_of(Ad *ad, int n) { return ad->grad[ad->g->node[n].out[0]]; }
static const IrType *fwd_type(Ad *ad, int v) { return &ad->g->val[v].type; }

static int grad_softmax_ce(Ad *ad, int n) {
  const IrNode *f = fwd_node(ad, n);
  if (n != ad->loss || !ad->needs[f->in[0]]) return 0;
  Emit e = {.op = IR_OP_SOFTMAX_CE_BWD, .in = {ad->map[f->in[0]], ad->map[f->in[1]], ad->scale}, .nin = 3};
  attr_copy(&e, f, "smoothing");
  int id = emit_bwd(ad, n, ".bwd", &e);
  return id < 0 ? -1 : grad_add(ad, f->in[0], out0(ad, id));
}

/* conv2d and linear: data, weight and bias gradients. */
static int grad_weighted(Ad *ad, int n, IrOp bwd_data, IrOp bwd_weight) {
  const IrNode *f = fwd_node(ad, n);
  int x = f->in[0], w = f->in[1], dy = dy_of(ad, n);
  static const char *const conv_keys[] = {"k", "s", "p", "d", "groups"};
  int nkeys = f->op == IR_OP_CONV2D ? 5 : 0;
  if (ad->needs[x]) {
    Emit e = {.op = bwd_data, .in = {dy, ad->map[w]}, .nin = 2};
    for (int i = 0; i < nkeys; i++) attr_copy(&e, f, conv_keys[i]);
    if (nkeys) attr_hw(&e, fwd_type(ad, x));
    int id = emit_bwd(ad, n, ".dgrad", &e);
    if (id < 0 || grad_add(ad, x, out0(ad, id))) return -1;
  }
  if (ad->needs[w]) {
    Emit e = {.op = bwd_weight, .in = {dy, ad->map[x]}, .nin = 2};
    for (int i = 0; i < nkeys; i++) attr_copy(&e, f, conv_keys[i]);
    int id = emit_bwd(ad, n, ".wgrad", &e);
    if (id < 0 || grad_add(ad, w, out0(ad, id))) return -1;
  }
  if (f->nin == 3 && ad->needs[f->in[2]]) {
    Emit e = {.op = IR_OP_CHANNEL_SUM, .in = {dy}, .nin = 1};
    int id = emit_bwd(ad, n, ".bgrad", &e);
    if (id < 0 || grad_add(ad, f->in[2], out0(ad, id))) return -1;
  }
  return 0;
}

static int grad_conv2d(Ad *ad, int n) { return grad_weighted(ad, n, IR_OP_CONV2D_BWD_DATA, IR_OP_CONV2D_BWD_WEIGHT); }

static int grad_linear(Ad *ad, int n) { return grad_weighted(ad, n, IR_OP_LINEAR_BWD_DATA, IR_OP_LINEAR_BWD_WEIGHT); }

/* Uses the batch mean and inverse std that batchnorm_train saved. */
static int grad_batchnorm(Ad *ad, int n) {
  const IrNode *f = fwd_node(ad, n);
  const IrNode *train = &ad->out->node[ad->node_at[n]];
  Emit e = {.op = IR_OP_BATCHNORM_BWD,
            .in = {dy_of(ad, n), ad->map[f->in[0]], ad->map[f->in[1]], train->out[1], train->out[2]},
            .nin = 5};
  int id = emit_bwd(ad, n, ".bwd", &e);
  if (id < 0) return -1;
  for (int i = 0; i < 3; i++)
    if (grad_add(ad, f->in[i], ad->out->node[id].out[i])) return -1;
  return 0;
}

static int grad_relu(Ad *ad, int n) {
  Emit e = {.op = IR_OP_RELU_BWD, .in = {dy_of(ad, n), ad->map[fwd_node(ad, n)->out[0]]}, .nin = 2};
  int id = emit_bwd(ad, n, ".bwd", &e);
  return id < 0 ? -1 : grad_add(ad, fwd_node(ad, n)->in[0], out0(ad, id));
}

static int grad_add_op(Ad *ad, int n) {
  const IrNode *f = fwd_node(ad, n);
  int dy = dy_of(ad, n);
  return grad_add(ad, f->in[0], dy) || grad_add(ad, f->in[1], dy) ? -1 : 0;
}

static int grad_maxpool(Ad *ad, int n) {
  const IrNode *f = fwd_node(ad, n);
  Emit e = {.op = IR_OP_MAXPOOL_BWD, .in = {dy_of(ad, n), ad->map[f->in[0]]}, .nin = 2};
  attr_copy(&e, f, "k");
  attr_copy(&e, f, "s");
  attr_copy(&e, f, "p");
  int id = emit_bwd(ad, n, ".bwd", &e);
  return id < 0 ? -1 : grad_add(ad, f->in[0], out0(ad, id));
}

static int grad_avgpool(Ad *ad, int n) {
  const IrNode *f = fwd_node(ad, n);
  Emit e = {.op = IR_OP_AVGPOOL_BWD, .in = {dy_of(ad, n)}, .nin = 1};
  attr_copy(&e, f, "k");
  attr_copy(&e, f, "s");
  attr_copy(&e, f, "p");
  attr_copy(&e, f, "include_pad");
  attr_hw(&e, fwd_type(ad, f->in[0]));
  int id = emit_bwd(ad, n, ".bwd", &e);
  return id < 0 ? -1 : grad_add(ad, f->in[0], out0(ad, id));
}

static int grad_global_avgpool(Ad *ad, int n) {
  const IrNode *f = fwd_node(ad, n);
  Emit e = {.op = IR_OP_GLOBAL_AVGPOOL_BWD, .in = {dy_of(ad, n)}, .nin = 1};
  attr_hw(&e, fwd_type(ad, f->in[0]));
  int id = emit_bwd(ad, n, ".bwd", &e);
  return id < 0 ? -1 : grad_add(ad, f->in[0], out0(ad, id));
}

/* flatten of [N, C] is the identity; of an NCHW image, unflatten undoes it. */
static int grad_flatten(Ad *ad, int n) {
  const IrNode *f = fwd_node(ad, n);
  const IrType *x = fwd_type(ad, f->in[0]);
  if (x->rank == 2) return grad_add(ad, f->in[0], dy_of(ad, n));
  if (x->rank != 4 || x->layout != IR_LAYOUT_NCHW) {
    char b[96];
    diag_error(ad->d, f->loc, "autodiff: no gradient for flatten of %s (only NCHW images and [N, C])",
               ir_type_str(x, b, sizeof b));
    return -1;
  }
  Emit e = {.op = IR_OP_UNFLATTEN, .in = {dy_of(ad, n)}, .nin = 1};
  attr_ints(&e, "shape", &x->dim[1], 3);
  int id = emit_bwd(ad, n, ".bwd", &e);
  return id < 0 ? -1 : grad_add(ad, f->in[0], out0(ad, id));
}

static const GradFn RULES[IR_OP_COUNT] = {
    [IR_OP_CONV2D] = grad_conv2d,
    [IR_OP_BATCHNORM] = grad_batchnorm,
    [IR_OP_RELU] = grad_relu,
    [IR_OP_ADD] = grad_add_op,
    [IR_OP_MAXPOOL] = grad_maxpool,
    [IR_OP_AVGPOOL] = grad_avgpool,
    [IR_OP_GLOBAL_AVGPOOL] = grad_global_avgpool,
    [IR_OP_FLATTEN] = grad_flatten,
    [IR_OP_LINEAR] = grad_linear,
    [IR_OP_SOFTMAX_CE] = grad_softmax_ce,
};

/* --- the pass -------------------------------------------------------------- */

/* The loss node: the producer of output 0, a softmax_cross_entropy whose
 * logits are output 1.  -1 after reporting when the graph is not so. */
static int find_loss(Ad *ad) {
  const IrGraph *g = ad->g;
  int def = g->noutput == 2 ? g->val[g->output[0]].def : -1;
  if (def < 0 || g->node[def].op != IR_OP_SOFTMAX_CE || g->node[def].in[0] != g->output[1]) {
    diag_error(ad->d, (SrcLoc){0},
               "autodiff: expects the outputs [loss, logits] with the loss made by softmax_cross_entropy");
    return -1;
  }
  return def;
}

static double train_num(const IrGraph *g, const char *key) {
  const IrAttr *a = ir_train_find(g, key);
  if (!a) return 0;
  return a->kind == IR_ATTR_FLOAT ? a->f : (double)a->i[0];
}

/* Copies inputs, then (training) lr and loss_scale, then params and state. */
static int copy_values(Ad *ad, int training) {
  const IrGraph *g = ad->g;
  static const char *const fed[] = {"lr", "loss_scale"};
  for (int pass = 0; pass < 2; pass++) {
    for (int v = 0; v < g->nval; v++) {
      const IrValue *val = &g->val[v];
      if (val->kind == IR_VAL_ACT || (val->kind == IR_VAL_INPUT) != (pass == 0)) continue;
      if (training && val->kind == IR_VAL_INPUT && (!strcmp(val->name, fed[0]) || !strcmp(val->name, fed[1]))) {
        int at = ad->first_use[v];
        diag_error(ad->d, at >= 0 ? g->node[at].loc : (SrcLoc){0},
                   "autodiff: input '%s' would clash with the training input of that name", val->name);
        return -1;
      }
      if ((ad->map[v] = ir_value_add(ad->out, val->kind, val->type, val->name)) < 0) return fail_oom(ad);
    }
    if (pass == 0 && training) {
      IrType scalar = ir_type(IR_DT_F32, IR_LAYOUT_ROW, 0, NULL);
      ad->lr = ir_value_add(ad->out, IR_VAL_INPUT, scalar, fed[0]);
      ad->scale = ir_value_add(ad->out, IR_VAL_INPUT, scalar, fed[1]);
      if (ad->lr < 0 || ad->scale < 0) return fail_oom(ad);
    }
  }
  return 0;
}

/* The forward nodes in order (training: batchnorm -> batchnorm_train;
 * inference: without the loss). */
static int copy_forward(Ad *ad, int training) {
  const IrGraph *g = ad->g;
  for (int n = 0; n < g->nnode; n++) {
    const IrNode *f = &g->node[n];
    if (!training && n == ad->loss) continue;
    Emit e = {.op = f->op, .nin = f->nin};
    if (f->nin > MAX_EMIT_IN) return fail_oom(ad);
    for (int i = 0; i < f->nin; i++) e.in[i] = ad->map[f->in[i]];
    int id;
    if (training && f->op == IR_OP_BATCHNORM) {
      e.op = IR_OP_BATCHNORM_TRAIN;
      if (f->nattr > MAX_EMIT_ATTR) return fail_oom(ad);
      memcpy(e.attr, f->attr, sizeof(IrAttr) * (size_t)f->nattr);
      e.nattr = f->nattr;
      id = emit(ad, f->name, f->loc, &e);
      if (id < 0) return -1;
    } else {
      IrType *types = arena_alloc(ad->out->arena, sizeof(IrType) * ((size_t)f->nout + 1));
      if (!types) return fail_oom(ad);
      for (int i = 0; i < f->nout; i++) types[i] = g->val[f->out[i]].type;
      id = ir_node_add(ad->out, f->op, f->name, f->loc, e.in, f->nin, types, f->nout);
      if (id < 0) return fail_oom(ad);
      ad->out->node[id].attr = f->attr; /* attributes are immutable once made: share them */
      ad->out->node[id].nattr = f->nattr;
    }
    ad->node_at[n] = id;
    for (int i = 0; i < f->nout; i++) ad->map[f->out[i]] = ad->out->node[id].out[i];
  }
  return 0;
}

/* Which values depend on a parameter, and the first node reading each value. */
static void mark_needs(Ad *ad) {
  const IrGraph *g = ad->g;
  for (int v = 0; v < g->nval; v++) {
    ad->needs[v] = g->val[v].kind == IR_VAL_PARAM;
    ad->first_use[v] = -1;
  }
  for (int n = 0; n < g->nnode; n++) {
    const IrNode *f = &g->node[n];
    int any = 0;
    for (int i = 0; i < f->nin; i++) {
      any |= ad->needs[f->in[i]];
      if (ad->first_use[f->in[i]] < 0) ad->first_use[f->in[i]] = n;
    }
    for (int i = 0; i < f->nout; i++) ad->needs[f->out[i]] = (char)any;
  }
}

/* Visits the forward nodes last to first; a node whose output has a gradient
 * (or the loss) and an input that wants one must have a rule. */
static int backward(Ad *ad) {
  const IrGraph *g = ad->g;
  for (int n = g->nnode - 1; n >= 0; n--) {
    const IrNode *f = &g->node[n];
    int reached = n == ad->loss, wanted = 0;
    for (int i = 0; i < f->nout; i++) reached |= ad->grad[f->out[i]] >= 0;
    for (int i = 0; i < f->nin; i++) wanted |= ad->needs[f->in[i]];
    if (!reached || !wanted) continue;
    GradFn rule = RULES[f->op];
    if (!rule) {
      diag_error(ad->d, f->loc, "autodiff: no gradient for op %s", ir_op_info(f->op)->name);
      return -1;
    }
    if (rule(ad, n)) return -1;
  }
  return 0;
}

/* The optimizer section: one sgd_update per parameter with a gradient, in
 * parameter order, each with a new momentum buffer (state, same type as the
 * parameter). */
static int optimizer(Ad *ad) {
  const IrGraph *g = ad->g;
  const IrAttr *opt = ir_train_find(g, "optimizer");
  if (opt && (opt->kind != IR_ATTR_STR || strcmp(opt->s, "sgd") != 0)) {
    diag_error(ad->d, (SrcLoc){0}, "autodiff: optimizer '%s' is not supported (only sgd)",
               opt->kind == IR_ATTR_STR ? opt->s : "?");
    return -1;
  }
  double momentum = train_num(g, "momentum"), wd = train_num(g, "weight_decay");
  int64_t nesterov = (int64_t)train_num(g, "nesterov");
  ad->out->opt_first = ad->out->nnode;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind != IR_VAL_PARAM || ad->grad[v] < 0) continue;
    const char *bufname = arena_printf(ad->out->arena, "%s.momentum_buffer", val->name);
    int buf = bufname ? ir_value_add(ad->out, IR_VAL_STATE, val->type, bufname) : -1;
    if (buf < 0) return fail_oom(ad);
    Emit e = {.op = IR_OP_SGD_UPDATE, .in = {ad->map[v], ad->grad[v], buf, ad->lr, ad->scale}, .nin = 5};
    e.attr[e.nattr++] = (IrAttr){.key = "momentum", .kind = IR_ATTR_FLOAT, .f = momentum};
    e.attr[e.nattr++] = (IrAttr){.key = "nesterov", .kind = IR_ATTR_INT, .n = 1, .i = {nesterov}};
    e.attr[e.nattr++] = (IrAttr){.key = "weight_decay", .kind = IR_ATTR_FLOAT, .f = wd};
    const char *name = suffixed(ad, val->name, ".sgd");
    if (!name) return fail_oom(ad);
    SrcLoc loc = ad->first_use[v] >= 0 ? g->node[ad->first_use[v]].loc : (SrcLoc){0};
    if (emit(ad, name, loc, &e) < 0) return -1;
  }
  return 0;
}

IrGraph *pass_autodiff(IrGraph *g, PassCtx *cx) {
  Arena *a = g->arena;
  size_t nv = (size_t)g->nval + 1, nn = (size_t)g->nnode + 1;
  Ad ad = {.g = g, .d = cx->d, .lr = -1, .scale = -1};
  ad.out = ir_graph_new(a, g->name);
  ad.map = arena_alloc(a, sizeof(int) * nv);
  ad.grad = arena_alloc(a, sizeof(int) * nv);
  ad.needs = arena_alloc(a, nv);
  ad.first_use = arena_alloc(a, sizeof(int) * nv);
  ad.node_at = arena_alloc(a, sizeof(int) * nn);
  if (!ad.out || !ad.map || !ad.grad || !ad.needs || !ad.first_use || !ad.node_at) {
    fail_oom(&ad);
    return NULL;
  }
  memset(ad.map, -1, sizeof(int) * nv);
  memset(ad.grad, -1, sizeof(int) * nv);
  memset(ad.node_at, -1, sizeof(int) * nn);
  int training = !cx->inference;
  if (g->opt_first >= 0) {
    diag_error(cx->d, (SrcLoc){0}, "autodiff: graph %s is a training step already (it has an optimizer section)",
               g->name);
    return NULL;
  }
  if ((ad.loss = find_loss(&ad)) < 0) return NULL;
  mark_needs(&ad);
  for (int i = 0; i < g->ntrain; i++)
    if (!ir_train_set(ad.out, &g->train[i])) {
      fail_oom(&ad);
      return NULL;
    }
  if (copy_values(&ad, training) || copy_forward(&ad, training)) return NULL;
  if (training && (backward(&ad) || optimizer(&ad))) return NULL;
  for (int i = training ? 0 : 1; i < g->noutput; i++)
    if (ir_output_add(ad.out, ad.map[g->output[i]])) {
      fail_oom(&ad);
      return NULL;
    }
  return ad.out;
}
