/* test_sched.c - learning-rate schedules against hand-computed rates.
 *
 * Train sections come from lowering real source (so the keys are the ones
 * lower_train writes) and from hand-built graphs for what the language
 * cannot say (an unknown schedule, a missing key).  Values worked by hand:
 *
 *   step(every=2, gamma=0.5, warmup_epochs=1), lr 0.1, 4 steps x 6 epochs:
 *     t 0..3 warm-up 0.025 0.05 0.075 0.1; t 4..7 0.1; t 8..15 0.05; t 16..23 0.025
 *   cosine(warmup_epochs=1), lr 0.2, 10 steps x 5 epochs (W 10, T 50):
 *     t 5: 0.2*6/10 = 0.12; t 10: 0.2; t 20: 0.1*(1+cos(pi/4)) = 0.170710678;
 *     t 30: 0.1; t 49: 0.1*(1+cos(39pi/40)) = 0.000308267
 *   constant(warmup_epochs=2), lr 0.05, 3 steps x 4 epochs: t 0: 0.05/6; t 5, 6, 11: 0.05 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rt_sched.h"
#include "traintest.h"

static const char *const NET = "network t {\n"
                               "  input image : f32[1, 4, 4]\n"
                               "  input label : i32[]\n"
                               "  flat = flatten(image)\n"
                               "  fc   = linear(flat, 3)\n"
                               "  loss = softmax_cross_entropy(fc, label)\n"
                               "}\n"
                               "train {\n"
                               "  batch     = 2\n"
                               "  optimizer = sgd(lr=%s)\n"
                               "  %s\n"
                               "}\n";

static IrGraph *lowered(Arena *a, const char *lr, const char *schedule_line) {
  char src[1024];
  snprintf(src, sizeof src, NET, lr, schedule_line);
  IrGraph *g = traintest_compile_text(a, src, 0);
  CHECK(g != NULL, "compiles with '%s'", schedule_line);
  return g;
}

static void expect(const RtSched *s, int64_t t, double want, const char *what) {
  char name[96];
  snprintf(name, sizeof name, "%s at step %lld", what, (long long)t);
  CHECK_CLOSE(rt_sched_lr(s, t), want, 1e-9, name);
}

static void test_step(Arena *a) {
  IrGraph *g = lowered(a, "0.1", "schedule = step(every=2, gamma=0.5, warmup_epochs=1)");
  RtSched s;
  char err[256];
  if (!g || rt_sched_init(&s, g, 4, 6, err, sizeof err) != RT_SCHED_OK) {
    CHECK(0, "step schedule: %s", g ? err : "no graph");
    return;
  }
  CHECK(s.kind == RT_SCHED_STEP && s.every_steps == 8 && s.warmup_steps == 4, "step fields");
  static const double want[24] = {0.025, 0.05, 0.075, 0.1,  0.1,   0.1,   0.1,   0.1,   0.05,  0.05,  0.05,  0.05,
                                  0.05,  0.05, 0.05,  0.05, 0.025, 0.025, 0.025, 0.025, 0.025, 0.025, 0.025, 0.025};
  for (int t = 0; t < 24; t++) expect(&s, t, want[t], "step");
  expect(&s, 1000, 0.025, "step past the run");
  expect(&s, -3, 0.025, "step before the run");
}

static void test_cosine(Arena *a) {
  IrGraph *g = lowered(a, "0.2", "schedule = cosine(warmup_epochs=1)");
  RtSched s;
  char err[256];
  if (!g || rt_sched_init(&s, g, 10, 5, err, sizeof err) != RT_SCHED_OK) {
    CHECK(0, "cosine schedule: %s", g ? err : "no graph");
    return;
  }
  expect(&s, 0, 0.02, "cosine");
  expect(&s, 5, 0.12, "cosine");
  expect(&s, 9, 0.2, "cosine");
  expect(&s, 10, 0.2, "cosine");
  expect(&s, 20, 0.170710678118654752, "cosine");
  expect(&s, 30, 0.1, "cosine");
  expect(&s, 49, 0.000308266627, "cosine");
  for (int t = 11; t < 50; t++) CHECK(rt_sched_lr(&s, t) < rt_sched_lr(&s, t - 1), "cosine falls at step %d", t);
}

static void test_constant(Arena *a) {
  IrGraph *g = lowered(a, "0.05", "schedule = constant(warmup_epochs=2)");
  RtSched s;
  char err[256];
  if (!g || rt_sched_init(&s, g, 3, 4, err, sizeof err) != RT_SCHED_OK) {
    CHECK(0, "constant schedule: %s", g ? err : "no graph");
    return;
  }
  expect(&s, 0, 0.05 / 6, "constant warm-up");
  expect(&s, 2, 0.025, "constant warm-up");
  expect(&s, 5, 0.05, "constant");
  expect(&s, 6, 0.05, "constant");
  expect(&s, 11, 0.05, "constant");
  /* No schedule line: constant, no warm-up. */
  IrGraph *plain = lowered(a, "0.3", "epochs = 2");
  if (plain && rt_sched_init(&s, plain, 5, 2, err, sizeof err) == RT_SCHED_OK) {
    expect(&s, 0, 0.3, "no schedule");
    expect(&s, 9, 0.3, "no schedule");
  } else {
    CHECK(0, "no schedule: %s", plain ? err : "no graph");
  }
}

static void set_str(IrGraph *g, const char *key, const char *v) {
  ir_train_set(g, &(IrAttr){.key = key, .kind = IR_ATTR_STR, .s = v});
}
static void set_float(IrGraph *g, const char *key, double v) {
  ir_train_set(g, &(IrAttr){.key = key, .kind = IR_ATTR_FLOAT, .f = v});
}
static void set_int(IrGraph *g, const char *key, int64_t v) {
  ir_train_set(g, &(IrAttr){.key = key, .kind = IR_ATTR_INT, .n = 1, .i = {v}});
}

static void expect_error(const IrGraph *g, int64_t spe, int64_t epochs, RtSchedStatus want, const char *needle) {
  RtSched s;
  char err[256] = "";
  RtSchedStatus st = rt_sched_init(&s, g, spe, epochs, err, sizeof err);
  CHECK(st == want, "status %d, want %d (%s)", (int)st, (int)want, err);
  CHECK(strstr(err, needle) != NULL, "message '%s' names '%s'", err, needle);
  CHECK(s.total_steps == 0 && s.lr == 0, "failed init leaves the schedule zeroed");
}

static void test_errors(Arena *a) {
  IrGraph *g = ir_graph_new(a, "nolr");
  expect_error(g, 4, 2, RT_SCHED_ERR_TRAIN, "'lr'");
  set_float(g, "lr", 0.1);
  set_str(g, "schedule", "poly");
  expect_error(g, 4, 2, RT_SCHED_ERR_TRAIN, "unknown schedule 'poly'");

  IrGraph *st = ir_graph_new(a, "step");
  set_float(st, "lr", 0.1);
  set_str(st, "schedule", "step");
  set_int(st, "warmup_epochs", 0);
  set_float(st, "schedule_gamma", 0.1);
  expect_error(st, 4, 2, RT_SCHED_ERR_TRAIN, "schedule_every");

  IrGraph *w = lowered(a, "0.1", "schedule = cosine(warmup_epochs=3)");
  if (w) {
    expect_error(w, 0, 5, RT_SCHED_ERR_RANGE, "at least 1");
    /* a warm-up not shorter than the run is cut to half of it, and says so */
    RtSched s;
    char err[256];
    CHECK(rt_sched_init(&s, w, 4, 3, err, sizeof err) == RT_SCHED_OK, "3-epoch warm-up, 3-epoch run: %s", err);
    CHECK(s.warmup_asked == 3 && s.warmup_steps == 6 && s.total_steps == 12, "cut to 6 of 12 steps (asked %lld, %lld)",
          (long long)s.warmup_asked, (long long)s.warmup_steps);
    CHECK(rt_sched_lr(&s, 0) > 0 && fabs(rt_sched_lr(&s, 5) - 0.1) < 1e-12 && rt_sched_lr(&s, 11) < rt_sched_lr(&s, 6),
          "warm-up, then the cosine: %g %g %g", rt_sched_lr(&s, 0), rt_sched_lr(&s, 5), rt_sched_lr(&s, 11));
    CHECK(rt_sched_init(&s, w, 1, 1, err, sizeof err) == RT_SCHED_OK && s.warmup_steps == 0 &&
              isfinite(rt_sched_lr(&s, 0)) && rt_sched_lr(&s, 0) == 0.1,
          "a one-step run: no warm-up, the full rate: %g", rt_sched_lr(&s, 0));
    CHECK(rt_sched_init(&s, w, 4, 4, err, sizeof err) == RT_SCHED_OK && s.warmup_asked == 0 && s.warmup_steps == 12,
          "a warm-up shorter than the run stays");
  }
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  Arena a;
  arena_init(&a);
  test_step(&a);
  test_cosine(&a);
  test_constant(&a);
  test_errors(&a);
  arena_free(&a);
  return check_report();
}
