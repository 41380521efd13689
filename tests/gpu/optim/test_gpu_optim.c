/* test_gpu_optim.c - multi-tensor launches (runtime/rt_gpu_optim.c,
 * codegen_templates/sgd_multi.cu and cast_multi.cu).
 *
 *   test_gpu_optim plan ROOT      no GPU: the runs of a hand-made graph are
 *                                 the expected ones; every sgd_update of
 *                                 ResNet-50 is in a run, every moved cast
 *                                 crosses no node that uses its output's
 *                                 memory nor the optimizer section's start;
 *                                 the program compiles with NVRTC
 *   test_gpu_optim gpu ROOT       on a GPU: the hand-made graph (sgd_updates
 *                                 with f32, f16 and bf16 gradients, nesterov
 *                                 on and off, momentum 0, with and without
 *                                 skip flag, weight casts to f16 and bf16
 *                                 between other nodes) for two steps (the
 *                                 second a captured graph) with the multi
 *                                 kernels and with NETC_MULTI_TENSOR=0: every
 *                                 weight, buffer and cast bit for bit equal,
 *                                 and equal to the CPU executor (1e-6, f16/bf16 copies 1e-2);
 *                                 skip = 1 and a zero loss scale leave the
 *                                 weights as they were; then smallcnn's
 *                                 training step both ways, bit for bit
 *   test_gpu_optim emit ROOT DIR  each run's kernel as DIR/<name>.cu (for
 *                                 tests/check_nvcc.sh)
 *
 * The gpu mode prints "skipped: <why>" and exits 77 without a GPU. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"
#include "gexec.h"
#include "rt_cpu.h"
#include "cg_multi.h"
#include "cg_nvrtc.h"
#include "rt_ref.h"

static const char GRAPH[] = "graph multi {\n"
                            "  input %0 ga : f32[1001]\n"
                            "  input %1 gb : f32[64]\n"
                            "  input %2 gc : f16[8195]\n"
                            "  input %3 gd : f16[5]\n"
                            "  input %4 ge : bf16[333]\n"
                            "  input %5 gf : f32[4099]\n"
                            "  input %6 gg : f32[3]\n"
                            "  input %7 gh : f32[4096]\n"
                            "  input %8 gi : f32[100]\n"
                            "  input %9 gj : f32[17]\n"
                            "  input %10 gk : f32[9000]\n"
                            "  input %11 lr : f32[]\n"
                            "  input %12 skip : f32[]\n"
                            "  input %13 x : f32[77]\n"
                            "  param @a.weight : f32[1001]\n"
                            "  state @a.weight.momentum_buffer : f32[1001]\n"
                            "  param @b.weight : f32[64]\n"
                            "  state @b.weight.momentum_buffer : f32[64]\n"
                            "  param @c.weight : f32[8195]\n"
                            "  state @c.weight.momentum_buffer : f32[8195]\n"
                            "  param @d.weight : f32[5]\n"
                            "  state @d.weight.momentum_buffer : f32[5]\n"
                            "  param @e.weight : f32[333]\n"
                            "  state @e.weight.momentum_buffer : f32[333]\n"
                            "  param @f.weight : f32[4099]\n"
                            "  state @f.weight.momentum_buffer : f32[4099]\n"
                            "  param @g.weight : f32[3]\n"
                            "  state @g.weight.momentum_buffer : f32[3]\n"
                            "  param @h.weight : f32[4096]\n"
                            "  state @h.weight.momentum_buffer : f32[4096]\n"
                            "  param @i.weight : f32[100]\n"
                            "  state @i.weight.momentum_buffer : f32[100]\n"
                            "  param @j.weight : f32[17]\n"
                            "  state @j.weight.momentum_buffer : f32[17]\n"
                            "  param @k.weight : f32[9000]\n"
                            "  state @k.weight.momentum_buffer : f32[9000]\n"
                            "  state @loss_scale : f32[]\n"
                            "  %14 = cast(@a.weight) {to=f16} : f16[1001]\n"
                            "  %15 = relu(%13) : f32[77]\n"
                            "  %16 = cast(@c.weight) {to=bf16} : bf16[8195]\n"
                            "  %17 = cast(@b.weight) {to=f16} : f16[64]\n"
                            "  %18 = relu(%15) : f32[77]\n"
                            "  %19 = cast(@d.weight) {to=bf16} : bf16[5]\n"
                            "  %20 = cast(@e.weight) {to=f16} : f16[333]\n"
                            "  optimizer:\n"
                            "  sgd_update(@a.weight, %0, @a.weight.momentum_buffer, %11, @loss_scale, %12) "
                            "{momentum=0.9 nesterov=0 weight_decay=0.0001}\n"
                            "  sgd_update(@c.weight, %2, @c.weight.momentum_buffer, %11, @loss_scale, %12) "
                            "{momentum=0.9 nesterov=0 weight_decay=0.0001}\n"
                            "  sgd_update(@b.weight, %1, @b.weight.momentum_buffer, %11, @loss_scale, %12) "
                            "{momentum=0.9 nesterov=0 weight_decay=0.0001}\n"
                            "  sgd_update(@d.weight, %3, @d.weight.momentum_buffer, %11, @loss_scale, %12) "
                            "{momentum=0.9 nesterov=0 weight_decay=0.0001}\n"
                            "  sgd_update(@e.weight, %4, @e.weight.momentum_buffer, %11, @loss_scale, %12) "
                            "{momentum=0.9 nesterov=1 weight_decay=0.0005}\n"
                            "  sgd_update(@f.weight, %5, @f.weight.momentum_buffer, %11, @loss_scale, %12) "
                            "{momentum=0.9 nesterov=1 weight_decay=0.0005}\n"
                            "  sgd_update(@g.weight, %6, @g.weight.momentum_buffer, %11, @loss_scale, %12) "
                            "{momentum=0.9 nesterov=1 weight_decay=0.0005}\n"
                            "  sgd_update(@h.weight, %7, @h.weight.momentum_buffer, %11, @loss_scale, %12) "
                            "{momentum=0.0 nesterov=0 weight_decay=0.0}\n"
                            "  sgd_update(@i.weight, %8, @i.weight.momentum_buffer, %11, @loss_scale, %12) "
                            "{momentum=0.0 nesterov=0 weight_decay=0.0}\n"
                            "  sgd_update(@j.weight, %9, @j.weight.momentum_buffer, %11, @loss_scale) "
                            "{momentum=0.9 nesterov=1 weight_decay=0.0001}\n"
                            "  sgd_update(@k.weight, %10, @k.weight.momentum_buffer, %11, @loss_scale) "
                            "{momentum=0.9 nesterov=1 weight_decay=0.0001}\n"
                            "  output %14, %16, %17, %18, %19, %20\n"
                            "}\n";

/* The runs GRAPH must have: kind, nodes (by index). */
static const struct {
  CgMultiKind kind;
  int n, node[3];
} WANT[] = {
    {CG_MULTI_CAST, 2, {0, 3}},  /* a, b to f16 (b crosses a relu; e may not: it reuses that relu's memory) */
    {CG_MULTI_CAST, 2, {2, 5}},  /* c, d to bf16 */
    {CG_MULTI_SGD, 2, {7, 9}},   /* a, b: f32 gradients */
    {CG_MULTI_SGD, 2, {8, 10}},  /* c, d: f16 gradients */
    {CG_MULTI_SGD, 2, {12, 13}}, /* f, g: nesterov (e alone: bf16) */
    {CG_MULTI_SGD, 2, {14, 15}}, /* h, i: momentum 0 */
    {CG_MULTI_SGD, 2, {16, 17}}, /* j, k: no skip flag */
};
enum { NWANT = sizeof WANT / sizeof WANT[0], NWANT_FOLDED = 7 /* nodes of the runs but their heads */ };

static char err[1 << 16];

/* CHECK as an expression: cond, after recording it. */
static int expect(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int expect(int cond, const char *fmt, ...) {
  if (cond) {
    check_npass++;
    return 1;
  }
  check_nfail++;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "check failed: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 0;
}

static IrGraph *read_graph(Arena *a) {
  Diag d;
  diag_init(&d, stderr);
  IrGraph *g = ir_read(a, &d, "multi.ir", GRAPH, strlen(GRAPH));
  if (!g || ir_verify(g, &d, "read")) return NULL;
  PassCtx cx = {.d = &d, .batch = 1};
  return pass_memplan(g, &cx);
}

/* --- plan ------------------------------------------------------------------------ */

static int64_t bytes_of(const IrGraph *g, int v, int64_t batch) {
  return ir_type_numel(&g->val[v].type, batch) * (int64_t)ir_dtype_size(g->val[v].type.dtype);
}

static int overlaps(const IrGraph *g, int u, int v, int64_t batch) {
  const IrValue *a = &g->val[u], *b = &g->val[v];
  if (a->offset < 0 || b->offset < 0 || (a->kind != IR_VAL_ACT && a->kind != IR_VAL_INPUT)) return 0;
  return a->offset < b->offset + bytes_of(g, v, batch) && b->offset < a->offset + bytes_of(g, u, batch);
}

/* Every moved cast of p crosses only nodes that leave its output's memory alone. */
static void check_moves(const IrGraph *g, const CgMultiPlan *p, int64_t batch, const char *what) {
  for (int k = 0; k < p->nrun; k++) {
    const CgMultiRun *r = &p->run[k];
    if (r->kind != CG_MULTI_CAST) continue;
    for (int m = 1; m < r->n; m++) {
      int y = g->node[r->node[m]].out[0], bad = -1;
      for (int i = r->node[0]; i < r->node[m] && bad < 0; i++) {
        int member = 0;
        for (int q = 0; q < m; q++) member |= r->node[q] == i;
        const IrNode *n = &g->node[i];
        for (int a = 0; a < n->nin && !member; a++)
          if (overlaps(g, n->in[a], y, batch)) bad = i;
        for (int a = 0; a < n->nout && bad < 0; a++)
          if (overlaps(g, n->out[a], y, batch) && n->out[a] != y) bad = i;
        CHECK((i < ir_opt_start(g)) == (r->node[0] < ir_opt_start(g)),
              "%s: cast run %d crosses the optimizer section's start (node %d) at node %d", what, k, ir_opt_start(g),
              i);
      }
      CHECK(bad < 0, "%s: cast node %d moved to node %d across node %d, which uses its memory", what, r->node[m],
            r->node[0], bad);
    }
  }
}

static void compile_program(const CgMultiPlan *p, const char *what) {
  int major, minor;
  char why[512];
  if (cg_nvrtc_version(&major, &minor, why, sizeof why)) {
    printf("  (%s: no NVRTC, program not compiled: %s)\n", what, why);
    return;
  }
  CgNvrtcOut out = {0};
  CgStatus s = cg_nvrtc_compile(p->source, what, "sm_90", CG_NVRTC_CUBIN, NULL, 0, &out, err, sizeof err);
  CHECK(s == CG_OK, "%s: the multi-tensor program does not compile: %s", what, err);
  cg_nvrtc_out_free(&out);
}

static int plan_mode(const char *root) {
  Arena a;
  arena_init(&a);
  IrGraph *g = read_graph(&a);
  CHECK(g != NULL, "multi.ir did not read or plan");
  CgMultiPlan p;
  if (g && expect(cg_multi_plan(g, 1, &p, err, sizeof err) == 0, "plan: %s", err)) {
    CHECK(p.nrun == NWANT, "hand-made graph: %d runs, want %d", p.nrun, NWANT);
    for (int k = 0; k < p.nrun && k < NWANT; k++) {
      int same = p.run[k].kind == WANT[k].kind && p.run[k].n == WANT[k].n;
      for (int j = 0; same && j < p.run[k].n; j++) same = p.run[k].node[j] == WANT[k].node[j];
      CHECK(same, "run %d (%s): %d nodes from node %d, not as expected", k, p.run[k].launch.name, p.run[k].n,
            p.run[k].node[0]);
    }
    /* the memory plan put e's f16 copy where the first relu's result was: e must stay where it is */
    CHECK(overlaps(g, g->node[1].out[0], g->node[6].out[0], 1), "multi.ir's plan changed: fix WANT");
    check_moves(g, &p, 1, "hand-made graph");
    compile_program(&p, "multi_ir");
    cg_multi_free(&p);
  }
  IrGraph *r50 = gexec_compile(&a, root, "models/resnet50.net", 32, 0, IR_DT_F16);
  CHECK(r50 != NULL, "models/resnet50.net did not compile");
  if (r50 && expect(cg_multi_plan(r50, 32, &p, err, sizeof err) == 0, "resnet50 plan: %s", err)) {
    int nsgd = 0, in_run = 0, sgd_runs = 0, casts = 0;
    for (int i = 0; i < r50->nnode; i++) nsgd += r50->node[i].op == IR_OP_SGD_UPDATE;
    for (int k = 0; k < p.nrun; k++) {
      if (p.run[k].kind == CG_MULTI_SGD) in_run += p.run[k].n, sgd_runs++;
      if (p.run[k].kind == CG_MULTI_CAST) casts += p.run[k].n;
      printf("  %-40s %4d nodes, %6lld blocks\n", p.run[k].launch.name, p.run[k].n, (long long)p.run[k].blocks);
    }
    CHECK(nsgd > 100 && in_run == nsgd, "resnet50: %d of %d sgd_updates in runs", in_run, nsgd);
    CHECK(sgd_runs <= 2, "resnet50: %d sgd runs, want one per gradient dtype", sgd_runs);
    CHECK(casts >= 2, "resnet50: no cast run");
    check_moves(r50, &p, 32, "resnet50");
    compile_program(&p, "resnet50_multi");
    printf("resnet50: %d sgd_updates in %d launches, %d weight casts in runs (%d runs in all)\n", nsgd, sgd_runs, casts,
           p.nrun);
    cg_multi_free(&p);
  }
  arena_free(&a);
  return check_report();
}

/* --- emit ------------------------------------------------------------------------ */

static int emit_mode(const char *root, const char *dir) {
  Arena a;
  arena_init(&a);
  IrGraph *gs[2] = {read_graph(&a), gexec_compile(&a, root, "models/resnet50.net", 32, 0, IR_DT_F16)};
  int64_t batch[2] = {1, 32}, files = 0;
  for (int k = 0; k < 2; k++) {
    CgMultiPlan p;
    if (!gs[k] || cg_multi_plan(gs[k], batch[k], &p, err, sizeof err)) {
      fprintf(stderr, "test_gpu_optim emit: %s\n", gs[k] ? err : "a graph did not compile");
      arena_free(&a);
      return 1;
    }
    for (int r = 0; r < p.nrun; r++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s.cu", dir, p.run[r].launch.name);
      FILE *f = fopen(path, "w");
      if (!f || fputs(p.run[r].unit, f) < 0 || fclose(f)) {
        fprintf(stderr, "test_gpu_optim emit: cannot write %s\n", path);
        cg_multi_free(&p);
        arena_free(&a);
        return 1;
      }
      files++;
    }
    cg_multi_free(&p);
  }
  printf("%lld kernels written to %s\n", (long long)files, dir);
  arena_free(&a);
  return 0;
}

/* --- gpu ------------------------------------------------------------------------- */

/* Host values of every input, param and state of g (float), for one case. */
static float **case_values(const IrGraph *g, float skip, float scale) {
  float **vals = calloc((size_t)g->nval, sizeof *vals);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int v = 0; vals && v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT) continue;
    int64_t n = ir_type_numel(&val->type, 1);
    float *f = vals[v] = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!f) continue;
    const char *name = val->name ? val->name : "";
    for (int64_t i = 0; i < n; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      float u = (float)((s >> 40) * (1.0 / 16777216.0)) - 0.5f;
      f[i] = strcmp(name, "lr") == 0                       ? 0.05f
             : strcmp(name, "skip") == 0                   ? skip
             : strcmp(name, "loss_scale") == 0             ? scale
             : val->kind == IR_VAL_INPUT && name[0] == 'g' ? u * scale /* gradients, scaled */
                                                           : u;
    }
    if (val->type.dtype == IR_DT_F16) rt_ref_round_f16(n, f, f);
    if (val->type.dtype == IR_DT_BF16) rt_ref_round_bf16(n, f, f);
  }
  return vals;
}

static void values_free(const IrGraph *g, float **vals) {
  for (int v = 0; vals && v < g->nval; v++) free(vals[v]);
  free(vals);
}

/* The values compared: parameters, state and the graph's outputs (an
 * activation's memory may since hold another value). */
static int compared(const IrGraph *g, int v) {
  if (g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE) return 1;
  for (int k = 0; k < g->noutput; k++)
    if (g->output[k] == v) return 1;
  return 0;
}

/* The compared values after two steps of a GPU executor (multi: the
 * multi-tensor launches on or off), read as float; NULL after a failure. */
static float **gpu_steps(const IrGraph *g, float **in, int multi, int *folded) {
  setenv("NETC_MULTI_TENSOR", multi ? "1" : "0", 1);
  RtGpu *x = NULL;
  float **out = calloc((size_t)g->nval, sizeof *out);
  int ok = out && expect(rt_gpu_new(g, 1, NULL, &x, err, sizeof err) == 0, "rt_gpu_new: %s", err);
  *folded = ok ? rt_gpu_multi_folded(x) : -1;
  for (int v = 0; ok && v < g->nval; v++)
    if (in[v]) ok = expect(rt_gpu_write(x, v, in[v], err, sizeof err) == 0, "write: %s", err);
  ok = ok && expect(rt_gpu_run(x, err, sizeof err) == 0, "step 1: %s", err);
  ok = ok && expect(rt_gpu_capture(x, err, sizeof err) == 0 && rt_gpu_run(x, err, sizeof err) == 0 &&
                        rt_gpu_sync(x, err, sizeof err) == 0,
                    "step 2 (captured): %s", err);
  for (int v = 0; ok && v < g->nval; v++) {
    if (!compared(g, v)) continue;
    int64_t n = rt_gpu_numel(x, v);
    if (!(out[v] = malloc(sizeof(float) * (size_t)(n ? n : 1)))) ok = 0;
    ok = ok && expect(rt_gpu_read(x, v, out[v], err, sizeof err) == 0, "read: %s", err);
  }
  rt_gpu_free(x);
  unsetenv("NETC_MULTI_TENSOR");
  if (!ok) {
    values_free(g, out);
    return NULL;
  }
  return out;
}

/* The CPU executor's values after two steps, or NULL (its step fails on a bad loss scale). */
static RtCpu *cpu_steps(const IrGraph *g, float **in) {
  RtCpu *x = NULL;
  if (rt_cpu_new(g, 1, &x, err, sizeof err)) return NULL;
  for (int v = 0; v < g->nval; v++)
    if (in[v]) memcpy(rt_cpu_data(x, v), in[v], sizeof(float) * (size_t)rt_cpu_numel(x, v));
  if (rt_cpu_run(x, err, sizeof err) || rt_cpu_run(x, err, sizeof err)) {
    rt_cpu_free(x);
    return NULL;
  }
  return x;
}

typedef struct Case {
  const char *what;
  float skip, scale;
  int cpu;  /* the CPU executor runs it */
  int kept; /* the skip-taking weights must stay as written */
} Case;

static void run_case(const IrGraph *g, const Case *c) {
  float **in = case_values(g, c->skip, c->scale);
  int fm = 0, fp = 0;
  float **m = gpu_steps(g, in, 1, &fm), **p = gpu_steps(g, in, 0, &fp);
  RtCpu *cpu = c->cpu ? cpu_steps(g, in) : NULL;
  CHECK(!c->cpu || cpu, "%s: the CPU executor failed: %s", c->what, err);
  CHECK(fm == NWANT_FOLDED && fp == 0, "%s: %d nodes folded with multi-tensor launches (want %d), %d without", c->what,
        fm, NWANT_FOLDED, fp);
  int diff = 0, worse = 0, moved = 0;
  double worst = 0;
  for (int v = 0; m && p && v < g->nval; v++) {
    if (!m[v]) continue;
    int64_t n = ir_type_numel(&g->val[v].type, 1);
    const char *name = g->val[v].name ? g->val[v].name : "(activation)";
    if (memcmp(m[v], p[v], sizeof(float) * (size_t)n)) {
      diff++;
      CHECK(0, "%s: %s differs between the multi-tensor and per-node launches", c->what, name);
    }
    if (cpu) {
      /* f32 within 1e-6 (FMA contraction); an f16/bf16 cast of a weight 1 ulp off may round the other way */
      double tol = g->val[v].type.dtype == IR_DT_F32 ? 1e-6 : 1e-2;
      double e = gexec_compare(name, m[v], rt_cpu_data(cpu, v), n, tol);
      worst = fmax(worst, e);
      worse += e > tol;
    }
    /* weights a..i take the skip flag: j and k update whatever the flag says */
    int takes_flag = g->val[v].kind != IR_VAL_ACT && name[0] >= 'a' && name[0] <= 'i' && name[1] == '.';
    if (c->kept && g->val[v].kind != IR_VAL_ACT && (takes_flag || c->scale <= 0) && strcmp(name, "loss_scale"))
      moved += memcmp(m[v], in[v], sizeof(float) * (size_t)n) != 0;
  }
  CHECK(m && p, "%s: a GPU run failed", c->what);
  CHECK(worse == 0, "%s: %d values off the CPU executor's (1e-6 f32, 1e-2 f16/bf16)", c->what, worse);
  CHECK(moved == 0, "%s: %d weights or buffers changed though the step is skipped", c->what, moved);
  printf("%-22s %7d %9d %10s %12.3g %6d\n", c->what, fm, diff, cpu ? "yes" : "no", worst, moved);
  values_free(g, m);
  values_free(g, p);
  values_free(g, in);
  rt_cpu_free(cpu);
}

/* smallcnn's training step (f16) with and without multi-tensor launches:
 * every parameter and state bit for bit equal after two steps. */
static void model_case(const char *root) {
  Arena a;
  arena_init(&a);
  IrGraph *g = gexec_compile(&a, root, "models/smallcnn.net", 8, 0, IR_DT_F16);
  CHECK(g != NULL, "models/smallcnn.net did not compile");
  void **vals = g ? gexec_values(g, 8, 7, 1024.0f) : NULL;
  float *got[2][256] = {{0}};
  int folded[2] = {0, 0}, nv = 0;
  for (int pass = 0; g && vals && pass < 2; pass++) {
    setenv("NETC_MULTI_TENSOR", pass ? "0" : "1", 1);
    RtGpu *x = NULL;
    int ok = expect(rt_gpu_new(g, 8, NULL, &x, err, sizeof err) == 0, "smallcnn rt_gpu_new: %s", err) &&
             gexec_write_all(x, g, vals) == 0;
    folded[pass] = ok ? rt_gpu_multi_folded(x) : -1;
    for (int s = 0; ok && s < 2; s++) ok = expect(rt_gpu_run(x, err, sizeof err) == 0, "smallcnn step: %s", err);
    nv = 0;
    for (int v = 0; ok && v < g->nval && nv < 256; v++) {
      if (g->val[v].kind != IR_VAL_PARAM && g->val[v].kind != IR_VAL_STATE) continue;
      got[pass][nv] = malloc(sizeof(float) * (size_t)(rt_gpu_numel(x, v) + 1));
      ok = got[pass][nv] && expect(rt_gpu_read(x, v, got[pass][nv], err, sizeof err) == 0, "read: %s", err);
      nv++;
    }
    rt_gpu_free(x);
  }
  unsetenv("NETC_MULTI_TENSOR");
  int diff = 0;
  for (int k = 0, v = 0; g && k < nv; v++) {
    if (g->val[v].kind != IR_VAL_PARAM && g->val[v].kind != IR_VAL_STATE) continue;
    if (got[0][k] && got[1][k] && memcmp(got[0][k], got[1][k], sizeof(float) * (size_t)gexec_numel(g, v, 8)) != 0) {
      diff++;
      CHECK(0, "smallcnn: %s differs with and without multi-tensor launches", g->val[v].name);
    }
    k++;
  }
  CHECK(folded[0] > 0 && folded[1] == 0, "smallcnn: %d / %d nodes folded", folded[0], folded[1]);
  printf("%-22s %7d %9d %10s %12s %6s\n", "smallcnn f16 step", folded[0], diff, "-", "-", "-");
  for (int k = 0; k < 256; k++) free(got[0][k]), free(got[1][k]);
  if (g) gexec_values_free(g, vals);
  arena_free(&a);
}

static int gpu_mode(const char *root) {
  if (!gexec_have_gpu()) return 77;
  /* the model comparison needs the same cuDNN engines and no GenStats sums (added in no fixed order) */
  setenv("NETC_CUDNN_DETERMINISTIC", "1", 1);
  Arena a;
  arena_init(&a);
  IrGraph *g = read_graph(&a);
  CHECK(g != NULL, "multi.ir did not read or plan");
  static const Case CASES[] = {
      {"plain step", 0, 1024, 1, 0},
      {"skip flag set", 1, 1024, 1, 1},
      {"loss scale 0", 0, 0, 0, 1},
      {"loss scale 1 (f16 g)", 0, 1, 1, 0},
  };
  printf("%-22s %7s %9s %10s %12s %6s\n", "case", "folded", "differ", "cpu", "worst rel", "moved");
  for (size_t i = 0; g && i < sizeof CASES / sizeof CASES[0]; i++) run_case(g, &CASES[i]);
  arena_free(&a);
  model_case(root);
  return check_report();
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "plan") == 0) return plan_mode(argv[2]);
  if (argc == 3 && strcmp(argv[1], "gpu") == 0) return gpu_mode(argv[2]);
  if (argc == 4 && strcmp(argv[1], "emit") == 0) return emit_mode(argv[2], argv[3]);
  fprintf(stderr, "usage: test_gpu_optim plan ROOT | gpu ROOT | emit ROOT DIR\n");
  return 2;
}
