/* test_kernels_nvrtc.c - every node of real final graphs (kerntest.h:
 * smallcnn and resnet20, training and inference, fused and not, f16 and
 * bf16, among them the f32 stem's conv2d_bn_train with an f16/bf16 y and
 * its batchnorm_relu_bwd with an f16/bf16 dy, and the f32 stem's
 * conv2d_bn_stats writing zc, its statistics pass writing the copy: at
 * least one of each) gets its kernels from cg_kernels_emit, with launches that make
 * sense (names k<node>_..., grids and blocks in range, arguments naming
 * existing tensors or scratch inside scratch_bytes, a convolution exactly
 * on conv nodes and, but in the linear.cu variants, on linear ops as a 1x1
 * one: check_linear), and each graph's sources, concatenated as the executor
 * does, compile as one NVRTC program for sm_90 without a warning, holding
 * every kernel.  Needs libnvrtc, not a GPU: without it, skipped (77).
 * Usage: test_kernels_nvrtc SOURCE_ROOT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kerntest.h"
#include "cg_nvrtc.h"

static char err[1 << 16];
static int stem_mixed[2];      /* kerntest_stem_mixed nodes emitted: conv2d_bn_train, batchnorm_relu_bwd */
static int folded[2];          /* convolutions run folded (s2d.cu): forward, weight gradient */
static int stem_mmas;          /* inference stems on stem_conv.cu's tensor-core kernel */
static int dbn_nodes;          /* conv2d_bwd_data_bn_relu nodes whose launches check_dbn checked */
static int pool_bn_nodes;      /* maxpool_bn_relu_bwd nodes checked */
static int pool_win_nodes;     /* maxpool_bwd_win nodes checked */
static int zc_nodes;           /* conv2d_bn_stats nodes writing zc checked */
static int bn_win_nodes[2];    /* batchnorm_relu_bwd_win nodes checked: gathering pixel by pixel, by cells */
static int linear_cu;          /* the graph's linear ops on linear.cu (KerntestGraph.linear_cu) */
static int linear_nodes[2][3]; /* [on cuDNN][linear, linear_bwd_data, linear_bwd_weight] checked */
static int fp8_grads;          /* FP8 data and weight gradients whose widening fp8_widened checked */
static int requant_nodes;      /* requantized i8 results (pass requant) checked */
static int residual_i8_nodes;  /* convolutions adding an i8 or a scaled residual (a copy first) checked */
static int outscale_nodes;     /* of them, those with the out scale's form (CG_EPI_OUTSCALE) */
static int sync_packs[2];      /* synchronized batch norm's PACK launches checked: statistics, backward */
static int kept_nodes[2];      /* inference batch norms checked: finalized once, read by an epilogue, by an i8 qscale */

static int arg_is(const CgKArg *a, CgKArgKind kind, int index) {
  return a->kind == kind && (kind == CG_KARG_SCRATCH ? a->offset == (size_t)index : a->index == index);
}

/* conv2d_bwd_data_bn_relu (dy, w, beta, z, gamma, mean, invstd): the data
 * gradient into dz; cuDNN's dbn buffers; then either one FUSED launch
 * (dz = a*dz + b*z + c, in place, a b c in scratch 0) or the batch norm's
 * three backward launches (UNFUSED), reading dz as their gradient and
 * writing it in place. */
static void check_dbn(const CgKNode *k, const char *gname, int i) {
  static const struct {
    CgKArgKind kind;
    int index;
  } BN[CG_KBN_COUNT] = {
      [CG_KBN_Z] = {CG_KARG_IN, 3},      [CG_KBN_MEAN] = {CG_KARG_IN, 5},    [CG_KBN_INVSTD] = {CG_KARG_IN, 6},
      [CG_KBN_GAMMA] = {CG_KARG_IN, 4},  [CG_KBN_BETA] = {CG_KARG_IN, 2},    [CG_KBN_DGAMMA] = {CG_KARG_OUT, 1},
      [CG_KBN_DBETA] = {CG_KARG_OUT, 2}, [CG_KBN_ABC] = {CG_KARG_SCRATCH, 0}};
  int ok = k->has_conv && k->conv.kind == CG_CONV_BWD_DATA && k->conv.dbn && !k->conv.epilogue &&
           arg_is(&k->conv_x, CG_KARG_OUT, 0) && arg_is(&k->conv_y, CG_KARG_IN, 0) &&
           arg_is(&k->conv_w, CG_KARG_IN, 1) && k->scratch_bytes >= (size_t)12 * k->conv.c;
  for (int b = 0; b < CG_KBN_COUNT; b++) ok = ok && arg_is(&k->conv_bn[b], BN[b].kind, BN[b].index);
  CHECK(ok, "%s node %d: the dbn convolution's tensors", gname, i);
  int fused = 0, unfused = 0;
  for (int l = 0; l < k->nlaunch; l++) {
    const CgKLaunch *L = &k->launch[l];
    const CgKArg *last = &L->args[L->nargs - 1];
    fused += L->when == CG_K_FUSED;
    unfused += L->when == CG_K_UNFUSED;
    if (L->when == CG_K_FUSED)
      CHECK(strstr(L->name, "apply_abc") && L->nargs == 4 && arg_is(&L->args[0], CG_KARG_OUT, 0) &&
                arg_is(&L->args[1], CG_KARG_IN, 3) && arg_is(&L->args[2], CG_KARG_SCRATCH, 0) &&
                arg_is(last, CG_KARG_OUT, 0),
            "%s node %d: %s applies a, b, c to dz in place", gname, i, L->name);
    else
      CHECK(L->when == CG_K_UNFUSED && !L->before, "%s node %d: %s runs only without cuDNN's dbn", gname, i, L->name);
  }
  const CgKLaunch *sums = &k->launch[1], *apply = &k->launch[k->nlaunch - 1];
  CHECK(fused == 1 && unfused == 3 && k->launch[0].when == CG_K_FUSED && arg_is(&sums->args[0], CG_KARG_OUT, 0) &&
            arg_is(&sums->args[1], CG_KARG_IN, 3) && arg_is(&apply->args[0], CG_KARG_OUT, 0) &&
            arg_is(&apply->args[apply->nargs - 1], CG_KARG_OUT, 0),
        "%s node %d: %d fused and %d unfused launches; the sums and the apply read dz and z, the apply writes dz",
        gname, i, fused, unfused);
  dbn_nodes++;
}

/* Synchronized batch norm (the sync_bn switch, kerntest_opts): each PACK
 * launch (sum_f64 = 2C + 1 doubles at its last argument, in the node's
 * scratch) is followed by a finalize of its `when` (or of every run: the
 * GenStats and kernel sums' packs share it) that reads those
 * sums (NETC_FIN_SYNC), and no finalize of the statistics or the backward
 * reads partials of this rank alone; cuDNN's batch-norm backward (dbn) is
 * never asked.  Without the switch no launch has sums to add. */
static void check_sync(const IrNode *n, const CgKNode *k, const char *gname, int i) {
  int sync = kerntest_opts()->sync_bn, packs[2] = {0, 0}; /* those that run without GenStats, with it */
  CHECK(!sync || !k->has_conv || !k->conv.dbn, "%s node %d: cuDNN's batch-norm backward with sync_bn", gname, i);
  for (int l = 0; l < k->nlaunch; l++)
    if (k->launch[l].sum_f64) {
      packs[0] += k->launch[l].when != CG_K_FUSED;
      packs[1] += k->launch[l].when != CG_K_UNFUSED;
    }
  CHECK(packs[0] <= 1 && packs[1] <= 1, "%s node %d: %d and %d packs run (kernel sums, GenStats): one sum each way",
        gname, i, packs[0], packs[1]);
  for (int l = 0; l < k->nlaunch; l++) {
    const CgKLaunch *L = &k->launch[l];
    const char *fin = strstr(L->name, "_finalize");
    if (!sync) {
      CHECK(L->sum_f64 == 0 && !strstr(L->name, "_pack"), "%s node %d: %s has sums for the ranks without sync_bn",
            gname, i, L->name);
      continue;
    }
    /* a training finalize (the inference batch norm's and channel_sum's read no partials of the batch's
     * statistics) must come from the ranks' sums */
    int train = fin && n->op != IR_OP_BATCHNORM && n->op != IR_OP_CONV2D_BN && n->op != IR_OP_CHANNEL_SUM;
    if (train)
      CHECK(strstr(L->name, "_finalize_ranks_"), "%s node %d: %s finalizes this rank's sums alone", gname, i, L->name);
    if (!L->sum_f64) continue;
    const CgKArg *buf = &L->args[L->nargs - 1];
    int bwd = L->nargs == 4, C = (L->sum_f64 - 1) / 2;
    const CgKLaunch *F = NULL;
    for (int m = l + 1; m < k->nlaunch && !F; m++)
      if ((k->launch[m].when == L->when || k->launch[m].when == CG_K_ALWAYS) &&
          strstr(k->launch[m].name, "_finalize_ranks_"))
        F = &k->launch[m];
    const CgKArg *part = F ? &F->args[bwd ? 0 : 1] : NULL;
    CHECK(strstr(L->name, "_pack") && L->sum_f64 % 2 == 1 && C > 0 && (L->nargs == 3 || bwd) &&
              buf->kind == CG_KARG_SCRATCH && buf->offset % 256 == 0 &&
              buf->offset + (size_t)L->sum_f64 * sizeof(double) <= k->scratch_bytes &&
              (!bwd || (arg_is(&L->args[1], CG_KARG_OUT, 1) && arg_is(&L->args[2], CG_KARG_OUT, 2))) && F && part &&
              part->kind == CG_KARG_SCRATCH && part->offset == buf->offset &&
              strstr(k->source, "#define NETC_FIN_SYNC 1"),
          "%s node %d: %s packs %d doubles in scratch for the ranks, and a finalize of its own reads them", gname, i,
          L->name, L->sum_f64);
    sync_packs[bwd]++;
  }
}

static int is_conv(IrOp op) {
  return op == IR_OP_CONV2D || op == IR_OP_CONV2D_BN_TRAIN || op == IR_OP_CONV2D_BN || op == IR_OP_CONV2D_BWD_DATA ||
         op == IR_OP_CONV2D_BWD_WEIGHT || op == IR_OP_CONV2D_BWD_DATA_RELU || op == IR_OP_CONV2D_BN_STATS ||
         op == IR_OP_CONV2D_BWD_DATA_BN_RELU;
}

static int is_linear(IrOp op) {
  return op == IR_OP_LINEAR || op == IR_OP_LINEAR_BWD_DATA || op == IR_OP_LINEAR_BWD_WEIGHT;
}

/* A linear op on cuDNN: the 1x1 convolution of [N,1,1,C] by [K,1,1,C] in
 * the node's dtype (strict FP32 for f32), its forward roles x, w, y as
 * cg_kernels.c's linear_roles; a linear's bias then added in place
 * (chan_apply.cu bias), nothing else launched.  On linear.cu: one launch. */
static void check_linear(const IrGraph *g, int i, const CgKNode *k, const char *gname) {
  const IrNode *n = &g->node[i];
  int op = n->op == IR_OP_LINEAR ? 0 : n->op == IR_OP_LINEAR_BWD_DATA ? 1 : 2, bias = op == 0 && n->nin == 3;
  linear_nodes[k->has_conv][op]++;
  if (!k->has_conv) {
    CHECK(k->nlaunch == 1 && strstr(k->source, "#define NETC_SAM"), "%s node %d: linear.cu's one launch", gname, i);
    return;
  }
  static const struct {
    CgConvKind kind;
    CgKArgKind x, w, y;
    int xi, wi, yi;
  } R[3] = {{CG_CONV_FWD, CG_KARG_IN, CG_KARG_IN, CG_KARG_OUT, 0, 1, 0},
            {CG_CONV_BWD_DATA, CG_KARG_OUT, CG_KARG_IN, CG_KARG_IN, 0, 1, 0},
            {CG_CONV_BWD_FILTER, CG_KARG_IN, CG_KARG_OUT, CG_KARG_IN, 1, 0, 0}};
  const CgConvDesc *d = &k->conv;
  const IrType *tx = &g->val[R[op].x == CG_KARG_IN ? n->in[R[op].xi] : n->out[R[op].xi]].type;
  const IrType *tw = &g->val[R[op].w == CG_KARG_IN ? n->in[R[op].wi] : n->out[R[op].wi]].type;
  CHECK(d->kind == R[op].kind && arg_is(&k->conv_x, R[op].x, R[op].xi) && arg_is(&k->conv_w, R[op].w, R[op].wi) &&
            arg_is(&k->conv_y, R[op].y, R[op].yi),
        "%s node %d: the linear op's convolution kind %d and tensors", gname, i, d->kind);
  CHECK(d->n == (g->plan_batch > 0 ? g->plan_batch : 3) && d->h == 1 && d->w == 1 && d->c == tx->dim[1] &&
            d->k == tw->dim[0] && d->r == 1 && d->s == 1 && d->ho == 1 && d->wo == 1 && d->stride[0] == 1 &&
            d->stride[1] == 1 && d->pad[0] == 0 && d->pad[1] == 0 && d->dilation[0] == 1 && d->dilation[1] == 1 &&
            d->groups == 1,
        "%s node %d: linear as a 1x1 convolution: n%d c%d h%d w%d k%d r%d s%d", gname, i, d->n, d->c, d->h, d->w, d->k,
        d->r, d->s);
  CHECK(d->dtype == tx->dtype && !d->tf32 && !d->genstats && !d->prologue && !d->epilogue && !d->dbn,
        "%s node %d: the linear op's convolution in %s, nothing fused", gname, i, ir_dtype_name(d->dtype));
  const CgKLaunch *L = &k->launch[0];
  CHECK(bias ? k->nlaunch == 1 && strstr(L->name, "_bias_") && L->when == CG_K_ALWAYS && !L->before && L->nargs == 3 &&
                   arg_is(&L->args[0], CG_KARG_OUT, 0) && arg_is(&L->args[1], CG_KARG_IN, 2) &&
                   arg_is(&L->args[2], CG_KARG_OUT, 0) && strstr(k->source, "#define NETC_APPLY_BIAS 1")
             : k->nlaunch == 0,
        "%s node %d: %d launches after the linear op's convolution (bias %d)", gname, i, k->nlaunch, bias);
}

static int contains(const char *hay, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(hay + i, needle, k) == 0) return 1;
  return 0;
}

static void check_arg(const IrNode *n, const CgKNode *k, const char *what, const CgKArg *a) {
  if (a->kind == CG_KARG_KEPT)
    CHECK(a->offset % 256 == 0 && a->offset < k->kept_bytes, "%s: kept offset %zu of %zu", what, a->offset,
          k->kept_bytes);
  else if (a->kind == CG_KARG_IN)
    CHECK(a->index >= 0 && a->index < n->nin, "%s: input %d of %d", what, a->index, n->nin);
  else if (a->kind == CG_KARG_OUT)
    CHECK(a->index >= 0 && a->index < n->nout, "%s: output %d of %d", what, a->index, n->nout);
  else
    CHECK(a->kind == CG_KARG_SCRATCH && a->offset % 256 == 0 &&
              (a->offset < k->scratch_bytes || (k->pro_bytes && a->offset == k->pro_offset) ||
               (k->qout_bytes && a->offset == k->qout_offset) || (k->rin_bytes && a->offset == k->rin_offset)),
          "%s: scratch offset %zu of %zu", what, a->offset, k->scratch_bytes);
}

/* An FP8 data or weight gradient (node i reads an f8e5m2 gradient): its
 * first two launches write the f32 copies of its two FP8 operands
 * (dequant.cu, before the convolution) into scratch, where its TF32
 * convolution reads them.  Checks that, and writes into *rest the node as
 * it would be without them (its launches after, its convolution on the IR's
 * tensors), for the checks every node gets. */
static int fp8_widened(const IrGraph *g, int i, const CgKNode *k, const char *gname, CgKNode *rest) {
  const IrNode *n = &g->node[i];
  if (!k->has_conv || k->conv.kind == CG_CONV_FWD || g->val[n->in[0]].type.dtype != IR_DT_F8E5M2) return 0;
  int wgrad = k->conv.kind == CG_CONV_BWD_FILTER, ok = k->nlaunch >= 2;
  for (int l = 0; ok && l < 2; l++) {
    const CgKLaunch *L = &k->launch[l];
    ok = L->before && L->when == CG_K_ALWAYS && strstr(L->name, "_dq_") && L->nargs == 2 &&
         arg_is(&L->args[0], CG_KARG_IN, l) && L->args[1].kind == CG_KARG_SCRATCH;
  }
  const CgKArg *operand = wgrad ? &k->conv_x : &k->conv_w;
  ok = ok && k->conv.dtype == IR_DT_F32 && k->conv.ydtype == IR_DT_F32 && k->conv.tf32 &&
       k->conv_y.kind == CG_KARG_SCRATCH && k->conv_y.offset == k->launch[0].args[1].offset &&
       operand->kind == CG_KARG_SCRATCH && operand->offset == k->launch[1].args[1].offset &&
       k->launch[0].args[1].offset != k->launch[1].args[1].offset;
  CHECK(ok, "%s node %d: the FP8 gradient's operands widened into scratch for a TF32 convolution", gname, i);
  *rest = *k;
  rest->nlaunch = k->nlaunch - 2;
  for (int l = 0; l < rest->nlaunch; l++) rest->launch[l] = k->launch[l + 2];
  rest->conv_y = (CgKArg){CG_KARG_IN, 0, 0};
  *(wgrad ? &rest->conv_x : &rest->conv_w) = (CgKArg){CG_KARG_IN, 1, 0};
  fp8_grads++;
  return 1;
}

/* Structure of node i's kernels; appends its source to *all. */
/* A `once` launch (run when the weights change, not in the step) reads
 * only parameters and state and writes only kept memory: an inference
 * batch norm's finalize, whose coefficients the apply launch (and the
 * epilogue's scale and bias the convolution) then read from there; kept
 * memory is written by nothing else.  A quantized convolution's qscale
 * reads the kept scale and bias in the step and writes the epilogue's into
 * scratch (x's scale is the step's). */
static void check_once(const IrGraph *g, int i, const CgKNode *k, const char *gname) {
  const IrNode *n = &g->node[i];
  int once = 0, fin = 0, quant = k->has_conv && (k->conv.dtype == IR_DT_I8 || k->conv.dtype == IR_DT_F8E4M3);
  for (int l = 0; l < k->nlaunch; l++) {
    const CgKLaunch *L = &k->launch[l];
    int writes_kept = 0, reads_step = 0;
    for (int a = 0; a < L->nargs; a++) {
      const CgKArg *A = &L->args[a];
      writes_kept |= A->kind == CG_KARG_KEPT && a == L->nargs - 1;
      reads_step |= A->kind == CG_KARG_SCRATCH || A->kind == CG_KARG_OUT ||
                    (A->kind == CG_KARG_IN && !ir_value_is_weight(g, n->in[A->index]));
    }
    fin += strstr(L->name, "_finalize_") &&
           (n->op == IR_OP_CONV2D_BN || n->op == IR_OP_BATCHNORM || n->op == IR_OP_MAXPOOL_BN_RELU_INFER);
    if (!L->once) {
      CHECK(!writes_kept, "%s node %d: %s writes kept memory in the step", gname, i, L->name);
      continue;
    }
    once++;
    CHECK(writes_kept && !reads_step && strstr(L->name, "_finalize_"),
          "%s node %d: once launch %s reads what the step writes, or writes outside kept memory", gname, i, L->name);
  }
  int qscale_from_kept = 0;
  for (int l = 0; l < k->nlaunch; l++)
    if (strstr(k->launch[l].name, "_qscale_") && !k->launch[l].once && k->launch[l].nargs >= 4)
      qscale_from_kept += k->launch[l].args[2].kind == CG_KARG_KEPT && k->launch[l].args[3].kind == CG_KARG_SCRATCH;
  if (fin) {
    int epi = k->has_conv && (k->conv.epilogue & CG_EPI_AFFINE);
    CHECK(once == 1 && k->kept_bytes > 0 && (!epi || k->conv_esb.kind == (quant ? CG_KARG_SCRATCH : CG_KARG_KEPT)) &&
              qscale_from_kept == quant,
          "%s node %d: the inference batch norm's finalize once into kept memory, read by %s (%d once launches, %zu "
          "kept bytes)",
          gname, i, quant ? "the qscale in the step" : "the epilogue", once, k->kept_bytes);
    kept_nodes[quant] += 1;
  }
}

static void check_node(const IrGraph *g, int i, const CgKNode *k, char **all, size_t *len, const char *gname) {
  const IrNode *n = &g->node[i];
  const char *op = ir_op_info(n->op)->name;
  static CgKNode rest; /* large: not on the stack */
  const CgKNode *whole = k;
  if (fp8_widened(g, i, k, gname, &rest)) k = &rest;
  /* an inference stem on stem_conv.cu: one launch from x and w as they are into y, no cuDNN plan */
  int mma = k->nlaunch == 1 && strstr(k->launch[0].name, "_mma_") != NULL;
  if (mma) {
    const CgKLaunch *L = &k->launch[0];
    stem_mmas++;
    CHECK(n->op == IR_OP_CONV2D && n->nin == 2 && L->nargs == 3 && arg_is(&L->args[0], CG_KARG_IN, 0) &&
              arg_is(&L->args[1], CG_KARG_IN, 1) && arg_is(&L->args[2], CG_KARG_OUT, 0) && L->smem > 0 &&
              L->smem <= 96 * 1024 && L->block[0] % 32 == 0 && k->scratch_bytes == 0 && !L->once,
          "%s node %d (%s): the tensor-core stem's launch", gname, i, op);
  }
  int on_cudnn = (is_conv(n->op) && !mma) || (is_linear(n->op) && !linear_cu);
  CHECK(k->has_conv == on_cudnn, "%s node %d (%s): has_conv %d", gname, i, op, k->has_conv);
  if (k->has_conv) {
    check_arg(n, k, "conv x", &k->conv_x);
    check_arg(n, k, "conv w", &k->conv_w);
    check_arg(n, k, "conv y", &k->conv_y);
    if (k->conv.prologue) check_arg(n, k, "conv sb", &k->conv_sb);
    if (k->conv.epilogue & CG_EPI_AFFINE) check_arg(n, k, "conv epilogue scale and bias", &k->conv_esb);
    if (k->conv.epilogue & CG_EPI_RESIDUAL) check_arg(n, k, "conv residual", &k->conv_res);
    if (k->conv.epilogue & CG_EPI_DRELU) check_arg(n, k, "conv relu mask", &k->conv_mask);
    for (int b = 0; k->conv.dbn && b < CG_KBN_COUNT; b++) check_arg(n, k, "conv dbn buffer", &k->conv_bn[b]);
    CHECK(k->conv.n > 0 && k->conv.c > 0 && k->conv.k > 0 && k->conv.ho > 0 && k->conv.groups >= 1,
          "%s node %d: conv shape", gname, i);
  }
  int none =
      (n->op == IR_OP_CONV2D_BWD_WEIGHT || n->op == IR_OP_CONV2D_BWD_DATA || (n->op == IR_OP_CONV2D && n->nin == 2)) &&
      ir_conv_prologue(g, n) < 0;
  if (is_linear(n->op)) {
    check_linear(g, i, k, gname);
    none = k->has_conv && !(n->op == IR_OP_LINEAR && n->nin == 3);
  }
  /* a folded convolution: its x (and w) folded first, a weight gradient unfolded last */
  int fold = k->nlaunch > 0 && strstr(k->launch[0].name, "_s2d_x_") != NULL;
  if (fold) {
    int wgrad = n->op == IR_OP_CONV2D_BWD_WEIGHT;
    folded[wgrad]++;
    CHECK(k->launch[0].before && k->conv.stride[0] == 1 && k->conv.c == 16 && k->conv_x.kind == CG_KARG_SCRATCH &&
              k->conv_w.kind == CG_KARG_SCRATCH &&
              (wgrad ? k->nlaunch == 2 && strstr(k->launch[1].name, "_s2d_dw_") : k->launch[1].before != 0),
          "%s node %d (%s): folded convolution's launches", gname, i, op);
  }
  CHECK(none && !fold && !mma ? k->nlaunch == 0 : k->nlaunch > 0, "%s node %d (%s): %d launches", gname, i, op,
        k->nlaunch);
  CHECK((whole->nlaunch > 0) == (whole->source != NULL), "%s node %d: source without launches or back", gname, i);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "k%d_%s", i, op);
  for (int l = 0; l < k->nlaunch; l++) {
    const CgKLaunch *L = &k->launch[l];
    unsigned threads = L->block[0] * L->block[1] * L->block[2];
    CHECK(strncmp(L->name, prefix, strlen(prefix)) == 0, "%s: kernel %s is not named %s...", gname, L->name, prefix);
    CHECK(k->source && strstr(k->source, L->name), "%s: %s not in the node's source", gname, L->name);
    CHECK(L->grid[0] >= 1 && L->grid[1] >= 1 && L->grid[2] >= 1 && L->grid[1] < 65536, "%s: %s grid", gname, L->name);
    CHECK(threads >= 1 && threads <= 1024 && (L->smem == 0 || mma), "%s: %s block of %u", gname, L->name, threads);
    CHECK(L->nargs >= 1 && L->nargs <= CG_K_MAX_ARGS, "%s: %s has %d args", gname, L->name, L->nargs);
    for (int a = 0; a < L->nargs; a++) check_arg(n, k, L->name, &L->args[a]);
  }
  check_once(g, i, k, gname);
  check_sync(n, k, gname, i);
  if (n->op == IR_OP_CONV2D_BWD_DATA_BN_RELU && !kerntest_opts()->sync_bn) check_dbn(k, gname, i);
  if (ir_attr_find(n, "y_scale")) { /* pass requant: i8 written by the plan, or f16 in scratch and a cast launch */
    const CgKLaunch *L = &k->launch[k->nlaunch - 1];
    CgKArg q = {CG_KARG_SCRATCH, 0, k->qout_offset};
    int qscale = 0;
    for (int l = 0; l < k->nlaunch; l++) qscale += k->launch[l].before && strstr(k->launch[l].name, "_qscale_") != NULL;
    CHECK(k->conv.ydtype == IR_DT_I8 && arg_is(&k->conv_y, CG_KARG_OUT, 0) && qscale == 1 && k->source &&
              strstr(k->source, "#define NETC_QS_OUT ") && k->qout_offset >= k->scratch_bytes &&
              k->qout_bytes == (size_t)2 * ir_type_numel(&g->val[n->out[0]].type, g->plan_batch) &&
              L->when == CG_K_QOUT_UNFUSED && !L->before && L->nargs == 3 &&
              arg_is(&L->args[0], q.kind, (int)q.offset) && arg_is(&L->args[2], CG_KARG_OUT, 0),
          "%s node %d: the requantized result: i8 from the plan, or f16 at the qout offset rounded by the last launch",
          gname, i);
    requant_nodes++;
  }
  if (k->rin_bytes) { /* an i8 residual: the plan adds it, or its scaled f16 copy a launch made before */
    int copies = 0, r = ir_conv_residual(g, n);
    for (int l = 0; l < k->nlaunch; l++) {
      const CgKLaunch *L = &k->launch[l];
      if (L->when != CG_K_RES_UNFUSED) continue;
      copies++;
      CHECK(L->before && L->nargs == 2 && r >= 0 && arg_is(&L->args[0], CG_KARG_IN, r) &&
                L->args[1].kind == CG_KARG_SCRATCH && L->args[1].offset == k->rin_offset &&
                strstr(k->source, "#define NETC_DQ_SCALED 1"),
            "%s node %d: %s copies the i8 residual, scaled, before the convolution", gname, i, L->name);
    }
    /* a float residual into a requantized result: the plan with the out scale adds it as it is (rscale 1), the
     * copy (scaled by 1/S) is for a plan without; qscale writes both forms of the epilogue's vectors */
    int outscale = (k->conv.epilogue & CG_EPI_OUTSCALE) != 0;
    CHECK(copies == 1 && (k->conv.rdtype == IR_DT_I8 || k->conv.rscale != 1.0f || outscale) && k->conv.rscale > 0 &&
              k->rin_offset >= k->scratch_bytes && (!k->qout_bytes || k->qout_offset >= k->rin_offset + k->rin_bytes),
          "%s node %d: one residual copy, past the rest and before the result's", gname, i);
    CHECK(!outscale || (k->conv.rdtype != IR_DT_I8 && k->conv.rscale == 1.0f && k->conv.ydtype == IR_DT_I8 &&
                        strstr(k->source, "#define NETC_QS_OUTSCALE 1") &&
                        k->conv_esb.offset + (size_t)5 * k->conv.k * sizeof(float) <= k->scratch_bytes),
          "%s node %d: the out scale's form: the float residual as it is, five vectors of K in esb", gname, i);
    outscale_nodes += outscale;
    residual_i8_nodes++;
  }
  if (n->op == IR_OP_MAXPOOL_BN_RELU) {
    const CgKLaunch *L = &k->launch[0];
    int ok = k->nlaunch == 1 && L->nargs == 7 && arg_is(&L->args[5], CG_KARG_OUT, 0) &&
             arg_is(&L->args[6], CG_KARG_OUT, 1) && k->source && strstr(k->source, "#define NETC_POOL_BN 1") &&
             strstr(k->source, "#define NETC_POOL_MAX 1") && strstr(k->source, "#define NETC_POOL_WIN 1");
    for (int a = 0; ok && a < 5; a++) ok = arg_is(&L->args[a], CG_KARG_IN, a);
    CHECK(ok, "%s node %d: the max pool recomputes its input from z and the statistics, and writes the winners", gname,
          i);
  }
  if (n->op == IR_OP_MAXPOOL_BWD_WIN) {
    const CgKLaunch *L = &k->launch[0];
    int ok = k->nlaunch == 1 && L->nargs == 3 && arg_is(&L->args[0], CG_KARG_IN, 0) &&
             arg_is(&L->args[1], CG_KARG_IN, 1) && arg_is(&L->args[2], CG_KARG_OUT, 0) && k->source &&
             strstr(k->source, "#define NETC_POOL_MAX_BWD 1") && !strstr(k->source, "#define NETC_POOL_MAX_ARG");
    CHECK(ok, "%s node %d: the max-pool backward gathers by the forward's winners, one launch", gname, i);
    pool_win_nodes++;
  }
  if (n->op == IR_OP_BATCHNORM_RELU_BWD_WIN) {
    /* sums and apply gather dy by the winners (input 1) */
    const CgKLaunch *sums = &k->launch[0], *apply = &k->launch[k->nlaunch - 1]; /* a PACK between with sync_bn */
    int cells =
        k->source && strstr(k->source, "#define NETC_PBB_SUMS 1") && strstr(k->source, "#define NETC_PBB_APPLY 1");
    int ok = k->nlaunch == 3 + kerntest_opts()->sync_bn && sums->nargs == 8 && apply->nargs == 6 &&
             arg_is(&sums->args[0], CG_KARG_IN, 0) && arg_is(&sums->args[1], CG_KARG_IN, 1) &&
             arg_is(&apply->args[1], CG_KARG_IN, 1) && arg_is(&apply->args[5], CG_KARG_OUT, 0) && k->source &&
             (cells || (strstr(k->source, "#define NETC_GATHER 1") && strstr(k->source, "#define NETC_RED_BWD 1") &&
                        strstr(k->source, "#define NETC_APPLY_BWD 1")));
    CHECK(ok, "%s node %d: the batch norm's backward gathers the max pool's gradient in its sums and apply", gname, i);
    bn_win_nodes[cells]++;
  }
  if (n->op == IR_OP_MAXPOOL_BN_RELU_BWD) {
    const CgKLaunch *arg = &k->launch[0], *gather = &k->launch[1];
    int ok = k->nlaunch == 2 && strstr(arg->name, "_arg_") && arg->nargs == 6 && gather->nargs == 3 && k->source &&
             strstr(k->source, "#define NETC_POOL_BN 1") && arg_is(&gather->args[0], CG_KARG_IN, 0) &&
             arg_is(&gather->args[1], CG_KARG_SCRATCH, 0) && arg_is(&gather->args[2], CG_KARG_OUT, 0) &&
             arg_is(&arg->args[5], CG_KARG_SCRATCH, 0);
    for (int a = 0; ok && a < 5; a++) ok = arg_is(&arg->args[a], CG_KARG_IN, a + 1);
    CHECK(ok, "%s node %d: the max pool backward recomputes y from z and the statistics, then gathers dy", gname, i);
    pool_bn_nodes++;
  }
  if (n->op == IR_OP_CONV2D_BN_STATS && n->nout == 5) { /* zc written by the statistics pass, z read once */
    const CgKLaunch *L = NULL;
    for (int l = 0; l < k->nlaunch; l++)
      if (strncmp(k->launch[l].name + strlen(prefix), "_stats_", 7) == 0) L = &k->launch[l];
    CHECK(L && L->nargs == 3 && arg_is(&L->args[0], CG_KARG_OUT, 0) && arg_is(&L->args[1], CG_KARG_SCRATCH, 0) &&
              arg_is(&L->args[2], CG_KARG_OUT, 4) && k->source && strstr(k->source, "#define NETC_RED_COPY 1"),
          "%s node %d: the statistics pass reads z and writes its copy zc", gname, i);
    zc_nodes++;
  }
  if (n->op == IR_OP_CONV2D_BN_TRAIN && kerntest_stem_mixed(g, n))
    CHECK(k->source && strstr(k->source, "#define NETC_ROUND_X 1"),
          "%s node %d: the f32 stem's apply normalizes z rounded to y's dtype", gname, i);
  if (!k->source) return;
  size_t add = strlen(k->source);
  char *p = realloc(*all, *len + add + 1);
  if (!p) abort();
  memcpy(p + *len, k->source, add + 1);
  *all = p;
  *len += add;
}

static void check_graph(IrGraph *g, const char *name, CgDevice dev) {
  CHECK(g != NULL, "%s does not compile", name);
  if (!g) return;
  char *all = NULL;
  size_t len = 0;
  int nkernels = 0, ok = 1;
  CgKNode *k = calloc((size_t)g->nnode, sizeof *k);
  if (!k) abort();
  for (int i = 0; i < g->nnode; i++) {
    int rc = cg_kernels_emit(g, i, g->plan_batch > 0 ? g->plan_batch : 3, &dev, &k[i], err, sizeof err);
    CHECK(rc == 0, "%s node %d: %s", name, i, err);
    if (rc) {
      ok = 0;
      continue;
    }
    check_node(g, i, &k[i], &all, &len, name);
    if (kerntest_stem_mixed(g, &g->node[i])) stem_mixed[g->node[i].op == IR_OP_BATCHNORM_RELU_BWD]++;
    nkernels += k[i].nlaunch;
  }
  if (ok && all) {
    CgNvrtcOut o;
    CgStatus s = cg_nvrtc_compile(all, name, "sm_90", CG_NVRTC_CUBIN, NULL, 0, &o, err, sizeof err);
    CHECK(s == CG_OK, "%s: %s", name, err);
    if (s == CG_OK) {
      CHECK(o.log && o.log[0] == 0, "%s: NVRTC warned:\n%s", name, o.log ? o.log : "");
      for (int i = 0; i < g->nnode; i++)
        for (int l = 0; l < k[i].nlaunch; l++)
          CHECK(contains(o.image, o.size, k[i].launch[l].name), "%s: cubin lacks %s", name, k[i].launch[l].name);
      printf("%-28s %4d nodes %4d kernels  %7zu bytes of source  %8zu bytes of cubin\n", name, g->nnode, nkernels, len,
             o.size);
    }
    cg_nvrtc_out_free(&o);
  }
  for (int i = 0; i < g->nnode; i++) cg_kernels_free(&k[i]);
  free(k);
  free(all);
}

/* Errors name the node and op. */
static void check_errors(CgDevice dev) {
  Arena a;
  arena_init(&a);
  IrGraph *g = ir_graph_new(&a, "bad");
  int64_t d[4] = {IR_DIM_N, 4, 4, 8};
  int x = ir_value_add(g, IR_VAL_INPUT, ir_type(IR_DT_F32, IR_LAYOUT_NCHW, 4, d), "x");
  IrType t = ir_type(IR_DT_F32, IR_LAYOUT_NCHW, 4, d);
  int n = ir_node_add(g, IR_OP_MAXPOOL, "pool", (SrcLoc){0}, &x, 1, &t, 1);
  int64_t k2[2] = {1, 1};
  ir_attr_set_ints(g, n, "k", k2, 2);
  CgKNode k;
  CHECK(cg_kernels_emit(g, n, 2, &dev, &k, err, sizeof err) == -1, "NCHW maxpool emitted");
  CHECK(strstr(err, "node 0 (pool, op maxpool)") && strstr(err, "NHWC"), "message: %s", err);
  CHECK(k.source == NULL && k.nlaunch == 0, "failed emit left a source");
  CHECK(cg_kernels_emit(g, 5, 2, &dev, &k, err, sizeof err) == -1, "node 5 of 1 emitted");
  cg_kernels_free(NULL);
  arena_free(&a);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_kernels_nvrtc SOURCE_ROOT\n");
    return 2;
  }
  int major = 0, minor = 0;
  if (cg_nvrtc_version(&major, &minor, err, sizeof err) != CG_OK) return check_skip(err);
  setenv("NETC_S2D", "all", 1); /* every folded form compiles: the weight gradient's too */
  printf("NVRTC %d.%d\n", major, minor);
  CgDevice dev = kerntest_h200();
  int ng;
  const KerntestGraph *gs = kerntest_graphs(&ng);
  for (int i = 0; i <= ng; i++) {
    Arena a;
    arena_init(&a);
    linear_cu = i < ng && gs[i].linear_cu;
    if (i < ng)
      check_graph(kerntest_compile(&a, argv[1], &gs[i]), gs[i].name, dev);
    else
      check_graph(kerntest_extra(&a), "extra", dev);
    arena_free(&a);
  }
  check_errors(dev);
  CHECK(stem_mixed[0] > 0 && stem_mixed[1] > 0,
        "the graphs lack the f32 stem's mixed dtypes: %d conv2d_bn_train, %d batchnorm_relu_bwd", stem_mixed[0],
        stem_mixed[1]);
  printf("f32 stem with a narrow y: %d conv2d_bn_train, %d batchnorm_relu_bwd\n", stem_mixed[0], stem_mixed[1]);
  CHECK(folded[0] > 0 && folded[1] > 0, "no folded stem convolution: %d forward, %d weight gradient", folded[0],
        folded[1]);
  CHECK(stem_mmas > 0, "no inference stem on stem_conv.cu");
  printf("folded stem convolutions: %d forward, %d weight gradient; %d on tensor cores (stem_conv.cu)\n", folded[0],
         folded[1], stem_mmas);
  CHECK(dbn_nodes > 0, "no conv2d_bwd_data_bn_relu was emitted");
  CHECK(pool_bn_nodes > 0, "no maxpool_bn_relu_bwd was emitted");
  CHECK(pool_win_nodes > 0, "no maxpool_bwd_win was emitted");
  CHECK(zc_nodes > 0, "no conv2d_bn_stats writing zc was emitted");
  printf("conv2d_bn_stats writing zc: %d\n", zc_nodes);
  CHECK(bn_win_nodes[0] > 0 && bn_win_nodes[1] > 0,
        "batchnorm_relu_bwd_win emitted %d times gathering pixel by "
        "pixel and %d by cells: want both",
        bn_win_nodes[0], bn_win_nodes[1]);
  printf("data gradients with the batch norm's backward: %d\n", dbn_nodes);
  CHECK(fp8_grads > 0 && requant_nodes > 0 && residual_i8_nodes > 0 && outscale_nodes > 0,
        "FP8 gradients widened: %d, requantized results: %d, i8 residuals: %d (%d with the out scale); want all",
        fp8_grads, requant_nodes, residual_i8_nodes, outscale_nodes);
  printf("FP8 gradients widened: %d; requantized i8 results: %d; i8 residuals: %d (%d with the out scale)\n", fp8_grads,
         requant_nodes, residual_i8_nodes, outscale_nodes);
  CHECK(sync_packs[0] > 0 && sync_packs[1] > 0, "synchronized batch norm's packs: %d statistics, %d backward",
        sync_packs[0], sync_packs[1]);
  printf("synchronized batch norm's packs: %d statistics, %d backward\n", sync_packs[0], sync_packs[1]);
  CHECK(kept_nodes[0] > 0 && kept_nodes[1] > 0,
        "inference batch norms finalized once: %d read by an epilogue or kernel, %d by an i8 qscale; want both",
        kept_nodes[0], kept_nodes[1]);
  printf(
      "inference batch norms finalized once into kept memory: %d read by an epilogue or kernel, %d by an i8 qscale\n",
      kept_nodes[0], kept_nodes[1]);
  for (int c = 0; c < 2; c++)
    CHECK(linear_nodes[c][0] > 0 && linear_nodes[c][1] > 0 && linear_nodes[c][2] > 0,
          "on %s: %d linear, %d linear_bwd_data, %d linear_bwd_weight", c ? "cuDNN" : "linear.cu", linear_nodes[c][0],
          linear_nodes[c][1], linear_nodes[c][2]);
  printf("linear ops on cuDNN: %d fwd, %d bwd data, %d bwd weight; on linear.cu: %d, %d, %d\n", linear_nodes[1][0],
         linear_nodes[1][1], linear_nodes[1][2], linear_nodes[0][0], linear_nodes[0][1], linear_nodes[0][2]);
  return check_report();
}
