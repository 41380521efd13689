/* ir.h - the typed dataflow IR every pass reads and writes.
 *
 * A graph is a list of values and a list of nodes in topological order.
 * Every value is a tensor with a type (dims, dtype, layout); activation dims
 * may start with the symbolic batch size N (IR_DIM_N).  Dims are stored in
 * memory order: an NHWC activation has dims {N, H, W, C}; the layout says
 * what each position means.  Parameters (trained weights) and state (running
 * statistics, optimizer buffers) are values with a name and no producer.
 *
 * Nodes carry an op (see ir_ops.c for the table), inputs, outputs, a layer
 * name (torchvision's state_dict path, "layer1.0.conv1"), attributes in the
 * op's fixed order, and the SrcLoc they came from.  Everything lives in the
 * graph's Arena; passes build new graphs or edit in place, never free.
 *
 * A training step ends with its optimizer section: the nodes from
 * opt_first on (the overflow checks, the sgd_updates, the loss scale's
 * update), after every node of the forward and backward pass.  autodiff
 * starts it; a pass that rebuilds the node list carries it over
 * (ir_opt_follow); the verifier checks that only optimizer ops are in it
 * (IrOpInfo.section) and none before it; the runtime runs the two parts
 * apart for gradient accumulation.  The dump marks it with a line
 * `optimizer:` before its first node.
 *
 * The text form (ir_print.c, read back by ir_read.c):
 *
 *   %7 = conv2d(%6, @layer1.0.conv1.weight) {k=1x1 s=1x1 p=0x0 d=1x1 groups=1} : f32[N,64,56,56] NCHW  # layer1.0.conv1 @ resnet50.net:18:11
 */
#ifndef NETC_IR_H
#define NETC_IR_H

#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "diag.h"

enum { IR_MAX_RANK = 6, IR_MAX_INTS = 8 };
#define IR_DIM_N ((int64_t)-1) /* the symbolic batch dimension */

typedef enum IrDtype {
  IR_DT_F32,
  IR_DT_F16,
  IR_DT_BF16,
  IR_DT_I8,
  IR_DT_I32,
  IR_DT_I64,
  IR_DT_U8,
  IR_DT_F8E4M3, /* FP8: activations and weights (runtime/ref/rt_ref.h) */
  IR_DT_F8E5M2, /* FP8: gradients */
  IR_DT_COUNT
} IrDtype;

typedef enum IrLayout {
  IR_LAYOUT_ROW,  /* plain row-major, any rank (printed as nothing) */
  IR_LAYOUT_NCHW, /* activations, rank 4 */
  IR_LAYOUT_NHWC,
  IR_LAYOUT_KCRS, /* convolution filters, rank 4 */
  IR_LAYOUT_KRSC,
  IR_LAYOUT_COUNT
} IrLayout;

typedef struct IrType {
  IrDtype dtype;
  IrLayout layout;
  int rank;
  int64_t dim[IR_MAX_RANK]; /* memory order; dim[0] may be IR_DIM_N */
} IrType;

typedef enum IrValueKind {
  IR_VAL_ACT,   /* produced by a node: %id */
  IR_VAL_INPUT, /* fed each step (images, labels): %id, declared with its name */
  IR_VAL_PARAM, /* trained weight: @name */
  IR_VAL_STATE, /* running statistics, optimizer buffers: @name */
} IrValueKind;

typedef struct IrValue {
  IrValueKind kind;
  IrType type;
  const char *name; /* INPUT/PARAM/STATE: required; ACT: NULL */
  int def;          /* producing node index, or -1 */
  int64_t offset;   /* memory plan: byte offset in the arena, or -1 */
} IrValue;

typedef enum IrAttrKind {
  IR_ATTR_INT,   /* i[0] */
  IR_ATTR_INTS,  /* i[0..n-1], printed 3x3 */
  IR_ATTR_FLOAT, /* f */
  IR_ATTR_DTYPE, /* i[0]: an IrDtype, printed f16 */
  IR_ATTR_STR,   /* s: printed double-quoted, "sgd"; [A-Za-z0-9_.-] only (docs/ir.md) */
} IrAttrKind;

typedef struct IrAttr {
  const char *key;
  IrAttrKind kind;
  int n;
  int64_t i[IR_MAX_INTS];
  double f;
  const char *s;
} IrAttr;

typedef enum IrOp {
#define IR_OP(id, name) id,
#include "ir_ops.def"
#undef IR_OP
  IR_OP_COUNT
} IrOp;

typedef struct IrNode {
  IrOp op;
  const char *name; /* layer name, or NULL */
  int nin, nout;
  int *in, *out; /* value ids */
  int nattr;
  IrAttr *attr;
  SrcLoc loc;
} IrNode;

typedef struct IrGraph {
  Arena *arena; /* owner of everything below; not owned by the graph */
  const char *name;
  IrValue *val;
  int nval, capval;
  IrNode *node;
  int nnode, capnode;
  int *output; /* values the step returns (loss first, then logits) */
  int noutput, capoutput;
  IrAttr *train; /* the train section: batch, optimizer, schedule, ... */
  int ntrain, captrain;
  int64_t plan_bytes; /* memory plan: arena size in bytes for plan_batch, or 0 when unplanned */
  int64_t plan_batch;
  int opt_first; /* the optimizer section's first node (nnode: an empty section), or -1 when
                         the graph has none (inference and forward graphs) */
} IrGraph;

/* --- construction (ir.c) ------------------------------------------------ */
IrGraph *ir_graph_new(Arena *a, const char *name); /* no nodes, no optimizer section */
/* Deep copy (into the same arena). */
IrGraph *ir_graph_clone(const IrGraph *g);
/* The one node after `from` that reads value v, *k (may be NULL) the input
 * it reads v as; -1 when no node or several read it, or one reads it
 * twice.  Whether v is a graph output is the caller's to rule out. */
int ir_sole_reader(const IrGraph *g, int v, int from, int *k);
/* The start of a pass's rebuilt copy of g (in g's arena): g's name and
 * train settings and every value that is no activation (inputs,
 * parameters, state), in order; map[v] (g->nval entries) their new ids,
 * -1 for activations, which the pass's nodes make.  NULL when out of memory. */
IrGraph *ir_graph_rebuild(const IrGraph *g, int *map);
/* Adds a value; name is copied; returns its id or -1 when out of memory. */
int ir_value_add(IrGraph *g, IrValueKind kind, IrType type, const char *name);
/* Adds a node with nin inputs and nout fresh ACT outputs of the given types
 * (out_types may be NULL when nout == 0); returns the node index or -1. */
int ir_node_add(IrGraph *g, IrOp op, const char *name, SrcLoc loc, const int *in, int nin, const IrType *out_types,
                int nout);
int ir_output_add(IrGraph *g, int value);
/* Attributes, appended in call order (the op table's order). */
IrAttr *ir_attr_set_int(IrGraph *g, int node, const char *key, int64_t v);
IrAttr *ir_attr_set_ints(IrGraph *g, int node, const char *key, const int64_t *v, int n);
IrAttr *ir_attr_set_float(IrGraph *g, int node, const char *key, double v);
IrAttr *ir_attr_set_dtype(IrGraph *g, int node, const char *key, IrDtype v);
IrAttr *ir_attr_set_str(IrGraph *g, int node, const char *key, const char *v);
const IrAttr *ir_attr_find(const IrNode *n, const char *key);
int64_t ir_attr_int(const IrNode *n, const char *key, int64_t dflt);
double ir_attr_float(const IrNode *n, const char *key, double dflt);
/* A convolution's optional inputs, told apart by rank: the prologue's
 * scale and bias sbx ([2, C_in], rank 2; conv2d_bn_train, conv2d_bn,
 * conv2d_bn_stats, conv2d_bwd_weight) and the residual (rank 4, shaped like
 * the output; conv2d_bn_train, conv2d_bn, and conv2d_bwd_data_relu, where it
 * is the gradient added before the mask).  Each returns the input index, or
 * -1 when n has none (or is another op). */
int ir_conv_prologue(const IrGraph *g, const IrNode *n);
int ir_conv_residual(const IrGraph *g, const IrNode *n);
/* 1 when value v is read as a cast's amax history (its input 1: FP8's
 * delayed scaling state, docs/ir.md), else 0. */
int ir_amax_history(const IrGraph *g, int v);
/* Train-section entries (same attribute representation). */
IrAttr *ir_train_set(IrGraph *g, const IrAttr *a);
const IrAttr *ir_train_find(const IrGraph *g, const char *key);

/* --- weights and the nodes that read only them (ir.c) ------------------- */
/* Value v is a parameter or state: storage that lives across steps and is
 * written from outside them (initialization, weights files). */
int ir_value_is_weight(const IrGraph *g, int v);
/* Node n is marked `once=1` (pass hoist): it reads only weights and runs
 * when they change, not in the step; its result lives across steps. */
int ir_node_once(const IrNode *n);

/* --- the optimizer section (ir.c) -------------------------------------- */
/* Where the forward and backward nodes end: g->opt_first, or g->nnode when
 * g has no optimizer section. */
int ir_opt_start(const IrGraph *g);
/* For a pass that rebuilds g as out, visiting g's nodes in order: call it
 * before emitting anything for g's node n, and once more with n = g->nnode
 * after the last.  out's section starts at out's next node on the first
 * call with n >= g->opt_first, so a section node removed or merged leaves
 * the boundary right.  What the pass emits for a section node must be
 * optimizer ops too: conversions a section node reads (casts, relayouts)
 * are made before the call with n == g->opt_first. */
void ir_opt_follow(IrGraph *out, const IrGraph *g, int n);

/* --- types (ir.c) ------------------------------------------------------- */
IrType ir_type(IrDtype dt, IrLayout layout, int rank, const int64_t *dim);
int ir_type_equal(const IrType *a, const IrType *b);
/* "f32[N,64,56,56] NCHW" into buf (as the printer writes types); returns buf. */
const char *ir_type_str(const IrType *t, char *buf, size_t len);
/* Elements per sample when dim[0] is N (N counted as 1), else total. */
int64_t ir_type_numel(const IrType *t, int64_t batch);
size_t ir_dtype_size(IrDtype dt);
/* A quantized value: an i8, f8e4m3 or f8e5m2 value made by a cast, or an
 * i8 result requantized by its node's y_scale (a convolution's, pass
 * requant; the inference stem's maxpool_bn_relu_infer, pass prologue).  Where
 * values are stored as their dtype (the GPU), such a value holds its
 * elements, then at the next 16-byte boundary its f32 scales (the
 * element's real value is q * scale): one per slice of dimension 0 when the
 * cast has axis=0, else one (a requantized result: one, its y_scale).
 * ir_value_scales() is that count, 0 for any
 * other value (a max pool's i8 winners are plain integers); the CPU
 * executor keeps such values as scale * q in float, with no scales. */
int64_t ir_value_scales(const IrGraph *g, int v, int64_t batch);
/* The one step a quantized value v was quantized by when it is known at
 * compile time: its cast's calibrated scale= (no axis), or its
 * convolution's y_scale (pass requant); 0 otherwise. */
double ir_value_step(const IrGraph *g, int v);
/* Whether node n's op may requantize its i8 result by a y_scale attribute
 * (conv2d, conv2d_bn, maxpool_bn_relu_infer). */
int ir_node_rescales(const IrNode *n);
/* Bytes of value v stored as its dtype at batch: elements, then the
 * scales of a quantized value; -1 when that overflows int64. */
int64_t ir_value_bytes(const IrGraph *g, int v, int64_t batch);
/* Byte offset of a quantized value's scales: its elements' bytes rounded
 * up to 16. */
int64_t ir_scales_offset(int64_t elem_bytes);
const char *ir_dtype_name(IrDtype dt);  /* "f32" */
int ir_dtype_parse(const char *s);      /* -1 when unknown */
const char *ir_layout_name(IrLayout l); /* "NCHW"; "" for ROW */
int ir_layout_parse(const char *s);     /* -1 when unknown */

/* --- the op table (ir_ops.c) -------------------------------------------- */
/* Which side of the optimizer section's start an op may stand on. */
typedef enum IrOpSection {
  IR_SEC_STEP,      /* the forward and backward pass: before the section */
  IR_SEC_OPTIMIZER, /* the optimizer's ops: in the section only */
  IR_SEC_EITHER,    /* anywhere; in the section only on results of the section (add: the overflow flags' sum) */
} IrOpSection;

typedef struct IrOpInfo {
  const char *name;   /* as printed: "conv2d" */
  int min_in, max_in; /* input count */
  int nout;           /* output count, -1 = variable */
  const char *attrs;  /* the attribute keys, in print order, space separated */
  IrOpSection section;
} IrOpInfo;
const IrOpInfo *ir_op_info(IrOp op);
int ir_op_parse(const char *name); /* -1 when unknown */

/* --- shape inference (ir_infer.c) ---------------------------------------
 * Computes the output types of node n (which need not be in g yet) from the
 * types of its inputs in g and its attributes.  Returns 0 and fills
 * out[0..nout-1], or -1 with a one-line message in err ("kernel 7x7 with
 * padding 0 does not fit input 5x5").  Lowering uses it to type new nodes;
 * the verifier uses it to check every node. */
int ir_infer(const IrGraph *g, const IrNode *n, IrType *out, char *err, size_t errlen);

/* --- text form ----------------------------------------------------------- */
typedef struct IrPrintOpts {
  int no_loc;       /* drop "@ file:line:col" from the trailing comment */
  const char *pass; /* printed in the header line, or NULL */
} IrPrintOpts;
void ir_print(FILE *f, const IrGraph *g, const IrPrintOpts *o);
/* Parses what ir_print writes; errors go to d with locations in the text. */
IrGraph *ir_read(Arena *a, Diag *d, const char *path, const char *text, size_t len);

/* --- verifier (ir_verify.c) ---------------------------------------------
 * Checks ids, topological order, arity, attribute keys against the op
 * table, the optimizer section (IrOpSection), and per-op type rules.
 * Reports each problem to d (with the node's SrcLoc and name, and which
 * pass ran last) and returns the count. */
int ir_verify(const IrGraph *g, Diag *d, const char *after_pass);

#endif
