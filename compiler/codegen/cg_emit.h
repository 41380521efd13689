/* cg_emit.h - what the node emitters share (internal to compiler/codegen/).
 *
 * cg_kernels.c's op table maps each IR op to one emitter, a function
 * `int cg_emit_<family>_<op>(Emit *e)` in cg_emit_<family>.c that fills e->k
 * (cg_kernels.h's CgKNode) for node e->n and returns 0, or -1 after
 * cg_emit_fail.  An emitter builds each launch the same way:
 *
 *     if (cg_emit_begin(e, "stage")) return -1;     names the kernel
 *     cg_emit_def(e, "NETC_C", "%d", C);            the template's parameters
 *     CG_EMIT_ARGS(e, in(0), scratch(0), out(0));   its pointers, in order
 *     return cg_emit_end(e, "chan_apply.cu", grid, 1, BLOCK, 1);
 *
 *   cg_emit.c          the Emit being built: errors, grid sizing, launches, defines
 *   cg_emit_chan.c     per-channel passes (chan_reduce.cu, chan_finalize.cu, chan_apply.cu)
 *   cg_emit_eltwise.c  relu, add, add_relu, relu_bwd, sum_relu_bwd (eltwise.cu)
 *   cg_emit_bn.c       batch norm: statistics, running-statistics affine, backward
 *   cg_emit_conv.c     the convolution nodes (cuDNN) with their fused launches, s2d folding
 *   cg_emit_qscale.c   an i8 convolution's dequantization into the epilogue (qscale.cu)
 *   cg_emit_pool.c     max, average and global average pooling, forward and backward (pool.cu)
 *   cg_emit_copy.c     flatten/unflatten copies, casts, relayouts (cast.cu, relayout.cu)
 *   cg_emit_linear.c   linear and its gradients (cuDNN as 1x1 convolutions, else linear.cu)
 *   cg_emit_loss.c     softmax cross-entropy and its gradient (softmax_ce.cu)
 *   cg_emit_optim.c    sgd_update (sgd.cu), dynamic loss scaling (loss_scale.cu)
 *
 * The small accessors below are static inline and keep short names (in,
 * out, scratch, dim, numel, ...): every emitter reads as its arguments. */
#ifndef NETC_CG_EMIT_H
#define NETC_CG_EMIT_H

#include <stddef.h>
#include <stdint.h>

#include "cg_kernels.h"
#include "cg_text.h"
#include "ir.h"
#include "opts.h"

enum { BLOCK = 256, FIN_CB = 32, FIN_GY = 8, MAX_DEFS = 40, DEF_LEN = 96 }; /* FIN_*: chan_finalize.cu's CB, GY */

typedef struct Emit {
  const IrGraph *g;
  const IrNode *n;
  int node;
  int64_t batch;
  const CgDevice *dev;
  const NetcOpts *opts; /* dev's, or the defaults */
  CgKNode *k;
  char *err;
  size_t errlen;
  const char *dtype;  /* of the node's main tensor, for kernel names */
  const char *layout; /* "nhwc", "nchw", "krsc", "kcrs" or "row" */
  CgText src;         /* k->source as it grows (handed over when the node is done) */
  /* the launch being built */
  CgKLaunch *cur;
  int ndefs;
  char defs[MAX_DEFS][2][DEF_LEN];
} Emit;

/* An emitter of one node: 0, or -1 after cg_emit_fail. */
typedef int (*CgEmitFn)(Emit *e);

/* Writes "node N (name, op X): <fmt>" into e->err; returns -1. */
int cg_emit_fail(Emit *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --- types and shapes ------------------------------------------------------ */

static inline const IrType *in_type(const Emit *e, int i) { return &e->g->val[e->n->in[i]].type; }
static inline const IrType *out_type(const Emit *e, int i) { return &e->g->val[e->n->out[i]].type; }

static inline int64_t dim(const Emit *e, const IrType *t, int i) {
  return t->dim[i] == IR_DIM_N ? e->batch : t->dim[i];
}

static inline int64_t numel(const Emit *e, const IrType *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= dim(e, t, i);
  return n;
}

/* The widest vector (<= 16 bytes) whose width divides C. */
int cg_emit_vec(IrDtype dt, int C);

/* A grid-stride kernel's grid: one block per BLOCK units of work, at most
 * one full wave of the device (every SM full). */
unsigned cg_emit_grid_1d(const Emit *e, int64_t units);

/* Attribute `key` of n as two ints (one value repeated), else dflt twice. */
void cg_emit_attr2(const IrNode *n, const char *key, int dflt, int v[2]);

/* The f32 per-channel vectors batch norm reads and writes: inputs
 * first_in..last_in and outputs first_out..last_out (empty when last < first). */
int cg_emit_check_f32(Emit *e, int first_in, int last_in, int first_out, int last_out);

/* The node's residual input (conv2d_bn[_train] at a block's end), or -1. */
static inline int residual_in(const Emit *e) { return ir_conv_residual(e->g, e->n); }

/* Whether the node's forward convolution (set by cg_emit_conv.c) is of
 * quantized values: i8 by i8 or f8e4m3 by f8e4m3, dequantized in its
 * epilogue. */
static inline int conv_quant(const Emit *e) {
  return e->k->has_conv && (e->k->conv.dtype == IR_DT_I8 || e->k->conv.dtype == IR_DT_F8E4M3);
}

/* --- building launches ------------------------------------------------------ */

static inline CgKArg in(int i) { return (CgKArg){CG_KARG_IN, i, 0}; }
static inline CgKArg out(int i) { return (CgKArg){CG_KARG_OUT, i, 0}; }
static inline CgKArg scratch(size_t offset) { return (CgKArg){CG_KARG_SCRATCH, 0, offset}; }
static inline CgKArg kept(size_t offset) { return (CgKArg){CG_KARG_KEPT, 0, offset}; }
/* The type of an input or output argument. */
static inline const IrType *arg_type(const Emit *e, CgKArg a) {
  return a.kind == CG_KARG_IN ? in_type(e, a.index) : out_type(e, a.index);
}

/* Starts launch `stage` ("" for a node's only kernel):
 * k<node>_<op>[_<stage>]_<dtype>_<layout>. */
int cg_emit_begin(Emit *e, const char *stage);
/* A #define name value of the launch being built (dropped past MAX_DEFS:
 * cg_emit_end fails then). */
void cg_emit_def(Emit *e, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void cg_emit_def_float(Emit *e, const char *name, double v);
/* A pooling window's geometry (pool.cu, and the gather of chan_reduce.cu
 * and chan_apply.cu): input tx, output ty (NHWC), the node's k, s, p. */
void cg_emit_window_defs(Emit *e, const IrType *tx, const IrType *ty);
/* The launch's kernel parameters, in order. */
void cg_emit_args(Emit *e, int nargs, const CgKArg *a);
#define CG_EMIT_ARGS(e, ...) \
  cg_emit_args((e), (int)(sizeof((CgKArg[]){__VA_ARGS__}) / sizeof(CgKArg)), (CgKArg[]){__VA_ARGS__})
/* Instantiates template tmpl with the defines gathered since
 * cg_emit_begin, appends it to the node's source and completes the launch. */
int cg_emit_end(Emit *e, const char *tmpl, unsigned gx, unsigned gy, unsigned bx, unsigned by);

static inline void need_scratch(Emit *e, size_t bytes) {
  if (bytes > e->k->scratch_bytes) e->k->scratch_bytes = bytes;
}

static inline size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

/* When the last launch built runs. */
static inline void last_when(Emit *e, CgKWhen when) { e->k->launch[e->k->nlaunch - 1].when = when; }

/* The node's last launch made one that runs before its convolution: moved
 * behind the launches already before it, ahead of every launch after it. */
static inline void cg_emit_hoist_last(Emit *e) {
  CgKNode *k = e->k;
  CgKLaunch l = k->launch[k->nlaunch - 1];
  int at = 0;
  while (at < k->nlaunch - 1 && k->launch[at].before) at++;
  for (int j = k->nlaunch - 1; j > at; j--) k->launch[j] = k->launch[j - 1];
  l.before = 1;
  k->launch[at] = l;
}

/* --- cg_emit_chan.c: per-channel passes ---------------------------------------- */

/* Per-channel work on a tensor as [rows, C] (NHWC or a [N, C] matrix). */
typedef struct CgEmitChan {
  int64_t rows;
  int C, V, bx, by, G, gy;
  int noshift; /* finalize: the sums are of x itself (G = 1), not shifted by its first row */
  int sb;      /* finalize (train): also the equivalent scale and bias, in x's dtype */
  IrDtype dt;
  IrDtype ty, tg; /* apply's result and the gradient dy (NETC_TY, NETC_TG), when not dt */
  size_t coef;    /* scratch offset of coef[4][C] */
  int round_x;    /* apply (AFFINE): x rounded to ty first (NETC_ROUND_X) */
  int copy;       /* reduce (STATS): also writes x rounded to tc, its third argument (NETC_RED_COPY) */
  IrDtype tc;
  const IrType *gather; /* BWD: dy is this max pool output's gradient, gathered (NETC_GATHER), or NULL */
  int sync;             /* finalize (TRAIN, BWD): from the f64 sums of every rank (NETC_FIN_SYNC) */
} CgEmitChan;

/* The plan of per-channel work on tensor t (its result y of dtype ty, its
 * gradient dy of dtype tg; _plan: both t's dtype). */
int cg_emit_chan_plan_mixed(Emit *e, const IrType *t, IrDtype ty, IrDtype tg, CgEmitChan *c);
int cg_emit_chan_plan(Emit *e, const IrType *t, CgEmitChan *c);
/* One pass of plan c: op is chan_reduce.cu's NETC_RED_*, chan_finalize.cu's
 * NETC_FIN_*, chan_apply.cu's NETC_APPLY_* (tb: the bias's C type). */
int cg_emit_chan_reduce(Emit *e, const CgEmitChan *c, const char *op, int relu);
int cg_emit_chan_finalize(Emit *e, const CgEmitChan *c, const char *op);
/* The inference finalize (NETC_FIN_INFER) of plan c from the node's inputs
 * p..p+3 (gamma, beta, running mean and variance) into *coef, with sb also
 * the equivalent f32 scale and bias into *esb (4C floats past coef, 256-byte
 * aligned): a `once` launch into the node's kept memory, coef at 0, when
 * those inputs are all parameters or state (run when they change, not in
 * the step); else into scratch each step, coef at c->coef. */
int cg_emit_chan_finalize_infer(Emit *e, CgEmitChan *c, int p, int sb, CgKArg *coef, CgKArg *esb);
/* Synchronized batch norm (the sync_bn code switch): chan_finalize.cu's
 * PACK (op NETC_FIN_PACK_STATS or NETC_FIN_PACK_BWD) of plan c's partial
 * sums into f64 sums at scratch offset cg_emit_chan_sync_at(c), which the
 * executor adds over the ranks after it (CgKLaunch.sum_f64). */
int cg_emit_chan_pack(Emit *e, const CgEmitChan *c, const char *op);
size_t cg_emit_chan_sync_at(const CgEmitChan *c);
int cg_emit_chan_apply(Emit *e, const CgEmitChan *c, const char *op, int relu, const char *tb);

/* --- the emitters, by file (cg_kernels.c's table) ------------------------------- */

/* cg_emit_eltwise.c; _launch: one eltwise.cu launch of op `op` on count
 * values, inputs a0, a1, a2 (repeat a1 when the op takes fewer), output o0. */
int cg_emit_eltwise(Emit *e);
int cg_emit_eltwise_launch(Emit *e, const char *stage, const char *op, IrDtype dt, int64_t count, CgKArg a0, CgKArg a1,
                           CgKArg a2, CgKArg o0);

/* cg_emit_bn.c; _infer, _train and _bwd_from are also a fused
 * convolution's batch norm (their contracts at their definitions). */
int cg_emit_bn_infer(Emit *e, const IrType *t, int p, CgKArg x, CgKArg y, int relu);
int cg_emit_bn_train(Emit *e, const IrType *t, CgKArg x, CgKArg y, int p, int o, int relu, int sb);
int cg_emit_bn_bwd_from(Emit *e, int relu, CgKArg dy, int at, CgKWhen when);
int cg_emit_bn_batchnorm(Emit *e);
int cg_emit_bn_batchnorm_train(Emit *e);
int cg_emit_bn_batchnorm_bwd(Emit *e);
int cg_emit_bn_batchnorm_relu_bwd(Emit *e);
int cg_emit_bn_batchnorm_relu_bwd_win(Emit *e);
int cg_emit_bn_channel_sum(Emit *e);

/* cg_emit_conv.c: every convolution node */
int cg_emit_conv(Emit *e);

/* cg_emit_qscale.c: a quantized convolution's qscale.cu launch, run before
 * it after the node's other launches before it (it is moved ahead of any
 * launch that runs later): op NETC_QS_SET (with the node's bias input `bias`, or -1)
 * writes the epilogue's scale and bias at scratch esb from x's and w's
 * scales, NETC_QS_MUL multiplies the scale there by them (those at *from,
 * a folded batch norm's kept scale and bias, when from is not NULL). */
int cg_emit_qscale(Emit *e, const char *op, int bias, const CgKArg *from, size_t esb);

/* cg_emit_pool.c: every pooling node */
int cg_emit_pool(Emit *e);

/* cg_emit_copy.c */
int cg_emit_copy(Emit *e); /* flatten, unflatten */
int cg_emit_copy_cast(Emit *e);
int cg_emit_copy_relayout(Emit *e);

/* cg_emit_linear.c: linear, linear_bwd_data, linear_bwd_weight */
int cg_emit_linear(Emit *e);

/* cg_emit_loss.c: softmax_ce, softmax_ce_bwd */
int cg_emit_loss_softmax_ce(Emit *e);

/* cg_emit_optim.c */
int cg_emit_optim_sgd(Emit *e);
int cg_emit_optim_nonfinite_check(Emit *e);
int cg_emit_optim_loss_scale_update(Emit *e);

#endif
