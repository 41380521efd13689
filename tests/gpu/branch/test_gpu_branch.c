/* test_gpu_branch.c - the weight gradients' side stream (runtime/rt_gpu_branch.c,
 * the fork/join in rt_gpu.c).
 *
 * `plan ROOT`, no GPU: the join planner on hand-made ranges (disjoint,
 * read/read, RAW, WAR, WAW, touching ends, a chain of side nodes, side
 * nodes with no conflict joining at the end, values without memory), then
 * on random ranges against a brute-force oracle, with every launched range
 * [lo, hi) replayed as rt_gpu_launch_nodes queues it: each conflicting
 * side/main pair must be ordered by a wait, and every range must end with
 * its branches joined.  Then the windows the memory plan leaves on
 * resnet20 and resnet50 (training, fp16) from the IR's offsets and the
 * multi-tensor runs, as the executor computes them, printed for the record.
 *
 * `gpu ROOT [CACHE]`: each row runs a training model a few steps (the first
 * uncaptured, then the captured graph replayed) in two executors, one with
 * NETC_BRANCHES=0 and one with the branches on, from the same seeded state,
 * with deterministic cuDNN engines and every fusion kept (no timing picks,
 * so both make the same plans): the parameters, state and outputs must be
 * bit for bit the same, and the second executor must really have side
 * nodes.  Exits 77 without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gexec.h"
#include "rt_gpu_branch.h"
#include "cg_multi.h"

/* --- the planner on hand-made ranges ------------------------------------------ */

typedef struct R {
  uint64_t lo, n;
  int write;
} R;

/* A set from nodes given as up to 4 ranges each (n = 0 ends a node's list). */
static void build(RtBranchSet *s, int nnode, const R (*ranges)[4], const int *side) {
  rt_gpu_branch_set_init(s);
  for (int i = 0; i < nnode; i++) {
    for (int k = 0; k < 4 && ranges[i][k].n; k++)
      CHECK(rt_gpu_branch_add(s, ranges[i][k].lo, ranges[i][k].n, ranges[i][k].write) == 0, "add");
    CHECK(rt_gpu_branch_end_node(s, side[i]) == 0, "end node");
  }
}

static void plan_case(const char *what, int nnode, const R (*ranges)[4], const int *side, const int *want_join) {
  RtBranchSet s;
  RtBranchPlan p;
  build(&s, nnode, ranges, side);
  CHECK(rt_gpu_branch_plan(&s, &p) == 0, "%s: plans", what);
  for (int i = 0; i < nnode; i++)
    CHECK(p.join[i] == want_join[i], "%s: node %d joins at %d, want %d", what, i, p.join[i], want_join[i]);
  rt_gpu_branch_plan_free(&p);
  rt_gpu_branch_set_free(&s);
}

enum { A = 0x1000, B = 0x2000, C = 0x3000, D = 0x4000 };

static void test_cases(void) {
  /* node 1 (side) reads A, writes B; the rest as named */
  static const int side1[] = {0, 1, 0, 0, 0};
  {
    const R r[5][4] = {
        {{A, 256, 1}}, {{A, 256, 0}, {B, 256, 1}}, {{C, 256, 1}}, {{A, 256, 0}, {D, 64, 1}}, {{C, 256, 0}}};
    plan_case("disjoint and read/read", 5, r, side1, (const int[]){-1, 5, -1, -1, -1});
  }
  {
    const R r[5][4] = {{{A, 256, 1}}, {{A, 256, 0}, {B, 256, 1}}, {{C, 256, 1}}, {{B + 255, 8, 0}}, {{B, 8, 0}}};
    plan_case("read after write (last byte)", 5, r, side1, (const int[]){-1, 3, -1, -1, -1});
  }
  {
    const R r[5][4] = {{{A, 256, 1}}, {{A, 256, 0}, {B, 256, 1}}, {{C, 256, 1}}, {{C, 64, 0}, {A - 8, 9, 1}}};
    plan_case("write after read (first byte)", 4, r, side1, (const int[]){-1, 3, -1, -1});
  }
  {
    const R r[4][4] = {{{A, 256, 1}}, {{A, 256, 0}, {B, 256, 1}}, {{B + 100, 4, 1}}, {{C, 1, 1}}};
    plan_case("write after write", 4, r, side1, (const int[]){-1, 2, -1, -1});
  }
  {
    /* ranges that touch end to start do not overlap */
    const R r[4][4] = {{{A, 256, 1}}, {{A, 256, 0}, {B, 256, 1}}, {{A - 64, 64, 1}, {B + 256, 64, 1}}, {{A, 256, 1}}};
    plan_case("touching ends", 4, r, side1, (const int[]){-1, 3, -1, -1});
  }
  {
    /* a chain: side 1 and 3 conflict with each other (their stream orders
     * them) and side 3 with main 2 before it (its fork orders that); main 4
     * reads what both write */
    const int side[] = {0, 1, 0, 1, 0, 0};
    const R r[6][4] = {{{A, 64, 1}},
                       {{A, 64, 0}, {B, 64, 1}},
                       {{C, 64, 1}},
                       {{B, 64, 0}, {C, 64, 0}, {B + 128, 64, 1}},
                       {{D, 64, 1}, {B, 256, 0}},
                       {{A, 64, 1}}};
    plan_case("chain of side nodes", 6, r, side, (const int[]){-1, 4, -1, 4, -1, -1});
  }
  {
    /* side nodes only touch their own memory: both join at the end */
    const int side[] = {1, 0, 1};
    const R r[3][4] = {{{A, 64, 1}}, {{B, 64, 1}}, {{C, 64, 1}}};
    RtBranchSet s;
    RtBranchPlan p;
    build(&s, 3, r, side);
    CHECK(rt_gpu_branch_plan(&s, &p) == 0, "plans");
    CHECK(p.join[0] == 3 && p.join[2] == 3 && p.wait_at[3] == 2, "both join at the end, the later one waited for");
    CHECK(p.nside == 2 && p.window_min == 0 && p.window_max == 1 && fabs(p.window_mean - 0.5) < 1e-12 && p.narrow == 2,
          "window stats: %d side, min %d max %d mean %g narrow %d", p.nside, p.window_min, p.window_max, p.window_mean,
          p.narrow);
    CHECK(rt_gpu_branch_wait(&p, 0, 3, -1) == 2 && rt_gpu_branch_wait(&p, 0, 3, 2) == -1 &&
              rt_gpu_branch_wait(&p, 3, 3, -1) == -1 && rt_gpu_branch_wait(&p, 0, 1, -1) == -1,
          "waits: latest joining side node, not twice, not from before the range");
    rt_gpu_branch_plan_free(&p);
    rt_gpu_branch_set_free(&s);
  }
  {
    /* an empty set and a set without side nodes */
    RtBranchSet s;
    RtBranchPlan p;
    rt_gpu_branch_set_init(&s);
    CHECK(rt_gpu_branch_plan(&s, &p) == 0 && p.nside == 0 && p.nnode == 0, "empty set");
    CHECK(rt_gpu_branch_wait(&p, 0, 0, -1) == -1, "no waits without side nodes");
    rt_gpu_branch_plan_free(&p);
    rt_gpu_branch_plan_free(NULL);
    rt_gpu_branch_set_free(&s);
    rt_gpu_branch_set_free(NULL);
  }
}

/* rt_gpu_branch_add_node on a two-node graph by hand: inputs read, outputs
 * written, values without memory left out, zero bytes left out. */
static void test_add_node(void) {
  IrValue val[4];
  memset(val, 0, sizeof val);
  int in0[] = {0, 1}, out0[] = {2}, in1[] = {2, 3}, out1[] = {1};
  IrNode node[2];
  memset(node, 0, sizeof node);
  node[0] = (IrNode){.op = IR_OP_CONV2D_BWD_WEIGHT, .nin = 2, .nout = 1, .in = in0, .out = out0};
  node[1] = (IrNode){.op = IR_OP_CONV2D_BWD_WEIGHT, .nin = 2, .nout = 1, .in = in1, .out = out1};
  IrGraph g;
  memset(&g, 0, sizeof g);
  g.val = val, g.nval = 4, g.node = node, g.nnode = 2;
  const uint64_t addr[] = {A, 0, B, C}, bytes[] = {16, 16, 32, 0};
  RtBranchSet s;
  rt_gpu_branch_set_init(&s);
  CHECK(rt_gpu_branch_add_node(&s, &g, 0, addr, bytes) == 0 && rt_gpu_branch_end_node(&s, 1) == 0, "node 0");
  CHECK(rt_gpu_branch_add_node(&s, &g, 1, addr, bytes) == 0 && rt_gpu_branch_end_node(&s, 0) == 0, "node 1");
  CHECK(s.nnode == 2 && s.first[1] == 2 && s.first[2] == 3, "ranges per node: %d, %d", s.first[1],
        s.first[2] - s.first[1]);
  CHECK(s.range[0].lo == A && s.range[0].hi == A + 16 && !s.range[0].write, "input read");
  CHECK(s.range[1].lo == B && s.range[1].hi == B + 32 && s.range[1].write, "output written");
  CHECK(s.range[2].lo == B && !s.range[2].write, "node 1 reads node 0's output");
  RtBranchPlan p;
  CHECK(rt_gpu_branch_plan(&s, &p) == 0 && p.join[0] == 1, "the reader is the join");
  rt_gpu_branch_plan_free(&p);
  rt_gpu_branch_set_free(&s);
}

/* --- random ranges against an oracle, with launched ranges replayed ------------- */

static uint64_t rng = 88172645463325252ull;
static unsigned rnd(unsigned n) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (unsigned)(rng % n);
}

static int brute_conflict(const RtBranchSet *s, int a, int b) {
  for (int i = s->first[a]; i < s->first[a + 1]; i++)
    for (int j = s->first[b]; j < s->first[b + 1]; j++) {
      const RtBranchRange *x = &s->range[i], *y = &s->range[j];
      if ((x->write || y->write) && !(x->hi <= y->lo || y->hi <= x->lo)) return 1;
    }
  return 0;
}

/* Replays rt_gpu_launch_nodes' waits over [lo, hi) and checks that every
 * main node waits (directly or through a later side node) for each earlier
 * side node of the range it conflicts with, and that the range ends
 * joined. */
static void replay_range(const RtBranchSet *s, const RtBranchPlan *p, int lo, int hi, int trial) {
  int last = -1, joined = -1;
  for (int i = lo; i < hi; i++) {
    int w = rt_gpu_branch_wait(p, lo, i, joined);
    if (w >= 0) {
      CHECK(w <= last && w >= lo && w < i, "trial %d: wait for %d before %d, launched up to %d", trial, w, i, last);
      joined = w;
    }
    if (s->side[i]) {
      last = i;
      continue;
    }
    for (int t = lo; t < i; t++)
      if (s->side[t] && brute_conflict(s, t, i))
        CHECK(joined >= t, "trial %d range [%d,%d): main %d conflicts with side %d but waited only for %d", trial, lo,
              hi, i, t, joined);
  }
  if (last > joined) joined = last;
  CHECK(joined == last, "trial %d range [%d,%d) ends joined", trial, lo, hi);
}

static void test_random(void) {
  int bad_before = check_nfail;
  for (int trial = 0; trial < 300 && check_nfail == bad_before; trial++) {
    int n = 2 + (int)rnd(30);
    RtBranchSet s;
    rt_gpu_branch_set_init(&s);
    for (int i = 0; i < n; i++) {
      int k = (int)rnd(4);
      for (int j = 0; j < k; j++) rt_gpu_branch_add(&s, rnd(64) * 16, 1 + rnd(48), (int)rnd(2));
      rt_gpu_branch_end_node(&s, rnd(3) == 0);
    }
    RtBranchPlan p;
    CHECK(rt_gpu_branch_plan(&s, &p) == 0, "trial %d plans", trial);
    for (int i = 0; i < n; i++) {
      if (!s.side[i]) {
        CHECK(p.join[i] == -1, "trial %d: main node %d has no join", trial, i);
        continue;
      }
      int want = n;
      for (int q = i + 1; q < n && want == n; q++)
        if (!s.side[q] && brute_conflict(&s, i, q)) want = q;
      CHECK(p.join[i] == want, "trial %d: side node %d joins at %d, the oracle says %d", trial, i, p.join[i], want);
    }
    for (int lo = 0; lo < n; lo += 1 + (int)rnd(4))
      for (int hi = lo + 1; hi <= n; hi += 1 + (int)rnd(5)) replay_range(&s, &p, lo, hi, trial);
    rt_gpu_branch_plan_free(&p);
    rt_gpu_branch_set_free(&s);
  }
}

/* --- what the memory plan leaves ----------------------------------------------- */

/* Which value of side node i meets which of node q (for the record):
 * "in %a / out %b" = i's input a lies where q writes b, and so on. */
static void print_reason(const IrGraph *g, int i, int q, const uint64_t *addr, const uint64_t *bytes) {
  const IrNode *a = &g->node[i];
  for (int k = 0; q < g->nnode && k < a->nin + a->nout; k++) {
    int u = k < a->nin ? a->in[k] : a->out[k - a->nin];
    const IrNode *b = &g->node[q];
    for (int m = 0; addr[u] && m < b->nin + b->nout; m++) {
      int v = m < b->nin ? b->in[m] : b->out[m - b->nin];
      if ((k >= a->nin || m >= b->nin) && addr[v] && addr[u] < addr[v] + bytes[v] && addr[v] < addr[u] + bytes[u]) {
        printf(" %s %%%d / %s %%%d\n", k < a->nin ? "in" : "out", u, m < b->nin ? "in" : "out", v);
        return;
      }
    }
  }
  printf("\n");
}

/* Windows of g's weight gradients from the IR: arena values at their
 * offsets, the others at made-up disjoint addresses, multi-tensor runs
 * charged to their heads (as the executor does); scratch and workspace left
 * out (the side stream has its own).  Prints per side node what its join
 * touches when verbose. */
static void windows(const char *root, const char *model, int64_t batch, int verbose) {
  Arena arena;
  arena_init(&arena);
  IrGraph *g = gexec_compile(&arena, root, model, batch, 0, IR_DT_F16);
  CHECK(g != NULL, "%s compiles", model);
  if (!g) {
    arena_free(&arena);
    return;
  }
  uint64_t *addr = calloc((size_t)g->nval, sizeof *addr), *bytes = calloc((size_t)g->nval, sizeof *bytes);
  uint64_t persist = (uint64_t)1 << 44;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    bytes[v] = (uint64_t)gexec_numel(g, v, batch) * ir_dtype_size(val->type.dtype);
    if (val->kind == IR_VAL_ACT || (val->kind == IR_VAL_INPUT && val->offset >= 0))
      addr[v] = val->offset >= 0 ? (uint64_t)1 << 40 | (uint64_t)val->offset : 0;
    else
      addr[v] = persist, persist += (bytes[v] + 511) / 256 * 256;
  }
  CgMultiPlan op;
  char err[512];
  CHECK(cg_multi_plan(g, batch, &op, err, sizeof err) == 0, "optimizer runs: %s", err);
  int *head = malloc((size_t)g->nnode * sizeof *head); /* run index at its head, -2 folded, -1 none */
  for (int i = 0; i < g->nnode; i++) head[i] = -1;
  for (int r = 0; r < op.nrun; r++)
    for (int k = 0; k < op.run[r].n; k++) head[op.run[r].node[k]] = k ? -2 : r;
  RtBranchSet s;
  rt_gpu_branch_set_init(&s);
  int nwgrad = 0;
  for (int i = 0; i < g->nnode; i++) {
    int side = g->node[i].op == IR_OP_CONV2D_BWD_WEIGHT;
    nwgrad += side;
    if (head[i] >= 0)
      for (int k = 0; k < op.run[head[i]].n; k++) rt_gpu_branch_add_node(&s, g, op.run[head[i]].node[k], addr, bytes);
    else if (head[i] == -1)
      rt_gpu_branch_add_node(&s, g, i, addr, bytes);
    rt_gpu_branch_end_node(&s, side);
  }
  RtBranchPlan p;
  CHECK(rt_gpu_branch_plan(&s, &p) == 0 && p.nside == nwgrad && nwgrad > 0, "%s: %d side nodes", model, p.nside);
  printf("%s training fp16 batch %lld: %d of %d nodes to the side stream; window mean %.2f min %d max %d; "
         "%d of them 0-1 nodes\n",
         model, (long long)batch, p.nside, g->nnode, p.window_mean, p.window_min, p.window_max, p.narrow);
  for (int i = 0; verbose && i < g->nnode; i++) {
    if (!s.side[i]) continue;
    int q = p.join[i];
    const IrOpInfo *info = q < g->nnode ? ir_op_info(g->node[q].op) : NULL;
    printf("  %4d %-28s joins before %4d %-22s %-28s", i, g->node[i].name ? g->node[i].name : "?", q,
           info ? info->name : "(end)", q < g->nnode && g->node[q].name ? g->node[q].name : "");
    print_reason(g, i, q, addr, bytes);
  }
  replay_range(&s, &p, 0, g->nnode, -1);
  rt_gpu_branch_plan_free(&p);
  rt_gpu_branch_set_free(&s);
  cg_multi_free(&op);
  free(head);
  free(addr);
  free(bytes);
  arena_free(&arena);
}

/* --- on the GPU ------------------------------------------------------------------ */

enum { BATCH = 8, STEPS = 3 };

typedef struct Row {
  const char *model;
  IrDtype precision;
  int graph; /* 0: NETC_CUDA_GRAPH=0, every step launched */
} Row;

static const Row ROWS[] = {
    {"models/resnet20.net", IR_DT_F16, 1},
    {"models/resnet20.net", IR_DT_F16, 0},
    {"models/resnet20.net", IR_DT_F32, 1},
    {"models/smallcnn.net", IR_DT_F16, 1},
};
enum { NROW = sizeof ROWS / sizeof ROWS[0] };

static const char *cache_dir;
static char table[NROW][200];

static int compared(const IrGraph *g, int v) {
  for (int k = 0; k < g->noutput; k++)
    if (g->output[k] == v) return 1;
  return (g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE) && !gexec_is_int(g->val[v].type.dtype);
}

/* STEPS steps of g from init in a new executor, NETC_BRANCHES=branches: the
 * first launched, the rest replayed when row->graph.  Every compared value
 * into out[v]; *side = its side nodes.  0, or -1 after a failed CHECK. */
static int steps(const IrGraph *g, const Row *row, void **init, const char *branches, float **out, int *side,
                 double *window) {
  char err[4096] = "";
  RtGpu *x = NULL;
  RtGpuOpts o = {.device = 0, .cache_dir = cache_dir};
  setenv("NETC_BRANCHES", branches, 1);
  setenv("NETC_CUDA_GRAPH", row->graph ? "1" : "0", 1);
  int ok = !rt_gpu_new(g, BATCH, &o, &x, err, sizeof err);
  CHECK(ok, "%s NETC_BRANCHES=%s: rt_gpu_new: %s", row->model, branches, err);
  if (ok) ok = gexec_write_all(x, g, init) == 0;
  for (int k = 0; ok && k < STEPS; k++) {
    ok = (k != 1 || !rt_gpu_capture(x, err, sizeof err)) && !rt_gpu_run(x, err, sizeof err);
    CHECK(ok, "%s NETC_BRANCHES=%s step %d: %s", row->model, branches, k, err);
  }
  if (ok) ok = !rt_gpu_sync(x, err, sizeof err);
  for (int v = 0; ok && v < g->nval; v++) {
    if (!compared(g, v)) continue;
    out[v] = malloc((size_t)(gexec_numel(g, v, BATCH) + 1) * sizeof(float));
    ok = out[v] && !rt_gpu_read(x, v, out[v], err, sizeof err);
    CHECK(ok, "%s: reading %%%d: %s", row->model, v, err);
  }
  *side = rt_gpu_branch_nodes(x);
  *window = rt_gpu_branch_window(x);
  rt_gpu_free(x);
  unsetenv("NETC_BRANCHES");
  unsetenv("NETC_CUDA_GRAPH");
  return ok ? 0 : -1;
}

static void run_row(const char *root, int ri) {
  const Row *r = &ROWS[ri];
  const char *prec = r->precision == IR_DT_F16 ? "fp16" : "fp32";
  snprintf(table[ri], sizeof table[ri], "%-20s %s %-8s FAILED before the comparison", r->model, prec,
           r->graph ? "graph" : "launched");
  Arena arena;
  arena_init(&arena);
  IrGraph *g = gexec_compile(&arena, root, r->model, BATCH, 0, r->precision);
  CHECK(g != NULL, "%s compiles", r->model);
  float **off = g ? calloc((size_t)g->nval, sizeof *off) : NULL, **on = g ? calloc((size_t)g->nval, sizeof *on) : NULL;
  void **init = g ? gexec_values(g, BATCH, 31 + (uint64_t)ri, r->precision == IR_DT_F16 ? 1024.0f : 8.0f) : NULL;
  int nwgrad = 0, side_off = -1, side_on = -1;
  double w_off = 0, w_on = 0;
  for (int i = 0; g && i < g->nnode; i++) nwgrad += g->node[i].op == IR_OP_CONV2D_BWD_WEIGHT;
  if (init && off && on && !steps(g, r, init, "0", off, &side_off, &w_off) &&
      !steps(g, r, init, "verbose", on, &side_on, &w_on)) {
    CHECK(side_off == 0, "%s: NETC_BRANCHES=0 leaves %d side nodes", r->model, side_off);
    CHECK(side_on == nwgrad && nwgrad > 0, "%s: %d side nodes, the graph has %d weight gradients", r->model, side_on,
          nwgrad);
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
    CHECK(bitwise, "%s %s: %d values differ with the branches on (worst relative %.3g)", r->model, prec, ndiff, worst);
    snprintf(table[ri], sizeof table[ri], "%-20s %s %-8s side nodes %2d  window %5.2f  %s", r->model, prec,
             r->graph ? "graph" : "launched", side_on, w_on, bitwise ? "bitwise equal" : "DIFFERENT");
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
  if (argc < 3) return check_skip("usage: test_gpu_branch plan|gpu SOURCE_DIR [CACHE_DIR]");
  const char *root = argv[2];
  cache_dir = argc > 3 ? argv[3] : NULL;
  if (strcmp(argv[1], "plan") == 0) {
    test_cases();
    test_add_node();
    test_random();
    windows(root, "models/resnet20.net", BATCH, 0);
    windows(root, "models/resnet50.net", 256, getenv("NETC_BRANCH_DETAIL") != NULL);
    return check_report();
  }
  if (!gexec_have_gpu()) return 77;
  setenv("NETC_CUDNN_DETERMINISTIC", "1", 1);
  setenv("NETC_FUSION_PICK", "0", 1);
  for (int ri = 0; ri < NROW; ri++) run_row(root, ri);
  printf("\n%-20s prec mode     result\n", "model");
  for (int ri = 0; ri < NROW; ri++) printf("%s\n", table[ri]);
  return check_report();
}
