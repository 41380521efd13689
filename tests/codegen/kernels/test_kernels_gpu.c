/* test_kernels_gpu.c - every node's generated kernels on the GPU against
 * the CPU executor, node by node through real final graphs (kerntest.h).
 *
 * The CPU executor runs each graph one node at a time from random
 * parameters, state and inputs.  Before node i runs on the CPU, its inputs
 * (as the CPU holds them, converted to their dtypes) are copied to the GPU
 * and its outputs and scratch are poisoned with NaN bytes; for a node with
 * a convolution, the convolution's result (computed here with rt_ref, the
 * same kernels the executor uses, rounded to its dtype) stands in for
 * cuDNN's; a linear op's (a 1x1 convolution, cg_kernels.c) is cuDNN's
 * own, its output compared like a kernel's.  Then the node's kernels (for a convolution that may write its
 * batch-norm statistics, the launches that run when it does not) run with the emitted grids, blocks and
 * arguments, and every output (and every input updated in place: running
 * statistics, SGD weights and momentum buffers) is compared with the CPU's:
 * max |gpu - cpu| / max(1, max |cpu|) per tensor, within 1e-5 for f32
 * results and 1e-2 for f16/bf16 ones.  Among them, at least one f32 stem
 * conv2d_bn_train with an f16/bf16 y and one batchnorm_relu_bwd reading an
 * f16/bf16 dy with f32 z must be compared, and at least one conv2d_bn_stats
 * writing zc, whose zc must be the GPU's own z rounded to zc's dtype bit
 * for bit (as a cast rounds it).  A table of ops, nodes and worst errors is
 * printed last.
 *
 * Without a driver or a GPU it prints "skipped: <why>" and exits 77.
 * Usage: test_kernels_gpu SOURCE_ROOT */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kerntest.h"
#include "rt_cpu_op.h"
#include "rt_cuda.h"
#include "rt_cudnn.h"
#include "rt_gpu.h"
#include "cg_nvrtc.h"
#include "rt_ref.h"

enum { BATCH = 32 };

static char err[1 << 16];
static size_t kept_at; /* offset of a node's kept memory (CG_KARG_KEPT) in the scratch allocation */

typedef struct Gpu {
  RtCudaCtx *ctx;
  const RtCudaApi *api;
  CgDevice dev;
  char arch[16];
  RtCudnn *dnn; /* runs the linear ops' convolutions */
} Gpu;

typedef struct OpStat {
  int nodes, failed;
  double worst;
} OpStat;

static OpStat stats[IR_OP_COUNT];
static int stem_mixed[2]; /* kerntest_stem_mixed nodes compared: conv2d_bn_train, batchnorm_relu_bwd */
static int folded;        /* convolutions run folded, left to test_gpu_exec's whole models */
static int quantized;     /* convolutions of i8 or FP8 operands, left to test_gpu_exec's whole models too */
static int zc_nodes;      /* conv2d_bn_stats nodes whose zc zc_exact checked */
static uint64_t rng = 0x2545f4914f6cdd1dull;

static float uniform(float lo, float hi) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return lo + (hi - lo) * (float)((rng >> 40) & 0xffffff) * 0x1p-24f;
}

static int is_int(IrDtype dt) { return dt == IR_DT_I32 || dt == IR_DT_I64 || dt == IR_DT_U8; }

static float round_to(IrDtype dt, float f) {
  if (dt == IR_DT_F16) return rt_ref_f16_to_f32(rt_ref_f32_to_f16(f));
  if (dt == IR_DT_BF16) return rt_ref_bf16_to_f32(rt_ref_f32_to_bf16(f));
  return f;
}

/* Random values for every input, parameter and state of g. */
static void fill(RtCpu *x, const IrGraph *g) {
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT) continue;
    int64_t n = rt_cpu_numel(x, v);
    if (rt_cpu_is_int(x, v)) {
      int64_t *p = rt_cpu_data(x, v);
      for (int64_t i = 0; i < n; i++) p[i] = (int64_t)(uniform(0, 10) * 0.9999f);
      continue;
    }
    float *p = rt_cpu_data(x, v), lo = -1, hi = 1;
    const char *name = val->name ? val->name : "";
    if (strcmp(name, "lr") == 0) lo = hi = 0.05f;
    if (strcmp(name, "loss_scale") == 0) lo = hi = 1024.0f;
    if (strstr(name, "running_var")) lo = 0.5f, hi = 1.5f;
    if (val->kind == IR_VAL_PARAM && val->type.rank >= 2 && val->type.dim[0] > 0) {
      /* weights of unit-variance outputs (fan-in scaled): activations keep
       * their size through the graph instead of outgrowing f16 */
      hi = sqrtf(3.0f / (float)(n / val->type.dim[0]));
      lo = -hi;
    }
    for (int64_t i = 0; i < n; i++) p[i] = round_to(val->type.dtype, lo == hi ? lo : uniform(lo, hi));
  }
}

/* --- device buffers ------------------------------------------------------------ */

/* Its device size: a quantized value's scales included (ir_value_bytes). */
static size_t value_bytes(const RtCpu *x, const IrGraph *g, int v) {
  (void)x;
  size_t b = (size_t)ir_value_bytes(g, v, BATCH);
  return b < 16 ? 16 : b;
}

static int is_f8(IrDtype dt) { return dt == IR_DT_F8E4M3 || dt == IR_DT_F8E5M2; }

/* Host copy of CPU value v in its device format. */
static void *to_device_format(RtCpu *x, const IrGraph *g, int v) {
  int64_t n = rt_cpu_numel(x, v);
  IrDtype dt = g->val[v].type.dtype;
  void *p = calloc(1, value_bytes(x, g, v));
  if (!p) abort();
  int64_t slices = ir_value_scales(g, v, BATCH);
  if (slices) { /* q and its scales, as rt_gpu_write makes them from the CPU's scale * q */
    rt_gpu_pack_scaled(dt, n, slices, rt_cpu_data(x, v), p);
    return p;
  }
  if (is_int(dt)) {
    const int64_t *s = rt_cpu_data(x, v);
    for (int64_t i = 0; i < n; i++) {
      if (dt == IR_DT_I32) ((int32_t *)p)[i] = (int32_t)s[i];
      if (dt == IR_DT_I64) ((int64_t *)p)[i] = s[i];
      if (dt == IR_DT_U8) ((uint8_t *)p)[i] = (uint8_t)s[i];
    }
    return p;
  }
  const float *s = rt_cpu_data(x, v);
  for (int64_t i = 0; i < n; i++) {
    if (dt == IR_DT_F32) ((float *)p)[i] = s[i];
    if (dt == IR_DT_F16) ((uint16_t *)p)[i] = rt_ref_f32_to_f16(s[i]);
    if (dt == IR_DT_BF16) ((uint16_t *)p)[i] = rt_ref_f32_to_bf16(s[i]);
    if (dt == IR_DT_I8) ((int8_t *)p)[i] = (int8_t)s[i];
  }
  return p;
}

/* Element i of a device tensor of unscaled values as float (an i8 one, a
 * max pool's winners, as the integer it holds). */
static float device_value(const void *p, IrDtype dt, int64_t i) {
  if (dt == IR_DT_I8) return (float)((const int8_t *)p)[i];
  if (dt == IR_DT_F16) return rt_ref_f16_to_f32(((const uint16_t *)p)[i]);
  if (dt == IR_DT_BF16) return rt_ref_bf16_to_f32(((const uint16_t *)p)[i]);
  return ((const float *)p)[i];
}

static int upload(Gpu *gp, CUdeviceptr d, const void *h, size_t bytes) {
  return RT_CU(gp->api, MemcpyHtoD, (d, h, bytes), "test input", err, sizeof err) == RT_CUDA_OK;
}

static int sync_copies(Gpu *gp) {
  int ok = RT_CU(gp->api, StreamSynchronize, (NULL), "host to device copies", err, sizeof err) == RT_CUDA_OK;
  CHECK(ok, "%s", err);
  return ok;
}

static int poison(Gpu *gp, CUdeviceptr d, size_t bytes) {
  void *p = malloc(bytes);
  if (!p) abort();
  memset(p, 0xff, bytes); /* NaN in every float format */
  int ok = upload(gp, d, p, bytes);
  free(p);
  return ok;
}

/* --- the convolution's stand-in --------------------------------------------- */

static const IrType *arg_type(const IrGraph *g, const IrNode *n, CgKArg a) {
  return &g->val[a.kind == CG_KARG_IN ? n->in[a.index] : n->out[a.index]].type;
}

/* The node's convolution on the host (no bias), rounded to its dtype,
 * copied into the tensor the convolution writes. */
static int conv_standin(Gpu *gp, RtCpu *x, const IrGraph *g, const IrNode *n, const CgKNode *k, CUdeviceptr *dev) {
  CgKArg xa = k->conv_x, wa = k->conv_w, ya = k->conv_y;
  RtRefAct xs = rt_cpu_op_act(x, arg_type(g, n, xa)), ys = rt_cpu_op_act(x, arg_type(g, n, ya));
  RtRefFilter wf = rt_cpu_op_filter(arg_type(g, n, wa));
  RtRefConvParam p = rt_cpu_op_conv_param(n);
  int fwd = k->conv.kind == CG_CONV_FWD;
  const IrType *rt = fwd ? arg_type(g, n, ya) : arg_type(g, n, xa);
  int64_t count = fwd ? rt_ref_act_count(&ys) : rt_ref_act_count(&xs);
  float *r = malloc(sizeof *r * (size_t)count);
  if (!r) abort();
  const float *in = rt_cpu_op_in(x, n, xa.index);
  float *pro = NULL;
  if (k->conv.prologue) { /* the convolution reads relu(x * scale + bias), rounded to x's dtype */
    int64_t nx = rt_ref_act_count(&xs);
    if (!(pro = malloc(sizeof *pro * (size_t)nx))) abort();
    rt_ref_bn_prologue(&xs, in, rt_cpu_op_in(x, n, k->conv_sb.index), pro);
    if (arg_type(g, n, xa)->dtype == IR_DT_F16) rt_ref_round_f16(nx, pro, pro);
    if (arg_type(g, n, xa)->dtype == IR_DT_BF16) rt_ref_round_bf16(nx, pro, pro);
    in = pro;
  }
  int rc = fwd ? rt_ref_conv2d_fwd(&xs, in, &wf, rt_cpu_op_in(x, n, wa.index), NULL, &p, &ys, r, NULL)
               : rt_ref_conv2d_bwd_data(&xs, r, &wf, rt_cpu_op_in(x, n, wa.index), &p, &ys,
                                        rt_cpu_op_in(x, n, ya.index), NULL);
  CHECK(rc == 0, "conv stand-in: %s", rt_ref_strerror(rc));
  size_t bytes = (size_t)count * ir_dtype_size(rt->dtype);
  void *h = malloc(bytes);
  if (!h) abort();
  for (int64_t i = 0; i < count; i++) {
    if (rt->dtype == IR_DT_F32) ((float *)h)[i] = r[i];
    if (rt->dtype == IR_DT_F16) ((uint16_t *)h)[i] = rt_ref_f32_to_f16(r[i]);
    if (rt->dtype == IR_DT_BF16) ((uint16_t *)h)[i] = rt_ref_f32_to_bf16(r[i]);
  }
  CgKArg out = fwd ? ya : xa;
  int ok = out.kind == CG_KARG_OUT && upload(gp, dev[n->out[out.index]], h, bytes);
  free(h);
  free(r);
  free(pro);
  return rc == 0 && ok;
}

/* A linear op's convolution (a 1x1 one, nothing fused) run by cuDNN itself,
 * so that the GPU's reading of its operands is what is compared. */
static int linear_cudnn(Gpu *gp, const IrNode *n, const CgKNode *k, CUdeviceptr *dev) {
  const CgKArg *roles[3] = {&k->conv_x, &k->conv_w, &k->conv_y};
  CUdeviceptr p[3], ws = 0;
  for (int r = 0; r < 3; r++)
    p[r] = dev[roles[r]->kind == CG_KARG_IN ? n->in[roles[r]->index] : n->out[roles[r]->index]];
  RtConvPlan *plan = NULL;
  size_t ws_bytes = 0;
  int ok = gp->dnn && rt_cudnn_conv_plan(gp->dnn, &k->conv, &plan, &ws_bytes, err, sizeof err) == RT_CUDA_OK &&
           (!ws_bytes || RT_CU(gp->api, MemAlloc, (&ws, ws_bytes), "cuDNN workspace", err, sizeof err) == RT_CUDA_OK);
  if (ok) {
    RtConvIo io = {.x = p[0], .w = p[1], .y = p[2], .workspace = ws};
    ok = rt_cudnn_conv_exec(gp->dnn, plan, &io, err, sizeof err) == RT_CUDA_OK &&
         RT_CU(gp->api, StreamSynchronize, (rt_cuda_ctx_stream(gp->ctx)), "linear on cuDNN", err, sizeof err) ==
             RT_CUDA_OK;
  }
  CHECK(ok, "%s (%s): %s", n->name ? n->name : "", ir_op_info(n->op)->name, gp->dnn ? err : "no cuDNN");
  if (ws) gp->api->MemFree(ws);
  return ok;
}

/* --- one node ----------------------------------------------------------------- */

/* Inputs the op updates in place. */
static int in_place(IrOp op, int i) {
  if (op == IR_OP_SGD_UPDATE) return i == 0 || i == 2;
  if (op == IR_OP_BATCHNORM_TRAIN) return i == 3 || i == 4;
  if (op == IR_OP_CONV2D_BN_TRAIN) return i == 4 || i == 5;
  if (op == IR_OP_LOSS_SCALE_UPDATE) return i == 1 || i == 2;
  return 0;
}

/* Compares device value v (dtype dt) with the CPU's; returns the error. */
static double compare(Gpu *gp, RtCpu *x, const IrGraph *g, int v, CUdeviceptr d, const char *what) {
  IrDtype dt = g->val[v].type.dtype;
  int64_t n = rt_cpu_numel(x, v);
  size_t bytes = value_bytes(x, g, v);
  void *h = malloc(bytes);
  if (!h) abort();
  if (RT_CU(gp->api, MemcpyDtoH, (h, d, bytes), "test output", err, sizeof err)) {
    CHECK(0, "%s: %s", what, err);
    free(h);
    return INFINITY;
  }
  const float *want = rt_cpu_data(x, v);
  double scale = 1, worst = 0;
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++)
    if (fabs(want[i]) > scale) scale = fabs(want[i]);
  /* a cast's q (i8 or FP8) is read with the scales it wrote after it (ir_value_scales: one, or one per slice
   * of dimension 0), as rt_gpu_read reads it; the CPU keeps scale * q, equal only when those are the CPU's
   * scales too.  Other values (a max pool's winners among them) are read as they are. */
  int64_t slices = ir_value_scales(g, v, BATCH);
  float *got = malloc(sizeof *got * (size_t)(n > 0 ? n : 1));
  if (!got) abort();
  if (slices)
    rt_gpu_unpack_scaled(dt, n, slices, h, got);
  else
    for (int64_t i = 0; i < n; i++) got[i] = device_value(h, dt, i);
  for (int64_t i = 0; i < n; i++) {
    double e = isnan(got[i]) != isnan(want[i]) ? INFINITY : isnan(got[i]) ? 0 : fabs(got[i] - want[i]) / scale;
    if (e > worst) worst = e, at = i;
  }
  double tol = dt == IR_DT_F32 || dt == IR_DT_I8 || is_f8(dt) ? 1e-5 : 1e-2; /* a cast's q: exact */
  CHECK(worst <= tol, "%s: error %.3g > %.0e at [%lld]: gpu %.9g cpu %.9g (first: gpu %.6g cpu %.6g)", what, worst, tol,
        (long long)at, got[at], want[at], got[0], want[0]);
  free(got);
  free(h);
  return worst;
}

/* conv2d_bn_stats's zc (output 4) on the device against its z (output 0)
 * on the device, rounded as rt_ref rounds (the cast's rounding): bit for bit. */
static void zc_exact(Gpu *gp, RtCpu *x, const IrGraph *g, const IrNode *n, CUdeviceptr *dev, const char *what) {
  int64_t count = rt_cpu_numel(x, n->out[0]);
  IrDtype dc = g->val[n->out[4]].type.dtype;
  float *z = malloc(sizeof *z * (size_t)count);
  uint16_t *zc = malloc(sizeof *zc * (size_t)count);
  if (!z || !zc) abort();
  int ok = g->val[n->out[0]].type.dtype == IR_DT_F32 && (dc == IR_DT_F16 || dc == IR_DT_BF16) &&
           !RT_CU(gp->api, MemcpyDtoH, (z, dev[n->out[0]], sizeof *z * (size_t)count), "z", err, sizeof err) &&
           !RT_CU(gp->api, MemcpyDtoH, (zc, dev[n->out[4]], sizeof *zc * (size_t)count), "zc", err, sizeof err);
  CHECK(ok, "%s: f32 z and f16/bf16 zc downloaded (%s)", what, err);
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; ok && i < count; i++) {
    uint16_t want = dc == IR_DT_F16 ? rt_ref_f32_to_f16(z[i]) : rt_ref_f32_to_bf16(z[i]);
    if (zc[i] != want && !bad++) first = i;
  }
  CHECK(bad == 0, "%s: zc is not z rounded to %s in %lld of %lld elements (first [%lld]: z %.9g, zc 0x%04x)", what,
        ir_dtype_name(dc), (long long)bad, (long long)count, (long long)first, first >= 0 ? z[first] : 0.0,
        first >= 0 ? zc[first] : 0);
  zc_nodes += ok;
  free(z);
  free(zc);
}

static void run_node(Gpu *gp, RtCpu *x, const IrGraph *g, int i, const CgKNode *k, CUfunction *fn, CUdeviceptr *dev,
                     CUdeviceptr scratch, const char *gname) {
  const IrNode *n = &g->node[i];
  const char *op = ir_op_info(n->op)->name;
  int ok = 1;
  for (int a = 0; a < n->nin && ok; a++) {
    void *h = to_device_format(x, g, n->in[a]);
    ok = upload(gp, dev[n->in[a]], h, value_bytes(x, g, n->in[a]));
    free(h);
  }
  for (int a = 0; a < n->nout && ok; a++) ok = poison(gp, dev[n->out[a]], value_bytes(x, g, n->out[a]));
  if (ok && k->scratch_bytes) ok = poison(gp, scratch, k->scratch_bytes);
  CHECK(ok, "%s node %d: %s", gname, i, err);
  /* cuMemcpyHtoD from pageable memory may return before the data lands,
   * and the kernels run on a non-blocking stream: wait for the copies */
  if (ok) ok = sync_copies(gp);
  /* the CPU's step (after the upload: it updates some inputs in place) */
  int rc = rt_cpu_op_find(n->op)->run(x, n);
  CHECK(rc == 0, "%s node %d (%s): the CPU executor failed", gname, i, op);
  for (int a = 0; a < n->nout; a++) {
    int v = n->out[a];
    IrDtype dt = g->val[v].type.dtype;
    if (dt == IR_DT_F16) rt_ref_round_f16(rt_cpu_numel(x, v), rt_cpu_data(x, v), rt_cpu_data(x, v));
    if (dt == IR_DT_BF16) rt_ref_round_bf16(rt_cpu_numel(x, v), rt_cpu_data(x, v), rt_cpu_data(x, v));
  }
  int linear =
      k->has_conv && (n->op == IR_OP_LINEAR || n->op == IR_OP_LINEAR_BWD_DATA || n->op == IR_OP_LINEAR_BWD_WEIGHT);
  if (!ok || rc || (k->nlaunch == 0 && !linear)) return;
  /* quantized operands (their scales in the epilogue), or an FP8 gradient's operands widened into scratch: the
   * stand-in computes in floats only */
  int fp8_in = 0;
  for (int a = 0; a < n->nin; a++) fp8_in |= is_f8(g->val[n->in[a]].type.dtype);
  if (k->has_conv && (k->conv.dtype == IR_DT_I8 || k->conv.dtype == IR_DT_F8E4M3 || fp8_in)) {
    quantized++;
    return;
  }
  if (k->has_conv && k->conv_x.kind == CG_KARG_SCRATCH) { /* folded (s2d.cu): cuDNN's, no stand-in */
    folded++;
    return;
  }
  if (linear ? !linear_cudnn(gp, n, k, dev) : k->has_conv && (!conv_standin(gp, x, g, n, k, dev) || !sync_copies(gp)))
    return;
  for (int l = 0; l < k->nlaunch; l++) {
    const CgKLaunch *L = &k->launch[l];
    /* the stand-in convolution writes no statistics: the node's unfused
     * launches (the fused finalize is checked through whole models by
     * test_gpu_exec, and the sums by test_cudnn_conv) */
    if (L->when == CG_K_FUSED) continue;
    CUdeviceptr ptr[CG_K_MAX_ARGS];
    void *params[CG_K_MAX_ARGS];
    for (int a = 0; a < L->nargs; a++) {
      const CgKArg *A = &L->args[a];
      ptr[a] = A->kind == CG_KARG_IN     ? dev[n->in[A->index]]
               : A->kind == CG_KARG_OUT  ? dev[n->out[A->index]]
               : A->kind == CG_KARG_KEPT ? scratch + kept_at + A->offset
                                         : scratch + A->offset;
      params[a] = &ptr[a];
    }
    if (RT_CU(gp->api, LaunchKernel,
              (fn[l], L->grid[0], L->grid[1], L->grid[2], L->block[0], L->block[1], L->block[2], L->smem,
               rt_cuda_ctx_stream(gp->ctx), params, NULL),
              L->name, err, sizeof err)) {
      CHECK(0, "%s", err);
      return;
    }
  }
  if (RT_CU(gp->api, StreamSynchronize, (rt_cuda_ctx_stream(gp->ctx)), n->name ? n->name : op, err, sizeof err)) {
    CHECK(0, "%s", err);
    return;
  }
  int before = check_nfail;
  double worst = 0;
  char what[256];
  for (int a = 0; a < n->nout; a++) {
    snprintf(what, sizeof what, "%s node %d (%s %s) output %d", gname, i, op, n->name ? n->name : "", a);
    double e = compare(gp, x, g, n->out[a], dev[n->out[a]], what);
    if (e > worst) worst = e;
  }
  for (int a = 0; a < n->nin; a++) {
    if (!in_place(n->op, a)) continue;
    snprintf(what, sizeof what, "%s node %d (%s %s) updated input %d", gname, i, op, n->name ? n->name : "", a);
    double e = compare(gp, x, g, n->in[a], dev[n->in[a]], what);
    if (e > worst) worst = e;
  }
  if (n->op == IR_OP_CONV2D_BN_STATS && n->nout == 5) {
    snprintf(what, sizeof what, "%s node %d (%s %s) zc", gname, i, op, n->name ? n->name : "");
    zc_exact(gp, x, g, n, dev, what);
  }
  OpStat *s = &stats[n->op];
  s->nodes++;
  if (kerntest_stem_mixed(g, n)) stem_mixed[n->op == IR_OP_BATCHNORM_RELU_BWD]++;
  s->failed += check_nfail != before;
  if (worst > s->worst) s->worst = worst;
}

/* --- one graph ---------------------------------------------------------------- */

static void run_graph(Gpu *gp, IrGraph *g, const char *name) {
  RtCpu *x = NULL;
  CHECK(g != NULL, "%s does not compile", name);
  if (g && rt_cpu_new(g, BATCH, &x, err, sizeof err)) {
    CHECK(0, "%s: %s", name, err);
    g = NULL;
  }
  if (!g) return;
  fill(x, g);
  CgKNode *k = calloc((size_t)g->nnode, sizeof *k);
  CUfunction *fn = calloc((size_t)g->nnode * CG_K_MAX_LAUNCH, sizeof *fn);
  CUdeviceptr *dev = calloc((size_t)g->nval, sizeof *dev), scratch = 0;
  if (!k || !fn || !dev) abort();
  char *all = NULL;
  size_t len = 0, nscratch = 16, nkept = 0;
  int ok = 1;
  for (int i = 0; i < g->nnode && ok; i++) {
    ok = cg_kernels_emit(g, i, BATCH, &gp->dev, &k[i], err, sizeof err) == 0;
    CHECK(ok, "%s: %s", name, err);
    if (!ok || !k[i].source) continue;
    size_t add = strlen(k[i].source);
    all = realloc(all, len + add + 1);
    if (!all) abort();
    memcpy(all + len, k[i].source, add + 1);
    len += add;
    if (k[i].scratch_bytes > nscratch) nscratch = k[i].scratch_bytes;
    if (k[i].pro_bytes && k[i].pro_offset + k[i].pro_bytes > nscratch) nscratch = k[i].pro_offset + k[i].pro_bytes;
    if (k[i].kept_bytes > nkept) nkept = k[i].kept_bytes;
  }
  kept_at = (nscratch + 255) & ~(size_t)255; /* a node's kept memory past the largest scratch */
  nscratch = kept_at + nkept;
  CgNvrtcOut img = {0};
  RtCudaModule *mod = NULL;
  if (ok) {
    ok = cg_nvrtc_compile(all, name, gp->arch, CG_NVRTC_CUBIN, NULL, 0, &img, err, sizeof err) == CG_OK;
    CHECK(ok, "%s: %s", name, err);
  }
  if (ok) {
    ok = rt_cuda_module_init(&mod, gp->ctx, img.image, name, err, sizeof err) == RT_CUDA_OK;
    CHECK(ok, "%s: %s", name, err);
  }
  for (int i = 0; i < g->nnode && ok; i++)
    for (int l = 0; l < k[i].nlaunch && ok; l++) {
      ok = rt_cuda_module_function(mod, k[i].launch[l].name, &fn[i * CG_K_MAX_LAUNCH + l], err, sizeof err) == 0;
      /* more than the 48 KiB of dynamic shared memory a launch gets unasked (stem_conv.cu), as rt_gpu asks */
      if (ok && k[i].launch[l].smem > 48 * 1024)
        ok = RT_CU(gp->api, FuncSetAttribute,
                   (fn[i * CG_K_MAX_LAUNCH + l], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    (int)k[i].launch[l].smem),
                   k[i].launch[l].name, err, sizeof err) == RT_CUDA_OK;
      CHECK(ok, "%s", err);
    }
  for (int v = 0; v < g->nval && ok; v++) {
    ok = RT_CU(gp->api, MemAlloc, (&dev[v], value_bytes(x, g, v)), "test buffer", err, sizeof err) == RT_CUDA_OK;
    CHECK(ok, "%s", err);
  }
  if (ok) {
    ok = RT_CU(gp->api, MemAlloc, (&scratch, nscratch), "scratch", err, sizeof err) == RT_CUDA_OK;
    CHECK(ok, "%s", err);
  }
  int fails = check_nfail;
  for (int i = 0; i < g->nnode && ok; i++) run_node(gp, x, g, i, &k[i], &fn[i * CG_K_MAX_LAUNCH], dev, scratch, name);
  if (ok) printf("%-28s %4d nodes on the GPU, %d failed checks\n", name, g->nnode, check_nfail - fails);
  for (int v = 0; v < g->nval; v++)
    if (dev[v]) gp->api->MemFree(dev[v]);
  if (scratch) gp->api->MemFree(scratch);
  rt_cuda_module_free(mod);
  cg_nvrtc_out_free(&img);
  for (int i = 0; i < g->nnode; i++) cg_kernels_free(&k[i]);
  free(k);
  free(fn);
  free(dev);
  free(all);
  rt_cpu_free(x);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_kernels_gpu SOURCE_ROOT\n");
    return 2;
  }
  Gpu gp = {0};
  RtCudaStatus s = rt_cuda_api(&gp.api, err, sizeof err);
  if (s == RT_CUDA_ENODRIVER || s == RT_CUDA_ENODEVICE) return check_skip(err);
  int count = 0;
  if (rt_cuda_device_count(&count, err, sizeof err) == RT_CUDA_OK && count == 0)
    return check_skip("the CUDA driver sees no GPU");
  s = rt_cuda_ctx_init(&gp.ctx, 0, err, sizeof err);
  if (s == RT_CUDA_ENODEVICE) return check_skip(err);
  CHECK(s == RT_CUDA_OK, "context: %s", err);
  if (s) return check_report();
  s = rt_cudnn_init(&gp.dnn, rt_cuda_ctx_stream(gp.ctx), 0, err, sizeof err);
  CHECK(s == RT_CUDA_OK, "cuDNN (the linear ops run on it): %s", err);
  RtCudaDeviceInfo info;
  CHECK(rt_cuda_device_info(0, &info, err, sizeof err) == RT_CUDA_OK, "device info: %s", err);
  gp.dev = (CgDevice){info.sm_count, 1024, 49152, info.cc_major, info.cc_minor, 0, kerntest_opts()};
  snprintf(gp.arch, sizeof gp.arch, "sm_%d%d", info.cc_major, info.cc_minor);
  int major = 0, minor = 0;
  CHECK(cg_nvrtc_version(&major, &minor, err, sizeof err) == CG_OK, "a GPU but no NVRTC: %s", err);
  printf("%s (%s, %d SMs), NVRTC %d.%d, batch %d\n", info.name, gp.arch, info.sm_count, major, minor, BATCH);
  int ng;
  const KerntestGraph *gs = kerntest_graphs(&ng);
  for (int i = 0; i < ng && major; i++) {
    Arena a;
    arena_init(&a);
    run_graph(&gp, kerntest_compile(&a, argv[1], &gs[i]), gs[i].name);
    arena_free(&a);
  }
  if (major) {
    Arena a;
    arena_init(&a);
    run_graph(&gp, kerntest_extra(&a), "extra");
    arena_free(&a);
  }
  printf("\n%-28s %6s %6s %10s\n", "op", "nodes", "failed", "worst err");
  for (int op = 0; op < IR_OP_COUNT; op++)
    if (stats[op].nodes)
      printf("%-28s %6d %6d %10.3g\n", ir_op_info((IrOp)op)->name, stats[op].nodes, stats[op].failed, stats[op].worst);
  printf("folded convolutions (checked by test_gpu_exec, not here): %d\n", folded);
  printf("quantized convolutions and FP8 gradients' widened ones (test_gpu_exec's, not here): %d\n", quantized);
  printf("f32 stem with a narrow y: %d conv2d_bn_train, %d batchnorm_relu_bwd compared\n", stem_mixed[0],
         stem_mixed[1]);
  CHECK(!major || (stem_mixed[0] > 0 && stem_mixed[1] > 0), "the f32 stem's mixed-dtype nodes were not compared");
  printf("conv2d_bn_stats writing zc, checked bit for bit: %d\n", zc_nodes);
  CHECK(!major || zc_nodes > 0, "no conv2d_bn_stats with zc was compared");
  rt_cudnn_free(gp.dnn);
  rt_cuda_ctx_free(gp.ctx);
  return check_report();
}
