/* test_layout_checks.c - what the layout pass guarantees, checked on the IR.
 *
 *   test_layout_checks TEST_DIR MODELS_DIR
 *
 * ResNet-50 (training and inference, fused and not): after layout no NCHW
 * activation remains except the image input and unflatten's result (read
 * only by a relayout to NHWC); every filter param and momentum buffer is
 * KRSC; conv1 reads the image padded to 4 channels (f32 first conv) with its
 * filter padded by a relayout of the param, and its filter gradient is
 * cropped back to 3 before sgd_update.  The pass is idempotent (a second run
 * prints the same) and leaves an NHWC graph alone. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"

static IrGraph *compile(Arena *a, const char *path, unsigned off, int inference) {
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .out = stdout, .precision = IR_DT_F16, .inference = inference, .disabled = off};
  IrGraph *g = compile_file(a, &d, path, &cx);
  diag_finish(&d);
  return g;
}

static char *print(const IrGraph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  IrPrintOpts o = {.no_loc = 1};
  ir_print(f, g, &o);
  fclose(f);
  return buf;
}

static void check_resnet50(const char *path, unsigned off, int inference) {
  Arena a;
  arena_init(&a);
  IrGraph *g = compile(&a, path, off | pipeline_bit("precision") | pipeline_bit("memplan"), inference);
  const char *what = inference ? "resnet50 inference" : "resnet50 training";
  CHECK(g != NULL, "%s compiles", what);
  if (!g) {
    arena_free(&a);
    return;
  }
  int nchw = 0, relayouts = 0, conv1 = 0, crop = 0;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->type.layout == IR_LAYOUT_KCRS) CHECK(0, "%s: %s is still KCRS", what, val->name);
    if (val->type.layout != IR_LAYOUT_NCHW || val->kind == IR_VAL_INPUT) continue;
    int from_unflatten = val->def >= 0 && g->node[val->def].op == IR_OP_UNFLATTEN;
    CHECK(from_unflatten, "%s: NCHW activation made by %s", what, val->def >= 0 ? g->node[val->def].name : "?");
    nchw++;
  }
  for (int n = 0; n < g->nnode; n++) {
    const IrNode *node = &g->node[n];
    if (node->op == IR_OP_RELAYOUT) relayouts++;
    for (int i = 0; i < node->nin; i++) {
      const IrValue *in = &g->val[node->in[i]];
      if (in->type.layout == IR_LAYOUT_NCHW && in->kind != IR_VAL_INPUT)
        CHECK(node->op == IR_OP_RELAYOUT, "%s: %s reads an NCHW value", what, node->name);
    }
    if (node->name && strcmp(node->name, "conv1") == 0) {
      const IrType *x = &g->val[node->in[0]].type, *w = &g->val[node->in[1]].type;
      const IrNode *wdef = &g->node[g->val[node->in[1]].def];
      conv1 = x->layout == IR_LAYOUT_NHWC && x->dim[3] == 4 && w->layout == IR_LAYOUT_KRSC && w->dim[3] == 4 &&
              wdef->op == IR_OP_RELAYOUT && g->val[wdef->in[0]].kind == IR_VAL_PARAM;
    }
    if (node->op == IR_OP_SGD_UPDATE && strcmp(g->val[node->in[0]].name, "conv1.weight") == 0) {
      const IrValue *gr = &g->val[node->in[1]];
      crop = gr->type.dim[3] == 3 && gr->def >= 0 && g->node[gr->def].op == IR_OP_RELAYOUT;
    }
  }
  CHECK(nchw == (inference ? 0 : 1), "%s: %d NCHW activations (unflatten's)", what, nchw);
  CHECK(conv1, "%s: conv1 reads the image and its filter padded to 4 channels, KRSC", what);
  CHECK(inference || crop, "%s: conv1's filter gradient cropped back to 3 channels", what);
  /* image.nhwc, conv1.weight.pad, conv1.wgrad.crop, flat.bwd.nhwc: nothing else to relayout */
  CHECK(relayouts == (inference ? 2 : 4), "%s: %d relayouts", what, relayouts);
  printf("%s (%s): %d relayouts\n", what, off & pipeline_bit("fuse") ? "unfused" : "fused", relayouts);
  /* A second run changes nothing. */
  char *once = print(g);
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .out = stdout, .precision = IR_DT_F16};
  IrGraph *again = pass_layout(g, &cx);
  char *twice = again ? print(again) : NULL;
  CHECK(once && twice && strcmp(once, twice) == 0, "%s: layout is idempotent", what);
  diag_finish(&d);
  free(once);
  free(twice);
  arena_free(&a);
}

/* A hand-written NHWC graph comes back as it was. */
static void check_nhwc_noop(void) {
  static const char text[] = "graph nhwc {\n"
                             "  input %0 x : f32[N,8,8,8] NHWC\n"
                             "  param @w : f32[16,3,3,8] KRSC\n"
                             "  %1 = conv2d(%0, @w) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,8,8,16] NHWC  # conv\n"
                             "  %2 = relu(%1) : f32[N,8,8,16] NHWC  # act\n"
                             "  %3 = global_avgpool(%2) : f32[N,1,1,16] NHWC  # gap\n"
                             "  %4 = flatten(%3) : f32[N,16]  # flat\n"
                             "  output %4\n"
                             "}\n";
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, stderr);
  IrGraph *g = ir_read(&a, &d, "nhwc.ir", text, sizeof text - 1);
  PassCtx cx = {.d = &d, .out = stdout, .precision = IR_DT_F16};
  IrGraph *h = g ? pass_layout(g, &cx) : NULL;
  char *before = g ? print(g) : NULL, *after = h ? print(h) : NULL;
  CHECK(before && after && strcmp(before, after) == 0, "an NHWC graph is left alone:\n%s\nbecame\n%s", before, after);
  diag_finish(&d);
  free(before);
  free(after);
  arena_free(&a);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_layout_checks TEST_DIR MODELS_DIR\n");
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/resnet50.net", argv[2]);
  for (int inference = 0; inference < 2; inference++) {
    check_resnet50(path, pipeline_bit("fuse"), inference);
    check_resnet50(path, 0, inference);
  }
  check_nhwc_noop();
  return check_report();
}
