/* test_errors.c - the CPU executor fails cleanly: bad labels, batch
 * statistics of one value and a zero loss scale fail the run with a message
 * naming the node; graphs whose types disagree with the type rules, unknown
 * ops, integer tensors where floats are read, absurd sizes and bad batch
 * sizes fail rt_cpu_new; accessors take bad ids. */
#include <string.h>

#include "check.h"
#include "exectest.h"

static const char *CE = "graph t {\n  input %0 z : f32[N,3]\n  input %1 label : i32[N]\n"
                        "  %2 = relu(%0) : f32[N,3]  # act\n"
                        "  %3 = softmax_cross_entropy(%2, %1) {smoothing=0.0} : f32[]  # myloss\n  output %3\n}\n";

static void test_label(void) {
  ExectestCase c;
  if (exectest_open(&c, CE, 2) == 0) {
    int64_t *lab = rt_cpu_data(c.x, exectest_val(c.x, "label"));
    char err[256] = "";
    lab[0] = 2, lab[1] = 3;
    CHECK(rt_cpu_run(c.x, err, sizeof err) == -1, "label 3 of 3 classes fails");
    CHECK(strstr(err, "myloss") && strstr(err, "softmax_cross_entropy") && strstr(err, "label 3"), "message: %s", err);
    lab[1] = -1;
    CHECK(rt_cpu_run(c.x, err, sizeof err) == -1, "label -1 fails");
    lab[1] = (int64_t)1 << 40;
    CHECK(rt_cpu_run(c.x, err, sizeof err) == -1, "label 2^40 fails");
    lab[1] = 0;
    CHECK(rt_cpu_run(c.x, err, sizeof err) == 0, "valid labels run: %s", err);
    CHECK(rt_cpu_run(c.x, NULL, 0) == 0, "a NULL message buffer is fine");
    lab[1] = 5;
    CHECK(rt_cpu_run(c.x, NULL, 0) == -1, "failing with a NULL message buffer");
  } else {
    CHECK(0, "graph did not load");
  }
  exectest_close(&c);
}

static void test_bn_single(void) {
  const char *text = "graph t {\n  input %0 x : f32[N,2]\n  param @w : f32[2]\n  param @b : f32[2]\n"
                     "  state @rm : f32[2]\n  state @rv : f32[2]\n"
                     "  %1, %2, %3 = batchnorm_train(%0, @w, @b, @rm, @rv) {eps=1e-05 momentum=0.1} : f32[N,2], "
                     "f32[2], f32[2]  # bn9\n"
                     "  output %1\n}\n";
  ExectestCase c;
  if (exectest_open(&c, text, 1) == 0) {
    char err[256] = "";
    CHECK(rt_cpu_run(c.x, err, sizeof err) == -1, "batch statistics of one value fail");
    CHECK(strstr(err, "bn9") && strstr(err, "batchnorm_train"), "message: %s", err);
  } else {
    CHECK(0, "graph did not load");
  }
  exectest_close(&c);
}

/* rt_cpu_new on g with value or node edited; must fail with `want` in the message. */
static void expect_new_fails(IrGraph *g, int64_t batch, const char *want) {
  char err[256] = "";
  RtCpu *x = (RtCpu *)1;
  CHECK(rt_cpu_new(g, batch, &x, err, sizeof err) == -1 && x == NULL, "rt_cpu_new fails (%s)", want);
  CHECK(strstr(err, want) != NULL, "message '%s' lacks '%s'", err, want);
}

static void test_new(void) {
  Arena a;
  arena_init(&a);
  IrGraph *g = exectest_read(&a, CE);
  if (!g) {
    CHECK(0, "graph did not load");
    arena_free(&a);
    return;
  }
  expect_new_fails(g, 0, "batch size");
  expect_new_fails(g, -3, "batch size");
  IrNode *relu = &g->node[0];
  IrValue *out = &g->val[relu->out[0]];
  out->type.dim[1] = 4;
  expect_new_fails(g, 2, "type rules");
  out->type.dim[1] = 3;
  relu->op = IR_OP_COUNT;
  expect_new_fails(g, 2, "unknown op");
  relu->op = IR_OP_RELU;
  int z = relu->in[0];
  g->val[z].type.dtype = out->type.dtype = IR_DT_I32;
  expect_new_fails(g, 2, "expected floats");
  g->val[z].type.dtype = out->type.dtype = IR_DT_F32;
  g->val[z].type.dim[1] = (int64_t)1 << 40;
  expect_new_fails(g, 2, "too large");
  g->val[z].type.dim[1] = 3;
  RtCpu *x = exectest_new(g, 2);
  CHECK(x != NULL, "the repaired graph loads");
  CHECK(rt_cpu_data(x, -1) == NULL && rt_cpu_data(x, g->nval) == NULL, "bad ids give NULL");
  CHECK(rt_cpu_numel(x, 99) == 0 && rt_cpu_find(x, "nope") == -1 && rt_cpu_find(x, "z") == z, "find");
  CHECK(rt_cpu_numel(x, z) == 6 && !rt_cpu_is_int(x, z) && rt_cpu_is_int(x, g->node[1].in[1]), "numel");
  rt_cpu_free(x);
  rt_cpu_free(NULL);
  arena_free(&a);
}

int main(void) {
  test_label();
  test_bn_single();
  test_new();
  return check_report();
}
