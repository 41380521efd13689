/* lower.c - elaborate the AST of a .net file into the forward IR.
 *
 * An interpreter over the syntax tree: values are ints, floats, bools,
 * dtypes, int tuples or tensors (IR value ids).  A block call opens a frame
 * whose layer-name prefix is the call's name, binds the arguments, runs the
 * statements and yields the `return` value; loops are unrolled and `?:` and
 * `if` evaluate only the chosen side, so a projection shortcut exists only
 * where its condition holds.  Each op call becomes one IR node typed by
 * ir_infer(); its parameters become PARAM/STATE values named
 * "<layer>.weight", "<layer>.running_mean", ... as torchvision names them.
 *
 * Errors are reported with the location of the offending expression and
 * elaboration goes on with a poisoned value (V_ERR) that silences follow-on
 * errors, so one run reports every independent mistake in the file. */
#include "lower.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

enum {
  MAX_CALL_DEPTH = 64,      /* nested block calls */
  MAX_EXPR_DEPTH = 1000,    /* nested expressions, far beyond any real file */
  MAX_NODES = 1000000,      /* ops in one network */
  MAX_CHANNELS = 1 << 20,   /* output channels / features of one layer */
  MAX_INPUT_DIM = 1 << 20,  /* one input dimension */
  MAX_ITERATIONS = 1 << 24, /* loop iterations in one network, nested ones included: loops are unrolled */
};
#define MAX_SAMPLE_ELEMS ((int64_t)1 << 34) /* elements of one tensor, per sample */

typedef enum VKind { V_ERR, V_NONE, V_INT, V_FLOAT, V_BOOL, V_DTYPE, V_TUPLE, V_TENSOR } VKind;

typedef struct Val {
  VKind k;
  int64_t i; /* INT, BOOL, DTYPE; TENSOR: value id */
  double f;  /* FLOAT */
  int n;     /* TUPLE: element count, ints in t[] */
  int64_t t[IR_MAX_INTS];
} Val;

typedef struct Binding Binding;
struct Binding {
  const char *name;
  Val v;
  Binding *next;
};

typedef struct Frame Frame;
struct Frame {
  Binding *vars;  /* newest first */
  Binding **slot; /* vars by name hash (open addressing, at most half full), or NULL */
  int nslot, nvars;
  const char *scope;     /* layer-name prefix, "" at network level */
  const AstBlock *block; /* NULL at network level */
  SrcLoc call;           /* where this block was called */
  const Frame *parent;
  int depth;
  int returned; /* a `return` ran */
  Val ret;
};

/* Layer names in use: explicit names of layers with parameters must be
 * unique; other names are made unique with a numeric suffix. */
typedef struct NameUse {
  const char *name;
  SrcLoc loc;
  int suffix; /* last numeric suffix handed out for this name */
} NameUse;

/* Layer names in use, hashed (open addressing; slot holds index + 1), so a
 * network of a million layers is named in linear time. */
typedef struct NameSet {
  NameUse *use;
  int n, cap;
  int *slot;
  int nslot;
} NameSet;

typedef struct Lower {
  Arena *a;
  Diag *d;
  const AstFile *file;
  IrGraph *g;
  NameSet names;
  int expr_depth;
  int loss_node;
  SrcLoc loss_loc;
  int too_big;        /* MAX_NODES or MAX_ITERATIONS hit: stop elaborating */
  int64_t iterations; /* loop iterations run so far */
} Lower;

static Val verr(void) { return (Val){.k = V_ERR}; }
static Val vint(int64_t i) { return (Val){.k = V_INT, .i = i}; }
static Val vbool(int b) { return (Val){.k = V_BOOL, .i = !!b}; }

static const char *kind_name(VKind k) {
  static const char *const names[] = {"error",     "nothing", "an integer", "a number",
                                      "a boolean", "a dtype", "a tuple",    "a tensor"};
  return names[k];
}

static void error(Lower *L, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void error(Lower *L, SrcLoc loc, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(L->d, loc, "%s", msg);
}

/* --- names ---------------------------------------------------------------- */

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static int names_find(const NameSet *s, const char *name) {
  if (!s->nslot) return -1;
  for (uint64_t i = name_hash(name) & (uint64_t)(s->nslot - 1);; i = (i + 1) & (uint64_t)(s->nslot - 1)) {
    int k = s->slot[i] - 1;
    if (k < 0) return -1;
    if (strcmp(s->use[k].name, name) == 0) return k;
  }
}

static void names_insert_slot(NameSet *s, int k) {
  uint64_t i = name_hash(s->use[k].name) & (uint64_t)(s->nslot - 1);
  while (s->slot[i]) i = (i + 1) & (uint64_t)(s->nslot - 1);
  s->slot[i] = k + 1;
}

static void names_add(Lower *L, const char *name, SrcLoc loc) {
  NameSet *s = &L->names;
  if (2 * (s->n + 1) > s->nslot) { /* keep the table at most half full */
    int nslot = s->nslot ? 2 * s->nslot : 1024;
    int *slot = arena_alloc(L->a, sizeof(int) * (size_t)nslot);
    if (!slot) return;
    s->slot = slot;
    s->nslot = nslot;
    for (int k = 0; k < s->n; k++) names_insert_slot(s, k);
  }
  if (!ARENA_RESERVE(L->a, s->use, s->n, s->cap)) return;
  s->use[s->n] = (NameUse){name, loc, 0};
  names_insert_slot(s, s->n++);
}

static const char *join(Lower *L, const char *scope, const char *name) {
  return *scope ? arena_printf(L->a, "%s.%s", scope, name) : arena_strdup(L->a, name);
}

/* A unique node name: `want` itself, or want_1, want_2, ... */
static const char *unique_name(Lower *L, const char *want, SrcLoc loc) {
  int base = names_find(&L->names, want);
  const char *name = want;
  if (base >= 0) {
    int k = L->names.use[base].suffix;
    do name = arena_printf(L->a, "%s_%d", want, ++k);
    while (name && names_find(&L->names, name) >= 0);
    L->names.use[base].suffix = k;
  }
  if (name) names_add(L, name, loc);
  return name;
}

/* --- variables -------------------------------------------------------------- */

/* A frame's variables are found through a hash of their names, so a
 * network of 100,000 assignments binds and looks them up in linear time. */
static Binding *lookup(Frame *f, const char *name) {
  if (!f->nslot) return NULL;
  for (uint64_t i = name_hash(name) & (uint64_t)(f->nslot - 1);; i = (i + 1) & (uint64_t)(f->nslot - 1)) {
    Binding *b = f->slot[i];
    if (!b || strcmp(b->name, name) == 0) return b;
  }
}

static void frame_index(Frame *f, Binding *b) {
  uint64_t i = name_hash(b->name) & (uint64_t)(f->nslot - 1);
  while (f->slot[i]) i = (i + 1) & (uint64_t)(f->nslot - 1);
  f->slot[i] = b;
}

static void bind(Lower *L, Frame *f, const char *name, Val v) {
  Binding *b = lookup(f, name);
  if (!b) {
    if (2 * (f->nvars + 1) > f->nslot) { /* keep the table at most half full */
      int nslot = f->nslot ? 2 * f->nslot : 16;
      Binding **slot = arena_alloc(L->a, sizeof *slot * (size_t)nslot);
      if (!slot) return; /* zeroed */
      f->slot = slot, f->nslot = nslot;
      for (Binding *o = f->vars; o; o = o->next) frame_index(f, o);
    }
    b = arena_alloc(L->a, sizeof *b);
    if (!b) return;
    b->name = name;
    b->next = f->vars;
    f->vars = b;
    f->nvars++;
    frame_index(f, b);
  }
  b->v = v;
}

static const AstBlock *find_block(const AstFile *file, const char *name) {
  for (const AstBlock *b = file->blocks; b; b = b->next)
    if (strcmp(b->name, name) == 0) return b;
  return NULL;
}

/* --- tensors and parameters ---------------------------------------------------- */

static const IrType *tensor_type(Lower *L, Val v) { return &L->g->val[v.i].type; }

static int64_t channels_of(Lower *L, Val v) {
  const IrType *t = tensor_type(L, v);
  if (t->rank == 4) return t->dim[t->layout == IR_LAYOUT_NHWC ? 3 : 1];
  return t->rank >= 2 ? t->dim[1] : 1;
}

static int param_add(Lower *L, IrValueKind kind, const char *layer, const char *suffix, IrLayout layout, int rank,
                     const int64_t *dim) {
  const char *name = arena_printf(L->a, "%s.%s", layer, suffix);
  if (!name) return -1;
  return ir_value_add(L->g, kind, ir_type(IR_DT_F32, layout, rank, dim), name);
}

/* --- call arguments ---------------------------------------------------------------
 * Each op and builtin lists its arguments: positional in this order, or by
 * keyword.  A missing argument with no default is an error; so is an unknown
 * keyword, a duplicate, or a value of the wrong kind. */

typedef enum ArgKind { A_TENSOR, A_INT, A_PAIR, A_FLOAT, A_BOOL, A_DTYPE } ArgKind;

typedef struct ArgSpec {
  const char *key;
  ArgKind kind;
  int required;
  Val dflt; /* used when !required and not given; V_NONE = absent */
} ArgSpec;

enum { MAX_ARGS = 12 };

typedef struct Args {
  Val v[MAX_ARGS];
  SrcLoc loc[MAX_ARGS];
  int given[MAX_ARGS];
} Args;

static Val eval(Lower *L, Frame *f, const AstExpr *e);

static const char *argkind_name(ArgKind k) {
  static const char *const names[] = {"a tensor", "an integer",    "an integer or a pair of integers",
                                      "a number", "true or false", "a dtype (f32, f16, bf16, i8)"};
  return names[k];
}

/* Converts v to kind k in place; 0 on success. */
static int coerce(Val *v, ArgKind k) {
  switch (k) {
  case A_TENSOR: return v->k == V_TENSOR ? 0 : -1;
  case A_INT: return v->k == V_INT ? 0 : -1;
  case A_PAIR:
    if (v->k == V_INT) {
      *v = (Val){.k = V_TUPLE, .n = 2, .t = {v->i, v->i}};
      return 0;
    }
    return v->k == V_TUPLE && v->n == 2 ? 0 : -1;
  case A_FLOAT:
    if (v->k == V_INT) *v = (Val){.k = V_FLOAT, .f = (double)v->i};
    return v->k == V_FLOAT ? 0 : -1;
  case A_BOOL: return v->k == V_BOOL ? 0 : -1;
  case A_DTYPE: return v->k == V_DTYPE ? 0 : -1;
  }
  return -1;
}

/* Binds call arguments to spec; returns 0, or -1 after reporting errors. */
static int bind_args(Lower *L, Frame *f, const char *what, const AstExpr *call, const ArgSpec *spec, int nspec,
                     int npos, Args *out) {
  int bad = 0, pos = 0, seen_key = 0;
  memset(out, 0, sizeof *out);
  for (const AstArg *a = call->args; a; a = a->next) {
    int slot = -1;
    if (a->key) {
      seen_key = 1;
      for (int i = 0; i < nspec; i++)
        if (strcmp(spec[i].key, a->key) == 0) slot = i;
      if (slot < 0) {
        error(L, a->loc, "unknown argument '%s' for %s", a->key, what);
        bad = 1;
        continue;
      }
    } else {
      if (seen_key) {
        error(L, a->loc, "positional argument after keyword arguments in call to %s", what);
        bad = 1;
        continue;
      }
      if (pos >= npos) {
        error(L, a->loc, "too many arguments for %s (it takes %d)", what, npos);
        bad = 1;
        break;
      }
      slot = pos++;
    }
    if (out->given[slot]) {
      error(L, a->loc, "argument '%s' given twice in call to %s", spec[slot].key, what);
      bad = 1;
      continue;
    }
    Val v = eval(L, f, a->value);
    out->given[slot] = 1;
    out->loc[slot] = a->loc;
    if (v.k == V_ERR) {
      bad = 1;
      continue;
    }
    if (coerce(&v, spec[slot].kind)) {
      error(L, a->value->loc, "argument '%s' of %s must be %s, not %s", spec[slot].key, what,
            argkind_name(spec[slot].kind), kind_name(v.k));
      bad = 1;
      continue;
    }
    out->v[slot] = v;
  }
  for (int i = 0; i < nspec; i++) {
    if (out->given[i]) continue;
    if (spec[i].required) {
      error(L, call->loc, "missing argument '%s' in call to %s", spec[i].key, what);
      bad = 1;
    } else {
      out->v[i] = spec[i].dflt;
      out->loc[i] = call->loc;
      if (out->v[i].k != V_NONE) coerce(&out->v[i], spec[i].kind);
    }
  }
  return bad ? -1 : 0;
}

/* Range check on an int argument. */
static int arg_range(Lower *L, const Args *args, int slot, const char *key, int64_t lo, int64_t hi) {
  const Val *v = &args->v[slot];
  int n = v->k == V_TUPLE ? v->n : 1;
  for (int i = 0; i < n; i++) {
    int64_t x = v->k == V_TUPLE ? v->t[i] : v->i;
    if (x < lo || x > hi) {
      error(L, args->loc[slot], "%s=%" PRId64 " is out of range (%" PRId64 "..%" PRId64 ")", key, x, lo, hi);
      return -1;
    }
  }
  return 0;
}

/* --- op calls ---------------------------------------------------------------------
 * Each builder reads its bound arguments, creates parameters, and returns
 * the node's inputs and attributes through an OpBuild; emit() types and adds
 * the node. */

typedef struct OpBuild {
  IrOp op;
  int in[8];
  int nin;
  IrAttr attr[6];
  int nattr;
} OpBuild;

static void attr_pair(OpBuild *b, const char *key, const Val *v) {
  b->attr[b->nattr++] = (IrAttr){.key = key, .kind = IR_ATTR_INTS, .n = 2, .i = {v->t[0], v->t[1]}};
}
static void attr_int(OpBuild *b, const char *key, int64_t i) {
  b->attr[b->nattr++] = (IrAttr){.key = key, .kind = IR_ATTR_INT, .n = 1, .i = {i}};
}
static void attr_float(OpBuild *b, const char *key, double x) {
  b->attr[b->nattr++] = (IrAttr){.key = key, .kind = IR_ATTR_FLOAT, .f = x};
}

#define NONE      ((Val){.k = V_NONE})
#define DINT(x)   ((Val){.k = V_INT, .i = (x)})
#define DBOOL(x)  ((Val){.k = V_BOOL, .i = (x)})
#define DFLOAT(x) ((Val){.k = V_FLOAT, .f = (x)})

typedef struct OpDef OpDef;
typedef int (*BuildFn)(Lower *L, const char *layer, const Args *args, OpBuild *b);

struct OpDef {
  const char *name;
  IrOp op;
  BuildFn build;
  ArgSpec spec[MAX_ARGS];
  int has_params; /* creates parameters: the layer name must be unique */
};

enum { ARG_PRECISION = -1 }; /* every op takes precision= as its last argument */

static int build_conv2d(Lower *L, const char *layer, const Args *a, OpBuild *b) {
  /* x, out, k, s, p, d, groups, bias */
  if (arg_range(L, a, 1, "out", 1, MAX_CHANNELS) || arg_range(L, a, 2, "k", 1, 1 << 12) ||
      arg_range(L, a, 3, "s", 1, 1 << 12) || arg_range(L, a, 4, "p", 0, 1 << 12) ||
      arg_range(L, a, 5, "d", 1, 1 << 12) || arg_range(L, a, 6, "groups", 1, MAX_CHANNELS))
    return -1;
  int64_t K = a->v[1].i, g = a->v[6].i, C = channels_of(L, a->v[0]);
  if (C % g || K % g) {
    error(L, a->loc[6], "groups=%" PRId64 " must divide the input channels (%" PRId64 ") and out (%" PRId64 ")", g, C,
          K);
    return -1;
  }
  int64_t wd[4] = {K, C / g, a->v[2].t[0], a->v[2].t[1]};
  b->op = IR_OP_CONV2D;
  b->in[b->nin++] = (int)a->v[0].i;
  b->in[b->nin++] = param_add(L, IR_VAL_PARAM, layer, "weight", IR_LAYOUT_KCRS, 4, wd);
  if (a->v[7].i) b->in[b->nin++] = param_add(L, IR_VAL_PARAM, layer, "bias", IR_LAYOUT_ROW, 1, &K);
  attr_pair(b, "k", &a->v[2]);
  attr_pair(b, "s", &a->v[3]);
  attr_pair(b, "p", &a->v[4]);
  attr_pair(b, "d", &a->v[5]);
  attr_int(b, "groups", g);
  return 0;
}

static int build_batchnorm(Lower *L, const char *layer, const Args *a, OpBuild *b) {
  double eps = a->v[1].f, mom = a->v[2].f;
  if (!(eps > 0 && eps < 1)) {
    error(L, a->loc[1], "eps=%g must be in (0, 1)", eps);
    return -1;
  }
  if (!(mom >= 0 && mom <= 1)) {
    error(L, a->loc[2], "momentum=%g must be in [0, 1]", mom);
    return -1;
  }
  int64_t C = channels_of(L, a->v[0]);
  b->op = IR_OP_BATCHNORM;
  b->in[b->nin++] = (int)a->v[0].i;
  b->in[b->nin++] = param_add(L, IR_VAL_PARAM, layer, "weight", IR_LAYOUT_ROW, 1, &C);
  b->in[b->nin++] = param_add(L, IR_VAL_PARAM, layer, "bias", IR_LAYOUT_ROW, 1, &C);
  b->in[b->nin++] = param_add(L, IR_VAL_STATE, layer, "running_mean", IR_LAYOUT_ROW, 1, &C);
  b->in[b->nin++] = param_add(L, IR_VAL_STATE, layer, "running_var", IR_LAYOUT_ROW, 1, &C);
  attr_float(b, "eps", eps);
  attr_float(b, "momentum", mom);
  return 0;
}

static int build_unary(Lower *L, const char *layer, const Args *a, OpBuild *b) {
  b->in[b->nin++] = (int)a->v[0].i;
  return 0;
}

static int build_add(Lower *L, const char *layer, const Args *a, OpBuild *b) {
  b->in[b->nin++] = (int)a->v[0].i;
  b->in[b->nin++] = (int)a->v[1].i;
  return 0;
}

static int build_pool(Lower *L, const char *layer, const Args *a, OpBuild *b) {
  /* x, k, s, p [, include_pad] ; s defaults to k */
  if (arg_range(L, a, 1, "k", 1, 1 << 12) || arg_range(L, a, 3, "p", 0, 1 << 12)) return -1;
  Val s = a->v[2].k == V_NONE ? a->v[1] : a->v[2];
  if (a->v[2].k != V_NONE && arg_range(L, a, 2, "s", 1, 1 << 12)) return -1;
  b->in[b->nin++] = (int)a->v[0].i;
  attr_pair(b, "k", &a->v[1]);
  attr_pair(b, "s", &s);
  attr_pair(b, "p", &a->v[3]);
  if (b->op == IR_OP_AVGPOOL) attr_int(b, "include_pad", a->v[4].i);
  return 0;
}

static int build_linear(Lower *L, const char *layer, const Args *a, OpBuild *b) {
  if (arg_range(L, a, 1, "out", 1, MAX_CHANNELS)) return -1;
  const IrType *x = tensor_type(L, a->v[0]);
  if (x->rank != 2) {
    char t[96];
    error(L, a->loc[0], "linear expects an [N, features] input, got %s; flatten it first", ir_type_str(x, t, sizeof t));
    return -1;
  }
  int64_t wd[2] = {a->v[1].i, x->dim[1]};
  b->in[b->nin++] = (int)a->v[0].i;
  b->in[b->nin++] = param_add(L, IR_VAL_PARAM, layer, "weight", IR_LAYOUT_ROW, 2, wd);
  if (a->v[2].i) b->in[b->nin++] = param_add(L, IR_VAL_PARAM, layer, "bias", IR_LAYOUT_ROW, 1, wd);
  return 0;
}

static int build_softmax_ce(Lower *L, const char *layer, const Args *a, OpBuild *b) {
  const IrAttr *sm = ir_train_find(L->g, "label_smoothing");
  b->in[b->nin++] = (int)a->v[0].i;
  b->in[b->nin++] = (int)a->v[1].i;
  attr_float(b, "smoothing", sm ? sm->f : 0.0);
  return 0;
}

#define X                   \
  {                         \
    "x", A_TENSOR, 1, { 0 } \
  }
static const OpDef OPDEFS[] = {
    {"conv2d",
     IR_OP_CONV2D,
     build_conv2d,
     {X,
      {"out", A_INT, 1, {0}},
      {"k", A_PAIR, 1, {0}},
      {"s", A_PAIR, 0, DINT(1)},
      {"p", A_PAIR, 0, DINT(0)},
      {"d", A_PAIR, 0, DINT(1)},
      {"groups", A_INT, 0, DINT(1)},
      {"bias", A_BOOL, 0, DBOOL(1)}},
     1},
    {"batchnorm",
     IR_OP_BATCHNORM,
     build_batchnorm,
     {X, {"eps", A_FLOAT, 0, DFLOAT(1e-5)}, {"momentum", A_FLOAT, 0, DFLOAT(0.1)}},
     1},
    {"relu", IR_OP_RELU, build_unary, {X}, 0},
    {"add", IR_OP_ADD, build_add, {{"a", A_TENSOR, 1, {0}}, {"b", A_TENSOR, 1, {0}}}, 0},
    {"maxpool",
     IR_OP_MAXPOOL,
     build_pool,
     {X, {"k", A_PAIR, 1, {0}}, {"s", A_PAIR, 0, NONE}, {"p", A_PAIR, 0, DINT(0)}},
     0},
    {"avgpool",
     IR_OP_AVGPOOL,
     build_pool,
     {X,
      {"k", A_PAIR, 1, {0}},
      {"s", A_PAIR, 0, NONE},
      {"p", A_PAIR, 0, DINT(0)},
      {"include_pad", A_BOOL, 0, DBOOL(1)}},
     0},
    {"global_avgpool", IR_OP_GLOBAL_AVGPOOL, build_unary, {X}, 0},
    {"flatten", IR_OP_FLATTEN, build_unary, {X}, 0},
    {"linear", IR_OP_LINEAR, build_linear, {X, {"out", A_INT, 1, {0}}, {"bias", A_BOOL, 0, DBOOL(1)}}, 1},
    {"softmax_cross_entropy",
     IR_OP_SOFTMAX_CE,
     build_softmax_ce,
     {{"logits", A_TENSOR, 1, {0}}, {"labels", A_TENSOR, 1, {0}}},
     0},
};
#undef X

static const OpDef *find_op(const char *name) {
  for (size_t i = 0; i < sizeof OPDEFS / sizeof OPDEFS[0]; i++)
    if (strcmp(OPDEFS[i].name, name) == 0) return &OPDEFS[i];
  return NULL;
}

static int nspec(const OpDef *d) {
  int n = 0;
  while (n < MAX_ARGS && d->spec[n].key) n++;
  return n;
}

/* Layer name for a call: explicit (`name = op(...)`) or made from the op. */
typedef struct CallName {
  const char *name; /* NULL: anonymous */
  SrcLoc loc;
} CallName;

__attribute__((noinline)) static Val call_op(Lower *L, Frame *f, const OpDef *def, const AstExpr *call, CallName cn) {
  ArgSpec spec[MAX_ARGS + 1];
  int ns = nspec(def);
  memcpy(spec, def->spec, sizeof(ArgSpec) * (size_t)ns);
  spec[ns] = (ArgSpec){"precision", A_DTYPE, 0, NONE};
  Args args;
  if (bind_args(L, f, def->name, call, spec, ns + 1, ns, &args)) return verr();
  const char *layer;
  if (cn.name) {
    layer = join(L, f->scope, cn.name);
    int prev = layer ? names_find(&L->names, layer) : -1;
    if (prev >= 0 && def->has_params) {
      error(L, cn.loc, "layer name '%s' is already used", layer);
      diag_note(L->d, L->names.use[prev].loc, "'%s' first defined here", layer);
      return verr();
    }
    layer = layer ? unique_name(L, layer, cn.loc) : NULL;
  } else {
    const char *base = join(L, f->scope, def->name);
    layer = base ? unique_name(L, base, call->loc) : NULL;
  }
  if (!layer) return verr();
  OpBuild b = {.op = def->op};
  if (def->build(L, layer, &args, &b)) return verr();
  for (int i = 0; i < b.nin; i++)
    if (b.in[i] < 0) return verr(); /* out of memory */
  IrNode tmp = {.op = def->op, .name = layer, .nin = b.nin, .in = b.in, .nout = 1, .loc = call->loc};
  const IrAttr *attrs = b.attr;
  tmp.attr = b.attr;
  tmp.nattr = b.nattr;
  IrType out;
  char err[256];
  if (ir_infer(L->g, &tmp, &out, err, sizeof err)) {
    error(L, call->loc, "%s", err);
    return verr();
  }
  int64_t per_sample = ir_type_numel(&out, 1);
  if (per_sample > MAX_SAMPLE_ELEMS) {
    error(L, call->loc, "%s output has %" PRId64 " elements per sample, more than netc supports", def->name,
          per_sample);
    return verr();
  }
  if (L->g->nnode >= MAX_NODES) {
    error(L, call->loc, "network has more than %d ops", MAX_NODES);
    L->too_big = 1;
    return verr();
  }
  int id = ir_node_add(L->g, def->op, layer, call->loc, b.in, b.nin, &out, 1);
  if (id < 0) return verr();
  for (int i = 0; i < b.nattr; i++) {
    const IrAttr *a = &attrs[i];
    if (a->kind == IR_ATTR_INTS)
      ir_attr_set_ints(L->g, id, a->key, a->i, a->n);
    else if (a->kind == IR_ATTR_INT)
      ir_attr_set_int(L->g, id, a->key, a->i[0]);
    else
      ir_attr_set_float(L->g, id, a->key, a->f);
  }
  if (args.v[ns].k == V_DTYPE) {
    IrDtype p = (IrDtype)args.v[ns].i;
    if (p != IR_DT_F32 && p != IR_DT_F16 && p != IR_DT_BF16 && p != IR_DT_I8 && p != IR_DT_F8E4M3) {
      error(L, args.loc[ns], "precision must be f32, f16, bf16, i8 or f8, not %s", ir_dtype_name(p));
      return verr();
    }
    ir_attr_set_dtype(L->g, id, "precision", p);
  }
  if (def->op == IR_OP_SOFTMAX_CE) {
    if (L->loss_node >= 0) {
      error(L, call->loc, "a network has one loss; this is a second softmax_cross_entropy");
      diag_note(L->d, L->loss_loc, "the first loss is here");
    } else {
      L->loss_node = id;
      L->loss_loc = call->loc;
    }
  }
  return (Val){.k = V_TENSOR, .i = L->g->node[id].out[0]};
}

/* --- builtins: channels(x), height(x), width(x) ------------------------------------- */

__attribute__((noinline)) static int call_builtin(Lower *L, Frame *f, const AstExpr *call, Val *out) {
  static const char *const names[] = {"channels", "height", "width"};
  int which = -1;
  for (int i = 0; i < 3; i++)
    if (strcmp(call->name, names[i]) == 0) which = i;
  if (which < 0) return 0;
  static const ArgSpec spec[] = {{"x", A_TENSOR, 1, {0}}};
  Args args;
  if (bind_args(L, f, call->name, call, spec, 1, 1, &args)) {
    *out = verr();
    return 1;
  }
  const IrType *t = tensor_type(L, args.v[0]);
  if (which == 0) {
    *out = vint(channels_of(L, args.v[0]));
  } else if (t->rank != 4) {
    error(L, call->loc, "%s() needs an image tensor (rank 4)", call->name);
    *out = verr();
  } else {
    int h = t->layout == IR_LAYOUT_NHWC ? 1 : 2;
    *out = vint(t->dim[h + which - 1]);
  }
  return 1;
}

/* --- blocks ----------------------------------------------------------------------------- */

static void exec_stmts(Lower *L, Frame *f, const AstStmt *s);

__attribute__((noinline)) static Val call_block(Lower *L, Frame *f, const AstBlock *blk, const AstExpr *call,
                                                CallName cn) {
  for (const Frame *p = f; p; p = p->parent)
    if (p->block == blk) {
      error(L, call->loc, "block '%s' calls itself; recursion is not allowed", blk->name);
      return verr();
    }
  if (f->depth + 1 > MAX_CALL_DEPTH) {
    error(L, call->loc, "blocks nested more than %d deep", MAX_CALL_DEPTH);
    return verr();
  }
  const char *scope = cn.name ? join(L, f->scope, cn.name) : join(L, f->scope, blk->name);
  if (!scope) return verr();
  if (!cn.name) scope = unique_name(L, scope, call->loc);
  Frame nf = {.scope = scope, .block = blk, .call = call->loc, .parent = f, .depth = f->depth + 1};
  /* Arguments are evaluated in the caller's frame. */
  const AstArg *given[64] = {0};
  int nparams = 0, bad = 0, pos = 0;
  for (const AstParam *p = blk->params; p; p = p->next) nparams++;
  if (nparams > 64) {
    error(L, blk->loc, "block '%s' has more than 64 parameters", blk->name);
    return verr();
  }
  for (const AstArg *a = call->args; a; a = a->next) {
    int slot = -1, i = 0;
    if (a->key) {
      for (const AstParam *p = blk->params; p; p = p->next, i++)
        if (strcmp(p->name, a->key) == 0) slot = i;
      if (slot < 0) {
        error(L, a->loc, "block '%s' has no parameter '%s'", blk->name, a->key);
        bad = 1;
        continue;
      }
    } else if (pos >= nparams) {
      error(L, a->loc, "too many arguments for block '%s' (it takes %d)", blk->name, nparams);
      bad = 1;
      break;
    } else {
      slot = pos++;
    }
    if (given[slot]) {
      error(L, a->loc, "argument given twice in call to block '%s'", blk->name);
      bad = 1;
    }
    given[slot] = a;
  }
  int i = 0;
  for (const AstParam *p = blk->params; p; p = p->next, i++) {
    Val v;
    if (given[i]) {
      v = eval(L, f, given[i]->value);
    } else if (p->dflt) {
      v = eval(L, &nf, p->dflt); /* defaults may use earlier parameters */
    } else {
      error(L, call->loc, "missing argument '%s' in call to block '%s'", p->name, blk->name);
      v = verr();
      bad = 1;
    }
    if (v.k == V_ERR) bad = 1;
    bind(L, &nf, p->name, v);
  }
  if (bad) return verr();
  exec_stmts(L, &nf, blk->body);
  if (!nf.returned) {
    error(L, call->loc, "block '%s' ended without 'return'", blk->name);
    diag_note(L->d, blk->loc, "'%s' is defined here", blk->name);
    return verr();
  }
  return nf.ret;
}

/* --- expressions ---------------------------------------------------------------------------- */

static Val call_any(Lower *L, Frame *f, const AstExpr *e, CallName cn) {
  const OpDef *op = find_op(e->name);
  if (op) return call_op(L, f, op, e, cn);
  const AstBlock *blk = find_block(L->file, e->name);
  if (blk) return call_block(L, f, blk, e, cn);
  Val v;
  if (call_builtin(L, f, e, &v)) return v;
  error(L, e->loc, "unknown op or block '%s'", e->name);
  return verr();
}

static Val checked(Lower *L, SrcLoc loc, int overflow, const int64_t *r) {
  if (!overflow) return vint(*r);
  error(L, loc, "integer overflow");
  return verr();
}

static Val arith(Lower *L, const AstExpr *e, Val a, Val b) {
  if (a.k == V_ERR || b.k == V_ERR) return verr();
  int op = e->op;
  if (op == AST_OP_EQ || op == AST_OP_NE) {
    if (a.k == V_INT && b.k == V_FLOAT) a = (Val){.k = V_FLOAT, .f = (double)a.i};
    if (b.k == V_INT && a.k == V_FLOAT) b = (Val){.k = V_FLOAT, .f = (double)b.i};
    if (a.k != b.k || a.k == V_TENSOR || a.k == V_TUPLE) {
      error(L, e->loc, "cannot compare %s with %s", kind_name(a.k), kind_name(b.k));
      return verr();
    }
    int eq = a.k == V_FLOAT ? a.f == b.f : a.i == b.i;
    return vbool(op == AST_OP_EQ ? eq : !eq);
  }
  if (op == AST_OP_AND || op == AST_OP_OR) {
    if (a.k != V_BOOL || b.k != V_BOOL) {
      error(L, e->loc, "'%s' needs booleans, not %s and %s", op == AST_OP_AND ? "&&" : "||", kind_name(a.k),
            kind_name(b.k));
      return verr();
    }
    return vbool(op == AST_OP_AND ? a.i && b.i : a.i || b.i);
  }
  if ((a.k != V_INT && a.k != V_FLOAT) || (b.k != V_INT && b.k != V_FLOAT)) {
    const char *hint = a.k == V_TENSOR || b.k == V_TENSOR ? " (tensors are combined with ops such as add())" : "";
    error(L, e->loc, "arithmetic on %s and %s%s", kind_name(a.k), kind_name(b.k), hint);
    return verr();
  }
  if (a.k == V_INT && b.k == V_INT) {
    int64_t r = 0;
    int ovf;
    switch (op) {
    case AST_OP_ADD: ovf = __builtin_add_overflow(a.i, b.i, &r); return checked(L, e->loc, ovf, &r);
    case AST_OP_SUB: ovf = __builtin_sub_overflow(a.i, b.i, &r); return checked(L, e->loc, ovf, &r);
    case AST_OP_MUL: ovf = __builtin_mul_overflow(a.i, b.i, &r); return checked(L, e->loc, ovf, &r);
    case AST_OP_DIV:
    case AST_OP_MOD:
      if (b.i == 0) {
        error(L, e->loc, "division by zero");
        return verr();
      }
      if (a.i == INT64_MIN && b.i == -1) {
        error(L, e->loc, "integer overflow");
        return verr();
      }
      return vint(op == AST_OP_DIV ? a.i / b.i : a.i % b.i);
    case AST_OP_LT: return vbool(a.i < b.i);
    case AST_OP_GT: return vbool(a.i > b.i);
    case AST_OP_LE: return vbool(a.i <= b.i);
    case AST_OP_GE: return vbool(a.i >= b.i);
    }
  }
  double x = a.k == V_INT ? (double)a.i : a.f, y = b.k == V_INT ? (double)b.i : b.f, r;
  switch (op) {
  case AST_OP_ADD: r = x + y; break;
  case AST_OP_SUB: r = x - y; break;
  case AST_OP_MUL: r = x * y; break;
  case AST_OP_DIV:
    if (y == 0) {
      error(L, e->loc, "division by zero");
      return verr();
    }
    r = x / y;
    break;
  case AST_OP_LT: return vbool(x < y);
  case AST_OP_GT: return vbool(x > y);
  case AST_OP_LE: return vbool(x <= y);
  case AST_OP_GE: return vbool(x >= y);
  default: error(L, e->loc, "'%%' needs integers"); return verr();
  }
  if (!isfinite(r)) {
    error(L, e->loc, "arithmetic result is not finite");
    return verr();
  }
  return (Val){.k = V_FLOAT, .f = r};
}

static Val eval_cn(Lower *L, Frame *f, const AstExpr *e, CallName cn);

static Val eval(Lower *L, Frame *f, const AstExpr *e) { return eval_cn(L, f, e, (CallName){0}); }

static int want_bool(Lower *L, const AstExpr *e, Val v) {
  if (v.k == V_BOOL) return (int)v.i;
  if (v.k != V_ERR) error(L, e->loc, "condition must be true or false, not %s", kind_name(v.k));
  return -1;
}

static Val eval_cn(Lower *L, Frame *f, const AstExpr *e, CallName cn) {
  if (L->too_big) return verr();
  if (++L->expr_depth > MAX_EXPR_DEPTH) {
    L->expr_depth--;
    error(L, e->loc, "expression nested more than %d deep", MAX_EXPR_DEPTH);
    return verr();
  }
  Val r = verr();
  switch (e->kind) {
  case AST_INT: r = vint(e->ival); break;
  case AST_FLOAT: r = (Val){.k = V_FLOAT, .f = e->fval}; break;
  case AST_BOOL: r = vbool((int)e->ival); break;
  case AST_DTYPE: r = (Val){.k = V_DTYPE, .i = e->ival}; break;
  case AST_NAME: {
    Binding *b = lookup(f, e->name);
    if (b) {
      r = b->v;
    } else if (find_op(e->name) || find_block(L->file, e->name)) {
      error(L, e->loc, "'%s' is an op or block; call it: %s(...)", e->name, e->name);
    } else {
      error(L, e->loc, "undefined name '%s'", e->name);
      bind(L, f, e->name, verr()); /* report each undefined name once */
    }
    break;
  }
  case AST_CALL: r = call_any(L, f, e, cn); break;
  case AST_TUPLE: {
    if (e->nargs > IR_MAX_INTS) {
      error(L, e->loc, "tuples hold at most %d integers", IR_MAX_INTS);
      break;
    }
    r = (Val){.k = V_TUPLE};
    for (const AstArg *a = e->args; a; a = a->next) {
      Val v = eval(L, f, a->value);
      if (v.k == V_ERR) {
        r = verr();
        break;
      }
      if (v.k != V_INT) {
        error(L, a->value->loc, "tuples hold integers, not %s", kind_name(v.k));
        r = verr();
        break;
      }
      r.t[r.n++] = v.i;
    }
    break;
  }
  case AST_UNARY: {
    Val a = eval(L, f, e->a);
    if (a.k == V_ERR) break;
    if (e->op == AST_OP_NOT) {
      if (a.k == V_BOOL)
        r = vbool(!a.i);
      else
        error(L, e->loc, "'!' needs a boolean, not %s", kind_name(a.k));
    } else if (a.k == V_INT && a.i != INT64_MIN) {
      r = vint(-a.i);
    } else if (a.k == V_FLOAT) {
      r = (Val){.k = V_FLOAT, .f = -a.f};
    } else {
      error(L, e->loc, "'-' needs a number, not %s", kind_name(a.k));
    }
    break;
  }
  case AST_BINARY: {
    Val a = eval(L, f, e->a);
    if ((e->op == AST_OP_AND || e->op == AST_OP_OR) && a.k == V_BOOL && a.i == (e->op == AST_OP_OR)) {
      r = a; /* short circuit */
      break;
    }
    Val b = eval(L, f, e->b);
    r = arith(L, e, a, b);
    break;
  }
  case AST_COND: {
    int c = want_bool(L, e->a, eval(L, f, e->a));
    if (c >= 0) r = eval_cn(L, f, c ? e->b : e->c, cn);
    break;
  }
  }
  L->expr_depth--;
  return r;
}

/* --- statements ------------------------------------------------------------------------------ */

static void exec_assign(Lower *L, Frame *f, const AstStmt *s) {
  CallName cn = {.name = s->target, .loc = s->loc};
  if (s->scope) {
    cn.loc = s->scope->loc;
    if (s->scope->literal) {
      cn.name = s->scope->literal;
    } else {
      Val v = eval(L, f, s->scope->expr);
      if (v.k == V_INT) {
        cn.name = arena_printf(L->a, "%" PRId64, v.i);
      } else {
        if (v.k != V_ERR)
          error(L, s->scope->expr->loc, "a layer name in [...] must be an integer, not %s", kind_name(v.k));
        bind(L, f, s->target, verr());
        return;
      }
    }
    if (s->value->kind != AST_CALL) {
      error(L, s->scope->loc, "'as' names a call to an op or block");
      bind(L, f, s->target, verr());
      return;
    }
  }
  Val v = eval_cn(L, f, s->value, cn);
  if (v.k == V_NONE) {
    error(L, s->value->loc, "this has no value to assign");
    v = verr();
  }
  bind(L, f, s->target, v);
}

static void exec_stmts(Lower *L, Frame *f, const AstStmt *s) {
  for (; s && !f->returned && !L->too_big; s = s->next) {
    switch (s->kind) {
    case AST_ASSIGN: exec_assign(L, f, s); break;
    case AST_IF: {
      int c = want_bool(L, s->value, eval(L, f, s->value));
      if (c > 0)
        exec_stmts(L, f, s->body);
      else if (c == 0)
        exec_stmts(L, f, s->orelse);
      break;
    }
    case AST_FOR: {
      Val lo = eval(L, f, s->lo), hi = eval(L, f, s->hi);
      if (lo.k == V_ERR || hi.k == V_ERR) break;
      if (lo.k != V_INT || hi.k != V_INT) {
        error(L, s->lo->loc, "loop bounds must be integers, not %s and %s", kind_name(lo.k), kind_name(hi.k));
        break;
      }
      for (int64_t i = lo.i; i < hi.i && !f->returned && !L->too_big; i++) {
        if (++L->iterations > MAX_ITERATIONS) {
          error(L, s->lo->loc,
                "loops run more than %d iterations in all (this one, %" PRId64 "..%" PRId64
                ", is unrolled like every loop)",
                MAX_ITERATIONS, lo.i, hi.i);
          L->too_big = 1;
          break;
        }
        int before = L->d->nerrors;
        bind(L, f, s->var, vint(i));
        exec_stmts(L, f, s->body);
        if (L->d->nerrors > before) break; /* one report per error, not one per iteration */
      }
      break;
    }
    case AST_RETURN:
      if (!f->block) {
        error(L, s->loc, "'return' outside a block");
        break;
      }
      f->ret = eval(L, f, s->value);
      f->returned = 1;
      break;
    }
  }
}

/* --- inputs and the train section ------------------------------------------------------------- */

static void lower_input(Lower *L, Frame *f, const AstInput *in) {
  int64_t dim[IR_MAX_RANK];
  int rank = 1, bad = 0;
  dim[0] = IR_DIM_N;
  if (in->ndims + 1 > IR_MAX_RANK) {
    error(L, in->loc, "input '%s' has %d dimensions; at most %d per sample", in->name, in->ndims, IR_MAX_RANK - 1);
    bind(L, f, in->name, verr());
    return;
  }
  int64_t elems = 1;
  for (const AstArg *a = in->dims; a; a = a->next) {
    Val v = eval(L, f, a->value);
    if (v.k != V_INT || v.i < 1 || v.i > MAX_INPUT_DIM) {
      if (v.k != V_ERR) error(L, a->value->loc, "input dimension must be an integer in 1..%d", MAX_INPUT_DIM);
      bad = 1;
      continue;
    }
    elems *= v.i;
    dim[rank++] = v.i;
  }
  if (!bad && elems > MAX_SAMPLE_ELEMS) {
    error(L, in->loc, "input '%s' has %" PRId64 " elements per sample, more than netc supports", in->name, elems);
    bad = 1;
  }
  if (lookup(f, in->name)) {
    error(L, in->loc, "input '%s' declared twice", in->name);
    bad = 1;
  }
  if (bad) {
    bind(L, f, in->name, verr());
    return;
  }
  IrLayout layout = rank == 4 ? IR_LAYOUT_NCHW : IR_LAYOUT_ROW;
  int id = ir_value_add(L->g, IR_VAL_INPUT, ir_type((IrDtype)in->dtype, layout, rank, dim), in->name);
  bind(L, f, in->name, id < 0 ? verr() : (Val){.k = V_TENSOR, .i = id});
}

/* Train-section values: `key = number`, `key = bool`, `key = dtype`, or
 * `key = choice(k=v, ...)`, flattened into graph attributes.  Each key and
 * each choice lists what it accepts. */
typedef struct TrainKey {
  const char *key;
  ArgKind kind;  /* of a plain value */
  int is_choice; /* the value is a call: optimizer = sgd(...) */
  double lo, hi; /* numeric range */
} TrainKey;

typedef struct TrainChoice {
  const char *key, *name;
  ArgSpec spec[6];
} TrainChoice;

static const TrainKey TRAIN_KEYS[] = {
    {"batch", A_INT, 0, 1, 1 << 20},
    {"epochs", A_INT, 0, 1, 1 << 20},
    {"steps", A_INT, 0, 1, 1e12},
    {"optimizer", A_INT, 1, 0, 0},
    {"schedule", A_INT, 1, 0, 0},
    {"label_smoothing", A_FLOAT, 0, 0, 0.999999},
    {"loss_scale", A_FLOAT, 1, 1, 1 << 24},
    {"precision", A_DTYPE, 0, 0, 0},
    {"seed", A_INT, 0, 0, 1e15},
    {"fp8_scaling", A_INT, 1, 0, 0},
};

static const TrainChoice TRAIN_CHOICES[] = {
    {"optimizer",
     "sgd",
     {{"lr", A_FLOAT, 1, {0}},
      {"momentum", A_FLOAT, 0, DFLOAT(0)},
      {"nesterov", A_BOOL, 0, DBOOL(0)},
      {"weight_decay", A_FLOAT, 0, DFLOAT(0)}}},
    {"schedule", "constant", {{"warmup_epochs", A_INT, 0, DINT(0)}}},
    {"schedule",
     "step",
     {{"every", A_INT, 1, {0}}, {"gamma", A_FLOAT, 0, DFLOAT(0.1)}, {"warmup_epochs", A_INT, 0, DINT(0)}}},
    {"schedule", "cosine", {{"warmup_epochs", A_INT, 0, DINT(0)}}},
    {"loss_scale", "dynamic", {{"init", A_FLOAT, 0, DFLOAT(65536)}, {"growth_interval", A_INT, 0, DINT(2000)}}},
    {"loss_scale", "static", {{"scale", A_FLOAT, 1, {0}}}},
    {"fp8_scaling", "delayed", {{"history", A_INT, 0, DINT(16)}}},
    {"fp8_scaling", "current", {{0}}},
};

static void train_set(Lower *L, IrAttr a) { ir_train_set(L->g, &a); }

static void set_train_val(Lower *L, const char *key, ArgKind kind, Val v) {
  if (kind == A_INT || kind == A_BOOL)
    train_set(L, (IrAttr){.key = key, .kind = IR_ATTR_INT, .n = 1, .i = {v.i}});
  else if (kind == A_FLOAT)
    train_set(L, (IrAttr){.key = key, .kind = IR_ATTR_FLOAT, .f = v.f});
  else if (kind == A_DTYPE)
    train_set(L, (IrAttr){.key = key, .kind = IR_ATTR_DTYPE, .n = 1, .i = {v.i}});
}

__attribute__((noinline)) static void lower_train_choice(Lower *L, Frame *f, const TrainKey *tk, const AstArg *item) {
  const AstExpr *e = item->value;
  if (e->kind != AST_CALL) {
    if (strcmp(tk->key, "loss_scale") == 0) { /* loss_scale = 128: a static scale */
      Val v = eval(L, f, e);
      if (v.k == V_ERR) return;
      if (coerce(&v, A_FLOAT) || v.f < tk->lo || v.f > tk->hi) {
        error(L, e->loc, "loss_scale must be dynamic(...), static(scale) or a number in 1..%g", tk->hi);
        return;
      }
      train_set(L, (IrAttr){.key = "loss_scale", .kind = IR_ATTR_STR, .s = "static"});
      train_set(L, (IrAttr){.key = "loss_scale_scale", .kind = IR_ATTR_FLOAT, .f = v.f});
      return;
    }
    error(L, e->loc, "'%s' takes a call such as %s(...)", tk->key,
          strcmp(tk->key, "optimizer") == 0     ? "sgd"
          : strcmp(tk->key, "fp8_scaling") == 0 ? "delayed"
                                                : "cosine");
    return;
  }
  const TrainChoice *ch = NULL;
  char known[128] = "";
  for (size_t i = 0; i < sizeof TRAIN_CHOICES / sizeof TRAIN_CHOICES[0]; i++) {
    if (strcmp(TRAIN_CHOICES[i].key, tk->key)) continue;
    if (strcmp(TRAIN_CHOICES[i].name, e->name) == 0) ch = &TRAIN_CHOICES[i];
    snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", *known ? ", " : "", TRAIN_CHOICES[i].name);
  }
  if (!ch) {
    error(L, e->loc, "unknown %s '%s' (known: %s)", tk->key, e->name, known);
    return;
  }
  int ns = 0;
  while (ns < 6 && ch->spec[ns].key) ns++;
  Args args;
  if (bind_args(L, f, ch->name, e, ch->spec, ns, ns, &args)) return;
  train_set(L, (IrAttr){.key = tk->key, .kind = IR_ATTR_STR, .s = ch->name});
  for (int i = 0; i < ns; i++) {
    const ArgSpec *sp = &ch->spec[i];
    Val v = args.v[i];
    int neg = (sp->kind == A_INT && v.i < 0) || (sp->kind == A_FLOAT && !(v.f >= 0));
    if (neg) {
      error(L, args.loc[i], "%s must not be negative", sp->key);
      continue;
    }
    if (strcmp(tk->key, "fp8_scaling") == 0 && (v.i < 1 || v.i > 1024)) {
      error(L, args.loc[i], "fp8_scaling history must be 1..1024 steps, not %lld", (long long)v.i);
      continue;
    }
    /* Keys are prefixed by the section key unless they name the choice's own setting. */
    const char *key = strcmp(tk->key, "optimizer") == 0 ? sp->key : arena_printf(L->a, "%s_%s", tk->key, sp->key);
    if (strcmp(tk->key, "schedule") == 0 && strcmp(sp->key, "warmup_epochs") == 0) key = "warmup_epochs";
    if (key) set_train_val(L, key, sp->kind, v);
  }
}

static void lower_train(Lower *L, const AstTrain *t) {
  Frame f = {.scope = ""};
  int seen[sizeof TRAIN_KEYS / sizeof TRAIN_KEYS[0]] = {0};
  for (const AstArg *item = t->items; item; item = item->next) {
    int k = -1;
    for (size_t i = 0; i < sizeof TRAIN_KEYS / sizeof TRAIN_KEYS[0]; i++)
      if (strcmp(TRAIN_KEYS[i].key, item->key) == 0) k = (int)i;
    if (k < 0) {
      error(L, item->loc, "unknown train setting '%s'", item->key);
      continue;
    }
    if (seen[k]) {
      error(L, item->loc, "train setting '%s' given twice", item->key);
      continue;
    }
    seen[k] = 1;
    const TrainKey *tk = &TRAIN_KEYS[k];
    if (tk->is_choice) {
      lower_train_choice(L, &f, tk, item);
      continue;
    }
    Val v = eval(L, &f, item->value);
    if (v.k == V_ERR) continue;
    if (coerce(&v, tk->kind)) {
      error(L, item->value->loc, "train setting '%s' must be %s, not %s", tk->key, argkind_name(tk->kind),
            kind_name(v.k));
      continue;
    }
    double x = v.k == V_INT ? (double)v.i : v.f;
    if (tk->kind != A_DTYPE && (x < tk->lo || x > tk->hi)) {
      error(L, item->value->loc, "train setting '%s' = %.15g is out of range (%.15g..%.15g)", tk->key, x, tk->lo,
            tk->hi);
      continue;
    }
    if (tk->kind == A_DTYPE && v.i != IR_DT_F32 && v.i != IR_DT_F16 && v.i != IR_DT_BF16) {
      error(L, item->value->loc, "train precision must be f32, f16 or bf16");
      continue;
    }
    set_train_val(L, tk->key, tk->kind, v);
  }
  static const char *const required[] = {"batch", "optimizer"};
  for (int i = 0; i < 2; i++)
    if (!ir_train_find(L->g, required[i]) && !L->d->nerrors)
      error(L, t->loc, "the train section needs '%s'", required[i]);
}

int lower_train_section(Arena *a, Diag *d, IrGraph *g, const AstTrain *t) {
  Lower L = {.a = a, .d = d, .g = g, .loss_node = -1};
  int before = d->nerrors;
  lower_train(&L, t);
  return d->nerrors == before ? 0 : -1;
}

IrGraph *lower_file(Arena *a, Diag *d, const AstFile *file) {
  Lower L = {.a = a, .d = d, .file = file, .loss_node = -1};
  int before = d->nerrors;
  const AstNetwork *net = file->network;
  SrcLoc floc = {.file = file->path, .line = 1, .col = 1};
  if (!net) {
    error(&L, floc, "no 'network' section in this file");
    return NULL;
  }
  L.g = ir_graph_new(a, net->name);
  if (!L.g) return NULL;
  /* Block names must be unique and must not hide ops or builtins. */
  for (const AstBlock *b = file->blocks; b; b = b->next) {
    const AstBlock *first = find_block(file, b->name);
    if (first != b) {
      error(&L, b->loc, "block '%s' is defined twice", b->name);
      diag_note(d, first->loc, "first definition of '%s'", b->name);
    } else if (find_op(b->name) || !strcmp(b->name, "channels") || !strcmp(b->name, "height") ||
               !strcmp(b->name, "width")) {
      error(&L, b->loc, "block '%s' has the name of a built-in op", b->name);
    }
    const AstParam *dflt = NULL;
    for (const AstParam *p = b->params; p; p = p->next) {
      for (const AstParam *q = b->params; q != p; q = q->next)
        if (strcmp(p->name, q->name) == 0) error(&L, p->loc, "parameter '%s' appears twice", p->name);
      if (p->dflt)
        dflt = p;
      else if (dflt)
        error(&L, p->loc, "parameter '%s' has no default but follows '%s', which has one", p->name, dflt->name);
    }
  }
  if (file->train) lower_train(&L, file->train); /* first: the loss reads label_smoothing */
  Frame top = {.scope = ""};
  for (const AstInput *in = net->inputs; in; in = in->next) lower_input(&L, &top, in);
  exec_stmts(&L, &top, net->body);
  if (L.loss_node < 0 && d->nerrors == before)
    error(&L, net->loc, "network '%s' has no loss; end it with softmax_cross_entropy(logits, labels)", net->name);
  if (d->nerrors > before || a->oom) {
    if (a->oom) error(&L, floc, "out of memory");
    return NULL;
  }
  const IrNode *loss = &L.g->node[L.loss_node];
  ir_output_add(L.g, loss->out[0]);
  ir_output_add(L.g, loss->in[0]);
  return L.g;
}
