/* ir_read.c - parses the IR's text form (what ir_print.c writes) back into
 * an IrGraph, so that a test can start right before the pass it tests.
 *
 * The text is read line by line; each line is one declaration, node or
 * comment (grammar in docs/ir.md).  %N numbers are labels: each is defined
 * once (by an input declaration or as a node's result) and must be defined
 * before it is used; the read graph gets fresh value ids in text order.
 * @name refers to a param/state declared earlier.  A line `optimizer:`
 * starts the optimizer section at the next node (IrGraph.opt_first).  The
 * reader checks syntax and names only; op arity, attribute keys, types and
 * which ops the optimizer section holds are ir_verify's job.
 * Errors carry file:line:col in the text; after one the rest of the line is
 * skipped and reading goes on, so several are reported.  The input may be
 * any bytes: nothing here reads past len or trusts a number's size.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

enum {
  POISONED = -2,       /* label of a result whose line had an error: uses stay quiet */
  MAX_LABEL = 1 << 20, /* %N above this is refused: the label table is an array */
  NUM_BUF = 64,        /* longest number token */
};

typedef struct Reader {
  Arena *a;
  Diag *d;
  const char *path;
  const char *end;        /* end of the whole text */
  const char *line_start; /* current line */
  const char *line_end;   /* at its '\n' or the end of the text */
  int line;
  const char *p; /* cursor inside the line */
  IrGraph *g;
  int *label; /* %N -> value id, -1 when undefined */
  int nlabel;
  const char *loc_file; /* last file name seen in a node comment, interned */
  int has_plan;         /* a 'plan' line was read */
  int opt_line;         /* the line of 'optimizer:', or 0 */
  int nerr;
} Reader;

/* Reports an error at byte q of the current line; returns -1. */
static int fail_at(Reader *r, const char *q, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_at(Reader *r, const char *q, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  SrcLoc loc = {r->path, r->line, (int)(q - r->line_start) + 1};
  diag_error(r->d, loc, "%s", msg);
  r->nerr++;
  return -1;
}

static int oom(Reader *r) { return fail_at(r, r->p, "out of memory"); }

static int at_end(const Reader *r) { return r->p >= r->line_end; }
static int peek(const Reader *r) { return at_end(r) ? -1 : (unsigned char)*r->p; }

static void skip_ws(Reader *r) {
  while (!at_end(r) && (*r->p == ' ' || *r->p == '\t' || *r->p == '\r')) r->p++;
}

static int accept(Reader *r, char c) {
  skip_ws(r);
  if (peek(r) != (unsigned char)c) return 0;
  r->p++;
  return 1;
}

/* Shows the offending byte readably in a message. */
static const char *show(const Reader *r, char buf[16]) {
  int c = peek(r);
  if (c < 0) return "end of line";
  if (c == ' ') return "a space";
  if (c > 0x20 && c < 0x7f)
    snprintf(buf, 16, "'%c'", c);
  else
    snprintf(buf, 16, "byte 0x%02x", c);
  return buf;
}

static int expect(Reader *r, char c, const char *what) {
  char b[16];
  if (accept(r, c)) return 0;
  return fail_at(r, r->p, "expected '%c' %s, found %s", c, what, show(r, b));
}

/* c right here, with no space before it: "f32[", "k=", "relu(", "@w". */
static int expect_here(Reader *r, char c, const char *what) {
  char b[16];
  if (peek(r) == (unsigned char)c) {
    r->p++;
    return 0;
  }
  return fail_at(r, r->p, "expected '%c' %s, found %s", c, what, show(r, b));
}

static int is_name_char(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

/* NAME: [A-Za-z0-9_.]+, copied into the arena. */
static const char *read_name(Reader *r, const char *what) {
  char b[16];
  skip_ws(r);
  const char *s = r->p;
  while (!at_end(r) && is_name_char((unsigned char)*r->p)) r->p++;
  if (r->p == s) {
    fail_at(r, r->p, "expected %s, found %s", what, show(r, b));
    return NULL;
  }
  const char *n = arena_strndup(r->a, s, (size_t)(r->p - s));
  if (!n) oom(r);
  return n;
}

/* A lowercase word (op, dtype, keyword) into buf; "" when there is none. */
static const char *read_word(Reader *r, char *buf, size_t len) {
  skip_ws(r);
  size_t n = 0;
  while (!at_end(r) && (is_name_char((unsigned char)*r->p) && *r->p != '.')) {
    if (n + 1 < len)
      buf[n++] = *r->p;
    else
      buf[n - 1] = '~'; /* too long: matches no keyword */
    r->p++;
  }
  buf[n] = 0;
  return buf;
}

/* An optionally signed decimal integer, with overflow checked. */
static int read_int(Reader *r, int64_t *out) {
  char b[16];
  const char *s = r->p;
  int neg = 0;
  if (peek(r) == '-') neg = 1, r->p++;
  if (peek(r) < '0' || peek(r) > '9') return fail_at(r, r->p, "expected an integer, found %s", show(r, b));
  uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  while (peek(r) >= '0' && peek(r) <= '9') {
    unsigned dig = (unsigned)(*r->p - '0');
    if (v > (lim - dig) / 10) return fail_at(r, s, "integer out of range");
    v = v * 10 + dig;
    r->p++;
  }
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 0;
}

/* Digits s[0..e) as a number in 0..INT32_MAX, without reporting; -1 when not. */
static int64_t span_uint(const char *s, const char *e) {
  int64_t v = 0;
  if (s == e) return -1;
  for (; s < e; s++) {
    if (*s < '0' || *s > '9') return -1;
    v = v * 10 + (*s - '0');
    if (v > INT32_MAX) return -1;
  }
  return v;
}

/* TYPE: DTYPE '[' [DIM (',' DIM)*] ']' [LAYOUT], DIM: 'N' or an integer >= 0. */
static int read_type(Reader *r, IrType *t) {
  char w[16];
  skip_ws(r);
  const char *s = r->p;
  int dt = ir_dtype_parse(read_word(r, w, sizeof w));
  if (dt < 0) return fail_at(r, s, "unknown dtype '%s'", w);
  memset(t, 0, sizeof *t);
  t->dtype = (IrDtype)dt;
  if (expect_here(r, '[', "after the dtype")) return -1;
  skip_ws(r);
  if (!accept(r, ']')) {
    do {
      skip_ws(r);
      if (t->rank == IR_MAX_RANK) return fail_at(r, r->p, "rank above %d", IR_MAX_RANK);
      if (peek(r) == 'N') {
        r->p++;
        t->dim[t->rank++] = IR_DIM_N;
        continue;
      }
      const char *ds = r->p;
      if (read_int(r, &t->dim[t->rank])) return -1;
      if (t->dim[t->rank] < 0) return fail_at(r, ds, "negative dimension");
      t->rank++;
    } while (accept(r, ','));
    if (expect(r, ']', "to close the dims")) return -1;
  }
  /* A layout follows after a space; a ',' or the comment ends the type. */
  const char *save = r->p;
  skip_ws(r);
  if (peek(r) >= 'A' && peek(r) <= 'Z') {
    const char *ls = r->p;
    char lw[16];
    size_t n = 0;
    while (!at_end(r) && *r->p >= 'A' && *r->p <= 'Z') {
      if (n + 1 < sizeof lw) lw[n++] = *r->p;
      r->p++;
    }
    lw[n] = 0;
    int l = ir_layout_parse(lw);
    if (l < 0) return fail_at(r, ls, "unknown layout '%s'", lw);
    t->layout = (IrLayout)l;
  } else {
    r->p = save;
  }
  return 0;
}

/* [ '@' INT ] after a type: the value's arena offset, or -1 when absent. */
static int read_offset(Reader *r, int64_t *off) {
  char b[16];
  *off = -1;
  const char *save = r->p;
  skip_ws(r);
  if (peek(r) != '@') {
    r->p = save;
    return 0;
  }
  r->p++;
  if (peek(r) < '0' || peek(r) > '9') return fail_at(r, r->p, "expected a byte offset after '@', found %s", show(r, b));
  return read_int(r, off);
}

/* "%N" where N is a label; returns the label number or -1. */
static int read_label(Reader *r) {
  char b[16];
  skip_ws(r);
  if (peek(r) != '%') return fail_at(r, r->p, "expected %%N, found %s", show(r, b));
  r->p++;
  const char *s = r->p;
  int64_t v;
  if (peek(r) == '-' || read_int(r, &v)) return peek(r) == '-' ? fail_at(r, s, "expected a value number") : -1;
  if (v >= MAX_LABEL) return fail_at(r, s, "value number %" PRId64 " too large", v);
  return (int)v;
}

static int label_define(Reader *r, int lab, int value) {
  if (lab >= r->nlabel) {
    int n = r->nlabel ? r->nlabel : 64;
    while (n <= lab) n *= 2;
    int *t = arena_grow(r->a, r->label, sizeof(int) * (size_t)r->nlabel, sizeof(int) * (size_t)n);
    if (!t) return oom(r);
    for (int i = r->nlabel; i < n; i++) t[i] = -1;
    r->label = t;
    r->nlabel = n;
  }
  r->label[lab] = value;
  return 0;
}

/* The value id of a label; -1 undefined, POISONED defined by a line that had an error. */
static int label_value(const Reader *r, int lab) { return lab < r->nlabel ? r->label[lab] : -1; }

/* The param/state named s[0..n-1], or -1. */
static int find_weight(const IrGraph *g, const char *s, size_t n) {
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if ((val->kind == IR_VAL_PARAM || val->kind == IR_VAL_STATE) && strlen(val->name) == n &&
        memcmp(val->name, s, n) == 0)
      return v;
  }
  return -1;
}

/* REF: %N (defined earlier) or @NAME (declared earlier); the value id or -1. */
static int read_ref(Reader *r) {
  skip_ws(r);
  const char *s = r->p;
  if (peek(r) == '@') {
    r->p++;
    if (at_end(r) || !is_name_char((unsigned char)*r->p)) return fail_at(r, r->p, "expected a name after '@'");
    const char *ns = r->p;
    while (!at_end(r) && is_name_char((unsigned char)*r->p)) r->p++;
    int n = (int)(r->p - ns), v = find_weight(r->g, ns, (size_t)n);
    if (v < 0) return fail_at(r, s, "undeclared parameter or state @%.*s", n, ns);
    return v;
  }
  int lab = read_label(r);
  if (lab < 0) return -1;
  int v = label_value(r, lab);
  if (v == POISONED) return -1; /* its definition was reported already */
  if (v < 0) return fail_at(r, s, "value %%%d is used before it is defined", lab);
  return v;
}

static int is_hex(int c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
static int hex_val(int c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

/* STR: '"' ([A-Za-z0-9_.-] | '\xHH')* '"', HH not 00. */
static int read_str(Reader *r, const char **out) {
  const char *s = r->p++;
  size_t cap = 0;
  for (const char *q = r->p; q < r->line_end && *q != '"'; q++) cap++;
  char *buf = arena_alloc(r->a, cap + 1), *o = buf;
  if (!buf) return oom(r);
  for (;;) {
    int c = peek(r);
    if (c < 0) return fail_at(r, s, "unterminated string");
    if (c == '"') break;
    if (c == '\\') {
      const char *e = r->p;
      if (r->line_end - r->p < 4 || r->p[1] != 'x' || !is_hex((unsigned char)r->p[2]) ||
          !is_hex((unsigned char)r->p[3]))
        return fail_at(r, e, "bad escape in string (only \\xHH)");
      int v = hex_val((unsigned char)r->p[2]) * 16 + hex_val((unsigned char)r->p[3]);
      if (v == 0) return fail_at(r, e, "\\x00 in string");
      *o++ = (char)v;
      r->p += 4;
      continue;
    }
    if (!is_name_char(c) && c != '-')
      return fail_at(r, r->p, "character 0x%02x in string must be written \\x%02x", c, c);
    *o++ = (char)c;
    r->p++;
  }
  r->p++;
  *o = 0;
  *out = buf;
  return 0;
}

/* VALUE: INT | INTS (7x7 or [3]) | FLOAT (has '.' or 'e', or inf/nan) | DTYPE | STR. */
static int read_attr_value(Reader *r, IrAttr *a) {
  if (peek(r) == '"') {
    a->kind = IR_ATTR_STR;
    return read_str(r, &a->s);
  }
  const char *s = r->p;
  if (peek(r) == '[') {
    r->p++;
    a->kind = IR_ATTR_INTS;
    a->n = 1;
    if (read_int(r, &a->i[0])) return -1;
    if (peek(r) != ']') return fail_at(r, r->p, "expected ']' after a one-element list");
    r->p++;
    return 0;
  }
  while (!at_end(r) && *r->p != ' ' && *r->p != '\t' && *r->p != '\r' && *r->p != '}') r->p++;
  size_t n = (size_t)(r->p - s);
  char tok[NUM_BUF];
  if (n == 0) return fail_at(r, s, "missing attribute value");
  if (n >= sizeof tok) return fail_at(r, s, "attribute value too long");
  memcpy(tok, s, n);
  tok[n] = 0;
  int dt = ir_dtype_parse(tok);
  if (dt >= 0) {
    a->kind = IR_ATTR_DTYPE;
    a->n = 1;
    a->i[0] = dt;
    return 0;
  }
  if (strchr(tok, 'x')) {
    a->kind = IR_ATTR_INTS;
    Reader sub = *r;
    sub.p = s;
    sub.line_end = r->p;
    a->n = 0;
    for (;;) {
      if (a->n == IR_MAX_INTS) return fail_at(r, sub.p, "more than %d integers", IR_MAX_INTS);
      if (read_int(&sub, &a->i[a->n++])) return r->nerr++, -1;
      if (peek(&sub) != 'x') break;
      sub.p++;
    }
    if (!at_end(&sub)) return fail_at(r, sub.p, "bad integer list '%s'", tok);
    return 0;
  }
  int alpha = (tok[0] >= 'a' && tok[0] <= 'z') || (tok[0] >= 'A' && tok[0] <= 'Z');
  if (alpha && strcmp(tok, "inf") != 0 && strcmp(tok, "nan") != 0)
    return fail_at(r, s, "bad attribute value '%s' (strings are quoted)", tok);
  int floaty = strpbrk(tok, ".eE") || !strcmp(tok, "inf") || !strcmp(tok, "-inf") || !strcmp(tok, "nan");
  if (floaty) {
    if (strpbrk(tok, "pPxX") || strstr(tok, "infinity") || strchr(tok, '('))
      return fail_at(r, s, "bad number '%s'", tok);
    char *e;
    a->kind = IR_ATTR_FLOAT;
    a->f = strtod(tok, &e);
    if (*e || e == tok) return fail_at(r, s, "bad number '%s'", tok);
    return 0;
  }
  a->kind = IR_ATTR_INT;
  a->n = 1;
  Reader sub = *r;
  sub.p = s;
  sub.line_end = r->p;
  if (read_int(&sub, &a->i[0])) return r->nerr++, -1;
  if (!at_end(&sub)) return fail_at(r, s, "bad attribute value '%s' (strings are quoted)", tok);
  return 0;
}

/* ATTR: KEY '=' VALUE.  Keys may repeat in the text; the verifier judges. */
static int read_attr(Reader *r, IrAttr *a) {
  memset(a, 0, sizeof *a);
  if (!(a->key = read_name(r, "an attribute name"))) return -1;
  if (expect_here(r, '=', "after the attribute name")) return -1;
  return read_attr_value(r, a);
}

/* Attributes until stop (a '}' or the end of line), into an arena array. */
static int read_attrs(Reader *r, int stop_brace, IrAttr **out, int *nout) {
  IrAttr *arr = NULL;
  int n = 0, cap = 0;
  for (;;) {
    skip_ws(r);
    if (stop_brace && peek(r) == '}') {
      r->p++;
      break;
    }
    if (!stop_brace && (at_end(r) || peek(r) == '#')) break;
    if (stop_brace && at_end(r)) return fail_at(r, r->p, "missing '}' after the attributes");
    if (!ARENA_RESERVE(r->a, arr, n, cap)) return oom(r);
    if (read_attr(r, &arr[n])) return -1;
    n++;
  }
  *out = arr;
  *nout = n;
  return 0;
}

/* The rest of a line must be empty or a comment. */
static int end_line(Reader *r) {
  char b[16];
  skip_ws(r);
  if (at_end(r) || peek(r) == '#') return 0;
  return fail_at(r, r->p, "unexpected %s", show(r, b));
}

/* "  # NAME @ FILE:LINE:COL", "  # NAME", "  # @ FILE:LINE:COL" or nothing. */
static int read_node_comment(Reader *r, const char **name, SrcLoc *loc) {
  char b[16];
  *name = NULL;
  memset(loc, 0, sizeof *loc);
  skip_ws(r);
  if (at_end(r)) return 0;
  if (peek(r) != '#') return fail_at(r, r->p, "unexpected %s after the node", show(r, b));
  r->p++;
  skip_ws(r);
  if (peek(r) != '@') {
    if (!(*name = read_name(r, "a layer name or '@' in the node comment"))) return -1;
    skip_ws(r);
    if (at_end(r)) return 0;
    if (peek(r) != '@') return fail_at(r, r->p, "expected '@ FILE:LINE:COL' or end of line, found %s", show(r, b));
  }
  r->p++;
  skip_ws(r);
  const char *fs = r->p, *fe = r->line_end;
  while (fe > fs && (fe[-1] == ' ' || fe[-1] == '\t' || fe[-1] == '\r')) fe--;
  const char *c2 = fe, *c1;
  while (c2 > fs && c2[-1] != ':') c2--;
  c1 = c2 > fs ? c2 - 1 : fs;
  while (c1 > fs && c1[-1] != ':') c1--;
  if (c2 <= fs || c1 <= fs + 1) return fail_at(r, fs, "expected FILE:LINE:COL after '@'");
  int64_t ln = span_uint(c1, c2 - 1), col = span_uint(c2, fe);
  if (ln < 0) return fail_at(r, c1, "bad line number in the node comment");
  if (col < 0) return fail_at(r, c2, "bad column in the node comment");
  size_t flen = (size_t)(c1 - 1 - fs);
  for (const char *q = fs; q < c1 - 1; q++) /* ir_print writes these as '?' */
    if ((unsigned char)*q < 0x20 || *q == 0x7f) return fail_at(r, q, "control character in the file name");
  if (!r->loc_file || strlen(r->loc_file) != flen || memcmp(r->loc_file, fs, flen) != 0)
    if (!(r->loc_file = arena_strndup(r->a, fs, flen))) return oom(r);
  loc->file = r->loc_file;
  loc->line = (int)ln;
  loc->col = (int)col;
  r->p = r->line_end;
  return 0;
}

enum { MAX_RESULTS = 64 };

static int read_node_rest(Reader *r, const int *res, int nres);

/* NODE: [%N (',' %N)* '='] OP '(' [REF (',' REF)*] ')' ['{' ATTR* '}']
 *       [':' TYPE (',' TYPE)*] [COMMENT]  -- one TYPE per result. */
static int read_node(Reader *r) {
  int res[MAX_RESULTS] = {0}, nres = 0;
  const char *res_at[MAX_RESULTS];
  skip_ws(r);
  if (peek(r) == '%') {
    do {
      skip_ws(r);
      if (nres == MAX_RESULTS) return fail_at(r, r->p, "more than %d results", MAX_RESULTS);
      res_at[nres] = r->p;
      int lab = read_label(r);
      if (lab < 0) return -1;
      if (label_value(r, lab) != -1) return fail_at(r, res_at[nres], "value %%%d is defined twice", lab);
      for (int k = 0; k < nres; k++)
        if (res[k] == lab) return fail_at(r, res_at[nres], "value %%%d is defined twice", lab);
      res[nres++] = lab;
    } while (accept(r, ','));
    if (expect(r, '=', "after the results")) return -1;
  }
  if (read_node_rest(r, res, nres) == 0) return 0;
  for (int k = 0; k < nres; k++)
    if (label_define(r, res[k], POISONED)) break;
  return -1;
}

/* A node line after its results: op, inputs, attributes, types, comment. */
static int read_node_rest(Reader *r, const int *res, int nres) {
  char w[64];
  skip_ws(r);
  const char *os = r->p;
  int op = ir_op_parse(read_word(r, w, sizeof w));
  if (!w[0]) return fail_at(r, os, "expected an op name");
  if (op < 0) return fail_at(r, os, "unknown op '%s'", w);
  if (expect_here(r, '(', "after the op name")) return -1;
  int *in = NULL, nin = 0, capin = 0;
  if (!accept(r, ')')) {
    do {
      if (!ARENA_RESERVE(r->a, in, nin, capin)) return oom(r);
      if ((in[nin++] = read_ref(r)) < 0) return -1;
    } while (accept(r, ','));
    if (expect(r, ')', "after the inputs")) return -1;
  }
  IrAttr *attr = NULL;
  int nattr = 0;
  if (accept(r, '{') && read_attrs(r, 1, &attr, &nattr)) return -1;
  IrType types[MAX_RESULTS];
  int64_t offs[MAX_RESULTS];
  if (nres > 0) {
    if (expect(r, ':', "before the result types")) return -1;
    for (int k = 0; k < nres; k++) {
      if (k && expect(r, ',', "between result types")) return -1;
      if (read_type(r, &types[k]) || read_offset(r, &offs[k])) return -1;
    }
    skip_ws(r);
    if (peek(r) == ',') return fail_at(r, r->p, "more types than results");
  } else if (accept(r, ':')) {
    return fail_at(r, r->p - 1, "a node without results has no types");
  }
  const char *name;
  SrcLoc loc;
  if (read_node_comment(r, &name, &loc)) return -1;
  int id = ir_node_add(r->g, (IrOp)op, name, loc, in, nin, types, nres);
  if (id < 0) return oom(r);
  r->g->node[id].attr = attr;
  r->g->node[id].nattr = nattr;
  for (int k = 0; k < nres; k++) {
    r->g->val[r->g->node[id].out[k]].offset = offs[k];
    if (label_define(r, res[k], r->g->node[id].out[k])) return -1;
  }
  return 0;
}

/* INPUT: 'input' %N NAME ':' TYPE [OFFSET] */
static int read_input(Reader *r) {
  skip_ws(r);
  const char *s = r->p;
  int lab = read_label(r);
  if (lab < 0) return -1;
  if (label_value(r, lab) != -1) return fail_at(r, s, "value %%%d is defined twice", lab);
  const char *name = read_name(r, "an input name");
  IrType t;
  int64_t off;
  if (!name || expect(r, ':', "before the type") || read_type(r, &t) || read_offset(r, &off) || end_line(r)) {
    label_define(r, lab, POISONED);
    return -1;
  }
  int v = ir_value_add(r->g, IR_VAL_INPUT, t, name);
  if (v < 0) return oom(r);
  r->g->val[v].offset = off;
  return label_define(r, lab, v);
}

/* PARAM: ('param' | 'state') '@' NAME ':' TYPE [OFFSET] */
static int read_weight(Reader *r, IrValueKind kind) {
  skip_ws(r);
  const char *s = r->p;
  if (expect_here(r, '@', "before the name")) return -1;
  if (at_end(r) || !is_name_char((unsigned char)*r->p)) return fail_at(r, r->p, "expected a name after '@'");
  const char *name = read_name(r, "a name");
  IrType t;
  int64_t off;
  if (!name || expect(r, ':', "before the type") || read_type(r, &t) || read_offset(r, &off) || end_line(r)) return -1;
  if (find_weight(r->g, name, strlen(name)) >= 0) return fail_at(r, s, "@%s is declared twice", name);
  int v = ir_value_add(r->g, kind, t, name);
  if (v < 0) return oom(r);
  r->g->val[v].offset = off;
  return 0;
}

/* TRAIN: 'train' ATTR* ; keys must be distinct (ir_train_set would merge them). */
static int read_train(Reader *r) {
  IrAttr *attr;
  int n;
  const char *s = r->p;
  if (read_attrs(r, 0, &attr, &n)) return -1;
  for (int i = 0; i < n; i++) {
    if (ir_train_find(r->g, attr[i].key)) return fail_at(r, s, "train key '%s' given twice", attr[i].key);
    if (!ir_train_set(r->g, &attr[i])) return oom(r);
  }
  return 0;
}

/* "KEY=INT" with this key and a non-negative integer. */
static int read_plan_field(Reader *r, const char *key, int64_t *v) {
  char w[16];
  skip_ws(r);
  const char *s = r->p;
  if (strcmp(read_word(r, w, sizeof w), key) != 0) return fail_at(r, s, "expected '%s=' in the plan line", key);
  if (expect_here(r, '=', "after the key")) return -1;
  const char *n = r->p;
  if (read_int(r, v)) return -1;
  return *v < 0 ? fail_at(r, n, "negative %s in the plan line", key) : 0;
}

/* PLAN: 'plan' 'bytes=' INT 'batch=' INT -- the memory plan's arena size. */
static int read_plan(Reader *r) {
  const char *s = r->p;
  if (r->has_plan) return fail_at(r, s, "plan given twice");
  if (read_plan_field(r, "bytes", &r->g->plan_bytes) || read_plan_field(r, "batch", &r->g->plan_batch)) return -1;
  r->has_plan = 1;
  return end_line(r);
}

/* OPTIMIZER: 'optimizer' ':' -- the optimizer section starts at the next node. */
static int read_optimizer(Reader *r, const char *s) {
  if (expect_here(r, ':', "after 'optimizer'")) return -1;
  if (r->opt_line) return fail_at(r, s, "the optimizer section already started at line %d", r->opt_line);
  r->opt_line = r->line;
  r->g->opt_first = r->g->nnode;
  return end_line(r);
}

/* OUTPUT: 'output' REF (',' REF)* */
static int read_output(Reader *r) {
  do {
    int v = read_ref(r);
    if (v < 0) return -1;
    if (ir_output_add(r->g, v)) return oom(r);
  } while (accept(r, ','));
  return end_line(r);
}

/* One line of the graph body; sets *closed at the closing '}'. */
static int read_body_line(Reader *r, int *closed) {
  skip_ws(r);
  if (at_end(r) || peek(r) == '#') return 0;
  if (peek(r) == '}') {
    r->p++;
    *closed = 1;
    return end_line(r);
  }
  if (peek(r) == '%') return read_node(r);
  const char *s = r->p;
  char w[16];
  read_word(r, w, sizeof w);
  int kw = peek(r) == ' ' || peek(r) == '\t';
  if (kw && !strcmp(w, "input")) return read_input(r);
  if (kw && !strcmp(w, "param")) return read_weight(r, IR_VAL_PARAM);
  if (kw && !strcmp(w, "state")) return read_weight(r, IR_VAL_STATE);
  if (kw && !strcmp(w, "output")) return read_output(r);
  if (kw && !strcmp(w, "plan")) return read_plan(r);
  if (!strcmp(w, "optimizer") && peek(r) != '(') return read_optimizer(r, s);
  if (!strcmp(w, "train") && (kw || at_end(r))) return read_train(r);
  r->p = s;
  return read_node(r);
}

/* GRAPH: 'graph' NAME '{' */
static int read_graph_line(Reader *r) {
  char w[16];
  const char *s = r->p;
  if (strcmp(read_word(r, w, sizeof w), "graph") != 0) return fail_at(r, s, "expected 'graph NAME {'");
  const char *name = read_name(r, "the graph name");
  if (!name || expect(r, '{', "after the graph name") || end_line(r)) return -1;
  if (!(r->g = ir_graph_new(r->a, name))) return oom(r);
  return 0;
}

static void next_line(Reader *r) {
  r->line_start = r->line_end < r->end ? r->line_end + 1 : r->end;
  r->line_end = memchr(r->line_start, '\n', (size_t)(r->end - r->line_start));
  if (!r->line_end) r->line_end = r->end;
  r->p = r->line_start;
  r->line++;
}

IrGraph *ir_read(Arena *a, Diag *d, const char *path, const char *text, size_t len) {
  Reader r = {.a = a, .d = d, .path = path, .end = text + len};
  Diag saved = *d; /* errors here show lines of this text; restore the caller's after */
  diag_set_source(d, path, text, len);
  r.line_end = text - 1; /* next_line() starts at text */
  int closed = 0;
  while (r.line_end < r.end) {
    next_line(&r);
    skip_ws(&r);
    if (at_end(&r) || peek(&r) == '#') continue;
    if (closed) {
      end_line(&r);
      break;
    }
    if (!r.g) {
      if (read_graph_line(&r)) break;
      continue;
    }
    read_body_line(&r, &closed);
  }
  if (!r.nerr && !r.g)
    fail_at(&r, r.p, "expected 'graph NAME {'");
  else if (!r.nerr && !closed)
    fail_at(&r, r.p, "missing '}' at the end of the graph");
  d->file = saved.file, d->src = saved.src, d->srclen = saved.srclen;
  return r.nerr ? NULL : r.g;
}
