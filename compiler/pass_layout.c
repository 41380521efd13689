/* pass_layout.c - NHWC activations, KRSC filters, and channel counts padded
 * so that tensor cores engage.
 *
 * Assumes a verified graph (training step, inference form or forward graph,
 * fused or not).  Rebuilds it so that every rank-4 activation a node reads
 * or makes is NHWC and every filter KRSC: conv filter params, and the state
 * that follows them (momentum buffers), change type in place (dims permuted;
 * the runtime transposes KCRS files when it loads and saves them); graph
 * inputs keep the layout the user gives, and a `relayout` right before
 * their first use turns them NHWC.  A value is moved between layouts or
 * channel counts only by an explicit `relayout {layout c}`, made once per
 * (value, layout, channels) right before its first use: after `unflatten`
 * (which makes NCHW), before a `flatten` of an image larger than 1x1
 * (feature order), and for padding.  Graph outputs keep their type.
 *
 * Padding: a convolution with groups=1 whose input channel count C is not a
 * multiple of the tensor-core granule of the dtype the precision policy
 * gives it (f32/TF32: 4, f16/bf16: 8, i8: 16; f32 everywhere when the
 * precision pass is off) reads its input padded with zero channels and its
 * filter padded with zero input channels, both by `relayout c=C'`; the
 * filter is padded from its unpadded master every step.  The backward ops
 * pad the same way, and their results with C' channels (the data gradient,
 * the filter gradient) are cropped back to C by `relayout c=C` before use,
 * so sgd_update sees the unpadded shapes (the relayouts that the optimizer
 * section and the graph outputs read are made before the section starts, so
 * that only optimizer ops are in it).  Zero input channels against zero
 * filter taps add exact zeros: results are unchanged.  Output channels (K)
 * and linear layers are not padded.  A graph that is already NHWC/KRSC with
 * padded channels comes back unchanged.
 *
 *   before:  %2 = conv2d(%0, @conv1.weight) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,16,28,28] NCHW  # conv1
 *   after:   %2 = relayout(%0) {layout="NHWC" c=4} : f32[N,28,28,4] NHWC  # image.nhwc
 *            %3 = relayout(@conv1.weight) {layout="KRSC" c=4} : f32[16,3,3,4] KRSC  # conv1.weight.pad
 *            %4 = conv2d(%2, %3) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,28,28,16] NHWC  # conv1
 *
 * docs/passes/layout.md has the padding rules, the weight-file contract and
 * a whole before/after. */
#include <string.h>

#include "pipeline.h"

enum { MAX_OUT = 8 };

/* One copy of a value of g in the new graph: its layout and channel count. */
typedef struct Version {
  int id;
  IrLayout layout;
  int64_t c;
  struct Version *next;
} Version;

typedef struct Lay {
  const IrGraph *g;
  IrGraph *out;
  const PassCtx *cx;
  Diag *d;
  int precision_on;
  Version **ver; /* value of g -> its copies, the first one made first */
} Lay;

static int oom(Lay *l) {
  diag_error(l->d, (SrcLoc){0}, "layout: out of memory");
  return -1;
}

static int is_act(IrLayout t) { return t == IR_LAYOUT_NCHW || t == IR_LAYOUT_NHWC; }
static int is_filter(IrLayout t) { return t == IR_LAYOUT_KCRS || t == IR_LAYOUT_KRSC; }
static int chan_at(IrLayout t) { return t == IR_LAYOUT_NHWC || t == IR_LAYOUT_KRSC ? 3 : 1; }

/* Channel count of a rank-4 image or filter type; -1 for any other. */
static int64_t channels(const IrType *t) {
  return t->rank == 4 && (is_act(t->layout) || is_filter(t->layout)) ? t->dim[chan_at(t->layout)] : -1;
}

/* t in NHWC / KRSC (dims permuted); other types unchanged. */
static IrType channels_last(IrType t) {
  if (t.rank != 4 || (t.layout != IR_LAYOUT_NCHW && t.layout != IR_LAYOUT_KCRS)) return t;
  int64_t d[4] = {t.dim[0], t.dim[2], t.dim[3], t.dim[1]};
  return ir_type(t.dtype, t.layout == IR_LAYOUT_NCHW ? IR_LAYOUT_NHWC : IR_LAYOUT_KRSC, 4, d);
}

static int add_version(Lay *l, int v, int id) {
  Version *nv = arena_alloc(l->out->arena, sizeof *nv);
  if (!nv) return oom(l);
  const IrType *t = &l->out->val[id].type;
  *nv = (Version){.id = id, .layout = t->layout, .c = channels(t)};
  Version **tail = &l->ver[v];
  while (*tail) tail = &(*tail)->next;
  *tail = nv;
  return 0;
}

static int emit(Lay *l, IrOp op, const char *name, SrcLoc loc, const int *in, int nin, IrAttr *attr, int nattr,
                int nout) {
  IrNode tmp = {.op = op, .name = name, .nin = nin, .in = (int *)in, .nattr = nattr, .attr = attr, .loc = loc};
  IrType types[MAX_OUT];
  char err[256];
  if (nout > MAX_OUT || ir_infer(l->out, &tmp, types, err, sizeof err)) {
    diag_error(l->d, loc, "layout: cannot build %s%s%s: %s", ir_op_info(op)->name, name ? " " : "", name ? name : "",
               nout > MAX_OUT ? "too many results" : err);
    return -1;
  }
  int id = ir_node_add(l->out, op, name, loc, in, nin, types, nout);
  if (id < 0) return oom(l);
  l->out->node[id].attr = attr;
  l->out->node[id].nattr = nattr;
  return id;
}

/* "<producer or value name>.<what>", or NULL when the value has no name. */
static const char *relayout_name(Lay *l, int v, const char *what) {
  const IrValue *val = &l->g->val[v];
  const char *base = val->name;
  if (!base && val->def >= 0) base = l->g->node[val->def].name;
  return base ? arena_printf(l->out->arena, "%s.%s", base, what) : NULL;
}

/* Value v of g in `layout` with c channels: an existing copy, or a relayout
 * (made from a copy in the same layout when there is one) placed here. */
static int in_layout(Lay *l, int v, IrLayout layout, int64_t c, SrcLoc loc) {
  Version *src = l->ver[v];
  for (Version *x = l->ver[v]; x; x = x->next) {
    if (x->layout == layout && x->c == c) return x->id;
    if (x->layout == layout && src->layout != layout) src = x;
  }
  IrAttr *a = arena_alloc(l->out->arena, 2 * sizeof *a);
  if (!a) return oom(l);
  a[0] = (IrAttr){.key = "layout", .kind = IR_ATTR_STR, .s = ir_layout_name(layout)};
  a[1] = (IrAttr){.key = "c", .kind = IR_ATTR_INT, .n = 1, .i = {c}};
  const char *what = src->layout != layout ? (layout == IR_LAYOUT_NHWC   ? "nhwc"
                                              : layout == IR_LAYOUT_NCHW ? "nchw"
                                              : layout == IR_LAYOUT_KRSC ? "krsc"
                                                                         : "kcrs")
                     : c > src->c          ? "pad"
                                           : "crop";
  int id = emit(l, IR_OP_RELAYOUT, relayout_name(l, v, what), loc, &src->id, 1, a, 2, 1);
  if (id < 0) return -1;
  id = l->out->node[id].out[0];
  return add_version(l, v, id) ? -1 : id;
}

/* A stride-2 convolution wider than 2x2 on at most 4 channels (an image
 * stem): the GPU folds a forward one 2x2 into 4C channels (s2d.cu), so 4
 * channels become 16 in any dtype.  Used for inference graphs (an f16 stem
 * is their default); a training graph's backward ops are not folded. */
static int folds_2x2(const IrNode *node, int64_t C) {
  const IrAttr *k = ir_attr_find(node, "k"), *s = ir_attr_find(node, "s"), *d = ir_attr_find(node, "d");
  return C <= 4 && k && s && k->n == 2 && s->n == 2 && k->i[0] > 2 && k->i[1] > 2 && s->i[0] == 2 && s->i[1] == 2 &&
         (!d || (d->n == 2 && d->i[0] == 1 && d->i[1] == 1));
}

/* Channels a conv node computes over: C rounded up to its dtype's granule
 * (a folded stem's f16 or bf16: 4, folds_2x2). */
static int64_t padded(Lay *l, int n, int64_t C) {
  const IrNode *node = &l->g->node[n];
  if (ir_attr_int(node, "groups", 1) != 1) return C;
  IrDtype dt = l->precision_on ? pass_precision_policy(l->g, n, l->cx) : IR_DT_F32;
  int half = dt == IR_DT_F16 || dt == IR_DT_BF16;
  int64_t granule = dt == IR_DT_I8 || dt == IR_DT_F8E4M3 || dt == IR_DT_F8E5M2 ? 16
                    : half && !(l->cx->inference && folds_2x2(node, C))        ? 8
                                                                               : 4;
  return (C + granule - 1) / granule * granule;
}

static int64_t orig_channels(Lay *l, int v) { return channels(&l->g->val[v].type); }

/* The copy of input i of node n that the node reads (id in out). */
static int input_for(Lay *l, int n, int i) {
  const IrNode *node = &l->g->node[n];
  int v = node->in[i];
  const IrType *t = &l->g->val[v].type;
  int64_t C = orig_channels(l, v);
  if (C < 0 || node->op == IR_OP_RELAYOUT) return l->ver[v]->id;
  IrOp op = node->op;
  int conv_fwd =
      op == IR_OP_CONV2D || op == IR_OP_CONV2D_BN_TRAIN || op == IR_OP_CONV2D_BN || op == IR_OP_CONV2D_BN_STATS;
  int conv_dgrad =
      op == IR_OP_CONV2D_BWD_DATA || op == IR_OP_CONV2D_BWD_DATA_RELU || op == IR_OP_CONV2D_BWD_DATA_BN_RELU;
  if ((conv_fwd && i == 0) || (op == IR_OP_CONV2D_BWD_WEIGHT && i == 1))
    return in_layout(l, v, IR_LAYOUT_NHWC, padded(l, n, C), node->loc);
  if ((conv_fwd || conv_dgrad) && i == 1) return in_layout(l, v, IR_LAYOUT_KRSC, padded(l, n, C), node->loc);
  if (op == IR_OP_CONV2D_BWD_DATA_RELU && i >= 2) /* the relu mask and the addend, shaped like the data gradient */
    return in_layout(l, v, IR_LAYOUT_NHWC, padded(l, n, C), node->loc);
  if (is_filter(t->layout)) return in_layout(l, v, IR_LAYOUT_KRSC, C, node->loc);
  if (op == IR_OP_FLATTEN && is_act(t->layout)) {
    int h = t->layout == IR_LAYOUT_NHWC ? 1 : 2;
    if (t->dim[h] * t->dim[h + 1] != 1) /* flatten's feature order is C, H, W */
      return in_layout(l, v, IR_LAYOUT_NCHW, C, node->loc);
    for (Version *x = l->ver[v]; x; x = x->next)
      if (x->c == C) return x->id; /* 1x1: both layouts flatten alike */
  }
  return in_layout(l, v, IR_LAYOUT_NHWC, C, node->loc);
}

static int copy_node(Lay *l, int n) {
  const IrNode *node = &l->g->node[n];
  int *in = arena_alloc(l->out->arena, sizeof(int) * ((size_t)node->nin + 1));
  if (!in) return oom(l);
  for (int i = 0; i < node->nin; i++)
    if ((in[i] = input_for(l, n, i)) < 0) return -1;
  /* attributes are immutable once made: share them */
  int id = emit(l, node->op, node->name, node->loc, in, node->nin, node->attr, node->nattr, node->nout);
  if (id < 0) return -1;
  for (int i = 0; i < node->nout; i++)
    if (add_version(l, node->out[i], l->out->node[id].out[i])) return -1;
  return 0;
}

/* The copy of graph output v (in its own type). */
static int output_for(Lay *l, int v) {
  const IrType *t = &l->g->val[v].type;
  return channels(t) < 0 ? l->ver[v]->id : in_layout(l, v, t->layout, channels(t), (SrcLoc){0});
}

/* The relayouts the optimizer section's nodes and the graph outputs read,
 * made before the section (or the end) so that the section holds only
 * optimizer ops; copy_node and output_for find them made. */
static int relayout_before_section(Lay *l) {
  const IrGraph *g = l->g;
  int start = ir_opt_start(g);
  for (int n = start; n < g->nnode; n++)
    for (int i = 0; i < g->node[n].nin; i++) {
      const IrValue *val = &g->val[g->node[n].in[i]];
      if ((val->kind != IR_VAL_ACT || val->def < start) && input_for(l, n, i) < 0) return -1;
    }
  for (int i = 0; i < g->noutput; i++) {
    const IrValue *val = &g->val[g->output[i]];
    if ((val->kind != IR_VAL_ACT || val->def < start) && output_for(l, g->output[i]) < 0) return -1;
  }
  return 0;
}

IrGraph *pass_layout(IrGraph *g, PassCtx *cx) {
  int ip = pipeline_find("precision");
  Lay l = {.g = g, .cx = cx, .d = cx->d, .precision_on = ip >= 0 && !(cx->disabled & (1u << ip))};
  Arena *a = g->arena;
  l.out = ir_graph_new(a, g->name);
  l.ver = arena_alloc(a, sizeof(Version *) * ((size_t)g->nval + 1));
  if (!l.out || !l.ver) return oom(&l), NULL;
  for (int i = 0; i < g->ntrain; i++)
    if (!ir_train_set(l.out, &g->train[i])) return oom(&l), NULL;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT) continue;
    IrType t = val->kind == IR_VAL_INPUT ? val->type : channels_last(val->type);
    int id = ir_value_add(l.out, val->kind, t, val->name);
    if (id < 0 || add_version(&l, v, id)) return oom(&l), NULL;
  }
  for (int n = 0; n <= g->nnode; n++) {
    if (n == ir_opt_start(g) && relayout_before_section(&l)) return NULL;
    ir_opt_follow(l.out, g, n);
    if (n < g->nnode && copy_node(&l, n)) return NULL;
  }
  for (int i = 0; i < g->noutput; i++) {
    int id = output_for(&l, g->output[i]);
    if (id < 0 || ir_output_add(l.out, id)) return id < 0 ? NULL : (oom(&l), NULL);
  }
  return l.out;
}
