/* test_autodiff.c - structural checks of the autodiff pass.
 *
 *   test_autodiff MODELS_DIR
 *
 * ResNet-50's training graph: the count of every backward op, one
 * sgd_update with its own momentum buffer per parameter, names and source
 * locations taken from the forward layer, a graph that verifies and reads
 * back from its dump; the same compile twice prints the same; inference
 * mode; and the errors for an op without a gradient (a hand-built graph)
 * and for a graph without a loss. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"

/* Parses, lowers and runs the pipeline on models/NAME.net; NULL on failure.
 * The source stays alive in *src (locations point into the path only). */
static IrGraph *compile(Arena *a, const char *dir, const char *name, int inference) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.net", dir, name);
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .out = stdout, .inference = inference};
  cx.disabled = pipeline_mask_after("autodiff"); /* later passes rewrite what this test counts */
  return compile_file(a, &d, path, &cx);
}

static int count_op(const IrGraph *g, IrOp op) {
  int n = 0;
  for (int i = 0; i < g->nnode; i++) n += g->node[i].op == op;
  return n;
}

static int count_kind(const IrGraph *g, IrValueKind k) {
  int n = 0;
  for (int v = 0; v < g->nval; v++) n += g->val[v].kind == k;
  return n;
}

static int input_named(const IrGraph *g, const char *name) {
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_INPUT && !strcmp(g->val[v].name, name)) return v;
  return -1;
}

static char *print_str(const IrGraph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  IrPrintOpts o = {.no_loc = 0, .pass = "autodiff"};
  ir_print(f, g, &o);
  fclose(f);
  return buf;
}

/* The forward node whose layer name is `name` without its last suffix. */
static const IrNode *forward_of(const IrGraph *g, const char *name, int nfwd) {
  const char *dot = strrchr(name, '.');
  if (!dot) return NULL;
  size_t len = (size_t)(dot - name);
  for (int i = 0; i < nfwd; i++)
    if (g->node[i].name && strlen(g->node[i].name) == len && !strncmp(g->node[i].name, name, len)) return &g->node[i];
  return NULL;
}

static void check_resnet50(const char *models) {
  Arena a;
  arena_init(&a);
  IrGraph *g = compile(&a, models, "resnet50", 0);
  CHECK(g != NULL, "resnet50 compiles for training");
  if (!g) {
    arena_free(&a);
    return;
  }
  Diag d;
  diag_init(&d, stderr);
  CHECK(ir_verify(g, &d, "autodiff") == 0, "resnet50 training graph verifies");
  CHECK(count_op(g, IR_OP_CONV2D) == 53, "conv2d %d", count_op(g, IR_OP_CONV2D));
  CHECK(count_op(g, IR_OP_CONV2D_BWD_WEIGHT) == 53, "conv2d_bwd_weight %d", count_op(g, IR_OP_CONV2D_BWD_WEIGHT));
  CHECK(count_op(g, IR_OP_CONV2D_BWD_DATA) == 52, "conv2d_bwd_data %d", count_op(g, IR_OP_CONV2D_BWD_DATA));
  CHECK(count_op(g, IR_OP_BATCHNORM) == 0, "no inference batchnorm left: %d", count_op(g, IR_OP_BATCHNORM));
  CHECK(count_op(g, IR_OP_BATCHNORM_TRAIN) == 53, "batchnorm_train %d", count_op(g, IR_OP_BATCHNORM_TRAIN));
  CHECK(count_op(g, IR_OP_BATCHNORM_BWD) == 53, "batchnorm_bwd %d", count_op(g, IR_OP_BATCHNORM_BWD));
  CHECK(count_op(g, IR_OP_RELU_BWD) == 49, "relu_bwd %d", count_op(g, IR_OP_RELU_BWD));
  CHECK(count_op(g, IR_OP_MAXPOOL_BWD) == 1, "maxpool_bwd %d", count_op(g, IR_OP_MAXPOOL_BWD));
  CHECK(count_op(g, IR_OP_GLOBAL_AVGPOOL_BWD) == 1, "global_avgpool_bwd");
  CHECK(count_op(g, IR_OP_UNFLATTEN) == 1, "unflatten");
  CHECK(count_op(g, IR_OP_LINEAR_BWD_WEIGHT) == 1 && count_op(g, IR_OP_LINEAR_BWD_DATA) == 1, "linear bwd");
  CHECK(count_op(g, IR_OP_CHANNEL_SUM) == 1, "channel_sum (fc.bias) %d", count_op(g, IR_OP_CHANNEL_SUM));
  CHECK(count_op(g, IR_OP_SOFTMAX_CE_BWD) == 1, "softmax_cross_entropy_bwd");
  /* 16 residual adds forward; each block input feeds two branches: 16 sums. */
  CHECK(count_op(g, IR_OP_ADD) == 32, "add (16 forward + 16 grad_sum) %d", count_op(g, IR_OP_ADD));
  int nparam = count_kind(g, IR_VAL_PARAM);
  CHECK(nparam == 161, "params %d", nparam);
  CHECK(count_op(g, IR_OP_SGD_UPDATE) == nparam, "sgd_update %d", count_op(g, IR_OP_SGD_UPDATE));
  CHECK(count_kind(g, IR_VAL_STATE) == 2 * 53 + nparam, "state: running stats + momentum buffers %d",
        count_kind(g, IR_VAL_STATE));
  int lr = input_named(g, "lr"), scale = input_named(g, "loss_scale");
  CHECK(lr >= 0 && scale >= 0 && count_kind(g, IR_VAL_INPUT) == 4, "inputs image, label, lr, loss_scale");
  for (int v = 0; v < g->nval; v++) {
    if (g->val[v].kind != IR_VAL_PARAM) continue;
    int updates = 0;
    for (int i = 0; i < g->nnode; i++) {
      const IrNode *n = &g->node[i];
      if (n->op != IR_OP_SGD_UPDATE || n->in[0] != v) continue;
      updates++;
      const IrValue *buf = &g->val[n->in[2]];
      char want[512];
      snprintf(want, sizeof want, "%s.momentum_buffer", g->val[v].name);
      CHECK(buf->kind == IR_VAL_STATE && !strcmp(buf->name, want) && ir_type_equal(&buf->type, &g->val[v].type),
            "%s: momentum buffer %s", g->val[v].name, buf->name ? buf->name : "?");
      CHECK(n->in[3] == lr && n->in[4] == scale, "%s: sgd_update reads lr and loss_scale", g->val[v].name);
      snprintf(want, sizeof want, "%s.sgd", g->val[v].name);
      CHECK(n->name && !strcmp(n->name, want), "sgd node name %s", n->name ? n->name : "?");
      CHECK(ir_attr_float(n, "momentum", -1) == 0.9 && ir_attr_int(n, "nesterov", -1) == 0 &&
                ir_attr_float(n, "weight_decay", -1) == 0.0001,
            "%s: optimizer settings from the train section", g->val[v].name);
    }
    CHECK(updates == 1, "%s has %d sgd_update nodes", g->val[v].name, updates);
  }
  /* Outputs [loss, logits]; forward nodes first, the loss the last of them. */
  CHECK(g->noutput == 2, "two outputs");
  int loss = g->noutput == 2 ? g->val[g->output[0]].def : -1;
  CHECK(loss >= 0 && g->node[loss].op == IR_OP_SOFTMAX_CE && g->node[loss].in[0] == g->output[1],
        "outputs are [loss, logits]");
  for (int i = 0; i < g->nnode && loss >= 0; i++) {
    const IrNode *n = &g->node[i];
    int training_form = n->op >= IR_OP_BATCHNORM_TRAIN && n->op != IR_OP_BATCHNORM_TRAIN;
    if (i <= loss) {
      CHECK(!training_form, "node %d (%s) before the loss is a forward op", i, n->name);
      continue;
    }
    if (n->op == IR_OP_SGD_UPDATE) continue;
    CHECK(training_form || n->op == IR_OP_ADD, "node %d (%s) after the loss is a backward op", i, n->name);
    const IrNode *f = n->name ? forward_of(g, n->name, loss + 1) : NULL;
    CHECK(f != NULL, "backward node %s names a forward layer", n->name ? n->name : "(null)");
    if (f)
      CHECK(f->loc.file && n->loc.file && !strcmp(f->loc.file, n->loc.file) && f->loc.line == n->loc.line &&
                f->loc.col == n->loc.col,
            "%s carries the location of %s", n->name, f->name);
  }
  for (int i = 0; i < g->nnode; i++)
    CHECK(!(g->node[i].name && !strcmp(g->node[i].name, "conv1.dgrad")), "no data gradient for the image");
  /* The dump reads back and verifies: a later pass's test can start from it. */
  char *text = print_str(g);
  CHECK(text != NULL, "print");
  if (text) {
    Diag rd;
    diag_init(&rd, stderr);
    IrGraph *back = ir_read(&a, &rd, "resnet50.autodiff.ir", text, strlen(text));
    CHECK(back && rd.nerrors == 0, "the training dump reads back");
    if (back) {
      CHECK(ir_verify(back, &rd, "read") == 0, "the read-back graph verifies");
      char *again = print_str(back);
      CHECK(again && !strcmp(again, text), "print(read(print(g))) == print(g)");
      free(again);
    }
  }
  /* The same compile twice: the same text. */
  Arena a2;
  arena_init(&a2);
  IrGraph *g2 = compile(&a2, models, "resnet50", 0);
  char *text2 = g2 ? print_str(g2) : NULL;
  CHECK(text && text2 && !strcmp(text, text2), "deterministic output");
  free(text);
  free(text2);
  arena_free(&a2);
  arena_free(&a);
}

static void check_inference(const char *models) {
  static const char *const names[] = {"resnet50", "smallcnn", "mlp"};
  static const int bns[] = {53, 2, 0};
  for (int m = 0; m < 3; m++) {
    Arena a;
    arena_init(&a);
    IrGraph *g = compile(&a, models, names[m], 1);
    CHECK(g != NULL, "%s compiles for inference", names[m]);
    if (g) {
      int training = 0;
      for (int i = 0; i < g->nnode; i++) training += g->node[i].op >= IR_OP_BATCHNORM_TRAIN;
      CHECK(training == 0, "%s: %d training ops in an inference graph", names[m], training);
      CHECK(count_op(g, IR_OP_BATCHNORM) == bns[m], "%s: batchnorm kept", names[m]);
      CHECK(count_op(g, IR_OP_SOFTMAX_CE) == 0, "%s: loss removed", names[m]);
      CHECK(g->noutput == 1 && g->val[g->output[0]].def >= 0 && g->node[g->val[g->output[0]].def].op == IR_OP_LINEAR,
            "%s: the only output is the logits", names[m]);
      CHECK(input_named(g, "lr") < 0 && input_named(g, "loss_scale") < 0, "%s: no training inputs", names[m]);
      CHECK(count_kind(g, IR_VAL_STATE) == 2 * bns[m], "%s: no momentum buffers", names[m]);
    }
    arena_free(&a);
  }
}

/* Runs pass_autodiff on g; returns the result and the diagnostics as text. */
static IrGraph *run_pass(IrGraph *g, int inference, char **msgs) {
  size_t len = 0;
  FILE *f = open_memstream(msgs, &len);
  Diag d;
  diag_init(&d, f);
  PassCtx cx = {.d = &d, .out = stdout, .inference = inference};
  IrGraph *out = pass_autodiff(g, &cx);
  fclose(f);
  return out;
}

/* linear -> unflatten -> flatten -> linear -> loss: unflatten has no rule. */
static IrGraph *hand_net(Arena *a, int with_loss) {
  IrGraph *g = ir_graph_new(a, "hand");
  SrcLoc loc = {"hand.net", 7, 3};
  int64_t xd[2] = {IR_DIM_N, 8}, ld[1] = {IR_DIM_N}, w1d[2] = {16, 8}, w2d[2] = {3, 16};
  int x = ir_value_add(g, IR_VAL_INPUT, ir_type(IR_DT_F32, IR_LAYOUT_ROW, 2, xd), "x");
  int y = ir_value_add(g, IR_VAL_INPUT, ir_type(IR_DT_I32, IR_LAYOUT_ROW, 1, ld), "label");
  int w1 = ir_value_add(g, IR_VAL_PARAM, ir_type(IR_DT_F32, IR_LAYOUT_ROW, 2, w1d), "fc1.weight");
  int w2 = ir_value_add(g, IR_VAL_PARAM, ir_type(IR_DT_F32, IR_LAYOUT_ROW, 2, w2d), "fc2.weight");
  int64_t h1[2] = {IR_DIM_N, 16}, u[4] = {IR_DIM_N, 16, 1, 1}, lo[2] = {IR_DIM_N, 3};
  IrType t1 = ir_type(IR_DT_F32, IR_LAYOUT_ROW, 2, h1), tu = ir_type(IR_DT_F32, IR_LAYOUT_NCHW, 4, u);
  IrType tl = ir_type(IR_DT_F32, IR_LAYOUT_ROW, 2, lo), ts = ir_type(IR_DT_F32, IR_LAYOUT_ROW, 0, NULL);
  int n1 = ir_node_add(g, IR_OP_LINEAR, "fc1", (SrcLoc){"hand.net", 5, 3}, (int[]){x, w1}, 2, &t1, 1);
  int n2 = ir_node_add(g, IR_OP_UNFLATTEN, "unflat", loc, (int[]){g->node[n1].out[0]}, 1, &tu, 1);
  int64_t shape[3] = {16, 1, 1};
  ir_attr_set_ints(g, n2, "shape", shape, 3);
  int n3 = ir_node_add(g, IR_OP_FLATTEN, "flat", (SrcLoc){"hand.net", 8, 3}, (int[]){g->node[n2].out[0]}, 1, &t1, 1);
  int n4 = ir_node_add(g, IR_OP_LINEAR, "fc2", (SrcLoc){"hand.net", 9, 3}, (int[]){g->node[n3].out[0], w2}, 2, &tl, 1);
  int logits = g->node[n4].out[0];
  int n5 = ir_node_add(g, IR_OP_SOFTMAX_CE, "loss", (SrcLoc){"hand.net", 10, 3}, (int[]){logits, y}, 2, &ts, 1);
  ir_attr_set_float(g, n5, "smoothing", 0.0);
  if (with_loss) ir_output_add(g, g->node[n5].out[0]);
  ir_output_add(g, logits);
  return g;
}

static void check_errors(void) {
  Arena a;
  arena_init(&a);
  IrGraph *g = hand_net(&a, 1);
  Diag d;
  diag_init(&d, stderr);
  CHECK(ir_verify(g, &d, NULL) == 0, "the hand-built graph is valid");
  char *msgs = NULL;
  IrGraph *out = run_pass(g, 0, &msgs);
  CHECK(out == NULL, "an op without a gradient fails the pass");
  CHECK(msgs && strstr(msgs, "hand.net:7:3: error: autodiff: no gradient for op unflatten"),
        "message with the node's location: %s", msgs ? msgs : "(none)");
  free(msgs);
  /* The same graph for inference needs no gradient: it passes. */
  out = run_pass(g, 1, &msgs);
  CHECK(out && out->noutput == 1 && ir_verify(out, &d, "autodiff") == 0, "inference needs no rule: %s", msgs);
  free(msgs);
  /* Outputs not [loss, logits]. */
  out = run_pass(hand_net(&a, 0), 0, &msgs);
  CHECK(out == NULL && msgs && strstr(msgs, "autodiff: expects the outputs [loss, logits]"),
        "graph without a loss output: %s", msgs ? msgs : "(none)");
  free(msgs);
  arena_free(&a);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_autodiff MODELS_DIR\n");
    return 2;
  }
  check_resnet50(argv[1]);
  check_inference(argv[1]);
  check_errors();
  return check_report();
}
