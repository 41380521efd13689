/* test_ir_verify.c - ir_verify on broken graphs: each case breaks the small
 * net in one way through the ir.c API and checks the exact number of
 * problems reported and the text of the message (with the node's id as the
 * dump prints it, its layer name, its location and the pass). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "irtest.h"

typedef void (*Breaker)(IrGraph *g);

static int node_named(const IrGraph *g, const char *name) {
  for (int i = 0; i < g->nnode; i++)
    if (g->node[i].name && strcmp(g->node[i].name, name) == 0) return i;
  return -1;
}

static int value_named(const IrGraph *g, const char *name) {
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].name && strcmp(g->val[v].name, name) == 0) return v;
  return -1;
}

static IrAttr *attr_of(IrGraph *g, const char *node, const char *key) {
  return (IrAttr *)ir_attr_find(&g->node[node_named(g, node)], key);
}

static void use_before_def(IrGraph *g) {
  g->node[node_named(g, "relu")].in[0] = g->node[node_named(g, "conv2")].out[0];
}
static void self_use(IrGraph *g) { g->node[node_named(g, "relu")].in[0] = g->node[node_named(g, "relu")].out[0]; }
static void bad_input_id(IrGraph *g) { g->node[node_named(g, "fc")].in[2] = 999; }
static void too_many_inputs(IrGraph *g) {
  IrNode *n = &g->node[node_named(g, "relu")];
  int *in = arena_alloc(g->arena, 2 * sizeof(int));
  in[0] = in[1] = n->in[0];
  n->in = in;
  n->nin = 2;
}
static void too_few_inputs(IrGraph *g) { g->node[node_named(g, "bn1")].nin = 3; }
static void wrong_attr_key(IrGraph *g) { attr_of(g, "conv1", "p")->key = "q"; }
static void missing_attr(IrGraph *g) { g->node[node_named(g, "conv1")].nattr = 4; }
static void extra_attr(IrGraph *g) { ir_attr_set_int(g, node_named(g, "maxpool"), "ceil", 1); }
static void attr_after_precision(IrGraph *g) { ir_attr_set_int(g, node_named(g, "relu"), "inplace", 1); }
static void precision_not_dtype(IrGraph *g) {
  IrAttr *a = attr_of(g, "relu", "precision");
  a->kind = IR_ATTR_INT;
}
static void y_dtype_of_floats(IrGraph *g) { ir_attr_set_dtype(g, node_named(g, "conv1"), "y_dtype", IR_DT_F16); }
static void wrong_output_type(IrGraph *g) {
  IrValue *v = &g->val[g->node[node_named(g, "conv1")].out[0]];
  v->type.dim[2] = v->type.dim[3] = 7;
}
static void wrong_output_layout(IrGraph *g) {
  IrValue *v = &g->val[g->node[node_named(g, "maxpool")].out[0]];
  v->type.layout = IR_LAYOUT_NHWC;
}
static void infer_fails(IrGraph *g) {
  IrAttr *k = attr_of(g, "conv1", "k");
  k->i[0] = k->i[1] = 5;
}
static void duplicate_param(IrGraph *g) {
  int64_t d = 8;
  ir_value_add(g, IR_VAL_STATE, ir_type(IR_DT_F32, IR_LAYOUT_ROW, 1, &d), "bn1.weight");
}
static void duplicate_input(IrGraph *g) {
  int64_t d = 8;
  ir_value_add(g, IR_VAL_INPUT, ir_type(IR_DT_F32, IR_LAYOUT_ROW, 1, &d), "image");
}
static void zero_dim(IrGraph *g) { g->val[value_named(g, "unused.weight")].type.dim[0] = 0; }
static void n_not_first(IrGraph *g) {
  IrType *t = &g->val[value_named(g, "fc.weight")].type;
  t->dim[1] = IR_DIM_N;
}
static void rank_too_big(IrGraph *g) { g->val[value_named(g, "unused.weight")].type.rank = 7; }
static void layout_rank(IrGraph *g) { g->val[value_named(g, "unused.weight")].type.layout = IR_LAYOUT_NCHW; }
static void bad_name(IrGraph *g) { g->val[value_named(g, "unused.weight")].name = "un used"; }
static void bad_output(IrGraph *g) { ir_output_add(g, 999); }
static void orphan_act(IrGraph *g) {
  int64_t d = 3;
  ir_value_add(g, IR_VAL_ACT, ir_type(IR_DT_F32, IR_LAYOUT_ROW, 1, &d), NULL);
}
static void wrong_def(IrGraph *g) { g->val[g->node[node_named(g, "flat")].out[0]].def = 0; }
static void output_is_param(IrGraph *g) {
  IrNode *n = &g->node[node_named(g, "flat")];
  int old = n->out[0];
  n->out[0] = value_named(g, "unused.weight");
  g->val[old].def = -1;
  for (int i = 0; i < g->nnode; i++)
    for (int k = 0; k < g->node[i].nin; k++)
      if (g->node[i].in[k] == old) g->node[i].in[k] = n->out[0];
}
static void unknown_op(IrGraph *g) { g->node[node_named(g, "relu")].op = (IrOp)77; }
static void bad_train_key(IrGraph *g) { g->train[1].key = g->train[0].key; }
static void bad_ints(IrGraph *g) { attr_of(g, "maxpool", "s")->n = 0; }

/* The optimizer section.  The small net has 11 nodes (conv1 #0 ... loss #10). */
static int scalar_node(IrGraph *g, IrOp op, const char *name, int a, int b) {
  IrType f32 = ir_type(IR_DT_F32, IR_LAYOUT_ROW, 0, NULL);
  int in[2] = {a, b};
  return ir_node_add(g, op, name, (SrcLoc){"small.net", 14, 9}, in, b < 0 ? 1 : 2, &f32, 1);
}
static int flag_of(IrGraph *g, const char *name, const char *of) {
  int n = scalar_node(g, IR_OP_NONFINITE_CHECK, name, g->node[node_named(g, of)].out[0], -1);
  return g->node[n].out[0];
}
static void optimizer_op_no_section(IrGraph *g) { flag_of(g, "check", "loss"); }
static void step_op_in_section(IrGraph *g) { g->opt_first = node_named(g, "fc"); }
static void optimizer_op_before(IrGraph *g) {
  flag_of(g, "check1", "loss");
  g->opt_first = g->nnode;
  flag_of(g, "check2", "fc");
}
static void section_past_end(IrGraph *g) { g->opt_first = g->nnode + 1; }
static void section_below_none(IrGraph *g) { g->opt_first = -2; }
static void add_reads_step(IrGraph *g) {
  g->opt_first = g->nnode;
  scalar_node(g, IR_OP_ADD, "any", flag_of(g, "check", "fc"), g->node[node_named(g, "loss")].out[0]);
}
static void reads_across(IrGraph *g) {
  g->opt_first = g->nnode;
  g->node[node_named(g, "fc")].in[0] = flag_of(g, "check", "loss");
}

static const struct Case {
  const char *name;
  Breaker brk;
  int count;       /* problems expected */
  const char *msg; /* one of them, in full */
} CASES[] = {
    {"use before def", use_before_def, 1,
     "small.net:5:9: error: after pass 'fuse': relu %4 (relu): input 0 %5 is used before its definition (node #3)"},
    {"self use", self_use, 1, "small.net:5:9: error: after pass 'fuse': relu %4 (relu): input 0 is its own output %4"},
    {"bad input id", bad_input_id, 1,
     "small.net:12:9: error: after pass 'fuse': linear %11 (fc): input 2 is 999, not a value"},
    {"too many inputs", too_many_inputs, 1,
     "small.net:5:9: error: after pass 'fuse': relu %4 (relu): takes 1 inputs, has 2"},
    {"too few inputs", too_few_inputs, 1,
     "small.net:4:9: error: after pass 'fuse': batchnorm %3 (bn1): takes 5 inputs, has 3"},
    {"wrong attr key", wrong_attr_key, 1,
     "small.net:3:9: error: after pass 'fuse': conv2d %2 (conv1): attributes {k s q d groups}, expected {k s p d "
     "groups} "
     "(optionally followed by precision, then math, then y_dtype [y_scale])"},
    {"missing attr", missing_attr, 1,
     "after pass 'fuse': conv2d %2 (conv1): attributes {k s p d}, expected {k s p d groups} (optionally followed by "
     "precision, then math, then y_dtype [y_scale])"},
    {"extra attr", extra_attr, 1,
     "after pass 'fuse': maxpool %7 (maxpool): attributes {k s p ceil}, expected {k s p} (optionally followed by "
     "precision, then math)"},
    {"attr after precision", attr_after_precision, 1,
     "relu %4 (relu): attributes {precision inplace}, expected {} (optionally followed by precision, then math)"},
    {"precision not dtype", precision_not_dtype, 1, "relu %4 (relu): attribute precision must be a dtype"},
    {"wrong output type", wrong_output_type, 1,
     "small.net:3:9: error: after pass 'fuse': conv2d %2 (conv1): output f32[N,8,7,7] NCHW, expected f32[N,8,8,8] "
     "NCHW"},
    {"wrong output layout", wrong_output_layout, 1,
     "maxpool %7 (maxpool): output f32[N,8,4,4] NHWC, expected f32[N,8,4,4] NCHW"},
    {"infer fails", infer_fails, 1,
     "small.net:3:9: error: after pass 'fuse': conv2d %2 (conv1): conv2d filter f32[8,3,3,3] KCRS does not match "
     "kernel 5x5"},
    {"y_dtype of floats", y_dtype_of_floats, 1,
     "small.net:3:9: error: after pass 'fuse': conv2d %2 (conv1): y_dtype is for a convolution of i8 or f8e4m3 "
     "values, not f32"},
    {"duplicate param", duplicate_param, 1,
     "netc: error: after pass 'fuse': state @bn1.weight: name 'bn1.weight' is already used by param @bn1.weight"},
    {"duplicate input", duplicate_input, 1, "input image: name 'image' is already used by input %0"},
    {"zero dim", zero_dim, 1,
     "param @unused.weight: f32[0] has dim[0] = 0 (dims are 1..2147483647; only dim[0] may be N)"},
    {"N not first", n_not_first, 1,
     "param @fc.weight: f32[10,N] has dim[1] = -1 (dims are 1..2147483647; only dim[0] may be N)"},
    {"rank too big", rank_too_big, 1, "param @unused.weight: rank 7 is not in 0..6"},
    {"layout rank", layout_rank, 1, "param @unused.weight: layout NCHW needs rank 4, type is f32[4] NCHW"},
    {"bad name", bad_name, 1, "param @un used: name 'un used' is not [A-Za-z0-9_.]+"},
    {"bad output", bad_output, 1, "graph: output 2 is 999, not a value"},
    {"orphan act", orphan_act, 1, "netc: error: after pass 'fuse': value %?23: no node defines it"},
    {"wrong def", wrong_def, 1, "flatten %10 (flat): output 0 %10 records node #0 as its producer"},
    {"output is param", output_is_param, 3,
     "flatten @unused.weight (flat): output 0 @unused.weight is a param, not an activation"},
    {"unknown op", unknown_op, 1, "small.net:5:9: error: after pass 'fuse': ? %4 (relu): unknown op 77"},
    {"duplicate train key", bad_train_key, 1, "train: key 'batch' appears twice"},
    {"ints without values", bad_ints, 2, "maxpool %7 (maxpool): attribute s has 0 integers (1..8)"},
    {"optimizer op, no section", optimizer_op_no_section, 1,
     "small.net:14:9: error: after pass 'fuse': nonfinite_check %13 (check): an optimizer op, but the graph has no "
     "optimizer section (no 'optimizer:' line)"},
    {"step op in the section", step_op_in_section, 2,
     "small.net:12:9: error: after pass 'fuse': linear %11 (fc): not an optimizer op, but in the optimizer section "
     "(from node #9)"},
    {"optimizer op before the section", optimizer_op_before, 1,
     "small.net:14:9: error: after pass 'fuse': nonfinite_check %13 (check1): an optimizer op before the optimizer "
     "section, which starts at node #12"},
    {"section past the end", section_past_end, 1,
     "netc: error: after pass 'fuse': graph: the optimizer section starts at node #12, not in 0..11 (or -1: none)"},
    {"section below -1", section_below_none, 1, "graph: the optimizer section starts at node #-2, not in 0..11"},
    {"add of a step value in the section", add_reads_step, 1,
     "small.net:14:9: error: after pass 'fuse': add %14 (any): in the optimizer section, input 1 %12 is not a result "
     "of the section (from node #11)"},
    {"step node reads the section", reads_across, 1,
     "small.net:12:9: error: after pass 'fuse': linear %11 (fc): input 0 %13 is made by the optimizer section (node "
     "#11), which runs after this node"},
};

static void run_case(const struct Case *c) {
  Arena a;
  arena_init(&a);
  IrGraph *g = irtest_small_net(&a);
  c->brk(g);
  IrtestDiag cap;
  irtest_diag_begin(&cap);
  int n = ir_verify(g, &cap.d, "fuse");
  char *msgs = irtest_diag_end(&cap);
  CHECK(n == c->count, "%s: %d problems, expected %d:\n%s", c->name, n, c->count, msgs);
  CHECK(cap.d.nerrors == n, "%s: returned count %d equals errors reported %d", c->name, n, cap.d.nerrors);
  CHECK(strstr(msgs, c->msg) != NULL, "%s: message missing: %s\ngot:\n%s", c->name, c->msg, msgs);
  /* A broken graph still prints. */
  free(irtest_print(g, NULL));
  free(msgs);
  arena_free(&a);
}

/* Without a pass name there is no "after pass" prefix; a clean graph
 * reports nothing. */
static void test_plain(void) {
  Arena a;
  arena_init(&a);
  IrGraph *g = irtest_small_net(&a);
  IrtestDiag cap;
  irtest_diag_begin(&cap);
  CHECK(ir_verify(g, &cap.d, "fuse") == 0, "clean graph");
  wrong_output_type(g);
  CHECK(ir_verify(g, &cap.d, NULL) == 1, "one problem");
  char *msgs = irtest_diag_end(&cap);
  CHECK(strncmp(msgs, "small.net:3:9: error: conv2d %2 (conv1): output f32[N,8,7,7] NCHW, expected", 75) == 0,
        "got: %s", msgs);
  free(msgs);
  arena_free(&a);
}

/* Well-formed sections: checks and their flags' sum, and an empty one at
 * the end; the printer marks where each starts. */
static void test_section_ok(void) {
  Arena a;
  arena_init(&a);
  IrGraph *g = irtest_small_net(&a);
  g->opt_first = g->nnode;
  IrtestDiag cap;
  irtest_diag_begin(&cap);
  CHECK(ir_verify(g, &cap.d, NULL) == 0, "an empty section");
  char *t = irtest_print(g, NULL);
  CHECK(strstr(t, "# loss @ small.net:13:9\n  optimizer:\n  output %12, %11\n}\n") != NULL, "empty section:\n%s", t);
  free(t);
  int f1 = flag_of(g, "check1", "loss"), f2 = flag_of(g, "check2", "fc");
  scalar_node(g, IR_OP_ADD, "any", f1, f2);
  CHECK(ir_verify(g, &cap.d, NULL) == 0, "checks and their sum");
  t = irtest_print(g, NULL);
  CHECK(strstr(t, "# loss @ small.net:13:9\n  optimizer:\n  %13 = nonfinite_check(%12)") != NULL, "section:\n%s", t);
  free(t);
  char *msgs = irtest_diag_end(&cap);
  CHECK(cap.d.nerrors == 0, "no errors:\n%s", msgs);
  free(msgs);
  arena_free(&a);
}

/* Many problems are all counted even past what the Diag prints. */
static void test_many(void) {
  Arena a;
  arena_init(&a);
  IrGraph *g = irtest_small_net(&a);
  for (int i = 0; i < 30; i++) ir_output_add(g, -1 - i);
  IrtestDiag cap;
  irtest_diag_begin(&cap);
  CHECK(ir_verify(g, &cap.d, NULL) == 30, "30 problems");
  free(irtest_diag_end(&cap));
  arena_free(&a);
}

int main(void) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) run_case(&CASES[i]);
  test_plain();
  test_section_ok();
  test_many();
  return check_report();
}
