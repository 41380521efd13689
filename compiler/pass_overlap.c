/* pass_overlap.c - room for the weight gradients to run beside the data
 * gradients.
 *
 * The GPU executor runs every conv2d_bwd_weight on a second stream, forked
 * where the node stands and joined before the first later node that writes
 * a byte it reads (runtime/rt_gpu_branch.c).  The memory plan frees a value
 * after its last reader, and a weight gradient is usually the last reader of
 * its inputs: the very next batch-norm backward or data gradient then takes
 * their bytes, and the two streams hardly overlap (ResNet-50: 0.94 nodes on
 * average).  This pass marks each conv2d_bwd_weight with `hold=H`: its
 * inputs stay live for the H nodes after it, up to and including the next
 * data gradient (conv2d_bwd_data[_relu]), which memplan honours.  A weight
 * gradient with no data gradient after it (those of the first layers) gets
 * none.
 *
 * Assumes a verified graph whose nodes run in list order; guarantees the
 * same graph with the attribute added (it changes no result, only which
 * buffers may share bytes).  -fno-overlap leaves the graph as it is.
 *
 *   before:  %28 = conv2d_bwd_weight(%20, %7) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : ...
 *            %29, %30, %31 = batchnorm_relu_bwd(...) : ...
 *            %32 = conv2d_bwd_data(%29, %4) {...} : ...
 *   after:   %28 = conv2d_bwd_weight(%20, %7) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1 hold=2} : ...
 */
#include "pipeline.h"

static int is_dgrad(IrOp op) {
  return op == IR_OP_CONV2D_BWD_DATA || op == IR_OP_CONV2D_BWD_DATA_RELU || op == IR_OP_CONV2D_BWD_DATA_BN_RELU;
}

IrGraph *pass_overlap(IrGraph *g, PassCtx *cx) {
  for (int n = 0; n < g->nnode; n++) {
    if (g->node[n].op != IR_OP_CONV2D_BWD_WEIGHT || ir_attr_find(&g->node[n], "hold")) continue;
    int next = n + 1;
    while (next < g->nnode && !is_dgrad(g->node[next].op)) next++;
    if (next < g->nnode && !ir_attr_set_int(g, n, "hold", next - n)) {
      diag_error(cx->d, g->node[n].loc, "overlap: out of memory");
      return NULL;
    }
  }
  return g;
}
