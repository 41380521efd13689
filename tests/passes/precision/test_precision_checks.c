/* test_precision_checks.c - what the precision policy promises, on ResNet-50.
 *
 *   test_precision_checks TEST_DIR MODELS_DIR
 *
 * Training and inference, fused and not, f16 and bf16: conv1 (and its
 * filter gradient) computes in f32, every other convolution op and the
 * classifier in the default dtype, with inputs of that dtype; the cast count
 * is what the rules predict: one per-step cast of each f16 weight (52 convs
 * and fc), the maxpool output into layer1 (shared by two convs), the
 * logits to f32 for the loss (inference: for the output), and in training
 * the logits' gradient to f16 and the stem's gradient back to f32: 57 and
 * 55.  Fused training has neither the maxpool output's cast nor the stem
 * gradient's but casts conv1's z (56): conv1's conv2d_bn_train keeps z,
 * mean and invstd f32 but writes its relu output in the default dtype,
 * maxpool and its backward (maxpool_bn_relu_bwd, recomputing y from z) run
 * in it, z is cast to it right after conv1 (the f32 z dies there), and the
 * stem's batchnorm_relu_bwd reads that gradient with the narrow z into an
 * f32 dx.  No value is cast twice to one dtype
 * and no cast keeps its dtype.
 * fp32 adds nothing.  Errors: --int8 naming no conv/linear layer, and
 * precision=i8 on an op that is neither. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"

static IrGraph *compile(Arena *a, Diag *d, const char *path, unsigned off, int inference, IrDtype dt,
                        const char *int8) {
  PassCtx cx = {.d = d,
                .out = stdout,
                .precision = dt,
                .precision_set = 1,
                .inference = inference,
                .disabled = off | pipeline_bit("prologue") | pipeline_bit("memplan"),
                .int8_layers = int8};
  return compile_file(a, d, path, &cx);
}

/* The same with --precision fp8 (pass_precision_parse). */
static IrGraph *compile_fp8(Arena *a, Diag *d, const char *path, unsigned off, int inference) {
  PassCtx cx = {.d = d,
                .out = stdout,
                .inference = inference,
                .disabled = off | pipeline_bit("prologue") | pipeline_bit("memplan")};
  if (pass_precision_parse("fp8", &cx)) return NULL;
  return compile_file(a, d, path, &cx);
}

static int is_conv(IrOp op) {
  return op == IR_OP_CONV2D || op == IR_OP_CONV2D_BN_TRAIN || op == IR_OP_CONV2D_BN || op == IR_OP_CONV2D_BWD_DATA ||
         op == IR_OP_CONV2D_BWD_WEIGHT || op == IR_OP_CONV2D_BWD_DATA_RELU;
}

static IrDtype dt_of(const IrGraph *g, int v) { return g->val[v].type.dtype; }

/* 1 for each of the fused stem's nodes in the dtypes the policy gives it
 * (D: the default), after a CHECK of them: conv1's conv2d_bn_train with
 * z, mean, invstd f32 and y in D, maxpool in D, maxpool_bn_relu_bwd in D
 * reading the D z, and the stem's batchnorm_relu_bwd (dy D, dx f32, z in
 * D: the cast of conv1's f32 z, the node right after conv1, so that the
 * f32 z dies there). */
static int check_stem(const IrGraph *g, const IrNode *n, IrDtype dt, const char *what) {
  int ok = 0;
  const char *name = n->name ? n->name : "";
  if (n->op == IR_OP_CONV2D_BN_TRAIN && strcmp(name, "conv1") == 0)
    ok = dt_of(g, n->out[0]) == IR_DT_F32 && dt_of(g, n->out[1]) == dt && dt_of(g, n->out[2]) == IR_DT_F32 &&
         dt_of(g, n->out[3]) == IR_DT_F32;
  else if (n->op == IR_OP_MAXPOOL && g->val[n->in[0]].def >= 0 &&
           g->node[g->val[n->in[0]].def].op == IR_OP_CONV2D_BN_TRAIN)
    ok = dt_of(g, n->in[0]) == dt && dt_of(g, n->out[0]) == dt;
  else if (n->op == IR_OP_MAXPOOL_BN_RELU_BWD)
    ok = dt_of(g, n->in[0]) == dt && dt_of(g, n->in[1]) == dt && dt_of(g, n->out[0]) == dt &&
         g->val[n->in[1]].def >= 0 && g->node[g->val[n->in[1]].def].op == IR_OP_CAST;
  else if (n->op == IR_OP_BATCHNORM_RELU_BWD && dt_of(g, n->out[0]) == IR_DT_F32) {
    int c = g->val[n->in[2]].def, conv = c > 0 ? g->val[g->node[c].in[0]].def : -1;
    ok = dt_of(g, n->in[0]) == dt && dt_of(g, n->in[2]) == dt && c > 0 && g->node[c].op == IR_OP_CAST &&
         conv == c - 1 && g->node[conv].op == IR_OP_CONV2D_BN_TRAIN && g->node[conv].out[0] == g->node[c].in[0] &&
         g->node[conv].name && strcmp(g->node[conv].name, "conv1") == 0;
  } else
    return 0;
  CHECK(ok, "%s: %s %s has dtypes other than the policy's", what, ir_op_info(n->op)->name, name);
  return ok;
}

static void check_resnet50(const char *path, unsigned off, int inference, IrDtype dt) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, stderr);
  IrGraph *g = compile(&a, &d, path, off, inference, dt, NULL);
  char what[96];
  snprintf(what, sizeof what, "resnet50 %s %s %s", inference ? "inference" : "training",
           off & pipeline_bit("fuse") ? "unfused" : "fused", ir_dtype_name(dt));
  CHECK(g != NULL, "%s compiles", what);
  if (!g) goto done;
  int casts = 0, convs = 0, low = 0, first = 0, fc = 0, stem = 0;
  /* the stem: f32, but f16 in an f16 inference graph, where the image's and its filter's casts fold into
   * their relayouts and the max pool's result needs none */
  IrDtype stem_dt = inference && dt == IR_DT_F16 ? IR_DT_F16 : IR_DT_F32;
  for (int n = 0; n < g->nnode; n++) {
    const IrNode *node = &g->node[n];
    if (dt != IR_DT_F32) stem += check_stem(g, node, dt, what);
    if (node->op == IR_OP_CAST) {
      casts++;
      CHECK(g->val[node->in[0]].type.dtype != g->val[node->out[0]].type.dtype, "%s: cast %s keeps its dtype", what,
            node->name);
      for (int m = 0; m < n; m++)
        if (g->node[m].op == IR_OP_CAST && g->node[m].in[0] == node->in[0] &&
            g->val[g->node[m].out[0]].type.dtype == g->val[node->out[0]].type.dtype)
          CHECK(0, "%s: %s and %s cast one value to one dtype", what, g->node[m].name, node->name);
    }
    if (node->op == IR_OP_LINEAR || node->op == IR_OP_LINEAR_BWD_DATA || node->op == IR_OP_LINEAR_BWD_WEIGHT)
      fc += g->val[node->in[0]].type.dtype == dt && g->val[node->in[1]].type.dtype == dt;
    if (!is_conv(node->op)) continue;
    convs++;
    IrDtype x = g->val[node->in[0]].type.dtype, w = g->val[node->in[1]].type.dtype;
    int is_first = node->name && strncmp(node->name, "conv1", 5) == 0 && (!node->name[5] || node->name[5] == '.');
    if (is_first)
      first += x == stem_dt && w == stem_dt;
    else
      low += x == dt && w == dt;
    if (!is_first && !(x == dt && w == dt))
      CHECK(0, "%s: %s computes in %s/%s", what, node->name, ir_dtype_name(x), ir_dtype_name(w));
  }
  int want_first = inference ? 1 : 2; /* conv1 and conv1.wgrad */
  CHECK(first == want_first, "%s: conv1 in %s (%d of %d ops)", what, ir_dtype_name(stem_dt), first, want_first);
  CHECK(low == convs - want_first, "%s: %d of %d other convolution ops in %s", what, low, convs - want_first,
        ir_dtype_name(dt));
  CHECK(fc == (inference ? 1 : 3), "%s: fc and its backward in %s (%d)", what, ir_dtype_name(dt), fc);
  int fused_train = !inference && !(off & pipeline_bit("fuse"));
  CHECK(stem == (fused_train && dt != IR_DT_F32 ? 4 : 0), "%s: %d of the stem's fused nodes in their dtypes", what,
        stem);
  int want = dt == IR_DT_F32 ? 0 : inference ? 54 + (dt != IR_DT_F16) : fused_train ? 56 : 57; /* fused: + conv1's z */
  CHECK(casts == want, "%s: %d casts, the rules predict %d", what, casts, want);
  printf("%s: %d convolution ops, %d casts\n", what, convs, casts);
done:
  diag_finish(&d);
  arena_free(&a);
}

/* --int8=all (the policy): every forward convolution but conv1 reads i8
 * input and weight, conv1 stays f32 (f16 in inference), the backward ops and fc stay in f16
 * (fc in i8 only when listed too: "all,fc").  With list NULL, --precision
 * fp8: the same with f8e4m3 for i8, and the backward convolutions but
 * conv1's in FP8 too: an f8e5m2 gradient, f8e4m3 weights (data gradients)
 * or activations (weight gradients), each the forward's own cast, an f32
 * result. */
static void check_int8_all(const char *path, unsigned off, int inference, const char *list) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, stderr);
  IrDtype low = list ? IR_DT_I8 : IR_DT_F8E4M3;
  IrGraph *g =
      list ? compile(&a, &d, path, off, inference, IR_DT_F16, list) : compile_fp8(&a, &d, path, off, inference);
  char what[128];
  snprintf(what, sizeof what, "resnet50 %s%s %s %s", list ? "--int8=" : "--precision fp8", list ? list : "",
           inference ? "inference" : "training", off & pipeline_bit("fuse") ? "unfused" : "fused");
  if (!list) list = "";
  CHECK(g != NULL, "%s compiles", what);
  if (!g) goto done;
  int fc_i8 = strstr(list, "fc") != NULL, i8 = 0, fwd = 0, stem = 0, fc = 0, bwd = 0, f8 = 0;
  for (int n = 0; n < g->nnode; n++) {
    const IrNode *node = &g->node[n];
    int forward = node->op == IR_OP_CONV2D || node->op == IR_OP_CONV2D_BN_TRAIN || node->op == IR_OP_CONV2D_BN;
    if (!is_conv(node->op) && node->op != IR_OP_LINEAR && node->op != IR_OP_CONV2D_BWD_DATA_BN_RELU) continue;
    IrDtype x = dt_of(g, node->in[0]), w = dt_of(g, node->in[1]);
    const char *name = node->name ? node->name : "";
    if (node->op == IR_OP_LINEAR) {
      IrDtype want = fc_i8 ? IR_DT_I8 : IR_DT_F16;
      fc += x == want && w == want;
    } else if (forward && strcmp(name, "conv1") == 0) { /* f32; in inference (D f16) f16 */
      IrDtype stem_dt = inference ? IR_DT_F16 : IR_DT_F32;
      stem += x == stem_dt && w == stem_dt;
    } else if (forward) {
      fwd++;
      i8 += x == low && w == low;
      CHECK(x == low && w == low, "%s: %s reads %s/%s", what, name, ir_dtype_name(x), ir_dtype_name(w));
    } else if (low == IR_DT_I8 || strncmp(name, "conv1.", 6) == 0) {
      CHECK(x != low && w != low, "%s: backward op %s reads %s", what, name, ir_dtype_name(low));
    } else {
      /* the other operand is a forward op's cast (a block input's shared by conv1 and the shortcut) */
      int other = node->in[1], def = g->val[other].def, shared = 0;
      for (int m = 0; m < g->nnode && def >= 0; m++)
        if (m != n && (g->node[m].op == IR_OP_CONV2D || g->node[m].op == IR_OP_CONV2D_BN_TRAIN ||
                       g->node[m].op == IR_OP_CONV2D_BN_STATS))
          for (int i = 0; i < 2; i++) shared += g->node[m].in[i] == other;
      int ok = x == IR_DT_F8E5M2 && w == IR_DT_F8E4M3 && dt_of(g, node->out[0]) == IR_DT_F32 && shared >= 1;
      bwd++, f8 += ok;
      CHECK(ok, "%s: backward op %s reads %s/%s into %s (the other operand read by %d forward ops)", what, name,
            ir_dtype_name(x), ir_dtype_name(w), ir_dtype_name(dt_of(g, node->out[0])), shared);
    }
  }
  if (low == IR_DT_F8E4M3 && !inference)
    CHECK(bwd == 104 && f8 == 104, "%s: %d of %d backward convolutions but conv1's in FP8 (104 expected)", what, f8,
          bwd);
  CHECK(fwd == 52 && i8 == 52, "%s: %d of %d forward convolutions but conv1 in %s (52 expected)", what, i8, fwd,
        ir_dtype_name(low));
  CHECK(stem == 1, "%s: conv1 in %s", what, inference ? "f16" : "f32");
  CHECK(fc == 1, "%s: fc in %s", what, fc_i8 ? "i8" : "f16");
done:
  diag_finish(&d);
  arena_free(&a);
}

/* compile_source on text must fail with a message containing `want`. */
static void check_error(const char *text, const char *int8, const char *want) {
  Arena a;
  arena_init(&a);
  char *msg = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&msg, &len);
  Diag d;
  diag_init(&d, f);
  PassCtx cx = {.d = &d, .out = stdout, .precision = IR_DT_F16, .int8_layers = int8};
  IrGraph *g = compile_source(&a, &d, "err.net", text, strlen(text), &cx);
  diag_finish(&d);
  fclose(f);
  CHECK(!g && msg && strstr(msg, want), "error '%s' expected, got: %s", want, msg ? msg : "");
  free(msg);
  arena_free(&a);
}

/* The image's relayout to NHWC: in an f16 inference graph it writes f16
 * itself (y_dtype, the cast folded in) and conv1 reads it; in training and
 * in bf16 inference it stays f32.  The verifier refuses a relayout's
 * y_dtype that is no float dtype. */
static void check_image_relayout(const char *path, int inference, IrDtype dt) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, stderr);
  IrGraph *g = compile(&a, &d, path, 0, inference, dt, NULL);
  char what[64];
  snprintf(what, sizeof what, "resnet50 %s %s", inference ? "inference" : "training", ir_dtype_name(dt));
  int r = -1, readers = 0, casts = 0;
  for (int n = 0; g && n < g->nnode; n++)
    if (g->node[n].name && strcmp(g->node[n].name, "image.nhwc") == 0) r = n;
  CHECK(r >= 0 && g->node[r].op == IR_OP_RELAYOUT, "%s: the image's relayout", what);
  if (r < 0) goto done;
  int y = g->node[r].out[0], f16 = inference && dt == IR_DT_F16;
  for (int n = 0; n < g->nnode; n++)
    for (int i = 0; i < g->node[n].nin; i++)
      if (g->node[n].in[i] == y) readers++, casts += g->node[n].op == IR_OP_CAST;
  const IrAttr *yd = ir_attr_find(&g->node[r], "y_dtype");
  CHECK(dt_of(g, y) == (f16 ? IR_DT_F16 : IR_DT_F32) && (yd != NULL) == f16 && casts == 0 && readers >= 1,
        "%s: the image's relayout writes %s (y_dtype %s), read by %d nodes, %d of them casts", what,
        ir_dtype_name(dt_of(g, y)), yd ? "set" : "absent", readers, casts);
  if (!yd) goto done;
  IrAttr bad = *yd;
  bad.i[0] = IR_DT_I8;
  g->node[r].attr[yd - g->node[r].attr] = bad;
  char buf[4096] = "";
  FILE *f = fmemopen(buf, sizeof buf - 1, "w");
  Diag dv;
  diag_init(&dv, f);
  int rc = f ? ir_verify(g, &dv, "test") : 0;
  if (f) fclose(f);
  CHECK(rc != 0 && strstr(buf, "a relayout's y_dtype must be f32, f16 or bf16"),
        "%s: a relayout's y_dtype=i8 refused (got: %s)", what, buf);
done:
  diag_finish(&d);
  arena_free(&a);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_precision_checks TEST_DIR MODELS_DIR\n");
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/resnet50.net", argv[2]);
  for (int inference = 0; inference < 2; inference++) {
    check_resnet50(path, pipeline_bit("fuse"), inference, IR_DT_F16);
    check_resnet50(path, 0, inference, IR_DT_F16);
  }
  check_image_relayout(path, 1, IR_DT_F16);
  check_image_relayout(path, 0, IR_DT_F16);
  check_image_relayout(path, 1, IR_DT_BF16);
  check_resnet50(path, pipeline_bit("fuse"), 0, IR_DT_BF16);
  check_resnet50(path, 0, 0, IR_DT_BF16);
  check_resnet50(path, pipeline_bit("fuse"), 0, IR_DT_F32);
  check_resnet50(path, 0, 0, IR_DT_F32);
  for (int inference = 0; inference < 2; inference++) {
    check_int8_all(path, pipeline_bit("fuse"), inference, "all");
    check_int8_all(path, 0, inference, "all");
  }
  check_int8_all(path, 0, 1, "all,fc");
  for (int inference = 0; inference < 2; inference++) {
    check_int8_all(path, pipeline_bit("fuse"), inference, NULL);
    check_int8_all(path, 0, inference, NULL);
  }
  static const char net[] = "network e {\n"
                            "  input image : f32[3, 8, 8]\n"
                            "  input label : i32[]\n"
                            "  conv1 = conv2d(image, 8, k=3, p=1)\n"
                            "  r = relu(conv1, precision=%s)\n"
                            "  fc = linear(flatten(global_avgpool(r)), 4)\n"
                            "  loss = softmax_cross_entropy(fc, label)\n"
                            "}\n";
  char text[1024];
  snprintf(text, sizeof text, net, "f16");
  check_error(text, "conv1,nosuch", "--int8: no conv2d or linear layer named 'nosuch'");
  check_error(text, "r", "--int8: no conv2d or linear layer named 'r'");
  snprintf(text, sizeof text, net, "i8");
  check_error(text, NULL, "err.net:5:7: error: precision=i8 applies to conv2d and linear only, not relu");
  snprintf(text, sizeof text, net, "f8");
  check_error(text, NULL, "err.net:5:7: error: precision=f8 applies to conv2d and linear only, not relu");
  return check_report();
}
