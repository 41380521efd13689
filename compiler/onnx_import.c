/* onnx_import.c - an ONNX ModelProto to the forward IR (see onnx_import.h).
 *
 * The nodes are visited in file order (ONNX requires a topological order;
 * a node that reads what a later node makes is reported as a cycle or an
 * ordering error).  Each ONNX value is one of: an activation (an IR value),
 * an initializer not yet used (it becomes a PARAM or STATE when a node
 * takes it as its weight), a small constant of int64s (shape arithmetic,
 * with ONNX_N standing for the batch), or poisoned (its producer failed:
 * readers stay quiet, so each mistake is reported once).  A node handler
 * checks its attributes against the op's list first, so an unknown
 * attribute is an error, never ignored.
 *
 *   Conv(x, conv1.weight)              %3 = conv2d(%0, @conv1.weight) {k=7x7 s=2x2 p=3x3 d=1x1 groups=1}
 *   BatchNormalization(x, bn1.weight, bn1.bias, bn1.running_mean, bn1.running_var)
 *                                      %4 = batchnorm(%3, @bn1.weight, ...) {eps=1e-05 momentum=0.1}
 *   Gemm(x, fc.weight, fc.bias) transB=1   %9 = linear(%8, @fc.weight, @fc.bias) */
#include "onnx_import.h"

#ifndef NETC_HAVE_ONNX

int onnx_import_available(void) { return 0; }

IrGraph *onnx_import(Arena *a, Diag *d, const char *path, const void *bytes, size_t len, const AstTrain *train,
                     const char *weights_out) {
  diag_error(d, (SrcLoc){.file = path},
             "this netc was built without ONNX support (it needs protobuf-c, protoc-c "
             "and onnx.proto when it is built: dev/setup.sh installs them)");
  return NULL;
}

#else

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"
#include "onnx.pb-c.h"
#include "onnx_external.h"
#include "onnx_scope.h"
#include "onnx_weights.h"

enum {
  OPSET_MIN = 7, /* the ai.onnx opsets netc knows */
  OPSET_MAX = 22,
  MAX_NODES = 1000000,
  MAX_CONST = IR_MAX_INTS, /* elements of a folded constant */
  MAX_CHANNELS = 1 << 20,  /* output channels / features of one layer, as lower.c */
  MAX_WINDOW = 1 << 12,    /* kernel, stride, pad, dilation */
};
#define MAX_SAMPLE_ELEMS ((int64_t)1 << 34) /* elements of one tensor, per sample (lower.c's limit) */
#define ONNX_N           INT64_MIN          /* the batch dimension in a folded shape */

typedef enum OvKind { OV_MISSING, OV_ACT, OV_INIT, OV_CONST, OV_FLOATCONST, OV_BAD } OvKind;

typedef struct OnnxVal {
  const char *name; /* the ONNX name (the protobuf's string) */
  OvKind k;
  int id;                        /* ACT: the IR value */
  const Onnx__TensorProto *init; /* INIT */
  int param_node;                /* INIT: the node that made it a parameter, or -1 */
  int n, scalar;                 /* CONST: element count; rank 0 */
  int64_t c[MAX_CONST];          /* CONST */
  int producer;                  /* the node that makes it, or -1 */
  int uses, user;                /* nodes reading it, and the last of them */
  int graph_output;
  int layer; /* not a value: a layer name in use (see layer_name) */
} OnnxVal;

typedef struct Imp {
  Arena *a;
  Diag *d;
  const char *path;
  IrGraph *g;
  const Onnx__GraphProto *gp;
  OnnxVal *v;
  int nv, cap;
  int *slot; /* open hash table of v by name: index + 1 */
  int nslot;
  int opset;
  int64_t batch_dim; /* the image input's first dim when it is a number, else 0 */
  int *absorbed;     /* node i was lowered with another (an Add into MatMul's linear) */
  int label;         /* the IR input of the labels */
  OnnxWeight *w;     /* the parameters' and state's values, for --weights-out */
  int nw, capw;
  int missing_data;        /* initializers without values */
  const char **scope_name; /* per node: the layer name its exporter's module path gives, or NULL */
  OnnxExternal ext;        /* the data files of initializers kept outside the model */
} Imp;

typedef struct Node {
  const Onnx__NodeProto *p;
  int index;
  const char *what; /* "node 7 '/conv1/Conv' (Conv)" */
} Node;

static SrcLoc file_loc(Imp *m) { return (SrcLoc){.file = m->path}; }

static void node_error(Imp *m, const Node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void node_error(Imp *m, const Node *n, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(m->d, file_loc(m), "%s: %s", n->what, msg);
}

/* --- names ----------------------------------------------------------------- */

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static OnnxVal *find(Imp *m, const char *name) {
  if (!m->nslot || !name) return NULL;
  for (uint64_t i = hash(name) & (uint64_t)(m->nslot - 1);; i = (i + 1) & (uint64_t)(m->nslot - 1)) {
    int k = m->slot[i] - 1;
    if (k < 0) return NULL;
    if (strcmp(m->v[k].name, name) == 0) return &m->v[k];
  }
}

/* Room for every name the graph can hold: initializers, inputs, node
 * outputs and one layer name a node (with its unique-making retries). */
static int reserve(Imp *m) {
  const Onnx__GraphProto *gp = m->gp;
  size_t n = gp->n_initializer + gp->n_input + 4 * gp->n_node + 16;
  for (size_t i = 0; i < gp->n_node; i++) n += gp->node[i]->n_output;
  if (n > (size_t)1 << 28) return -1;
  int nslot = 1024;
  while ((size_t)nslot < 2 * n + 2) nslot *= 2;
  m->v = arena_alloc(m->a, sizeof(OnnxVal) * n);
  m->slot = arena_alloc(m->a, sizeof(int) * (size_t)nslot);
  if (!m->v || !m->slot) return -1;
  memset(m->slot, 0, sizeof(int) * (size_t)nslot);
  m->cap = (int)n;
  m->nslot = nslot;
  return 0;
}

/* The value called name, added (OV_MISSING) when new; NULL when out of
 * memory or past the capacity reserve() gave.  The table never moves, so
 * a handler's OnnxVal pointers stay valid while it names layers. */
static OnnxVal *intern(Imp *m, const char *name) {
  OnnxVal *x = find(m, name);
  if (x) return x;
  if (m->nv >= m->cap || 2 * (m->nv + 1) > m->nslot) return NULL;
  m->v[m->nv] = (OnnxVal){.name = name, .param_node = -1, .producer = -1, .user = -1};
  uint64_t i = hash(name) & (uint64_t)(m->nslot - 1);
  while (m->slot[i]) i = (i + 1) & (uint64_t)(m->nslot - 1);
  m->slot[i] = m->nv + 1;
  return &m->v[m->nv++];
}

/* An ONNX name as an IR name: [A-Za-z0-9_.] kept, anything else '_', no
 * leading '_' or '.' ("/layer1/Conv" -> "layer1_Conv"). */
static const char *ir_name(Imp *m, const char *s) {
  while (*s && !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9'))) s++;
  char *r = arena_strdup(m->a, s);
  if (!r) return NULL;
  for (char *p = r; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.'))
      *p = '_';
  return r;
}

/* The dynamo exporter's module path of node p (its metadata_props entry
 * pkg.torch.onnx.name_scopes), or NULL.  metadata_props, field 9 of
 * NodeProto, is newer than the onnx.proto netc may be built with: it is
 * then among protobuf-c's unknown fields, each a StringStringEntryProto. */
static const char *name_scopes(Imp *m, const Onnx__NodeProto *p) {
  enum { NODE_METADATA_PROPS = 9 };
  for (unsigned i = 0; i < p->base.n_unknown_fields; i++) {
    const ProtobufCMessageUnknownField *f = &p->base.unknown_fields[i];
    if (f->tag != NODE_METADATA_PROPS || f->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) continue;
    Onnx__StringStringEntryProto *e = onnx__string_string_entry_proto__unpack(NULL, f->len, f->data);
    const char *r = NULL;
    if (e && e->key && e->value && strcmp(e->key, "pkg.torch.onnx.name_scopes") == 0) r = arena_strdup(m->a, e->value);
    if (e) onnx__string_string_entry_proto__free_unpacked(e, NULL);
    if (r) return r;
  }
  return NULL;
}

/* A unique layer name: the weight's name without ".weight" (conv1.weight ->
 * conv1, as the .net front end names it), else the module path PyTorch's
 * exporter recorded (onnx_scope.h), else the node's name, else the op and
 * position. */
static const char *layer_name(Imp *m, const Node *n, const char *weight) {
  const char *base = NULL;
  if (weight) {
    size_t len = strlen(weight);
    if (len > 7 && strcmp(weight + len - 7, ".weight") == 0) base = arena_strndup(m->a, weight, len - 7);
  }
  if (!base && m->scope_name && n->index < (int)m->gp->n_node) base = m->scope_name[n->index];
  if (!base && n->p->name && *n->p->name) base = n->p->name;
  if (base) base = ir_name(m, base);
  if (!base || !*base) base = arena_printf(m->a, "%s_%d", n->p->op_type, n->index);
  if (!base) return NULL;
  /* layer names share the value table, marked and behind a \1 no ONNX name
   * starts with; the base's entry keeps the last suffix handed out (n) */
  const char *key = arena_printf(m->a, "\1%s", base);
  OnnxVal *bx = key ? find(m, key) : NULL, *x = NULL;
  const char *name = base;
  if (bx && bx->layer) {
    for (int k = bx->n + 1;; k++) {
      name = arena_printf(m->a, "%s_%d", base, k);
      key = name ? arena_printf(m->a, "\1%s", name) : NULL;
      if (!key) return NULL;
      x = find(m, key);
      if (!x || !x->layer) {
        bx->n = k;
        break;
      }
    }
  }
  if (!key || !(x = intern(m, key))) return NULL;
  x->layer = 1;
  return name;
}

/* --- attributes ------------------------------------------------------------- */

static const Onnx__AttributeProto *attr(const Node *n, const char *key) {
  for (size_t i = 0; i < n->p->n_attribute; i++)
    if (n->p->attribute[i]->name && strcmp(n->p->attribute[i]->name, key) == 0) return n->p->attribute[i];
  return NULL;
}

/* Every attribute of n must be in `known` (space separated); each other one
 * is reported.  Returns the count of unknown ones. */
static int check_attrs(Imp *m, const Node *n, const char *known) {
  int bad = 0;
  for (size_t i = 0; i < n->p->n_attribute; i++) {
    const char *k = n->p->attribute[i]->name ? n->p->attribute[i]->name : "";
    size_t len = strlen(k);
    const char *s = known;
    int found = 0;
    while (!found && len && (s = strstr(s, k))) {
      found = (s == known || s[-1] == ' ') && (s[len] == ' ' || s[len] == 0);
      s += len;
    }
    if (!found) {
      node_error(m, n, "attribute '%s' is not supported (netc knows: %s)", k, *known ? known : "none");
      bad++;
    }
  }
  return bad;
}

static int64_t attr_int(const Node *n, const char *key, int64_t dflt) {
  const Onnx__AttributeProto *a = attr(n, key);
  return a && a->has_i ? a->i : dflt;
}

static double attr_float(const Node *n, const char *key, double dflt) {
  const Onnx__AttributeProto *a = attr(n, key);
  if (!a || !a->has_f) return dflt;
  /* a float attribute as the decimal it was written as: 1e-05f -> 1e-05 */
  char buf[32];
  snprintf(buf, sizeof buf, "%.7g", (double)a->f);
  return strtod(buf, NULL);
}

/* An INTS attribute of exactly want values (or its default dflt); -1 after
 * reporting a wrong count. */
static int attr_ints(Imp *m, const Node *n, const char *key, int want, const int64_t *dflt, int64_t *out) {
  const Onnx__AttributeProto *a = attr(n, key);
  if (!a) {
    memcpy(out, dflt, sizeof(int64_t) * (size_t)want);
    return 0;
  }
  if ((int)a->n_ints != want) {
    node_error(m, n, "attribute '%s' has %zu values; netc takes %d (2-D images)", key, a->n_ints, want);
    return -1;
  }
  memcpy(out, a->ints, sizeof(int64_t) * (size_t)want);
  return 0;
}

static const char *attr_str(const Node *n, const char *key, char *buf, size_t len) {
  const Onnx__AttributeProto *a = attr(n, key);
  if (!a || !a->has_s) return NULL;
  size_t k = a->s.len < len - 1 ? a->s.len : len - 1;
  memcpy(buf, a->s.data, k);
  buf[k] = 0;
  return buf;
}

/* --- tensors ------------------------------------------------------------------ */

static int onnx_dims_equal(const Onnx__TensorProto *t, const int64_t *dim, int rank) {
  if ((int)t->n_dims != rank) return 0;
  for (int i = 0; i < rank; i++)
    if (t->dims[i] != dim[i]) return 0;
  return 1;
}

static const char *dims_str(const int64_t *dim, int rank, char *buf, size_t len) {
  size_t k = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < rank && k < len; i++) k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, i ? "," : "", dim[i]);
  if (k < len) snprintf(buf + k, len - k, "]");
  return buf;
}

/* An int64 or int32 tensor of at most MAX_CONST elements into x as a
 * constant; -1 when it is not one. */
static int tensor_ints(const Onnx__TensorProto *t, OnnxVal *x) {
  int64_t n = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0 || t->dims[i] > MAX_CONST) return -1;
    n *= t->dims[i];
  }
  if (t->n_dims > 1 || n > MAX_CONST) return -1;
  int size = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64   ? 8
             : t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 ? 4
                                                                    : 0;
  if (!size) return -1;
  x->n = (int)n;
  x->scalar = t->n_dims == 0;
  for (int i = 0; i < x->n; i++) {
    if (t->has_raw_data) {
      if (t->raw_data.len != (size_t)(n * size)) return -1;
      uint64_t u = 0;
      for (int b = 0; b < size; b++) u |= (uint64_t)t->raw_data.data[i * size + b] << (8 * b);
      x->c[i] = size == 8 ? (int64_t)u : (int64_t)(int32_t)(uint32_t)u;
    } else if (size == 8) {
      if (t->n_int64_data != (size_t)n) return -1;
      x->c[i] = t->int64_data[i];
    } else {
      if (t->n_int32_data != (size_t)n) return -1;
      x->c[i] = t->int32_data[i];
    }
  }
  x->k = OV_CONST;
  return 0;
}

/* --- inputs of a node --------------------------------------------------------------- */

/* Input i of n, checked to exist (and to come from an earlier node); NULL
 * after reporting, or quietly when it is poisoned (*bad set either way). */
static OnnxVal *in(Imp *m, const Node *n, size_t i, int *bad) {
  if (i >= n->p->n_input || !n->p->input[i] || !*n->p->input[i]) {
    node_error(m, n, "input %zu is missing", i + 1);
    *bad = 1;
    return NULL;
  }
  OnnxVal *x = find(m, n->p->input[i]);
  if (!x || x->layer || (x->k == OV_MISSING && x->producer < 0)) {
    node_error(m, n, "input '%s' is not a graph input, an initializer or any node's output (a missing initializer?)",
               n->p->input[i]);
    *bad = 1;
    return NULL;
  }
  if (x->producer >= n->index) {
    node_error(m, n,
               "reads '%s', which node %d makes later: the graph has a cycle or is not in topological order (ONNX "
               "requires one)",
               x->name, x->producer);
    *bad = 1;
    return NULL;
  }
  if (x->k == OV_BAD) {
    *bad = 1;
    return NULL;
  }
  return x;
}

static int optional_in(const Node *n, size_t i) { return i < n->p->n_input && n->p->input[i] && *n->p->input[i]; }

/* An activation input of the given rank (0: any). */
static OnnxVal *act(Imp *m, const Node *n, size_t i, int rank, int *bad) {
  OnnxVal *x = in(m, n, i, bad);
  if (!x) return NULL;
  if (x->k != OV_ACT) {
    node_error(m, n, "input '%s' must be an activation (computed from the image), not %s", x->name,
               x->k == OV_INIT ? "an initializer" : "a constant");
    *bad = 1;
    return NULL;
  }
  const IrType *t = &m->g->val[x->id].type;
  if (rank && t->rank != rank) {
    char b[96];
    node_error(m, n, "input '%s' is %s; netc takes a rank-%d tensor here", x->name, ir_type_str(t, b, sizeof b), rank);
    *bad = 1;
    return NULL;
  }
  return x;
}

static const IrType *type_of(Imp *m, const OnnxVal *x) { return &m->g->val[x->id].type; }

/* Input i as a parameter (or state): an unused float initializer of the
 * shape want[0..rank-1], made an IR value called by its ONNX name.
 * transposed: the initializer holds want's 2-D transpose (MatMul's, Gemm's
 * transB=0 weight).  Returns the value id, or -1 after reporting. */
static int param(Imp *m, const Node *n, size_t i, IrValueKind kind, IrLayout layout, const int64_t *want, int rank,
                 int transposed, int *bad) {
  OnnxVal *x = in(m, n, i, bad);
  if (!x) return -1;
  char b1[96], b2[96];
  if (x->k != OV_INIT) {
    node_error(m, n, "input %zu '%s' must be an initializer (netc trains it as a parameter)", i + 1, x->name);
    *bad = 1;
    return -1;
  }
  if (x->param_node >= 0) {
    node_error(m, n, "initializer '%s' is already the parameter of node %d; netc does not share weights", x->name,
               x->param_node);
    *bad = 1;
    return -1;
  }
  const Onnx__TensorProto *t = x->init;
  if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
    node_error(m, n, "initializer '%s' has data type %d; netc's parameters are float (1)", x->name, t->data_type);
    *bad = 1;
    return -1;
  }
  int64_t expect[IR_MAX_RANK];
  memcpy(expect, want, sizeof(int64_t) * (size_t)rank);
  if (transposed) expect[0] = want[1], expect[1] = want[0];
  int ok = onnx_dims_equal(t, expect, rank);
  /* a bias of shape [1, K] is a bias of shape [K] */
  if (!ok && rank == 1 && t->n_dims == 2 && t->dims[0] == 1 && t->dims[1] == want[0]) ok = 1;
  if (!ok) {
    int64_t got[IR_MAX_RANK];
    int gr = t->n_dims < IR_MAX_RANK ? (int)t->n_dims : IR_MAX_RANK;
    for (int k = 0; k < gr; k++) got[k] = t->dims[k];
    node_error(m, n, "initializer '%s' has shape %s; this node needs %s", x->name, dims_str(got, gr, b1, sizeof b1),
               dims_str(expect, rank, b2, sizeof b2));
    *bad = 1;
    return -1;
  }
  /* the values are not read, but a file whose data does not fill its shape is broken */
  int64_t numel = 1;
  for (int k = 0; k < rank; k++)
    if (__builtin_mul_overflow(numel, want[k], &numel)) numel = INT64_MAX;
  const uint8_t *external = NULL;
  if (onnx_external_is(t)) {
    char why[768];
    if (numel > INT64_MAX / 4 || !(external = onnx_external_data(&m->ext, t, (size_t)numel * 4, why, sizeof why))) {
      node_error(m, n, "initializer '%s' %s", x->name, numel > INT64_MAX / 4 ? "is too large" : why);
      *bad = 1;
      return -1;
    }
  }
  size_t have = t->has_raw_data ? t->raw_data.len / 4 : t->n_float_data;
  if ((t->has_raw_data && t->raw_data.len % 4) || ((t->has_raw_data || t->n_float_data) && have != (size_t)numel)) {
    node_error(m, n, "initializer '%s' holds %zu values; its shape %s needs %" PRId64, x->name, have,
               dims_str(expect, rank, b2, sizeof b2), numel);
    *bad = 1;
    return -1;
  }
  const char *name = ir_name(m, x->name);
  int id = name ? ir_value_add(m->g, kind, ir_type(IR_DT_F32, layout, rank, want), name) : -1;
  if (id < 0) {
    *bad = 1;
    return -1;
  }
  x->param_node = n->index;
  if (ARENA_RESERVE(m->a, m->w, m->nw, m->capw)) {
    OnnxWeight *ow = &m->w[m->nw++];
    *ow = (OnnxWeight){.name = name, .rank = rank, .transposed = transposed};
    memcpy(ow->dim, want, sizeof(int64_t) * (size_t)rank);
    if (external)
      ow->raw = external;
    else if (t->has_raw_data)
      ow->raw = t->raw_data.data;
    else if (t->n_float_data)
      ow->f = t->float_data;
    else
      m->missing_data++;
  }
  return id;
}

/* A folded constant input (a Constant, an int initializer, shape arithmetic). */
static OnnxVal *constant(Imp *m, const Node *n, size_t i, int *bad) {
  OnnxVal *x = in(m, n, i, bad);
  if (!x) return NULL;
  if (x->k == OV_INIT && tensor_ints(x->init, x) == 0) return x;
  if (x->k != OV_CONST) {
    node_error(m, n, "input '%s' must be a constant of at most %d integers (shape arithmetic)", x->name, MAX_CONST);
    *bad = 1;
    return NULL;
  }
  return x;
}

/* --- outputs ---------------------------------------------------------------------------- */

/* Output 0 of n becomes *src (an alias); outputs 1.. must be unused. */
static OnnxVal *out(Imp *m, const Node *n, size_t i) {
  return i < n->p->n_output && n->p->output[i] && *n->p->output[i] ? find(m, n->p->output[i]) : NULL;
}

/* Outputs first.. of n must be read by no node (as graph outputs they are
 * left out: a training-mode export lists BatchNormalization's updated
 * statistics there, which netc keeps as state itself). */
static int extra_outputs_unused(Imp *m, const Node *n, size_t first, const char *what) {
  for (size_t i = first; i < n->p->n_output; i++) {
    OnnxVal *x = out(m, n, i);
    if (x && x->uses) {
      node_error(m, n, "output %zu '%s' (%s) is read%s; netc computes only the first output", i + 1, x->name, what,
                 x->graph_output ? " as a graph output" : " by another node");
      return -1;
    }
  }
  return 0;
}

/* Types, adds and names the IR node; binds output 0 of n to its result.
 * Returns 0, or -1 after reporting. */
static int emit(Imp *m, const Node *n, IrOp op, const char *layer, const int *ins, int nin, const IrAttr *attrs,
                int nattr) {
  IrNode tmp = {.op = op, .name = layer, .nin = nin, .in = (int *)ins, .nout = 1};
  tmp.attr = (IrAttr *)attrs;
  tmp.nattr = nattr;
  IrType t;
  char err[256];
  if (ir_infer(m->g, &tmp, &t, err, sizeof err)) {
    node_error(m, n, "%s", err);
    return -1;
  }
  if (ir_type_numel(&t, 1) > MAX_SAMPLE_ELEMS) {
    node_error(m, n, "the output has %" PRId64 " elements per sample, more than netc supports", ir_type_numel(&t, 1));
    return -1;
  }
  SrcLoc loc = {.file = m->path, .line = n->index + 1, .col = 1};
  int id = layer ? ir_node_add(m->g, op, layer, loc, ins, nin, &t, 1) : -1;
  if (id < 0) return -1;
  for (int i = 0; i < nattr; i++) {
    const IrAttr *a = &attrs[i];
    if (a->kind == IR_ATTR_INTS)
      ir_attr_set_ints(m->g, id, a->key, a->i, a->n);
    else if (a->kind == IR_ATTR_INT)
      ir_attr_set_int(m->g, id, a->key, a->i[0]);
    else
      ir_attr_set_float(m->g, id, a->key, a->f);
  }
  OnnxVal *o = out(m, n, 0);
  if (o) o->k = OV_ACT, o->id = m->g->node[id].out[0];
  return 0;
}

static IrAttr pair(const char *key, int64_t a, int64_t b) {
  return (IrAttr){.key = key, .kind = IR_ATTR_INTS, .n = 2, .i = {a, b}};
}
static IrAttr one(const char *key, int64_t a) { return (IrAttr){.key = key, .kind = IR_ATTR_INT, .n = 1, .i = {a}}; }
static IrAttr real(const char *key, double f) { return (IrAttr){.key = key, .kind = IR_ATTR_FLOAT, .f = f}; }

/* The spatial attributes of Conv and the pools: kernel k, strides s, the
 * symmetric pads p, dilations dl; auto_pad NOTSET or VALID only. */
static int spatial(Imp *m, const Node *n, int64_t *k, int64_t *s, int64_t *p, int64_t *dl, int need_kernel) {
  static const int64_t ones[2] = {1, 1}, zeros[4] = {0, 0, 0, 0};
  char buf[32];
  const char *ap = attr_str(n, "auto_pad", buf, sizeof buf);
  if (ap && strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) {
    node_error(m, n, "auto_pad=%s is not supported (give explicit pads)", ap);
    return -1;
  }
  if (need_kernel && !attr(n, "kernel_shape")) {
    node_error(m, n, "attribute 'kernel_shape' is missing");
    return -1;
  }
  int64_t pads[4];
  if ((k && attr_ints(m, n, "kernel_shape", 2, k, k)) || attr_ints(m, n, "strides", 2, ones, s) ||
      attr_ints(m, n, "pads", 4, zeros, pads) || attr_ints(m, n, "dilations", 2, ones, dl))
    return -1;
  if (pads[0] != pads[2] || pads[1] != pads[3]) {
    node_error(m, n,
               "pads [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "] are not symmetric; netc pads both sides alike",
               pads[0], pads[1], pads[2], pads[3]);
    return -1;
  }
  p[0] = pads[0], p[1] = pads[1];
  for (int i = 0; i < 2; i++)
    if (s[i] < 1 || dl[i] < 1 || p[i] < 0 || (k && k[i] < 1) || s[i] > MAX_WINDOW || dl[i] > MAX_WINDOW ||
        p[i] > MAX_WINDOW || (k && k[i] > MAX_WINDOW)) {
      node_error(m, n, "kernel, strides and dilations must be in 1..%d and pads in 0..%d", MAX_WINDOW, MAX_WINDOW);
      return -1;
    }
  return 0;
}

/* --- the ops ----------------------------------------------------------------------------- */

typedef int (*OpFn)(Imp *m, const Node *n);

static int op_conv(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *x = act(m, n, 0, 4, &bad);
  OnnxVal *w = in(m, n, 1, &bad);
  if (bad) return -1;
  if (w->k != OV_INIT || w->init->n_dims != 4) {
    node_error(m, n, "the weight '%s' must be a rank-4 initializer", w->name);
    return -1;
  }
  int64_t k[2] = {w->init->dims[2], w->init->dims[3]}, s[2], p[2], dl[2];
  if (spatial(m, n, k, s, p, dl, 0)) return -1;
  if (k[0] != w->init->dims[2] || k[1] != w->init->dims[3]) {
    node_error(m, n, "kernel_shape %" PRId64 "x%" PRId64 " does not match the weight's %" PRId64 "x%" PRId64, k[0],
               k[1], w->init->dims[2], w->init->dims[3]);
    return -1;
  }
  int64_t g = attr_int(n, "group", 1), C = type_of(m, x)->dim[1], K = w->init->dims[0];
  if (K < 1 || K > MAX_CHANNELS) {
    node_error(m, n, "the weight '%s' has %" PRId64 " output channels; netc takes 1..%d", w->name, K, MAX_CHANNELS);
    return -1;
  }
  if (g < 1 || C % g || K % g) {
    node_error(m, n, "group=%" PRId64 " must divide the input channels (%" PRId64 ") and the outputs (%" PRId64 ")", g,
               C, K);
    return -1;
  }
  const char *layer = layer_name(m, n, w->name);
  int64_t wd[4] = {K, C / g, k[0], k[1]};
  int ins[3] = {x->id, param(m, n, 1, IR_VAL_PARAM, IR_LAYOUT_KCRS, wd, 4, 0, &bad)}, nin = 2;
  if (optional_in(n, 2)) ins[nin++] = param(m, n, 2, IR_VAL_PARAM, IR_LAYOUT_ROW, &K, 1, 0, &bad);
  if (bad) return -1;
  IrAttr at[5] = {pair("k", k[0], k[1]), pair("s", s[0], s[1]), pair("p", p[0], p[1]), pair("d", dl[0], dl[1]),
                  one("groups", g)};
  return emit(m, n, IR_OP_CONV2D, layer, ins, nin, at, 5);
}

static int op_batchnorm(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *x = act(m, n, 0, 4, &bad);
  if (bad) return -1;
  if (attr_int(n, "spatial", 1) != 1) {
    node_error(m, n, "spatial=0 (per-element statistics) is not supported");
    return -1;
  }
  if (extra_outputs_unused(m, n, 1, "running statistics or batch statistics")) return -1;
  double eps = attr_float(n, "epsilon", 1e-5), mom = attr_float(n, "momentum", 0.9);
  if (!(eps > 0 && eps < 1) || !(mom >= 0 && mom <= 1)) {
    node_error(m, n, "epsilon=%g must be in (0, 1) and momentum=%g in [0, 1]", eps, mom);
    return -1;
  }
  int64_t C = type_of(m, x)->dim[1];
  const char *layer = optional_in(n, 1) ? layer_name(m, n, n->p->input[1]) : NULL;
  int ins[5] = {x->id};
  for (int i = 1; i < 5; i++)
    ins[i] = param(m, n, (size_t)i, i < 3 ? IR_VAL_PARAM : IR_VAL_STATE, IR_LAYOUT_ROW, &C, 1, 0, &bad);
  if (bad) return -1;
  /* ONNX keeps momentum of the old statistics (0.9), PyTorch and netc the
   * weight of the new batch (0.1) */
  char buf[32];
  snprintf(buf, sizeof buf, "%.7g", 1 - mom);
  IrAttr at[2] = {real("eps", eps), real("momentum", strtod(buf, NULL))};
  return emit(m, n, IR_OP_BATCHNORM, layer, ins, 5, at, 2);
}

static int op_unary(Imp *m, const Node *n, IrOp op, const char *base) {
  int bad = 0;
  OnnxVal *x = act(m, n, 0, op == IR_OP_RELU ? 0 : 4, &bad);
  if (bad) return -1;
  int ins[1] = {x->id};
  return emit(m, n, op, layer_name(m, n, NULL), ins, 1, NULL, 0);
}

static int op_relu(Imp *m, const Node *n) { return op_unary(m, n, IR_OP_RELU, "relu"); }

/* ReduceMean over H and W, keeping them: a global average pool (how some
 * exporters write adaptive_avg_pool2d(x, 1)).  The axes are an attribute
 * before opset 18 and an input from it. */
static int op_reduce_mean(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *x = act(m, n, 0, 4, &bad);
  OnnxVal *ax = optional_in(n, 1) ? constant(m, n, 1, &bad) : NULL;
  if (bad) return -1;
  const Onnx__AttributeProto *a = attr(n, "axes");
  int64_t axes[2] = {0, 0};
  int nax = ax ? ax->n : a ? (int)a->n_ints : 0;
  for (int i = 0; i < nax && i < 2; i++) {
    int64_t v = ax ? ax->c[i] : a->ints[i];
    axes[i] = v < 0 ? v + 4 : v;
  }
  int hw = nax == 2 && ((axes[0] == 2 && axes[1] == 3) || (axes[0] == 3 && axes[1] == 2));
  if (!hw || attr_int(n, "keepdims", 1) != 1 || attr_int(n, "noop_with_empty_axes", 0)) {
    node_error(m, n, "only ReduceMean over axes 2 and 3 with keepdims=1 (a global average pool) is supported");
    return -1;
  }
  int ins[1] = {x->id};
  return emit(m, n, IR_OP_GLOBAL_AVGPOOL, layer_name(m, n, NULL), ins, 1, NULL, 0);
}
static int op_gap(Imp *m, const Node *n) { return op_unary(m, n, IR_OP_GLOBAL_AVGPOOL, "global_avgpool"); }

static int op_add(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *a = in(m, n, 0, &bad), *b = in(m, n, 1, &bad);
  if (bad) return -1;
  if (a->k != OV_ACT || b->k != OV_ACT) {
    node_error(m, n,
               "adds '%s' to '%s': netc adds two activations of one shape (a bias is supported only right "
               "after a MatMul)",
               a->name, b->name);
    return -1;
  }
  if (!ir_type_equal(type_of(m, a), type_of(m, b))) {
    char b1[96], b2[96];
    node_error(m, n, "adds %s to %s: netc does not broadcast", ir_type_str(type_of(m, a), b1, sizeof b1),
               ir_type_str(type_of(m, b), b2, sizeof b2));
    return -1;
  }
  int ins[2] = {a->id, b->id};
  return emit(m, n, IR_OP_ADD, layer_name(m, n, NULL), ins, 2, NULL, 0);
}

static int op_pool(Imp *m, const Node *n, IrOp op) {
  int64_t k[2], s[2], p[2], dl[2];
  if (spatial(m, n, k, s, p, dl, 1)) return -1; /* first: reported even when the input is poisoned */
  int bad = 0;
  OnnxVal *x = act(m, n, 0, 4, &bad);
  if (bad) return -1;
  if (dl[0] != 1 || dl[1] != 1) {
    node_error(m, n, "dilations are not supported in pooling");
    return -1;
  }
  if (attr_int(n, "ceil_mode", 0) || attr_int(n, "storage_order", 0)) {
    node_error(m, n, "ceil_mode=1 and storage_order=1 are not supported");
    return -1;
  }
  if (extra_outputs_unused(m, n, 1, "the indices")) return -1;
  int ins[1] = {x->id};
  IrAttr at[4] = {pair("k", k[0], k[1]), pair("s", s[0], s[1]), pair("p", p[0], p[1]),
                  one("include_pad", attr_int(n, "count_include_pad", 0) != 0)};
  return emit(m, n, op, layer_name(m, n, NULL), ins, 1, at, op == IR_OP_AVGPOOL ? 4 : 3);
}

static int op_maxpool(Imp *m, const Node *n) { return op_pool(m, n, IR_OP_MAXPOOL); }
static int op_avgpool(Imp *m, const Node *n) { return op_pool(m, n, IR_OP_AVGPOOL); }

static int op_flatten(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *x = act(m, n, 0, 0, &bad);
  if (bad) return -1;
  if (attr_int(n, "axis", 1) != 1) {
    node_error(m, n, "axis=%" PRId64 " is not supported: netc flattens to [N, features] (axis=1)",
               attr_int(n, "axis", 1));
    return -1;
  }
  int ins[1] = {x->id};
  return emit(m, n, IR_OP_FLATTEN, layer_name(m, n, NULL), ins, 1, NULL, 0);
}

/* Reshape to [N, features] (a flatten), the target folded from constants. */
static int op_reshape(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *x = act(m, n, 0, 0, &bad);
  OnnxVal *sh = constant(m, n, 1, &bad);
  if (bad) return -1;
  /* allowzero=1 makes a 0 in the shape a dimension of size 0 rather than a
   * copy of the input's: the same reshape when the shape holds no 0 (as
   * the dynamo exporter writes x.view(N, -1)) */
  int allowzero = attr_int(n, "allowzero", 0) != 0;
  for (int i = 0; allowzero && i < sh->n; i++)
    if (sh->c[i] == 0) {
      node_error(m, n, "allowzero=1 with a 0 in the shape (a dimension of size 0) is not supported");
      return -1;
    }
  const IrType *t = type_of(m, x);
  int64_t feat = 1;
  for (int i = 1; i < t->rank; i++) feat *= t->dim[i];
  int ok = sh->n == 2;
  if (ok) {
    int64_t d0 = sh->c[0], d1 = sh->c[1];
    int batch = d0 == ONNX_N || d0 == 0 || (m->batch_dim > 0 && d0 == m->batch_dim) || (d0 == -1 && d1 == feat);
    ok = batch && (d1 == -1 || d1 == feat || (d1 == 0 && t->rank == 2));
  }
  if (!ok) {
    char b[96], c[96];
    int k = snprintf(c, sizeof c, "[");
    for (int i = 0; i < sh->n && k < (int)sizeof c; i++)
      k += sh->c[i] == ONNX_N ? snprintf(c + k, sizeof c - (size_t)k, "%sN", i ? "," : "")
                              : snprintf(c + k, sizeof c - (size_t)k, "%s%" PRId64, i ? "," : "", sh->c[i]);
    if (k < (int)sizeof c) snprintf(c + k, sizeof c - (size_t)k, "]");
    node_error(m, n, "reshape of %s to %s: netc reshapes only to [N, features] (a flatten)",
               ir_type_str(t, b, sizeof b), c);
    return -1;
  }
  int ins[1] = {x->id};
  return emit(m, n, IR_OP_FLATTEN, layer_name(m, n, NULL), ins, 1, NULL, 0);
}

/* linear(x, weight, bias) from Gemm or MatMul (+ the Add of its bias,
 * node add >= 0, whose input bias_in is the bias). */
static int linear(Imp *m, const Node *n, OnnxVal *x, size_t w_in, int transposed, const Node *bn, size_t b_in) {
  int bad = 0;
  OnnxVal *w = in(m, n, w_in, &bad);
  if (bad) return -1;
  if (w->k != OV_INIT || w->init->n_dims != 2) {
    node_error(m, n, "the weight '%s' must be a rank-2 initializer", w->name);
    return -1;
  }
  int64_t F = type_of(m, x)->dim[1], K = transposed ? w->init->dims[1] : w->init->dims[0];
  if (K < 1 || K > MAX_CHANNELS) {
    node_error(m, n, "the weight '%s' has %" PRId64 " outputs; netc takes 1..%d", w->name, K, MAX_CHANNELS);
    return -1;
  }
  int64_t wd[2] = {K, F};
  const char *layer = layer_name(m, n, w->name);
  int ins[3] = {x->id, param(m, n, w_in, IR_VAL_PARAM, IR_LAYOUT_ROW, wd, 2, transposed, &bad)}, nin = 2;
  if (bn) ins[nin++] = param(m, bn, b_in, IR_VAL_PARAM, IR_LAYOUT_ROW, &K, 1, 0, &bad);
  if (bad) return -1;
  return emit(m, n, IR_OP_LINEAR, layer, ins, nin, NULL, 0);
}

static int op_gemm(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *x = act(m, n, 0, 2, &bad);
  if (bad) return -1;
  if (attr_float(n, "alpha", 1) != 1 || attr_float(n, "beta", 1) != 1 || attr_int(n, "transA", 0)) {
    node_error(m, n, "alpha and beta other than 1 and transA=1 are not supported");
    return -1;
  }
  return linear(m, n, x, 1, !attr_int(n, "transB", 0), optional_in(n, 2) ? n : NULL, 2);
}

/* MatMul node i then Add(bias): one linear layer, when the Add is the only
 * reader of its output and its other input an initializer not yet taken;
 * the Add's node and *b_in the bias's input, or -1. */
static int bias_add(Imp *m, int i, size_t *b_in) {
  const Onnx__NodeProto *p = m->gp->node[i];
  OnnxVal *o = p->n_output >= 1 && p->output[0] && *p->output[0] ? find(m, p->output[0]) : NULL;
  if (!o || o->uses != 1 || o->graph_output || o->user <= i) return -1;
  const Onnx__NodeProto *ap = m->gp->node[o->user];
  if (!ap->op_type || strcmp(ap->op_type, "Add") != 0 || ap->n_input != 2 || ap->n_attribute != 0) return -1;
  *b_in = ap->input[0] && strcmp(ap->input[0], o->name) == 0 ? 1 : 0;
  OnnxVal *b = ap->input[*b_in] ? find(m, ap->input[*b_in]) : NULL;
  return b && b->k == OV_INIT && b->param_node < 0 ? o->user : -1;
}

static int op_matmul(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *x = act(m, n, 0, 2, &bad);
  if (bad) return -1;
  OnnxVal *o = out(m, n, 0);
  size_t b_in = 0;
  int add = o ? bias_add(m, n->index, &b_in) : -1;
  if (add < 0) return linear(m, n, x, 1, 1, NULL, 0);
  const Onnx__NodeProto *ap = m->gp->node[add];
  Node an = {ap, add, arena_printf(m->a, "node %d '%s' (Add)", add, ap->name ? ap->name : "")};
  if (linear(m, n, x, 1, 1, &an, b_in)) return -1;
  OnnxVal *ao = out(m, &an, 0);
  if (ao)
    *ao = (OnnxVal){.name = ao->name,
                    .k = OV_ACT,
                    .id = o->id,
                    .param_node = -1,
                    .producer = ao->producer,
                    .uses = ao->uses,
                    .user = ao->user,
                    .graph_output = ao->graph_output};
  m->absorbed[add] = 1;
  return 0;
}

static void alias(Imp *m, const Node *n, const OnnxVal *src) {
  OnnxVal *o = out(m, n, 0);
  if (!o) return;
  OnnxVal keep = *o;
  *o = *src;
  o->name = keep.name, o->producer = keep.producer, o->uses = keep.uses, o->user = keep.user;
  o->graph_output = keep.graph_output, o->param_node = -1;
  if (src->k == OV_INIT) o->k = OV_BAD; /* an initializer's alias cannot be a parameter twice */
}

static int op_identity(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *x = in(m, n, 0, &bad);
  if (bad) return -1;
  if (x->k == OV_INIT) {
    if (tensor_ints(x->init, x) == 0) {
      alias(m, n, x);
      return 0;
    }
    node_error(m, n, "Identity of the initializer '%s' is not supported", x->name);
    return -1;
  }
  alias(m, n, x);
  return 0;
}

/* --- shape arithmetic -------------------------------------------------------------------- */

static OnnxVal *const_out(Imp *m, const Node *n) {
  OnnxVal *o = out(m, n, 0);
  if (o) o->k = OV_CONST, o->n = 0, o->scalar = 0;
  return o;
}

static int op_constant(Imp *m, const Node *n) {
  const Onnx__AttributeProto *a;
  OnnxVal *o = out(m, n, 0);
  if (!o) return 0;
  if ((a = attr(n, "value")) && a->t) {
    if (tensor_ints(a->t, o) == 0) return 0;
    o->k = OV_FLOATCONST;
    return 0;
  }
  if ((a = attr(n, "value_int")) && a->has_i) {
    o->k = OV_CONST, o->n = 1, o->scalar = 1, o->c[0] = a->i;
    return 0;
  }
  if ((a = attr(n, "value_ints")) && a->n_ints <= MAX_CONST) {
    o->k = OV_CONST, o->n = (int)a->n_ints, o->scalar = 0;
    memcpy(o->c, a->ints, sizeof(int64_t) * a->n_ints);
    return 0;
  }
  node_error(m, n, "only integer constants (shape arithmetic) and value tensors are supported");
  return -1;
}

static int op_shape(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *x = act(m, n, 0, 0, &bad);
  if (bad) return -1;
  const IrType *t = type_of(m, x);
  int64_t lo = attr_int(n, "start", 0), hi = attr_int(n, "end", t->rank);
  if (lo < 0) lo += t->rank;
  if (hi < 0) hi += t->rank;
  if (lo < 0) lo = 0;
  if (hi > t->rank) hi = t->rank;
  OnnxVal *o = const_out(m, n);
  for (int64_t i = lo; o && i < hi; i++) o->c[o->n++] = t->dim[i] == IR_DIM_N ? ONNX_N : t->dim[i];
  return 0;
}

static int op_gather(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *x = constant(m, n, 0, &bad), *ix = constant(m, n, 1, &bad);
  if (bad) return -1;
  if (attr_int(n, "axis", 0) != 0 || x->scalar) {
    node_error(m, n, "only Gather along axis 0 of a 1-D constant is supported (shape arithmetic)");
    return -1;
  }
  OnnxVal r = {.n = ix->n, .scalar = ix->scalar};
  for (int i = 0; i < ix->n; i++) {
    int64_t k = ix->c[i] < 0 ? ix->c[i] + x->n : ix->c[i];
    if (k < 0 || k >= x->n) {
      node_error(m, n, "index %" PRId64 " is out of range for %d elements", ix->c[i], x->n);
      return -1;
    }
    r.c[i] = x->c[k];
  }
  OnnxVal *o = const_out(m, n);
  if (o) o->n = r.n, o->scalar = r.scalar, memcpy(o->c, r.c, sizeof r.c);
  return 0;
}

static int op_unsqueeze(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *x = constant(m, n, 0, &bad);
  OnnxVal *ax = optional_in(n, 1) ? constant(m, n, 1, &bad) : NULL;
  if (bad) return -1;
  const Onnx__AttributeProto *a = attr(n, "axes");
  int one_axis = ax ? ax->n == 1 && ax->c[0] == 0 : a && a->n_ints == 1 && a->ints[0] == 0;
  if (!x->scalar || !one_axis) {
    node_error(m, n, "only Unsqueeze of a scalar constant along axis 0 is supported (shape arithmetic)");
    return -1;
  }
  OnnxVal *o = const_out(m, n);
  if (o) o->n = 1, o->c[0] = x->c[0];
  return 0;
}

static int op_concat(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal r = {0};
  for (size_t i = 0; i < n->p->n_input; i++) {
    OnnxVal *x = constant(m, n, i, &bad);
    if (!x) continue;
    if (r.n + x->n > MAX_CONST || x->scalar) {
      node_error(m, n, "only Concat of 1-D constants of at most %d elements in all is supported", MAX_CONST);
      return -1;
    }
    memcpy(r.c + r.n, x->c, sizeof(int64_t) * (size_t)x->n);
    r.n += x->n;
  }
  if (bad) return -1;
  if (attr_int(n, "axis", 0) != 0) {
    node_error(m, n, "only Concat along axis 0 is supported (shape arithmetic)");
    return -1;
  }
  OnnxVal *o = const_out(m, n);
  if (o) o->n = r.n, memcpy(o->c, r.c, sizeof r.c);
  return 0;
}

static int op_cast(Imp *m, const Node *n) {
  int bad = 0;
  OnnxVal *x = constant(m, n, 0, &bad);
  if (bad) return -1;
  int64_t to = attr_int(n, "to", 0);
  if (to != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && to != ONNX__TENSOR_PROTO__DATA_TYPE__INT32) {
    node_error(m, n, "Cast of shape arithmetic to data type %" PRId64 " is not supported (int32 or int64 only)", to);
    return -1;
  }
  alias(m, n, x);
  return 0;
}

typedef struct OpEntry {
  const char *name;
  OpFn fn;
  const char *attrs; /* the attributes netc reads; any other is an error */
  int folded;        /* shape arithmetic, folded into the Reshape it feeds: never a layer */
} OpEntry;

static const OpEntry OPS[] = {
    {"Conv", op_conv, "kernel_shape strides pads dilations group auto_pad", 0},
    {"BatchNormalization", op_batchnorm, "epsilon momentum training_mode spatial", 0},
    {"Relu", op_relu, "", 0},
    {"Add", op_add, "", 0},
    {"MaxPool", op_maxpool, "kernel_shape strides pads dilations ceil_mode storage_order auto_pad", 0},
    {"AveragePool", op_avgpool, "kernel_shape strides pads dilations ceil_mode count_include_pad auto_pad", 0},
    {"GlobalAveragePool", op_gap, "", 0},
    {"ReduceMean", op_reduce_mean, "axes keepdims noop_with_empty_axes", 0},
    {"Flatten", op_flatten, "axis", 0},
    {"Reshape", op_reshape, "allowzero", 0},
    {"Gemm", op_gemm, "alpha beta transA transB", 0},
    {"MatMul", op_matmul, "", 0},
    {"Identity", op_identity, "", 0},
    {"Constant", op_constant, "value value_int value_ints", 1},
    {"Shape", op_shape, "start end", 1},
    {"Gather", op_gather, "axis", 1},
    {"Unsqueeze", op_unsqueeze, "axes", 1},
    {"Concat", op_concat, "axis", 1},
    {"Cast", op_cast, "to saturate", 1},
};

/* --- the model ------------------------------------------------------------------------- */

static int check_opset(Imp *m, const Onnx__ModelProto *mp) {
  m->opset = -1;
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
    if (!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) m->opset = (int)o->version;
  }
  if (m->opset < 0) {
    diag_error(m->d, file_loc(m), "the model imports no ai.onnx opset (opset_import); netc knows opsets %d to %d",
               OPSET_MIN, OPSET_MAX);
    return -1;
  }
  if (m->opset < OPSET_MIN || m->opset > OPSET_MAX) {
    diag_error(m->d, file_loc(m), "opset %d: netc knows ai.onnx opsets %d to %d (export with opset_version=17)",
               m->opset, OPSET_MIN, OPSET_MAX);
    return -1;
  }
  return 0;
}

/* The one non-initializer input: the image, [N, C, H, W] float. */
static int image_input(Imp *m) {
  const Onnx__GraphProto *gp = m->gp;
  const Onnx__ValueInfoProto *img = NULL;
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    OnnxVal *x = vi->name ? find(m, vi->name) : NULL;
    if (x && x->k == OV_INIT) continue; /* old exporters list initializers as inputs too */
    if (img) {
      diag_error(m->d, file_loc(m), "the graph has two inputs, '%s' and '%s'; netc takes one image input", img->name,
                 vi->name ? vi->name : "");
      return -1;
    }
    img = vi;
  }
  if (!img || !img->name) {
    diag_error(m->d, file_loc(m), "the graph has no input");
    return -1;
  }
  const Onnx__TypeProto *tp = img->type;
  const Onnx__TypeProto__Tensor *tt =
      tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
  if (!tt || tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || !tt->shape || tt->shape->n_dim < 2 ||
      tt->shape->n_dim > IR_MAX_RANK) {
    diag_error(m->d, file_loc(m), "input '%s' must be a float tensor of known rank 2 to %d ([N, C, H, W])", img->name,
               IR_MAX_RANK);
    return -1;
  }
  int64_t dim[IR_MAX_RANK] = {IR_DIM_N};
  int rank = (int)tt->shape->n_dim;
  const Onnx__TensorShapeProto__Dimension *d0 = tt->shape->dim[0];
  if (d0->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) m->batch_dim = d0->dim_value;
  int64_t elems = 1;
  for (int i = 1; i < rank; i++) {
    const Onnx__TensorShapeProto__Dimension *dd = tt->shape->dim[i];
    if (dd->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE || dd->dim_value < 1 ||
        dd->dim_value > (1 << 20)) {
      diag_error(m->d, file_loc(m),
                 "input '%s': dimension %d must be a number in 1..%d (only the first, the batch, "
                 "may be symbolic)",
                 img->name, i, 1 << 20);
      return -1;
    }
    dim[i] = dd->dim_value;
    if (dim[i] > MAX_SAMPLE_ELEMS / elems)
      elems = MAX_SAMPLE_ELEMS + 1; /* past the limit: stop multiplying (no overflow) */
    else
      elems *= dim[i];
  }
  IrType it = ir_type(IR_DT_F32, rank == 4 ? IR_LAYOUT_NCHW : IR_LAYOUT_ROW, rank, dim);
  if (elems > MAX_SAMPLE_ELEMS) {
    diag_error(m->d, file_loc(m), "input '%s' has more elements per sample than netc supports", img->name);
    return -1;
  }
  const char *name = ir_name(m, img->name);
  OnnxVal *x = intern(m, img->name);
  int id = name && x ? ir_value_add(m->g, IR_VAL_INPUT, it, name) : -1;
  if (id < 0) return -1;
  x->k = OV_ACT, x->id = id;
  int64_t ld[1] = {IR_DIM_N};
  m->label = ir_value_add(m->g, IR_VAL_INPUT, ir_type(IR_DT_I32, IR_LAYOUT_ROW, 1, ld), "label");
  return m->label < 0 ? -1 : 0;
}

/* Registers initializers, node outputs and uses; reports names made twice. */
static int scan(Imp *m) {
  const Onnx__GraphProto *gp = m->gp;
  int bad = 0;
  if (reserve(m)) {
    diag_error(m->d, file_loc(m), "out of memory");
    return -1;
  }
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *t = gp->initializer[i];
    OnnxVal *x = t->name ? intern(m, t->name) : NULL;
    if (!x) continue;
    if (x->k == OV_INIT) {
      diag_error(m->d, file_loc(m), "initializer '%s' is given twice", x->name);
      bad = 1;
    }
    x->k = OV_INIT;
    x->init = t;
  }
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *p = gp->node[i];
    for (size_t j = 0; j < p->n_output; j++) {
      if (!p->output[j] || !*p->output[j]) continue;
      OnnxVal *x = intern(m, p->output[j]);
      if (!x) return -1;
      if (x->producer >= 0 || x->k == OV_INIT) {
        diag_error(m->d, file_loc(m), "node %zu '%s' (%s): its output '%s' is already %s", i, p->name ? p->name : "",
                   p->op_type ? p->op_type : "", x->name,
                   x->k == OV_INIT ? "an initializer" : "the output of an earlier node");
        bad = 1;
        continue;
      }
      x->producer = (int)i;
    }
  }
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *p = gp->node[i];
    for (size_t j = 0; j < p->n_input; j++) {
      OnnxVal *x = p->input[j] && *p->input[j] ? find(m, p->input[j]) : NULL;
      if (x) x->uses++, x->user = (int)i;
    }
  }
  for (size_t i = 0; i < gp->n_output; i++) {
    OnnxVal *x = gp->output[i]->name ? find(m, gp->output[i]->name) : NULL;
    if (x) x->graph_output = 1;
  }
  return bad ? -1 : 0;
}

/* A node that reads no activation and whose outputs no node reads (a
 * training-mode export's num_batches_tracked + 1, say): it cannot change
 * the network, and is left out. */
static int dead_weight_arithmetic(Imp *m, const Onnx__NodeProto *p) {
  for (size_t j = 0; j < p->n_output; j++) {
    OnnxVal *o = p->output[j] && *p->output[j] ? find(m, p->output[j]) : NULL;
    if (o && o->uses) return 0;
  }
  for (size_t j = 0; j < p->n_input; j++) {
    OnnxVal *x = p->input[j] && *p->input[j] ? find(m, p->input[j]) : NULL;
    if (!x || (x->k != OV_INIT && x->k != OV_CONST && x->k != OV_FLOATCONST)) return 0;
  }
  return 1;
}

/* The entry of node p's op, or NULL when netc does not know it (or its domain). */
static const OpEntry *op_entry(const Onnx__NodeProto *p) {
  int ai_onnx = !p->domain || !*p->domain || strcmp(p->domain, "ai.onnx") == 0;
  for (size_t k = 0; ai_onnx && p->op_type && k < sizeof OPS / sizeof OPS[0]; k++)
    if (strcmp(OPS[k].name, p->op_type) == 0) return &OPS[k];
  return NULL;
}

/* m->scope_name: the module path of each node that becomes a layer, as
 * its name (onnx_scope.h); folded shape arithmetic, a MatMul's absorbed
 * Add and dead weight arithmetic take no part. */
static int scope_names(Imp *m) {
  size_t n = m->gp->n_node;
  OnnxScope *s = arena_alloc(m->a, sizeof *s * (n ? n : 1));
  if (!s || !(m->scope_name = arena_alloc(m->a, sizeof *m->scope_name * (n ? n : 1)))) return -1;
  int *absorbed = arena_alloc(m->a, sizeof(int) * (n ? n : 1));
  if (!absorbed) return -1;
  memset(absorbed, 0, sizeof(int) * (n ? n : 1));
  for (size_t i = 0; i < n; i++) {
    const Onnx__NodeProto *p = m->gp->node[i];
    size_t b_in;
    int add = p->op_type && strcmp(p->op_type, "MatMul") == 0 ? bias_add(m, (int)i, &b_in) : -1;
    if (add >= 0) absorbed[add] = 1;
  }
  for (size_t i = 0; i < n; i++) {
    const Onnx__NodeProto *p = m->gp->node[i];
    const OpEntry *e = op_entry(p);
    int layer = p->op_type && !absorbed[i] && !dead_weight_arithmetic(m, p) && !(e && e->folded);
    s[i] = (OnnxScope){0};
    if (layer && onnx_scope_of(m->a, p->name, name_scopes(m, p), p->op_type, &s[i])) return -1;
  }
  return onnx_scope_names(m->a, s, (int)n, m->scope_name);
}

static void lower_nodes(Imp *m) {
  const Onnx__GraphProto *gp = m->gp;
  if (scope_names(m)) {
    diag_error(m->d, file_loc(m), "out of memory");
    return;
  }
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *p = gp->node[i];
    const char *op = p->op_type ? p->op_type : "";
    Node n = {p, (int)i, arena_printf(m->a, "node %zu '%s' (%s)", i, p->name ? p->name : "", op)};
    if (!n.what || m->absorbed[i] || dead_weight_arithmetic(m, p)) continue;
    const OpEntry *e = op_entry(p);
    int ai_onnx = !p->domain || !*p->domain || strcmp(p->domain, "ai.onnx") == 0;
    int failed;
    if (!e) {
      node_error(m, &n, "op %s%s%s is not supported (docs/onnx.md lists what is)", ai_onnx ? "" : p->domain,
                 ai_onnx ? "" : "::", op);
      failed = 1;
    } else {
      failed = check_attrs(m, &n, e->attrs) || e->fn(m, &n);
    }
    if (failed)
      for (size_t j = 0; j < p->n_output; j++) {
        OnnxVal *o = out(m, &n, j);
        if (o) o->k = OV_BAD;
      }
  }
}

/* The graph's output, the logits [N, classes], gets the loss. */
static int add_loss(Imp *m) {
  const Onnx__GraphProto *gp = m->gp;
  OnnxVal *x = NULL;
  const char *xname = "";
  int nout = 0;
  for (size_t i = 0; i < gp->n_output; i++) {
    OnnxVal *o = gp->output[i]->name ? find(m, gp->output[i]->name) : NULL;
    /* BatchNormalization's statistics, dead weight arithmetic's results */
    if (o && o->k == OV_MISSING && o->producer >= 0) continue;
    nout++;
    x = o;
    xname = gp->output[i]->name ? gp->output[i]->name : "";
  }
  if (nout != 1) {
    diag_error(m->d, file_loc(m), "the graph has %d outputs; netc takes one, the logits", nout);
    return -1;
  }
  if (!x || x->k != OV_ACT || m->g->val[x->id].type.rank != 2) {
    diag_error(m->d, file_loc(m), "the graph's output '%s' must be the logits, [N, classes], made by a node", xname);
    return -1;
  }
  const IrAttr *sm = ir_train_find(m->g, "label_smoothing");
  int ins[2] = {x->id, m->label};
  IrAttr at[1] = {real("smoothing", sm ? sm->f : 0.0)};
  static const Onnx__NodeProto none = ONNX__NODE_PROTO__INIT;
  Node n = {.p = &none, .index = (int)gp->n_node, .what = "the loss"};
  int before = m->g->nnode;
  if (emit(m, &n, IR_OP_SOFTMAX_CE, "loss", ins, 2, at, 1) || m->g->nnode == before) return -1;
  ir_output_add(m->g, m->g->node[before].out[0]);
  ir_output_add(m->g, x->id);
  return 0;
}

int onnx_import_available(void) { return 1; }

/* Whether Conv p looks like a batch norm folded into it: the TorchScript
 * exporter in eval mode names the weight onnx::Conv_NNN, the dynamo
 * exporter (torch.onnx.export's default since torch 2.9, in either mode)
 * names the bias it makes W_bias beside the weight W. */
static int folded_conv(const Onnx__NodeProto *p) {
  if (!p->op_type || strcmp(p->op_type, "Conv") != 0 || p->n_input < 3 || !p->input[1] || !p->input[2]) return 0;
  size_t w = strlen(p->input[1]);
  return strncmp(p->input[1], "onnx::Conv_", 11) == 0 ||
         (strncmp(p->input[2], p->input[1], w) == 0 && strcmp(p->input[2] + w, "_bias") == 0);
}

/* A graph with folded batch norms is a different network to train: said
 * once. */
static void warn_folded_batchnorm(Imp *m) {
  int nbn = 0, folded = 0;
  for (size_t i = 0; i < m->gp->n_node; i++) {
    const Onnx__NodeProto *p = m->gp->node[i];
    nbn += p->op_type && strcmp(p->op_type, "BatchNormalization") == 0;
    folded += folded_conv(p);
  }
  if (!nbn && folded)
    diag_warning(m->d, file_loc(m),
                 "%d convolution%s weights named onnx::Conv_* or biases named WEIGHT_bias, and the graph has no "
                 "BatchNormalization: the model looks exported with its batch norms folded into the convolutions "
                 "(an eval-mode or dynamo export); it runs inference as exported, but to train it as defined, "
                 "export with dynamo=False and training=torch.onnx.TrainingMode.TRAINING (docs/onnx.md)",
                 folded, folded == 1 ? " has" : "s have");
}

/* --weights-out: the values of every parameter and state, once the graph is made. */
static void write_weights(Imp *m, const char *out) {
  if (m->missing_data) {
    for (int i = 0; i < m->nw; i++)
      if (!m->w[i].f && !m->w[i].raw)
        diag_error(m->d, file_loc(m),
                   "--weights-out: initializer '%s' has no values (no raw_data, float_data or "
                   "external data)",
                   m->w[i].name);
    return;
  }
  char err[512];
  if (onnx_weights_write(out, m->w, m->nw, err, sizeof err)) diag_error(m->d, file_loc(m), "--weights-out: %s", err);
}

IrGraph *onnx_import(Arena *a, Diag *d, const char *path, const void *bytes, size_t len, const AstTrain *train,
                     const char *weights_out) {
  int before = d->nerrors;
  Imp m = {.a = a, .d = d, .path = path, .ext = {.model_path = path}};
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, bytes);
  if (!mp) {
    diag_error(d, file_loc(&m), "not an ONNX model: the protobuf does not parse (truncated, or not a ModelProto)");
    return NULL;
  }
  m.gp = mp->graph;
  if (!m.gp) {
    diag_error(d, file_loc(&m), "the model has no graph");
  } else if (m.gp->n_node > MAX_NODES) {
    diag_error(d, file_loc(&m), "the graph has %zu nodes, more than netc takes (%d)", m.gp->n_node, MAX_NODES);
  } else if (check_opset(&m, mp) == 0) {
    m.g = ir_graph_new(a, m.gp->name && *m.gp->name ? ir_name(&m, m.gp->name) : "onnx");
    m.absorbed = arena_alloc(a, sizeof(int) * (m.gp->n_node + 1));
    if (m.g && m.absorbed) {
      memset(m.absorbed, 0, sizeof(int) * (m.gp->n_node + 1));
      /* the train section first: the loss reads label_smoothing */
      if (lower_train_section(a, d, m.g, train) == 0 && scan(&m) == 0 && image_input(&m) == 0) {
        lower_nodes(&m);
        if (d->nerrors == before) add_loss(&m);
        if (d->nerrors == before) warn_folded_batchnorm(&m);
        if (d->nerrors == before && weights_out) write_weights(&m, weights_out);
      }
    }
  }
  onnx__model_proto__free_unpacked(mp, NULL);
  onnx_external_close(&m.ext);
  if (a->oom && d->nerrors == before) diag_error(d, file_loc(&m), "out of memory");
  return d->nerrors == before ? m.g : NULL;
}

#endif
