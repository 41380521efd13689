/* ir_ops.c - the op table: for each IR op its printed name, how many inputs
 * and outputs it takes, its attribute keys in print order, and which side
 * of the optimizer section's start it stands on (IrOpSection; the step's
 * side when not given).  The verifier, printer and reader consult this
 * table; nothing dispatches on an op through a chain of ifs. */
#include <string.h>

#include "ir.h"

/* clang-format off: the table is aligned by hand, one op a row */
static const IrOpInfo OPS[IR_OP_COUNT] = {
    /*                        name                    in     out attrs [section] */
    [IR_OP_CONV2D] = {"conv2d", 2, 3, 1, "k s p d groups"},
    [IR_OP_BATCHNORM] = {"batchnorm", 5, 5, 1, "eps momentum"},
    [IR_OP_RELU] = {"relu", 1, 1, 1, ""},
    [IR_OP_ADD] = {"add", 2, 2, 1, "", IR_SEC_EITHER},
    [IR_OP_MAXPOOL] = {"maxpool", 1, 1, 1, "k s p"},
    [IR_OP_AVGPOOL] = {"avgpool", 1, 1, 1, "k s p include_pad"},
    [IR_OP_GLOBAL_AVGPOOL] = {"global_avgpool", 1, 1, 1, ""},
    [IR_OP_FLATTEN] = {"flatten", 1, 1, 1, ""},
    [IR_OP_LINEAR] = {"linear", 2, 3, 1, ""},
    [IR_OP_SOFTMAX_CE] = {"softmax_cross_entropy", 2, 2, 1, "smoothing"},
    /* training forms */
    [IR_OP_BATCHNORM_TRAIN] = {"batchnorm_train", 5, 5, 3, "eps momentum"},
    [IR_OP_CONV2D_BWD_DATA] = {"conv2d_bwd_data", 2, 2, 1, "k s p d groups in_hw"},
    [IR_OP_CONV2D_BWD_WEIGHT] = {"conv2d_bwd_weight", 2, 3, 1, "k s p d groups"},
    [IR_OP_CHANNEL_SUM] = {"channel_sum", 1, 1, 1, ""},
    [IR_OP_BATCHNORM_BWD] = {"batchnorm_bwd", 5, 5, 3, ""},
    [IR_OP_RELU_BWD] = {"relu_bwd", 2, 2, 1, ""},
    [IR_OP_MAXPOOL_BWD] = {"maxpool_bwd", 2, 2, 1, "k s p"},
    [IR_OP_AVGPOOL_BWD] = {"avgpool_bwd", 1, 1, 1, "k s p include_pad in_hw"},
    [IR_OP_GLOBAL_AVGPOOL_BWD] = {"global_avgpool_bwd", 1, 1, 1, "in_hw"},
    [IR_OP_UNFLATTEN] = {"unflatten", 1, 1, 1, "shape"},
    [IR_OP_LINEAR_BWD_DATA] = {"linear_bwd_data", 2, 2, 1, ""},
    [IR_OP_LINEAR_BWD_WEIGHT] = {"linear_bwd_weight", 2, 2, 1, ""},
    [IR_OP_SOFTMAX_CE_BWD] = {"softmax_cross_entropy_bwd", 3, 3, 1, "smoothing"},
    [IR_OP_SGD_UPDATE] = {"sgd_update", 5, 6, 0, "momentum nesterov weight_decay", IR_SEC_OPTIMIZER},
    /* fused forms */
    [IR_OP_CONV2D_BN_TRAIN] = {"conv2d_bn_train", 6, 8, 4, "k s p d groups eps momentum relu"},
    [IR_OP_CONV2D_BN] = {"conv2d_bn", 6, 7, 1, "k s p d groups eps relu"},
    /* 4 results, or 5 with zc, z's narrower copy (pass prologue; ir_infer checks the count) */
    [IR_OP_CONV2D_BN_STATS] = {"conv2d_bn_stats", 6, 7, -1, "k s p d groups eps momentum"},
    [IR_OP_ADD_RELU] = {"add_relu", 2, 2, 1, ""},
    [IR_OP_BATCHNORM_RELU_BWD] = {"batchnorm_relu_bwd", 6, 6, 3, ""},
    [IR_OP_CONV2D_BWD_DATA_RELU] = {"conv2d_bwd_data_relu", 3, 4, 1, "k s p d groups in_hw"},
    [IR_OP_CONV2D_BWD_DATA_BN_RELU] = {"conv2d_bwd_data_bn_relu", 7, 7, 3, "k s p d groups in_hw"},
    [IR_OP_MAXPOOL_BN_RELU_BWD] = {"maxpool_bn_relu_bwd", 6, 6, 1, "k s p"},
    [IR_OP_MAXPOOL_BN_RELU] = {"maxpool_bn_relu", 5, 5, 2, "k s p"},
    [IR_OP_MAXPOOL_BWD_WIN] = {"maxpool_bwd_win", 2, 2, 1, "k s p in_hw"},
    [IR_OP_BATCHNORM_RELU_BWD_WIN] = {"batchnorm_relu_bwd_win", 7, 7, 3, "k s p in_hw"},
    [IR_OP_SUM_RELU_BWD] = {"sum_relu_bwd", 3, 3, 1, ""},
    [IR_OP_MAXPOOL_BN_RELU_INFER] = {"maxpool_bn_relu_infer", 5, 5, 1, "k s p eps"},
    /* layout and precision */
    [IR_OP_RELAYOUT] = {"relayout", 1, 1, 1, "layout c"},
    [IR_OP_CAST] = {"cast", 1, 2, 1, "to"},
    /* dynamic loss scaling; at most 15 tensors a check, so that a generated
     * kernel takes each as a parameter (CG_K_MAX_ARGS, with the flag) */
    [IR_OP_NONFINITE_CHECK] = {"nonfinite_check", 1, 15, 1, "", IR_SEC_OPTIMIZER},
    [IR_OP_LOSS_SCALE_UPDATE] = {"loss_scale_update", 3, 3, 0, "growth_interval backoff growth", IR_SEC_OPTIMIZER},
};
/* clang-format on */

const IrOpInfo *ir_op_info(IrOp op) { return (unsigned)op < IR_OP_COUNT ? &OPS[op] : NULL; }

int ir_op_parse(const char *name) {
  for (int i = 0; i < IR_OP_COUNT; i++)
    if (OPS[i].name && strcmp(OPS[i].name, name) == 0) return i;
  return -1;
}
