/* pass_precision.c - mixed precision: which dtype every op computes in, with
 * each change of dtype an explicit `cast` node.
 *
 * The policy (docs/passes/precision.md has the whole table).  The default
 * dtype D is --precision, else the train section's `precision`, else f16.
 * Convolutions and the classifier (conv2d, conv2d_bn_train, conv2d_bn,
 * linear and their backward ops) compute in D, except a convolution fed by
 * a graph input (the first conv: f32, tiny and precision-sensitive; f16 in
 * an inference graph whose D is f16, where TF32's products would round to
 * f16's 10-bit mantissa anyway and f16 halves the stem's bytes); a
 * layer's `precision=` attribute overrides that, and --int8=NAME,... (or
 * precision=i8) puts a forward conv/linear in i8 (its backward ops then use
 * D).  Their activation and weight inputs are cast to that dtype; a weight
 * is cast from its f32 master copy once per step, and the cast is shared by
 * the forward and backward ops.  An f32 conv2d_bn_train in a graph whose D
 * is f16/bf16 writes its relu output y in D (y_dtype=D; z, mean, invstd
 * stay f32), so the stem's pooling runs in D.  Everything else follows its
 * inputs: relu, pooling, add and batch norm keep whatever dtype arrives (a
 * mixed add takes the narrower one); a backward op of relu, maxpool or batch
 * norm casts the incoming gradient to the dtype of the forward tensor it
 * pairs with (as autocast's cast-backward would), except that a
 * batchnorm_relu_bwd with an f32 z reads a narrower dy as it is (into an
 * f32 dz); the loss and its backward read logits
 * cast to f32.  Batch-norm vectors, running statistics, mean/invstd, bias,
 * sgd_update's weight and momentum buffer stay f32; the gradient fed to
 * sgd_update may be f16 (the executor unscales it by loss_scale).  Graph
 * outputs keep the dtype they had.  Casts of one value to one dtype are
 * made once, right before their first use, except that those the
 * optimizer section or a graph output reads are made before the section
 * starts (only optimizer ops are in it).  With D = f32 and no layer
 * asking otherwise the graph is returned unchanged.  When D is f16 and the
 * train section gives no loss_scale, a dynamic one (init 65536, growth every
 * 2000 steps) is set; bf16 gets a static scale of 1.  A dynamic scale of a
 * training step becomes state updated by the step itself (the input
 * loss_scale turns into @loss_scale, nonfinite_check gates every
 * sgd_update, loss_scale_update ends the step; see "dynamic loss scaling"
 * below).
 *
 *   before:  %12 = conv2d(%11, @conv2.weight) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,14,14,16] NHWC  # conv2
 *   after:   %12 = cast(%11) {to=f16} : f16[N,14,14,16] NHWC  # pool1.f16
 *            %13 = cast(@conv2.weight) {to=f16} : f16[16,3,3,16] KRSC  # conv2.weight.f16
 *            %14 = conv2d(%12, %13) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1 precision=f16} : f16[N,14,14,16] NHWC  # conv2
 *
 * docs/passes/precision.md has the policy table and a whole before/after. */
#include <string.h>

#include "int8_scales.h"
#include "pipeline.h"

enum { MAX_OUT = 8 };

/* --- the policy --------------------------------------------------------- */

static IrDtype default_dtype(const IrGraph *g, const PassCtx *cx) {
  const IrAttr *a = ir_train_find(g, "precision");
  if (!cx->precision_set && a && a->kind == IR_ATTR_DTYPE) return (IrDtype)a->i[0];
  return cx->precision;
}

static int is_fwd_weighted(IrOp op) {
  return op == IR_OP_CONV2D || op == IR_OP_CONV2D_BN_TRAIN || op == IR_OP_CONV2D_BN || op == IR_OP_CONV2D_BN_STATS ||
         op == IR_OP_LINEAR;
}

static int is_bwd_weighted(IrOp op) {
  return op == IR_OP_CONV2D_BWD_DATA || op == IR_OP_CONV2D_BWD_WEIGHT || op == IR_OP_CONV2D_BWD_DATA_RELU ||
         op == IR_OP_CONV2D_BWD_DATA_BN_RELU || op == IR_OP_LINEAR_BWD_DATA || op == IR_OP_LINEAR_BWD_WEIGHT;
}

static int is_conv(IrOp op) {
  return op == IR_OP_CONV2D || op == IR_OP_CONV2D_BN_TRAIN || op == IR_OP_CONV2D_BN || op == IR_OP_CONV2D_BN_STATS ||
         op == IR_OP_CONV2D_BWD_DATA || op == IR_OP_CONV2D_BWD_WEIGHT || op == IR_OP_CONV2D_BWD_DATA_RELU ||
         op == IR_OP_CONV2D_BWD_DATA_BN_RELU;
}

/* The kind of the value v stands for behind relayout and cast nodes (an
 * activation of any other node: IR_VAL_ACT). */
static IrValueKind source_kind(const IrGraph *g, int v) {
  while (g->val[v].kind == IR_VAL_ACT && g->val[v].def >= 0) {
    const IrNode *d = &g->node[g->val[v].def];
    if (d->op != IR_OP_RELAYOUT && d->op != IR_OP_CAST) return IR_VAL_ACT;
    v = d->in[0];
  }
  return g->val[v].kind;
}

/* v is a parameter (a weight), possibly behind relayout and cast nodes. */
static int from_param(const IrGraph *g, int v) { return source_kind(g, v) == IR_VAL_PARAM; }

/* v is a graph input, possibly behind relayout and cast nodes. */
static int from_input(const IrGraph *g, int v) { return source_kind(g, v) == IR_VAL_INPUT; }

/* The forward layer a node belongs to: its name without autodiff's suffix. */
static int layer_is(const char *name, const char *layer, size_t len) {
  static const char *const suffix[] = {"", ".dgrad", ".wgrad", ".bgrad", ".bwd"};
  if (!name || strncmp(name, layer, len)) return 0;
  for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++)
    if (strcmp(name + len, suffix[i]) == 0) return 1;
  return 0;
}

/* name (or its backward forms) is listed in the comma-separated --int8 list. */
static int int8_listed(const char *list, const char *name) {
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len && layer_is(name, p, len)) return 1;
    p = end ? end + 1 : NULL;
  }
  return 0;
}

/* --int8 lists `all`: every convolution but the first (the policy of
 * docs/passes/precision.md); linear layers only by name. */
static int int8_all(const char *list) {
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == 3 && strncmp(p, "all", 3) == 0) return 1;
    p = end ? end + 1 : NULL;
  }
  return 0;
}

int pass_precision_parse(const char *name, PassCtx *cx) {
  static const struct {
    const char *name;
    IrDtype dt;
  } P[] = {{"fp32", IR_DT_F32}, {"fp16", IR_DT_F16}, {"bf16", IR_DT_BF16}, {"fp8", IR_DT_F16}};
  for (size_t i = 0; i < sizeof P / sizeof P[0]; i++)
    if (name && strcmp(name, P[i].name) == 0) {
      cx->precision = P[i].dt, cx->precision_set = 1;
      if (i == 3) cx->fp8_layers = "all";
      return 0;
    }
  return -1;
}

/* The dtype node n of g computes in when it is a convolution or linear op
 * (forward or backward); for any other op, the default dtype.  Shared with
 * the layout pass, which pads channels for that dtype's tensor cores. */
IrDtype pass_precision_policy(const IrGraph *g, int n, const PassCtx *cx) {
  const IrNode *node = &g->node[n];
  IrDtype def = default_dtype(g, cx);
  int fwd = is_fwd_weighted(node->op);
  if (!fwd && !is_bwd_weighted(node->op)) return def;
  const IrAttr *p = ir_attr_find(node, "precision");
  int asked_i8 = int8_listed(cx->int8_layers, node->name) || (p && p->i[0] == IR_DT_I8);
  if (asked_i8 && fwd) return IR_DT_I8;
  int asked_f8 = int8_listed(cx->fp8_layers, node->name) || (p && p->i[0] == IR_DT_F8E4M3);
  if (asked_f8 && fwd) return IR_DT_F8E4M3;               /* FP8: the forward op E4M3 x E4M3 */
  if (asked_f8 && is_conv(node->op)) return IR_DT_F8E5M2; /* its backward: the gradient E5M2, the rest E4M3 */
  if (p && p->i[0] != IR_DT_I8 && p->i[0] != IR_DT_F8E4M3) return (IrDtype)p->i[0];
  int x = node->op == IR_OP_CONV2D_BWD_WEIGHT ? node->in[1] : node->in[0];
  if (is_conv(node->op) && node->op != IR_OP_CONV2D_BWD_DATA && node->op != IR_OP_CONV2D_BWD_DATA_RELU &&
      node->op != IR_OP_CONV2D_BWD_DATA_BN_RELU && from_input(g, x))
    return cx->inference && def == IR_DT_F16 ? IR_DT_F16 : IR_DT_F32;
  if (fwd && is_conv(node->op) && !p && int8_all(cx->int8_layers)) return IR_DT_I8;
  if (is_conv(node->op) && !p && int8_all(cx->fp8_layers)) return fwd ? IR_DT_F8E4M3 : IR_DT_F8E5M2;
  return def;
}

/* The amax history a training graph's casts to f8 keep (delayed scaling,
 * the train section's fp8_scaling: delayed(history = 16) when absent); 0
 * for current scaling (fp8_scaling = current()) and in inference graphs,
 * whose casts scale by the tensor at hand. */
static int64_t fp8_history(const IrGraph *g, const PassCtx *cx) {
  const IrAttr *k = ir_train_find(g, "fp8_scaling"), *h = ir_train_find(g, "fp8_scaling_history");
  if (cx->inference || (k && k->kind == IR_ATTR_STR && strcmp(k->s, "current") == 0)) return 0;
  return h && h->kind == IR_ATTR_INT && h->i[0] > 0 ? h->i[0] : 16;
}

/* --- the rewrite ---------------------------------------------------------- */

typedef struct Pr {
  const IrGraph *g;
  IrGraph *out;
  const PassCtx *cx;
  Diag *d;
  IrDtype def;
  int *base;           /* value of g -> its copy in out (dtype as computed there) */
  int *ver;            /* value of g * IR_DT_COUNT + dtype -> the copy cast to that dtype, or -1 */
  int dynamic;         /* the INPUT loss_scale of g, replaced by STATE @loss_scale; -1 when not dynamic */
  int steps;           /* STATE @loss_scale_good_steps in out, or -1 */
  const IrNode *user;  /* the node whose inputs copy_node is casting, or NULL */
  int64_t fp8_history; /* a training graph's casts to f8 keep an amax history of this many steps (0: none) */
} Pr;

static int oom(Pr *p) {
  diag_error(p->d, (SrcLoc){0}, "precision: out of memory");
  return -1;
}

static int is_float(IrDtype dt) { return dt == IR_DT_F32 || dt == IR_DT_F16 || dt == IR_DT_BF16; }

static IrDtype dtype_of(Pr *p, int v) { return p->out->val[p->base[v]].type.dtype; }

/* Types a node with ir_infer and adds it to out; returns its index or -1. */
static int emit(Pr *p, IrOp op, const char *name, SrcLoc loc, const int *in, int nin, IrAttr *attr, int nattr,
                int nout) {
  IrNode tmp = {.op = op, .name = name, .nin = nin, .in = (int *)in, .nattr = nattr, .attr = attr, .loc = loc};
  IrType types[MAX_OUT];
  char err[256];
  if (nout > MAX_OUT || ir_infer(p->out, &tmp, types, err, sizeof err)) {
    diag_error(p->d, loc, "precision: cannot build %s%s%s: %s", ir_op_info(op)->name, name ? " " : "", name ? name : "",
               nout > MAX_OUT ? "too many results" : err);
    return -1;
  }
  int id = ir_node_add(p->out, op, name, loc, in, nin, types, nout);
  if (id < 0) return oom(p);
  p->out->node[id].attr = attr;
  p->out->node[id].nattr = nattr;
  return id;
}

/* "<producer or value name>.<dtype>" ("<producer>.z.<dtype>" for a
 * conv2d_bn_train's z, beside its y), or NULL when the value has no name. */
static const char *cast_name(Pr *p, int v, IrDtype to) {
  const IrValue *val = &p->g->val[v];
  const char *base = val->name;
  const IrNode *def = val->def >= 0 ? &p->g->node[val->def] : NULL;
  if (!base && def) base = def->name;
  const char *z = !val->name && def && def->op == IR_OP_CONV2D_BN_TRAIN && def->out[0] == v ? ".z" : "";
  return base ? arena_printf(p->out->arena, "%s%s.%s", base, z, ir_dtype_name(to)) : NULL;
}

/* v is a float relayout's result read by one node of g only, and no graph
 * output: a cast of it to another float dtype becomes the relayout's
 * y_dtype (the inference image moved to NHWC and to f16 in one pass over
 * it, for an f16 first convolution); its copy in out is retyped. */
static int fold_into_relayout(Pr *p, int v, IrDtype to) {
  const IrGraph *g = p->g;
  int def = g->val[v].def, k;
  if (def < 0 || g->node[def].op != IR_OP_RELAYOUT || !is_float(to) || ir_sole_reader(g, v, def, &k) < 0) return 0;
  for (int i = 0; i < g->noutput; i++)
    if (g->output[i] == v) return 0;
  int copy = p->base[v], node = p->out->val[copy].def;
  if (node < 0 || p->out->node[node].op != IR_OP_RELAYOUT) return 0;
  if (!ir_attr_set_dtype(p->out, node, "y_dtype", to)) return oom(p);
  p->out->val[copy].type.dtype = to;
  return 1;
}

/* Value v of g in dtype `to` (the copy itself when it already is); the cast
 * is made once, at the first use, with that use's location. */
static int in_dtype(Pr *p, int v, int to, SrcLoc loc) {
  if (to < 0 || dtype_of(p, v) == (IrDtype)to) return p->base[v];
  IrDtype from = dtype_of(p, v);
  if (!is_float(from) && from != IR_DT_I8) return p->base[v];
  int folded = is_float(from) ? fold_into_relayout(p, v, (IrDtype)to) : 0;
  if (folded) return folded < 0 ? -1 : p->base[v];
  int *slot = &p->ver[(size_t)v * IR_DT_COUNT + (size_t)to];
  if (*slot >= 0) return *slot;
  IrAttr *a = arena_alloc(p->out->arena, 2 * sizeof *a);
  if (!a) return oom(p);
  *a = (IrAttr){.key = "to", .kind = IR_ATTR_DTYPE, .n = 1, .i = {to}};
  int na = 1;
  if (to == IR_DT_I8) { /* a weight per output channel; an activation by its layer's calibrated scale, if any */
    const IrNode *user = p->user;
    int weight = from_param(p->g, v);
    double scale = !weight && user ? int8_scales_find(p->cx->int8_scales, user->name) : 0;
    if (weight)
      a[na++] = (IrAttr){.key = "axis", .kind = IR_ATTR_INT, .n = 1, .i = {0}};
    else if (scale > 0)
      a[na++] = (IrAttr){.key = "scale", .kind = IR_ATTR_FLOAT, .n = 1, .f = scale};
  }
  int src[2] = {p->base[v], -1}, nsrc = 1;
  const char *name = cast_name(p, v, (IrDtype)to);
  if ((to == IR_DT_F8E4M3 || to == IR_DT_F8E5M2) && p->fp8_history > 0) { /* delayed scaling */
    const char *hname = name ? arena_printf(p->out->arena, "%s.amax_history", name)
                             : arena_printf(p->out->arena, "fp8_%d.amax_history", p->out->nval);
    int64_t h = p->fp8_history;
    if (!hname ||
        (src[nsrc++] = ir_value_add(p->out, IR_VAL_STATE, ir_type(IR_DT_F32, IR_LAYOUT_ROW, 1, &h), hname)) < 0)
      return oom(p);
  }
  int id = emit(p, IR_OP_CAST, name, loc, src, nsrc, a, na, 1);
  if (id < 0) return -1;
  return *slot = p->out->node[id].out[0];
}

/* The narrower of two float dtypes (f16 and bf16 together: the default, or f16). */
static IrDtype narrower(Pr *p, IrDtype a, IrDtype b) {
  if (a == b || !is_float(a) || !is_float(b)) return a;
  if (a == IR_DT_F32) return b;
  if (b == IR_DT_F32) return a;
  return p->def == IR_DT_BF16 ? IR_DT_BF16 : IR_DT_F16;
}

/* The dtype of a forward conv/linear node's result y (conv2d_bn_train:
 * the normalized output): compute, except that an f32 convolution's
 * fused batch norm + relu output is stored in the default dtype when that
 * is narrower (z, mean and invstd stay f32), so that what follows it (the
 * stem's maxpool and its backward) runs on f16/bf16 data; and that a
 * quantized (i8, f8e4m3) convolution's dequantized result is stored in the
 * default dtype (y_dtype=D: half the bytes of f32 for the next layer's
 * cast to read; a conv2d_bn_train's z stays f32), a linear's in f32. */
static IrDtype result_dtype(const Pr *p, const IrNode *node, IrDtype compute) {
  if (compute == IR_DT_I8 || compute == IR_DT_F8E4M3) /* dequantized: into D, or f32 (linear: f32) */
    return node->op == IR_OP_CONV2D || node->op == IR_OP_CONV2D_BN || node->op == IR_OP_CONV2D_BN_TRAIN ? p->def
                                                                                                        : IR_DT_F32;
  return node->op == IR_OP_CONV2D_BN_TRAIN && compute == IR_DT_F32 && p->def != IR_DT_F32 ? p->def : compute;
}

/* The dtype node's result has without a y_dtype attribute: a quantized
 * (i8, f8e4m3) product's is f32, every other its compute dtype's. */
static IrDtype natural_dtype(IrDtype compute) {
  return compute == IR_DT_I8 || compute == IR_DT_F8E4M3 ? IR_DT_F32 : compute;
}

/* Whether value v of g (f32) is an f32 conv2d_bn_train's z that is stored
 * for the backward pass in the default dtype: the node's y is narrower
 * (result_dtype) and every use of z is a batchnorm_relu_bwd's or a
 * maxpool_bn_relu_bwd's z.  Then
 * the 4-byte z, the largest tensor a ResNet keeps (its stem's), lives only
 * until a cast right after the node, and the cast's half-size copy waits
 * for the backward pass (as the 2-byte z of every other layer does; the
 * statistics and the convolution stay f32). */
static int z_saved_narrow(const Pr *p, int v) {
  const IrGraph *g = p->g;
  int def = g->val[v].def;
  if (def < 0 || g->node[def].op != IR_OP_CONV2D_BN_TRAIN || g->node[def].out[0] != v ||
      pass_precision_policy(g, def, p->cx) != IR_DT_F32 || result_dtype(p, &g->node[def], IR_DT_F32) == IR_DT_F32)
    return 0;
  int uses = 0;
  for (int n = 0; n < g->nnode; n++)
    for (int i = 0; i < g->node[n].nin; i++)
      if (g->node[n].in[i] == v) {
        if (!(g->node[n].op == IR_OP_BATCHNORM_RELU_BWD && i == 2) &&
            !(g->node[n].op == IR_OP_MAXPOOL_BN_RELU_BWD && i == 1))
          return 0;
        uses++;
      }
  return uses > 0;
}

/* The dtype a batchnorm_relu_bwd reads its z (value v) in: the default
 * when z is saved narrow (z_saved_narrow), else as it is (-1). */
static int saved_narrow(Pr *p, int v) { return z_saved_narrow(p, v) ? (int)p->def : -1; }

/* The dtype the relu(batchnorm(z)) of value z was stored in: the
 * conv2d_bn_train's y that made z, else z's own (a batchnorm_train on z
 * keeps its input's dtype). */
static IrDtype stored_y_dtype(Pr *p, int z) {
  int def = p->g->val[z].def;
  if (def >= 0 && p->g->node[def].op == IR_OP_CONV2D_BN_TRAIN && p->g->node[def].out[0] == z)
    return dtype_of(p, p->g->node[def].out[1]);
  return dtype_of(p, z);
}

/* Input i of a backward convolution in FP8 (compute f8e5m2): the gradient
 * E5M2, the weights (data gradient) or activations (weight gradient) E4M3
 * -- the forward's own casts, kept --, z, an addend and a relu mask in f32,
 * the products' dtype; the rest (the vectors) as they are. */
static int fp8_bwd_wanted(const IrGraph *g, const IrNode *node, int i) {
  if (i == 0) return IR_DT_F8E5M2;
  if (i == 1) return IR_DT_F8E4M3;
  if ((node->op == IR_OP_CONV2D_BWD_DATA_BN_RELU && i == 3) || i == ir_conv_residual(g, node)) return IR_DT_F32;
  if (node->op == IR_OP_CONV2D_BWD_DATA_RELU && i == 2)
    return IR_DT_F32; /* the mask in dx's dtype: one kernel reads both */
  return -1;
}

/* The dtype input i of node n must arrive in, or -1 for as it is. */
static int wanted(Pr *p, int n, int i, IrDtype compute) {
  const IrNode *node = &p->g->node[n];
  if (compute == IR_DT_F8E5M2) return fp8_bwd_wanted(p->g, node, i);
  const IrAttr *pa = ir_attr_find(node, "precision");
  int asked = pa && is_float((IrDtype)pa->i[0]) ? (int)pa->i[0] : -1;
  switch (node->op) {
  case IR_OP_CONV2D:
  case IR_OP_CONV2D_BN_TRAIN:
  case IR_OP_CONV2D_BN:
  case IR_OP_CONV2D_BN_STATS:
  case IR_OP_LINEAR:
  case IR_OP_CONV2D_BWD_DATA:
  case IR_OP_CONV2D_BWD_WEIGHT:
  case IR_OP_CONV2D_BWD_DATA_RELU:
  case IR_OP_LINEAR_BWD_DATA:
  case IR_OP_LINEAR_BWD_WEIGHT:
  case IR_OP_CONV2D_BWD_DATA_BN_RELU:
    if (node->op == IR_OP_CONV2D_BWD_DATA_BN_RELU) /* z in the data gradient's dtype; the vectors f32 */
      return i < 2 || i == 3 ? (int)compute : -1;
    /* the residual in the output's dtype, the prologue's scale and bias in the input's */
    if (i == ir_conv_residual(p->g, node)) /* an i8 or f8 convolution's output is D (or f32) */
      return (int)result_dtype(p, node, compute);
    return i < 2 || i == ir_conv_prologue(p->g, node) ? (int)compute : -1;
  case IR_OP_RELU_BWD:
  case IR_OP_MAXPOOL_BWD:
  case IR_OP_BATCHNORM_BWD: return i == 0 ? (int)dtype_of(p, node->in[1]) : -1;
  case IR_OP_MAXPOOL_BN_RELU_BWD: /* dy in the dtype the forward stored y in; z as batchnorm_relu_bwd reads it */
    if (i == 1) return saved_narrow(p, node->in[1]);
    return i == 0 ? (int)stored_y_dtype(p, node->in[1]) : -1;
  case IR_OP_SUM_RELU_BWD: return i < 2 ? (int)dtype_of(p, node->in[2]) : -1;
  case IR_OP_BATCHNORM_RELU_BWD: /* an f32 z reads a narrower dy as it is (the stem's f16 gradient) */
    if (i == 2) return saved_narrow(p, node->in[2]);
    if (i != 0 || (dtype_of(p, node->in[2]) == IR_DT_F32 && is_float(dtype_of(p, node->in[0])))) return -1;
    return (int)dtype_of(p, node->in[2]);
  case IR_OP_SOFTMAX_CE:
  case IR_OP_SOFTMAX_CE_BWD: return i == 0 ? (asked >= 0 ? asked : IR_DT_F32) : -1;
  case IR_OP_ADD:
  case IR_OP_ADD_RELU: return asked >= 0 ? asked : (int)narrower(p, dtype_of(p, node->in[0]), dtype_of(p, node->in[1]));
  case IR_OP_RELU:
  case IR_OP_MAXPOOL:
  case IR_OP_AVGPOOL:
  case IR_OP_GLOBAL_AVGPOOL:
  case IR_OP_FLATTEN:
  case IR_OP_BATCHNORM:
  case IR_OP_BATCHNORM_TRAIN: return i == 0 ? asked : -1;
  default: return -1;
  }
}

/* node's attributes with precision=dt last (replacing one it had), then
 * math="tf32" for an f32 convolution in a mixed-precision graph: its
 * products may round to TF32 on tensor cores, as f16 ones round to f16,
 * while it keeps f32 tensors and FP32 accumulation; then y_dtype when its
 * result y is stored in another dtype (result_dtype). */
static IrAttr *with_precision(Pr *p, const IrNode *node, IrDtype dt, int *nattr) {
  IrAttr *a = arena_alloc(p->out->arena, sizeof(IrAttr) * ((size_t)node->nattr + 3));
  if (!a) return NULL;
  int k = 0;
  for (int i = 0; i < node->nattr; i++)
    if (strcmp(node->attr[i].key, "precision") && strcmp(node->attr[i].key, "math") &&
        strcmp(node->attr[i].key, "y_dtype"))
      a[k++] = node->attr[i];
  a[k++] = (IrAttr){.key = "precision", .kind = IR_ATTR_DTYPE, .n = 1, .i = {dt}};
  if (dt == IR_DT_F32 && p->def != IR_DT_F32 && is_conv(node->op))
    a[k++] = (IrAttr){.key = "math", .kind = IR_ATTR_STR, .s = "tf32"};
  if (result_dtype(p, node, dt) != natural_dtype(dt))
    a[k++] = (IrAttr){.key = "y_dtype", .kind = IR_ATTR_DTYPE, .n = 1, .i = {result_dtype(p, node, dt)}};
  *nattr = k;
  return a;
}

/* A batchnorm_relu_bwd's attributes plus dz_dtype=f32: its z arrives
 * narrow (z_saved_narrow), its dz stays f32 for the f32 convolution's
 * backward. */
static IrAttr *with_dz_f32(Pr *p, const IrNode *node, int *nattr) {
  IrAttr *a = arena_alloc(p->out->arena, sizeof(IrAttr) * ((size_t)node->nattr + 1));
  if (!a) return NULL;
  if (node->nattr) memcpy(a, node->attr, sizeof(IrAttr) * (size_t)node->nattr);
  a[node->nattr] = (IrAttr){.key = "dz_dtype", .kind = IR_ATTR_DTYPE, .n = 1, .i = {IR_DT_F32}};
  *nattr = node->nattr + 1;
  return a;
}

static int copy_node(Pr *p, int n) {
  const IrNode *node = &p->g->node[n];
  int weighted = is_fwd_weighted(node->op) || is_bwd_weighted(node->op);
  IrDtype compute = pass_precision_policy(p->g, n, p->cx);
  int *in = arena_alloc(p->out->arena, sizeof(int) * ((size_t)node->nin + 1));
  if (!in) return oom(p);
  p->user = node;
  for (int i = 0; i < node->nin; i++)
    if ((in[i] = in_dtype(p, node->in[i], wanted(p, n, i, compute), node->loc)) < 0) return -1;
  p->user = NULL;
  IrAttr *attr = node->attr; /* attributes are immutable once made: share them */
  int nattr = node->nattr;
  if (weighted && !(attr = with_precision(p, node, compute, &nattr))) return oom(p);
  if (node->op == IR_OP_BATCHNORM_RELU_BWD && z_saved_narrow(p, node->in[2]) && !(attr = with_dz_f32(p, node, &nattr)))
    return oom(p);
  int id = emit(p, node->op, node->name, node->loc, in, node->nin, attr, nattr, node->nout);
  if (id < 0) return -1;
  for (int i = 0; i < node->nout; i++) p->base[node->out[i]] = p->out->node[id].out[i];
  /* a z stored narrow: cast now, so that the f32 one dies here */
  if (node->op == IR_OP_CONV2D_BN_TRAIN && z_saved_narrow(p, node->out[0]) &&
      in_dtype(p, node->out[0], (int)p->def, node->loc) < 0)
    return -1;
  return 0;
}

/* Every --int8 name is a forward conv2d/linear layer; precision=i8 only on those. */
static int check_requests(Pr *p) {
  const IrGraph *g = p->g;
  int bad = 0;
  for (const char *s = p->cx->int8_layers; s && *s;) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    int found = len == 3 && strncmp(s, "all", 3) == 0; /* int8_all */
    for (int n = 0; n < g->nnode && !found; n++)
      found = is_fwd_weighted(g->node[n].op) && g->node[n].name && strlen(g->node[n].name) == len &&
              strncmp(g->node[n].name, s, len) == 0;
    if (!found) {
      diag_error(p->d, (SrcLoc){0}, "--int8: no conv2d or linear layer named '%.*s'", (int)len, s);
      bad = 1;
    }
    s = end ? end + 1 : NULL;
  }
  static const IrOp fwd_only[] = {
      IR_OP_RELU,           IR_OP_ADD,     IR_OP_ADD_RELU,  IR_OP_MAXPOOL,         IR_OP_AVGPOOL,
      IR_OP_GLOBAL_AVGPOOL, IR_OP_FLATTEN, IR_OP_BATCHNORM, IR_OP_BATCHNORM_TRAIN, IR_OP_SOFTMAX_CE};
  for (int n = 0; n < g->nnode; n++) {
    const IrAttr *pa = ir_attr_find(&g->node[n], "precision");
    if (!pa || (pa->i[0] != IR_DT_I8 && pa->i[0] != IR_DT_F8E4M3)) continue;
    for (size_t k = 0; k < sizeof fwd_only / sizeof fwd_only[0]; k++)
      if (g->node[n].op == fwd_only[k]) {
        diag_error(p->d, g->node[n].loc, "precision=%s applies to conv2d and linear only, not %s",
                   pa->i[0] == IR_DT_I8 ? "i8" : "f8", ir_op_info(g->node[n].op)->name);
        bad = 1;
      }
  }
  return bad ? -1 : 0;
}

/* Nothing to do: the default is f32 and no layer asks for another dtype. */
static int all_f32(const IrGraph *g, const PassCtx *cx, IrDtype def) {
  if (def != IR_DT_F32 || (cx->int8_layers && *cx->int8_layers) || (cx->fp8_layers && *cx->fp8_layers)) return 0;
  for (int n = 0; n < g->nnode; n++) {
    const IrAttr *pa = ir_attr_find(&g->node[n], "precision");
    if (pa && pa->i[0] != IR_DT_F32) return 0;
  }
  return 1;
}

/* The loss scale the policy picks when the train section has none. */
static int default_loss_scale(Pr *p) {
  if (p->def == IR_DT_F32 || p->g->ntrain == 0 || ir_train_find(p->g, "loss_scale")) return 0;
  IrAttr kind = {.key = "loss_scale", .kind = IR_ATTR_STR, .s = p->def == IR_DT_F16 ? "dynamic" : "static"};
  IrAttr init = {.key = "loss_scale_init", .kind = IR_ATTR_FLOAT, .f = 65536};
  IrAttr every = {.key = "loss_scale_growth_interval", .kind = IR_ATTR_INT, .n = 1, .i = {2000}};
  IrAttr one = {.key = "loss_scale_scale", .kind = IR_ATTR_FLOAT, .f = 1};
  if (!ir_train_set(p->out, &kind)) return oom(p);
  if (p->def == IR_DT_F16) return ir_train_set(p->out, &init) && ir_train_set(p->out, &every) ? 0 : oom(p);
  return ir_train_set(p->out, &one) ? 0 : oom(p);
}

/* The casts the optimizer section's nodes (from g's node `start`, where it
 * starts) and the graph outputs read, made before the section (or at the
 * end) so that the section holds only optimizer ops; copy_node and the
 * outputs then find them made. */
static int cast_before_section(Pr *p, int start) {
  const IrGraph *g = p->g;
  for (int n = start; n < g->nnode; n++) {
    const IrNode *node = &g->node[n];
    IrDtype compute = pass_precision_policy(g, n, p->cx);
    for (int i = 0; i < node->nin; i++) {
      const IrValue *val = &g->val[node->in[i]];
      if ((val->kind != IR_VAL_ACT || val->def < start) &&
          in_dtype(p, node->in[i], wanted(p, n, i, compute), node->loc) < 0)
        return -1;
    }
  }
  for (int i = 0; i < g->noutput; i++) {
    int v = g->output[i];
    if ((g->val[v].kind != IR_VAL_ACT || g->val[v].def < start) &&
        in_dtype(p, v, (int)g->val[v].type.dtype, (SrcLoc){0}) < 0)
      return -1;
  }
  return 0;
}

/* g's nodes in order, the section's casts made before it. */
static int copy_nodes(Pr *p) {
  const IrGraph *g = p->g;
  for (int n = 0; n <= g->nnode; n++) {
    if (n == ir_opt_start(g) && cast_before_section(p, n)) return -1;
    ir_opt_follow(p->out, g, n);
    if (n < g->nnode && copy_node(p, n)) return -1;
  }
  return 0;
}

/* --- dynamic loss scaling ---------------------------------------------------
 * With loss_scale="dynamic" the scale lives on the device: INPUT loss_scale
 * becomes STATE @loss_scale (rt_init sets it to loss_scale_init) beside a
 * new STATE @loss_scale_good_steps (0).  The sgd_update nodes move to the
 * end, after nonfinite_check over every gradient they read (at most 15 a
 * check; the flags of several checks are summed with add), each taking the
 * flag as its skip input, and a loss_scale_update closes the step: the
 * checks, their sum, the updates and the scale's update are the optimizer
 * section. */

enum { CHECK_MAX_IN = 15 }; /* nonfinite_check's arity in the op table */

/* The INPUT loss_scale of g when the train section asks for a dynamic scale; else -1. */
static int dynamic_input(const Pr *p) {
  const IrAttr *a = ir_train_find(p->out, "loss_scale");
  if (!a || a->kind != IR_ATTR_STR || !a->s || strcmp(a->s, "dynamic")) return -1;
  for (int v = 0; v < p->g->nval; v++)
    if (p->g->val[v].kind == IR_VAL_INPUT && strcmp(p->g->val[v].name, "loss_scale") == 0) return v;
  return -1;
}

/* No node after an sgd_update reads the weight or buffer it wrote: moving
 * the updates to the end keeps what every node reads. */
static int updates_movable(Pr *p) {
  const IrGraph *g = p->g;
  for (int n = 0; n < g->nnode; n++) {
    if (g->node[n].op != IR_OP_SGD_UPDATE) continue;
    int w = g->node[n].in[0], b = g->node[n].in[2];
    for (int m = n + 1; m < g->nnode; m++) {
      const IrNode *r = &g->node[m];
      for (int i = 0; i < r->nin && r->op != IR_OP_SGD_UPDATE; i++)
        if (r->in[i] == w || r->in[i] == b) {
          diag_error(p->d, r->loc,
                     "precision: %s reads @%s after its sgd_update; dynamic loss scaling needs the "
                     "updates last",
                     r->name ? r->name : ir_op_info(r->op)->name, g->val[r->in[i]].name);
          return -1;
        }
    }
  }
  return 0;
}

/* The overflow flag of every gradient fed to an sgd_update of g: nonzero
 * when one holds an inf or a nan.  Returns its id in out, or -1. */
static int overflow_flag(Pr *p, SrcLoc loc) {
  const IrGraph *g = p->g;
  int *grads = arena_alloc(p->out->arena, sizeof(int) * ((size_t)g->nnode + 1)), n = 0, flag = -1;
  if (!grads) return oom(p);
  for (int k = 0; k < g->nnode; k++)
    if (g->node[k].op == IR_OP_SGD_UPDATE) grads[n++] = p->base[g->node[k].in[1]];
  for (int at = 0; at < n; at += CHECK_MAX_IN) {
    const char *name = arena_printf(p->out->arena, "loss_scale.check%d", at / CHECK_MAX_IN);
    int id = name ? emit(p, IR_OP_NONFINITE_CHECK, name, loc, grads + at, n - at < CHECK_MAX_IN ? n - at : CHECK_MAX_IN,
                         NULL, 0, 1)
                  : oom(p);
    if (id < 0) return -1;
    int f = p->out->node[id].out[0];
    if (flag >= 0) {
      int both[2] = {flag, f};
      if ((id = emit(p, IR_OP_ADD, "loss_scale.any", loc, both, 2, NULL, 0, 1)) < 0) return -1;
      f = p->out->node[id].out[0];
    }
    flag = f;
  }
  return flag;
}

static int emit_loss_scale_update(Pr *p, int flag, SrcLoc loc) {
  const IrAttr *every = ir_train_find(p->g, "loss_scale_growth_interval");
  IrAttr *a = arena_alloc(p->out->arena, sizeof(IrAttr) * 3);
  if (!a) return oom(p);
  a[0] = (IrAttr){.key = "growth_interval",
                  .kind = IR_ATTR_INT,
                  .n = 1,
                  .i = {every && every->kind == IR_ATTR_INT ? every->i[0] : 2000}};
  a[1] = (IrAttr){.key = "backoff", .kind = IR_ATTR_FLOAT, .f = 0.5};
  a[2] = (IrAttr){.key = "growth", .kind = IR_ATTR_FLOAT, .f = 2.0};
  int in[3] = {flag, p->base[p->dynamic], p->steps};
  return emit(p, IR_OP_LOSS_SCALE_UPDATE, "loss_scale.update", loc, in, 3, a, 3, 0) < 0 ? -1 : 0;
}

/* The nodes of g with the sgd_updates last, skipped on overflow, then the scale's update. */
static int copy_dynamic(Pr *p) {
  const IrGraph *g = p->g;
  int first = -1, last = -1;
  if (updates_movable(p)) return -1;
  for (int n = 0; n < g->nnode; n++) {
    if (g->node[n].op == IR_OP_SGD_UPDATE) {
      last = n;
      if (first < 0) first = n;
    } else if (copy_node(p, n)) {
      return -1;
    }
  }
  if (cast_before_section(p, g->nnode)) return -1;
  ir_opt_follow(p->out, g, g->nnode);
  if (first < 0) return 0;
  int flag = overflow_flag(p, g->node[first].loc);
  if (flag < 0) return -1;
  for (int n = first; n <= last; n++) {
    const IrNode *node = &g->node[n];
    if (node->op != IR_OP_SGD_UPDATE) continue;
    int *in = arena_alloc(p->out->arena, sizeof(int) * 6);
    if (!in) return oom(p);
    for (int i = 0; i < 5; i++) in[i] = p->base[node->in[i]];
    in[5] = flag;
    if (emit(p, node->op, node->name, node->loc, in, 6, node->attr, node->nattr, 0) < 0) return -1;
  }
  return emit_loss_scale_update(p, flag, g->node[last].loc);
}

IrGraph *pass_precision(IrGraph *g, PassCtx *cx) {
  Pr p = {.g = g,
          .cx = cx,
          .d = cx->d,
          .def = default_dtype(g, cx),
          .dynamic = -1,
          .steps = -1,
          .fp8_history = fp8_history(g, cx)};
  if (p.def != IR_DT_F32 && p.def != IR_DT_F16 && p.def != IR_DT_BF16) {
    diag_error(cx->d, (SrcLoc){0}, "precision: the default precision must be f32, f16 or bf16, not %s",
               ir_dtype_name(p.def));
    return NULL;
  }
  if (check_requests(&p)) return NULL;
  if (all_f32(g, cx, p.def)) return g;
  Arena *a = g->arena;
  p.out = ir_graph_new(a, g->name);
  p.base = arena_alloc(a, sizeof(int) * ((size_t)g->nval + 1));
  p.ver = arena_alloc(a, sizeof(int) * ((size_t)g->nval * IR_DT_COUNT + 1));
  if (!p.out || !p.base || !p.ver) return oom(&p), NULL;
  for (size_t i = 0; i < (size_t)g->nval * IR_DT_COUNT; i++) p.ver[i] = -1;
  for (int i = 0; i < g->ntrain; i++)
    if (!ir_train_set(p.out, &g->train[i])) return oom(&p), NULL;
  if (default_loss_scale(&p)) return NULL;
  p.dynamic = dynamic_input(&p);
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    IrValueKind kind = v == p.dynamic ? IR_VAL_STATE : val->kind;
    p.base[v] = -1;
    if (val->kind != IR_VAL_ACT && (p.base[v] = ir_value_add(p.out, kind, val->type, val->name)) < 0)
      return oom(&p), NULL;
  }
  if (p.dynamic >= 0 && (p.steps = ir_value_add(p.out, IR_VAL_STATE, ir_type(IR_DT_F32, IR_LAYOUT_ROW, 0, NULL),
                                                "loss_scale_good_steps")) < 0)
    return oom(&p), NULL;
  if (p.dynamic >= 0 ? copy_dynamic(&p) : copy_nodes(&p)) return NULL;
  for (int i = 0; i < g->noutput; i++) {
    int v = g->output[i];
    int id = in_dtype(&p, v, (int)g->val[v].type.dtype, (SrcLoc){0});
    if (id < 0 || ir_output_add(p.out, id)) return id < 0 ? NULL : (oom(&p), NULL);
  }
  return p.out;
}
