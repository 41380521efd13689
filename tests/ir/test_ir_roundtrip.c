/* test_ir_roundtrip.c - ir_print against a golden dump, and ir_read back:
 * print(read(print(g))) == print(g) byte for byte and read(print(g)) equal
 * to g up to renumbering; float, string, multi-result and zero-result
 * forms; the optimizer section's line; hand-written text with comments and
 * sparse labels.
 * Usage: test_ir_roundtrip DIR (DIR/golden/small.ir; UPDATE_GOLDEN=1 rewrites it). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "irtest.h"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

static int verify_quiet(const IrGraph *g, char **msgs) {
  IrtestDiag c;
  irtest_diag_begin(&c);
  int n = ir_verify(g, &c.d, NULL);
  char *m = irtest_diag_end(&c);
  if (msgs)
    *msgs = m;
  else
    free(m);
  return n;
}

/* print -> read -> print is stable and the graphs agree. */
static void check_round_trip(const IrGraph *g, const char *what) {
  Arena a;
  arena_init(&a);
  IrPrintOpts o = {.pass = "parse"};
  char *t1 = irtest_print(g, &o), *msgs = NULL, why[200] = "";
  IrGraph *g2 = irtest_read(&a, t1, &msgs);
  CHECK(g2 != NULL, "%s: read back failed:\n%s\n%s", what, msgs, t1);
  if (g2) {
    char *t2 = irtest_print(g2, &o);
    CHECK(strcmp(t1, t2) == 0, "%s: reprint differs:\n%s---\n%s", what, t1, t2);
    CHECK(irtest_equal(g, g2, why, sizeof why), "%s: graphs differ: %s", what, why);
    free(t2);
  }
  free(t1);
  free(msgs);
  arena_free(&a);
}

static void test_golden(const char *dir) {
  Arena a;
  arena_init(&a);
  IrGraph *g = irtest_small_net(&a);
  CHECK(g != NULL, "small net built");
  char *msgs = NULL;
  CHECK(verify_quiet(g, &msgs) == 0, "small net verifies:\n%s", msgs);
  free(msgs);
  IrPrintOpts o = {.pass = "parse"};
  char *text = irtest_print(g, &o), path[1024];
  snprintf(path, sizeof path, "%s/golden/small.ir", dir);
  const char *upd = getenv("UPDATE_GOLDEN");
  if (upd && *upd && strcmp(upd, "0") != 0) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (f) fputs(text, f), fclose(f);
    printf("rewrote %s\n", path);
  }
  char *want = slurp(path);
  CHECK(want != NULL, "cannot read %s (UPDATE_GOLDEN=1 makes it)", path);
  if (want) CHECK(strcmp(text, want) == 0, "dump differs from %s:\n%s", path, text);
  free(want);
  check_round_trip(g, "small net");

  /* Read ids follow print order: inputs first, then params in first use. */
  IrGraph *g2 = irtest_read(&a, text, NULL);
  if (g2) {
    CHECK(g2->val[0].kind == IR_VAL_INPUT && strcmp(g2->val[0].name, "image") == 0, "val 0 is image");
    CHECK(g2->val[1].kind == IR_VAL_INPUT && strcmp(g2->val[1].name, "label") == 0, "val 1 is label");
    CHECK(strcmp(g2->val[2].name, "conv1.weight") == 0, "val 2 is conv1.weight, got %s", g2->val[2].name);
    CHECK(strcmp(g2->val[g2->nval - 1 - g2->nnode].name, "unused.weight") == 0, "unused param last");
    CHECK(verify_quiet(g2, NULL) == 0, "read graph verifies");
  }
  free(text);

  /* Without locations and without a pass. */
  char *nl = irtest_print(g, &(IrPrintOpts){.no_loc = 1});
  CHECK(strncmp(nl, "# netc IR\ngraph small {\n", 24) == 0, "plain header: %.30s", nl);
  CHECK(strstr(nl, "{precision=f16} : f32[N,8,8,8] NCHW  # relu\n") != NULL, "no-loc comment is '# NAME'");
  CHECK(strstr(nl, "%6 = add(%4, %5) : f32[N,8,8,8] NCHW\n") != NULL, "unnamed node without loc has no comment");
  CHECK(strstr(nl, "small.net") == NULL, "no file names with no_loc");
  IrGraph *g3 = irtest_read(&a, nl, NULL);
  CHECK(g3 != NULL, "no-loc dump reads");
  if (g3) {
    char *nl2 = irtest_print(g3, &(IrPrintOpts){.no_loc = 1});
    CHECK(strcmp(nl, nl2) == 0, "no-loc reprint equal");
    free(nl2);
  }
  free(nl);
  arena_free(&a);
}

/* Floats print as the shortest text that reads back exactly, with '.' or 'e'. */
static void test_floats(void) {
  static const struct {
    double v;
    const char *text;
  } cases[] = {
      {0.1, "0.1"},
      {1e-05, "1e-05"},
      {65536.0, "65536.0"},
      {1.0, "1.0"},
      {-0.0, "-0.0"},
      {0.5, "0.5"},
      {1e21, "1e+21"},
      {1.0 / 3, "0.3333333333333333"},
      {5e-324, "5e-324"},
      {1e300, "1e+300"},
      {123456789012.0, "123456789012.0"},
      {-2.5, "-2.5"},
      {0.0, "0.0"},
  };
  Arena a;
  arena_init(&a);
  IrGraph *g = ir_graph_new(&a, "floats");
  char key[16];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(key, sizeof key, "f%zu", i);
    ir_train_set(g, &(IrAttr){.key = key, .kind = IR_ATTR_FLOAT, .f = cases[i].v});
  }
  ir_train_set(g, &(IrAttr){.key = "inf", .kind = IR_ATTR_FLOAT, .f = INFINITY});
  ir_train_set(g, &(IrAttr){.key = "ninf", .kind = IR_ATTR_FLOAT, .f = -INFINITY});
  ir_train_set(g, &(IrAttr){.key = "nan", .kind = IR_ATTR_FLOAT, .f = NAN});
  char *t = irtest_print(g, NULL), want[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(want, sizeof want, " f%zu=%s ", i, cases[i].text);
    CHECK(strstr(t, want) != NULL, "float %.17g prints as %s:\n%s", cases[i].v, cases[i].text, t);
  }
  CHECK(strstr(t, " inf=inf ninf=-inf nan=nan\n") != NULL, "non-finite floats:\n%s", t);
  check_round_trip(g, "floats");
  free(t);
  arena_free(&a);
}

/* Strings: plain characters as they are, anything else as \xHH (read back
 * exactly; the verifier rejects such strings). */
static void test_strings(void) {
  Arena a;
  arena_init(&a);
  IrGraph *g = ir_graph_new(&a, "strings");
  ir_train_set(g, &(IrAttr){.key = "plain", .kind = IR_ATTR_STR, .s = "sgd-v1.2_x"});
  ir_train_set(g, &(IrAttr){.key = "odd", .kind = IR_ATTR_STR, .s = "a b\"c\\"});
  ir_train_set(g, &(IrAttr){.key = "empty", .kind = IR_ATTR_STR, .s = ""});
  char *t = irtest_print(g, NULL), *msgs = NULL;
  CHECK(strstr(t, "train plain=\"sgd-v1.2_x\" odd=\"a\\x20b\\x22c\\x5c\" empty=\"\"\n") != NULL, "strings:\n%s", t);
  check_round_trip(g, "strings");
  CHECK(verify_quiet(g, &msgs) == 1, "one bad string");
  CHECK(strstr(msgs, "train: attribute odd: string may hold only [A-Za-z0-9_.-]") != NULL, "msg: %s", msgs);
  free(msgs);
  free(t);
  arena_free(&a);
}

/* Results: several (comma-separated, one type each) or none (no '=', no ':'). */
static void test_result_forms(void) {
  Arena a;
  arena_init(&a);
  IrGraph *g = ir_graph_new(&a, "forms");
  int64_t d[2] = {IR_DIM_N, 4}, e[1] = {4};
  IrType t2 = ir_type(IR_DT_F16, IR_LAYOUT_ROW, 2, d), t1 = ir_type(IR_DT_F32, IR_LAYOUT_ROW, 1, e);
  IrType ts[2] = {t2, t1};
  int x = ir_value_add(g, IR_VAL_INPUT, t2, "x");
  int w = ir_value_add(g, IR_VAL_STATE, t1, "w");
  int two = ir_node_add(g, IR_OP_RELU, "two", (SrcLoc){"f.net", 2, 3}, &x, 1, ts, 2);
  int in[2] = {w, g->node[two].out[1]};
  int none = ir_node_add(g, IR_OP_ADD, "upd", (SrcLoc){0}, in, 2, NULL, 0);
  ir_attr_set_ints(g, none, "k", (int64_t[]){3}, 1);
  ir_attr_set_ints(g, none, "big", (int64_t[]){-1, 0, 9000000000LL}, 3);
  ir_output_add(g, g->node[two].out[0]);
  ir_output_add(g, w);
  char *t = irtest_print(g, NULL);
  CHECK(strstr(t, "  %1, %2 = relu(%0) : f16[N,4], f32[4]  # two @ f.net:2:3\n") != NULL, "two results:\n%s", t);
  CHECK(strstr(t, "  add(@w, %2) {k=[3] big=-1x0x9000000000}  # upd\n") != NULL, "no results:\n%s", t);
  CHECK(strstr(t, "  output %1, @w\n") != NULL, "output line:\n%s", t);
  check_round_trip(g, "result forms");
  char *msgs = NULL;
  CHECK(verify_quiet(g, &msgs) == 3, "arity and key problems:\n%s", msgs);
  CHECK(strstr(msgs, "relu %1 (two): has 2 outputs, relu has 1") != NULL, "msg: %s", msgs);
  CHECK(strstr(msgs, "add #1 (upd): has 0 outputs, add has 1") != NULL, "msg: %s", msgs);
  CHECK(strstr(msgs, "add #1 (upd): attributes {k big}, expected {} (optionally followed by precision, then math)") !=
            NULL,
        "msg: %s", msgs);
  free(msgs);
  free(t);

  /* A real op without results: it verifies and prints without '='. */
  IrGraph *u = ir_graph_new(&a, "update");
  int64_t wd[2] = {10, 8};
  IrType wt = ir_type(IR_DT_F32, IR_LAYOUT_ROW, 2, wd), sc = ir_type(IR_DT_F32, IR_LAYOUT_ROW, 0, NULL);
  int uin[5] = {ir_value_add(u, IR_VAL_PARAM, wt, "fc.weight"), ir_value_add(u, IR_VAL_INPUT, wt, "grad"),
                ir_value_add(u, IR_VAL_STATE, wt, "fc.weight.momentum"), ir_value_add(u, IR_VAL_STATE, sc, "lr"),
                ir_value_add(u, IR_VAL_STATE, sc, "loss_scale")};
  u->opt_first = u->nnode;
  int upd = ir_node_add(u, IR_OP_SGD_UPDATE, "fc.weight", (SrcLoc){0}, uin, 5, NULL, 0);
  ir_attr_set_float(u, upd, "momentum", 0.9);
  ir_attr_set_int(u, upd, "nesterov", 0);
  ir_attr_set_float(u, upd, "weight_decay", 0.0001);
  char *tu = irtest_print(u, NULL);
  CHECK(strstr(tu, "\n  optimizer:\n  sgd_update(@fc.weight, %0, @fc.weight.momentum, @lr, @loss_scale) "
                   "{momentum=0.9 nesterov=0 weight_decay=0.0001}  # fc.weight\n}\n") != NULL,
        "sgd_update:\n%s", tu);
  CHECK(verify_quiet(u, &msgs) == 0, "sgd_update graph verifies:\n%s", msgs);
  free(msgs);
  check_round_trip(u, "sgd_update");
  free(tu);

  IrGraph *empty = ir_graph_new(&a, "empty");
  char *te = irtest_print(empty, NULL);
  CHECK(strcmp(te, "# netc IR\ngraph empty {\n}\n") == 0, "empty graph: %s", te);
  check_round_trip(empty, "empty graph");
  free(te);
  arena_free(&a);
}

/* The optimizer section: from the first node, from the middle, empty at
 * the end, and none; `optimizer:` read back where it stands, a comment
 * after it allowed. */
static void test_optimizer_section(void) {
  Arena a;
  arena_init(&a);
  IrGraph *g = irtest_small_net(&a);
  int loss = g->node[g->nnode - 1].out[0];
  IrType f32 = ir_type(IR_DT_F32, IR_LAYOUT_ROW, 0, NULL);
  g->opt_first = g->nnode;
  int check = ir_node_add(g, IR_OP_NONFINITE_CHECK, "check", (SrcLoc){"small.net", 14, 9}, &loss, 1, &f32, 1);
  int both[2] = {loss, g->node[check].out[0]};
  ir_node_add(g, IR_OP_ADD, "sum", (SrcLoc){0}, both, 2, &f32, 1);
  char *t = irtest_print(g, &(IrPrintOpts){.no_loc = 1});
  CHECK(strstr(t, "  # loss\n  optimizer:\n  %13 = nonfinite_check(%12) : f32[]  # check\n  %14 = add(%12, %13) : "
                  "f32[]  # sum\n  output %12, %11\n}\n") != NULL,
        "middle:\n%s", t);
  free(t);
  check_round_trip(g, "section from the middle");
  for (int first = -1; first <= g->nnode; first++) {
    char what[64];
    g->opt_first = first;
    snprintf(what, sizeof what, "section from node %d of %d", first, g->nnode);
    check_round_trip(g, what);
  }
  g->opt_first = g->nnode;
  t = irtest_print(g, NULL);
  CHECK(strstr(t, "  # sum\n  optimizer:\n  output %12, %11\n}\n") != NULL, "empty at the end:\n%s", t);
  free(t);

  static const char text[] = "graph hand {\n"
                             "  input %0 x : f32[4]\n"
                             "  %1 = relu(%0) : f32[4]\n"
                             "  optimizer:   # from here on\n"
                             "\n"
                             "  # the overflow flag\n"
                             "  %2 = nonfinite_check(%1) : f32[]\n"
                             "}\n";
  char *msgs = NULL;
  IrGraph *h = irtest_read(&a, text, &msgs);
  CHECK(h != NULL && h->opt_first == 1, "hand-written section reads at node 1:\n%s", msgs);
  free(msgs);
  IrGraph *none = irtest_read(&a, "graph none {\n  input %0 x : f32[4]\n  %1 = relu(%0) : f32[4]\n}\n", NULL);
  CHECK(none != NULL && none->opt_first == -1, "no line, no section");
  arena_free(&a);
}

/* Hand-written text: comments, blank lines, indentation, sparse labels. */
static void test_hand_written(void) {
  static const char text[] = "# a test written by hand\n"
                             "\n"
                             "graph hand {\n"
                             "   # the image\n"
                             "\tinput %7 image : f32[N,3,4,4] NCHW\n"
                             "  %3 = relu(%7)   # r1\n"
                             "\n"
                             "  %10 = relu(%3) {precision=bf16} : f32[N,3,4,4] NCHW  # @ x.net:1:2\n"
                             "  output %10\n"
                             "}\n"
                             "# trailing comment\n";
  Arena a;
  arena_init(&a);
  char *msgs = NULL;
  IrGraph *g = irtest_read(&a, text, &msgs);
  CHECK(g == NULL, "a result without a type is an error");
  CHECK(strstr(msgs, "t.ir:6:19: error: expected ':' before the result types, found '#'") != NULL, "msg: %s", msgs);
  CHECK(strstr(msgs, "used before") == NULL, "no follow-on errors for the failed line's result: %s", msgs);
  free(msgs);
  char fixed[sizeof text + 32];
  const char *cut = strstr(text, "%3 = relu(%7)");
  int pre = (int)(cut - text) + 13;
  snprintf(fixed, sizeof fixed, "%.*s : f32[N,3,4,4] NCHW%s", pre, text, text + pre);
  g = irtest_read(&a, fixed, &msgs);
  CHECK(g != NULL, "hand-written text reads:\n%s\n%s", msgs, fixed);
  free(msgs);
  if (g) {
    char *t = irtest_print(g, &(IrPrintOpts){0});
    CHECK(strcmp(t, "# netc IR\ngraph hand {\n  input %0 image : f32[N,3,4,4] NCHW\n"
                    "  %1 = relu(%0) : f32[N,3,4,4] NCHW  # r1\n"
                    "  %2 = relu(%1) {precision=bf16} : f32[N,3,4,4] NCHW  # @ x.net:1:2\n"
                    "  output %2\n}\n") == 0,
          "renumbered:\n%s", t);
    CHECK(verify_quiet(g, NULL) == 0, "hand graph verifies");
    free(t);
  }
  arena_free(&a);
}

int main(int argc, char **argv) {
  test_golden(argc > 1 ? argv[1] : ".");
  test_floats();
  test_strings();
  test_result_forms();
  test_optimizer_section();
  test_hand_written();
  return check_report();
}
