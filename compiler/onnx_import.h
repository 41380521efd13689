/* onnx_import.h - the ONNX front end: a serialized ModelProto lowered to the
 * same forward IR a .net file gives (lower.h).
 *
 * The graph's one image input becomes an INPUT value (its first dimension
 * the batch N), a label input i32[N] is added, each supported node becomes
 * the IR op a .net layer would, initializers become PARAM/STATE values under
 * their ONNX names (torchvision's state_dict names in a torch.onnx.export),
 * shape arithmetic (Shape, Gather, Unsqueeze, Concat, Constant, Cast) is
 * folded into the Reshape it feeds, and the graph's output, the logits, gets
 * softmax_cross_entropy as the loss.  The train section comes from the
 * caller (netc --train FILE, or compile.c's default).  docs/onnx.md lists
 * what is supported.
 *
 * Every unsupported op or attribute, missing initializer, wrong shape or
 * out-of-order node is reported to d with the node's position, name and op
 * ("model.onnx: error: node 7 '/layer1/Conv' (Conv): ..."), all of them,
 * not only the first.  Built only with protobuf-c (NETC_HAVE_ONNX);
 * otherwise onnx_import says that this netc has no ONNX support. */
#ifndef NETC_ONNX_IMPORT_H
#define NETC_ONNX_IMPORT_H

#include <stddef.h>

#include "ast.h"
#include "ir.h"

/* 1 when this netc was built with the ONNX front end. */
int onnx_import_available(void);

/* Lowers the ModelProto in bytes[0..len-1] (named path in messages) with
 * the train section train; with weights_out, also writes the initializers'
 * values there as safetensors (onnx_weights.h).  Returns the forward graph,
 * or NULL after reporting every error to d. */
IrGraph *onnx_import(Arena *a, Diag *d, const char *path, const void *bytes, size_t len, const AstTrain *train,
                     const char *weights_out);

#endif
