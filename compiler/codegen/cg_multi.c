/* cg_multi.c - multi-tensor runs: which sgd_update nodes and weight casts
 * one kernel can do together, and that kernel (cg_multi.h gives the
 * rules).  Needs no GPU: the tensors' pointers come from a device table the
 * executor fills (runtime/gpu/rt_gpu_optim.c). */
#include "cg_multi.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_text.h"
#include "cg_tmpl.h"

/* CHUNK elements a block: 4 passes of 256 threads over 4-wide vectors */
enum { BLOCK = 256, CHUNK = 4096, MAX_DEFS = 16 };

/* --- finding the runs ---------------------------------------------------------- */

static IrDtype dtype_of(const IrGraph *g, int v) { return g->val[v].type.dtype; }

/* An sgd_update the multi kernel can do (what emit_sgd accepts). */
static int sgd_ok(const IrGraph *g, const IrNode *n) {
  if (n->op != IR_OP_SGD_UPDATE || n->nin < 5 || n->nin > 6) return 0;
  for (int i = 0; i < 3; i++)
    if (!cg_tmpl_is_float(dtype_of(g, n->in[i]))) return 0;
  for (int i = 3; i < n->nin; i++)
    if (dtype_of(g, n->in[i]) != IR_DT_F32) return 0;
  return 1;
}

/* Whether sgd_updates a and b may share a kernel. */
static int sgd_same(const IrGraph *g, const IrNode *a, const IrNode *b) {
  if (a->nin != b->nin) return 0;
  for (int i = 0; i < 3; i++)
    if (dtype_of(g, a->in[i]) != dtype_of(g, b->in[i])) return 0;
  for (int i = 3; i < a->nin; i++)
    if (a->in[i] != b->in[i]) return 0;
  return (float)ir_attr_float(a, "momentum", 0) == (float)ir_attr_float(b, "momentum", 0) &&
         (float)ir_attr_float(a, "weight_decay", 0) == (float)ir_attr_float(b, "weight_decay", 0) &&
         (ir_attr_int(a, "nesterov", 0) != 0) == (ir_attr_int(b, "nesterov", 0) != 0);
}

/* Whether the sgd_updates lo..hi-1 are independent: no w or buf twice, and
 * none of them read by another node of the stretch (then any order, and one
 * launch, computes what the nodes in order do). */
static int sgd_independent(const IrGraph *g, int lo, int hi) {
  for (int i = lo; i < hi; i++)
    for (int r = 0; r < 3; r += 2) {
      int v = g->node[i].in[r];
      for (int j = lo; j < hi; j++)
        for (int k = 0; k < g->node[j].nin; k++)
          if (g->node[j].in[k] == v && !(j == i && k == r)) return 0;
    }
  return 1;
}

/* A cast of an f32 PARAM to f16/bf16 whose output lies in the arena. */
static int cast_ok(const IrGraph *g, const IrNode *n) {
  if (n->op != IR_OP_CAST || n->nin != 1 || n->nout != 1) return 0;
  const IrValue *x = &g->val[n->in[0]], *y = &g->val[n->out[0]];
  return x->kind == IR_VAL_PARAM && x->type.dtype == IR_DT_F32 &&
         (y->type.dtype == IR_DT_F16 || y->type.dtype == IR_DT_BF16) && y->kind == IR_VAL_ACT && y->offset >= 0;
}

typedef struct Range {
  int64_t lo, hi;
} Range;

typedef struct Ranges {
  Range *r;
  int n, cap;
} Ranges;

static int64_t value_bytes(const IrGraph *g, int v, int64_t batch) {
  int64_t n = ir_type_numel(&g->val[v].type, batch);
  return n < 0 ? -1 : n * (int64_t)ir_dtype_size(g->val[v].type.dtype);
}

/* Arena bytes of value v, or lo = hi = 0 when it has none there. */
static Range arena_range(const IrGraph *g, int v, int64_t batch) {
  const IrValue *val = &g->val[v];
  Range r = {0, 0};
  if ((val->kind == IR_VAL_ACT || val->kind == IR_VAL_INPUT) && val->offset >= 0) {
    int64_t b = value_bytes(g, v, batch);
    r.lo = val->offset, r.hi = val->offset + (b > 0 ? b : 1);
  }
  return r;
}

static int ranges_add(Ranges *s, Range r) {
  if (r.hi <= r.lo) return 0;
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    Range *p = realloc(s->r, (size_t)cap * sizeof *p);
    if (!p) return -1;
    s->r = p, s->cap = cap;
  }
  s->r[s->n++] = r;
  return 0;
}

static int ranges_hit(const Ranges *s, Range r) {
  for (int i = 0; i < s->n; i++)
    if (r.lo < s->r[i].hi && s->r[i].lo < r.hi) return 1;
  return 0;
}

static int ranges_add_node(Ranges *s, const IrGraph *g, const IrNode *n, int64_t batch) {
  for (int k = 0; k < n->nin; k++)
    if (ranges_add(s, arena_range(g, n->in[k], batch))) return -1;
  for (int k = 0; k < n->nout; k++)
    if (ranges_add(s, arena_range(g, n->out[k], batch))) return -1;
  return 0;
}

static int run_add(CgMultiPlan *p, CgMultiKind kind, const int *node, int n) {
  CgMultiRun *r = realloc(p->run, (size_t)(p->nrun + 1) * sizeof *r);
  if (!r) return -1;
  p->run = r;
  r = &p->run[p->nrun];
  memset(r, 0, sizeof *r);
  r->kind = kind, r->n = n;
  if (!(r->node = malloc((size_t)n * sizeof *r->node))) return -1;
  memcpy(r->node, node, (size_t)n * sizeof *node);
  p->nrun++;
  return 0;
}

/* Every stretch of sgd_updates (in the optimizer section), split by
 * sgd_same into runs. */
static int find_sgd_runs(const IrGraph *g, CgMultiPlan *p, int *buf, char *taken) {
  for (int lo = ir_opt_start(g), hi; lo<g->nnode; lo = hi> lo ? hi : lo + 1) {
    for (hi = lo; hi < g->nnode && g->node[hi].op == IR_OP_SGD_UPDATE; hi++) {
    }
    if (hi - lo < 2 || !sgd_independent(g, lo, hi)) continue;
    for (int i = lo; i < hi; i++) {
      if (taken[i] || !sgd_ok(g, &g->node[i])) continue;
      int n = 0;
      for (int j = i; j < hi; j++)
        if (!taken[j] && sgd_ok(g, &g->node[j]) && sgd_same(g, &g->node[i], &g->node[j])) buf[n++] = j;
      if (n < 2) continue;
      for (int k = 0; k < n; k++) taken[buf[k]] = 1;
      if (run_add(p, CG_MULTI_SGD, buf, n)) return -1;
    }
  }
  return 0;
}

/* Casts of parameters gathered at the first of them (see the header), on
 * its side of the optimizer section's start. */
static int find_cast_runs(const IrGraph *g, int64_t batch, CgMultiPlan *p, int *buf, char *taken) {
  Ranges used = {0};
  int rc = 0;
  for (int i = 0; !rc && i < g->nnode; i++) {
    const IrNode *h = &g->node[i];
    if (taken[i] || !cast_ok(g, h)) continue;
    int end = i < ir_opt_start(g) ? ir_opt_start(g) : g->nnode;
    IrDtype ty = dtype_of(g, h->out[0]);
    int n = 0;
    buf[n++] = i;
    used.n = 0;
    rc = ranges_add(&used, arena_range(g, h->out[0], batch));
    for (int j = i + 1; !rc && j < end; j++) {
      const IrNode *c = &g->node[j];
      if (!taken[j] && cast_ok(g, c) && dtype_of(g, c->out[0]) == ty &&
          ir_node_once(c) == ir_node_once(h) && /* all run in the step, or none (pass_hoist) */
          !ranges_hit(&used, arena_range(g, c->out[0], batch))) {
        buf[n++] = j;
        rc = ranges_add(&used, arena_range(g, c->out[0], batch));
      } else {
        rc = ranges_add_node(&used, g, c, batch);
      }
    }
    if (rc || n < 2) continue;
    for (int k = 0; k < n; k++) taken[buf[k]] = 1;
    rc = run_add(p, CG_MULTI_CAST, buf, n);
  }
  free(used.r);
  return rc;
}

/* --- the kernels --------------------------------------------------------------- */

typedef struct Defs {
  int n;
  char name[MAX_DEFS][32];
  char *value[MAX_DEFS];
} Defs;

static void def(Defs *d, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void def(Defs *d, const char *name, const char *fmt, ...) {
  char b[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  snprintf(d->name[d->n], sizeof d->name[d->n], "%s", name);
  d->value[d->n++] = strdup(b);
}

static void defs_free(Defs *d) {
  for (int i = 0; i < d->n; i++) free(d->value[i]);
  d->n = 0;
}

/* A float attribute as a literal with every bit of its f32 value (as cg_kernels.c writes it). */
static void def_float(Defs *d, const char *name, double v) {
  char b[48];
  cg_tmpl_float(b, sizeof b, v);
  def(d, name, "%s", b);
}

/* The counts and first blocks of run r (tensor k: the node's input 0) as
 * NETC_COUNTS and NETC_BLOCK0; r->blocks = the grid.  -1 when a count is
 * unknown or the grid too large. */
static int def_layout(Defs *d, const IrGraph *g, int64_t batch, CgMultiRun *r) {
  CgText counts = {0}, first = {0};
  int64_t blocks = 0;
  cg_text_puts(&counts, "{");
  cg_text_puts(&first, "{");
  for (int k = 0; k < r->n; k++) {
    int64_t n = ir_type_numel(&g->val[g->node[r->node[k]].in[0]].type, batch);
    if (n < 0) blocks = -1;
    cg_text_printf(&counts, "%s%lldLL", k ? ", " : "", (long long)n);
    cg_text_printf(&first, "%s%lld", k ? ", " : "", (long long)blocks);
    if (blocks >= 0) blocks += (n + CHUNK - 1) / CHUNK;
    if (blocks > 0x7fffffff) blocks = -1;
  }
  cg_text_printf(&first, ", %lld}", (long long)blocks);
  cg_text_puts(&counts, "}");
  int rc = counts.bad || first.bad || blocks <= 0 ? -1 : 0;
  if (!rc) {
    snprintf(d->name[d->n], sizeof d->name[d->n], "NETC_COUNTS");
    d->value[d->n++] = counts.p;
    snprintf(d->name[d->n], sizeof d->name[d->n], "NETC_BLOCK0");
    d->value[d->n++] = first.p;
    counts.p = first.p = NULL;
  }
  free(counts.p);
  free(first.p);
  r->blocks = blocks;
  return rc;
}

/* The defines and launch of run r; *tmpl = its template. */
static int run_defs(const IrGraph *g, int64_t batch, CgMultiRun *r, Defs *d, const char **tmpl) {
  const IrNode *h = &g->node[r->node[0]];
  CgKLaunch *l = &r->launch;
  memset(l, 0, sizeof *l);
  int v;
  if (r->kind == CG_MULTI_SGD) {
    IrDtype tw = dtype_of(g, h->in[0]), tg = dtype_of(g, h->in[1]), tb = dtype_of(g, h->in[2]);
    snprintf(l->name, sizeof l->name, "k%d_sgd_update_multi%d_%s", r->node[0], r->n, ir_dtype_name(tg));
    v = cg_tmpl_flat_vec(tw);
    if (cg_tmpl_flat_vec(tg) < v) v = cg_tmpl_flat_vec(tg);
    if (cg_tmpl_flat_vec(tb) < v) v = cg_tmpl_flat_vec(tb);
    def(d, "NETC_KERNEL_NAME", "%s", l->name);
    def(d, "NETC_TW", "%s", cg_tmpl_ctype(tw));
    def(d, "NETC_TG", "%s", cg_tmpl_ctype(tg));
    def(d, "NETC_TBUF", "%s", cg_tmpl_ctype(tb));
    def_float(d, "NETC_MOMENTUM", ir_attr_float(h, "momentum", 0));
    def_float(d, "NETC_WD", ir_attr_float(h, "weight_decay", 0));
    def(d, "NETC_NESTEROV", "%d", ir_attr_int(h, "nesterov", 0) != 0);
    def(d, "NETC_SKIP", "%d", h->nin > 5);
    /* the table first (scratch: a profile counts no tensor for it), then the head's scalars */
    l->nargs = h->nin - 2;
    l->args[0] = (CgKArg){CG_KARG_SCRATCH, 0, 0};
    for (int a = 1; a < l->nargs; a++) l->args[a] = (CgKArg){CG_KARG_IN, a + 2, 0};
    *tmpl = "sgd_multi.cu";
  } else {
    IrDtype ty = dtype_of(g, h->out[0]);
    snprintf(l->name, sizeof l->name, "k%d_cast_multi%d_f32_%s", r->node[0], r->n, ir_dtype_name(ty));
    int vy = cg_tmpl_flat_vec(ty), vx = cg_tmpl_flat_vec(IR_DT_F32);
    v = vy < vx ? vy : vx;
    def(d, "NETC_KERNEL_NAME", "%s", l->name);
    def(d, "NETC_TX", "float");
    def(d, "NETC_TY", "%s", cg_tmpl_ctype(ty));
    l->nargs = 1;
    l->args[0] = (CgKArg){CG_KARG_SCRATCH, 0, 0};
    *tmpl = "cast_multi.cu";
  }
  def(d, "NETC_NT", "%d", r->n);
  def(d, "NETC_CHUNK", "%d", CHUNK);
  def(d, "NETC_V", "%d", v);
  for (int i = 0; i < d->n; i++)
    if (!d->value[i]) return -1;
  if (def_layout(d, g, batch, r)) return -1;
  l->grid[0] = (unsigned)r->blocks, l->grid[1] = l->grid[2] = 1;
  l->block[0] = BLOCK, l->block[1] = l->block[2] = 1;
  return 0;
}

/* Run k's kernel into r->unit and, in namespace netc_m<k>, onto src. */
static int emit_run(const IrGraph *g, int64_t batch, CgMultiRun *r, int k, CgText *src, char *err, size_t errlen) {
  Defs d = {0};
  const char *tmpl = NULL;
  if (run_defs(g, batch, r, &d, &tmpl)) {
    defs_free(&d);
    cg_errf(err, errlen, "cg_multi: run at node %d: out of memory or too large", r->node[0]);
    return -1;
  }
  CgDefine nd[MAX_DEFS];
  for (int i = 0; i < d.n; i++) nd[i] = (CgDefine){d.name[i], d.value[i]};
  char ns[32], msg[512];
  snprintf(ns, sizeof ns, "netc_m%d", k);
  int rc = cg_tmpl_instantiate(tmpl, nd, d.n, ns, src, &r->unit, msg, sizeof msg);
  if (rc) cg_errf(err, errlen, "cg_multi: run at node %d: %s", r->node[0], msg);
  defs_free(&d);
  return rc;
}

int cg_multi_plan(const IrGraph *g, int64_t batch, CgMultiPlan *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  int *buf = malloc(sizeof(int) * (size_t)(g->nnode + 1));
  char *taken = calloc((size_t)g->nnode + 1, 1);
  int rc = !buf || !taken || find_cast_runs(g, batch, p, buf, taken) || find_sgd_runs(g, p, buf, taken) ? -1 : 0;
  free(buf);
  free(taken);
  if (rc) {
    cg_multi_free(p);
    cg_errf(err, errlen, "cg_multi: out of host memory");
    return -1;
  }
  CgText src = {0};
  for (int k = 0; k < p->nrun; k++)
    if (emit_run(g, batch, &p->run[k], k, &src, err, errlen)) {
      free(src.p);
      cg_multi_free(p);
      return -1;
    }
  if (src.bad) {
    free(src.p);
    cg_multi_free(p);
    cg_errf(err, errlen, "cg_multi: out of host memory");
    return -1;
  }
  p->source = src.p, p->source_len = src.len;
  return 0;
}

void cg_multi_free(CgMultiPlan *p) {
  if (!p) return;
  for (int k = 0; k < p->nrun; k++) {
    free(p->run[k].node);
    free(p->run[k].unit);
  }
  free(p->run);
  free(p->source);
  memset(p, 0, sizeof *p);
}
