/* rt_weights.c - load and save a graph's PARAM and STATE values as
 * safetensors under torchvision's names (see rt_weights.h).
 *
 * A channels-last value (KRSC filter, NHWC activation) has memory dims
 * {A, H, W, C} and file dims {A, C, H, W}; every other value is stored as
 * it is.  Loading validates the whole file against the graph, collecting
 * every problem in one message, before the first byte is copied. */
#include "rt_weights.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_ref.h"
#include "rt_err.h"

static const char NUM_BATCHES_TRACKED[] = ".num_batches_tracked";
static const char MOMENTUM_BUFFER[] = ".momentum_buffer";

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Training state that PyTorch keeps outside the state_dict: optimizer
 * momentum, the dynamic loss scaler and FP8's amax histories (netc keeps
 * them as graph state). */
static int is_optimizer_state(const char *name) {
  return ends_with(name, MOMENTUM_BUFFER) || ends_with(name, ".amax_history") || strcmp(name, "loss_scale") == 0 ||
         strcmp(name, "loss_scale_good_steps") == 0;
}

/* FP8's amax histories only steer the next casts' scales: one may be
 * absent (it stays as it is: 0 in a fresh run, the first cast then scales
 * by its own tensor), extra, or of another length (fp8_scaling's history
 * changed: ignored), so that weights move between FP8 and other runs. */
static int is_amax_history(const char *name) { return ends_with(name, ".amax_history"); }

static int channels_last(const IrType *t) {
  return t->rank == 4 && (t->layout == IR_LAYOUT_KRSC || t->layout == IR_LAYOUT_NHWC);
}

static int is_weight(const IrValue *v) { return v->kind == IR_VAL_PARAM || v->kind == IR_VAL_STATE; }

static int is_float(IrDtype dt) { return dt == IR_DT_F32 || dt == IR_DT_F16 || dt == IR_DT_BF16 || dt == IR_DT_I8; }

int rt_weights_file_shape(const IrType *t, int64_t batch, int64_t *shape) {
  for (int i = 0; i < t->rank; i++) shape[i] = t->dim[i] == IR_DIM_N ? batch : t->dim[i];
  if (channels_last(t)) {
    int64_t c = shape[3];
    shape[3] = shape[2];
    shape[2] = shape[1];
    shape[1] = c;
  }
  return t->rank;
}

/* dst[a,c,h,w] = src[a,h,w,c] * scale (to_file) or the reverse. */
static void transpose(const int64_t *memdim, const float *src, float *dst, float scale, int to_file) {
  int64_t A = memdim[0], H = memdim[1], W = memdim[2], C = memdim[3];
  for (int64_t a = 0; a < A; a++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t w = 0; w < W; w++)
        for (int64_t c = 0; c < C; c++) {
          int64_t last = ((a * H + h) * W + w) * C + c, first = ((a * C + c) * H + h) * W + w;
          if (to_file)
            dst[first] = src[last] * scale;
          else
            dst[last] = src[first] * scale;
        }
}

/* The problems of one load, appended "; "-separated into err (truncated with
 * "..." when it is full) and counted. */
typedef struct Problems {
  char *err;
  size_t cap, len;
  int count;
} Problems;

static void problem(Problems *p, const char *fmt, ...) {
  p->count++;
  if (!p->cap || p->len + 1 >= p->cap) return;
  char item[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(item, sizeof item, fmt, ap);
  va_end(ap);
  int n = snprintf(p->err + p->len, p->cap - p->len, "%s%s", p->count > 1 ? "; " : "", item);
  if (n < 0 || (size_t)n >= p->cap - p->len) {
    p->len = p->cap - 1;
    if (p->cap > 4) memcpy(p->err + p->cap - 4, "...", 4);
    return;
  }
  p->len += (size_t)n;
}

static void shape_str(const int64_t *shape, int ndim, char *buf, size_t cap) {
  size_t len = 0;
  buf[len++] = '[';
  for (int i = 0; i < ndim && len + 24 < cap; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", (long long)shape[i]);
  snprintf(buf + len, cap - len, "]");
}

/* Every PARAM/STATE must be storable: a float dtype and no batch dim. */
static RtWeightsStatus check_graph(const IrGraph *g, char *err, size_t errlen) {
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (!is_weight(val)) continue;
    if (!is_float(val->type.dtype)) {
      rt_errf(err, errlen, "'%s' is %s: weights files hold float values only", val->name,
              ir_dtype_name(val->type.dtype));
      return RT_WEIGHTS_ERR_GRAPH;
    }
    for (int i = 0; i < val->type.rank; i++)
      if (val->type.dim[i] == IR_DIM_N) {
        rt_errf(err, errlen, "'%s' has the batch dimension N: not a weight", val->name);
        return RT_WEIGHTS_ERR_GRAPH;
      }
  }
  return RT_WEIGHTS_OK;
}

static int graph_has(const IrGraph *g, const char *name) {
  for (int v = 0; v < g->nval; v++)
    if (is_weight(&g->val[v]) && strcmp(g->val[v].name, name) == 0) return 1;
  return 0;
}

/* Element i of t as float (t->data may be unaligned). */
static float element(const RtStTensor *t, int64_t i) {
  const unsigned char *src = t->data;
  float x;
  if (t->dtype == RT_ST_F32) {
    memcpy(&x, src + 4 * i, 4);
    return x;
  }
  uint16_t h;
  memcpy(&h, src + 2 * i, 2);
  return t->dtype == RT_ST_F16 ? rt_ref_f16_to_f32(h) : rt_ref_bf16_to_f32(h);
}

int rt_weights_bad_value(const RtStTensor *t, char *msg, size_t cap) {
  if (t->dtype != RT_ST_F32 && t->dtype != RT_ST_F16 && t->dtype != RT_ST_BF16) return 0;
  int variance = ends_with(t->name, ".running_var");
  for (int64_t i = 0; i < t->numel; i++) {
    float x = element(t, i);
    if (isnan(x))
      rt_errf(msg, cap, "tensor '%s': element %lld is NaN", t->name, (long long)i);
    else if (isinf(x))
      rt_errf(msg, cap, "tensor '%s': element %lld is %s", t->name, (long long)i, x > 0 ? "inf" : "-inf");
    else if (variance && x < 0)
      rt_errf(msg, cap, "tensor '%s': element %lld is %g, a variance below 0", t->name, (long long)i, (double)x);
    else
      continue;
    return 1;
  }
  return 0;
}

/* rt_weights_bad_value of t as a problem; 1 if there was one. */
static int bad_value(const RtStTensor *t, Problems *p) {
  char msg[600];
  if (!rt_weights_bad_value(t, msg, sizeof msg)) return 0;
  problem(p, "%s", msg);
  return 1;
}

/* t is a float tensor of val's shape in the file. */
static int fits(const IrValue *val, const RtStTensor *t) {
  int64_t want[IR_MAX_RANK];
  int rank = rt_weights_file_shape(&val->type, 1, want), same = t->ndim == rank;
  for (int i = 0; same && i < rank; i++) same = t->shape[i] == want[i];
  return same && (t->dtype == RT_ST_F32 || t->dtype == RT_ST_F16 || t->dtype == RT_ST_BF16);
}

/* Lists every mismatch between f and g, and then (*bad) every bad value of
 * a tensor that fits; returns the count of both. */
static int find_problems(const IrGraph *g, const RtStFile *f, unsigned flags, Problems *p, int *bad) {
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (!is_weight(val)) continue;
    const RtStTensor *t = rt_st_find(f, val->name);
    if (!t) {
      if (!((flags & RT_WEIGHTS_OPTIM_OPTIONAL) && is_optimizer_state(val->name)) && !is_amax_history(val->name))
        problem(p, "missing '%s'", val->name);
      continue;
    }
    if (is_amax_history(val->name) && !fits(val, t)) continue; /* another length: not loaded */
    int is_float = t->dtype == RT_ST_F32 || t->dtype == RT_ST_F16 || t->dtype == RT_ST_BF16;
    if (!is_float) problem(p, "'%s' is %s, not F32, F16 or BF16", val->name, rt_st_dtype_name(t->dtype));
    int64_t want[IR_MAX_RANK];
    int rank = rt_weights_file_shape(&val->type, 1, want);
    int same = t->ndim == rank;
    for (int i = 0; same && i < rank; i++) same = t->shape[i] == want[i];
    if (!same) {
      char have_s[160], want_s[160];
      shape_str(t->shape, t->ndim, have_s, sizeof have_s);
      shape_str(want, rank, want_s, sizeof want_s);
      problem(p, "'%s' has shape %s, the graph needs %s", val->name, have_s, want_s);
    }
  }
  if (!(flags & RT_WEIGHTS_EXTRA_OK))
    for (size_t i = 0; i < rt_st_count(f); i++) {
      const char *name = rt_st_tensor(f, i)->name;
      if (!ends_with(name, NUM_BATCHES_TRACKED) && !graph_has(g, name) && !is_amax_history(name) &&
          !((flags & RT_WEIGHTS_TRAINING_OK) && is_optimizer_state(name)))
        problem(p, "extra '%s' (not in graph '%s')", name, g->name ? g->name : "?");
    }
  /* values last, so that the mismatches (what does not fit at all) come first */
  *bad = 0;
  for (int v = 0; v < g->nval; v++) {
    const RtStTensor *t = is_weight(&g->val[v]) ? rt_st_find(f, g->val[v].name) : NULL;
    if (t) *bad += bad_value(t, p);
  }
  return p->count;
}

/* Converts t's elements to float. */
static void to_float(const RtStTensor *t, float *dst) {
  for (int64_t i = 0; i < t->numel; i++) dst[i] = element(t, i);
}

RtWeightsStatus rt_weights_load(const IrGraph *g, const char *path, unsigned flags, RtWeightsBufFn buf, void *user,
                                char *err, size_t errlen) {
  RtWeightsStatus st = check_graph(g, err, errlen);
  if (st != RT_WEIGHTS_OK) return st;
  RtStFile *f = NULL;
  char sterr[RT_ST_ERRMAX];
  if (rt_st_open(path, &f, sterr, sizeof sterr) != RT_ST_OK) {
    rt_errf(err, errlen, "%s", sterr);
    return RT_WEIGHTS_ERR_IO;
  }
  Problems p = {err, errlen, 0, 0};
  int prefix = errlen ? snprintf(err, errlen, "%s: ", path) : 0;
  p.len = prefix > 0 && (size_t)prefix < errlen ? (size_t)prefix : 0;
  int bad = 0;
  if (find_problems(g, f, flags, &p, &bad)) {
    rt_st_close(f);
    return bad == p.count ? RT_WEIGHTS_ERR_VALUE : RT_WEIGHTS_ERR_MISMATCH;
  }
  float *tmp = NULL;
  for (int v = 0; v < g->nval && st == RT_WEIGHTS_OK; v++) {
    const IrValue *val = &g->val[v];
    const RtStTensor *t = is_weight(val) ? rt_st_find(f, val->name) : NULL;
    if (!t || (is_amax_history(val->name) && !fits(val, t))) continue;
    float *dst = buf(user, v);
    if (!dst) {
      rt_errf(err, errlen, "no storage for '%s'", val->name);
      st = RT_WEIGHTS_ERR_GRAPH;
      break;
    }
    if (!channels_last(&val->type)) {
      to_float(t, dst);
      continue;
    }
    free(tmp);
    tmp = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *tmp);
    if (!tmp) {
      rt_errf(err, errlen, "out of memory loading '%s'", val->name);
      st = RT_WEIGHTS_ERR_NOMEM;
      break;
    }
    to_float(t, tmp);
    transpose(val->type.dim, tmp, dst, 1.0f, 0);
  }
  free(tmp);
  rt_st_close(f);
  return st;
}

RtWeightsStatus rt_weights_add(RtStWriter *w, const char *name, const IrType *t, int64_t batch, const float *data,
                               float scale, char *err, size_t errlen) {
  int64_t shape[IR_MAX_RANK], memdim[IR_MAX_RANK];
  int rank = rt_weights_file_shape(t, batch, shape);
  for (int i = 0; i < t->rank; i++) memdim[i] = t->dim[i] == IR_DIM_N ? batch : t->dim[i];
  int64_t n = ir_type_numel(t, batch);
  float *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
  if (!tmp) {
    rt_errf(err, errlen, "out of memory writing '%s'", name);
    return RT_WEIGHTS_ERR_NOMEM;
  }
  if (channels_last(t))
    transpose(memdim, data, tmp, scale, 1);
  else
    for (int64_t i = 0; i < n; i++) tmp[i] = data[i] * scale;
  RtStStatus s = rt_st_writer_add(w, name, RT_ST_F32, rank, shape, tmp, (size_t)n * sizeof *tmp, RT_ST_COPY);
  free(tmp);
  if (s != RT_ST_OK) {
    rt_errf(err, errlen, "%s", rt_st_writer_error(w));
    return s == RT_ST_ERR_NOMEM ? RT_WEIGHTS_ERR_NOMEM : RT_WEIGHTS_ERR_GRAPH;
  }
  return RT_WEIGHTS_OK;
}

/* What a save writes: everything (weights files, checkpoints), or a
 * PyTorch state_dict (no optimizer state; num_batches_tracked added). */
typedef struct SaveKind {
  int state_dict;
  int64_t batches_tracked;
} SaveKind;

static const char RUNNING_MEAN[] = ".running_mean";

/* "<bn>.num_batches_tracked", an I64 scalar, for the batch norm whose
 * running mean is called mean_name. */
static RtWeightsStatus add_batches_tracked(RtStWriter *w, const char *mean_name, int64_t batches, char *err,
                                           size_t errlen) {
  size_t stem = strlen(mean_name) - (sizeof RUNNING_MEAN - 1);
  char *name = malloc(stem + sizeof NUM_BATCHES_TRACKED);
  if (!name) {
    rt_errf(err, errlen, "out of memory");
    return RT_WEIGHTS_ERR_NOMEM;
  }
  memcpy(name, mean_name, stem);
  memcpy(name + stem, NUM_BATCHES_TRACKED, sizeof NUM_BATCHES_TRACKED);
  RtStStatus s = rt_st_writer_add(w, name, RT_ST_I64, 0, NULL, &batches, sizeof batches, RT_ST_COPY);
  free(name);
  if (s != RT_ST_OK) {
    rt_errf(err, errlen, "%s", rt_st_writer_error(w));
    return s == RT_ST_ERR_NOMEM ? RT_WEIGHTS_ERR_NOMEM : RT_WEIGHTS_ERR_GRAPH;
  }
  return RT_WEIGHTS_OK;
}

static RtWeightsStatus save(const IrGraph *g, const char *path, RtWeightsBufFn buf, void *user, RtWeightsMetaFn meta,
                            void *meta_user, SaveKind kind, char *err, size_t errlen) {
  RtWeightsStatus st = check_graph(g, err, errlen);
  if (st != RT_WEIGHTS_OK) return st;
  if (kind.batches_tracked < 0) {
    rt_errf(err, errlen, "num_batches_tracked %lld is negative", (long long)kind.batches_tracked);
    return RT_WEIGHTS_ERR_GRAPH;
  }
  RtStWriter *w = rt_st_writer_new();
  if (!w) {
    rt_errf(err, errlen, "out of memory");
    return RT_WEIGHTS_ERR_NOMEM;
  }
  for (int v = 0; v < g->nval && st == RT_WEIGHTS_OK; v++) {
    const IrValue *val = &g->val[v];
    if (!is_weight(val) || (kind.state_dict && is_optimizer_state(val->name))) continue;
    const float *src = buf(user, v);
    if (!src) {
      rt_errf(err, errlen, "no storage for '%s'", val->name);
      st = RT_WEIGHTS_ERR_GRAPH;
    } else {
      st = rt_weights_add(w, val->name, &val->type, 1, src, 1.0f, err, errlen);
    }
    if (st == RT_WEIGHTS_OK && kind.state_dict && val->kind == IR_VAL_STATE && ends_with(val->name, RUNNING_MEAN))
      st = add_batches_tracked(w, val->name, kind.batches_tracked, err, errlen);
  }
  if (st == RT_WEIGHTS_OK) {
    rt_st_writer_set_meta(w, "format", "pt");
    if (meta && meta(w, meta_user)) {
      rt_errf(err, errlen, "%s", rt_st_writer_error(w));
      st = RT_WEIGHTS_ERR_NOMEM;
    } else if (rt_st_writer_write(w, path) != RT_ST_OK) {
      rt_errf(err, errlen, "%s", rt_st_writer_error(w));
      st = RT_WEIGHTS_ERR_IO;
    }
  }
  rt_st_writer_free(w);
  return st;
}

RtWeightsStatus rt_weights_save(const IrGraph *g, const char *path, RtWeightsBufFn buf, void *user, char *err,
                                size_t errlen) {
  return rt_weights_save_meta(g, path, buf, user, NULL, NULL, err, errlen);
}

RtWeightsStatus rt_weights_save_meta(const IrGraph *g, const char *path, RtWeightsBufFn buf, void *user,
                                     RtWeightsMetaFn meta, void *meta_user, char *err, size_t errlen) {
  return save(g, path, buf, user, meta, meta_user, (SaveKind){0, 0}, err, errlen);
}

RtWeightsStatus rt_weights_export(const IrGraph *g, const char *path, RtWeightsBufFn buf, void *user,
                                  int64_t batches_tracked, char *err, size_t errlen) {
  return save(g, path, buf, user, NULL, NULL, (SaveKind){1, batches_tracked}, err, errlen);
}

static float *cpu_buf(void *user, int v) {
  RtCpu *x = user;
  return rt_cpu_is_int(x, v) ? NULL : rt_cpu_data(x, v);
}

RtWeightsStatus rt_weights_load_cpu(RtCpu *x, const IrGraph *g, const char *path, unsigned flags, char *err,
                                    size_t errlen) {
  return rt_weights_load(g, path, flags, cpu_buf, x, err, errlen);
}

RtWeightsStatus rt_weights_save_cpu(RtCpu *x, const IrGraph *g, const char *path, char *err, size_t errlen) {
  return rt_weights_save(g, path, cpu_buf, x, err, errlen);
}
