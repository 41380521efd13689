/* test_weights.c - runtime/rt_weights.c: round trips through safetensors
 * (KRSC in memory, KCRS in the file), F16/BF16 files, every mismatch named
 * in the message, NaN, infinities and negative running variances refused
 * with the tensor and the element named, a whole compiled model through the
 * CPU executor, and rt_weights_export's PyTorch state_dict. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"
#include "rt_init.h"
#include "rt_ref.h"
#include "rt_weights.h"
#include "io/tmpdir.h"

enum { K = 4, C = 5, R = 3, S = 2, NV = 8 };

/* Buffers of a hand-made graph, indexed by value id. */
typedef struct Bufs {
  float *v[NV];
} Bufs;

static float *bufs_get(void *user, int v) { return v < NV ? ((Bufs *)user)->v[v] : NULL; }

/* conv.weight (filter in `layout`), bn.weight, bn.running_mean, and the
 * filter's momentum buffer; ids 0..3. */
static IrGraph *make_graph(Arena *a, IrLayout layout) {
  IrGraph *g = ir_graph_new(a, "toy");
  int64_t krsc[4] = {K, R, S, C}, kcrs[4] = {K, C, R, S}, k[1] = {K};
  IrType tw = ir_type(IR_DT_F32, layout, 4, layout == IR_LAYOUT_KRSC ? krsc : kcrs);
  IrType tv = ir_type(IR_DT_F32, IR_LAYOUT_ROW, 1, k);
  ir_value_add(g, IR_VAL_PARAM, tw, "conv.weight");
  ir_value_add(g, IR_VAL_PARAM, tv, "bn.weight");
  ir_value_add(g, IR_VAL_STATE, tv, "bn.running_mean");
  ir_value_add(g, IR_VAL_STATE, tw, "conv.weight.momentum_buffer");
  return g;
}

static void bufs_alloc(Bufs *b, const IrGraph *g, float base) {
  memset(b, 0, sizeof *b);
  for (int v = 0; v < g->nval; v++) {
    int64_t n = ir_type_numel(&g->val[v].type, 1);
    b->v[v] = calloc((size_t)n, sizeof(float));
    for (int64_t i = 0; base != 0 && i < n; i++) b->v[v][i] = base * (float)(v + 1) + 0.25f * (float)i;
  }
}

static void bufs_free(Bufs *b) {
  for (int v = 0; v < NV; v++) free(b->v[v]);
}

static int64_t at_krsc(int k, int c, int r, int s) { return ((k * R + r) * S + s) * C + c; }
static int64_t at_kcrs(int k, int c, int r, int s) { return ((k * C + c) * R + r) * S + s; }

static void test_roundtrip(const char *dir) {
  Arena a;
  arena_init(&a);
  IrGraph *g = make_graph(&a, IR_LAYOUT_KRSC), *gk = make_graph(&a, IR_LAYOUT_KCRS);
  Bufs src, dst, dk;
  bufs_alloc(&src, g, 1.5f);
  bufs_alloc(&dst, g, 0);
  bufs_alloc(&dk, gk, 0);
  char path[1200], err[RT_WEIGHTS_ERRMAX] = "";
  snprintf(path, sizeof path, "%s/w.safetensors", dir);
  CHECK(rt_weights_save(g, path, bufs_get, &src, err, sizeof err) == RT_WEIGHTS_OK, "save: %s", err);
  CHECK(rt_weights_load(g, path, 0, bufs_get, &dst, err, sizeof err) == RT_WEIGHTS_OK, "load: %s", err);
  for (int v = 0; v < g->nval; v++)
    CHECK(memcmp(src.v[v], dst.v[v], (size_t)ir_type_numel(&g->val[v].type, 1) * sizeof(float)) == 0,
          "value %d differs after the round trip", v);

  /* the file holds KCRS, as PyTorch */
  RtStFile *f = NULL;
  CHECK(rt_st_open(path, &f, err, sizeof err) == RT_ST_OK, "%s", err);
  const RtStTensor *t = f ? rt_st_find(f, "conv.weight") : NULL;
  CHECK(t && t->ndim == 4 && t->shape[0] == K && t->shape[1] == C && t->shape[2] == R && t->shape[3] == S,
        "conv.weight is not [K,C,R,S] in the file");
  if (t) {
    const float *fw = t->data;
    int bad = 0;
    for (int k = 0; k < K; k++)
      for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
          for (int s = 0; s < S; s++) bad += fw[at_kcrs(k, c, r, s)] != src.v[0][at_krsc(k, c, r, s)];
    CHECK(bad == 0, "%d elements of conv.weight not transposed KRSC -> KCRS", bad);
  }
  rt_st_close(f);

  /* a KCRS graph reads the same file untransposed */
  CHECK(rt_weights_load(gk, path, 0, bufs_get, &dk, err, sizeof err) == RT_WEIGHTS_OK, "load KCRS: %s", err);
  int bad = 0;
  for (int k = 0; k < K; k++)
    for (int c = 0; c < C; c++)
      for (int r = 0; r < R; r++)
        for (int s = 0; s < S; s++) bad += dk.v[0][at_kcrs(k, c, r, s)] != src.v[0][at_krsc(k, c, r, s)];
  CHECK(bad == 0, "%d elements differ between the KCRS and KRSC graphs", bad);
  bufs_free(&src);
  bufs_free(&dst);
  bufs_free(&dk);
  arena_free(&a);
}

/* Writes a file with the toy graph's tensors, changed as asked. */
typedef struct Variant {
  const char *skip;      /* leave this tensor out */
  const char *extra;     /* add this extra tensor */
  const char *bad_shape; /* give this one shape [3] */
  const char *bad_dtype; /* give this one I64 */
  RtStDtype half;        /* RT_ST_F16 or RT_ST_BF16: every float in it; else F32 */
} Variant;

static void write_variant(const char *path, const Variant *var, const float *conv) {
  static const char *names[] = {"conv.weight", "bn.weight", "bn.running_mean", "conv.weight.momentum_buffer"};
  static float data[K * C * R * S];
  static uint16_t half[K * C * R * S];
  static int64_t ints[K * C * R * S];
  RtStWriter *w = rt_st_writer_new();
  for (int i = 0; i < 4; i++) {
    if (var->skip && strcmp(var->skip, names[i]) == 0) continue;
    int64_t shape[4] = {K, C, R, S};
    int nd = 4;
    if (i == 1 || i == 2) shape[0] = K, nd = 1;
    if (var->bad_shape && strcmp(var->bad_shape, names[i]) == 0) shape[0] = 3, nd = 1;
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    for (int64_t j = 0; j < n; j++) data[j] = i == 0 ? conv[j] : (float)(i * 100 + j);
    if (var->bad_dtype && strcmp(var->bad_dtype, names[i]) == 0) {
      for (int64_t j = 0; j < n; j++) ints[j] = j;
      rt_st_writer_add(w, names[i], RT_ST_I64, nd, shape, ints, (size_t)n * 8, RT_ST_COPY);
    } else if (var->half == RT_ST_F16 || var->half == RT_ST_BF16) {
      for (int64_t j = 0; j < n; j++)
        half[j] = var->half == RT_ST_F16 ? rt_ref_f32_to_f16(data[j]) : rt_ref_f32_to_bf16(data[j]);
      rt_st_writer_add(w, names[i], var->half, nd, shape, half, (size_t)n * 2, RT_ST_COPY);
    } else {
      rt_st_writer_add(w, names[i], RT_ST_F32, nd, shape, data, (size_t)n * 4, RT_ST_COPY);
    }
  }
  int64_t one = 1;
  rt_st_writer_add(w, "bn.num_batches_tracked", RT_ST_I64, 0, NULL, &one, 8, RT_ST_COPY);
  if (var->extra) rt_st_writer_add(w, var->extra, RT_ST_F32, 1, (int64_t[]){1}, data, 4, RT_ST_COPY);
  CHECK(rt_st_writer_write(w, path) == RT_ST_OK, "writing %s: %s", path, rt_st_writer_error(w));
  rt_st_writer_free(w);
}

/* Loads a variant into the KRSC graph; returns the status, message in err. */
static RtWeightsStatus load_variant(const char *dir, const Variant *var, unsigned flags, Bufs *b, char *err,
                                    float *conv) {
  static int seq;
  char path[1200];
  snprintf(path, sizeof path, "%s/v%d.safetensors", dir, seq++);
  write_variant(path, var, conv);
  Arena a;
  arena_init(&a);
  IrGraph *g = make_graph(&a, IR_LAYOUT_KRSC);
  RtWeightsStatus st = rt_weights_load(g, path, flags, bufs_get, b, err, RT_WEIGHTS_ERRMAX);
  arena_free(&a);
  return st;
}

static void test_files(const char *dir) {
  Arena a;
  arena_init(&a);
  IrGraph *g = make_graph(&a, IR_LAYOUT_KRSC);
  Bufs b;
  bufs_alloc(&b, g, 0);
  arena_free(&a);
  float conv[K * C * R * S];
  for (int i = 0; i < K * C * R * S; i++) conv[i] = 0.1f * (float)i - 2.0f;
  char err[RT_WEIGHTS_ERRMAX];

  /* num_batches_tracked is ignored; F16 and BF16 are read */
  for (int h = 0; h < 3; h++) {
    Variant v = {.half = h == 0 ? RT_ST_F32 : h == 1 ? RT_ST_F16 : RT_ST_BF16};
    RtWeightsStatus st = load_variant(dir, &v, 0, &b, err, conv);
    CHECK(st == RT_WEIGHTS_OK, "variant %d: %s", h, err);
    double tol = h == 0 ? 0 : h == 1 ? 1e-3 : 1e-2;
    int bad = 0;
    for (int k = 0; k < K; k++)
      for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
          for (int s = 0; s < S; s++) {
            float want = conv[at_kcrs(k, c, r, s)], got = b.v[0][at_krsc(k, c, r, s)];
            bad += fabsf(got - want) > tol * (fabsf(want) > 1 ? fabsf(want) : 1);
          }
    CHECK(bad == 0, "variant %d: %d conv elements wrong", h, bad);
    CHECK(fabsf(b.v[2][3] - 203.0f) <= tol * 203, "variant %d: running_mean[3] = %g", h, b.v[2][3]);
  }

  struct {
    Variant v;
    unsigned flags;
    RtWeightsStatus want;
    const char *says;
  } cases[] = {
      {{.skip = "bn.weight"}, 0, RT_WEIGHTS_ERR_MISMATCH, "missing 'bn.weight'"},
      {{.skip = "conv.weight.momentum_buffer"}, 0, RT_WEIGHTS_ERR_MISMATCH, "missing 'conv.weight.momentum_buffer'"},
      {{.skip = "conv.weight.momentum_buffer"}, RT_WEIGHTS_OPTIM_OPTIONAL, RT_WEIGHTS_OK, ""},
      {{.skip = "bn.weight"}, RT_WEIGHTS_OPTIM_OPTIONAL, RT_WEIGHTS_ERR_MISMATCH, "missing 'bn.weight'"},
      {{.bad_shape = "bn.running_mean"},
       0,
       RT_WEIGHTS_ERR_MISMATCH,
       "'bn.running_mean' has shape [3], the graph needs [4]"},
      {{.bad_shape = "conv.weight"}, 0, RT_WEIGHTS_ERR_MISMATCH, "the graph needs [4,5,3,2]"},
      {{.bad_dtype = "bn.weight"}, 0, RT_WEIGHTS_ERR_MISMATCH, "'bn.weight' is I64, not F32, F16 or BF16"},
      {{.extra = "fc.weight"}, 0, RT_WEIGHTS_ERR_MISMATCH, "extra 'fc.weight'"},
      {{.extra = "fc.weight"}, RT_WEIGHTS_EXTRA_OK, RT_WEIGHTS_OK, ""},
      /* an inference graph reading a checkpoint: its optimizer state may be extra, nothing else */
      {{.extra = "fc.weight"}, RT_WEIGHTS_TRAINING_OK, RT_WEIGHTS_ERR_MISMATCH, "extra 'fc.weight'"},
      {{.extra = "fc.weight.momentum_buffer"}, RT_WEIGHTS_TRAINING_OK, RT_WEIGHTS_OK, ""},
      {{.extra = "loss_scale"}, RT_WEIGHTS_TRAINING_OK, RT_WEIGHTS_OK, ""},
      {{.extra = "loss_scale_good_steps"}, RT_WEIGHTS_TRAINING_OK, RT_WEIGHTS_OK, ""},
      {{.extra = "loss_scale"}, 0, RT_WEIGHTS_ERR_MISMATCH, "extra 'loss_scale'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    err[0] = 0;
    RtWeightsStatus st = load_variant(dir, &cases[i].v, cases[i].flags, &b, err, conv);
    CHECK(st == cases[i].want, "case %zu: status %d, want %d (%s)", i, (int)st, (int)cases[i].want, err);
    CHECK(strstr(err, cases[i].says) != NULL, "case %zu: message '%s' lacks '%s'", i, err, cases[i].says);
  }

  /* several problems at once: all named, nothing written */
  memset(b.v[1], 0, K * sizeof(float));
  Variant many = {.skip = "bn.running_mean", .bad_dtype = "conv.weight", .extra = "zzz", .bad_shape = "bn.weight"};
  CHECK(load_variant(dir, &many, 0, &b, err, conv) == RT_WEIGHTS_ERR_MISMATCH, "many: %s", err);
  CHECK(strstr(err, "missing 'bn.running_mean'") && strstr(err, "'conv.weight' is I64") && strstr(err, "extra 'zzz'") &&
            strstr(err, "'bn.weight' has shape"),
        "many: message '%s' does not name all four problems", err);
  CHECK(b.v[1][0] == 0, "a failed load wrote a value");

  char path[1200];
  snprintf(path, sizeof path, "%s/absent.safetensors", dir);
  arena_init(&a);
  g = make_graph(&a, IR_LAYOUT_KRSC);
  CHECK(rt_weights_load(g, path, 0, bufs_get, &b, err, sizeof err) == RT_WEIGHTS_ERR_IO, "absent file loaded");
  CHECK(strstr(err, "absent.safetensors") != NULL, "message '%s' lacks the file name", err);
  arena_free(&a);
  bufs_free(&b);
}

/* A file of conv.weight [K,C,R,S] (0.5 each), bn.running_mean and
 * bn.running_var [K] (1 each) in dtype dt, with element `at` of tensor
 * `which` (0, 1, 2; -1: none) set to x, loaded into a KRSC graph of the
 * three; the status, the message in err. */
static RtWeightsStatus load_values(const char *dir, RtStDtype dt, int which, int64_t at, float x, int skip_mean,
                                   float *conv_out, char *err) {
  static const char *names[] = {"conv.weight", "bn.running_mean", "bn.running_var"};
  static int seq;
  char path[1200];
  snprintf(path, sizeof path, "%s/val%d.safetensors", dir, seq++);
  RtStWriter *w = rt_st_writer_new();
  for (int i = 0; i < 3; i++) {
    float data[K * C * R * S];
    uint16_t half[K * C * R * S];
    int64_t shape[4] = {K, C, R, S}, n = i ? K : K * C * R * S;
    for (int64_t j = 0; j < n; j++) data[j] = i ? 1.0f : 0.5f;
    if (i == which) data[at] = x;
    if (i == 1 && skip_mean) continue;
    if (dt == RT_ST_F32) {
      rt_st_writer_add(w, names[i], dt, i ? 1 : 4, i ? (int64_t[]){K} : shape, data, (size_t)n * 4, RT_ST_COPY);
    } else {
      for (int64_t j = 0; j < n; j++)
        half[j] = dt == RT_ST_F16 ? rt_ref_f32_to_f16(data[j]) : rt_ref_f32_to_bf16(data[j]);
      rt_st_writer_add(w, names[i], dt, i ? 1 : 4, i ? (int64_t[]){K} : shape, half, (size_t)n * 2, RT_ST_COPY);
    }
  }
  CHECK(rt_st_writer_write(w, path) == RT_ST_OK, "writing %s: %s", path, rt_st_writer_error(w));
  rt_st_writer_free(w);
  Arena a;
  arena_init(&a);
  IrGraph *g = ir_graph_new(&a, "values");
  int64_t krsc[4] = {K, R, S, C}, k[1] = {K};
  ir_value_add(g, IR_VAL_PARAM, ir_type(IR_DT_F32, IR_LAYOUT_KRSC, 4, krsc), "conv.weight");
  ir_value_add(g, IR_VAL_STATE, ir_type(IR_DT_F32, IR_LAYOUT_ROW, 1, k), "bn.running_mean");
  ir_value_add(g, IR_VAL_STATE, ir_type(IR_DT_F32, IR_LAYOUT_ROW, 1, k), "bn.running_var");
  float mean[K], var[K];
  Bufs b = {{conv_out, mean, var}};
  err[0] = 0;
  RtWeightsStatus st = rt_weights_load(g, path, 0, bufs_get, &b, err, RT_WEIGHTS_ERRMAX);
  arena_free(&a);
  return st;
}

/* NaN and infinities in any tensor, and a running variance below 0, are
 * refused (RT_WEIGHTS_ERR_VALUE) with the file, the tensor and the first bad
 * element's index in the file's order (KCRS for a filter) named; nothing is
 * written.  -0 and a negative running mean are fine. */
static void test_values(const char *dir) {
  float conv[K * C * R * S];
  char err[RT_WEIGHTS_ERRMAX];
  struct {
    RtStDtype dt;
    int which;
    int64_t at;
    float x;
    RtWeightsStatus want;
    const char *says;
  } cases[] = {
      {RT_ST_F32, -1, 0, 0, RT_WEIGHTS_OK, ""},
      {RT_ST_F32, 0, 17, NAN, RT_WEIGHTS_ERR_VALUE, "tensor 'conv.weight': element 17 is NaN"},
      {RT_ST_F16, 0, 3, INFINITY, RT_WEIGHTS_ERR_VALUE, "tensor 'conv.weight': element 3 is inf"},
      {RT_ST_BF16, 0, 119, -INFINITY, RT_WEIGHTS_ERR_VALUE, "tensor 'conv.weight': element 119 is -inf"},
      {RT_ST_F32, 1, 2, NAN, RT_WEIGHTS_ERR_VALUE, "tensor 'bn.running_mean': element 2 is NaN"},
      {RT_ST_F32, 2, 2, -0.5f, RT_WEIGHTS_ERR_VALUE, "tensor 'bn.running_var': element 2 is -0.5, a variance below 0"},
      {RT_ST_F16, 2, 0, -0.25f, RT_WEIGHTS_ERR_VALUE, "tensor 'bn.running_var': element 0 is -0.25"},
      {RT_ST_F32, 2, 1, INFINITY, RT_WEIGHTS_ERR_VALUE, "tensor 'bn.running_var': element 1 is inf"},
      {RT_ST_F32, 2, 1, -0.0f, RT_WEIGHTS_OK, ""},
      {RT_ST_F32, 2, 1, 0, RT_WEIGHTS_OK, ""},
      {RT_ST_F32, 1, 1, -0.5f, RT_WEIGHTS_OK, ""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    for (int j = 0; j < K * C * R * S; j++) conv[j] = 7;
    RtWeightsStatus st = load_values(dir, cases[i].dt, cases[i].which, cases[i].at, cases[i].x, 0, conv, err);
    CHECK(st == cases[i].want, "values case %zu: status %d, want %d (%s)", i, (int)st, (int)cases[i].want, err);
    CHECK(strstr(err, cases[i].says) != NULL, "values case %zu: message '%s' lacks '%s'", i, err, cases[i].says);
    CHECK(st == RT_WEIGHTS_OK ? conv[0] == 0.5f : conv[0] == 7, "values case %zu: conv.weight %s", i,
          st == RT_WEIGHTS_OK ? "not loaded" : "written by a refused load");
    if (st != RT_WEIGHTS_OK) CHECK(strstr(err, "/val") != NULL, "values case %zu: '%s' lacks the file", i, err);
  }
  /* the first bad element only; a missing tensor beside a bad value is a mismatch, both named */
  CHECK(load_values(dir, RT_ST_F32, 0, 0, NAN, 1, conv, err) == RT_WEIGHTS_ERR_MISMATCH &&
            strstr(err, "missing 'bn.running_mean'") && strstr(err, "tensor 'conv.weight': element 0 is NaN"),
        "a missing tensor and a NaN: %s", err);
}

/* smallcnn through the whole pipeline: init, save, load into a fresh executor. */
static void test_model(const char *dir) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .out = stdout, .precision = IR_DT_F16};
  IrGraph *g = compile_file(&a, &d, NETC_ROOT "/models/smallcnn.net", &cx);
  diag_finish(&d);
  CHECK(g != NULL, "smallcnn does not compile");
  if (!g) {
    arena_free(&a);
    return;
  }
  RtCpu *x = NULL, *y = NULL;
  char err[RT_WEIGHTS_ERRMAX] = "", path[1200];
  snprintf(path, sizeof path, "%s/smallcnn.safetensors", dir);
  CHECK(rt_cpu_new(g, 2, &x, err, sizeof err) == 0 && rt_cpu_new(g, 2, &y, err, sizeof err) == 0, "%s", err);
  CHECK(rt_init_cpu(x, g, 7, err, sizeof err) == RT_INIT_OK, "%s", err);
  CHECK(rt_weights_save_cpu(x, g, path, err, sizeof err) == RT_WEIGHTS_OK, "save: %s", err);
  CHECK(rt_weights_load_cpu(y, g, path, 0, err, sizeof err) == RT_WEIGHTS_OK, "load: %s", err);
  int nweights = 0;
  for (int v = 0; v < g->nval; v++) {
    if (g->val[v].kind != IR_VAL_PARAM && g->val[v].kind != IR_VAL_STATE) continue;
    nweights++;
    CHECK(memcmp(rt_cpu_data(x, v), rt_cpu_data(y, v), (size_t)rt_cpu_numel(x, v) * sizeof(float)) == 0,
          "'%s' differs after save and load", g->val[v].name);
  }
  CHECK(nweights > 20, "smallcnn has only %d parameters and state", nweights);
  rt_cpu_free(x);
  rt_cpu_free(y);
  arena_free(&a);
}

/* rt_weights_export: a PyTorch state_dict.  The toy graph's momentum buffer
 * is left out, bn.num_batches_tracked (I64 []) is added beside
 * bn.running_mean, the filter is KCRS, and the file loads back (its counter
 * ignored, the momentum buffer optional) to the same values. */
static void test_export(const char *dir) {
  Arena a;
  arena_init(&a);
  IrGraph *g = make_graph(&a, IR_LAYOUT_KRSC);
  Bufs src, dst;
  bufs_alloc(&src, g, 1.5f);
  bufs_alloc(&dst, g, 0);
  char path[1200], full[1200], err[RT_WEIGHTS_ERRMAX] = "";
  snprintf(path, sizeof path, "%s/export.safetensors", dir);
  snprintf(full, sizeof full, "%s/full.safetensors", dir);
  CHECK(rt_weights_export(g, path, bufs_get, &src, 42, err, sizeof err) == RT_WEIGHTS_OK, "export: %s", err);
  CHECK(rt_weights_save(g, full, bufs_get, &src, err, sizeof err) == RT_WEIGHTS_OK, "save: %s", err);
  RtStFile *f = NULL, *ff = NULL;
  CHECK(rt_st_open(path, &f, err, sizeof err) == RT_ST_OK, "%s", err);
  CHECK(rt_st_open(full, &ff, err, sizeof err) == RT_ST_OK, "%s", err);
  if (f && ff) {
    CHECK(rt_st_count(f) == 4,
          "export has %zu tensors, want conv.weight, bn.weight, bn.running_mean, "
          "bn.num_batches_tracked",
          rt_st_count(f));
    CHECK(!rt_st_find(f, "conv.weight.momentum_buffer"), "export carries the momentum buffer");
    CHECK(rt_st_find(ff, "conv.weight.momentum_buffer") && !rt_st_find(ff, "bn.num_batches_tracked"),
          "the full save lost the momentum buffer or gained a counter");
    const RtStTensor *n = rt_st_find(f, "bn.num_batches_tracked");
    int64_t v = -1;
    if (n && n->dtype == RT_ST_I64 && n->ndim == 0 && n->nbytes == 8) memcpy(&v, n->data, 8);
    CHECK(v == 42, "bn.num_batches_tracked missing, not I64 [] or not 42 (%lld)", (long long)v);
    const RtStTensor *w = rt_st_find(f, "conv.weight"), *wf = rt_st_find(ff, "conv.weight");
    CHECK(w && wf && w->ndim == 4 && w->shape[1] == C && w->nbytes == wf->nbytes &&
              memcmp(w->data, wf->data, w->nbytes) == 0,
          "conv.weight is not the full save's KCRS tensor");
  }
  rt_st_close(f);
  rt_st_close(ff);
  CHECK(rt_weights_load(g, path, RT_WEIGHTS_OPTIM_OPTIONAL, bufs_get, &dst, err, sizeof err) == RT_WEIGHTS_OK,
        "load the export: %s", err);
  for (int v = 0; v < 3; v++)
    CHECK(memcmp(src.v[v], dst.v[v], (size_t)ir_type_numel(&g->val[v].type, 1) * sizeof(float)) == 0,
          "value %d differs after export and load", v);
  CHECK(rt_weights_load(g, path, 0, bufs_get, &dst, err, sizeof err) == RT_WEIGHTS_ERR_MISMATCH &&
            strstr(err, "missing 'conv.weight.momentum_buffer'"),
        "a strict load of an export must ask for the momentum buffer: %s", err);
  CHECK(rt_weights_export(g, path, bufs_get, &src, -1, err, sizeof err) == RT_WEIGHTS_ERR_GRAPH &&
            strstr(err, "negative"),
        "a negative counter: %s", err);
  bufs_free(&src);
  bufs_free(&dst);
  arena_free(&a);
}

int main(void) {
  char dir[1024];
  if (!tmpdir_make(dir, sizeof dir, "weights")) return check_skip("no temporary directory");
  test_roundtrip(dir);
  test_files(dir);
  test_values(dir);
  test_model(dir);
  test_export(dir);
  tmpdir_remove(dir);
  return check_report();
}
