/* ir.c - building IR graphs: values, nodes, attributes and types.
 * The text form is in ir_print.c / ir_read.c, the checks in ir_verify.c. */
#include "ir.h"

#include <inttypes.h>
#include <string.h>

static const char *const DTYPE_NAMES[IR_DT_COUNT] = {
    [IR_DT_F32] = "f32", [IR_DT_F16] = "f16", [IR_DT_BF16] = "bf16",     [IR_DT_I8] = "i8",         [IR_DT_I32] = "i32",
    [IR_DT_I64] = "i64", [IR_DT_U8] = "u8",   [IR_DT_F8E4M3] = "f8e4m3", [IR_DT_F8E5M2] = "f8e5m2",
};
static const size_t DTYPE_SIZES[IR_DT_COUNT] = {
    [IR_DT_F32] = 4, [IR_DT_F16] = 2, [IR_DT_BF16] = 2,   [IR_DT_I8] = 1,     [IR_DT_I32] = 4,
    [IR_DT_I64] = 8, [IR_DT_U8] = 1,  [IR_DT_F8E4M3] = 1, [IR_DT_F8E5M2] = 1,
};
static const char *const LAYOUT_NAMES[IR_LAYOUT_COUNT] = {
    [IR_LAYOUT_ROW] = "",      [IR_LAYOUT_NCHW] = "NCHW", [IR_LAYOUT_NHWC] = "NHWC",
    [IR_LAYOUT_KCRS] = "KCRS", [IR_LAYOUT_KRSC] = "KRSC",
};

IrGraph *ir_graph_new(Arena *a, const char *name) {
  IrGraph *g = arena_alloc(a, sizeof *g);
  if (!g) return NULL;
  g->arena = a;
  g->opt_first = -1;
  g->name = arena_strdup(a, name ? name : "net");
  return g->name ? g : NULL;
}

int ir_sole_reader(const IrGraph *g, int v, int from, int *k) {
  int r = -1;
  for (int u = from + 1; u < g->nnode; u++)
    for (int i = 0; i < g->node[u].nin; i++)
      if (g->node[u].in[i] == v) {
        if (r >= 0) return -1;
        r = u;
        if (k) *k = i;
      }
  return r;
}

IrGraph *ir_graph_rebuild(const IrGraph *g, int *map) {
  IrGraph *out = ir_graph_new(g->arena, g->name);
  if (!out) return NULL;
  for (int i = 0; i < g->ntrain; i++)
    if (!ir_train_set(out, &g->train[i])) return NULL;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    map[v] = -1;
    if (val->kind != IR_VAL_ACT && (map[v] = ir_value_add(out, val->kind, val->type, val->name)) < 0) return NULL;
  }
  return out;
}

#define COPY_ARRAY(a, p, n) ((n) ? arena_grow((a), (p), sizeof *(p) * (size_t)(n), sizeof *(p) * (size_t)(n)) : NULL)

IrGraph *ir_graph_clone(const IrGraph *g) {
  Arena *a = g->arena;
  IrGraph *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  *c = *g;
  c->val = COPY_ARRAY(a, g->val, g->nval);
  c->node = COPY_ARRAY(a, g->node, g->nnode);
  c->output = COPY_ARRAY(a, g->output, g->noutput);
  c->train = COPY_ARRAY(a, g->train, g->ntrain);
  c->capval = c->nval;
  c->capnode = c->nnode;
  c->capoutput = c->noutput;
  c->captrain = c->ntrain;
  for (int i = 0; i < c->nnode; i++) {
    IrNode *n = &c->node[i];
    n->in = COPY_ARRAY(a, n->in, n->nin);
    n->out = COPY_ARRAY(a, n->out, n->nout);
    n->attr = COPY_ARRAY(a, n->attr, n->nattr);
    if ((n->nin && !n->in) || (n->nout && !n->out) || (n->nattr && !n->attr)) return NULL;
  }
  if ((g->nval && !c->val) || (g->nnode && !c->node) || (g->noutput && !c->output) || (g->ntrain && !c->train))
    return NULL;
  return c;
}

int ir_value_add(IrGraph *g, IrValueKind kind, IrType type, const char *name) {
  if (!ARENA_RESERVE(g->arena, g->val, g->nval, g->capval)) return -1;
  IrValue *v = &g->val[g->nval];
  memset(v, 0, sizeof *v);
  v->kind = kind;
  v->type = type;
  v->name = name ? arena_strdup(g->arena, name) : NULL;
  v->def = -1;
  v->offset = -1;
  if (name && !v->name) return -1;
  return g->nval++;
}

int ir_node_add(IrGraph *g, IrOp op, const char *name, SrcLoc loc, const int *in, int nin, const IrType *out_types,
                int nout) {
  if (!ARENA_RESERVE(g->arena, g->node, g->nnode, g->capnode)) return -1;
  int id = g->nnode;
  IrNode n = {.op = op, .nin = nin, .nout = nout, .loc = loc};
  n.name = name ? arena_strdup(g->arena, name) : NULL;
  n.in = nin ? arena_alloc(g->arena, sizeof(int) * (size_t)nin) : NULL;
  n.out = nout ? arena_alloc(g->arena, sizeof(int) * (size_t)nout) : NULL;
  if ((name && !n.name) || (nin && !n.in) || (nout && !n.out)) return -1;
  if (nin) memcpy(n.in, in, sizeof(int) * (size_t)nin);
  for (int i = 0; i < nout; i++) {
    int v = ir_value_add(g, IR_VAL_ACT, out_types[i], NULL);
    if (v < 0) return -1;
    g->val[v].def = id;
    n.out[i] = v;
  }
  g->node[id] = n;
  g->nnode++;
  return id;
}

int ir_output_add(IrGraph *g, int value) {
  if (!ARENA_RESERVE(g->arena, g->output, g->noutput, g->capoutput)) return -1;
  g->output[g->noutput++] = value;
  return 0;
}

static IrAttr *attr_push(IrGraph *g, IrNode *n, const char *key, IrAttrKind kind) {
  int cap = n->nattr; /* attribute lists are short: grow by one, exact size */
  IrAttr *na = arena_grow(g->arena, n->attr, sizeof *na * (size_t)cap, sizeof *na * (size_t)(cap + 1));
  if (!na) return NULL;
  n->attr = na;
  IrAttr *a = &na[n->nattr++];
  memset(a, 0, sizeof *a);
  a->key = arena_strdup(g->arena, key);
  a->kind = kind;
  return a->key ? a : NULL;
}

IrAttr *ir_attr_set_int(IrGraph *g, int node, const char *key, int64_t v) {
  IrAttr *a = attr_push(g, &g->node[node], key, IR_ATTR_INT);
  if (a) a->n = 1, a->i[0] = v;
  return a;
}

IrAttr *ir_attr_set_ints(IrGraph *g, int node, const char *key, const int64_t *v, int n) {
  if (n < 1 || n > IR_MAX_INTS) return NULL;
  IrAttr *a = attr_push(g, &g->node[node], key, IR_ATTR_INTS);
  if (a) a->n = n, memcpy(a->i, v, sizeof(int64_t) * (size_t)n);
  return a;
}

IrAttr *ir_attr_set_float(IrGraph *g, int node, const char *key, double v) {
  IrAttr *a = attr_push(g, &g->node[node], key, IR_ATTR_FLOAT);
  if (a) a->f = v;
  return a;
}

IrAttr *ir_attr_set_dtype(IrGraph *g, int node, const char *key, IrDtype v) {
  IrAttr *a = attr_push(g, &g->node[node], key, IR_ATTR_DTYPE);
  if (a) a->n = 1, a->i[0] = v;
  return a;
}

IrAttr *ir_attr_set_str(IrGraph *g, int node, const char *key, const char *v) {
  IrAttr *a = attr_push(g, &g->node[node], key, IR_ATTR_STR);
  if (a && !(a->s = arena_strdup(g->arena, v))) return NULL;
  return a;
}

const IrAttr *ir_attr_find(const IrNode *n, const char *key) {
  for (int i = 0; i < n->nattr; i++)
    if (strcmp(n->attr[i].key, key) == 0) return &n->attr[i];
  return NULL;
}

int64_t ir_attr_int(const IrNode *n, const char *key, int64_t dflt) {
  const IrAttr *a = ir_attr_find(n, key);
  return a && a->kind != IR_ATTR_FLOAT && a->kind != IR_ATTR_STR ? a->i[0] : dflt;
}

double ir_attr_float(const IrNode *n, const char *key, double dflt) {
  const IrAttr *a = ir_attr_find(n, key);
  if (!a) return dflt;
  return a->kind == IR_ATTR_FLOAT ? a->f : a->kind == IR_ATTR_INT ? (double)a->i[0] : dflt;
}

/* Where a convolution's optional inputs start: after (x, w, gamma, beta,
 * running_mean, running_var) for the conv + batch-norm forms, after (dy, x)
 * for the weight gradient; -1 for ops that take none. */
static int conv_optional_from(IrOp op) {
  switch (op) {
  case IR_OP_CONV2D_BN_TRAIN:
  case IR_OP_CONV2D_BN:
  case IR_OP_CONV2D_BN_STATS: return 6;
  case IR_OP_CONV2D_BWD_WEIGHT: return 2;
  default: return -1;
  }
}

static int rank_of(const IrGraph *g, const IrNode *n, int i) {
  return n->in[i] >= 0 && n->in[i] < g->nval ? g->val[n->in[i]].type.rank : -1;
}

int ir_conv_prologue(const IrGraph *g, const IrNode *n) {
  int i = conv_optional_from(n->op);
  return i >= 0 && i < n->nin && rank_of(g, n, i) == 2 ? i : -1;
}

int ir_conv_residual(const IrGraph *g, const IrNode *n) {
  if (n->op == IR_OP_CONV2D_BWD_DATA_RELU) return n->nin > 3 && rank_of(g, n, 3) == 4 ? 3 : -1;
  if (n->op != IR_OP_CONV2D_BN_TRAIN && n->op != IR_OP_CONV2D_BN) return -1;
  int from = conv_optional_from(n->op), pro = ir_conv_prologue(g, n);
  int i = pro >= 0 ? pro + 1 : from;
  return from >= 0 && i < n->nin && rank_of(g, n, i) == 4 ? i : -1;
}

int ir_amax_history(const IrGraph *g, int v) {
  for (int i = 0; i < g->nnode; i++)
    if (g->node[i].op == IR_OP_CAST && g->node[i].nin == 2 && g->node[i].in[1] == v) return 1;
  return 0;
}

IrAttr *ir_train_set(IrGraph *g, const IrAttr *src) {
  for (int i = 0; i < g->ntrain; i++)
    if (strcmp(g->train[i].key, src->key) == 0) {
      const char *key = g->train[i].key;
      g->train[i] = *src;
      g->train[i].key = key;
      return &g->train[i];
    }
  if (!ARENA_RESERVE(g->arena, g->train, g->ntrain, g->captrain)) return NULL;
  IrAttr *a = &g->train[g->ntrain];
  *a = *src;
  a->key = arena_strdup(g->arena, src->key);
  if (src->s) a->s = arena_strdup(g->arena, src->s);
  if (!a->key || (src->s && !a->s)) return NULL;
  g->ntrain++;
  return a;
}

const IrAttr *ir_train_find(const IrGraph *g, const char *key) {
  for (int i = 0; i < g->ntrain; i++)
    if (strcmp(g->train[i].key, key) == 0) return &g->train[i];
  return NULL;
}

int ir_value_is_weight(const IrGraph *g, int v) {
  return v >= 0 && v < g->nval && (g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE);
}

int ir_node_once(const IrNode *n) { return ir_attr_int(n, "once", 0) != 0; }

int ir_opt_start(const IrGraph *g) { return g->opt_first >= 0 ? g->opt_first : g->nnode; }

void ir_opt_follow(IrGraph *out, const IrGraph *g, int n) {
  if (g->opt_first >= 0 && n >= g->opt_first && out->opt_first < 0) out->opt_first = out->nnode;
}

IrType ir_type(IrDtype dt, IrLayout layout, int rank, const int64_t *dim) {
  IrType t = {.dtype = dt, .layout = layout, .rank = rank};
  for (int i = 0; i < rank && i < IR_MAX_RANK; i++) t.dim[i] = dim[i];
  return t;
}

int ir_type_equal(const IrType *a, const IrType *b) {
  if (a->dtype != b->dtype || a->layout != b->layout || a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return 0;
  return 1;
}

const char *ir_type_str(const IrType *t, char *buf, size_t len) {
  size_t o = (size_t)snprintf(buf, len, "%s[", ir_dtype_name(t->dtype));
  int rank = t->rank < 0 ? 0 : t->rank > IR_MAX_RANK ? IR_MAX_RANK : t->rank;
  for (int i = 0; i < rank && o < len; i++) {
    if (t->dim[i] == IR_DIM_N)
      o += (size_t)snprintf(buf + o, len - o, "%sN", i ? "," : "");
    else
      o += (size_t)snprintf(buf + o, len - o, "%s%" PRId64, i ? "," : "", t->dim[i]);
  }
  if (o < len) o += (size_t)snprintf(buf + o, len - o, "]");
  if (o < len && t->layout != IR_LAYOUT_ROW) snprintf(buf + o, len - o, " %s", ir_layout_name(t->layout));
  return buf;
}

int64_t ir_type_numel(const IrType *t, int64_t batch) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dim[i] == IR_DIM_N ? batch : t->dim[i];
  return n;
}

size_t ir_dtype_size(IrDtype dt) { return (unsigned)dt < IR_DT_COUNT ? DTYPE_SIZES[dt] : 0; }

int64_t ir_value_scales(const IrGraph *g, int v, int64_t batch) {
  const IrValue *val = &g->val[v];
  IrDtype dt = val->type.dtype;
  if ((dt != IR_DT_I8 && dt != IR_DT_F8E4M3 && dt != IR_DT_F8E5M2) || val->def < 0) return 0;
  const IrNode *n = &g->node[val->def];
  if (dt == IR_DT_I8 && n->out[0] == v && ir_node_rescales(n) && ir_attr_find(n, "y_scale"))
    return 1; /* a convolution's requantized result (pass requant), the stem's pool (pass prologue) */
  if (n->op != IR_OP_CAST || n->out[0] != v) return 0;
  if (!ir_attr_find(n, "axis") || val->type.rank < 1) return 1;
  int64_t d0 = val->type.dim[0] == IR_DIM_N ? batch : val->type.dim[0];
  return d0 > 1 ? d0 : 1;
}

double ir_value_step(const IrGraph *g, int v) {
  int d = g->val[v].def;
  if (d < 0 || g->val[v].type.dtype != IR_DT_I8 || g->node[d].out[0] != v) return 0;
  const IrNode *n = &g->node[d];
  const IrAttr *s = ir_attr_find(n, n->op == IR_OP_CAST ? "scale" : "y_scale");
  if (n->op == IR_OP_CAST && ir_attr_find(n, "axis")) return 0;
  return (n->op == IR_OP_CAST || ir_node_rescales(n)) && s && s->kind == IR_ATTR_FLOAT ? s->f : 0;
}

int ir_node_rescales(const IrNode *n) {
  return n->op == IR_OP_CONV2D || n->op == IR_OP_CONV2D_BN || n->op == IR_OP_MAXPOOL_BN_RELU_INFER;
}

int64_t ir_scales_offset(int64_t elem_bytes) { return (elem_bytes + 15) / 16 * 16; }

int64_t ir_value_bytes(const IrGraph *g, int v, int64_t batch) {
  const IrType *t = &g->val[v].type;
  int64_t n = (int64_t)ir_dtype_size(t->dtype), s = ir_value_scales(g, v, batch);
  for (int i = 0; i < t->rank; i++)
    if (__builtin_mul_overflow(n, t->dim[i] == IR_DIM_N ? batch : t->dim[i], &n)) return -1;
  if (!s) return n;
  if (n > INT64_MAX / 2 || s > INT64_MAX / 16) return -1;
  return ir_scales_offset(n) + s * (int64_t)sizeof(float);
}

const char *ir_dtype_name(IrDtype dt) { return (unsigned)dt < IR_DT_COUNT ? DTYPE_NAMES[dt] : "?"; }

int ir_dtype_parse(const char *s) {
  for (int i = 0; i < IR_DT_COUNT; i++)
    if (strcmp(DTYPE_NAMES[i], s) == 0) return i;
  return -1;
}

const char *ir_layout_name(IrLayout l) { return (unsigned)l < IR_LAYOUT_COUNT ? LAYOUT_NAMES[l] : "?"; }

int ir_layout_parse(const char *s) {
  for (int i = 1; i < IR_LAYOUT_COUNT; i++)
    if (strcmp(LAYOUT_NAMES[i], s) == 0) return i;
  return -1;
}
