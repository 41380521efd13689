/* ir_ops.c - the op table: for each IR op its printed name, how many inputs
 * and outputs it takes, and its attribute keys in print order.  The
 * verifier, printer and reader consult this table; nothing dispatches on an
 * op through a chain of ifs. */
#include <string.h>

#include "ir.h"

static const IrOpInfo OPS[IR_OP_COUNT] = {
    /*                        name                    in     out attrs */
    [IR_OP_CONV2D]         = {"conv2d",                2, 3, 1, "k s p d groups"},
    [IR_OP_BATCHNORM]      = {"batchnorm",             5, 5, 1, "eps momentum"},
    [IR_OP_RELU]           = {"relu",                  1, 1, 1, ""},
    [IR_OP_ADD]            = {"add",                   2, 2, 1, ""},
    [IR_OP_MAXPOOL]        = {"maxpool",               1, 1, 1, "k s p"},
    [IR_OP_AVGPOOL]        = {"avgpool",               1, 1, 1, "k s p include_pad"},
    [IR_OP_GLOBAL_AVGPOOL] = {"global_avgpool",        1, 1, 1, ""},
    [IR_OP_FLATTEN]        = {"flatten",               1, 1, 1, ""},
    [IR_OP_LINEAR]         = {"linear",                2, 3, 1, ""},
    [IR_OP_SOFTMAX_CE]     = {"softmax_cross_entropy", 2, 2, 1, "smoothing"},
};

const IrOpInfo *ir_op_info(IrOp op) {
  return (unsigned)op < IR_OP_COUNT ? &OPS[op] : NULL;
}

int ir_op_parse(const char *name) {
  for (int i = 0; i < IR_OP_COUNT; i++)
    if (OPS[i].name && strcmp(OPS[i].name, name) == 0) return i;
  return -1;
}
