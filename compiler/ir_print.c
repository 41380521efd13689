/* ir_print.c - writes an IrGraph in the IR's text form (docs/ir.md).
 *
 * The dump is the user's window into the compiler and the format of every
 * golden test, so it is stable and diffable: no pointers, no hash order.
 * Inputs and activations are renumbered densely in print order (%0, %1, ...)
 * whatever their ids inside the graph; parameters and state print as @name
 * and are declared in order of first use.  Any graph prints, even a broken
 * one (a value that no node defines shows as %?ID with its internal id), so
 * a verifier failure can always be looked at; ir_read.c reads back exactly
 * what a well-formed graph prints:
 *
 *   # netc IR after 'parse'
 *   graph tiny {
 *     input %0 image : f32[N,3,8,8] NCHW
 *     param @conv1.weight : f32[4,3,3,3] KCRS
 *     %1 = conv2d(%0, @conv1.weight) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,4,8,8] NCHW  # conv1 @ tiny.net:3:9
 *     output %1
 *   }
 *
 * After the memory plan (pass_memplan.c) the header gains a line
 * `plan bytes=N batch=B` and every planned value's type is followed by its
 * arena offset, `: f32[N,4,8,8] NCHW @256`.  A training step's optimizer
 * section (IrGraph.opt_first) starts after a line `optimizer:`:
 *
 *   %56 = conv2d_bwd_weight(%50, %0) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[16,3,3,1] KRSC  # conv1.wgrad
 *   optimizer:
 *   sgd_update(@conv1.weight, %56, @conv1.weight.momentum_buffer, %2, %3) {...}  # conv1.weight.sgd
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct Printer {
  FILE *f;
  const IrGraph *g;
  int *num; /* print number of each value, -1 when none */
} Printer;

static int valid_id(const IrGraph *g, int v) { return v >= 0 && v < g->nval; }

/* Inputs first in value order, then every node's results in node order. */
static void number_values(Printer *p) {
  const IrGraph *g = p->g;
  int next = 0;
  for (int v = 0; v < g->nval; v++) p->num[v] = g->val[v].kind == IR_VAL_INPUT ? next++ : -1;
  for (int i = 0; i < g->nnode; i++)
    for (int k = 0; k < g->node[i].nout; k++) {
      int v = g->node[i].out[k];
      if (valid_id(g, v) && p->num[v] < 0 && g->val[v].kind == IR_VAL_ACT) p->num[v] = next++;
    }
}

static void print_ref(Printer *p, int v) {
  if (!valid_id(p->g, v)) {
    fprintf(p->f, "%%?%d", v);
    return;
  }
  const IrValue *val = &p->g->val[v];
  if (val->kind == IR_VAL_PARAM || val->kind == IR_VAL_STATE)
    fprintf(p->f, "@%s", val->name ? val->name : "?");
  else if (p->num[v] >= 0)
    fprintf(p->f, "%%%d", p->num[v]);
  else
    fprintf(p->f, "%%?%d", v);
}

static void print_type(FILE *f, const IrType *t) {
  int rank = t->rank < 0 ? 0 : t->rank > IR_MAX_RANK ? IR_MAX_RANK : t->rank;
  fprintf(f, "%s[", ir_dtype_name(t->dtype));
  for (int i = 0; i < rank; i++) {
    if (i) fputc(',', f);
    if (t->dim[i] == IR_DIM_N)
      fputc('N', f);
    else
      fprintf(f, "%" PRId64, t->dim[i]);
  }
  fputc(']', f);
  if (t->layout != IR_LAYOUT_ROW) fprintf(f, " %s", ir_layout_name(t->layout));
}

/* The shortest %g text that reads back to the same double, always with a
 * '.' or an 'e' so that the reader can tell it from an integer. */
static void format_float(double v, char *buf, size_t len) {
  if (isnan(v)) {
    snprintf(buf, len, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, len, v < 0 ? "-inf" : "inf");
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, len, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  if (!strpbrk(buf, ".e")) strncat(buf, ".0", len - strlen(buf) - 1);
}

static int str_char_plain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

/* Any byte outside [A-Za-z0-9_.-] is written as \xHH (the verifier rejects
 * such strings, but a broken graph must still print unambiguously). */
static void print_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
    if (str_char_plain(*c))
      fputc(*c, f);
    else
      fprintf(f, "\\x%02x", *c);
  }
  fputc('"', f);
}

static void print_attr(FILE *f, const IrAttr *a) {
  char buf[40];
  fprintf(f, "%s=", a->key ? a->key : "?");
  switch (a->kind) {
  case IR_ATTR_INT: fprintf(f, "%" PRId64, a->i[0]); break;
  case IR_ATTR_INTS: {
    int n = a->n < 0 ? 0 : a->n > IR_MAX_INTS ? IR_MAX_INTS : a->n;
    if (n == 1) {
      fprintf(f, "[%" PRId64 "]", a->i[0]);
      break;
    }
    if (n == 0) fputs("[]", f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%" PRId64, i ? "x" : "", a->i[i]);
    break;
  }
  case IR_ATTR_FLOAT:
    format_float(a->f, buf, sizeof buf);
    fputs(buf, f);
    break;
  case IR_ATTR_DTYPE: fputs(ir_dtype_name((IrDtype)a->i[0]), f); break;
  case IR_ATTR_STR: print_str(f, a->s); break;
  default: fputs("?", f);
  }
}

/* "  # NAME @ FILE:LINE:COL", or less of it; nothing when there is neither. */
static void print_comment(FILE *f, const IrNode *n, int no_loc) {
  int has_loc = !no_loc && n->loc.file;
  if (!n->name && !has_loc) return;
  fputs("  #", f);
  if (n->name) fprintf(f, " %s", n->name);
  if (!has_loc) return;
  fputs(" @ ", f);
  for (const unsigned char *c = (const unsigned char *)n->loc.file; *c; c++)
    fputc(*c < 0x20 || *c == 0x7f ? '?' : *c, f);
  fprintf(f, ":%d:%d", n->loc.line, n->loc.col);
}

/* " @OFFSET" after a value's type once the memory plan placed it. */
static void print_offset(FILE *f, const IrValue *v) {
  if (v->offset >= 0) fprintf(f, " @%" PRId64, v->offset);
}

static void print_node(Printer *p, const IrNode *n, int no_loc) {
  const IrOpInfo *info = ir_op_info(n->op);
  FILE *f = p->f;
  fputs("  ", f);
  for (int k = 0; k < n->nout; k++) {
    if (k) fputs(", ", f);
    print_ref(p, n->out[k]);
  }
  if (n->nout > 0) fputs(" = ", f);
  if (info && info->name)
    fputs(info->name, f);
  else
    fprintf(f, "?op%d", (int)n->op);
  fputc('(', f);
  for (int k = 0; k < n->nin; k++) {
    if (k) fputs(", ", f);
    print_ref(p, n->in[k]);
  }
  fputc(')', f);
  if (n->nattr > 0) {
    fputs(" {", f);
    for (int k = 0; k < n->nattr; k++) {
      if (k) fputc(' ', f);
      print_attr(f, &n->attr[k]);
    }
    fputc('}', f);
  }
  for (int k = 0; k < n->nout; k++) {
    fputs(k ? ", " : " : ", f);
    if (valid_id(p->g, n->out[k])) {
      print_type(f, &p->g->val[n->out[k]].type);
      print_offset(f, &p->g->val[n->out[k]]);
    } else
      fputs("?[]", f);
  }
  print_comment(f, n, no_loc);
  fputc('\n', f);
}

static void print_decl(Printer *p, int v) {
  const IrValue *val = &p->g->val[v];
  fprintf(p->f, "  %s ", val->kind == IR_VAL_STATE ? "state" : "param");
  print_ref(p, v);
  fputs(" : ", p->f);
  print_type(p->f, &val->type);
  print_offset(p->f, val);
  fputc('\n', p->f);
}

static int is_weight(const IrGraph *g, int v) {
  return valid_id(g, v) && (g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE);
}

/* Parameters and state in order of first use by the nodes, then unused ones. */
static void print_weights(Printer *p) {
  const IrGraph *g = p->g;
  char *done = calloc((size_t)g->nval + 1, 1);
  if (!done) {
    fputs("  # out of memory: parameter declarations missing\n", p->f);
    return;
  }
  for (int i = 0; i < g->nnode; i++)
    for (int k = 0; k < g->node[i].nin; k++) {
      int v = g->node[i].in[k];
      if (is_weight(g, v) && !done[v]) {
        done[v] = 1;
        print_decl(p, v);
      }
    }
  for (int v = 0; v < g->nval; v++)
    if (is_weight(g, v) && !done[v]) print_decl(p, v);
  free(done);
}

void ir_print(FILE *f, const IrGraph *g, const IrPrintOpts *o) {
  IrPrintOpts none = {0};
  if (!o) o = &none;
  fputs("# netc IR", f);
  if (o->pass) fprintf(f, " after '%s'", o->pass);
  fputc('\n', f);
  Printer p = {f, g, malloc(sizeof(int) * ((size_t)g->nval + 1))};
  if (!p.num) {
    fputs("# out of memory\n", f);
    return;
  }
  number_values(&p);
  fprintf(f, "graph %s {\n", g->name ? g->name : "?");
  if (g->ntrain > 0) {
    fputs("  train", f);
    for (int i = 0; i < g->ntrain; i++) {
      fputc(' ', f);
      print_attr(f, &g->train[i]);
    }
    fputc('\n', f);
  }
  if (g->plan_bytes || g->plan_batch)
    fprintf(f, "  plan bytes=%" PRId64 " batch=%" PRId64 "\n", g->plan_bytes, g->plan_batch);
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind != IR_VAL_INPUT) continue;
    fprintf(f, "  input %%%d %s : ", p.num[v], val->name ? val->name : "?");
    print_type(f, &val->type);
    print_offset(f, val);
    fputc('\n', f);
  }
  print_weights(&p);
  for (int i = 0; i < g->nnode; i++) {
    if (i == g->opt_first) fputs("  optimizer:\n", f);
    print_node(&p, &g->node[i], o->no_loc);
  }
  if (g->opt_first == g->nnode) fputs("  optimizer:\n", f); /* an empty section */
  if (g->opt_first < -1 || g->opt_first > g->nnode)         /* broken: shown, not readable */
    fprintf(f, "  # optimizer section at node #%d, outside the graph\n", g->opt_first);
  if (g->noutput > 0) {
    fputs("  output ", f);
    for (int i = 0; i < g->noutput; i++) {
      if (i) fputs(", ", f);
      print_ref(&p, g->output[i]);
    }
    fputc('\n', f);
  }
  fputs("}\n", f);
  free(p.num);
}
