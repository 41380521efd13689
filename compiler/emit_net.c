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
  static const char *const KW[] = {"block", "network", "input", "train", "if",  "else", "for", "in",  "return",
                                   "as",    "true",    "false", "f32",   "f16", "bf16", "i8",  "i32", "i64"};
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
  int folded = v->name && strncmp(v->name, "onnx__", 6) == 0;
  const char *msg =
      arena_printf(e->a, "its %s '%s' would be named '%s' (the language names it LAYER.%s)%s",
                   kind == IR_VAL_STATE ? "state" : "parameter", v->name ? v->name : "?", want ? want : "?", suffix,
                   folded ? "; onnx__* weights come from an eval-mode export: export in training "
                            "mode (docs/onnx.md)"
                          : "");
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
  if (p) fprintf(f, ", precision=%s", ir_dtype_name((IrDtype)p->i[0]));
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
    put_pair(f, n, "s", "s", 1, 1);
    put_pair(f, n, "p", "p", 0, 0);
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

static int emit(FILE *f, const IrGraph *g, Diag *d, const char *src, Arena *a) {
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
  fprintf(f, "# %s, written by netc --emit-net: one line per layer, each under its name.\n\n", src);
  fprintf(f, "network %s {\n", net_name);
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

int emit_net(FILE *f, const IrGraph *g, Diag *d, const char *src) {
  Arena a;
  arena_init(&a);
  int rc = emit(f, g, d, src, &a);
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

int emit_net_text(const IrGraph *g, Diag *d, const char *src, const char *path, char **text, size_t *len) {
  *text = NULL;
  *len = 0;
  FILE *m = open_memstream(text, len);
  if (!m) {
    diag_error(d, (SrcLoc){0}, "out of memory");
    return EMIT_NET_REFUSED;
  }
  int rc = emit_net(m, g, d, src) ? EMIT_NET_REFUSED : 0;
  if (fclose(m)) rc = EMIT_NET_REFUSED;
  Arena a;
  arena_init(&a);
  char *want = NULL, *have = NULL;
  if (rc == 0) {
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
    IrGraph *back = compile_source(&a, &d2, path, *text, *len, NULL);
    size_t n1 = 0, n2 = 0;
    want = in ? print_ir(c, &n1) : NULL;
    have = back ? print_ir(back, &n2) : NULL;
    if (!want || !have || n1 != n2 || memcmp(want, have, n1)) {
      char why[1024] = "it does not compile";
      if (want && have) first_difference(want, have, why, sizeof why);
      diag_error(d, (SrcLoc){.file = path},
                 "the written network does not give the source's IR (%s); this is a netc bug, not written", why);
      rc = EMIT_NET_DIFFERS;
    }
  }
  free(want);
  free(have);
  arena_free(&a);
  if (rc) {
    free(*text);
    *text = NULL;
    *len = 0;
  }
  return rc;
}

int emit_net_write(const char *path, const IrGraph *g, Diag *d, const char *src) {
  char *text;
  size_t len;
  if (emit_net_text(g, d, src, path, &text, &len)) return -1;
  FILE *f = fopen(path, "w");
  int rc = 0;
  if (!f || fwrite(text, 1, len, f) != len || fclose(f)) {
    diag_error(d, (SrcLoc){.file = path}, "cannot write the .net file");
    rc = -1;
  }
  free(text);
  return rc;
}
