/* test_fuse.c - structural checks of the fuse pass.
 *
 *   test_fuse MODELS_DIR
 *
 * ResNet-50 after fuse (layout, precision, memplan off), training and
 * inference: the count of every fused and remaining op as the rules predict
 * them, names, attributes and locations of the fused nodes, a graph that
 * verifies and reads back from its dump.  Then hand-written graphs where a
 * pattern must not fire: an intermediate that is a graph output, a batch
 * norm whose scale is made after the conv, a conv with a bias, a later node
 * asking for another precision, a conv output read by something other than
 * its batch norm's backward; and a control case that does fuse.  odd.net's
 * 10-channel batch norm keeps its backward apart from the data gradient. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"

static IrGraph *compile(Arena *a, const char *dir, const char *name, int inference) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.net", dir, name);
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .out = stdout, .inference = inference};
  cx.disabled = pipeline_mask_after("fuse"); /* later passes rewrite what this test compares */
  return compile_file(a, &d, path, &cx);
}

static int count_op(const IrGraph *g, IrOp op) {
  int n = 0;
  for (int i = 0; i < g->nnode; i++) n += g->node[i].op == op;
  return n;
}

static int count_relu_attr(const IrGraph *g, IrOp op, int relu) {
  int n = 0;
  for (int i = 0; i < g->nnode; i++) n += g->node[i].op == op && ir_attr_int(&g->node[i], "relu", -1) == relu;
  return n;
}

static int count_residual(const IrGraph *g, IrOp op) {
  int n = 0;
  for (int i = 0; i < g->nnode; i++) n += g->node[i].op == op && ir_conv_residual(g, &g->node[i]) >= 0;
  return n;
}

static const IrNode *find_node(const IrGraph *g, const char *name) {
  for (int i = 0; i < g->nnode; i++)
    if (g->node[i].name && strcmp(g->node[i].name, name) == 0) return &g->node[i];
  return NULL;
}

/* The dump reads back and prints the same bytes. */
static void check_reads_back(const IrGraph *g, const char *what) {
  char *text = NULL, *again = NULL;
  size_t len = 0, len2 = 0;
  FILE *f = open_memstream(&text, &len);
  IrPrintOpts o = {.pass = "fuse"};
  ir_print(f, g, &o);
  fclose(f);
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, stderr);
  IrGraph *r = ir_read(&a, &d, "dump.ir", text, len);
  CHECK(r && !ir_verify(r, &d, "read"), "%s: the dump reads back and verifies", what);
  if (r) {
    f = open_memstream(&again, &len2);
    ir_print(f, r, &o);
    fclose(f);
    CHECK(len == len2 && memcmp(text, again, len) == 0, "%s: the dump prints the same after reading", what);
  }
  free(text);
  free(again);
  arena_free(&a);
}

/* ResNet-50 has 53 convs, none with a bias, each followed by a batch norm;
 * 16 bottlenecks, each relu(add(bn3, shortcut)).  So: every conv fuses with
 * its batch norm; the relu follows bn1 and bn2 of each block and the stem's
 * bn1 (33, relu=1); each block's add and relu join the conv + batch norm
 * that ends the block (16, relu=1 with a residual input); no plain relu or
 * add_relu is left.  Backward:
 * the 33 relu_bwd of those relus feed only their batch norm's backward
 * (33 batchnorm_relu_bwd); the 16 relu_bwd of the block ends feed two batch
 * norms' backwards or a batch norm and a gradient sum, so they and the 20
 * other batchnorm_bwd stay; every conv2d_bwd_data feeds a gradient sum or a
 * batchnorm_relu_bwd, and the sums at 15 block inputs join the later data
 * gradient (conv2d_bwd_data_relu with an addend). */
static void check_resnet50(const char *dir) {
  Arena a;
  arena_init(&a);
  IrGraph *g = compile(&a, dir, "resnet50", 0);
  CHECK(g != NULL, "resnet50 compiles for training");
  if (g) {
    Diag d;
    diag_init(&d, stderr);
    CHECK(ir_verify(g, &d, "fuse") == 0, "resnet50: the fused training graph verifies");
    CHECK(count_op(g, IR_OP_CONV2D_BN_TRAIN) == 53, "conv2d_bn_train: %d", count_op(g, IR_OP_CONV2D_BN_TRAIN));
    /* 33 conv -> bn -> relu; 16 block ends conv -> bn -> add -> relu with the
     * shortcut as a residual input; the 4 conv3 of the blocks with a
     * downsample keep relu=0: the downsample comes after them and takes their
     * output as its residual */
    CHECK(count_relu_attr(g, IR_OP_CONV2D_BN_TRAIN, 1) == 49, "relu=1: %d",
          count_relu_attr(g, IR_OP_CONV2D_BN_TRAIN, 1));
    CHECK(count_relu_attr(g, IR_OP_CONV2D_BN_TRAIN, 0) == 4, "relu=0: %d",
          count_relu_attr(g, IR_OP_CONV2D_BN_TRAIN, 0));
    CHECK(count_residual(g, IR_OP_CONV2D_BN_TRAIN) == 16, "with a residual: %d",
          count_residual(g, IR_OP_CONV2D_BN_TRAIN));
    CHECK(count_op(g, IR_OP_ADD_RELU) == 0, "add_relu: %d", count_op(g, IR_OP_ADD_RELU));
    CHECK(count_op(g, IR_OP_CONV2D) == 0, "conv2d left: %d", count_op(g, IR_OP_CONV2D));
    CHECK(count_op(g, IR_OP_BATCHNORM_TRAIN) == 0, "batchnorm_train left: %d", count_op(g, IR_OP_BATCHNORM_TRAIN));
    CHECK(count_op(g, IR_OP_RELU) == 0, "relu left: %d", count_op(g, IR_OP_RELU));
    /* of the 33 batch norm + relu backwards, the 32 inside the blocks (bn1, bn2) follow
     * the data gradient of the conv they fed and join it; the stem's follows the max pool */
    CHECK(count_op(g, IR_OP_BATCHNORM_RELU_BWD) == 1, "batchnorm_relu_bwd: %d", count_op(g, IR_OP_BATCHNORM_RELU_BWD));
    CHECK(count_op(g, IR_OP_CONV2D_BWD_DATA_BN_RELU) == 32, "conv2d_bwd_data_bn_relu: %d",
          count_op(g, IR_OP_CONV2D_BWD_DATA_BN_RELU));
    const IrNode *db = find_node(g, "layer3.2.conv2.dgrad"), *bn2 = find_node(g, "layer3.2.conv1");
    CHECK(db && bn2 && db->op == IR_OP_CONV2D_BWD_DATA_BN_RELU && db->nin == 7 && db->nattr == 6 &&
              g->val[db->in[2]].name && strcmp(g->val[db->in[2]].name, "layer3.2.bn1.bias") == 0 &&
              db->in[3] == bn2->out[0] && db->in[5] == bn2->out[2] && db->in[6] == bn2->out[3] &&
              strcmp(db->attr[5].key, "in_hw") == 0,
          "layer3.2.conv2's data gradient takes bn1's backward: beta, conv1's z, its batch statistics");
    CHECK(count_op(g, IR_OP_BATCHNORM_BWD) == 20, "batchnorm_bwd left: %d", count_op(g, IR_OP_BATCHNORM_BWD));
    /* a block's input gradient is summed from its two branches and masked by the
     * previous block's relu; the next block's conv1 data gradient, made after the
     * other branch's gradient, adds and masks it: 15 conv2d_bwd_data_relu with an
     * addend, no sum_relu_bwd; the last block's relu_bwd has no sum before it,
     * and layer1.0's input (the max pool's output) has no relu */
    CHECK(count_op(g, IR_OP_SUM_RELU_BWD) == 0, "sum_relu_bwd: %d", count_op(g, IR_OP_SUM_RELU_BWD));
    CHECK(count_op(g, IR_OP_RELU_BWD) == 1, "relu_bwd left: %d", count_op(g, IR_OP_RELU_BWD));
    CHECK(count_op(g, IR_OP_CONV2D_BWD_DATA_RELU) == 15, "conv2d_bwd_data_relu: %d",
          count_op(g, IR_OP_CONV2D_BWD_DATA_RELU));
    CHECK(count_residual(g, IR_OP_CONV2D_BWD_DATA_RELU) == 15, "with an addend: %d",
          count_residual(g, IR_OP_CONV2D_BWD_DATA_RELU));
    CHECK(count_op(g, IR_OP_CONV2D_BWD_DATA) == 5, "conv2d_bwd_data: %d", count_op(g, IR_OP_CONV2D_BWD_DATA));
    const IrNode *g1 = find_node(g, "layer2.0.conv1.dgrad"), *g2 = find_node(g, "layer2.0.downsample.0.dgrad");
    CHECK(g1 && g2 && g1->op == IR_OP_CONV2D_BWD_DATA_RELU && g1->nin == 4 && g2->op == IR_OP_CONV2D_BWD_DATA &&
              g1->in[3] == g2->out[0],
          "layer2.0's input gradient: conv1's data gradient adds the downsample's");
    CHECK(count_op(g, IR_OP_CONV2D_BWD_WEIGHT) == 53, "conv2d_bwd_weight: %d", count_op(g, IR_OP_CONV2D_BWD_WEIGHT));
    /* the stem's max pool backward recomputes y from conv1's z: y is read by nothing after the max pool */
    const IrNode *mp = find_node(g, "maxpool.bwd"), *c1 = find_node(g, "conv1");
    CHECK(count_op(g, IR_OP_MAXPOOL_BWD) == 0 && mp && c1 && mp->op == IR_OP_MAXPOOL_BN_RELU_BWD && mp->nin == 6 &&
              mp->in[1] == c1->out[0] && mp->in[4] == c1->out[2] && mp->in[5] == c1->out[3] && g->val[mp->in[2]].name &&
              strcmp(g->val[mp->in[2]].name, "bn1.bias") == 0 && g->val[mp->in[3]].name &&
              strcmp(g->val[mp->in[3]].name, "bn1.weight") == 0,
          "the stem's max pool backward reads conv1's z, bn1's beta and gamma and its batch statistics");
    int stem_y_uses = 0;
    for (int i = 0; c1 && i < g->nnode; i++)
      for (int k = 0; k < g->node[i].nin; k++) stem_y_uses += g->node[i].in[k] == c1->out[1];
    CHECK(stem_y_uses == 1, "conv1's y is read by the max pool alone (%d uses)", stem_y_uses);
    CHECK(count_op(g, IR_OP_ADD) == 1, "gradient sums left: %d", count_op(g, IR_OP_ADD));
    CHECK(count_op(g, IR_OP_SGD_UPDATE) == 161, "sgd_update: %d", count_op(g, IR_OP_SGD_UPDATE));

    const IrNode *c = find_node(g, "layer1.0.conv1"), *c3 = find_node(g, "layer1.0.conv3");
    const IrNode *stem = find_node(g, "conv1"), *ds = find_node(g, "layer2.0.downsample.0");
    CHECK(c && c->op == IR_OP_CONV2D_BN_TRAIN && ir_attr_int(c, "relu", -1) == 1,
          "layer1.0.conv1 is conv2d_bn_train relu=1");
    CHECK(c3 && c3->op == IR_OP_CONV2D_BN_TRAIN && ir_attr_int(c3, "relu", -1) == 0 && c3->nin == 6,
          "layer1.0.conv3 (its shortcut, the downsample, comes after it) has relu=0 and no residual");
    CHECK(ds && ds->op == IR_OP_CONV2D_BN_TRAIN && ir_attr_int(ds, "relu", -1) == 1 && ds->nin == 7 &&
              ds->in[6] == find_node(g, "layer2.0.conv3")->out[1],
          "the downsample conv ends the block: relu=1, layer2.0.conv3's output as its residual");
    const IrNode *c13 = find_node(g, "layer1.1.conv3");
    CHECK(c13 && c13->nin == 7 && c13->in[6] == find_node(g, "layer1.0.downsample.0")->out[1] &&
              ir_attr_int(c13, "relu", -1) == 1,
          "layer1.1.conv3 adds the block's input (layer1.0's output) and applies relu");
    CHECK(stem && stem->op == IR_OP_CONV2D_BN_TRAIN && ir_attr_int(stem, "relu", -1) == 1 && stem->loc.line == 36,
          "the stem conv is fused with bn1 and relu, at the conv's line 36 (got %d)", stem ? stem->loc.line : -1);
    if (c) {
      static const char *const keys[] = {"k", "s", "p", "d", "groups", "eps", "momentum", "relu"};
      int ok = c->nattr == 8;
      for (int i = 0; ok && i < 8; i++) ok = strcmp(c->attr[i].key, keys[i]) == 0;
      CHECK(ok, "conv2d_bn_train attributes in the op table's order");
      CHECK(c->in[0] >= 0 && g->val[c->in[2]].name && !strcmp(g->val[c->in[2]].name, "layer1.0.bn1.weight") &&
                !strcmp(g->val[c->in[5]].name, "layer1.0.bn1.running_var"),
            "conv2d_bn_train reads bn1's scale and running variance");
      /* y feeds the next conv and its weight gradient (the relu backward recomputes
       * its mask from z); z feeds the batch norm backward, in the next conv's data gradient. */
      int y_uses = 0, z_bwd = 0;
      for (int i = 0; i < g->nnode; i++)
        for (int k = 0; k < g->node[i].nin; k++) {
          y_uses += g->node[i].in[k] == c->out[1];
          z_bwd += g->node[i].in[k] == c->out[0] && g->node[i].op == IR_OP_CONV2D_BWD_DATA_BN_RELU && k == 3;
        }
      CHECK(y_uses >= 2 && z_bwd == 1, "layer1.0.conv1: y used %d times, z by its batch norm backward %d", y_uses,
            z_bwd);
    }
    check_reads_back(g, "resnet50 training");
  }

  IrGraph *gi = compile(&a, dir, "resnet50", 1);
  CHECK(gi != NULL, "resnet50 compiles for inference");
  if (gi) {
    CHECK(count_op(gi, IR_OP_CONV2D_BN) == 53, "conv2d_bn: %d", count_op(gi, IR_OP_CONV2D_BN));
    CHECK(count_relu_attr(gi, IR_OP_CONV2D_BN, 1) == 49, "inference relu=1: %d",
          count_relu_attr(gi, IR_OP_CONV2D_BN, 1));
    CHECK(count_residual(gi, IR_OP_CONV2D_BN) == 16, "inference residuals: %d", count_residual(gi, IR_OP_CONV2D_BN));
    CHECK(count_op(gi, IR_OP_ADD_RELU) == 0, "inference add_relu: %d", count_op(gi, IR_OP_ADD_RELU));
    CHECK(count_op(gi, IR_OP_BATCHNORM) + count_op(gi, IR_OP_RELU) + count_op(gi, IR_OP_CONV2D) == 0,
          "inference: no batchnorm, relu or conv2d left");
    const IrNode *c = find_node(gi, "layer4.2.conv2");
    static const char *const keys[] = {"k", "s", "p", "d", "groups", "eps", "relu"};
    int ok = c && c->op == IR_OP_CONV2D_BN && c->nattr == 7;
    for (int i = 0; ok && i < 7; i++) ok = strcmp(c->attr[i].key, keys[i]) == 0;
    CHECK(ok, "layer4.2.conv2 is conv2d_bn with the table's attributes");
    check_reads_back(gi, "resnet50 inference");
  }
  arena_free(&a);
}

/* --- hand-written graphs where a pattern must not fire ---------------------- */

static const char *const HEAD = "graph hand {\n"
                                "  input %0 x : f32[N,3,5,5] NCHW\n"
                                "  param @w : f32[4,3,3,3] KCRS\n"
                                "  param @cb : f32[4]\n"
                                "  param @g : f32[4]\n"
                                "  param @b : f32[4]\n"
                                "  state @m : f32[4]\n"
                                "  state @v : f32[4]\n";

typedef struct Case {
  const char *what;
  const char *body;
  IrOp absent; /* the fused op that must not appear */
} Case;

static const Case CASES[] = {
    {"the add's result is a graph output",
     "  %1 = conv2d(%0, @w) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,4,5,5] NCHW\n"
     "  %2 = add(%1, %1) : f32[N,4,5,5] NCHW\n"
     "  %3 = relu(%2) : f32[N,4,5,5] NCHW\n"
     "  output %3, %2\n",
     IR_OP_ADD_RELU},
    {"the conv's result is a graph output",
     "  %1 = conv2d(%0, @w) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,4,5,5] NCHW\n"
     "  %2, %3, %4 = batchnorm_train(%1, @g, @b, @m, @v) {eps=1e-05 momentum=0.1} : f32[N,4,5,5] NCHW, f32[4], f32[4]\n"
     "  output %2, %1\n",
     IR_OP_CONV2D_BN_TRAIN},
    {"the batch norm's scale is made after the conv",
     "  input %9 s : f32[N,4,5,5] NCHW\n"
     "  %1 = conv2d(%0, @w) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,4,5,5] NCHW\n"
     "  %2 = channel_sum(%9) : f32[4]\n"
     "  %3 = batchnorm(%1, %2, @b, @m, @v) {eps=1e-05 momentum=0.1} : f32[N,4,5,5] NCHW\n"
     "  output %3\n",
     IR_OP_CONV2D_BN},
    {"the conv has a bias",
     "  %1 = conv2d(%0, @w, @cb) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,4,5,5] NCHW\n"
     "  %2 = batchnorm(%1, @g, @b, @m, @v) {eps=1e-05 momentum=0.1} : f32[N,4,5,5] NCHW\n"
     "  output %2\n",
     IR_OP_CONV2D_BN},
    {"the batch norm asks for another precision",
     "  %1 = conv2d(%0, @w) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1 precision=f16} : f32[N,4,5,5] NCHW\n"
     "  %2 = batchnorm(%1, @g, @b, @m, @v) {eps=1e-05 momentum=0.1 precision=f32} : f32[N,4,5,5] NCHW\n"
     "  output %2\n",
     IR_OP_CONV2D_BN},
    {"the conv output has a use other than its batch norm's backward",
     "  %1 = conv2d(%0, @w) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,4,5,5] NCHW\n"
     "  %2, %3, %4 = batchnorm_train(%1, @g, @b, @m, @v) {eps=1e-05 momentum=0.1} : f32[N,4,5,5] NCHW, f32[4], f32[4]\n"
     "  %5 = relu_bwd(%2, %1) : f32[N,4,5,5] NCHW\n"
     "  output %5\n",
     IR_OP_CONV2D_BN_TRAIN},
};

static void check_case(const Case *c) {
  char text[4096];
  snprintf(text, sizeof text, "%s%s}\n", HEAD, c->body);
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, stderr);
  IrGraph *g = ir_read(&a, &d, "case.ir", text, strlen(text));
  CHECK(g && !ir_verify(g, &d, "read"), "%s: the case verifies", c->what);
  PassCtx cx = {.d = &d, .out = stdout};
  IrGraph *out = g ? pass_fuse(g, &cx) : NULL;
  CHECK(out && !ir_verify(out, &d, "fuse"), "%s: the pass runs and verifies", c->what);
  if (out) {
    CHECK(count_op(out, c->absent) == 0, "%s: no %s expected", c->what, ir_op_info(c->absent)->name);
    CHECK(out->nnode == g->nnode, "%s: %d nodes became %d", c->what, g->nnode, out->nnode);
  }
  arena_free(&a);
}

/* The positive twin of the first case: without the extra output it fuses. */
static void check_control(void) {
  char text[4096];
  snprintf(text, sizeof text,
           "%s  %%1 = conv2d(%%0, @w) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1 precision=f16} : f32[N,4,5,5] NCHW\n"
           "  %%2 = batchnorm(%%1, @g, @b, @m, @v) {eps=1e-05 momentum=0.1} : f32[N,4,5,5] NCHW\n"
           "  %%3 = add(%%2, %%2) : f32[N,4,5,5] NCHW\n"
           "  %%4 = relu(%%3) : f32[N,4,5,5] NCHW\n"
           "  output %%4\n}\n",
           HEAD);
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, stderr);
  IrGraph *g = ir_read(&a, &d, "control.ir", text, strlen(text));
  PassCtx cx = {.d = &d, .out = stdout};
  IrGraph *out = g ? pass_fuse(g, &cx) : NULL;
  CHECK(out && !ir_verify(out, &d, "fuse") && out->nnode == 2 && out->node[0].op == IR_OP_CONV2D_BN &&
            out->node[1].op == IR_OP_ADD_RELU,
        "control: conv2d_bn then add_relu");
  if (out && out->nnode == 2) {
    const IrAttr *p = ir_attr_find(&out->node[0], "precision");
    CHECK(p && p->i[0] == IR_DT_F16 && out->node[0].nattr == 8, "conv2d_bn keeps the conv's precision=f16 last");
    CHECK(ir_attr_int(&out->node[0], "relu", -1) == 0, "relu=0: the batch norm feeds an add");
  }
  arena_free(&a);
}

/* odd.net's bn1 + relu has 10 channels, which the layout pass pads: its
 * backward stays apart from conv2's data gradient. */
static void check_odd_channels(const char *models) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/../tests/passes/layout", models);
  Arena a;
  arena_init(&a);
  IrGraph *g = compile(&a, dir, "odd", 0);
  CHECK(g != NULL, "odd.net compiles");
  if (g) {
    const IrNode *b = find_node(g, "r1.bwd");
    CHECK(count_op(g, IR_OP_CONV2D_BWD_DATA_BN_RELU) == 0 && b && b->op == IR_OP_BATCHNORM_RELU_BWD &&
              g->val[b->in[0]].def >= 0 && g->node[g->val[b->in[0]].def].op == IR_OP_CONV2D_BWD_DATA,
          "odd.net: bn1's backward (10 channels) follows conv2's data gradient unfused");
  }
  arena_free(&a);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_fuse MODELS_DIR\n");
    return 2;
  }
  check_resnet50(argv[1]);
  check_odd_channels(argv[1]);
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) check_case(&CASES[i]);
  check_control();
  return check_report();
}
