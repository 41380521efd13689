/* rt_cpu.c - the CPU reference executor: makes a buffer for every value of
 * an IR graph, checks once that it can run every node, then runs the nodes
 * in order through the op table (rt_cpu_op.c), rounding each float output to
 * its dtype (f16, bf16) afterwards.  The arithmetic is FP32 throughout; only
 * a value's dtype changes what is kept.  Scratch is sized for the hungriest
 * node when the executor is made, so a run allocates nothing of its own. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_cpu_op.h"
#include "rt_err.h"

static int is_int_dtype(IrDtype dt) { return dt == IR_DT_I32 || dt == IR_DT_I64 || dt == IR_DT_U8; }

/* Elements of type t at this batch size, or -1 when a dim is out of range
 * for the kernels (which index with int dims). */
static int64_t type_numel(const IrType *t, int64_t batch) {
  if (t->rank < 0 || t->rank > IR_MAX_RANK) return -1;
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    int64_t d = t->dim[i] == IR_DIM_N ? batch : t->dim[i];
    if (d < 0 || d > INT_MAX) return -1;
    if (d && n > (INT64_MAX / 8) / d) return -1;
    n *= d;
  }
  return n;
}

/* Checks node i against the op table and the type rules, and that its
 * inputs' integer/float kinds are what its function reads. */
static int check_node(RtCpu *x, int i) {
  const IrGraph *g = x->g;
  const IrNode *n = &g->node[i];
  const IrOpInfo *info = ir_op_info(n->op);
  const RtCpuOp *op = rt_cpu_op_find(n->op);
  if (!info) return rt_errf(x->err, x->errlen, "node %d: unknown op %d", i, (int)n->op);
  if (!op) return rt_cpu_op_fail(x, n, "op %s not supported by the CPU executor", info->name);
  if (n->nin < info->min_in || n->nin > info->max_in || (info->nout >= 0 && n->nout != info->nout))
    return rt_cpu_op_fail(x, n, "%d inputs and %d outputs do not fit the op", n->nin, n->nout);
  for (int k = 0; k < n->nin + n->nout; k++) {
    int v = k < n->nin ? n->in[k] : n->out[k - n->nin];
    if (v < 0 || v >= g->nval) return rt_cpu_op_fail(x, n, "value id %d out of range", v);
  }
  IrType want[IR_MAX_INTS];
  char msg[256], b1[96], b2[96];
  if (n->nout > IR_MAX_INTS) return rt_cpu_op_fail(x, n, "too many outputs");
  for (int k = 0; k < n->nin; k++) {
    int want_int = (op->int_inputs >> k) & 1;
    const IrType *t = &g->val[n->in[k]].type;
    if (is_int_dtype(t->dtype) != want_int)
      return rt_cpu_op_fail(x, n, "input %d is %s, expected %s", k, ir_type_str(t, b1, sizeof b1),
                            want_int ? "integers" : "floats");
  }
  if (ir_infer(g, n, want, msg, sizeof msg)) return rt_cpu_op_fail(x, n, "%s", msg);
  for (int k = 0; k < n->nout; k++) {
    const IrType *got = &g->val[n->out[k]].type;
    if (!ir_type_equal(got, &want[k]))
      return rt_cpu_op_fail(x, n, "output %d is %s, the type rules give %s", k, ir_type_str(got, b1, sizeof b1),
                            ir_type_str(&want[k], b2, sizeof b2));
    if (is_int_dtype(got->dtype)) return rt_cpu_op_fail(x, n, "integer output %d", k);
  }
  return 0;
}

/* The machine's physical memory in bytes (0: unknown). */
static double host_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (double)pages * (double)size : 0;
}

/* Refuses, before anything is allocated, a plan whose buffers (every value
 * at this batch) exceed the machine's physical memory: calloc would hand
 * out untouched pages and the first run would be killed for memory. */
double rt_cpu_plan_bytes(const IrGraph *g, int64_t batch) {
  double total = 0;
  for (int v = 0; v < g->nval; v++) {
    const IrType *t = &g->val[v].type;
    double n = 1;
    if (t->rank < 0 || t->rank > IR_MAX_RANK || type_numel(t, batch) < 0) return -1;
    for (int d = 0; d < t->rank; d++) n *= t->dim[d] == IR_DIM_N ? (double)batch : (double)t->dim[d];
    total += n * (double)(is_int_dtype(t->dtype) ? sizeof(int64_t) : sizeof(float));
  }
  return total;
}

double rt_cpu_host_memory(void) { return host_memory(); }

static int check_plan_fits(const IrGraph *g, int64_t batch, char *err, size_t errlen) {
  double total = rt_cpu_plan_bytes(g, batch), have = host_memory();
  if (total < 0) return 0; /* refused by rt_cpu_new with the value named */
  if (have <= 0 || total <= have) return 0;
  const double gib = 1073741824.0;
  return rt_errf(err, errlen,
                 "graph %s at batch %lld: the CPU plan needs %.1f GiB, more than this machine's %.1f GiB of memory "
                 "(a smaller batch, or the GPU)",
                 g->name ? g->name : "?", (long long)batch, total / gib, have / gib);
}

int rt_cpu_new(const IrGraph *g, int64_t batch, RtCpu **out, char *err, size_t errlen) {
  *out = NULL;
  if (!g) return rt_errf(err, errlen, "no graph");
  if (batch < 1 || batch > INT_MAX) return rt_errf(err, errlen, "batch size %lld out of range", (long long)batch);
  if (check_plan_fits(g, batch, err, errlen)) return -1;
  RtCpu *x = calloc(1, sizeof *x);
  if (!x) return rt_errf(err, errlen, "out of memory");
  x->g = g;
  x->batch = batch;
  x->err = err;
  x->errlen = errlen;
  x->buf = calloc((size_t)g->nval + 1, sizeof *x->buf);
  x->numel = calloc((size_t)g->nval + 1, sizeof *x->numel);
  if (!x->buf || !x->numel) goto oom;
  for (int v = 0; v < g->nval; v++) {
    const IrType *t = &g->val[v].type;
    x->numel[v] = type_numel(t, batch);
    if (x->numel[v] < 0) {
      char b[96];
      rt_cpu_free(x);
      return rt_errf(err, errlen, "value %d (%s) is too large", v, ir_type_str(t, b, sizeof b));
    }
    size_t es = is_int_dtype(t->dtype) ? sizeof(int64_t) : sizeof(float);
    x->buf[v] = calloc(x->numel[v] ? (size_t)x->numel[v] : 1, es);
    if (!x->buf[v]) goto oom;
  }
  if (!(x->once = calloc((size_t)g->nnode + 1, 1))) goto oom;
  for (int i = 0; i < g->nnode; i++) x->nonce += x->once[i] = (char)ir_node_once(&g->node[i]);
  x->stale = 1;
  size_t need = 0;
  for (int i = 0; i < g->nnode; i++) {
    if (check_node(x, i)) {
      rt_cpu_free(x);
      return -1;
    }
    const RtCpuOp *op = rt_cpu_op_find(g->node[i].op);
    size_t s = op->scratch ? op->scratch(x, &g->node[i]) : 0;
    if (s > need) need = s;
  }
  x->nscratch = need;
  x->scratch = malloc(need ? need : 1);
  if (!x->scratch) goto oom;
  x->err = NULL;
  x->errlen = 0;
  *out = x;
  return 0;
oom:
  rt_cpu_free(x);
  return rt_errf(err, errlen, "out of memory making buffers for graph %s", g->name ? g->name : "?");
}

void rt_cpu_set_sync(RtCpu *x, const struct RtRefSync *sync) {
  if (x) x->sync = sync;
}

void rt_cpu_free(RtCpu *x) {
  if (!x) return;
  if (x->buf)
    for (int v = 0; v < x->g->nval; v++) free(x->buf[v]);
  free(x->buf);
  free(x->numel);
  free(x->once);
  free(x->scratch);
  free(x);
}

int rt_cpu_find(const RtCpu *x, const char *name) {
  if (!x || !name) return -1;
  for (int v = 0; v < x->g->nval; v++) {
    const IrValue *val = &x->g->val[v];
    if (val->kind != IR_VAL_ACT && val->name && strcmp(val->name, name) == 0) return v;
  }
  return -1;
}

static int valid(const RtCpu *x, int v) { return x && v >= 0 && v < x->g->nval; }

/* A parameter's or state's storage handed out may be written: the once
 * nodes run again before the next step. */
void *rt_cpu_data(RtCpu *x, int v) {
  if (!valid(x, v)) return NULL;
  if (ir_value_is_weight(x->g, v)) x->stale = 1;
  return x->buf[v];
}
int64_t rt_cpu_numel(const RtCpu *x, int v) { return valid(x, v) ? x->numel[v] : 0; }
int rt_cpu_is_int(const RtCpu *x, int v) { return valid(x, v) && is_int_dtype(x->g->val[v].type.dtype); }

/* Keeps only what the output's dtype can hold: f16 and bf16 rounded, an
 * i8 result requantized by its node's y_scale S (pass requant's
 * convolutions, the inference stem's pool: rt_cpu_quantize, as a
 * calibrated cast to i8 quantizes, NaN to -127 with it). */
static void round_outputs(RtCpu *x, const IrNode *n) {
  for (int k = 0; k < n->nout; k++) {
    int v = n->out[k];
    IrDtype dt = x->g->val[v].type.dtype;
    if (dt == IR_DT_F16) rt_ref_round_f16(x->numel[v], x->buf[v], x->buf[v]);
    if (dt == IR_DT_BF16) rt_ref_round_bf16(x->numel[v], x->buf[v], x->buf[v]);
    const IrAttr *ys = dt == IR_DT_I8 && k == 0 ? ir_attr_find(n, "y_scale") : NULL;
    if (ys) rt_cpu_quantize((float)ys->f, x->numel[v], x->buf[v], x->buf[v]);
  }
}

static int run_node(RtCpu *x, int i) {
  const IrNode *n = &x->g->node[i];
  int rc = rt_cpu_op_find(n->op)->run(x, n);
  if (!rc) round_outputs(x, n);
  return rc;
}

int rt_cpu_run(RtCpu *x, char *err, size_t errlen) {
  if (!x) return rt_errf(err, errlen, "no executor");
  return rt_cpu_run_nodes(x, 0, x->g->nnode, err, errlen);
}

int rt_cpu_run_nodes(RtCpu *x, int lo, int hi, char *err, size_t errlen) {
  if (!x || lo < 0 || hi > x->g->nnode || lo > hi) return rt_errf(err, errlen, "no executor, or nodes out of range");
  x->err = err;
  x->errlen = errlen;
  int rc = 0;
  /* the once nodes read only weights: all of them first when the weights changed, none in the step */
  for (int i = 0; x->stale && x->nonce && i < x->g->nnode && !rc; i++)
    if (x->once[i]) rc = run_node(x, i);
  if (!rc) x->stale = 0;
  for (int i = lo; i < hi && !rc; i++)
    if (!x->once[i]) rc = run_node(x, i);
  x->err = NULL;
  x->errlen = 0;
  return rc;
}
