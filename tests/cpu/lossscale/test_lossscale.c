/* test_lossscale.c - dynamic loss scaling (docs/passes/precision.md) on
 * the CPU executor, with models/smallcnn.net compiled in f16 as netc's
 * defaults do it:
 *
 *   - the rewrite: @loss_scale and @loss_scale_good_steps are state, no
 *     input loss_scale, every sgd_update has the skip flag, one
 *     loss_scale_update ends the step, rt_init sets the scale to
 *     loss_scale_init and the count to 0;
 *   - a step with nothing overflowing equals, bit for bit, the same step
 *     of the graph compiled with a static scale of the same value fed as
 *     the input loss_scale (today's graph);
 *   - growth: after growth_interval good steps the scale doubles and the
 *     count restarts;
 *   - overflow: with a huge scale the f16 gradients overflow, the flag is
 *     set, no parameter or state but the two scale states changes, the
 *     scale halves and the count returns to 0.
 *
 * Usage: test_lossscale SOURCE_ROOT */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"
#include "rt_cpu.h"
#include "rt_init.h"

enum { BATCH = 4, INTERVAL = 3 };

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

/* smallcnn with its loss_scale line replaced by `ls`. */
static IrGraph *compile_with(Arena *a, const char *src, const char *ls) {
  const char *at = strstr(src, "loss_scale"), *eol = at ? strchr(at, '\n') : NULL;
  if (!eol) return NULL;
  size_t head = (size_t)(at - src), n = head + strlen(ls) + strlen(eol) + 1;
  char *text = malloc(n);
  if (!text) return NULL;
  snprintf(text, n, "%.*s%s%s", (int)head, src, ls, eol);
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .precision = IR_DT_F16};
  IrGraph *g = compile_source(a, &d, "smallcnn.net", text, strlen(text), &cx);
  free(text);
  return g;
}

static int find(const IrGraph *g, IrValueKind kind, const char *name) {
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].kind == kind && g->val[v].name && strcmp(g->val[v].name, name) == 0) return v;
  return -1;
}

static int count_op(const IrGraph *g, IrOp op) {
  int k = 0;
  for (int n = 0; n < g->nnode; n++) k += g->node[n].op == op;
  return k;
}

/* Same seeded weights (rt_init), images and labels in both executors. */
static void seed(RtCpu *x, const IrGraph *g) {
  char err[256];
  CHECK(rt_init_cpu(x, g, 11, err, sizeof err) == RT_INIT_OK, "rt_init_cpu: %s", err);
  float *img = rt_cpu_data(x, find(g, IR_VAL_INPUT, "image"));
  int64_t n = rt_cpu_numel(x, find(g, IR_VAL_INPUT, "image"));
  for (int64_t i = 0; i < n; i++) img[i] = (float)((i * 37 % 101) - 50) / 50.0f;
  int64_t *lab = rt_cpu_data(x, find(g, IR_VAL_INPUT, "label"));
  for (int i = 0; i < BATCH; i++) lab[i] = (i * 3 + 1) % 10;
  *(float *)rt_cpu_data(x, find(g, IR_VAL_INPUT, "lr")) = 0.05f;
}

static float *snapshot(RtCpu *x, const IrGraph *g) {
  int64_t total = 0;
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE) total += rt_cpu_numel(x, v);
  float *s = malloc(sizeof(float) * (size_t)(total + 1)), *p = s;
  for (int v = 0; s && v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE) {
      memcpy(p, rt_cpu_data(x, v), sizeof(float) * (size_t)rt_cpu_numel(x, v));
      p += rt_cpu_numel(x, v);
    }
  return s;
}

/* Params and momentum buffers of x that differ from snapshot s (the scale
 * states and batch norm's running statistics, which the forward pass
 * updates whatever happens, do not count); prints the first few. */
static int changed_since(RtCpu *x, const IrGraph *g, const float *s, int quiet) {
  int bad = 0;
  for (int v = 0; v < g->nval; v++) {
    if (g->val[v].kind != IR_VAL_PARAM && g->val[v].kind != IR_VAL_STATE) continue;
    int64_t n = rt_cpu_numel(x, v);
    int other = strncmp(g->val[v].name, "loss_scale", 10) == 0 || strstr(g->val[v].name, ".running_");
    if (!other && memcmp(s, rt_cpu_data(x, v), sizeof(float) * (size_t)n) && bad++ < 3 && !quiet)
      printf("  @%s changed\n", g->val[v].name);
    s += n;
  }
  return bad;
}

static float state(RtCpu *x, const IrGraph *g, const char *name) {
  return *(float *)rt_cpu_data(x, find(g, IR_VAL_STATE, name));
}

static int run(RtCpu *x) {
  char err[512];
  int rc = rt_cpu_run(x, err, sizeof err);
  CHECK(rc == 0, "step: %s", err);
  return rc;
}

static void check_rewrite(const IrGraph *g) {
  CHECK(find(g, IR_VAL_INPUT, "loss_scale") < 0, "no input loss_scale");
  CHECK(find(g, IR_VAL_STATE, "loss_scale") >= 0 && find(g, IR_VAL_STATE, "loss_scale_good_steps") >= 0,
        "the two scale states exist");
  CHECK(count_op(g, IR_OP_NONFINITE_CHECK) == 1 && count_op(g, IR_OP_LOSS_SCALE_UPDATE) == 1,
        "one check (10 gradients) and one update");
  CHECK(g->node[g->nnode - 1].op == IR_OP_LOSS_SCALE_UPDATE, "the update ends the step");
  int flag = -1;
  for (int n = 0; n < g->nnode; n++)
    if (g->node[n].op == IR_OP_NONFINITE_CHECK) flag = g->node[n].out[0];
  for (int n = 0; n < g->nnode; n++)
    if (g->node[n].op == IR_OP_SGD_UPDATE)
      CHECK(g->node[n].nin == 6 && g->node[n].in[5] == flag, "%s takes the flag", g->node[n].name);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_lossscale SOURCE_ROOT\n");
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/models/smallcnn.net", argv[1]);
  char *src = read_text(path);
  CHECK(src != NULL, "cannot read %s", path);
  if (!src) return check_report();
  Arena ad, as;
  arena_init(&ad);
  arena_init(&as);
  char line[128];
  snprintf(line, sizeof line, "loss_scale = dynamic(init=1024, growth_interval=%d)", INTERVAL);
  IrGraph *gd = compile_with(&ad, src, line), *gs = compile_with(&as, src, "loss_scale = static(1024)");
  CHECK(gd && gs, "smallcnn compiles with a dynamic and a static scale");
  RtCpu *xd = NULL, *xs = NULL;
  char err[512];
  if (gd && gs) {
    check_rewrite(gd);
    CHECK(find(gs, IR_VAL_INPUT, "loss_scale") >= 0 && count_op(gs, IR_OP_NONFINITE_CHECK) == 0,
          "a static scale keeps today's graph");
    CHECK(rt_cpu_new(gd, BATCH, &xd, err, sizeof err) == 0 && rt_cpu_new(gs, BATCH, &xs, err, sizeof err) == 0,
          "executors: %s", err);
  }
  if (xd && xs) {
    seed(xd, gd);
    seed(xs, gs);
    *(float *)rt_cpu_data(xs, find(gs, IR_VAL_INPUT, "loss_scale")) = 1024;
    CHECK(state(xd, gd, "loss_scale") == 1024 && state(xd, gd, "loss_scale_good_steps") == 0,
          "rt_init: scale %g, good steps %g", state(xd, gd, "loss_scale"), state(xd, gd, "loss_scale_good_steps"));

    /* no overflow: the same step as the host-fed graph, bit for bit */
    float *before = snapshot(xd, gd);
    if (!run(xd) && !run(xs)) {
      CHECK(*(float *)rt_cpu_data(xd, gd->output[0]) == *(float *)rt_cpu_data(xs, gs->output[0]), "same loss");
      int same = 0, total = 0;
      for (int v = 0; v < gs->nval; v++) {
        if (gs->val[v].kind != IR_VAL_PARAM && gs->val[v].kind != IR_VAL_STATE) continue;
        int w = rt_cpu_find(xd, gs->val[v].name);
        total++;
        same +=
            w >= 0 && memcmp(rt_cpu_data(xs, v), rt_cpu_data(xd, w), sizeof(float) * (size_t)rt_cpu_numel(xs, v)) == 0;
      }
      CHECK(same == total, "%d of %d params and states equal the static graph's after one step", same, total);
      CHECK(changed_since(xd, gd, before, 1) > 0, "the step updated the weights");
      CHECK(state(xd, gd, "loss_scale") == 1024 && state(xd, gd, "loss_scale_good_steps") == 1,
            "after a good step: scale %g, good steps %g", state(xd, gd, "loss_scale"),
            state(xd, gd, "loss_scale_good_steps"));
    }
    free(before);

    /* growth: INTERVAL good steps in all */
    for (int i = 1; i < INTERVAL; i++) run(xd);
    CHECK(state(xd, gd, "loss_scale") == 2048 && state(xd, gd, "loss_scale_good_steps") == 0,
          "after %d good steps: scale %g (want 2048), good steps %g (want 0)", INTERVAL, state(xd, gd, "loss_scale"),
          state(xd, gd, "loss_scale_good_steps"));

    /* overflow: a scale far beyond f16's range */
    *(float *)rt_cpu_data(xd, find(gd, IR_VAL_STATE, "loss_scale")) = 1e30f;
    *(float *)rt_cpu_data(xd, find(gd, IR_VAL_STATE, "loss_scale_good_steps")) = 2;
    before = snapshot(xd, gd);
    if (!run(xd)) {
      int flag = -1;
      for (int n = 0; n < gd->nnode; n++)
        if (gd->node[n].op == IR_OP_NONFINITE_CHECK) flag = gd->node[n].out[0];
      CHECK(flag >= 0 && *(float *)rt_cpu_data(xd, flag) == 1, "the check saw the overflow");
      CHECK(changed_since(xd, gd, before, 0) == 0, "an overflowing step changes no weight or momentum buffer");
      CHECK(state(xd, gd, "loss_scale") == 5e29f && state(xd, gd, "loss_scale_good_steps") == 0,
            "after an overflow: scale %g (want 5e29), good steps %g (want 0)", state(xd, gd, "loss_scale"),
            state(xd, gd, "loss_scale_good_steps"));
    }
    free(before);
  }
  rt_cpu_free(xd);
  rt_cpu_free(xs);
  arena_free(&ad);
  arena_free(&as);
  free(src);
  return check_report();
}
