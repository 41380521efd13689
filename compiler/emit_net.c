/* emit_net.c - the forward IR written as a .net file (emit_net.h).
 *
 * One line per node, in node order, each `TARGET = op(args)`: TARGET is the
 * layer's IR name, so lowering names the layer and its parameters as they
 * were; where that name cannot be a variable (it is an input's name, or only
 * digits, as nn.Sequential's `0`), a fresh variable and `as NAME` (or
 * `as [0]`) name the layer instead.  Arguments equal to the language's
 * defaults are left out (docs/language.md's op table), so the text reads as
 * a person would write it:
 *
 *   %6 = conv2d(%5, @layer1.0.conv1.weight) {k=1x1 s=1x1 p=0x0 d=1x1 groups=1} : f32[N,64,56,56] NCHW  # layer1.0.conv1
 * becomes
 *   layer1.0.conv1 = conv2d(maxpool_MaxPool, 64, k=1, bias=false)
 *
 * Where the graph repeats, a run of layers under one numbered prefix
 * (layer1.0.conv1 ... layer1.0.relu) becomes a call of a block written once,
 * and the calls layer1.0, layer1.1, ... a stage with a loop (the blocks
 * section below says when); --emit-net-plain, and a graph that does not
 * repeat, is the lines above only.
 *
 * The train section is rebuilt from the graph's train attributes, in their
 * order (lower.c flattens `optimizer = sgd(lr=0.1, ...)` to optimizer="sgd"
 * lr=0.1 ...; this reverses it). */
#define _GNU_SOURCE /* open_memstream */
#include "emit_net.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"

static int is_alpha_(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_word(char c) { return is_alpha_(c) || is_digit(c); }

static int is_keyword(const char *s, size_t n) {
  static const char *const KW[] = {"block", "network", "input", "train", "if",   "else", "for", "in",  "return", "as",
                                   "true",  "false",   "f32",   "f16",   "bf16", "i8",   "i32", "i64", "f8"};
  for (size_t i = 0; i < sizeof KW / sizeof KW[0]; i++)
    if (strlen(KW[i]) == n && strncmp(KW[i], s, n) == 0) return 1;
  return 0;
}

/* An IDENT of the language: [A-Za-z_][A-Za-z0-9_]*, no keyword, at most 256 bytes. */
static int is_ident(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 256 || !is_alpha_(s[0])) return 0;
  for (size_t i = 1; i < n; i++)
    if (!is_word(s[i])) return 0;
  return !is_keyword(s, n);
}

/* A NAME (grammar/net.l): IDENT ('.' [A-Za-z0-9_]+)*, not a keyword alone. */
static int is_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 256 || !is_alpha_(s[0])) return 0;
  size_t first = 0;
  while (first < n && is_word(s[first])) first++;
  if (first == n) return !is_keyword(s, n);
  for (size_t i = first; i < n; i++) {
    if (s[i] == '.') {
      if (i + 1 == n || s[i + 1] == '.') return 0;
    } else if (!is_word(s[i])) {
      return 0;
    }
  }
  return 1;
}

static int all_digits(const char *s) {
  if (!*s || strlen(s) > 18) return 0;
  for (; *s; s++)
    if (!is_digit(*s)) return 0;
  return 1;
}

/* name as an IDENT: other bytes '_', a leading digit behind '_', a keyword
 * with '_' after it; the name itself when it is one. */
static const char *as_ident(Arena *a, const char *name) {
  if (is_ident(name)) return name;
  char *r = arena_printf(a, "%s%s_", name && is_digit(name[0]) ? "_" : "", name ? name : "");
  if (!r) return NULL;
  size_t n = strlen(r);
  for (size_t i = 0; i < n; i++)
    if (!is_word(r[i])) r[i] = '_';
  /* the trailing '_' is only needed for a keyword (or an empty name) */
  if (n > 1) {
    r[n - 1] = 0;
    if (!is_ident(r)) r[n - 1] = '_';
  }
  return r;
}

/* The shortest %g form that reads back as v, always with a '.' or an
 * exponent so the lexer takes it as a float. */
static const char *fmt_float(char *buf, size_t cap, double v) {
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, cap, "%.*g", p, v);
    if (strtod(buf, NULL) == v) break;
  }
  if (!strpbrk(buf, ".e")) strncat(buf, ".0", cap - strlen(buf) - 1);
  return buf;
}

/* `k=3` or `k=(3, 1)` (a pair attribute), left out when equal to dflt in both. */
static void put_pair(FILE *f, const IrNode *n, const char *key, const char *arg, int64_t d0, int64_t d1) {
  const IrAttr *a = ir_attr_find(n, key);
  if (!a || a->n != 2 || (a->i[0] == d0 && a->i[1] == d1)) return;
  if (a->i[0] == a->i[1])
    fprintf(f, ", %s=%" PRId64, arg, a->i[0]);
  else
    fprintf(f, ", %s=(%" PRId64 ", %" PRId64 ")", arg, a->i[0], a->i[1]);
}

typedef struct Emit {
  const IrGraph *g;
  Diag *d;
  Arena *a;
  const char **var;        /* per value: its variable in the text */
  const char **input_name; /* per value: an input's name in the text */
  int explicit_sp;         /* conv2d's s= and p= always written, between \2 and \3 (a block body) */
  int nerr;
} Emit;

static void refuse(Emit *e, const IrNode *n, int k, const char *fmt, const char *what) {
  SrcLoc loc = n->loc;
  const char *file = loc.file ? loc.file : "";
  if (compile_is_onnx(file))
    diag_error(e->d, (SrcLoc){.file = loc.file}, "node %d '%s' (%s): cannot be written as a .net file: %s%s",
               loc.line - 1, n->name ? n->name : "", ir_op_info(n->op)->name, fmt, what ? what : "");
  else
    diag_error(e->d, loc, "layer '%s' (%s, node %d): cannot be written as a .net file: %s%s", n->name ? n->name : "",
               ir_op_info(n->op)->name, k, fmt, what ? what : "");
  e->nerr++;
}

/* Input `in` of n must be the parameter (or state) LAYER.suffix. */
static int check_param(Emit *e, const IrNode *n, int k, int in, IrValueKind kind, const char *suffix) {
  const IrValue *v = &e->g->val[n->in[in]];
  const char *want = arena_printf(e->a, "%s.%s", n->name ? n->name : "", suffix);
  if (v->kind == kind && v->name && want && strcmp(v->name, want) == 0) return 0;
  /* what batch norms folded into convolutions leave (onnx_import.c) */
  size_t len = v->name ? strlen(v->name) : 0;
  const char *why = v->name && strncmp(v->name, "onnx__", 6) == 0
                        ? "; onnx__* weights come from an eval-mode export: export in training mode (docs/onnx.md)"
                    : len > 12 && strcmp(v->name + len - 12, ".weight_bias") == 0
                        ? "; a WEIGHT_bias bias is a batch norm the dynamo exporter folded in: export with "
                          "dynamo=False in training mode (docs/onnx.md)"
                        : "";
  const char *msg = arena_printf(e->a, "its %s '%s' would be named '%s' (the language names it LAYER.%s)%s",
                                 kind == IR_VAL_STATE ? "state" : "parameter", v->name ? v->name : "?",
                                 want ? want : "?", suffix, why);
  refuse(e, n, k, msg ? msg : "a parameter is misnamed", NULL);
  return -1;
}

/* The variable of an activation argument. */
static const char *arg(Emit *e, const IrNode *n, int k, int in) {
  const char *s = e->var[n->in[in]];
  if (!s) refuse(e, n, k, "it reads a value that is neither an input nor a layer's output", NULL);
  return s ? s : "?";
}

static void put_precision(FILE *f, const IrNode *n) {
  const IrAttr *p = ir_attr_find(n, "precision");
  if (p) fprintf(f, ", precision=%s", p->i[0] == IR_DT_F8E4M3 ? "f8" : ir_dtype_name((IrDtype)p->i[0]));
}

/* Every attribute of n is one the language can set for its op. */
static int check_attrs(Emit *e, const IrNode *n, int k) {
  const char *keys = ir_op_info(n->op)->attrs;
  for (int i = 0; i < n->nattr; i++) {
    const char *key = n->attr[i].key;
    size_t len = strlen(key);
    int known = strcmp(key, "precision") == 0;
    for (const char *p = keys; !known && (p = strstr(p, key)); p += len)
      known = (p == keys || p[-1] == ' ') && (p[len] == ' ' || p[len] == 0);
    if (!known) {
      refuse(e, n, k, "the language has no argument for its attribute ", key);
      return -1;
    }
  }
  return 0;
}

/* One node as `TARGET = op(...)` (one line). */
static void emit_node(Emit *e, FILE *f, int k, const char *target, const char *as) {
  const IrGraph *g = e->g;
  const IrNode *n = &g->node[k];
  const IrOpInfo *info = ir_op_info(n->op);
  char b[64];
  if (check_attrs(e, n, k)) return;
  switch (n->op) {
  case IR_OP_CONV2D: {
    if (check_param(e, n, k, 1, IR_VAL_PARAM, "weight") ||
        (n->nin > 2 && check_param(e, n, k, 2, IR_VAL_PARAM, "bias")))
      return;
    const IrValue *w = &g->val[n->in[1]];
    fprintf(f, "  %s = conv2d(%s, %" PRId64, target, arg(e, n, k, 0), w->type.dim[0]);
    const IrAttr *ka = ir_attr_find(n, "k");
    if (ka && ka->n == 2 && ka->i[0] == ka->i[1])
      fprintf(f, ", k=%" PRId64, ka->i[0]);
    else if (ka && ka->n == 2)
      fprintf(f, ", k=(%" PRId64 ", %" PRId64 ")", ka->i[0], ka->i[1]);
    if (e->explicit_sp) {
      /* the same text whatever the values, so bodies compare; body_render drops a default */
      fputc('\2', f);
      put_pair(f, n, "s", "s", INT64_MIN, INT64_MIN);
      fputc('\3', f);
      fputc('\2', f);
      put_pair(f, n, "p", "p", INT64_MIN, INT64_MIN);
      fputc('\3', f);
    } else {
      put_pair(f, n, "s", "s", 1, 1);
      put_pair(f, n, "p", "p", 0, 0);
    }
    put_pair(f, n, "d", "d", 1, 1);
    int64_t groups = ir_attr_int(n, "groups", 1);
    if (groups != 1) fprintf(f, ", groups=%" PRId64, groups);
    if (n->nin < 3) fprintf(f, ", bias=false");
    break;
  }
  case IR_OP_BATCHNORM: {
    if (check_param(e, n, k, 1, IR_VAL_PARAM, "weight") || check_param(e, n, k, 2, IR_VAL_PARAM, "bias") ||
        check_param(e, n, k, 3, IR_VAL_STATE, "running_mean") || check_param(e, n, k, 4, IR_VAL_STATE, "running_var"))
      return;
    fprintf(f, "  %s = batchnorm(%s", target, arg(e, n, k, 0));
    double eps = ir_attr_float(n, "eps", 1e-5), mom = ir_attr_float(n, "momentum", 0.1);
    if (eps != 1e-5) fprintf(f, ", eps=%s", fmt_float(b, sizeof b, eps));
    if (mom != 0.1) fprintf(f, ", momentum=%s", fmt_float(b, sizeof b, mom));
    break;
  }
  case IR_OP_MAXPOOL:
  case IR_OP_AVGPOOL: {
    const IrAttr *ka = ir_attr_find(n, "k");
    if (!ka || ka->n != 2) {
      refuse(e, n, k, "it has no window", NULL);
      return;
    }
    fprintf(f, "  %s = %s(%s", target, info->name, arg(e, n, k, 0));
    if (ka->i[0] == ka->i[1])
      fprintf(f, ", k=%" PRId64, ka->i[0]);
    else
      fprintf(f, ", k=(%" PRId64 ", %" PRId64 ")", ka->i[0], ka->i[1]);
    put_pair(f, n, "s", "s", ka->i[0], ka->i[1]); /* s defaults to k */
    put_pair(f, n, "p", "p", 0, 0);
    if (n->op == IR_OP_AVGPOOL && !ir_attr_int(n, "include_pad", 1)) fprintf(f, ", include_pad=false");
    break;
  }
  case IR_OP_RELU:
  case IR_OP_GLOBAL_AVGPOOL:
  case IR_OP_FLATTEN: fprintf(f, "  %s = %s(%s", target, info->name, arg(e, n, k, 0)); break;
  case IR_OP_ADD: fprintf(f, "  %s = add(%s, %s", target, arg(e, n, k, 0), arg(e, n, k, 1)); break;
  case IR_OP_LINEAR: {
    if (check_param(e, n, k, 1, IR_VAL_PARAM, "weight") ||
        (n->nin > 2 && check_param(e, n, k, 2, IR_VAL_PARAM, "bias")))
      return;
    const IrValue *w = &g->val[n->in[1]];
    fprintf(f, "  %s = linear(%s, %" PRId64, target, arg(e, n, k, 0), w->type.dim[0]);
    if (n->nin < 3) fprintf(f, ", bias=false");
    break;
  }
  case IR_OP_SOFTMAX_CE: {
    /* its smoothing is the train section's label_smoothing */
    const IrAttr *ls = ir_train_find(g, "label_smoothing");
    double want = ls ? ls->f : 0, have = ir_attr_float(n, "smoothing", 0);
    if (want != have) {
      refuse(e, n, k, "its smoothing differs from the train section's label_smoothing", NULL);
      return;
    }
    fprintf(f, "  %s = softmax_cross_entropy(%s, %s", target, arg(e, n, k, 0), arg(e, n, k, 1));
    break;
  }
  default: refuse(e, n, k, "the language has no op ", info->name); return;
  }
  put_precision(f, n);
  fprintf(f, ")");
  if (as) fprintf(f, " as %s", as);
  fprintf(f, "\n");
}

/* The train section, from the graph's attributes in their order. */
static void emit_train(FILE *f, const IrGraph *g) {
  if (g->ntrain == 0) return;
  char b[64];
  fprintf(f, "\ntrain {\n");
  for (int i = 0; i < g->ntrain;) {
    const IrAttr *a = &g->train[i];
    if (a->kind == IR_ATTR_STR) { /* a choice: optimizer = sgd(lr=..., ...) */
      fprintf(f, "  %-15s = %s(", a->key, a->s);
      size_t kl = strlen(a->key);
      int first = 1, opt = strcmp(a->key, "optimizer") == 0, sched = strcmp(a->key, "schedule") == 0;
      for (i++; i < g->ntrain; i++) {
        const IrAttr *p = &g->train[i];
        const char *name = NULL;
        if (opt && (!strcmp(p->key, "lr") || !strcmp(p->key, "momentum") || !strcmp(p->key, "nesterov") ||
                    !strcmp(p->key, "weight_decay")))
          name = p->key;
        else if (sched && !strcmp(p->key, "warmup_epochs"))
          name = p->key;
        else if (!opt && strncmp(p->key, a->key, kl) == 0 && p->key[kl] == '_')
          name = p->key + kl + 1;
        if (!name) break;
        fprintf(f, "%s%s=", first ? "" : ", ", name);
        first = 0;
        if (!strcmp(name, "nesterov"))
          fprintf(f, "%s", p->i[0] ? "true" : "false");
        else if (p->kind == IR_ATTR_FLOAT)
          fprintf(f, "%s", fmt_float(b, sizeof b, p->f));
        else
          fprintf(f, "%" PRId64, p->i[0]);
      }
      fprintf(f, ")\n");
      continue;
    }
    fprintf(f, "  %-15s = ", a->key);
    if (a->kind == IR_ATTR_FLOAT)
      fprintf(f, "%s\n", fmt_float(b, sizeof b, a->f));
    else if (a->kind == IR_ATTR_DTYPE)
      fprintf(f, "%s\n", ir_dtype_name((IrDtype)a->i[0]));
    else
      fprintf(f, "%" PRId64 "\n", a->i[0]);
    i++;
  }
  fprintf(f, "}\n");
}

/* 1 when s names a layer of g or an input (a fresh variable must not). */
static int name_taken(const IrGraph *g, const char *const *input_name, const char *s) {
  for (int i = 0; i < g->nnode; i++)
    if (g->node[i].name && strcmp(g->node[i].name, s) == 0) return 1;
  for (int v = 0; v < g->nval; v++)
    if (input_name[v] && strcmp(input_name[v], s) == 0) return 1;
  return 0;
}

/* The names the text gives g's inputs and network (as_ident of the IR's);
 * warns about each that changes unless quiet. */
static const char **text_names(Arena *a, const IrGraph *g, Diag *d, const char **net_name, int quiet) {
  const char **in = arena_alloc(a, sizeof *in * (size_t)(g->nval + 1));
  if (!in) return NULL;
  memset(in, 0, sizeof *in * (size_t)(g->nval + 1));
  for (int v = 0; v < g->nval; v++) {
    if (g->val[v].kind != IR_VAL_INPUT) continue;
    const char *s = as_ident(a, g->val[v].name);
    for (int k = 2; s && k < 1000; k++) { /* two inputs may not meet in one name */
      int clash = 0;
      for (int u = 0; u < v; u++) clash |= in[u] && strcmp(in[u], s) == 0;
      if (!clash) break;
      s = arena_printf(a, "%s_%d", as_ident(a, g->val[v].name), k);
    }
    if (!s) return NULL;
    in[v] = s;
    if (!quiet && strcmp(s, g->val[v].name))
      diag_warning(d, (SrcLoc){0}, "input '%s' is written as '%s' (not an identifier of the language)", g->val[v].name,
                   s);
  }
  *net_name = as_ident(a, g->name ? g->name : "net");
  if (!quiet && *net_name && g->name && strcmp(*net_name, g->name))
    diag_warning(d, (SrcLoc){0}, "network '%s' is written as '%s' (not an identifier of the language)", g->name,
                 *net_name);
  return *net_name ? in : NULL;
}

/* --- blocks: the layers of one block call, found by name -----------------
 *
 * A group is a run of consecutive nodes whose names share a prefix ending
 * in a number, `layer1.0` of layer1.0.conv1 ... layer1.0.relu, that reads
 * one value from outside and gives one value to the rest of the graph.
 * Its lines, written with the outside value as `x` and each layer under
 * the rest of its name (`conv1`), are a block body; groups whose bodies
 * agree but for their integers call one block, `layer1.0 = unit1(maxpool,
 * 64, 1)`, which names the layers as they were (docs/language.md, "Layer
 * names").  An integer that differs between the calls is a parameter (one
 * per distinct column of values; a column that is another's times a
 * constant is written `width * 4`); one they all share stays in the body.
 * Calls named P.0, P.1, ... in a row are then a stage (stage_make). */

typedef struct Group {
  int first, end;    /* its nodes, [first, end) */
  const char *inst;  /* the call's name: layer1.0 */
  const char *x;     /* the body's name of the outside value */
  int ext, out;      /* the value read from outside, the value it gives */
  const char *body;  /* its lines, integers and all (\2 \3 around conv2d's s= and p=) */
  const char *shape; /* body with each integer '#': equal for calls of one block */
  int64_t *ints;     /* its integers, in text order */
  int nint, blk;     /* blk: the block it calls, -1 when it stays plain */
} Group;

typedef struct Block {
  const char *name;
  int ncall, first;     /* calls, and its first group */
  const Group *call[7]; /* its first calls (for the comment above it) */
  int stage;            /* a stage: its body calls blocks (x and i its only variables) */
  const char **arg;     /* per integer: its text in the body (a literal, a parameter, `width * 4`) */
  int *param;           /* per integer: the parameter it reads, -1 when a literal */
  const char **pname;   /* parameters, in order */
  int *pcol;            /* per parameter: the integer whose column it is */
  int nparam;
} Block;

/* Where name's instance prefix ends: after the first part that is only
 * digits and not the last (layer1.0.conv1 -> 8, "layer1.0"); 0 when none. */
static size_t inst_len(const char *name) {
  if (!name) return 0;
  for (const char *p = strchr(name, '.'); p; p = strchr(p + 1, '.')) {
    const char *q = p + 1;
    while (is_digit(*q)) q++;
    if (q > p + 1 && *q == '.') return (size_t)(q - name);
  }
  return 0;
}

/* The length of the token at s[i], *is_int set when it is an integer
 * literal: a run of digits not inside a name (conv1, downsample.0) or a
 * float (1e-05, 0.1); such a run is one token too, and any other byte. */
static size_t scan_token(const char *s, size_t i, int *is_int) {
  *is_int = 0;
  if (!is_digit(s[i])) return 1;
  size_t j = i;
  if (i > 0 && (is_word(s[i - 1]) || (s[i - 1] == '.' && !(i > 1 && s[i - 2] == '.')))) {
    while (is_word(s[j])) j++;
    return j - i;
  }
  while (is_digit(s[j])) j++;
  if ((s[j] == '.' && is_digit(s[j + 1])) || s[j] == 'e' || s[j] == 'E') {
    while (is_word(s[j]) || s[j] == '.' || ((s[j] == '-' || s[j] == '+') && (s[j - 1] == 'e' || s[j - 1] == 'E'))) j++;
    return j - i;
  }
  *is_int = 1;
  return j - i;
}

/* The integers of body, and body with each one '#'. */
static int body_shape(Arena *a, Group *gr) {
  const char *s = gr->body;
  size_t n = strlen(s);
  char *shape = arena_alloc(a, n + 1);
  gr->ints = arena_alloc(a, sizeof *gr->ints * (n / 2 + 1));
  if (!shape || !gr->ints) return -1;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    int is_int;
    size_t len = scan_token(s, i, &is_int);
    if (is_int) {
      gr->ints[gr->nint++] = strtoll(s + i, NULL, 10);
      shape[o++] = '#';
    } else {
      memcpy(shape + o, s + i, len);
      o += len;
    }
    i += len;
  }
  shape[o] = 0;
  gr->shape = shape;
  return 0;
}

/* The base of a parameter's name, from the argument its integer is: the
 * keyword before it (s= -> stride, width= -> width), `width` for a
 * positional one, `n` for a loop's bound. */
static const char *param_base(Arena *a, const char *body, size_t at) {
  for (size_t i = at; i-- > 0 && body[i] != '\n';) {
    if (body[i] == '(' && i > 0 && is_word(body[i - 1])) return "width";
    if (body[i] == '=') {
      size_t e = i;
      while (i > 0 && is_word(body[i - 1])) i--;
      size_t len = e - i;
      if (len == 1 && body[i] == 's') return "stride";
      if (len == 1 && body[i] == 'p') return "pad";
      if (len == 1 && body[i] == 'd') return "dilation";
      if (len == 1 && body[i] == 'k') return "k";
      const char *key = len ? arena_strndup(a, body + i, len) : NULL;
      return key ? key : "n";
    }
  }
  return "n";
}

/* 1 when word occurs in s as a whole word. */
static int has_word(const char *s, const char *w) {
  size_t n = strlen(w);
  for (const char *p = strstr(s, w); p; p = strstr(p + 1, w))
    if ((p == s || (!is_word(p[-1]) && p[-1] != '.')) && !is_word(p[n])) return 1;
  return 0;
}

/* The block's parameters, from the columns of its calls' integers. */
static int block_params(Arena *a, Block *b, Group *grs, int ngr, int bi) {
  const Group *g0 = &grs[b->first];
  int m = g0->nint;
  b->arg = arena_alloc(a, sizeof *b->arg * (size_t)(m + 1));
  b->param = arena_alloc(a, sizeof *b->param * (size_t)(m + 1));
  b->pname = arena_alloc(a, sizeof *b->pname * (size_t)(m + 1));
  b->pcol = arena_alloc(a, sizeof *b->pcol * (size_t)(m + 1));
  if (!b->arg || !b->param || !b->pname || !b->pcol) return -1;
  /* where each integer stands in the body, for its parameter's name */
  size_t at = 0;
  int is_int = 0;
  for (int j = 0; j < m; j++) {
    size_t len;
    while ((len = scan_token(g0->body, at, &is_int)), !is_int) at += len;
    int same = 1;
    for (int i = 0; i < ngr; i++)
      if (grs[i].blk == bi) same &= grs[i].ints[j] == g0->ints[j];
    b->param[j] = -1;
    if (same) {
      b->arg[j] = arena_printf(a, "%" PRId64, g0->ints[j]);
    } else {
      /* a parameter already made with this column, or a multiple of one */
      for (int p = 0; p < b->nparam && !b->arg[j]; p++) {
        int c = b->pcol[p];
        int64_t f = 0;
        int ok = 1, seen = 0;
        for (int i = 0; i < ngr && ok; i++) {
          if (grs[i].blk != bi) continue;
          int64_t u = grs[i].ints[c], v = grs[i].ints[j];
          ok = u > 0 && v % u == 0 && (!seen || v / u == f);
          if (ok) f = v / u, seen = 1;
        }
        if (!ok || f < 1) continue;
        b->param[j] = p;
        b->arg[j] = f == 1 ? b->pname[p] : arena_printf(a, "%s * %" PRId64, b->pname[p], f);
      }
      if (!b->arg[j]) {
        const char *base = param_base(a, g0->body, at), *name = base;
        for (int k = 2;; k++) {
          /* a stage's body names no variable but x and i (its other words are blocks and keywords) */
          int used = b->stage ? !strcmp(name, "x") || !strcmp(name, "i") || !strncmp(name, "unit", 4)
                              : has_word(g0->body, name);
          used |= is_keyword(name, strlen(name));
          for (int p = 0; p < b->nparam; p++) used |= !strcmp(b->pname[p], name);
          if (!used) break;
          name = arena_printf(a, "%s%d", base, k);
          if (!name) return -1;
        }
        b->pcol[b->nparam] = j;
        b->param[j] = b->nparam;
        b->pname[b->nparam++] = name;
        b->arg[j] = name;
      }
    }
    if (!b->arg[j]) return -1;
    at += len;
  }
  return 0;
}

/* The block's body: g0's text with its integers as b's arguments, and
 * conv2d's s= and p= left out where they are the language's default. */
static void body_render(FILE *f, const Block *b, const Group *g0) {
  const char *s = g0->body;
  int j = 0;
  for (size_t i = 0; s[i];) {
    if (s[i] == '\2') { /* `, s=V` or `, p=V` (V a pair): dropped when a default literal */
      size_t e = i;
      while (s[e] != '\3') e++;
      int dflt = e > i + 1, k = j;
      int64_t want = strncmp(s + i + 1, ", s=", 4) == 0 ? 1 : 0;
      for (size_t x = i + 1; x < e;) {
        int is_int;
        size_t len = scan_token(s, x, &is_int);
        if (is_int) dflt &= b->param[k] < 0 && g0->ints[k] == want, k++;
        x += len;
      }
      if (dflt) {
        j = k, i = e + 1;
        continue;
      }
      i++;
      continue;
    }
    if (s[i] == '\3') {
      i++;
      continue;
    }
    int is_int;
    size_t len = scan_token(s, i, &is_int);
    if (is_int)
      fputs(b->arg[j++], f);
    else
      fwrite(s + i, 1, len, f);
    i += len;
  }
}

/* What find_blocks asks of every group, made once: the nodes by name, the
 * inputs' names, the first and last reader of each value. */
typedef struct Named {
  const char *name;
  int k;
} Named;

typedef struct Index {
  Named *byname; /* the named nodes, sorted by name */
  int nnamed;
  const char **input; /* the inputs' names in the text */
  int ninput;
  int *prod, *first_use, *last_use; /* per value: its node, its first and last reader (an output: nnode) */
} Index;

static int named_cmp(const void *x, const void *y) {
  return strcmp(((const Named *)x)->name, ((const Named *)y)->name);
}

static int index_make(Arena *a, const Emit *e, Index *ix) {
  const IrGraph *g = e->g;
  size_t nv = (size_t)g->nval + 1;
  ix->byname = arena_alloc(a, sizeof *ix->byname * ((size_t)g->nnode + 1));
  ix->input = arena_alloc(a, sizeof *ix->input * nv);
  ix->prod = arena_alloc(a, sizeof(int) * nv);
  ix->first_use = arena_alloc(a, sizeof(int) * nv);
  ix->last_use = arena_alloc(a, sizeof(int) * nv);
  if (!ix->byname || !ix->input || !ix->prod || !ix->first_use || !ix->last_use) return -1;
  ix->nnamed = ix->ninput = 0;
  for (int v = 0; v < g->nval; v++) {
    ix->prod[v] = ix->first_use[v] = ix->last_use[v] = -1;
    if (e->input_name[v]) ix->input[ix->ninput++] = e->input_name[v];
  }
  for (int k = 0; k < g->nnode; k++) {
    const IrNode *n = &g->node[k];
    if (n->name) ix->byname[ix->nnamed++] = (Named){n->name, k};
    for (int i = 0; i < n->nout; i++) ix->prod[n->out[i]] = k;
    for (int i = 0; i < n->nin; i++) {
      int v = n->in[i];
      if (ix->first_use[v] < 0) ix->first_use[v] = k;
      ix->last_use[v] = k;
    }
  }
  for (int i = 0; i < g->noutput; i++) {
    int v = g->output[i];
    if (ix->first_use[v] < 0) ix->first_use[v] = g->nnode;
    ix->last_use[v] = g->nnode;
  }
  qsort(ix->byname, (size_t)ix->nnamed, sizeof *ix->byname, named_cmp);
  return 0;
}

/* 1 when value v is read by a node outside [first, end) or is an output of the graph. */
static int read_outside(const Index *ix, int v, int first, int end) {
  return ix->first_use[v] >= 0 && (ix->first_use[v] < first || ix->last_use[v] >= end);
}

/* 1 when name P is free for a call of the nodes [first, end): no input is
 * called P, and every layer named P or P.* is one of them. */
static int name_free(const Index *ix, const char *P, int first, int end) {
  for (int i = 0; i < ix->ninput; i++)
    if (strcmp(ix->input[i], P) == 0) return 0;
  size_t L = strlen(P);
  int lo = 0, hi = ix->nnamed; /* the first name >= P; those starting with P follow it */
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (strcmp(ix->byname[mid].name, P) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (int i = lo; i < ix->nnamed && strncmp(ix->byname[i].name, P, L) == 0; i++) {
    const char *nm = ix->byname[i].name;
    int k = ix->byname[i].k;
    if ((nm[L] == '.' || !nm[L]) && (k < first || k >= end)) return 0;
  }
  return 1;
}

/* Checks the group [first, end) named inst and writes its body; 0 when it
 * can be a block call, -1 when it stays plain. */
static int group_make(Emit *e, const Index *ix, Group *gr) {
  const IrGraph *g = e->g;
  Arena *a = e->a;
  const int *prod = ix->prod;
  size_t L = strlen(gr->inst);
  /* no other layer under this name: the call names them all */
  if (!is_name(gr->inst) || !name_free(ix, gr->inst, gr->first, gr->end)) return -1;
  gr->ext = gr->out = -1;
  for (int k = gr->first; k < gr->end; k++) {
    const IrNode *n = &g->node[k];
    if (n->nout != 1 || !is_name(n->name + L + 1)) return -1;
    for (int i = 0; i < n->nin; i++) {
      int v = n->in[i];
      IrValueKind kind = g->val[v].kind;
      if (kind == IR_VAL_PARAM || kind == IR_VAL_STATE) continue;
      if (prod[v] >= gr->first && prod[v] < gr->end) continue;
      if (gr->ext >= 0 && gr->ext != v) return -1; /* a second value from outside */
      gr->ext = v;
    }
    if (read_outside(ix, n->out[0], gr->first, gr->end)) {
      if (gr->out >= 0) return -1;
      gr->out = n->out[0];
    }
  }
  if (gr->ext < 0 || gr->out < 0) return -1;
  /* the outside value's parameter: x, unless a layer of the body is x */
  const char *x = "x";
  for (int again = 1; again;) {
    again = 0;
    for (int k = gr->first; k < gr->end && !again; k++) {
      const char *sfx = g->node[k].name + L + 1;
      size_t xl = strlen(x);
      again = strncmp(sfx, x, xl) == 0 && (sfx[xl] == '.' || !sfx[xl]);
    }
    if (again && !(x = arena_printf(a, "%s_", x))) return -1;
  }
  char *body = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&body, &len);
  if (!m) return -1;
  const char *saved = e->var[gr->ext];
  int nerr = e->nerr;
  e->var[gr->ext] = x;
  e->explicit_sp = 1;
  for (int k = gr->first; k < gr->end; k++) {
    emit_node(e, m, k, g->node[k].name + L + 1, NULL);
    e->var[g->node[k].out[0]] = g->node[k].name + L + 1;
  }
  fprintf(m, "  return %s\n", e->var[gr->out]);
  gr->x = x;
  e->explicit_sp = 0;
  for (int k = gr->first; k < gr->end; k++) e->var[g->node[k].out[0]] = NULL;
  e->var[gr->ext] = saved;
  int bad = e->nerr != nerr;
  e->nerr = nerr;
  if (fclose(m) || bad) {
    free(body);
    return -1;
  }
  gr->body = arena_strdup(a, body);
  free(body);
  return gr->body ? body_shape(a, gr) : -1;
}

/* A stage: calls c[0..n) of blocks, named P.0, P.1, ..., each reading
 * the last one's value, as one group named P whose body calls them (a
 * loop for a run of calls of one block with the same arguments):
 *
 *   x = unit1(x, width=64, stride=1) as [0]
 *   for i in 1..3 {
 *     x = unit2(x, width=64) as [i]
 *   }
 *   return x
 *
 * 0 when it can be one, -1 when its calls stay as they are. */
static int stage_make(Emit *e, const Index *ix, const Group *c, int n, const Block *b, Group *st) {
  Arena *a = e->a;
  const char *dot = strrchr(c[0].inst, '.');
  const char *P = arena_strndup(a, c[0].inst, (size_t)(dot - c[0].inst));
  if (!P || !is_name(P) || !name_free(ix, P, c[0].first, c[n - 1].end)) return -1;
  char *body = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&body, &len);
  if (!m) return -1;
  for (int i = 0; i < n;) {
    const Block *cb = &b[c[i].blk];
    int j = i + 1; /* the run of calls with c[i]'s block and arguments */
    for (; j < n && c[j].blk == c[i].blk; j++) {
      int same = 1;
      for (int p = 0; p < cb->nparam; p++) same &= c[j].ints[cb->pcol[p]] == c[i].ints[cb->pcol[p]];
      if (!same) break;
    }
    if (j - i > 1) fprintf(m, "  for i in %d..%d {\n  ", i, j);
    fprintf(m, "  x = %s(x", cb->name);
    for (int p = 0; p < cb->nparam; p++) fprintf(m, ", %s=%" PRId64, cb->pname[p], c[i].ints[cb->pcol[p]]);
    if (j - i > 1)
      fprintf(m, ") as [i]\n  }\n");
    else
      fprintf(m, ") as [%d]\n", i);
    i = j;
  }
  fprintf(m, "  return x\n");
  if (fclose(m)) {
    free(body);
    return -1;
  }
  *st = (Group){.first = c[0].first,
                .end = c[n - 1].end,
                .inst = P,
                .x = "x",
                .ext = c[0].ext,
                .out = c[n - 1].out,
                .blk = -1,
                .body = arena_strdup(a, body)};
  free(body);
  return st->body ? body_shape(a, st) : -1;
}

/* Numbers the blocks of groups gr[0..n) (their bodies' shapes) from *nblk
 * on, keeping one when keep says so: called twice or more, or (a stage) holding a loop. */
static int number_blocks(Arena *a, Group *gr, int n, Block *b, int *nblk, int stage) {
  int from = *nblk;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < i && gr[i].blk < 0; j++)
      if (gr[j].blk >= 0 && strcmp(gr[j].shape, gr[i].shape) == 0) gr[i].blk = gr[j].blk;
    if (gr[i].blk < 0) b[*nblk] = (Block){.first = i, .stage = stage}, gr[i].blk = (*nblk)++;
    Block *bb = &b[gr[i].blk];
    if (bb->ncall < 7) bb->call[bb->ncall] = &gr[i];
    bb->ncall++;
  }
  int kept = from, *renum = arena_alloc(a, sizeof *renum * (size_t)(*nblk + 1));
  if (!renum) return -1;
  for (int i = from; i < *nblk; i++) {
    int keep = b[i].ncall >= 2 || (stage && strstr(b[i].call[0]->shape, "  for i in "));
    renum[i] = keep ? kept : -1;
    if (keep) b[kept++] = b[i];
  }
  for (int i = 0; i < n; i++) gr[i].blk = renum[gr[i].blk];
  *nblk = kept;
  return 0;
}

/* 1 when group b, the k-th of the stage whose first is named inst (its
 * prefix L bytes), follows group a: its nodes next, reading a's value, named PREFIX.k. */
static int stage_next(const Group *a, const Group *b, const char *inst, size_t L, int k) {
  char num[24];
  snprintf(num, sizeof num, "%d", k);
  return b->blk >= 0 && b->first == a->end && b->ext == a->out && strncmp(b->inst, inst, L) == 0 && b->inst[L] == '.' &&
         strcmp(b->inst + L + 1, num) == 0;
}

/* The groups of g (per node: its group, NULL when plain) and the blocks
 * they call: *nblk of them, each called at least twice; with loops, the
 * stages too (stage_make).  -1: out of memory. */
static int find_blocks(Emit *e, int loops, Group ***group_of, Block **blocks, int *nblk) {
  const IrGraph *g = e->g;
  Arena *a = e->a;
  *nblk = 0;
  Index ix;
  Group *grs = arena_alloc(a, sizeof *grs * (size_t)(g->nnode + 1));
  Group **of = arena_alloc(a, sizeof *of * (size_t)(g->nnode + 1));
  Block *b = arena_alloc(a, sizeof *b * (size_t)(g->nnode + 1));
  if (!grs || !of || !b || index_make(a, e, &ix)) return -1;
  int ngr = 0;
  for (int k = 0; k < g->nnode;) {
    const char *nm = g->node[k].name;
    size_t L = inst_len(nm);
    int j = k + 1;
    while (L && j < g->nnode && inst_len(g->node[j].name) == L && strncmp(g->node[j].name, nm, L) == 0) j++;
    if (L) {
      Group *gr = &grs[ngr];
      *gr = (Group){.first = k, .end = j, .inst = arena_strndup(a, nm, L), .blk = -1};
      if (!gr->inst) return -1;
      if (group_make(e, &ix, gr) == 0) ngr++;
    }
    k = j;
  }
  /* a block per distinct body, kept when it is called twice or more */
  if (number_blocks(a, grs, ngr, b, nblk, 0)) return -1;
  int fresh = 0;
  for (int i = 0; i < *nblk; i++) {
    do b[i].name = arena_printf(a, "unit%d", ++fresh);
    while (b[i].name && name_taken(g, (const char *const *)e->input_name, b[i].name));
    if (!b[i].name || block_params(a, &b[i], grs, ngr, i)) return -1;
  }
  /* stages: the calls named P.0, P.1, ..., each reading the last one's value */
  int nst = 0, units = *nblk;
  Group *st = arena_alloc(a, sizeof *st * (size_t)(ngr + 1));
  if (!st) return -1;
  for (int i = 0; loops && i < ngr;) {
    const char *dot = strrchr(grs[i].inst, '.');
    if (grs[i].blk < 0 || strcmp(dot, ".0")) {
      i++;
      continue;
    }
    size_t L = (size_t)(dot - grs[i].inst);
    int j = i + 1;
    while (j < ngr && stage_next(&grs[j - 1], &grs[j], grs[i].inst, L, j - i)) j++;
    if (j - i >= 2 && stage_make(e, &ix, &grs[i], j - i, b, &st[nst]) == 0) nst++;
    i = j;
  }
  if (number_blocks(a, st, nst, b, nblk, 1)) return -1;
  fresh = 0;
  for (int i = units; i < *nblk; i++) {
    do b[i].name = arena_printf(a, "stage%d", ++fresh);
    while (b[i].name && name_taken(g, (const char *const *)e->input_name, b[i].name));
    if (!b[i].name || block_params(a, &b[i], st, nst, i)) return -1;
  }
  for (int k = 0; k < g->nnode; k++) of[k] = NULL;
  for (int i = 0; i < ngr; i++)
    if (grs[i].blk >= 0)
      for (int k = grs[i].first; k < grs[i].end; k++) of[k] = &grs[i];
  for (int i = 0; i < nst; i++)
    if (st[i].blk >= 0)
      for (int k = st[i].first; k < st[i].end; k++) of[k] = &st[i];
  *group_of = of;
  *blocks = b;
  return 0;
}

/* g as .net text to f: with blocks where the layers repeat (and stages of loops), as flags say. */
static int emit(FILE *f, const IrGraph *g, Diag *d, const char *src, Arena *a, unsigned flags) {
  Emit e = {.g = g, .d = d, .a = a};
  const char *net_name;
  e.input_name = text_names(a, g, d, &net_name, 0);
  e.var = arena_alloc(a, sizeof *e.var * (size_t)(g->nval + 1));
  if (!e.input_name || !e.var) {
    diag_error(d, (SrcLoc){0}, "out of memory");
    return -1;
  }
  memset(e.var, 0, sizeof *e.var * (size_t)(g->nval + 1));
  if (g->opt_first >= 0) {
    diag_error(d, (SrcLoc){.file = src}, "only a forward graph can be written as a .net file");
    return -1;
  }
  Group **group_of = NULL;
  Block *blocks = NULL;
  int nblk = 0;
  if (!(flags & EMIT_NET_PLAIN) && find_blocks(&e, !(flags & EMIT_NET_NO_LOOPS), &group_of, &blocks, &nblk)) {
    diag_error(d, (SrcLoc){0}, "out of memory");
    return -1;
  }
  if (nblk) {
    fprintf(f, "# %s, written by netc --emit-net: blocks where the layers repeat, one line per other layer.\n", src);
  } else {
    fprintf(f, "# %s, written by netc --emit-net: one line per layer, each under its name.\n", src);
  }
  for (int i = 0; i < nblk; i++) {
    const Block *b = &blocks[i];
    const Group *g0 = b->call[0];
    fprintf(f, "\n# %d call%s:", b->ncall, b->ncall > 1 ? "s" : "");
    for (int k = 0; k < b->ncall && k < 6; k++) fprintf(f, " %s", b->call[k]->inst);
    fprintf(f, "%s\nblock %s(%s", b->ncall > 6 ? " ..." : "", b->name, g0->x);
    for (int p = 0; p < b->nparam; p++) fprintf(f, ", %s", b->pname[p]);
    fprintf(f, ") {\n");
    body_render(f, b, g0);
    fprintf(f, "}\n");
  }
  fprintf(f, "\nnetwork %s {\n", net_name);
  for (int v = 0; v < g->nval; v++) {
    const IrValue *x = &g->val[v];
    if (x->kind != IR_VAL_INPUT) continue;
    e.var[v] = e.input_name[v];
    if (x->type.rank < 1 || x->type.dim[0] != IR_DIM_N) {
      diag_error(d, (SrcLoc){.file = src}, "input '%s' has no batch dimension: the language cannot declare it",
                 x->name);
      e.nerr++;
      continue;
    }
    fprintf(f, "  input %s : %s[", e.input_name[v], ir_dtype_name(x->type.dtype));
    for (int i = 1; i < x->type.rank; i++) fprintf(f, "%s%" PRId64, i > 1 ? ", " : "", x->type.dim[i]);
    fprintf(f, "]\n");
  }
  fprintf(f, "\n");
  int fresh = 0, nloss = 0;
  for (int k = 0; k < g->nnode; k++) {
    const Group *gr = group_of ? group_of[k] : NULL;
    if (gr) { /* a block call, which names its layers */
      const Block *b = &blocks[gr->blk];
      if (!e.var[gr->ext]) {
        refuse(&e, &g->node[k], k, "it reads a value that is neither an input nor a layer's output", NULL);
        k = gr->end - 1;
        continue;
      }
      fprintf(f, "  %s = %s(%s", gr->inst, b->name, e.var[gr->ext]);
      for (int p = 0; p < b->nparam; p++) fprintf(f, ", %" PRId64, gr->ints[b->pcol[p]]);
      fprintf(f, ")\n");
      e.var[gr->out] = gr->inst;
      k = gr->end - 1;
      continue;
    }
    const IrNode *n = &g->node[k];
    const char *name = n->name ? n->name : ir_op_info(n->op)->name;
    const char *target = name, *as = NULL;
    int taken = 0; /* a layer named as an input: its variable would hide the input */
    for (int v = 0; v < g->nval && !taken; v++) taken = e.input_name[v] && strcmp(e.input_name[v], name) == 0;
    if (!is_name(name) || taken) {
      if (!all_digits(name) && !is_name(name)) {
        refuse(&e, n, k, "its name is no NAME of the language (identifiers joined by '.')", NULL);
        continue;
      }
      as = all_digits(name) ? arena_printf(a, "[%s]", name) : name;
      do target = arena_printf(a, "x%d", ++fresh);
      while (target && name_taken(g, (const char *const *)e.input_name, target));
      if (!target || !as) {
        diag_error(d, (SrcLoc){0}, "out of memory");
        return -1;
      }
    }
    if (n->nout != 1) {
      refuse(&e, n, k, "it has more than one output", NULL);
      continue;
    }
    nloss += n->op == IR_OP_SOFTMAX_CE;
    emit_node(&e, f, k, target, as);
    e.var[n->out[0]] = target;
  }
  fprintf(f, "}\n");
  emit_train(f, g);
  if (!e.nerr && nloss != 1) {
    diag_error(d, (SrcLoc){.file = src}, "the graph has %d losses; a .net network has exactly one", nloss);
    e.nerr++;
  }
  return e.nerr ? -1 : 0;
}

int emit_net(FILE *f, const IrGraph *g, Diag *d, const char *src, unsigned flags) {
  Arena a;
  arena_init(&a);
  int rc = emit(f, g, d, src, &a, flags);
  arena_free(&a);
  return rc;
}

/* ir_print of g (without locations) into malloc'd memory; NULL on failure. */
static char *print_ir(const IrGraph *g, size_t *len) {
  char *buf = NULL;
  FILE *m = open_memstream(&buf, len);
  if (!m) return NULL;
  IrPrintOpts o = {.no_loc = 1, .pass = "parse"};
  ir_print(m, g, &o);
  if (fclose(m)) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* The first line where a and b differ, for the message. */
static void first_difference(const char *a, const char *b, char *out, size_t cap) {
  int line = 1;
  const char *la = a, *lb = b;
  while (*a && *a == *b) {
    if (*a == '\n') line++, la = a + 1, lb = b + 1;
    a++, b++;
  }
  snprintf(out, cap, "line %d: '%.*s' became '%.*s'", line, (int)strcspn(la, "\n"), la, (int)strcspn(lb, "\n"), lb);
}

/* emit_net into malloc'd text (*text, *len); NULL when refused. */
static int text_of(const IrGraph *g, Diag *d, const char *src, unsigned flags, char **text, size_t *len) {
  *text = NULL;
  *len = 0;
  FILE *m = open_memstream(text, len);
  if (!m) {
    diag_error(d, (SrcLoc){0}, "out of memory");
    return EMIT_NET_REFUSED;
  }
  int rc = emit_net(m, g, d, src, flags) ? EMIT_NET_REFUSED : 0;
  if (fclose(m)) rc = EMIT_NET_REFUSED;
  if (rc) {
    free(*text);
    *text = NULL;
    *len = 0;
  }
  return rc;
}

/* 0 when the text compiles (named path) to g's forward IR, the renames
 * applied; else EMIT_NET_DIFFERS, reported to d with the first line that differs. */
static int same_ir(const IrGraph *g, Diag *d, const char *path, const char *text, size_t len) {
  Arena a;
  arena_init(&a);
  int rc = 0;
  /* the source's IR with the text's names for inputs and network */
  IrGraph *c = ir_graph_clone(g);
  const char *net_name;
  const char **in = c ? text_names(&a, c, d, &net_name, 1) : NULL;
  for (int v = 0; in && v < c->nval; v++)
    if (in[v]) c->val[v].name = in[v];
  if (in) c->name = net_name;
  /* the text compiled again, its messages (a netc bug) to d */
  Diag d2;
  diag_init(&d2, d->out);
  IrGraph *back = compile_source(&a, &d2, path, text, len, NULL);
  size_t n1 = 0, n2 = 0;
  char *want = in ? print_ir(c, &n1) : NULL;
  char *have = back ? print_ir(back, &n2) : NULL;
  if (!want || !have || n1 != n2 || memcmp(want, have, n1)) {
    char why[1024] = "it does not compile";
    if (want && have) first_difference(want, have, why, sizeof why);
    diag_error(d, (SrcLoc){.file = path},
               "the written network does not give the source's IR (%s); this is a netc bug, not written", why);
    rc = EMIT_NET_DIFFERS;
  }
  free(want);
  free(have);
  arena_free(&a);
  return rc;
}

int emit_net_text(const IrGraph *g, Diag *d, const char *src, const char *path, unsigned flags, char **text,
                  size_t *len) {
  /* the plain text first: it says what the language cannot express */
  int rc = text_of(g, d, src, EMIT_NET_PLAIN, text, len);
  if (rc) return rc;
  if (!(flags & EMIT_NET_PLAIN)) {
    /* with stages and with blocks alone: the shorter of those that give g's
     * IR; their messages go nowhere (the plain text is the fallback) */
    char *msgs = NULL;
    size_t nmsgs = 0;
    FILE *m = open_memstream(&msgs, &nmsgs);
    int ok = 0;
    for (int pass = 0; m && pass < 2; pass++) {
      Diag q;
      diag_init(&q, m);
      char *bt = NULL;
      size_t bl = 0;
      if (text_of(g, &q, src, pass ? EMIT_NET_NO_LOOPS : 0, &bt, &bl) == 0 && (!ok || bl < *len) &&
          (bl != *len || memcmp(bt, *text, bl)) && same_ir(g, &q, path, bt, bl) == 0) {
        free(*text);
        *text = bt;
        *len = bl;
        ok = 1;
      } else {
        free(bt);
      }
    }
    if (m) fclose(m);
    free(msgs);
    if (ok) return 0;
  }
  rc = same_ir(g, d, path, *text, *len);
  if (rc) {
    free(*text);
    *text = NULL;
    *len = 0;
  }
  return rc;
}

int emit_net_write(const char *path, const IrGraph *g, Diag *d, const char *src, unsigned flags) {
  char *text;
  size_t len;
  if (emit_net_text(g, d, src, path, flags, &text, &len)) return -1;
  FILE *f = fopen(path, "w");
  int rc = 0;
  if (!f || fwrite(text, 1, len, f) != len || fclose(f)) {
    diag_error(d, (SrcLoc){.file = path}, "cannot write the .net file");
    rc = -1;
  }
  free(text);
  return rc;
}
