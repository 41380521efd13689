/* test_gpu_bucket.c - the data-parallel all-reduce's buckets
 * (runtime/gpu/rt_gpu_bucket.c), no GPU needed.
 *
 * On real training graphs (smallcnn, resnet20 and resnet50 compiled
 * through the whole pipeline, fp32 and fp16), with the gradients the
 * optimizer section's sgd_updates read (as runtime/api/net_graph.c finds
 * them) and bucket sizes from 1 byte to the default: every gradient is in
 * exactly one bucket, the buckets hold the gradients in production order
 * (each gradient's producer is the node that defines it, before the
 * optimizer section), every bucket but the last reaches the size and
 * closes as soon as it does, and each bucket's completion node is its
 * largest producer.  On a hand-made graph: the expected buckets, and the
 * refusals (no optimizer section, a value that does not exist, a gradient
 * named twice, one without a producer, one made only in the optimizer
 * section, one written twice, one read between its producer and the
 * optimizer).
 *
 *   test_gpu_bucket SOURCE_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net_exec.h"
#include "compile.h"
#include "rt_gpu_bucket.h"

enum { BATCH = 8 };

static char err[1024];

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

/* The checks on one plan of g's gradients grad[0..n) at size. */
static void check_plan(const char *what, const IrGraph *g, const int *grad, int n, const uint64_t *bytes, size_t size,
                       const RtGpuBucketPlan *p) {
  size_t want = size ? size : RT_GPU_BUCKET_DEFAULT_BYTES;
  CHECK(p->ngrad == n && p->bucket_bytes == want, "%s: %d gradients, size %zu", what, p->ngrad, p->bucket_bytes);
  /* every gradient exactly once */
  int *count = calloc((size_t)g->nval, sizeof *count), twice = 0, missing = 0;
  for (int j = 0; j < p->ngrad; j++)
    if (p->grad[j] >= 0 && p->grad[j] < g->nval) count[p->grad[j]]++;
  for (int k = 0; k < n; k++) twice += count[grad[k]] > 1, missing += count[grad[k]] == 0;
  CHECK(!twice && !missing, "%s: %d gradients twice, %d missing", what, twice, missing);
  free(count);
  /* production order, producers right */
  int order = 1, prod = 1;
  for (int j = 0; j < p->ngrad; j++) {
    int v = p->grad[j];
    prod &= p->producer[j] == g->val[v].def && p->producer[j] >= 0 && p->producer[j] < g->opt_first;
    if (j) order &= p->producer[j] >= p->producer[j - 1];
  }
  CHECK(prod, "%s: every producer is the node that defines the gradient, before the optimizer", what);
  CHECK(order, "%s: gradients in production order", what);
  /* buckets: contiguous, in order, sizes, completion nodes */
  int at = 0, ok_cover = 1, ok_size = 1, ok_done = 1, ok_close = 1;
  for (int b = 0; b < p->nbucket; b++) {
    const RtGpuBucket *k = &p->bucket[b];
    ok_cover &= k->first == at && k->n >= 1;
    uint64_t sum = 0;
    int top = -1;
    for (int j = k->first; j < k->first + k->n && j < p->ngrad; j++) {
      sum += bytes[p->grad[j]];
      if (p->producer[j] > top) top = p->producer[j];
      /* closed as soon as it reached the size: no earlier prefix did */
      if (j < k->first + k->n - 1 && sum >= want) ok_close = 0;
    }
    ok_size &= k->bytes == sum && (b == p->nbucket - 1 || sum >= want);
    ok_done &= k->done == top && (!b || k->done >= p->bucket[b - 1].done);
    at += k->n;
  }
  CHECK(ok_cover && at == p->ngrad, "%s: the buckets cover the gradients in order", what);
  CHECK(ok_size, "%s: every bucket but the last reaches %zu bytes, sizes summed right", what, want);
  CHECK(ok_close, "%s: each bucket closes as soon as it reaches the size", what);
  CHECK(ok_done, "%s: each bucket's completion node is its largest producer", what);
}

static void model(const char *root, const char *rel, IrDtype precision) {
  char path[4096], what[256];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  Arena arena;
  arena_init(&arena);
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .inference = 0, .precision = precision, .precision_set = 1, .batch = BATCH};
  IrGraph *g = compile_file(&arena, &d, path, &cx);
  CHECK(g != NULL && g->opt_first > 0, "%s compiles to a training graph", rel);
  if (!g) {
    arena_free(&arena);
    return;
  }
  int n = 0, *grad = optimizer_grads(g, &n);
  uint64_t *bytes = calloc((size_t)g->nval, sizeof *bytes), total = 0;
  for (int k = 0; k < n; k++) total += bytes[grad[k]] = (uint64_t)ir_value_bytes(g, grad[k], BATCH);
  CHECK(n > 0, "%s: the optimizer reads gradients", rel);
  const size_t sizes[] = {0, 1, 4096, 64 << 10, 1 << 20, (size_t)1 << 40};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    RtGpuBucketPlan p;
    snprintf(what, sizeof what, "%s %s, %zu-byte buckets", rel, precision == IR_DT_F16 ? "fp16" : "fp32", sizes[s]);
    int rc = rt_gpu_bucket_plan(g, grad, n, bytes, sizes[s], &p, err, sizeof err);
    CHECK(rc == 0, "%s: plans: %s", what, err);
    if (rc) continue;
    check_plan(what, g, grad, n, bytes, sizes[s], &p);
    if (sizes[s] == 1) CHECK(p.nbucket == n, "%s: one bucket a gradient (%d of %d)", what, p.nbucket, n);
    if (sizes[s] == (size_t)1 << 40) CHECK(p.nbucket == 1, "%s: one bucket (%d)", what, p.nbucket);
    if (sizes[s] == 64 << 10 || sizes[s] == 4096 || sizes[s] == 0)
      printf("%-24s %s: %3d gradients, %9llu bytes, %8zu-byte buckets: %3d, the first complete after node %d of %d "
             "(optimizer at %d)\n",
             rel, precision == IR_DT_F16 ? "fp16" : "fp32", n, (unsigned long long)total, p.bucket_bytes, p.nbucket,
             p.nbucket ? p.bucket[0].done : -1, g->nnode, g->opt_first);
    rt_gpu_bucket_plan_free(&p);
    CHECK(p.grad == NULL && p.nbucket == 0, "freed plan is empty");
  }
  free(grad);
  free(bytes);
  arena_free(&arena);
}

/* --- a hand-made graph ----------------------------------------------------- */

/* values: 0 the input, 1..3 gradients, 4 another value; nodes 0..2 write
 * 1, 2, 3 (node 2 writes 3 and 4), node 3 (the optimizer section) reads
 * all three. */
typedef struct Hand {
  IrValue val[5];
  IrNode node[4];
  int in[4][3], out[4][2];
  IrGraph g;
} Hand;

static void hand_init(Hand *h) {
  memset(h, 0, sizeof *h);
  for (int v = 0; v < 5; v++) h->val[v].def = -1, h->val[v].offset = -1;
  static const int nin[4] = {1, 1, 1, 3}, nout[4] = {1, 1, 2, 0};
  for (int i = 0; i < 4; i++) {
    h->node[i] = (IrNode){.op = i < 3 ? IR_OP_CONV2D_BWD_WEIGHT : IR_OP_SGD_UPDATE,
                          .nin = nin[i],
                          .nout = nout[i],
                          .in = h->in[i],
                          .out = h->out[i]};
    h->in[i][0] = 0;
  }
  h->out[0][0] = 1, h->out[1][0] = 2, h->out[2][0] = 3, h->out[2][1] = 4;
  h->val[1].def = 0, h->val[2].def = 1, h->val[3].def = 2, h->val[4].def = 2;
  h->in[3][0] = 1, h->in[3][1] = 2, h->in[3][2] = 3;
  h->g = (IrGraph){.name = "hand", .val = h->val, .nval = 5, .node = h->node, .nnode = 4, .opt_first = 3};
}

static void refused(const char *what, const Hand *h, const int *grad, int n, const char *needle) {
  static const uint64_t bytes[5] = {8, 100, 100, 100, 8};
  RtGpuBucketPlan p;
  err[0] = 0;
  int rc = rt_gpu_bucket_plan(&h->g, grad, n, bytes, 150, &p, err, sizeof err);
  CHECK(rc == -1 && strstr(err, needle) && p.grad == NULL && p.nbucket == 0, "%s refused (\"%s\"): rc %d, \"%s\"", what,
        needle, rc, err);
  if (rc == -1) printf("  refused, %s: %s\n", what, err);
  if (!rc) rt_gpu_bucket_plan_free(&p);
}

static void test_hand(void) {
  static const uint64_t bytes[5] = {8, 100, 100, 100, 8};
  Hand h;
  hand_init(&h);
  /* given out of order: planned by producer; 150 bytes closes after two */
  const int grad[3] = {3, 1, 2};
  RtGpuBucketPlan p;
  int rc = rt_gpu_bucket_plan(&h.g, grad, 3, bytes, 150, &p, err, sizeof err);
  CHECK(rc == 0, "hand graph plans: %s", err);
  if (!rc) {
    CHECK(p.grad[0] == 1 && p.grad[1] == 2 && p.grad[2] == 3, "production order %d %d %d", p.grad[0], p.grad[1],
          p.grad[2]);
    CHECK(p.nbucket == 2 && p.bucket[0].n == 2 && p.bucket[0].bytes == 200 && p.bucket[0].done == 1 &&
              p.bucket[1].first == 2 && p.bucket[1].n == 1 && p.bucket[1].done == 2,
          "two buckets: {1,2} done after node 1, {3} after node 2");
    check_plan("hand", &h.g, grad, 3, bytes, 150, &p);
    rt_gpu_bucket_plan_free(&p);
  }
  /* no gradients: no buckets */
  rc = rt_gpu_bucket_plan(&h.g, NULL, 0, NULL, 0, &p, err, sizeof err);
  CHECK(rc == 0 && p.nbucket == 0 && p.ngrad == 0, "no gradients, no buckets: %s", err);
  rt_gpu_bucket_plan_free(&p);
  rt_gpu_bucket_plan_free(NULL);

  refused("a value that does not exist", &h, (const int[]){1, 7}, 2, "does not have");
  refused("a gradient named twice", &h, (const int[]){1, 2, 1}, 3, "named twice");
  refused("the input (no producer)", &h, (const int[]){0}, 1, "no producer before the optimizer section");
  {
    Hand t;
    hand_init(&t);
    t.g.opt_first = -1;
    refused("a graph without an optimizer section", &t, (const int[]){1}, 1, "no optimizer section");
  }
  {
    Hand t;
    hand_init(&t);
    t.g.opt_first = 2; /* node 2 (which writes %3) is in the section */
    refused("a gradient made in the optimizer section", &t, (const int[]){1, 3}, 2,
            "no producer before the optimizer section");
  }
  {
    Hand t;
    hand_init(&t);
    t.out[2][1] = 1; /* node 2 writes %1 too */
    refused("a gradient written twice", &t, (const int[]){1, 2}, 2, "written by two nodes");
  }
  {
    Hand t;
    hand_init(&t);
    t.in[2][0] = 1; /* node 2 reads %1 after node 0 made it */
    refused("a gradient read before the optimizer", &t, (const int[]){1, 2, 3}, 3, "race");
  }
  CHECK(rt_gpu_bucket_plan(&h.g, NULL, 2, bytes, 0, &p, err, sizeof err) == -1 && strstr(err, "bad arguments"),
        "NULL gradients refused: %s", err);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_gpu_bucket SOURCE_DIR\n");
    return 2;
  }
  test_hand();
  model(argv[1], "models/smallcnn.net", IR_DT_F32);
  model(argv[1], "models/smallcnn.net", IR_DT_F16);
  model(argv[1], "models/resnet20.net", IR_DT_F32);
  model(argv[1], "models/resnet20.net", IR_DT_F16);
  model(argv[1], "models/resnet50.net", IR_DT_F16);
  return check_report();
}
