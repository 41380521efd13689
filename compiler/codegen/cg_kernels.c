/* cg_kernels.c - the generated CUDA kernels of one node of a final
 * graph (cg_kernels.h gives the contract; docs/codegen.md the kernel
 * list): the op table and the entry point.  Each op maps onto one to three
 * instantiations of the templates in codegen_templates/, with every shape
 * (batch included), dtype, attribute and vector width baked in as
 * #defines, plus the launch geometry and which of the node's tensors (or
 * scratch) each kernel parameter is.  The emitters live one family a file
 * (cg_emit.h has the map); cg_emit.c builds their launches.
 *
 * Adding an op: one entry in CG_EMIT_OPS below, one emitter
 * `int cg_emit_<family>_<op>(Emit *e)` (declared in cg_emit.h) in its
 * family's cg_emit_<family>.c.  An op without an entry makes
 * cg_kernels_emit fail with "op X has no GPU kernel yet". */
#include "cg_emit.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *layout_tag(const IrType *t) {
  switch (t->layout) {
  case IR_LAYOUT_NCHW: return "nchw";
  case IR_LAYOUT_NHWC: return "nhwc";
  case IR_LAYOUT_KCRS: return "kcrs";
  case IR_LAYOUT_KRSC: return "krsc";
  default: return "row";
  }
}

/* The emitter of each op, indexed by IrOp. */
static const CgEmitFn CG_EMIT_OPS[IR_OP_COUNT] = {
    [IR_OP_RELU] = cg_emit_eltwise,
    [IR_OP_ADD] = cg_emit_eltwise,
    [IR_OP_ADD_RELU] = cg_emit_eltwise,
    [IR_OP_RELU_BWD] = cg_emit_eltwise,
    [IR_OP_SUM_RELU_BWD] = cg_emit_eltwise,
    [IR_OP_CONV2D] = cg_emit_conv,
    [IR_OP_CONV2D_BWD_DATA] = cg_emit_conv,
    [IR_OP_CONV2D_BWD_WEIGHT] = cg_emit_conv,
    [IR_OP_CONV2D_BWD_DATA_RELU] = cg_emit_conv,
    [IR_OP_CONV2D_BWD_DATA_BN_RELU] = cg_emit_conv,
    [IR_OP_CONV2D_BN] = cg_emit_conv,
    [IR_OP_CONV2D_BN_TRAIN] = cg_emit_conv,
    [IR_OP_CONV2D_BN_STATS] = cg_emit_conv,
    [IR_OP_BATCHNORM] = cg_emit_bn_batchnorm,
    [IR_OP_BATCHNORM_TRAIN] = cg_emit_bn_batchnorm_train,
    [IR_OP_BATCHNORM_BWD] = cg_emit_bn_batchnorm_bwd,
    [IR_OP_BATCHNORM_RELU_BWD] = cg_emit_bn_batchnorm_relu_bwd,
    [IR_OP_BATCHNORM_RELU_BWD_WIN] = cg_emit_bn_batchnorm_relu_bwd_win,
    [IR_OP_CHANNEL_SUM] = cg_emit_bn_channel_sum,
    [IR_OP_MAXPOOL] = cg_emit_pool,
    [IR_OP_AVGPOOL] = cg_emit_pool,
    [IR_OP_GLOBAL_AVGPOOL] = cg_emit_pool,
    [IR_OP_MAXPOOL_BWD] = cg_emit_pool,
    [IR_OP_AVGPOOL_BWD] = cg_emit_pool,
    [IR_OP_GLOBAL_AVGPOOL_BWD] = cg_emit_pool,
    [IR_OP_MAXPOOL_BN_RELU_BWD] = cg_emit_pool,
    [IR_OP_MAXPOOL_BN_RELU] = cg_emit_pool,
    [IR_OP_MAXPOOL_BN_RELU_INFER] = cg_emit_pool,
    [IR_OP_MAXPOOL_BWD_WIN] = cg_emit_pool,
    [IR_OP_FLATTEN] = cg_emit_copy,
    [IR_OP_UNFLATTEN] = cg_emit_copy,
    [IR_OP_CAST] = cg_emit_copy_cast,
    [IR_OP_RELAYOUT] = cg_emit_copy_relayout,
    [IR_OP_LINEAR] = cg_emit_linear,
    [IR_OP_LINEAR_BWD_DATA] = cg_emit_linear,
    [IR_OP_LINEAR_BWD_WEIGHT] = cg_emit_linear,
    [IR_OP_SOFTMAX_CE] = cg_emit_loss_softmax_ce,
    [IR_OP_SOFTMAX_CE_BWD] = cg_emit_loss_softmax_ce,
    [IR_OP_SGD_UPDATE] = cg_emit_optim_sgd,
    [IR_OP_NONFINITE_CHECK] = cg_emit_optim_nonfinite_check,
    [IR_OP_LOSS_SCALE_UPDATE] = cg_emit_optim_loss_scale_update,
};

static int emit_node(Emit *e) {
  IrOp op = e->n->op;
  if ((unsigned)op >= IR_OP_COUNT || !CG_EMIT_OPS[op])
    return cg_emit_fail(e, "op %s has no GPU kernel yet", ir_op_info(op)->name);
  return CG_EMIT_OPS[op](e);
}

/* --- the entry points ----------------------------------------------------------- */

static NetcOpts defaults;
static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;
static void defaults_init(void) { opts_default(&defaults); }

const NetcOpts *cg_device_opts(const CgDevice *dev) {
  if (dev && dev->opts) return dev->opts;
  pthread_once(&defaults_once, defaults_init);
  return &defaults;
}

int cg_kernels_emit(const IrGraph *g, int node, int64_t batch, const CgDevice *dev, CgKNode *out, char *err,
                    size_t errlen) {
  if (!out) return -1;
  memset(out, 0, sizeof *out);
  if (!g || !dev || node < 0 || node >= g->nnode || batch < 1) {
    if (err && errlen) snprintf(err, errlen, "cg_kernels_emit: invalid argument");
    return -1;
  }
  const IrNode *n = &g->node[node];
  Emit e = {.g = g,
            .n = n,
            .node = node,
            .batch = batch,
            .dev = dev,
            .opts = cg_device_opts(dev),
            .k = out,
            .err = err,
            .errlen = errlen};
  const IrType *mt = n->op == IR_OP_CAST ? &g->val[n->out[0]].type
                     : n->nin > 0        ? &g->val[n->in[0]].type
                                         : &g->val[n->out[0]].type;
  e.dtype = ir_dtype_name(mt->dtype);
  e.layout = layout_tag(mt);
  if (emit_node(&e)) {
    free(e.src.p);
    memset(out, 0, sizeof *out);
    return -1;
  }
  out->source = e.src.p;
  return 0;
}

void cg_kernels_free(CgKNode *k) {
  if (!k) return;
  free(k->source);
  k->source = NULL;
}
