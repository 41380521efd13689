/* test_hoist.c - pass hoist on the CPU executor: an inference graph's casts
 * of weights run when the weights change, not every step.
 *
 * 1. Which nodes are marked: every cast and relayout of a parameter in
 *    ResNet-20's f16 and calibrated INT8 inference graphs (the weights'
 *    casts, i8 ones per output channel, and the stem filter's padding), no
 *    cast or relayout of an activation, nothing in a training graph.
 * 2. The results: the logits of the graph with the pass equal those
 *    without it bit for bit, on the first step; on a second step (the once
 *    nodes do not run again); and after every parameter was written anew
 *    (they must run again: a stale cast would give the old weights'
 *    logits, which differ).
 *    And they run only then: a value planted in a once node's result
 *    survives a step without a write, and is replaced after one.
 * 3. The verifier refuses `once` on a cast or relayout of an activation,
 *    and in a training graph. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "exectest.h"
#include "int8_scales.h"
#include "pipeline.h"

enum { BATCH = 2, MAXOUT = BATCH * 16 };

static IrGraph *compile(Arena *a, const char *root, int inference, const char *int8, const Int8Scales *scales,
                        int hoist) {
  return exectest_compile(a, root, "models/resnet20.net",
                          (PassCtx){.inference = inference,
                                    .precision = IR_DT_F16,
                                    .precision_set = 1,
                                    .batch = BATCH,
                                    .int8_layers = int8,
                                    .int8_scales = scales,
                                    .disabled = hoist ? 0 : pipeline_bit("hoist")});
}

/* Casts and relayouts marked once; *of_param: those reading a parameter;
 * *bad: marked ones reading anything else. */
static int count_once(const IrGraph *g, int *of_param, int *bad) {
  int once = 0;
  *of_param = *bad = 0;
  for (int n = 0; n < g->nnode; n++) {
    const IrNode *node = &g->node[n];
    if (node->op != IR_OP_CAST && node->op != IR_OP_RELAYOUT) continue;
    int param = g->val[node->in[0]].kind == IR_VAL_PARAM, marked = ir_node_once(node);
    *of_param += param;
    once += marked;
    *bad += marked && !param;
  }
  return once;
}

/* Every parameter and state of x from seed (running variances positive). */
static void fill_weights(const IrGraph *g, RtCpu *x, uint64_t seed) {
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind != IR_VAL_PARAM && val->kind != IR_VAL_STATE) continue;
    int var = val->name && strstr(val->name, "running_var");
    exectest_fill(x, v, &seed, var ? 0.5f : -0.5f, var ? 1.5f : 0.5f);
  }
}

/* One step of x into out (the first output); its element count, or -1. */
static int64_t step(const IrGraph *g, RtCpu *x, float *out) {
  if (exectest_run(x)) return -1;
  int64_t n = rt_cpu_numel(x, g->output[0]);
  if (n > MAXOUT) return -1;
  memcpy(out, rt_cpu_data(x, g->output[0]), sizeof(float) * (size_t)n);
  return n;
}

/* Three steps of the graph with and without the pass, as the header says. */
static void same_results(const char *what, const IrGraph *with, const IrGraph *without) {
  RtCpu *a = exectest_new(with, BATCH), *b = exectest_new(without, BATCH);
  CHECK(a && b, "%s: executors", what);
  if (!a || !b) {
    rt_cpu_free(a), rt_cpu_free(b);
    return;
  }
  uint64_t in = 3;
  exectest_fill(a, rt_cpu_find(a, "image"), &in, -1, 1);
  in = 3;
  exectest_fill(b, rt_cpu_find(b, "image"), &in, -1, 1);
  float la[3][MAXOUT], lb[3][MAXOUT];
  int64_t n[3][2];
  for (int s = 0; s < 3; s++) {
    if (s != 1) fill_weights(with, a, 100 + (uint64_t)s), fill_weights(without, b, 100 + (uint64_t)s);
    n[s][0] = step(with, a, la[s]);
    n[s][1] = step(without, b, lb[s]);
    CHECK(n[s][0] > 0 && n[s][0] == n[s][1], "%s step %d: both run", what, s);
    if (n[s][0] > 0 && n[s][0] == n[s][1])
      CHECK(!memcmp(la[s], lb[s], sizeof(float) * (size_t)n[s][0]),
            "%s step %d (%s): the logits with the pass equal those without, bit for bit", what, s,
            s == 0   ? "first"
            : s == 1 ? "again, weights unchanged"
                     : "after new weights");
  }
  if (n[1][0] > 0 && n[2][0] == n[1][0])
    CHECK(memcmp(la[1], la[2], sizeof(float) * (size_t)n[1][0]) != 0,
          "%s: new weights change the logits (the check above can fail)", what);
  /* the once nodes run only after a write: a value planted in the first one's result survives a step with
   * the weights unchanged, and the same weights written again replace it (and give step 2's logits) */
  int o = 0;
  while (o < with->nnode && !ir_node_once(&with->node[o])) o++;
  CHECK(o < with->nnode, "%s: a once node", what);
  if (o < with->nnode && n[2][0] > 0) {
    int v = with->node[o].out[0];
    float *r = rt_cpu_data(a, v), keep = r[0], got[MAXOUT];
    r[0] = 12345.0f;
    step(with, a, got);
    CHECK(((float *)rt_cpu_data(a, v))[0] == 12345.0f, "%s: no write, the once nodes did not run again", what);
    fill_weights(with, a, 102);
    int64_t m = step(with, a, got);
    CHECK(((float *)rt_cpu_data(a, v))[0] == keep && m == n[2][0] && !memcmp(got, la[2], sizeof(float) * (size_t)m),
          "%s: the weights written again, the once nodes ran and the logits are step 2's", what);
  }
  rt_cpu_free(a);
  rt_cpu_free(b);
}

/* ir_verify's message for g with node n marked once, or "" when it accepts it. */
static const char *verify_once(const IrGraph *g, int n, char *buf, size_t len) {
  IrGraph *bad = ir_graph_clone(g);
  buf[0] = 0;
  if (!bad || !ir_attr_set_int(bad, n, "once", 1)) return "(out of memory)";
  return exectest_verify_msg(bad, "hoist", buf, len) ? buf : "";
}

/* The first `op` node of g whose input is a weight (of_weight 1) or not (0), marked once: refused with msg. */
static void refused(const IrGraph *g, IrOp op, int of_weight, const char *msg, const char *what) {
  char buf[8192] = "";
  int n = 0;
  while (n < g->nnode && !(g->node[n].op == op && ir_value_is_weight(g, g->node[n].in[0]) == of_weight)) n++;
  CHECK(n < g->nnode && strstr(verify_once(g, n, buf, sizeof buf), msg), "%s refused (got: %s)", what, buf);
}

int main(int argc, char **argv) {
  if (argc < 2) return check_skip("usage: test_hoist SOURCE_DIR");
  static const char *LAYERS[] = {"layer1.0.conv1", "layer1.0.conv2", "layer1.1.conv1",        "layer1.1.conv2",
                                 "layer1.2.conv1", "layer1.2.conv2", "layer2.0.conv1",        "layer2.0.conv2",
                                 "layer2.1.conv1", "layer2.1.conv2", "layer2.2.conv1",        "layer2.2.conv2",
                                 "layer3.0.conv1", "layer3.0.conv2", "layer3.1.conv1",        "layer3.1.conv2",
                                 "layer3.2.conv1", "layer3.2.conv2", "layer2.0.downsample.0", "layer3.0.downsample.0"};
  double steps[sizeof LAYERS / sizeof *LAYERS];
  for (size_t i = 0; i < sizeof LAYERS / sizeof *LAYERS; i++) steps[i] = 0.05;
  Int8Scales scales = {.layer = LAYERS, .scale = steps, .n = (int)(sizeof LAYERS / sizeof *LAYERS)};
  static const struct {
    const char *what, *int8;
  } CASES[] = {{"resnet20 f16 inference", NULL}, {"resnet20 int8 inference (calibrated)", "all"}};
  for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
    Arena aw, ao;
    arena_init(&aw), arena_init(&ao);
    const Int8Scales *sc = CASES[c].int8 ? &scales : NULL;
    IrGraph *with = compile(&aw, argv[1], 1, CASES[c].int8, sc, 1),
            *without = compile(&ao, argv[1], 1, CASES[c].int8, sc, 0);
    CHECK(with && without, "%s compiles with and without hoist", CASES[c].what);
    if (with && without) {
      int params, bad, params0, bad0;
      int once = count_once(with, &params, &bad), once0 = count_once(without, &params0, &bad0);
      printf("%s: %d casts and relayouts of its %d nodes marked once (%d read a parameter)\n", CASES[c].what, once,
             with->nnode, params);
      /* ResNet-20: 20 convolutions in f16 or i8 (all but the stem's f32) and the classifier cast their
       * weights, and the stem's filter is padded to 4 channels */
      CHECK(once == params && once == 22 && bad == 0,
            "%s: the 21 weight casts and the padding marked, nothing else (%d, %d)", CASES[c].what, once, bad);
      CHECK(once0 == 0, "%s: -fno-hoist marks none (%d)", CASES[c].what, once0);
      same_results(CASES[c].what, with, without);
      if (c == 1)
        refused(with, IR_OP_CAST, 0, "a cast marked once reads input 0, which is not a parameter or state",
                "once on an activation's cast");
    }
    arena_free(&aw), arena_free(&ao);
  }
  Arena at;
  arena_init(&at);
  IrGraph *train = compile(&at, argv[1], 0, NULL, NULL, 1);
  int params, bad;
  CHECK(train && count_once(train, &params, &bad) == 0 && params > 0,
        "resnet20 training: its %d weight casts and relayouts run every step, none marked", train ? params : -1);
  Arena ai;
  arena_init(&ai);
  IrGraph *infer = compile(&ai, argv[1], 1, NULL, NULL, 1);
  if (train && infer) {
    refused(infer, IR_OP_RELAYOUT, 0, "a relayout marked once reads input 0, which is not a parameter or state",
            "once on the image's relayout");
    refused(train, IR_OP_CAST, 1, "once is for a node of one input in a graph without an", "once in a training graph");
  }
  arena_free(&ai);
  arena_free(&at);
  return check_report();
}
