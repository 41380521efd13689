/* test_memplan.c - the memory planning pass.
 *
 *   test_memplan MODELS_DIR
 *
 * Hand-written graphs (IR text) with known lifetimes and the offsets that
 * greedy-by-size must give them; the batch the plan is made for; the plan's
 * round trip through the text form and the reader's errors for a bad plan.
 * Then real compiled graphs (smallcnn, resnet20, resnet50; training and
 * inference; with and without the optional passes): an independent liveness
 * analysis here checks that no two values alive at the same time overlap in
 * the arena, that every planned value lies inside plan_bytes, and that the
 * arena stays within 1.3 x the lower bound (the numbers are printed); and
 * a generated network of 6,000 convolutions, which the pass places by its
 * sweep, checked the same way in n log n. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"
#include "summary.h"

enum { ALIGN = 256 };

static IrGraph *read_text(Arena *a, const char *text, Diag *d) { return ir_read(a, d, "test.ir", text, strlen(text)); }

/* Reads text and plans it at the given --batch (0: the graph's own). */
static IrGraph *plan_text(Arena *a, const char *text, int64_t batch) {
  Diag d;
  diag_init(&d, stderr);
  IrGraph *g = read_text(a, text, &d);
  CHECK(g != NULL, "test graph reads");
  if (!g) return NULL;
  CHECK(ir_verify(g, &d, NULL) == 0, "test graph verifies");
  PassCtx cx = {.d = &d, .out = stdout, .batch = batch};
  IrGraph *p = pass_memplan(g, &cx);
  CHECK(p != NULL, "memplan succeeds");
  return p;
}

/* The value printed as %num (inputs, then node results in node order). */
static const IrValue *printed(const IrGraph *g, int num) {
  int k = 0;
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_INPUT && k++ == num) return &g->val[v];
  for (int i = 0; i < g->nnode; i++)
    for (int j = 0; j < g->node[i].nout; j++)
      if (k++ == num) return &g->val[g->node[i].out[j]];
  return NULL;
}

static void expect_offsets(const IrGraph *g, const int64_t *want, int n, int64_t bytes, const char *what) {
  if (!g) return;
  for (int i = 0; i < n; i++) {
    const IrValue *v = printed(g, i);
    CHECK(v && v->offset == want[i], "%s: %%%d at %" PRId64 ", want %" PRId64, what, i, v ? v->offset : -2, want[i]);
  }
  CHECK(g->plan_bytes == bytes, "%s: plan_bytes %" PRId64 ", want %" PRId64, what, g->plan_bytes, bytes);
}

/* A chain: each result dies when the next is made, so %3 reuses %1. */
static void check_chain(void) {
  Arena a;
  arena_init(&a);
  IrGraph *g = plan_text(&a,
                         "graph chain {\n"
                         "  input %0 x : f32[N,64]\n"
                         "  %1 = relu(%0) : f32[N,64]\n"
                         "  %2 = relu(%1) : f32[N,64]\n"
                         "  %3 = relu(%2) : f32[N,64]\n"
                         "  output %3\n"
                         "}\n",
                         0);
  expect_offsets(g, (const int64_t[]){0, 256, 512, 256}, 4, 768, "chain");
  CHECK(g && g->plan_batch == 1, "no train section, no --batch: batch 1");
  arena_free(&a);
}

/* Sizes differ (x and %1, %3 are 4 KiB, %2, %4, %5 1 KiB).  Lifetimes:
 * %1 0..2, %2 1..3, %3 2..3, %4 3..4, %5 4..end.  Placement order x, %1,
 * %3, %2, %4, %5: %4 fits the hole %1 left above x; %5 goes on top of %4. */
static const char *FIT = "graph fit {\n"
                         "  TRAIN\n"
                         "  input %0 x : f32[N,1,32,32] NCHW\n"
                         "  %1 = relu(%0) : f32[N,1,32,32] NCHW\n"
                         "  %2 = maxpool(%1) {k=2x2 s=2x2 p=0x0} : f32[N,1,16,16] NCHW\n"
                         "  %3 = relu(%1) : f32[N,1,32,32] NCHW\n"
                         "  %4 = maxpool(%3) {k=2x2 s=2x2 p=0x0} : f32[N,1,16,16] NCHW\n"
                         "  %5 = add(%2, %4) : f32[N,1,16,16] NCHW\n"
                         "  output %5\n"
                         "}\n";

static char *with_train(const char *text, const char *train) {
  static char buf[2048];
  const char *at = strstr(text, "TRAIN");
  snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - text), text, train, at + 5);
  return buf;
}

static void check_sizes_and_batch(void) {
  const int64_t want[] = {0, 4096, 12288, 8192, 4096, 5120}, bytes = 13312;
  int64_t x2[6];
  for (int i = 0; i < 6; i++) x2[i] = 2 * want[i];
  Arena a;
  arena_init(&a);
  IrGraph *g = plan_text(&a, with_train(FIT, "# no train section"), 0);
  expect_offsets(g, want, 6, bytes, "fit, batch 1");
  CHECK(g && pass_memplan_lower_bound(g) == bytes, "fit: the plan meets the lower bound");
  g = plan_text(&a, with_train(FIT, "train batch=2"), 0);
  expect_offsets(g, x2, 6, 2 * bytes, "fit, train batch=2");
  CHECK(g && g->plan_batch == 2, "the train section's batch");
  g = plan_text(&a, with_train(FIT, "train batch=8"), 2);
  expect_offsets(g, x2, 6, 2 * bytes, "fit, --batch=2 over train batch=8");
  CHECK(g && g->plan_batch == 2, "--batch wins over the train section");
  /* Planning twice gives the same plan. */
  if (g) {
    Diag d;
    diag_init(&d, stderr);
    PassCtx cx = {.d = &d, .batch = 2};
    g = pass_memplan(g, &cx);
    expect_offsets(g, x2, 6, 2 * bytes, "fit, planned again");
  }
  arena_free(&a);
}

/* Several results of one node never share memory, results nobody reads
 * still get room while their node runs, inputs are never reused although
 * nothing reads them after node 0, and params/state stay out of the arena. */
static void check_multi_result(void) {
  Arena a;
  arena_init(&a);
  IrGraph *g = plan_text(&a,
                         "graph multi {\n"
                         "  input %0 x : f32[N,1,8,8] NCHW\n"
                         "  param @w : f32[1]\n"
                         "  param @b : f32[1]\n"
                         "  state @m : f32[1]\n"
                         "  state @v : f32[1]\n"
                         "  %1, %2, %3 = batchnorm_train(%0, @w, @b, @m, @v) {eps=1e-05 momentum=0.1} : "
                         "f32[N,1,8,8] NCHW, f32[1], f32[1]\n"
                         "  %4 = relu(%1) : f32[N,1,8,8] NCHW\n"
                         "  %5 = relu(%4) : f32[N,1,8,8] NCHW\n"
                         "  output %5\n"
                         "}\n",
                         0);
  expect_offsets(g, (const int64_t[]){0, 256, 512, 768, 512, 256}, 6, 1024, "multi");
  for (int v = 0; g && v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE)
      CHECK(g->val[v].offset == -1, "@%s has no arena offset", g->val[v].name);
  arena_free(&a);
}

static char *print_str(const IrGraph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  IrPrintOpts o = {.no_loc = 1, .pass = "memplan"};
  ir_print(f, g, &o);
  fclose(f);
  return buf;
}

/* print -> read -> print is the identity, and the read graph has the plan. */
static void check_round_trip(const IrGraph *g, const char *what) {
  Arena a;
  arena_init(&a);
  char *t1 = print_str(g);
  Diag d;
  diag_init(&d, stderr);
  IrGraph *back = t1 ? ir_read(&a, &d, what, t1, strlen(t1)) : NULL;
  CHECK(back != NULL, "%s: the planned dump reads back", what);
  char *t2 = back ? print_str(back) : NULL;
  CHECK(t2 && !strcmp(t1, t2), "%s: print(read(print(g))) == print(g)", what);
  CHECK(t1 && strstr(t1, "\n  plan bytes="), "%s: the dump has the plan line", what);
  if (back) {
    CHECK(back->plan_bytes == g->plan_bytes && back->plan_batch == g->plan_batch, "%s: plan read back", what);
    int same = back->nval == g->nval, n = 0;
    for (const IrValue *v; same && (v = printed(g, n)); n++)
      same = printed(back, n) && printed(back, n)->offset == v->offset;
    CHECK(same && n > 0, "%s: every offset read back (%d values)", what, n);
  }
  free(t1);
  free(t2);
  arena_free(&a);
}

/* The reader's errors for a malformed plan. */
static void check_read_errors(void) {
  static const struct {
    const char *text, *msg;
  } cases[] = {
      {"graph e {\n  input %0 x : f32[N,4] @\n}\n", "expected a byte offset after '@'"},
      {"graph e {\n  input %0 x : f32[N,4] @-256\n}\n", "expected a byte offset after '@'"},
      {"graph e {\n  input %0 x : f32[N,4] @256 @512\n}\n", "unexpected '@'"},
      {"graph e {\n  input %0 x : f32[N,4]\n  %1 = relu(%0) : f32[N,4] @x\n}\n", "expected a byte offset"},
      {"graph e {\n  plan bytes=256\n}\n", "expected 'batch=' in the plan line"},
      {"graph e {\n  plan batch=1 bytes=256\n}\n", "expected 'bytes=' in the plan line"},
      {"graph e {\n  plan bytes=-1 batch=1\n}\n", "negative bytes in the plan line"},
      {"graph e {\n  plan bytes=256 batch=1\n  plan bytes=256 batch=1\n}\n", "plan given twice"},
      {"graph e {\n  plan bytes=256 batch=1 extra=2\n}\n", "unexpected"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    Arena a;
    arena_init(&a);
    char *msgs = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&msgs, &len);
    Diag d;
    diag_init(&d, f);
    IrGraph *g = ir_read(&a, &d, "e.ir", cases[i].text, strlen(cases[i].text));
    diag_finish(&d);
    fclose(f);
    CHECK(!g && msgs && strstr(msgs, cases[i].msg), "case %zu: want '%s', got: %s", i, cases[i].msg,
          msgs ? msgs : "(nothing)");
    free(msgs);
    arena_free(&a);
  }
}

typedef struct Life {
  int start, end; /* node indices; inputs -1 .. nnode */
  int64_t size;
} Life;

/* Lifetimes and aligned sizes, computed here independently of the pass. */
static Life *lifetimes(const IrGraph *g) {
  Life *l = calloc((size_t)g->nval + 1, sizeof *l);
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    l[v].start = val->kind == IR_VAL_INPUT ? -1 : INT32_MAX;
    l[v].end = val->kind == IR_VAL_INPUT ? g->nnode : -2;
    int64_t n = ir_value_bytes(g, v, g->plan_batch); /* an i8 value's scales after its elements included */
    l[v].size = (n + ALIGN - 1) / ALIGN * ALIGN;
  }
  for (int i = 0; i < g->nnode; i++) {
    const IrNode *n = &g->node[i];
    /* a node holding its inputs (hold=H, the overlap pass) keeps them H nodes longer */
    int until = i + (int)ir_attr_int(n, "hold", 0);
    if (until >= g->nnode) until = g->nnode - 1;
    /* a result made once for many steps (once=1, the hoist pass) is never overwritten: the whole step */
    int once = ir_node_once(n);
    for (int k = 0; k < n->nout; k++) l[n->out[k]].start = once ? -1 : i, l[n->out[k]].end = once ? g->nnode : i;
    for (int k = 0; k < n->nin; k++)
      if (l[n->in[k]].end < until) l[n->in[k]].end = until;
  }
  for (int i = 0; i < g->noutput; i++) l[g->output[i]].end = g->nnode;
  return l;
}

/* The plan of a compiled graph is sound and small: returns arena/bound. */
static double check_plan(const IrGraph *g, const char *what) {
  Life *l = lifetimes(g);
  int nplanned = 0, bad_place = 0, bad_overlap = 0;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_PARAM || val->kind == IR_VAL_STATE) {
      bad_place += val->offset != -1;
      continue;
    }
    nplanned++;
    if (val->offset < 0 || val->offset % ALIGN || val->offset + l[v].size > g->plan_bytes) {
      if (bad_place++ < 5)
        fprintf(stderr, "%s: value %d at %" PRId64 " size %" PRId64 " outside the arena of %" PRId64 "\n", what, v,
                val->offset, l[v].size, g->plan_bytes);
      continue;
    }
    for (int u = 0; u < v; u++) {
      const IrValue *o = &g->val[u];
      if (o->offset < 0 || (o->kind != IR_VAL_ACT && o->kind != IR_VAL_INPUT)) continue;
      int meet = l[u].start <= l[v].end && l[v].start <= l[u].end;
      int share = o->offset < val->offset + l[v].size && val->offset < o->offset + l[u].size;
      if (meet && share && bad_overlap++ < 5)
        fprintf(stderr, "%s: values %d and %d are alive together and overlap\n", what, u, v);
    }
  }
  CHECK(bad_place == 0, "%s: %d values misplaced", what, bad_place);
  CHECK(bad_overlap == 0, "%s: %d overlapping pairs", what, bad_overlap);
  int64_t bound = 0;
  for (int t = -1; t <= g->nnode; t++) {
    int64_t sum = 0;
    for (int v = 0; v < g->nval; v++)
      if (g->val[v].kind == IR_VAL_ACT || g->val[v].kind == IR_VAL_INPUT)
        sum += l[v].start <= t && t <= l[v].end ? l[v].size : 0;
    if (sum > bound) bound = sum;
  }
  free(l);
  CHECK(pass_memplan_lower_bound(g) == bound, "%s: the pass's lower bound %" PRId64 ", here %" PRId64, what,
        pass_memplan_lower_bound(g), bound);
  double ratio = bound ? (double)g->plan_bytes / (double)bound : 0;
  printf("%-40s batch %4" PRId64 "  values %5d  arena %13" PRId64 "  lower bound %13" PRId64 "  ratio %.4f\n", what,
         g->plan_batch, nplanned, g->plan_bytes, bound, ratio);
  CHECK(bound > 0 && ratio >= 1.0 && ratio < 1.3, "%s: arena / lower bound = %.4f", what, ratio);
  return ratio;
}

static void check_model(const char *models, const char *name, int inference, int optional_passes, int64_t batch,
                        const char *int8) {
  char path[4096], what[128];
  snprintf(path, sizeof path, "%s/%s.net", models, name);
  snprintf(what, sizeof what, "%s %s%s%s", name, int8 ? "int8 " : "", inference ? "inference" : "training",
           optional_passes ? "" : " (-fno-fuse/layout/precision)");
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {
      .d = &d, .out = stdout, .inference = inference, .precision = IR_DT_F16, .batch = batch, .int8_layers = int8};
  if (!optional_passes) cx.disabled = pipeline_bit("fuse") | pipeline_bit("layout") | pipeline_bit("precision");
  IrGraph *g = compile_file(&a, &d, path, &cx);
  CHECK(g != NULL, "%s compiles", what);
  if (g) {
    CHECK(g->plan_batch == (batch ? batch : g->plan_batch), "%s: planned at batch %" PRId64, what, batch);
    check_plan(g, what);
    check_round_trip(g, what);
  }
  arena_free(&a);
}

/* A plan of tens of thousands of values, checked in n log n: events in
 * time order (a value's end before the next starts at the same time ends),
 * the live values kept sorted by offset, each new one against its two
 * neighbours.  Returns the largest sum of live sizes (the lower bound). */
typedef struct Event {
  int t, v, start; /* start 1: v becomes live at t; 0: v is dead from t */
} Event;

static int by_time(const void *pa, const void *pb) {
  const Event *a = pa, *b = pb;
  if (a->t != b->t) return a->t < b->t ? -1 : 1;
  if (a->start != b->start) return a->start - b->start; /* deaths first */
  return a->v - b->v;
}

static int64_t check_sweep(const IrGraph *g, const Life *l, const char *what) {
  Event *ev = malloc(sizeof *ev * 2 * ((size_t)g->nval + 1));
  int *live = malloc(sizeof *live * ((size_t)g->nval + 1)), ne = 0, nlive = 0, bad = 0;
  int64_t cur = 0, peak = 0;
  for (int v = 0; ev && v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_ACT || g->val[v].kind == IR_VAL_INPUT) {
      ev[ne++] = (Event){l[v].start, v, 1};
      ev[ne++] = (Event){l[v].end + 1, v, 0};
    }
  if (ev && live) qsort(ev, (size_t)ne, sizeof *ev, by_time);
  for (int i = 0; ev && live && i < ne; i++) {
    int v = ev[i].v, lo = 0, hi = nlive;
    int64_t at = g->val[v].offset;
    while (lo < hi) { /* the first live value not below v's offset (v's own place when dying) */
      int mid = lo + (hi - lo) / 2;
      int64_t o = g->val[live[mid]].offset;
      if (o < at || (o == at && live[mid] < v))
        lo = mid + 1;
      else
        hi = mid;
    }
    if (!ev[i].start) {
      if (lo < nlive && live[lo] == v) memmove(live + lo, live + lo + 1, sizeof *live * (size_t)(--nlive - lo));
      cur -= l[v].size;
      continue;
    }
    int clash = (lo > 0 && g->val[live[lo - 1]].offset + l[live[lo - 1]].size > at) ||
                (lo < nlive && at + l[v].size > g->val[live[lo]].offset);
    if (clash && bad++ < 5) fprintf(stderr, "%s: value %d meets a live value's bytes\n", what, v);
    memmove(live + lo + 1, live + lo, sizeof *live * (size_t)(nlive - lo));
    live[lo] = v, nlive++;
    cur += l[v].size;
    if (cur > peak) peak = cur;
  }
  CHECK(ev && live && bad == 0, "%s: %d values share bytes with live ones", what, bad);
  free(ev), free(live);
  return peak;
}

/* A generated network of 6,000 convolutions (channels 4, 8 and 16 in
 * turn) and relus: its training graph plans over 16,384 values, so the
 * pass places them by its sweep over time.  Sound (checked by a sweep
 * here), near the lower bound, and fast: the pass was quadratic (100,000
 * layers took minutes). */
static void check_large(void) {
  const char *src = "network deep {\n"
                    "  input image : f32[3, 8, 8]\n"
                    "  input label : i32[]\n"
                    "  x = conv2d(image, 4, k=1, bias=false)\n"
                    "  for i in 0..6000 {\n"
                    "    x = conv2d(x, i % 3 == 2 ? 16 : 4 + 4 * (i % 3), k=1, bias=false) as [i]\n"
                    "    x = relu(x)\n"
                    "  }\n"
                    "  gap  = global_avgpool(x)\n"
                    "  flat = flatten(gap)\n"
                    "  fc   = linear(flat, 3)\n"
                    "  loss = softmax_cross_entropy(fc, label)\n"
                    "}\n";
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .out = stdout, .batch = 2};
  IrGraph *g = compile_source(&a, &d, "deep.net", src, strlen(src), &cx);
  CHECK(g != NULL, "the deep network compiles");
  if (g) {
    int planned = 0;
    for (int v = 0; v < g->nval; v++) {
      const IrValue *val = &g->val[v];
      planned += val->kind == IR_VAL_ACT || val->kind == IR_VAL_INPUT;
      if ((val->kind == IR_VAL_ACT || val->kind == IR_VAL_INPUT) && (val->offset < 0 || val->offset % ALIGN))
        CHECK(0, "deep: value %d at offset %" PRId64, v, val->offset);
    }
    Life *l = lifetimes(g);
    int64_t bound = l ? check_sweep(g, l, "deep") : 0;
    for (int v = 0; l && v < g->nval; v++)
      if (g->val[v].offset >= 0 && g->val[v].offset + l[v].size > g->plan_bytes)
        CHECK(0, "deep: value %d passes the arena's end", v);
    free(l);
    double ratio = bound ? (double)g->plan_bytes / (double)bound : 0;
    printf("deep (6,000 convolutions) training: %d values planned, arena %" PRId64 ", lower bound %" PRId64
           ", ratio %.4f\n",
           planned, g->plan_bytes, bound, ratio);
    CHECK(planned > 16384, "deep: %d values, enough for the sweep", planned);
    CHECK(bound == pass_memplan_lower_bound(g) && ratio >= 1.0 && ratio < 1.3, "deep: arena / lower bound = %.4f",
          ratio);
  }
  arena_free(&a);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_memplan MODELS_DIR\n");
    return 2;
  }
  check_chain();
  check_sizes_and_batch();
  check_multi_result();
  check_read_errors();
  check_large();
  static const char *const models[] = {"smallcnn", "resnet20", "resnet50"};
  for (int m = 0; m < 3; m++)
    for (int inference = 0; inference <= 1; inference++)
      for (int opt = 0; opt <= 1; opt++)
        check_model(argv[1], models[m], inference, opt, !strcmp(models[m], "resnet50") ? 256 : 0, NULL);
  /* INT8 inference: the weights' i8 casts (pass hoist: the whole step) carry their scales after their elements */
  check_model(argv[1], "resnet50", 1, 1, 256, "all");
  return check_report();
}
