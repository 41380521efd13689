/* irtest.c - helpers of the IR tests (see irtest.h). */
#include "irtest.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static SrcLoc at(int line, int col) { return (SrcLoc){"small.net", line, col}; }

static IrType t4(IrDtype dt, IrLayout l, int64_t a, int64_t b, int64_t c, int64_t d) {
  int64_t dim[4] = {a, b, c, d};
  return ir_type(dt, l, 4, dim);
}

static IrType t1(IrDtype dt, int64_t a) { return ir_type(dt, IR_LAYOUT_ROW, 1, &a); }

static IrType t2(IrDtype dt, int64_t a, int64_t b) {
  int64_t dim[2] = {a, b};
  return ir_type(dt, IR_LAYOUT_ROW, 2, dim);
}

static void spatial(IrGraph *g, int n, const char *keys, int64_t k, int64_t s, int64_t p) {
  int64_t v[3][2] = {{k, k}, {s, s}, {p, p}};
  const char *names[3] = {"k", "s", "p"};
  for (int i = 0; i < 3 && keys[i]; i++) ir_attr_set_ints(g, n, names[i], v[i], 2);
}

static void conv_attrs(IrGraph *g, int n, int64_t k, int64_t s, int64_t p) {
  int64_t d[2] = {1, 1};
  spatial(g, n, "ksp", k, s, p);
  ir_attr_set_ints(g, n, "d", d, 2);
  ir_attr_set_int(g, n, "groups", 1);
}

static int out0(const IrGraph *g, int n) { return g->node[n].out[0]; }

IrGraph *irtest_small_net(Arena *a) {
  IrGraph *g = ir_graph_new(a, "small");
  const IrDtype F = IR_DT_F32;
  /* Params before inputs, the label input last: ids differ from print order. */
  int fc_w = ir_value_add(g, IR_VAL_PARAM, t2(F, 10, 8), "fc.weight");
  int unused = ir_value_add(g, IR_VAL_PARAM, t1(F, 4), "unused.weight");
  int image = ir_value_add(g, IR_VAL_INPUT, t4(F, IR_LAYOUT_NCHW, IR_DIM_N, 3, 8, 8), "image");
  int c1_w = ir_value_add(g, IR_VAL_PARAM, t4(F, IR_LAYOUT_KCRS, 8, 3, 3, 3), "conv1.weight");
  int bn_w = ir_value_add(g, IR_VAL_PARAM, t1(F, 8), "bn1.weight");
  int bn_b = ir_value_add(g, IR_VAL_PARAM, t1(F, 8), "bn1.bias");
  int bn_m = ir_value_add(g, IR_VAL_STATE, t1(F, 8), "bn1.running_mean");
  int bn_v = ir_value_add(g, IR_VAL_STATE, t1(F, 8), "bn1.running_var");
  int c2_w = ir_value_add(g, IR_VAL_PARAM, t4(F, IR_LAYOUT_KCRS, 8, 8, 3, 3), "conv2.weight");
  int c2_b = ir_value_add(g, IR_VAL_PARAM, t1(F, 8), "conv2.bias");
  int fc_b = ir_value_add(g, IR_VAL_PARAM, t1(F, 10), "fc.bias");
  int label = ir_value_add(g, IR_VAL_INPUT, t1(IR_DT_I32, IR_DIM_N), "label");
  (void)unused;

  IrType act8 = t4(F, IR_LAYOUT_NCHW, IR_DIM_N, 8, 8, 8);
  int in1[] = {image, c1_w};
  int conv1 = ir_node_add(g, IR_OP_CONV2D, "conv1", at(3, 9), in1, 2, &act8, 1);
  conv_attrs(g, conv1, 3, 1, 1);
  int in2[] = {out0(g, conv1), bn_w, bn_b, bn_m, bn_v};
  int bn1 = ir_node_add(g, IR_OP_BATCHNORM, "bn1", at(4, 9), in2, 5, &act8, 1);
  ir_attr_set_float(g, bn1, "eps", 1e-05);
  ir_attr_set_float(g, bn1, "momentum", 0.1);
  int in3[] = {out0(g, bn1)};
  int relu = ir_node_add(g, IR_OP_RELU, "relu", at(5, 9), in3, 1, &act8, 1);
  ir_attr_set_dtype(g, relu, "precision", IR_DT_F16);
  int in4[] = {out0(g, relu), c2_w, c2_b};
  int conv2 = ir_node_add(g, IR_OP_CONV2D, "conv2", at(6, 9), in4, 3, &act8, 1);
  conv_attrs(g, conv2, 3, 1, 1);
  int in5[] = {out0(g, relu), out0(g, conv2)};
  int add = ir_node_add(g, IR_OP_ADD, NULL, at(7, 9), in5, 2, &act8, 1); /* no name */
  IrType act4 = t4(F, IR_LAYOUT_NCHW, IR_DIM_N, 8, 4, 4);
  int in6[] = {out0(g, add)};
  int mp = ir_node_add(g, IR_OP_MAXPOOL, "maxpool", at(8, 9), in6, 1, &act4, 1);
  spatial(g, mp, "ksp", 2, 2, 0);
  IrType act2 = t4(F, IR_LAYOUT_NCHW, IR_DIM_N, 8, 2, 2);
  int in7[] = {out0(g, mp)};
  int ap = ir_node_add(g, IR_OP_AVGPOOL, "avgpool", (SrcLoc){0}, in7, 1, &act2, 1); /* no loc */
  spatial(g, ap, "ksp", 3, 2, 1);
  ir_attr_set_int(g, ap, "include_pad", 0);
  IrType act1 = t4(F, IR_LAYOUT_NCHW, IR_DIM_N, 8, 1, 1);
  int in8[] = {out0(g, ap)};
  int gap = ir_node_add(g, IR_OP_GLOBAL_AVGPOOL, NULL, (SrcLoc){0}, in8, 1, &act1, 1); /* neither */
  IrType flat_t = t2(F, IR_DIM_N, 8);
  int in9[] = {out0(g, gap)};
  int flat = ir_node_add(g, IR_OP_FLATTEN, "flat", at(11, 9), in9, 1, &flat_t, 1);
  IrType logits_t = t2(F, IR_DIM_N, 10);
  int in10[] = {out0(g, flat), fc_w, fc_b};
  int fc = ir_node_add(g, IR_OP_LINEAR, "fc", at(12, 9), in10, 3, &logits_t, 1);
  IrType loss_t = ir_type(F, IR_LAYOUT_ROW, 0, NULL);
  int in11[] = {out0(g, fc), label};
  int loss = ir_node_add(g, IR_OP_SOFTMAX_CE, "loss", at(13, 9), in11, 2, &loss_t, 1);
  ir_attr_set_float(g, loss, "smoothing", 0.1);
  ir_output_add(g, out0(g, loss));
  ir_output_add(g, out0(g, fc));

  IrAttr tr[] = {
      {.key = "batch", .kind = IR_ATTR_INT, .n = 1, .i = {32}},
      {.key = "epochs", .kind = IR_ATTR_INT, .n = 1, .i = {2}},
      {.key = "optimizer", .kind = IR_ATTR_STR, .s = "sgd"},
      {.key = "lr", .kind = IR_ATTR_FLOAT, .f = 0.1},
      {.key = "momentum", .kind = IR_ATTR_FLOAT, .f = 0.9},
      {.key = "nesterov", .kind = IR_ATTR_INT, .n = 1, .i = {0}},
      {.key = "weight_decay", .kind = IR_ATTR_FLOAT, .f = 0.0001},
      {.key = "loss_scale", .kind = IR_ATTR_FLOAT, .f = 65536.0},
      {.key = "compute", .kind = IR_ATTR_DTYPE, .n = 1, .i = {IR_DT_BF16}},
      {.key = "milestones", .kind = IR_ATTR_INTS, .n = 3, .i = {30, 60, 80}},
      {.key = "warmup", .kind = IR_ATTR_INTS, .n = 1, .i = {5}},
  };
  for (size_t i = 0; i < sizeof tr / sizeof tr[0]; i++) ir_train_set(g, &tr[i]);
  return a->oom ? NULL : g;
}

char *irtest_print(const IrGraph *g, const IrPrintOpts *o) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  ir_print(f, g, o);
  fclose(f);
  return buf;
}

void irtest_diag_begin(IrtestDiag *c) {
  c->buf = NULL;
  c->len = 0;
  diag_init(&c->d, open_memstream(&c->buf, &c->len));
}

char *irtest_diag_end(IrtestDiag *c) {
  if (c->d.out) fclose(c->d.out);
  c->d.out = NULL;
  return c->buf;
}

IrGraph *irtest_read(Arena *a, const char *text, char **msgs) {
  IrtestDiag c;
  irtest_diag_begin(&c);
  IrGraph *g = ir_read(a, &c.d, "t.ir", text, strlen(text));
  char *m = irtest_diag_end(&c);
  if (msgs)
    *msgs = m;
  else
    free(m);
  return g;
}

static int differ(char *why, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, len, fmt, ap);
  va_end(ap);
  return 0;
}

static int str_eq(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

static int attr_eq(const IrAttr *a, const IrAttr *b) {
  if (!str_eq(a->key, b->key) || a->kind != b->kind) return 0;
  switch (a->kind) {
  case IR_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0 || (isnan(a->f) && isnan(b->f));
  case IR_ATTR_STR: return str_eq(a->s, b->s);
  default: return a->n == b->n && memcmp(a->i, b->i, sizeof(int64_t) * (size_t)(a->n > 0 ? a->n : 0)) == 0;
  }
}

static int value_eq(const IrValue *a, const IrValue *b) {
  return a->kind == b->kind && ir_type_equal(&a->type, &b->type) && str_eq(a->name, b->name);
}

static int find_named(const IrGraph *g, const IrValue *like) {
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].kind == like->kind && str_eq(g->val[v].name, like->name)) return v;
  return -1;
}

int irtest_equal(const IrGraph *a, const IrGraph *b, char *why, size_t len) {
  if (!str_eq(a->name, b->name)) return differ(why, len, "graph name %s vs %s", a->name, b->name);
  if (a->nval != b->nval) return differ(why, len, "%d values vs %d", a->nval, b->nval);
  if (a->nnode != b->nnode) return differ(why, len, "%d nodes vs %d", a->nnode, b->nnode);
  if (a->noutput != b->noutput) return differ(why, len, "%d outputs vs %d", a->noutput, b->noutput);
  if (a->ntrain != b->ntrain) return differ(why, len, "%d train keys vs %d", a->ntrain, b->ntrain);
  if (a->opt_first != b->opt_first)
    return differ(why, len, "optimizer section at node %d vs %d", a->opt_first, b->opt_first);
  for (int i = 0; i < a->ntrain; i++)
    if (!attr_eq(&a->train[i], &b->train[i])) return differ(why, len, "train key %d (%s)", i, a->train[i].key);
  int *map = malloc(sizeof(int) * ((size_t)a->nval + 1));
  int ok = 1;
  for (int v = 0; v < a->nval; v++) map[v] = a->val[v].kind == IR_VAL_ACT ? -1 : find_named(b, &a->val[v]);
  for (int i = 0; i < a->nnode && ok; i++)
    for (int k = 0; k < a->node[i].nout && k < b->node[i].nout; k++) map[a->node[i].out[k]] = b->node[i].out[k];
  for (int v = 0; v < a->nval && ok; v++)
    if (map[v] < 0 || !value_eq(&a->val[v], &b->val[map[v]]))
      ok = differ(why, len, "value %d (%s) has no equal counterpart", v, a->val[v].name ? a->val[v].name : "act");
  for (int i = 0; i < a->nnode && ok; i++) {
    const IrNode *x = &a->node[i], *y = &b->node[i];
    if (x->op != y->op || !str_eq(x->name, y->name) || x->nin != y->nin || x->nout != y->nout || x->nattr != y->nattr)
      ok = differ(why, len, "node %d: op/name/arity differ", i);
    else if (!str_eq(x->loc.file, y->loc.file) || x->loc.line != y->loc.line || x->loc.col != y->loc.col)
      ok = differ(why, len, "node %d: loc differs", i);
    for (int k = 0; ok && k < x->nin; k++)
      if (map[x->in[k]] != y->in[k]) ok = differ(why, len, "node %d input %d differs", i, k);
    for (int k = 0; ok && k < x->nattr; k++)
      if (!attr_eq(&x->attr[k], &y->attr[k])) ok = differ(why, len, "node %d attribute %d differs", i, k);
  }
  for (int i = 0; i < a->noutput && ok; i++)
    if (map[a->output[i]] != b->output[i]) ok = differ(why, len, "graph output %d differs", i);
  free(map);
  return ok;
}
