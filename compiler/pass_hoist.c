/* pass_hoist.c - an inference graph's weight casts run when the weights
 * change, not every step.
 *
 * The precision pass reads every f32 parameter through a cast to the
 * layer's dtype (f16, bf16, or i8 with one scale per output channel), and a
 * training step must cast again after each update.  An inference step reads
 * the same weights every time, so such a cast recomputed its result on
 * every step: ResNet-50 in INT8 spent 108 launches a step on them (0.68 ms
 * of kernels on an H100), in f16 54; and the first convolution's filter is
 * padded to 4 input channels by a relayout, also every step.  This pass
 * marks each cast and relayout whose inputs are all parameters or state
 * `once=1`; memplan gives its result
 * bytes of its own for the whole step, and the executors run the marked
 * nodes before the first step and again after any parameter or state is
 * written (runtime/cpu/rt_cpu.c, runtime/gpu/rt_gpu.c), never inside the
 * step.
 *
 * Only inference graphs (--inference, no optimizer section) are marked: a
 * training graph updates its parameters inside the step; and only nodes of
 * one input (an FP8 cast's amax history is state it writes every step).  Assumes a verified graph; guarantees the
 * same graph with the attribute added (no result changes, only when a cast
 * runs and which buffers may share bytes).  -fno-hoist leaves it as it is.
 *
 *   before:  %7 = cast(@layer1.0.conv1.weight) {to=f16} : f16[64,1,1,64] KRSC
 *   after:   %7 = cast(@layer1.0.conv1.weight) {to=f16 once=1} : f16[64,1,1,64] KRSC
 */
#include "pipeline.h"

IrGraph *pass_hoist(IrGraph *g, PassCtx *cx) {
  if (!cx->inference || g->opt_first >= 0) return g;
  for (int n = 0; n < g->nnode; n++) {
    const IrNode *node = &g->node[n];
    /* one input: an FP8 cast's second, its amax history, is state it updates in place every step */
    int copies = node->op == IR_OP_CAST || node->op == IR_OP_RELAYOUT;
    if (!copies || node->nin != 1 || ir_node_once(node) || !ir_value_is_weight(g, node->in[0])) continue;
    if (!ir_attr_set_int(g, n, "once", 1)) {
      diag_error(cx->d, node->loc, "hoist: out of memory");
      return NULL;
    }
  }
  return g;
}
