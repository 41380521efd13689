/* ir_verify.c - checks that a graph is well formed; run after every pass.
 *
 * Values: a valid kind, dtype and layout; rank <= IR_MAX_RANK; every dim
 * in 1..INT32_MAX except dim[0], which may be N; layouts other than row
 * only at rank 4; inputs, params and state named [A-Za-z0-9_.]+ with no
 * producer, param/state names unique (they share the @ namespace) and input
 * names unique; every activation defined by exactly one node, the one its
 * def field names.  Nodes: a known op with its table arity; inputs that
 * exist and are defined by an earlier node (or are inputs/params/state);
 * attribute keys exactly the op table's, in order, optionally followed by
 * `precision` (a dtype), `math`, (conv2d_bn_train; a quantized conv2d or
 * conv2d_bn; maxpool_bn_relu_infer; relayout) `y_dtype`,
 * (batchnorm_relu_bwd) `dz_dtype` and (conv2d_bwd_weight) `hold`; well-formed attribute values; output types equal
 * to what ir_infer() computes.  The optimizer section (IrGraph.opt_first,
 * -1 or 0..nnode): every node from opt_first on is an optimizer op, or an
 * IR_SEC_EITHER op (add) that reads only results of the section; no node
 * before it is an optimizer op; a node before it that reads a result of
 * the section (which topological order already forbids) is told so.
 * Graph outputs and the train section are checked too.  Every problem is
 * reported, with the node's SrcLoc, its id as the dump prints it (%N,
 * numbered like ir_print.c) and layer name:
 *
 *   net.net:3:9: error: after pass 'fuse': conv2d %5 (conv1): output
 *     f32[N,64,56,56] NCHW, expected f32[N,64,112,112] NCHW
 *
 * ir_infer() is called only for nodes whose structure is sound (arity,
 * input ids and input types all valid), so it never sees garbage.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

enum { DIM_MAX = INT32_MAX }; /* keeps size arithmetic in ir_infer far from int64 overflow */

typedef struct Verifier {
  const IrGraph *g;
  Diag *d;
  const char *pass;
  int *num;      /* print number of each value (as ir_print.c numbers them), -1 when none */
  int *ndef;     /* how many node outputs name each value */
  char *type_ok; /* value's type passed the checks */
  int nerr;
} Verifier;

static int valid_id(const IrGraph *g, int v) { return v >= 0 && v < g->nval; }

/* Reports one problem; the prefix names the pass and the node or value. */
static void report(Verifier *vf, SrcLoc loc, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void report(Verifier *vf, SrcLoc loc, const char *what, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (vf->pass)
    diag_error(vf->d, loc, "after pass '%s': %s: %s", vf->pass, what, msg);
  else
    diag_error(vf->d, loc, "%s: %s", what, msg);
  vf->nerr++;
}

/* Inputs in value order, then node results in node order (as ir_print.c). */
static void number_values(Verifier *vf) {
  const IrGraph *g = vf->g;
  int next = 0;
  for (int v = 0; v < g->nval; v++) vf->num[v] = g->val[v].kind == IR_VAL_INPUT ? next++ : -1;
  for (int i = 0; i < g->nnode; i++)
    for (int k = 0; g->node[i].out && k < g->node[i].nout; k++) {
      int v = g->node[i].out[k];
      if (valid_id(g, v) && vf->num[v] < 0 && g->val[v].kind == IR_VAL_ACT) vf->num[v] = next++;
    }
}

/* "%5", "@conv1.weight" or "%?17" (internal id 17, unnumbered) into buf. */
static const char *ref_str(const Verifier *vf, int v, char *buf, size_t len) {
  if (!valid_id(vf->g, v))
    snprintf(buf, len, "%%?%d", v);
  else if (vf->g->val[v].kind == IR_VAL_PARAM || vf->g->val[v].kind == IR_VAL_STATE)
    snprintf(buf, len, "@%s", vf->g->val[v].name ? vf->g->val[v].name : "?");
  else if (vf->num[v] >= 0)
    snprintf(buf, len, "%%%d", vf->num[v]);
  else
    snprintf(buf, len, "%%?%d", v);
  return buf;
}

static int name_ok(const char *s) {
  if (!s || !*s) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '.'))
      return 0;
  return 1;
}

static int str_ok(const char *s) {
  if (!s) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' ||
          *s == '-'))
      return 0;
  return 1;
}

/* Type rules common to every value; returns the number of problems. */
static int check_type(Verifier *vf, const IrType *t, const char *what) {
  char b[96];
  int before = vf->nerr;
  SrcLoc none = {0};
  if ((unsigned)t->dtype >= IR_DT_COUNT) report(vf, none, what, "bad dtype %d", (int)t->dtype);
  if ((unsigned)t->layout >= IR_LAYOUT_COUNT) report(vf, none, what, "bad layout %d", (int)t->layout);
  if (t->rank < 0 || t->rank > IR_MAX_RANK) { /* nothing below may print it */
    report(vf, none, what, "rank %d is not in 0..%d", t->rank, IR_MAX_RANK);
    return vf->nerr - before;
  }
  for (int i = 0; i < t->rank; i++)
    if (!(t->dim[i] == IR_DIM_N && i == 0) && (t->dim[i] < 1 || t->dim[i] > DIM_MAX))
      report(vf, none, what, "%s has dim[%d] = %" PRId64 " (dims are 1..%d; only dim[0] may be N)",
             ir_type_str(t, b, sizeof b), i, t->dim[i], DIM_MAX);
  if (t->layout != IR_LAYOUT_ROW && (unsigned)t->layout < IR_LAYOUT_COUNT && t->rank != 4)
    report(vf, none, what, "layout %s needs rank 4, type is %s", ir_layout_name(t->layout),
           ir_type_str(t, b, sizeof b));
  return vf->nerr - before;
}

static const char *kind_word(IrValueKind k) {
  return k == IR_VAL_INPUT ? "input" : k == IR_VAL_PARAM ? "param" : k == IR_VAL_STATE ? "state" : "value";
}

/* A named value in its namespace (inputs; params and state together). */
typedef struct Named {
  int space, index;
  const char *name;
} Named;

static int by_space_name_index(const void *pa, const void *pb) {
  const Named *a = pa, *b = pb;
  if (a->space != b->space) return a->space - b->space;
  int c = strcmp(a->name, b->name);
  return c ? c : a->index - b->index;
}

/* For each value, the first value before it with its name in its
 * namespace, else -1: sorted, in O(n log n) (a generated graph may hold
 * tens of thousands of parameters).  NULL when out of memory. */
static int *first_of_name(const IrGraph *g) {
  size_t nv = (size_t)g->nval + 1;
  int *first = malloc(nv * sizeof *first);
  Named *all = malloc(nv * sizeof *all);
  if (!first || !all) {
    free(first), free(all);
    return NULL;
  }
  int n = 0;
  for (int v = 0; v < g->nval; v++) {
    first[v] = -1;
    IrValueKind k = g->val[v].kind;
    if (g->val[v].name && (k == IR_VAL_INPUT || k == IR_VAL_PARAM || k == IR_VAL_STATE))
      all[n++] = (Named){k == IR_VAL_INPUT ? 0 : 1, v, g->val[v].name};
  }
  qsort(all, (size_t)n, sizeof *all, by_space_name_index);
  for (int i = 1, head = 0; i < n; i++) {
    if (all[i].space != all[head].space || strcmp(all[i].name, all[head].name))
      head = i;
    else
      first[all[i].index] = all[head].index;
  }
  free(all);
  return first;
}

static void check_values(Verifier *vf) {
  const IrGraph *g = vf->g;
  SrcLoc none = {0};
  char what[160], b[96];
  int *first = first_of_name(g);
  if (!first) {
    report(vf, none, "graph", "out of memory");
    return;
  }
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    ref_str(vf, v, b, sizeof b);
    snprintf(what, sizeof what, "%s %s", kind_word(val->kind), val->kind == IR_VAL_INPUT && val->name ? val->name : b);
    if ((unsigned)val->kind > IR_VAL_STATE) {
      report(vf, none, what, "bad value kind %d", (int)val->kind);
      continue;
    }
    vf->type_ok[v] = check_type(vf, &val->type, what) == 0;
    if (val->kind == IR_VAL_ACT) {
      if (vf->ndef[v] == 0)
        report(vf, none, what, "no node defines it");
      else if (vf->ndef[v] > 1)
        report(vf, none, what, "defined by %d node outputs, must be one", vf->ndef[v]);
      continue;
    }
    if (!name_ok(val->name)) report(vf, none, what, "name '%s' is not [A-Za-z0-9_.]+", val->name ? val->name : "");
    if (val->def != -1 || vf->ndef[v])
      report(vf, none, what, "has a producing node, but a %s must have none", kind_word(val->kind));
    int u = first[v];
    if (u >= 0)
      report(vf, none, what, "name '%s' is already used by %s %s", val->name, kind_word(g->val[u].kind),
             ref_str(vf, u, b, sizeof b));
  }
  free(first);
}

/* Value checks that do not depend on the kind of attribute's owner. */
static void check_attr_value(Verifier *vf, SrcLoc loc, const char *what, const IrAttr *a) {
  const char *key = a->key ? a->key : "?";
  if (!name_ok(a->key)) report(vf, loc, what, "attribute key '%s' is not [A-Za-z0-9_.]+", key);
  switch (a->kind) {
  case IR_ATTR_INT:
  case IR_ATTR_FLOAT: break;
  case IR_ATTR_INTS:
    if (a->n < 1 || a->n > IR_MAX_INTS)
      report(vf, loc, what, "attribute %s has %d integers (1..%d)", key, a->n, IR_MAX_INTS);
    break;
  case IR_ATTR_DTYPE:
    if (a->i[0] < 0 || a->i[0] >= IR_DT_COUNT) report(vf, loc, what, "attribute %s is not a dtype", key);
    break;
  case IR_ATTR_STR:
    if (!str_ok(a->s)) report(vf, loc, what, "attribute %s: string may hold only [A-Za-z0-9_.-]", key);
    break;
  default: report(vf, loc, what, "attribute %s has bad kind %d", key, (int)a->kind);
  }
}

/* Keys exactly as the op table lists them, then optionally `precision`,
 * then optionally `math` ("tf32": an f32 convolution may multiply in TF32
 * on tensor cores), then for conv2d_bn_train optionally `y_dtype` (its
 * normalized output's dtype, when not z's; on a conv2d or conv2d_bn of
 * quantized values the dequantized result's, when not f32; on a
 * maxpool_bn_relu_infer the pooled result's), for batchnorm_relu_bwd[_win]
 * optionally `dz_dtype` (likewise), for a cast or relayout optionally `once`
 * (the hoist pass: of parameters or state only) and for conv2d_bwd_weight
 * optionally `hold` (the overlap pass); 0 when they are not. */
static int check_attr_keys(Verifier *vf, const IrNode *n, const IrOpInfo *info, const char *what) {
  const char *keys = info->attrs ? info->attrs : "";
  const char *k = keys;
  int ok = 1, i = 0;
  for (; i < n->nattr && ok; i++) {
    while (*k == ' ') k++;
    if (!*k) break;
    size_t len = strcspn(k, " ");
    const char *have = n->attr[i].key ? n->attr[i].key : "";
    ok = strlen(have) == len && memcmp(have, k, len) == 0;
    k += len;
  }
  while (*k == ' ') k++;
  if (ok && *k) ok = 0; /* keys missing at the end */
  if (ok && i < n->nattr && n->attr[i].key && strcmp(n->attr[i].key, "precision") == 0) {
    if (n->attr[i].kind != IR_ATTR_DTYPE) report(vf, n->loc, what, "attribute precision must be a dtype");
    i++;
  }
  if (ok && i < n->nattr && n->attr[i].key && strcmp(n->attr[i].key, "math") == 0) {
    if (n->attr[i].kind != IR_ATTR_STR || strcmp(n->attr[i].s, "tf32") != 0)
      report(vf, n->loc, what, "attribute math must be \"tf32\"");
    i++;
  }
  int y_op = n->op == IR_OP_CONV2D_BN_TRAIN || n->op == IR_OP_CONV2D || n->op == IR_OP_CONV2D_BN ||
             n->op == IR_OP_MAXPOOL_BN_RELU_INFER || n->op == IR_OP_RELAYOUT;
  if (ok && i < n->nattr && y_op && n->attr[i].key && strcmp(n->attr[i].key, "y_dtype") == 0) {
    i++; /* its value is ir_infer's to check, and y_scale's after it (an i8 y_dtype) */
    if (i < n->nattr && ir_node_rescales(n) && n->attr[i].key && strcmp(n->attr[i].key, "y_scale") == 0) i++;
  }
  int dz_op = n->op == IR_OP_BATCHNORM_RELU_BWD || n->op == IR_OP_BATCHNORM_RELU_BWD_WIN;
  if (ok && i < n->nattr && dz_op && n->attr[i].key && strcmp(n->attr[i].key, "dz_dtype") == 0) i++; /* likewise */
  if (ok && i < n->nattr && n->op == IR_OP_CAST && n->attr[i].key &&
      (strcmp(n->attr[i].key, "scale") == 0 || strcmp(n->attr[i].key, "axis") == 0))
    i++; /* an i8 cast's calibrated scale or per-channel axis: ir_infer checks them */
  int copy_op = n->op == IR_OP_CAST || n->op == IR_OP_RELAYOUT;
  if (ok && i < n->nattr && copy_op && n->attr[i].key && strcmp(n->attr[i].key, "once") == 0) {
    if (n->attr[i].kind != IR_ATTR_INT || n->attr[i].i[0] != 1) report(vf, n->loc, what, "attribute once must be 1");
    if (vf->g->opt_first >= 0 || n->nin != 1)
      report(vf, n->loc, what, "once is for a node of one input in a graph without an optimizer section");
    for (int a = 0; a < n->nin; a++) {
      if (!ir_value_is_weight(vf->g, n->in[a]))
        report(vf, n->loc, what, "%s marked once reads input %d, which is not a parameter or state",
               n->op == IR_OP_CAST ? "a cast" : "a relayout", a);
    }
    i++;
  }
  if (ok && i < n->nattr && n->op == IR_OP_CONV2D_BWD_WEIGHT && n->attr[i].key && strcmp(n->attr[i].key, "hold") == 0) {
    if (n->attr[i].kind != IR_ATTR_INT || n->attr[i].i[0] < 1) report(vf, n->loc, what, "attribute hold must be >= 1");
    i++;
  }
  if (ok && i < n->nattr) ok = 0;
  if (ok) return 1;
  char have[256] = "";
  size_t o = 0;
  for (int j = 0; j < n->nattr && o < sizeof have; j++)
    o += (size_t)snprintf(have + o, sizeof have - o, "%s%s", j ? " " : "", n->attr[j].key ? n->attr[j].key : "?");
  report(vf, n->loc, what, "attributes {%s}, expected {%s} (optionally followed by precision, then math%s)", have, keys,
         y_op                               ? ", then y_dtype [y_scale]"
         : n->op == IR_OP_CONV2D_BWD_WEIGHT ? ", then hold"
         : dz_op                            ? ", then dz_dtype"
         : n->op == IR_OP_CAST              ? ", then scale or axis, then once"
         : n->op == IR_OP_RELAYOUT          ? ", then once"
                                            : "");
  return 0;
}

/* Calls ir_infer and compares what it computes with the node's output types.
 * A node whose type is wrong marks its outputs bad, so that its consumers
 * are not checked against it: one mistake, one message. */
static void check_node_types(Verifier *vf, const IrNode *n, const char *what) {
  const IrGraph *g = vf->g;
  int cap = n->nout > 0 ? n->nout : 1;
  IrType *want = calloc((size_t)cap, sizeof *want);
  char err[256] = "", b1[96], b2[96];
  if (!want) {
    report(vf, n->loc, what, "out of memory");
    return;
  }
  if (ir_infer(g, n, want, err, sizeof err) != 0) {
    report(vf, n->loc, what, "%s", err[0] ? err : "ir_infer failed");
    for (int k = 0; k < n->nout; k++) vf->type_ok[n->out[k]] = 0;
  } else {
    for (int k = 0; k < n->nout; k++) {
      const IrType *have = &g->val[n->out[k]].type;
      if (ir_type_equal(have, &want[k])) continue;
      char idx[16] = "";
      if (n->nout > 1) snprintf(idx, sizeof idx, " %d", k);
      report(vf, n->loc, what, "output%s %s, expected %s", idx, ir_type_str(have, b1, sizeof b1),
             ir_type_str(&want[k], b2, sizeof b2));
      vf->type_ok[n->out[k]] = 0;
    }
  }
  free(want);
}

/* Node i on its side of the optimizer section's start (IrOpSection). */
static void check_section(Verifier *vf, int i, const IrOpInfo *info, const char *what) {
  const IrGraph *g = vf->g;
  const IrNode *n = &g->node[i];
  int first = g->opt_first;
  char b[64];
  if (first < -1 || first > g->nnode) return; /* reported with the graph */
  if (first < 0 || i < first) {
    if (info->section != IR_SEC_OPTIMIZER) return;
    if (first < 0)
      report(vf, n->loc, what, "an optimizer op, but the graph has no optimizer section (no 'optimizer:' line)");
    else
      report(vf, n->loc, what, "an optimizer op before the optimizer section, which starts at node #%d", first);
    return;
  }
  if (info->section == IR_SEC_STEP) {
    report(vf, n->loc, what, "not an optimizer op, but in the optimizer section (from node #%d)", first);
    return;
  }
  for (int k = 0; info->section == IR_SEC_EITHER && n->in && k < n->nin; k++) {
    int v = n->in[k];
    if (!valid_id(g, v) || (g->val[v].kind == IR_VAL_ACT && g->val[v].def >= first)) continue;
    report(vf, n->loc, what, "in the optimizer section, input %d %s is not a result of the section (from node #%d)", k,
           ref_str(vf, v, b, sizeof b), first);
  }
}

static void check_node(Verifier *vf, int i) {
  const IrGraph *g = vf->g;
  const IrNode *n = &g->node[i];
  const IrOpInfo *info = ir_op_info(n->op);
  char what[192], b[64];
  int sound = 1; /* structure good enough to run ir_infer */
  const char *opname = info && info->name ? info->name : "?";
  if (n->nout > 0 && n->out)
    snprintf(what, sizeof what, "%s %s", opname, ref_str(vf, n->out[0], b, sizeof b));
  else
    snprintf(what, sizeof what, "%s #%d", opname, i);
  if (n->name) {
    size_t o = strlen(what);
    snprintf(what + o, sizeof what - o, " (%s)", n->name);
  }
  if (!info || !info->name) {
    report(vf, n->loc, what, "unknown op %d", (int)n->op);
    return;
  }
  if (n->name && !name_ok(n->name)) report(vf, n->loc, what, "layer name is not [A-Za-z0-9_.]+");
  if (n->nin < info->min_in || n->nin > info->max_in || (n->nin > 0 && !n->in)) {
    if (info->min_in == info->max_in)
      report(vf, n->loc, what, "takes %d inputs, has %d", info->min_in, n->nin);
    else
      report(vf, n->loc, what, "takes %d to %d inputs, has %d", info->min_in, info->max_in, n->nin);
    sound = 0;
  }
  if ((info->nout >= 0 && n->nout != info->nout) || n->nout < 0 || (n->nout > 0 && !n->out)) {
    report(vf, n->loc, what, "has %d outputs, %s has %d", n->nout, info->name, info->nout);
    sound = 0;
  }
  for (int k = 0; n->in && k < n->nin; k++) {
    int v = n->in[k];
    if (!valid_id(g, v)) {
      report(vf, n->loc, what, "input %d is %d, not a value", k, v);
      sound = 0;
      continue;
    }
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT && (val->def < 0 || val->def >= i)) {
      ref_str(vf, v, b, sizeof b);
      if (val->def == i)
        report(vf, n->loc, what, "input %d is its own output %s", k, b);
      else if (i < g->opt_first && val->def >= g->opt_first && val->def < g->nnode)
        report(vf, n->loc, what, "input %d %s is made by the optimizer section (node #%d), which runs after this node",
               k, b, val->def);
      else if (val->def > i && val->def < g->nnode)
        report(vf, n->loc, what, "input %d %s is used before its definition (node #%d)", k, b, val->def);
      else
        report(vf, n->loc, what, "input %d %s is not defined by any node", k, b);
      sound = 0;
    }
    if (!vf->type_ok[v]) sound = 0; /* already reported with the value */
  }
  for (int k = 0; n->out && k < n->nout; k++) {
    int v = n->out[k];
    if (!valid_id(g, v)) {
      report(vf, n->loc, what, "output %d is %d, not a value", k, v);
      sound = 0;
      continue;
    }
    const IrValue *val = &g->val[v];
    if (val->kind != IR_VAL_ACT) {
      report(vf, n->loc, what, "output %d %s is a %s, not an activation", k, ref_str(vf, v, b, sizeof b),
             kind_word(val->kind));
      sound = 0;
      vf->type_ok[v] = 0; /* its consumers would only repeat the problem */
    } else if (val->def != i)
      report(vf, n->loc, what, "output %d %s records node #%d as its producer", k, ref_str(vf, v, b, sizeof b),
             val->def);
    if (!vf->type_ok[v]) sound = 0;
  }
  if (n->nattr < 0 || (n->nattr > 0 && !n->attr)) {
    report(vf, n->loc, what, "bad attribute list");
    return;
  }
  check_section(vf, i, info, what);
  for (int k = 0; k < n->nattr; k++) check_attr_value(vf, n->loc, what, &n->attr[k]);
  if (!check_attr_keys(vf, n, info, what)) sound = 0;
  if (sound) check_node_types(vf, n, what);
}

static void check_graph(Verifier *vf) {
  const IrGraph *g = vf->g;
  SrcLoc none = {0};
  if (!name_ok(g->name)) report(vf, none, "graph", "name '%s' is not [A-Za-z0-9_.]+", g->name ? g->name : "");
  if (g->opt_first < -1 || g->opt_first > g->nnode)
    report(vf, none, "graph", "the optimizer section starts at node #%d, not in 0..%d (or -1: none)", g->opt_first,
           g->nnode);
  for (int i = 0; i < g->noutput; i++)
    if (!valid_id(g, g->output[i])) report(vf, none, "graph", "output %d is %d, not a value", i, g->output[i]);
  for (int i = 0; i < g->ntrain; i++) {
    check_attr_value(vf, none, "train", &g->train[i]);
    for (int j = 0; j < i; j++)
      if (g->train[i].key && g->train[j].key && strcmp(g->train[i].key, g->train[j].key) == 0)
        report(vf, none, "train", "key '%s' appears twice", g->train[i].key);
  }
}

int ir_verify(const IrGraph *g, Diag *d, const char *after_pass) {
  Verifier vf = {g, d, after_pass, NULL, NULL, NULL, 0};
  size_t nv = (size_t)(g->nval > 0 ? g->nval : 0) + 1;
  vf.num = malloc(nv * sizeof *vf.num);
  vf.ndef = calloc(nv, sizeof *vf.ndef);
  vf.type_ok = calloc(nv, 1);
  if (!vf.num || !vf.ndef || !vf.type_ok) {
    SrcLoc none = {0};
    report(&vf, none, "graph", "out of memory");
  } else {
    number_values(&vf);
    for (int i = 0; i < g->nnode; i++)
      for (int k = 0; g->node[i].out && k < g->node[i].nout; k++)
        if (valid_id(g, g->node[i].out[k])) vf.ndef[g->node[i].out[k]]++;
    check_graph(&vf);
    check_values(&vf);
    for (int i = 0; i < g->nnode; i++) check_node(&vf, i);
  }
  free(vf.num);
  free(vf.ndef);
  free(vf.type_ok);
  return vf.nerr;
}
