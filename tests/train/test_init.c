/* test_init.c - parameter initialization (rt_init) on real models and on
 * hand-written graphs.
 *
 * smallcnn's training graph: every parameter and state gets the role its
 * readers give it; conv weights have mean ~0 and the kaiming fan_out std
 * sqrt(2/(K*R*S)) (checked on the 4608-element conv3 filter within 6%, the
 * sampling error being ~1%); biases stay inside +-1/sqrt(fan_in) and use
 * most of it; batch norm and the buffers are exact constants.  The same
 * seed gives the same bytes, another seed other weights; the inference
 * graph (other nodes, no buffers) gets the same weights by name; a KRSC
 * filter holds the KCRS numbers transposed.  Hand-written graphs: a name
 * that contradicts its reader, a value nothing gives a role, a state read
 * as a weight, a weight with no usual name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rt_init.h"
#include "traintest.h"

static const char *role_of(const IrGraph *g, int v) {
  RtInitRole r;
  int owner;
  char err[256];
  return rt_init_role(g, v, &r, &owner, err, sizeof err) == RT_INIT_OK ? rt_init_role_name(r) : "(error)";
}

static int find(const IrGraph *g, const char *name) {
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].name && strcmp(g->val[v].name, name) == 0) return v;
  return -1;
}

static float *init_one(const IrGraph *g, const char *name, uint64_t seed) {
  int v = find(g, name);
  CHECK(v >= 0, "%s exists", name);
  if (v < 0) return NULL;
  float *buf = malloc(sizeof(float) * (size_t)ir_type_numel(&g->val[v].type, 1));
  char err[256];
  if (rt_init_value(g, v, seed, buf, err, sizeof err) != RT_INIT_OK) {
    CHECK(0, "init %s: %s", name, err);
    free(buf);
    return NULL;
  }
  return buf;
}

static void stats(const float *p, int64_t n, double *mean, double *std, double *maxabs) {
  double s = 0, ss = 0, m = 0;
  for (int64_t i = 0; i < n; i++) {
    s += p[i], ss += (double)p[i] * p[i];
    if (fabs(p[i]) > m) m = fabs(p[i]);
  }
  *mean = s / (double)n;
  *std = sqrt(ss / (double)n - *mean * *mean);
  *maxabs = m;
}

static void test_roles(const IrGraph *g) {
  static const char *const want[][2] = {
      {"conv1.weight", "conv_weight"},
      {"bn1.weight", "batchnorm_weight"},
      {"bn1.bias", "batchnorm_bias"},
      {"bn1.running_mean", "running_mean"},
      {"bn1.running_var", "running_var"},
      {"conv3.weight", "conv_weight"},
      {"conv3.bias", "conv_bias"},
      {"fc.weight", "linear_weight"},
      {"fc.bias", "linear_bias"},
      {"conv2.weight.momentum_buffer", "momentum_buffer"},
      {"fc.bias.momentum_buffer", "momentum_buffer"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    int v = find(g, want[i][0]);
    const char *got = v >= 0 ? role_of(g, v) : "(absent)";
    CHECK(strcmp(got, want[i][1]) == 0, "%s is a %s, got %s", want[i][0], want[i][1], got);
  }
}

static void test_values(const IrGraph *g, RtCpu *x) {
  double mean, std, mx;
  int v = find(g, "conv3.weight");
  stats(rt_cpu_data(x, v), rt_cpu_numel(x, v), &mean, &std, &mx);
  double want = sqrt(2.0 / (32 * 3 * 3));
  CHECK(fabs(mean) < 0.1 * want, "conv3.weight mean %g", mean);
  CHECK(fabs(std / want - 1) < 0.06, "conv3.weight std %g, want %g", std, want);
  v = find(g, "conv1.weight");
  stats(rt_cpu_data(x, v), rt_cpu_numel(x, v), &mean, &std, &mx);
  want = sqrt(2.0 / (16 * 3 * 3));
  CHECK(fabs(std / want - 1) < 0.2, "conv1.weight std %g, want %g", std, want);

  struct {
    const char *name;
    double bound;
  } uni[] = {{"conv3.bias", 1 / sqrt(16 * 9.0)}, {"fc.weight", 1 / sqrt(32.0)}, {"fc.bias", 1 / sqrt(32.0)}};
  for (size_t i = 0; i < 3; i++) {
    v = find(g, uni[i].name);
    stats(rt_cpu_data(x, v), rt_cpu_numel(x, v), &mean, &std, &mx);
    CHECK(mx <= uni[i].bound && mx > 0.5 * uni[i].bound, "%s: max |x| %g, bound %g", uni[i].name, mx, uni[i].bound);
  }
  struct {
    const char *name;
    float value;
  } exact[] = {{"bn1.weight", 1},
               {"bn2.weight", 1},
               {"bn1.bias", 0},
               {"bn2.running_mean", 0},
               {"bn2.running_var", 1},
               {"conv1.weight.momentum_buffer", 0},
               {"fc.weight.momentum_buffer", 0}};
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
    v = find(g, exact[i].name);
    const float *p = rt_cpu_data(x, v);
    int64_t bad = 0;
    for (int64_t k = 0; k < rt_cpu_numel(x, v); k++) bad += p[k] != exact[i].value;
    CHECK(bad == 0, "%s: %lld values are not %g", exact[i].name, (long long)bad, exact[i].value);
  }
}

static void test_seeds(const IrGraph *g, const IrGraph *gi) {
  float *a = init_one(g, "conv2.weight", 7), *b = init_one(g, "conv2.weight", 7);
  float *c = init_one(g, "conv2.weight", 8), *d = init_one(gi, "conv2.weight", 7);
  float *e = init_one(g, "conv3.weight", 7);
  size_t bytes = sizeof(float) * 16 * 16 * 9;
  if (a && b && c && d && e) {
    CHECK(memcmp(a, b, bytes) == 0, "same seed, same weights");
    CHECK(memcmp(a, c, bytes) != 0, "another seed, other weights");
    CHECK(memcmp(a, d, bytes) == 0, "the inference graph gets the same weights by name");
    CHECK(memcmp(a, e, bytes) != 0, "two layers get different streams");
  }
  free(a), free(b), free(c), free(d), free(e);
}

/* conv2.weight of a KRSC copy holds the KCRS numbers at their transposed places. */
static void test_layout(const IrGraph *g) {
  /* Two copies of g whose conv2.weight is KCRS in one and KRSC in the other,
   * whatever layout the compile gave it. */
  IrGraph *gk = ir_graph_clone(g), *h = ir_graph_clone(g);
  int v = find(h, "conv2.weight");
  const IrType *t = &g->val[v].type;
  int krsc_in = t->layout == IR_LAYOUT_KRSC;
  int64_t K = t->dim[0], C = t->dim[krsc_in ? 3 : 1], R = t->dim[krsc_in ? 1 : 2], S = t->dim[krsc_in ? 2 : 3];
  int64_t kd[4] = {K, C, R, S}, rd[4] = {K, R, S, C};
  gk->val[v].type = ir_type(t->dtype, IR_LAYOUT_KCRS, 4, kd);
  h->val[v].type = ir_type(t->dtype, IR_LAYOUT_KRSC, 4, rd);
  float *kcrs = init_one(gk, "conv2.weight", 3), *krsc = init_one(h, "conv2.weight", 3);
  int64_t bad = 0;
  for (int64_t k = 0; kcrs && krsc && k < K; k++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t r = 0; r < R; r++)
        for (int64_t s = 0; s < S; s++)
          bad += kcrs[((k * C + c) * R + r) * S + s] != krsc[((k * R + r) * S + s) * C + c];
  CHECK(kcrs && krsc && bad == 0, "KRSC filter is the KCRS one transposed (%lld differ)", (long long)bad);
  free(kcrs), free(krsc);
}

static const char *const HAND = "graph hand {\n"
                                "  input %0 x : f32[N,3]\n"
                                "  param @w : f32[2,3]\n"
                                "  param @b.running_mean : f32[2]\n"
                                "  param @lonely.weight : f32[2]\n"
                                "  state @s.weight : f32[2,3]\n"
                                "  %5 = linear(%0, @w, @b.running_mean) : f32[N,2]\n"
                                "  %6 = add(%5, @lonely.weight) : f32[N,2]\n"
                                "  %7 = linear(%0, @s.weight) : f32[N,2]\n"
                                "  output %6, %7\n"
                                "}\n";

static void expect_role_error(const IrGraph *g, const char *name, const char *needle) {
  RtInitRole r;
  int owner;
  char err[256] = "";
  int v = find(g, name);
  RtInitStatus st = v >= 0 ? rt_init_role(g, v, &r, &owner, err, sizeof err) : RT_INIT_OK;
  CHECK(st == RT_INIT_ERR_ROLE, "%s: role error expected, got %d", name, (int)st);
  CHECK(strstr(err, needle) != NULL, "%s: message '%s' says '%s'", name, err, needle);
}

static void test_hand(Arena *a) {
  Diag d;
  diag_init(&d, stderr);
  IrGraph *g = ir_read(a, &d, "hand.ir", HAND, strlen(HAND));
  CHECK(g && !d.nerrors, "hand graph reads");
  if (!g) return;
  CHECK(strcmp(role_of(g, find(g, "w")), "linear_weight") == 0, "@w is a linear weight by its reader alone");
  expect_role_error(g, "b.running_mean", "name says .running_mean");
  expect_role_error(g, "lonely.weight", "no op reads it");
  expect_role_error(g, "s.weight", "must be a parameter");
  float buf[6];
  char err[256];
  CHECK(rt_init_value(g, find(g, "lonely.weight"), 1, buf, err, sizeof err) == RT_INIT_ERR_ROLE,
        "rt_init_value refuses a value without a role");
}

int main(int argc, char **argv) {
  if (argc < 2) return check_skip("usage: train_test_init SOURCE_DIR");
  Arena a;
  arena_init(&a);
  IrGraph *g = traintest_compile(&a, argv[1], "models/smallcnn.net", 0);
  IrGraph *gi = traintest_compile(&a, argv[1], "models/smallcnn.net", 1);
  CHECK(g && gi, "smallcnn compiles for training and inference");
  RtCpu *x = NULL;
  char err[256];
  if (g && gi && rt_cpu_new(g, 1, &x, err, sizeof err) == 0) {
    test_roles(g);
    RtInitStatus st = rt_init_cpu(x, g, 7, err, sizeof err);
    CHECK(st == RT_INIT_OK, "rt_init_cpu: %s", err);
    if (st == RT_INIT_OK) test_values(g, x);
    test_seeds(g, gi);
    test_layout(g);
  } else if (g && gi) {
    CHECK(0, "rt_cpu_new: %s", err);
  }
  rt_cpu_free(x);
  test_hand(&a);
  arena_free(&a);
  return check_report();
}
