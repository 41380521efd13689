/* onnx_ops.c - the ONNX ops the conformance run covers, in report order.
 * A test is selected when its model is a single node of one of these
 * op_types; every other node test is out of scope. */
#include "onnx_case.h"

const OnnxOp ONNX_OPS[] = {
    {"Conv", onnx_op_conv},           {"BatchNormalization", onnx_op_batchnorm},
    {"Relu", onnx_op_relu},           {"MaxPool", onnx_op_maxpool},
    {"AveragePool", onnx_op_avgpool}, {"GlobalAveragePool", onnx_op_global_avgpool},
    {"Gemm", onnx_op_gemm},           {"Add", onnx_op_add},
    {"Softmax", onnx_op_softmax},     {"SoftmaxCrossEntropyLoss", onnx_op_sce},
    {"Momentum", onnx_op_momentum},
};

const int ONNX_NOPS = (int)(sizeof ONNX_OPS / sizeof ONNX_OPS[0]);
