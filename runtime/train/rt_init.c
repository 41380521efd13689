/* rt_init.c - torchvision-style initial values for parameters and state
 * (see rt_init.h for the table).
 *
 * A role is found from the ops that read the value: the first reader that
 * says what the value is decides, later ones must agree (a weight read by
 * conv2d and conv2d_bwd_data is one role; backward readers and sgd_update's
 * first input say nothing).  Each value draws from its own generator seeded
 * by the run's seed and a hash of its name.
 *
 * Dynamic loss scaling's two states (read by loss_scale_update, made by
 * the precision pass) have no torchvision role: @loss_scale starts at the
 * train section's loss_scale_init (65536 when absent) and
 * @loss_scale_good_steps at 0.  FP8's amax histories (a cast's input 1)
 * start at 0: no step seen yet. */
#include "rt_init.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { NO_ROLE = -1 };

static const double TWO_PI = 6.283185307179586476925;

static const char *const ROLE_NAMES[RT_INIT_ROLE_COUNT] = {
    [RT_INIT_CONV_WEIGHT] = "conv_weight",         [RT_INIT_CONV_BIAS] = "conv_bias",
    [RT_INIT_LINEAR_WEIGHT] = "linear_weight",     [RT_INIT_LINEAR_BIAS] = "linear_bias",
    [RT_INIT_BN_WEIGHT] = "batchnorm_weight",      [RT_INIT_BN_BIAS] = "batchnorm_bias",
    [RT_INIT_RUNNING_MEAN] = "running_mean",       [RT_INIT_RUNNING_VAR] = "running_var",
    [RT_INIT_MOMENTUM_BUFFER] = "momentum_buffer",
};

/* The name suffix each role may carry. */
static const char *const ROLE_SUFFIX[RT_INIT_ROLE_COUNT] = {
    [RT_INIT_CONV_WEIGHT] = ".weight",
    [RT_INIT_CONV_BIAS] = ".bias",
    [RT_INIT_LINEAR_WEIGHT] = ".weight",
    [RT_INIT_LINEAR_BIAS] = ".bias",
    [RT_INIT_BN_WEIGHT] = ".weight",
    [RT_INIT_BN_BIAS] = ".bias",
    [RT_INIT_RUNNING_MEAN] = ".running_mean",
    [RT_INIT_RUNNING_VAR] = ".running_var",
    [RT_INIT_MOMENTUM_BUFFER] = ".momentum_buffer",
};

const char *rt_init_role_name(RtInitRole r) { return (unsigned)r < RT_INIT_ROLE_COUNT ? ROLE_NAMES[r] : "?"; }

/* What input `slot` of op means, or NO_ROLE; *owner_slot is the input
 * holding the weight a bias belongs to. */
static int role_of_input(IrOp op, int slot, int *owner_slot) {
  *owner_slot = slot;
  switch (op) {
  case IR_OP_CONV2D:
    if (slot == 1) return RT_INIT_CONV_WEIGHT;
    if (slot == 2) return *owner_slot = 1, RT_INIT_CONV_BIAS;
    return NO_ROLE;
  case IR_OP_LINEAR:
    if (slot == 1) return RT_INIT_LINEAR_WEIGHT;
    if (slot == 2) return *owner_slot = 1, RT_INIT_LINEAR_BIAS;
    return NO_ROLE;
  case IR_OP_BATCHNORM:
  case IR_OP_BATCHNORM_TRAIN:
  case IR_OP_MAXPOOL_BN_RELU_INFER: { /* (x or z, gamma, beta, running_mean, running_var) */
    static const int bn[5] = {NO_ROLE, RT_INIT_BN_WEIGHT, RT_INIT_BN_BIAS, RT_INIT_RUNNING_MEAN, RT_INIT_RUNNING_VAR};
    return slot < 5 ? bn[slot] : NO_ROLE;
  }
  case IR_OP_CONV2D_BN:
  case IR_OP_CONV2D_BN_TRAIN:
  case IR_OP_CONV2D_BN_STATS: { /* x, w, gamma, beta, running_mean, running_var */
    static const int cbn[6] = {NO_ROLE,         RT_INIT_CONV_WEIGHT,  RT_INIT_BN_WEIGHT,
                               RT_INIT_BN_BIAS, RT_INIT_RUNNING_MEAN, RT_INIT_RUNNING_VAR};
    return slot < 6 ? cbn[slot] : NO_ROLE;
  }
  case IR_OP_SGD_UPDATE: return slot == 2 ? RT_INIT_MOMENTUM_BUFFER : NO_ROLE;
  default: return NO_ROLE;
  }
}

static int is_view(IrOp op) { return op == IR_OP_CAST || op == IR_OP_RELAYOUT; }

/* First role given to value v (or to what cast/relayout make of it) by its
 * readers; *owner is the weight id for a bias.  -2 when two readers disagree. */
static int find_role(const IrGraph *g, int v, int *owner, int depth) {
  int role = NO_ROLE;
  for (int i = 0; i < g->nnode; i++) {
    const IrNode *n = &g->node[i];
    for (int k = 0; k < n->nin; k++) {
      if (n->in[k] != v) continue;
      int r = NO_ROLE, o = v, slot;
      if (is_view(n->op) && k == 0 && n->nout == 1 && depth < 8) { /* a cast's amax history is no view */
        r = find_role(g, n->out[0], &o, depth + 1);
        if (r == RT_INIT_CONV_WEIGHT || r == RT_INIT_LINEAR_WEIGHT) o = v;
      } else {
        r = role_of_input(n->op, k, &slot);
        o = slot < n->nin ? n->in[slot] : v;
      }
      if (r == -2) return -2;
      if (r == NO_ROLE) continue;
      if (role != NO_ROLE && r != role) return -2;
      if (role == NO_ROLE) *owner = o;
      role = r;
    }
  }
  return role;
}

static int has_suffix(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && strcmp(s + n - m, suf) == 0;
}

RtInitStatus rt_init_role(const IrGraph *g, int v, RtInitRole *role, int *owner, char *err, size_t errlen) {
  if (v < 0 || v >= g->nval || (g->val[v].kind != IR_VAL_PARAM && g->val[v].kind != IR_VAL_STATE)) {
    snprintf(err, errlen, "value %d is not a parameter or state", v);
    return RT_INIT_ERR_ROLE;
  }
  const IrValue *val = &g->val[v];
  *owner = v;
  int r = find_role(g, v, owner, 0);
  if (r == -2) {
    snprintf(err, errlen, "@%s: the ops that read it disagree on what it is", val->name);
    return RT_INIT_ERR_ROLE;
  }
  if (r == NO_ROLE) {
    snprintf(err, errlen, "@%s: no op reads it as a conv, linear or batchnorm input or a momentum buffer", val->name);
    return RT_INIT_ERR_ROLE;
  }
  for (int k = 0; k < RT_INIT_ROLE_COUNT; k++) {
    if (k == r || !has_suffix(val->name, ROLE_SUFFIX[k]) || has_suffix(val->name, ROLE_SUFFIX[r])) continue;
    snprintf(err, errlen, "@%s: its name says %s but it is read as a %s", val->name, ROLE_SUFFIX[k], ROLE_NAMES[r]);
    return RT_INIT_ERR_ROLE;
  }
  int want_state = r == RT_INIT_RUNNING_MEAN || r == RT_INIT_RUNNING_VAR || r == RT_INIT_MOMENTUM_BUFFER;
  if (want_state != (val->kind == IR_VAL_STATE)) {
    snprintf(err, errlen, "@%s: a %s must be %s", val->name, ROLE_NAMES[r], want_state ? "state" : "a parameter");
    return RT_INIT_ERR_ROLE;
  }
  *role = (RtInitRole)r;
  return RT_INIT_OK;
}

/* --- the generator: splitmix64, one stream per value ------------------------------------------ */

static uint64_t mix_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in (0, 1): 53 random bits, never 0 (Box-Muller takes its log). */
static double mix_unit(uint64_t *s) { return ((double)(mix_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

static uint64_t name_seed(uint64_t seed, const char *name) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 1099511628211ull;
  uint64_t s = seed ^ h;
  mix_next(&s);
  return s;
}

/* --- filling ------------------------------------------------------------------------------------ */

/* Filter dims as K, C, R, S whatever the layout. */
static int filter_kcrs(const IrType *t, int64_t kcrs[4]) {
  if (t->rank != 4) return -1;
  kcrs[0] = t->dim[0];
  if (t->layout == IR_LAYOUT_KRSC) {
    kcrs[1] = t->dim[3], kcrs[2] = t->dim[1], kcrs[3] = t->dim[2];
  } else {
    kcrs[1] = t->dim[1], kcrs[2] = t->dim[2], kcrs[3] = t->dim[3];
  }
  return 0;
}

/* Kaiming normal (fan_out, gain sqrt 2), drawn in K,C,R,S order and stored
 * at each element's place in the filter's layout. */
static void fill_conv_weight(const IrType *t, const int64_t kcrs[4], uint64_t *s, float *dst) {
  int64_t K = kcrs[0], C = kcrs[1], R = kcrs[2], S = kcrs[3];
  double std = sqrt(2.0 / (double)(K * R * S));
  int krsc = t->layout == IR_LAYOUT_KRSC;
  double spare = 0;
  int have_spare = 0;
  for (int64_t k = 0; k < K; k++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t r = 0; r < R; r++)
        for (int64_t q = 0; q < S; q++) {
          double z;
          if (have_spare) {
            z = spare, have_spare = 0;
          } else {
            double u1 = mix_unit(s), u2 = mix_unit(s), rad = sqrt(-2.0 * log(u1));
            z = rad * cos(TWO_PI * u2), spare = rad * sin(TWO_PI * u2), have_spare = 1;
          }
          int64_t at = krsc ? ((k * R + r) * S + q) * C + c : ((k * C + c) * R + r) * S + q;
          dst[at] = (float)(z * std);
        }
}

static void fill_uniform(int64_t n, double bound, uint64_t *s, float *dst) {
  for (int64_t i = 0; i < n; i++) dst[i] = (float)((2.0 * mix_unit(s) - 1.0) * bound);
}

static void fill_const(int64_t n, float v, float *dst) {
  for (int64_t i = 0; i < n; i++) dst[i] = v;
}

static RtInitStatus bad_shape(const IrValue *val, const char *what, char *err, size_t errlen) {
  char tb[96];
  snprintf(err, errlen, "@%s: a %s cannot be %s", val->name, what, ir_type_str(&val->type, tb, sizeof tb));
  return RT_INIT_ERR_SHAPE;
}

/* 1 when v is loss_scale_update's scale, 2 its good-step count, else 0. */
static int loss_scale_slot(const IrGraph *g, int v) {
  for (int i = 0; i < g->nnode; i++) {
    const IrNode *n = &g->node[i];
    if (n->op != IR_OP_LOSS_SCALE_UPDATE || n->nin != 3) continue;
    if (n->in[1] == v) return 1;
    if (n->in[2] == v) return 2;
  }
  return 0;
}

static float loss_scale_init(const IrGraph *g) {
  const IrAttr *a = ir_train_find(g, "loss_scale_init");
  return a && a->kind == IR_ATTR_FLOAT && a->f > 0 ? (float)a->f : 65536.0f;
}

RtInitStatus rt_init_value(const IrGraph *g, int v, uint64_t seed, float *dst, char *err, size_t errlen) {
  int state = v >= 0 && v < g->nval && g->val[v].kind == IR_VAL_STATE;
  if (state && ir_amax_history(g, v)) { /* no step seen yet: the first cast scales by its own tensor */
    fill_const(ir_type_numel(&g->val[v].type, 1), 0.0f, dst);
    return RT_INIT_OK;
  }
  int ls = state ? loss_scale_slot(g, v) : 0;
  if (ls) {
    if (ir_type_numel(&g->val[v].type, 1) != 1)
      return bad_shape(&g->val[v], ls == 1 ? "loss scale" : "good-step count", err, errlen);
    dst[0] = ls == 1 ? loss_scale_init(g) : 0.0f;
    return RT_INIT_OK;
  }
  RtInitRole role;
  int owner;
  RtInitStatus st = rt_init_role(g, v, &role, &owner, err, errlen);
  if (st) return st;
  const IrValue *val = &g->val[v];
  const IrType *t = &val->type, *ot = &g->val[owner].type;
  if (ir_dtype_size(t->dtype) == 0 || t->dtype == IR_DT_I32 || t->dtype == IR_DT_I64 || t->dtype == IR_DT_U8)
    return bad_shape(val, rt_init_role_name(role), err, errlen);
  int64_t n = ir_type_numel(t, 1);
  uint64_t s = name_seed(seed, val->name);
  int64_t kcrs[4];
  switch (role) {
  case RT_INIT_CONV_WEIGHT:
    if (filter_kcrs(t, kcrs) || kcrs[0] * kcrs[1] * kcrs[2] * kcrs[3] != n)
      return bad_shape(val, "conv weight", err, errlen);
    fill_conv_weight(t, kcrs, &s, dst);
    break;
  case RT_INIT_CONV_BIAS:
    if (filter_kcrs(ot, kcrs)) return bad_shape(&g->val[owner], "conv weight", err, errlen);
    fill_uniform(n, 1.0 / sqrt((double)(kcrs[1] * kcrs[2] * kcrs[3])), &s, dst);
    break;
  case RT_INIT_LINEAR_WEIGHT:
  case RT_INIT_LINEAR_BIAS:
    if (ot->rank != 2) return bad_shape(&g->val[owner], "linear weight", err, errlen);
    fill_uniform(n, 1.0 / sqrt((double)ot->dim[1]), &s, dst);
    break;
  case RT_INIT_BN_WEIGHT:
  case RT_INIT_RUNNING_VAR: fill_const(n, 1.0f, dst); break;
  case RT_INIT_BN_BIAS:
  case RT_INIT_RUNNING_MEAN:
  case RT_INIT_MOMENTUM_BUFFER:
  case RT_INIT_ROLE_COUNT: fill_const(n, 0.0f, dst); break;
  }
  return RT_INIT_OK;
}

RtInitStatus rt_init_cpu(RtCpu *x, const IrGraph *g, uint64_t seed, char *err, size_t errlen) {
  for (int v = 0; v < g->nval; v++) {
    if (g->val[v].kind != IR_VAL_PARAM && g->val[v].kind != IR_VAL_STATE) continue;
    if (rt_cpu_is_int(x, v) || rt_cpu_numel(x, v) != ir_type_numel(&g->val[v].type, 1))
      return bad_shape(&g->val[v], "parameter", err, errlen);
    RtInitStatus st = rt_init_value(g, v, seed, rt_cpu_data(x, v), err, errlen);
    if (st) return st;
  }
  return RT_INIT_OK;
}
