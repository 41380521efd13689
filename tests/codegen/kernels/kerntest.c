/* kerntest.c - the graphs of the generated-kernel tests (kerntest.h). */
#include "kerntest.h"

#include <stdio.h>
#include <stdlib.h>

#include "compile.h"
#include "int8_scales.h"

static const KerntestGraph GRAPHS[] = {
    {"smallcnn-train", "models/smallcnn.net", 0, NULL, IR_DT_F16, 0, 0, 0},
    {"smallcnn-bf16-train", "models/smallcnn.net", 0, NULL, IR_DT_BF16, 0, 0, 0},
    {"smallcnn-infer", "models/smallcnn.net", 1, NULL, IR_DT_F16, 0, 0, 0},
    /* the linear ops (with a bias) on cuDNN in strict FP32 */
    {"smallcnn-f32-train", "models/smallcnn.net", 0, NULL, IR_DT_F32, 0, 0, 0},
    /* and on linear.cu, cuDNN's fallback */
    {"smallcnn-linearcu-train", "models/smallcnn.net", 0, NULL, IR_DT_F16, 1, 0, 0},
    {"smallcnn-linearcu-f32-train", "models/smallcnn.net", 0, NULL, IR_DT_F32, 1, 0, 0},
    {"smallcnn-unfused-bf16-train", "models/smallcnn.net", 0, "fuse", IR_DT_BF16, 0, 0, 0},
    {"smallcnn-unfused-infer", "models/smallcnn.net", 1, "fuse", IR_DT_F16, 0, 0, 0},
    {"resnet20-train", "models/resnet20.net", 0, NULL, IR_DT_F16, 0, 0, 0},
    {"resnet20-infer", "models/resnet20.net", 1, NULL, IR_DT_F16, 0, 0, 0},
    {"stem7-train", "tests/codegen/kernels/stem7.net", 0, NULL, IR_DT_F16, 0, 0, 0},
    /* the max pool's backward recomputing its winners (maxpool_bn_relu_bwd) */
    {"stem7-noprologue-train", "tests/codegen/kernels/stem7.net", 0, "prologue", IR_DT_F16, 0, 0, 0},
    /* inference: the f16 stem folded, plain (its batch norm in the pool) and, without pass prologue, as conv2d_bn */
    {"stem7-infer", "tests/codegen/kernels/stem7.net", 1, NULL, IR_DT_F16, 0, 0, 0},
    {"stem7-noprologue-infer", "tests/codegen/kernels/stem7.net", 1, "prologue", IR_DT_F16, 0, 0, 0},
    /* ResNet-50's stem geometry (64 channels) on stem_conv.cu, partial tiles of columns and rows */
    {"stem64-infer", "tests/codegen/kernels/stem64.net", 1, NULL, IR_DT_F16, 0, 0, 1},
    /* synchronized batch norm: every training batch norm's sums packed into f64 for the ranks, then finalized */
    {"resnet20-syncbn-train", "models/resnet20.net", 0, NULL, IR_DT_F16, 0, 1, 0},
    {"stem7-syncbn-train", "tests/codegen/kernels/stem7.net", 0, NULL, IR_DT_F16, 0, 1, 0},
    /* --precision fp8 (IR_DT_F8E4M3): FP8 forward convolutions, the gradients' widened operands */
    {"resnet20-fp8-train", "models/resnet20.net", 0, NULL, IR_DT_F8E4M3, 0, 0, 0},
    /* --int8=all with every i8 layer's input at step 0.05 (IR_DT_I8): each block's conv1 requantized */
    {"resnet20-int8cal-infer", "models/resnet20.net", 1, NULL, IR_DT_I8, 0, 0, 0},
};

const KerntestGraph *kerntest_graphs(int *n) {
  *n = (int)(sizeof GRAPHS / sizeof GRAPHS[0]);
  return GRAPHS;
}

/* The code switches of the graph compiled last (its linear_cu, sync_bn) and of the
 * environment, which every device of kerntest_h200 emits under. */
static NetcOpts kopts;

IrGraph *kerntest_compile(Arena *a, const char *root, const KerntestGraph *kg) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, kg->model);
  Diag d;
  diag_init(&d, stderr);
  int fp8 = kg->precision == IR_DT_F8E4M3, int8 = kg->precision == IR_DT_I8;
  PassCtx cx = {.d = &d,
                .inference = kg->inference,
                .precision = int8 ? IR_DT_F16 : kg->precision,
                .precision_set = 1,
                .int8_layers = int8 ? "all" : NULL};
  if (fp8) pass_precision_parse("fp8", &cx);
  if (kg->off) cx.disabled |= pipeline_bit(kg->off);
  if (kg->linear_cu)
    setenv("NETC_LINEAR_CUDNN", "0", 1);
  else
    unsetenv("NETC_LINEAR_CUDNN");
  if (kg->sync_bn)
    setenv("NETC_SYNC_BN", "1", 1);
  else
    unsetenv("NETC_SYNC_BN");
  if (kg->stem_mma)
    setenv("NETC_STEM_MMA", "1", 1);
  else
    unsetenv("NETC_STEM_MMA");
  opts_from_env(&kopts, NULL, 0);
  IrGraph *g = compile_file(a, &d, path, &cx);
  if (g && int8) /* again, with the steps of every i8 layer the first compile found */
    g = (cx.int8_scales = int8_scales_every(a, g, 0.05)) ? compile_file(a, &d, path, &cx) : NULL;
  if (!g) fprintf(stderr, "%s: compile failed\n", kg->name);
  return g;
}

int kerntest_stem_mixed(const IrGraph *g, const IrNode *n) {
  if (n->op == IR_OP_CONV2D_BN_TRAIN) return g->val[n->out[0]].type.dtype != g->val[n->out[1]].type.dtype;
  if (n->op == IR_OP_BATCHNORM_RELU_BWD) return g->val[n->in[2]].type.dtype != g->val[n->out[0]].type.dtype;
  return 0;
}

const NetcOpts *kerntest_opts(void) { return &kopts; }

CgDevice kerntest_h200(void) {
  opts_from_env(&kopts, NULL, 0);
  return (CgDevice){132, 1024, 49152, 9, 0, 2048, &kopts};
}

/* Casts (to i8 by the tensor's maximum, by a calibrated scale, per slice
 * of dimension 0; to FP8 by the tensor's maximum, by an amax history, by a
 * fixed scale), an sgd_update, and maxpool_bwd_win and batchnorm_relu_bwd_win
 * reading maxpool_bn_relu's winners on an odd channel count (the compiled
 * graphs have only the second, gathering by cells: here, with C/V = 67, it
 * gathers pixel by pixel). */
static const char EXTRA[] = "graph extra {\n"
                            "  input %0 x : f32[N,5,7,67] NHWC\n"
                            "  input %1 h : f16[N,5,7,67] NHWC\n"
                            "  input %2 g : bf16[1001]\n"
                            "  input %3 lr : f32[]\n"
                            "  input %4 loss_scale : f32[]\n"
                            "  input %5 dy : f16[N,3,4,67] NHWC\n"
                            "  input %6 v : f32[67]\n"
                            "  input %18 k : f32[16,3,3,3] KCRS\n"
                            "  param @w : f32[1001]\n"
                            "  state @b : f32[1001]\n"
                            "  state @hist : f32[16]\n"
                            "  %7 = cast(%0) {to=i8} : i8[N,5,7,67] NHWC\n"
                            "  %8 = cast(%1) {to=bf16} : bf16[N,5,7,67] NHWC\n"
                            "  %9 = cast(%8) {to=f32} : f32[N,5,7,67] NHWC\n"
                            "  %10, %11 = maxpool_bn_relu(%1, %6, %6, %6, %6) {k=3x3 s=2x2 p=1x1}"
                            " : f16[N,3,4,67] NHWC, i8[N,3,4,67] NHWC\n"
                            "  %12 = maxpool_bwd_win(%5, %11) {k=3x3 s=2x2 p=1x1 in_hw=5x7} : f16[N,5,7,67] NHWC\n"
                            "  %13, %14, %15 = batchnorm_relu_bwd_win(%5, %11, %6, %1, %6, %6, %6)"
                            " {k=3x3 s=2x2 p=1x1 in_hw=5x7} : f16[N,5,7,67] NHWC, f32[67], f32[67]\n"
                            "  %16 = cast(%0) {to=i8 scale=0.05} : i8[N,5,7,67] NHWC\n"
                            "  %17 = cast(%18) {to=i8 axis=0} : i8[16,3,3,3] KCRS\n"
                            "  %19 = cast(%0) {to=f8e4m3} : f8e4m3[N,5,7,67] NHWC\n"
                            "  %20 = cast(%1, @hist) {to=f8e5m2} : f8e5m2[N,5,7,67] NHWC\n"
                            "  %21 = cast(%0) {to=f8e4m3 scale=0.01} : f8e4m3[N,5,7,67] NHWC\n"
                            "  optimizer:\n"
                            "  sgd_update(@w, %2, @b, %3, %4) {momentum=0.9 nesterov=1 weight_decay=0.0005}\n"
                            "  output %9\n"
                            "  output %10\n"
                            "  output %12\n"
                            "  output %13\n"
                            "  output %14\n"
                            "  output %15\n"
                            "  output %16\n"
                            "  output %17\n"
                            "  output %19\n"
                            "  output %20\n"
                            "  output %21\n"
                            "}\n";

IrGraph *kerntest_extra(Arena *a) {
  Diag d;
  diag_init(&d, stderr);
  IrGraph *g = ir_read(a, &d, "extra.ir", EXTRA, sizeof EXTRA - 1);
  if (g && ir_verify(g, &d, NULL)) g = NULL;
  if (!g) fprintf(stderr, "the extra graph does not read\n");
  return g;
}
