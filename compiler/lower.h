/* lower.h - elaborating a parsed .net file into the forward IR.
 *
 * Blocks are expanded at every call like macros, loops unrolled, conditions
 * and arithmetic evaluated, every op call typed with ir_infer().  The result
 * is the forward graph: inputs, parameters and state named after
 * torchvision's state_dict paths, one node per op call, the loss and logits
 * as outputs, and the train section as graph attributes. */
#ifndef NETC_LOWER_H
#define NETC_LOWER_H

#include "ast.h"
#include "ir.h"

/* Returns the graph, or NULL when errors were reported to d (all of them,
 * not only the first). */
IrGraph *lower_file(Arena *a, Diag *d, const AstFile *file);

/* A train section alone (an ONNX model's: netc --train FILE) into g's train
 * attributes, checked as lower_file checks a .net file's.  Returns 0, or -1
 * after reporting errors to d. */
int lower_train_section(Arena *a, Diag *d, IrGraph *g, const AstTrain *t);

#endif
