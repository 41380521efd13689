/* cg_kernels.c - the generated CUDA kernels of one node of a final
 * graph (cg_kernels.h gives the contract; docs/codegen.md the kernel
 * list).  Each op maps onto one to three instantiations of the templates in
 * codegen_templates/, with every shape (batch included), dtype, attribute
 * and vector width baked in as #defines, plus the launch geometry and which
 * of the node's tensors (or scratch) each kernel parameter is.  The
 * launches are built with cg_emit.c (cg_emit.h). */
#include "cg_emit.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_nvrtc.h"
#include "cg_text.h"

static const char *layout_tag(const IrType *t) {
  switch (t->layout) {
  case IR_LAYOUT_NCHW: return "nchw";
  case IR_LAYOUT_NHWC: return "nhwc";
  case IR_LAYOUT_KCRS: return "kcrs";
  case IR_LAYOUT_KRSC: return "krsc";
  default: return "row";
  }
}

/* --- the entry points ----------------------------------------------------------- */

static int emit_node(Emit *e) {
  switch (e->n->op) {
  case IR_OP_RELU:
  case IR_OP_ADD:
  case IR_OP_ADD_RELU:
  case IR_OP_RELU_BWD:
  case IR_OP_SUM_RELU_BWD: return cg_emit_eltwise(e);
  case IR_OP_CONV2D:
  case IR_OP_CONV2D_BWD_DATA:
  case IR_OP_CONV2D_BWD_WEIGHT:
  case IR_OP_CONV2D_BWD_DATA_RELU:
  case IR_OP_CONV2D_BWD_DATA_BN_RELU:
  case IR_OP_CONV2D_BN:
  case IR_OP_CONV2D_BN_TRAIN:
  case IR_OP_CONV2D_BN_STATS: return cg_emit_conv(e);
  case IR_OP_BATCHNORM: return cg_emit_bn_batchnorm(e);
  case IR_OP_BATCHNORM_TRAIN: return cg_emit_bn_batchnorm_train(e);
  case IR_OP_BATCHNORM_BWD: return cg_emit_bn_batchnorm_bwd(e);
  case IR_OP_BATCHNORM_RELU_BWD: return cg_emit_bn_batchnorm_relu_bwd(e);
  case IR_OP_BATCHNORM_RELU_BWD_WIN: return cg_emit_bn_batchnorm_relu_bwd_win(e);
  case IR_OP_CHANNEL_SUM: return cg_emit_bn_channel_sum(e);
  case IR_OP_MAXPOOL:
  case IR_OP_AVGPOOL:
  case IR_OP_GLOBAL_AVGPOOL:
  case IR_OP_MAXPOOL_BWD:
  case IR_OP_AVGPOOL_BWD:
  case IR_OP_GLOBAL_AVGPOOL_BWD:
  case IR_OP_MAXPOOL_BN_RELU_BWD:
  case IR_OP_MAXPOOL_BN_RELU:
  case IR_OP_MAXPOOL_BWD_WIN: return cg_emit_pool(e);
  case IR_OP_FLATTEN:
  case IR_OP_UNFLATTEN: return cg_emit_copy(e);
  case IR_OP_LINEAR:
  case IR_OP_LINEAR_BWD_DATA:
  case IR_OP_LINEAR_BWD_WEIGHT: return cg_emit_linear(e);
  case IR_OP_SOFTMAX_CE:
  case IR_OP_SOFTMAX_CE_BWD: return cg_emit_loss_softmax_ce(e);
  case IR_OP_SGD_UPDATE: return cg_emit_optim_sgd(e);
  case IR_OP_NONFINITE_CHECK: return cg_emit_optim_nonfinite_check(e);
  case IR_OP_LOSS_SCALE_UPDATE: return cg_emit_optim_loss_scale_update(e);
  case IR_OP_CAST: return cg_emit_copy_cast(e);
  case IR_OP_RELAYOUT: return cg_emit_copy_relayout(e);
  default: return cg_emit_fail(e, "op %s has no GPU kernel yet", ir_op_info(e->n->op)->name);
  }
}

static NetcOpts defaults;
static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;
static void defaults_init(void) { opts_default(&defaults); }

const NetcOpts *cg_device_opts(const CgDevice *dev) {
  if (dev && dev->opts) return dev->opts;
  pthread_once(&defaults_once, defaults_init);
  return &defaults;
}

int cg_kernels_emit(const IrGraph *g, int node, int64_t batch, const CgDevice *dev, CgKNode *out,
                        char *err, size_t errlen) {
  if (!out) return -1;
  memset(out, 0, sizeof *out);
  if (!g || !dev || node < 0 || node >= g->nnode || batch < 1) {
    if (err && errlen) snprintf(err, errlen, "cg_kernels_emit: invalid argument");
    return -1;
  }
  const IrNode *n = &g->node[node];
  Emit e = {.g = g, .n = n, .node = node, .batch = batch, .dev = dev, .opts = cg_device_opts(dev), .k = out,
            .err = err, .errlen = errlen};
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
