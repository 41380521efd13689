/* test_gpu_allreduce.c - data-parallel training's all-reduce inside the
 * executor's step (runtime/gpu/rt_gpu_allreduce.c) on one rank.
 *
 * With one rank NCCL's mean is the identity, so a training executor with
 * the all-reduce set must end bit for bit where one without it ends: each
 * row makes two executors of the same graph from the same seeded state
 * (deterministic cuDNN engines, every fusion kept, so both make the same
 * plans), runs 3 steps on the same inputs in each -- the first launched,
 * then the step captured and replayed, or 3 updates of k micro-steps
 * through an accumulator -- and compares every parameter, state and output.
 * Rows: resnet20 fp16 with 64 KiB buckets (several of them) with the weight
 * gradients on the side stream and without; a bucket a gradient with the
 * all-reduce set after the step was captured (rt_gpu_run captures again);
 * fp32 launched node by node (no CUDA graph); smallcnn with the default
 * size (one bucket); accumulation k = 2, the all-reduce set before the
 * accumulator and after it (its last micro-step captured again); three
 * with synchronized batch norm (both executors with the sync_bn kernels,
 * the second's statistics summed over the one rank by NCCL in f64: the
 * same bits again), captured, launched and set late, and accumulated.  Also:
 * rt_gpu_nccl_join's, rt_gpu_allreduce_set's and rt_gpu_sync_bn_set's
 * refusals, and turning the all-reduce off; the all-reduce's clock (rt_gpu_comm_time) over more
 * replays.  The communicator is made once through rt_gpu_nccl_join
 * (unique id, rank 0 of 1) and shared by the rows.
 *
 * Exits 77 without a GPU, or without NCCL (the reason printed).
 *
 *   test_gpu_allreduce SOURCE_DIR [CACHE_DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net_exec.h"
#include "gexec.h"
#include "rt_nccl.h"

enum { BATCH = 8, STEPS = 3 };

typedef struct Row {
  const char *model;
  IrDtype precision;
  const char *branches; /* NETC_BRANCHES */
  int graph;            /* NETC_CUDA_GRAPH: 0 launches every step */
  size_t bucket;        /* bucket bytes (0: the default) */
  int accum;            /* micro-steps an update (1: the whole step) */
  int late;             /* the all-reduce set after the capture (or the accumulator) */
  int min_buckets;      /* at least this many buckets; -1: one a gradient */
  int sync_bn;          /* both executors with the sync_bn kernels, the second's statistics summed over the rank */
} Row;

static const Row ROWS[] = {
    {"models/resnet20.net", IR_DT_F16, "1", 1, 64 << 10, 1, 0, 4, 0},
    {"models/resnet20.net", IR_DT_F16, "0", 1, 64 << 10, 1, 0, 4, 0},
    {"models/resnet20.net", IR_DT_F16, "1", 1, 1, 1, 1, -1, 0},
    {"models/resnet20.net", IR_DT_F32, "1", 0, 64 << 10, 1, 0, 4, 0},
    {"models/smallcnn.net", IR_DT_F16, "1", 1, 0, 1, 0, 1, 0},
    {"models/resnet20.net", IR_DT_F16, "1", 1, 64 << 10, 2, 0, 4, 0},
    {"models/smallcnn.net", IR_DT_F32, "1", 1, 4096, 2, 1, 2, 0},
    /* synchronized batch norm: its sums through NCCL (f64) between the pack and the finalize */
    {"models/resnet20.net", IR_DT_F16, "1", 1, 64 << 10, 1, 0, 4, 1},
    {"models/resnet20.net", IR_DT_F32, "1", 0, 64 << 10, 1, 1, 4, 1},
    {"models/smallcnn.net", IR_DT_F16, "1", 1, 0, 2, 0, 1, 1},
};
enum { NROW = sizeof ROWS / sizeof ROWS[0] };

static const char *cache_dir;
static unsigned char nccl_id[RT_NCCL_ID_BYTES];
static RtNccl *comm; /* made by the first executor that needs it, freed at the end */
static char table[NROW][200];

/* The distinct gradients the optimizer section reads (the API's own list). */
static int *optimizer_grads(const IrGraph *g, int *n) {
  int *out = NULL;
  char why[256];
  if (net_graph_optimizer_section(g, &out, n, why, sizeof why)) {
    fprintf(stderr, "%s\n", why);
    *n = 0;
  }
  return out;
}

static int compared(const IrGraph *g, int v) {
  for (int k = 0; k < g->noutput; k++)
    if (g->output[k] == v) return 1;
  return (g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE) && !gexec_is_int(g->val[v].type.dtype);
}

/* The inputs of batch `which` (images, labels, lr, loss scale), seeded. */
static int write_inputs(RtGpu *x, const IrGraph *g, const Row *row, int which) {
  void **vals = gexec_values(g, BATCH, 1000 + (uint64_t)which, row->precision == IR_DT_F16 ? 1024.0f : 8.0f);
  char err[1024];
  int ok = vals != NULL;
  for (int v = 0; ok && v < g->nval; v++) {
    if (g->val[v].kind != IR_VAL_INPUT || !vals[v]) continue;
    ok = !rt_gpu_write(x, v, vals[v], err, sizeof err);
    CHECK(ok, "%s: writing input %s: %s", row->model, g->val[v].name ? g->val[v].name : "?", err);
  }
  gexec_values_free(g, vals);
  return ok ? 0 : -1;
}

/* rt_gpu_nccl_join's and rt_gpu_allreduce_set's refusals on x, then the
 * all-reduce set and turned off again. */
static void refusals(RtGpu *x, const int *grad, int n) {
  char err[1024];
  RtNccl *c = NULL;
  CHECK(rt_gpu_nccl_join(x, nccl_id, 1, 1, &c, err, sizeof err) == RT_CUDA_EARG && !c && strstr(err, "bad arguments"),
        "rank 1 of 1 refused: %s", err);
  CHECK(rt_gpu_nccl_join(x, NULL, 1, 0, &c, err, sizeof err) == RT_CUDA_EARG && !c, "no id refused: %s", err);
  if (n >= 2) {
    int twice[2] = {grad[0], grad[0]};
    CHECK(rt_gpu_allreduce_set(x, comm, twice, 2, 0, err, sizeof err) == RT_CUDA_EARG && strstr(err, "named twice") &&
              rt_gpu_allreduce_buckets(x) == 0,
          "a gradient named twice refused, the all-reduce off: %s", err);
  }
  CHECK(rt_gpu_allreduce_set(x, comm, grad, n, 0, err, sizeof err) == RT_CUDA_OK && rt_gpu_allreduce_buckets(x) >= 1,
        "set: %s", err);
  CHECK(rt_gpu_allreduce_set(x, NULL, NULL, 0, 0, err, sizeof err) == RT_CUDA_OK && rt_gpu_allreduce_buckets(x) == 0,
        "turned off: %s", err);
  CHECK(rt_gpu_sync_bn_set(x, 1, err, sizeof err) == RT_CUDA_EARG && strstr(err, "not set"),
        "synchronized batch norm without the all-reduce refused: %s", err);
  if (!getenv("NETC_SYNC_BN") || strcmp(getenv("NETC_SYNC_BN"), "1") != 0) {
    CHECK(rt_gpu_allreduce_set(x, comm, grad, n, 0, err, sizeof err) == RT_CUDA_OK, "set again: %s", err);
    CHECK(rt_gpu_sync_bn_set(x, 1, err, sizeof err) == RT_CUDA_EARG && strstr(err, "sync_bn=1"),
          "synchronized batch norm without its kernels refused: %s", err);
    CHECK(rt_gpu_allreduce_set(x, NULL, NULL, 0, 0, err, sizeof err) == RT_CUDA_OK, "off again: %s", err);
  }
}

/* The all-reduce of row (and synchronized batch norm when it asks) set on x. */
static int reduce_set(RtGpu *x, const Row *row, const int *grad, int n) {
  char err[1024] = "";
  int ok = !rt_gpu_allreduce_set(x, comm, grad, n, row->bucket, err, sizeof err);
  if (ok && row->sync_bn) ok = !rt_gpu_sync_bn_set(x, 1, err, sizeof err);
  CHECK(ok, "%s: rt_gpu_allreduce_set%s: %s", row->model, row->sync_bn ? " and rt_gpu_sync_bn_set" : "", err);
  return ok;
}

/* The all-reduce's clock (rt_gpu_comm_time) after more replays of the
 * step: with the all-reduce in a captured step, replays timed (a row is
 * read when its place of the step clock comes round again), each one's
 * span positive and its exposed part no longer; nothing otherwise. */
static void clock_check(RtGpu *x, const Row *row, int reduce) {
  char err[4096] = "";
  int ok = 1;
  for (int k = 0; ok && k < 8; k++) ok = !rt_gpu_run(x, err, sizeof err);
  if (ok) ok = !rt_gpu_sync(x, err, sizeof err);
  CHECK(ok, "%s: the clock's replays: %s", row->model, err);
  double ms = 0, exposed = 0;
  int64_t timed = 0;
  rt_gpu_comm_time(x, &ms, &exposed, &timed);
  if (reduce && row->graph) {
    CHECK(ok && timed >= 4 && ms > 0 && exposed >= 0 && exposed <= ms + 1e-3,
          "%s: the all-reduce's clock: %.4f ms, %.4f exposed over %lld replays", row->model, ms, exposed,
          (long long)timed);
    printf("  %s: all-reduce %.4f ms a step, %.4f of it exposed (%lld replays timed)\n", row->model,
           timed ? ms / (double)timed : 0, timed ? exposed / (double)timed : 0, (long long)timed);
  } else {
    CHECK(timed == 0 && ms == 0 && exposed == 0, "%s: an all-reduce clock without one (%lld replays, %.4f ms)",
          row->model, (long long)timed, ms);
  }
}

/* STEPS steps (or updates) of row's graph from init in a new executor,
 * with the all-reduce when reduce; every compared value into out[v] and
 * the buckets into *nbucket.  0, or -1 after a failed CHECK. */
static int steps(const IrGraph *g, const Row *row, void **init, int reduce, float **out, int *nbucket) {
  char err[4096] = "";
  RtGpu *x = NULL;
  RtGpuAccum *acc = NULL;
  RtGpuOpts o = {.device = 0, .cache_dir = cache_dir};
  const char *with = reduce ? "with the all-reduce" : "without";
  setenv("NETC_BRANCHES", row->branches, 1);
  setenv("NETC_CUDA_GRAPH", row->graph ? "1" : "0", 1);
  setenv("NETC_SYNC_BN", row->sync_bn ? "1" : "0", 1);
  int n = 0, *grad = optimizer_grads(g, &n);
  int ok = grad && n > 0 && !rt_gpu_new(g, BATCH, &o, &x, err, sizeof err);
  CHECK(ok, "%s %s: rt_gpu_new: %s", row->model, with, err);
  if (ok) ok = gexec_write_all(x, g, init) == 0;
  if (ok && reduce && !comm) {
    ok = !rt_gpu_nccl_join(x, nccl_id, 1, 0, &comm, err, sizeof err);
    CHECK(ok, "rt_gpu_nccl_join (rank 0 of 1): %s", err);
    if (ok) refusals(x, grad, n);
  }
  if (ok && reduce && !row->late) ok = reduce_set(x, row, grad, n);
  if (row->accum == 1) {
    for (int k = 0; ok && k < STEPS; k++) {
      ok = !write_inputs(x, g, row, k) && (k != 1 || !rt_gpu_capture(x, err, sizeof err));
      if (ok && reduce && row->late && k == 1) /* after the capture: the next run captures again */
        ok = reduce_set(x, row, grad, n);
      if (ok) ok = !rt_gpu_run(x, err, sizeof err);
      CHECK(ok, "%s %s step %d: %s", row->model, with, k, err);
    }
  } else {
    ok = ok && !rt_gpu_accum_new(x, grad, n, row->accum, &acc, err, sizeof err);
    CHECK(ok, "%s %s: rt_gpu_accum_new: %s", row->model, with, err);
    if (ok && reduce && row->late) /* after the accumulator: its last micro-step captured again */
      ok = reduce_set(x, row, grad, n);
    for (int u = 0; ok && u < STEPS; u++)
      for (int m = 0; ok && m < row->accum; m++) {
        ok = !write_inputs(x, g, row, u * row->accum + m) &&
             !rt_gpu_accum_run(acc, m == row->accum - 1, err, sizeof err);
        CHECK(ok, "%s %s update %d micro-step %d: %s", row->model, with, u, m, err);
      }
  }
  if (ok) {
    ok = !rt_gpu_sync(x, err, sizeof err);
    CHECK(ok, "%s %s: the steps: %s", row->model, with, err);
  }
  for (int v = 0; ok && v < g->nval; v++) {
    if (!compared(g, v)) continue;
    out[v] = malloc((size_t)(gexec_numel(g, v, BATCH) + 1) * sizeof(float));
    ok = out[v] && !rt_gpu_read(x, v, out[v], err, sizeof err);
    CHECK(ok, "%s: reading %%%d: %s", row->model, v, err);
  }
  if (ok && row->accum == 1) clock_check(x, row, reduce);
  *nbucket = rt_gpu_allreduce_buckets(x);
  if (row->min_buckets < 0 && reduce) CHECK(*nbucket == n, "%s: %d buckets for %d gradients", row->model, *nbucket, n);
  rt_gpu_accum_free(acc);
  rt_gpu_free(x);
  free(grad);
  unsetenv("NETC_BRANCHES");
  unsetenv("NETC_CUDA_GRAPH");
  unsetenv("NETC_SYNC_BN");
  return ok ? 0 : -1;
}

static void run_row(const char *root, int ri) {
  const Row *r = &ROWS[ri];
  const char *prec = r->precision == IR_DT_F16 ? "fp16" : "fp32";
  char mode[64];
  snprintf(mode, sizeof mode, "%s%s%s branches=%s k=%d", r->sync_bn ? "sync_bn " : "", r->graph ? "graph" : "launched",
           r->late ? " late" : "", r->branches, r->accum);
  snprintf(table[ri], sizeof table[ri], "%-20s %s %-30s FAILED before the comparison", r->model, prec, mode);
  Arena arena;
  arena_init(&arena);
  IrGraph *g = gexec_compile(&arena, root, r->model, BATCH, 0, r->precision);
  CHECK(g != NULL, "%s compiles", r->model);
  float **off = g ? calloc((size_t)g->nval, sizeof *off) : NULL, **on = g ? calloc((size_t)g->nval, sizeof *on) : NULL;
  void **init = g ? gexec_values(g, BATCH, 71 + (uint64_t)ri, r->precision == IR_DT_F16 ? 1024.0f : 8.0f) : NULL;
  int nb_off = 0, nb_on = 0;
  if (init && off && on && !steps(g, r, init, 0, off, &nb_off) && !steps(g, r, init, 1, on, &nb_on)) {
    if (r->min_buckets > 0)
      CHECK(nb_on >= r->min_buckets, "%s: %d buckets, want at least %d", r->model, nb_on, r->min_buckets);
    int bitwise = 1, ndiff = 0;
    double worst = 0;
    for (int v = 0; v < g->nval; v++) {
      if (!off[v] || !on[v]) continue;
      int64_t n = gexec_numel(g, v, BATCH);
      if (memcmp(off[v], on[v], (size_t)n * sizeof(float)) == 0) continue;
      bitwise = 0, ndiff++;
      char what[160];
      snprintf(what, sizeof what, "%s %s", r->model, g->val[v].name ? g->val[v].name : "output");
      double e = gexec_compare(what, on[v], off[v], n, 0);
      if (e > worst) worst = e;
    }
    CHECK(bitwise, "%s %s %s: %d values differ with the all-reduce of one rank (worst relative %.3g)", r->model, prec,
          mode, ndiff, worst);
    snprintf(table[ri], sizeof table[ri], "%-20s %s %-30s buckets %3d  %s", r->model, prec, mode, nb_on,
             bitwise ? "bitwise equal" : "DIFFERENT");
  }
  for (int v = 0; g && v < g->nval; v++) {
    if (off) free(off[v]);
    if (on) free(on[v]);
  }
  free(off);
  free(on);
  if (init) gexec_values_free(g, init);
  arena_free(&arena);
}

int main(int argc, char **argv) {
  if (argc < 2) return check_skip("usage: test_gpu_allreduce SOURCE_DIR [CACHE_DIR]");
  const char *root = argv[1];
  cache_dir = argc > 2 ? argv[2] : NULL;
  if (!gexec_have_gpu()) return 77;
  char why[1024];
  if (rt_nccl_load(NULL, why, sizeof why)) return check_skip(why);
  int v = rt_nccl_version();
  printf("NCCL %d.%d.%d\n", v / 10000, v / 100 % 100, v % 100);
  /* the device's primary context held for the whole test: the communicator
   * outlives the executors that share it */
  RtCudaCtx *keep = NULL;
  CHECK(!rt_cuda_ctx_init(&keep, 0, why, sizeof why), "context: %s", why);
  CHECK(!rt_nccl_unique_id(nccl_id, why, sizeof why), "unique id: %s", why);
  if (check_nfail) return check_report();
  setenv("NETC_CUDNN_DETERMINISTIC", "1", 1);
  setenv("NETC_FUSION_PICK", "0", 1);
  for (int ri = 0; ri < NROW; ri++) run_row(root, ri);
  printf("\n%-20s prec %-30s result\n", "model", "mode");
  for (int ri = 0; ri < NROW; ri++) printf("%s\n", table[ri]);
  rt_nccl_free(comm, 0);
  rt_cuda_ctx_free(keep);
  return check_report();
}
