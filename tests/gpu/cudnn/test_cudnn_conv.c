/* test_cudnn_conv.c - cuDNN convolutions (rt_cudnn.c) against the CPU
 * reference (rt_ref_conv.c), then the ResNet-50 conv timing table.
 *
 * Accuracy: ResNet-50 shapes (the 7x7 s2 stem on C=4, 1x1 s1, 3x3 s1 p1,
 * 3x3 s2 p1, the 1x1 s2 downsample) at batch 2..8, plus a dilated and a
 * grouped 3x3, each forward, backward-data and backward-filter in f32 and
 * f16, on random data (f16-rounded for f16).  The output buffer starts as
 * all-ones bytes (NaN), so an element cuDNN skips fails.  Passes when
 * norm(gpu - ref) / norm(ref) is below 1e-4 (f32: no TF32 engines) or
 * 1e-2 (f16).  A grouped case cuDNN reports as CUDNN_STATUS_NOT_SUPPORTED*
 * is printed as unsupported, not failed.
 *
 * GenStats: the f16 forward convolutions of the 1x1 and 3x3 shapes again
 * with the statistics fused (CgConvDesc.genstats); the sums of y and y*y
 * must match those of the y it wrote, within f16 rounding of y.
 * Prologue: the same shapes' forward (with GenStats) and weight gradient
 * reading relu(x * scale + bias) (CgConvDesc.prologue), within 1e-2.
 * Epilogue: their forward with scale and bias (plus a residual, plus relu)
 * applied to the FP32 result, and their data gradient masked by a relu
 * output (CgConvDesc.epilogue), within 1e-2.
 * Dbn: data gradients with cuDNN's DgradDreluBNBwdWeight fusion
 * (CgConvDesc.dbn) in f16 and bf16, on a 3x3 s1 and two 1x1 shapes: dx
 * masked by z's recomputed batch norm, dgamma, dbeta, and a, b, c checked
 * by applying them (dz = a*dx + b*z + c against the reference batch-norm
 * backward), within 1e-2 (f16) or 3e-2 (bf16), on the heuristics' and the
 * tuned plan.  A graph cuDNN has no engine for prints "dbn: no engine" and
 * fails only in f16 with NETC_EXPECT_DBN=1 (cuDNN 9.14 on the H200 has f16
 * engines for every shape here and no bf16 ones).
 *
 * Timing (skipped with --no-bench): every distinct ResNet-50 conv at batch
 * 256 in f16 (and the stem's other forms: f32, f32 with TF32, f16 on 8
 * padded channels), each kind planned twice (heuristics'
 * first choice; tuned: fastest of the first candidates), timed with events
 * over 10 runs after 2 warm-ups; TFLOP/s counts 2*N*Ho*Wo*K*C/g*R*S.  The
 * last lines weigh each shape by how often ResNet-50 uses it, then each f16
 * forward shape is timed plain and with GenStats (tuned); --bench-genstats
 * times only that.
 *
 * Without a driver, a GPU or libcudnn it prints "skipped: <why>", exits 77. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "rt_cudnn.h"
#include "rt_ref.h"

enum { BENCH_WARMUP = 2, BENCH_RUNS = 10, BENCH_BATCH = 256, BENCH_BUDGET_S = 150 };

static char err[4096];

typedef struct Shape {
  const char *name;
  int n, c, h, w, k, r, s, stride, pad, dil, groups;
  int count; /* uses in ResNet-50 (timing table) */
} Shape;

typedef struct Gpu {
  RtCudaCtx *ctx;
  const RtCudaApi *api;
  CUstream stream;
  RtCudnn *dnn;       /* heuristics' first choice */
  RtCudnn *dnn_tuned; /* tuned */
} Gpu;

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float rand_value(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)((rng_state >> 40) & 0xffffff) * 0x1p-23f - 1.0f;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static CgConvDesc shape_desc(const Shape *sh, CgConvKind kind, IrDtype dt) {
  CgConvDesc d;
  memset(&d, 0, sizeof d);
  d.kind = kind;
  d.n = sh->n, d.c = sh->c, d.h = sh->h, d.w = sh->w;
  d.k = sh->k, d.r = sh->r, d.s = sh->s;
  d.ho = (sh->h + 2 * sh->pad - sh->dil * (sh->r - 1) - 1) / sh->stride + 1;
  d.wo = (sh->w + 2 * sh->pad - sh->dil * (sh->s - 1) - 1) / sh->stride + 1;
  d.stride[0] = d.stride[1] = sh->stride;
  d.pad[0] = d.pad[1] = sh->pad;
  d.dilation[0] = d.dilation[1] = sh->dil;
  d.groups = sh->groups;
  d.dtype = dt;
  return d;
}

static size_t elem_bytes(IrDtype dt) { return dt == IR_DT_F32 ? 4 : 2; }

/* Host floats -> a new device buffer in dt's storage format. */
static int upload(Gpu *g, const float *x, int64_t n, IrDtype dt, CUdeviceptr *out) {
  size_t bytes = elem_bytes(dt) * (size_t)n;
  void *host = malloc(bytes);
  if (!host) return 0;
  if (dt == IR_DT_F32) {
    memcpy(host, x, bytes);
  } else {
    uint16_t *hh = host;
    for (int64_t i = 0; i < n; i++) hh[i] = dt == IR_DT_BF16 ? rt_ref_f32_to_bf16(x[i]) : rt_ref_f32_to_f16(x[i]);
  }
  int ok = !RT_CU(g->api, MemAlloc, (out, bytes), "test buffer", err, sizeof err) &&
           !RT_CU(g->api, MemcpyHtoD, (*out, host, bytes), "test upload", err, sizeof err);
  free(host);
  return ok;
}

/* A device buffer of n elements filled with all-ones bytes (NaN in f32/f16). */
static int alloc_nan(Gpu *g, int64_t n, IrDtype dt, CUdeviceptr *out) {
  size_t bytes = elem_bytes(dt) * (size_t)n;
  void *host = malloc(bytes);
  if (!host) return 0;
  memset(host, 0xff, bytes);
  int ok = !RT_CU(g->api, MemAlloc, (out, bytes), "test buffer", err, sizeof err) &&
           !RT_CU(g->api, MemcpyHtoD, (*out, host, bytes), "test fill", err, sizeof err);
  free(host);
  return ok;
}

static int download(Gpu *g, CUdeviceptr p, int64_t n, IrDtype dt, float *x) {
  size_t bytes = elem_bytes(dt) * (size_t)n;
  void *host = malloc(bytes);
  if (!host) return 0;
  int ok = !RT_CU(g->api, MemcpyDtoH, (host, p, bytes), "test download", err, sizeof err);
  if (ok && dt == IR_DT_F32) memcpy(x, host, bytes);
  if (ok && dt != IR_DT_F32)
    for (int64_t i = 0; i < n; i++) {
      uint16_t h = ((uint16_t *)host)[i];
      x[i] = dt == IR_DT_BF16 ? rt_ref_bf16_to_f32(h) : rt_ref_f16_to_f32(h);
    }
  free(host);
  return ok;
}

static float *rand_array(int64_t n, IrDtype dt) {
  float *x = malloc(sizeof *x * (size_t)n);
  if (!x) return NULL;
  for (int64_t i = 0; i < n; i++) x[i] = rand_value();
  if (dt == IR_DT_F16) rt_ref_round_f16(n, x, x);
  if (dt == IR_DT_BF16) rt_ref_round_bf16(n, x, x);
  return x;
}

static const char *KIND_NAMES[] = {"fwd", "bwd-data", "bwd-filter"};

/* norm(got - ref) / norm(ref) over n elements (NaN when got holds one);
 * *at (when not NULL): the element with the largest difference. */
static double rel_error(const float *got, const float *ref, int64_t n, int64_t *at) {
  double num = 0, den = 0, worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double diff = (double)got[i] - (double)ref[i];
    num += diff * diff, den += (double)ref[i] * ref[i];
    if (at && !(fabs(diff) <= worst)) worst = fabs(diff), *at = i;
  }
  return sqrt(num) / (den > 0 ? sqrt(den) : 1);
}

/* A fused f16 convolution's result against its reference, within 1e-2:
 * one printed row, one check. */
static void judge_fused(const char *shape, const char *what, const float *got, const float *ref, int64_t n,
                        size_t ws_bytes) {
  double rel = rel_error(got, ref, n, NULL);
  int pass = rel < 1e-2; /* false for NaN */
  printf("%-22s f16  %-26s rel err %.3e  (tol 1e-02) %s  ws %zu B\n", shape, what, rel, pass ? "ok" : "FAIL", ws_bytes);
  CHECK(pass, "%s %s: relative error %.3e", shape, what, rel);
}

/* One shape, dtype and kind: GPU against the reference; prints one row. */
static void check_case(Gpu *g, const Shape *sh, IrDtype dt, CgConvKind kind) {
  CgConvDesc d = shape_desc(sh, kind, dt);
  RtRefAct xs = {d.n, d.c, d.h, d.w, RT_REF_NHWC}, ys = {d.n, d.k, d.ho, d.wo, RT_REF_NHWC};
  RtRefFilter wf = {d.k, d.c / d.groups, d.r, d.s, RT_REF_KRSC};
  RtRefConvParam p = {d.stride[0], d.stride[1],   d.pad[0],      d.pad[1], d.pad[0],
                      d.pad[1],    d.dilation[0], d.dilation[1], d.groups};
  int64_t nx = rt_ref_act_count(&xs), ny = rt_ref_act_count(&ys), nw = (int64_t)wf.K * wf.C * wf.R * wf.S;
  int64_t nout = kind == CG_CONV_FWD ? ny : kind == CG_CONV_BWD_DATA ? nx : nw;
  const char *dtn = dt == IR_DT_F32 ? "f32" : "f16";
  float *x = rand_array(nx, dt), *w = rand_array(nw, dt), *y = rand_array(ny, dt);
  float *ref = malloc(sizeof *ref * (size_t)nout), *got = malloc(sizeof *got * (size_t)nout);
  CUdeviceptr bx = 0, bw = 0, by = 0, ws = 0;
  CHECK(x && w && y && ref && got, "out of host memory");
  if (!x || !w || !y || !ref || !got) goto done;

  int rc = kind == CG_CONV_FWD        ? rt_ref_conv2d_fwd(&xs, x, &wf, w, NULL, &p, &ys, ref, NULL)
           : kind == CG_CONV_BWD_DATA ? rt_ref_conv2d_bwd_data(&xs, ref, &wf, w, &p, &ys, y, NULL)
                                      : rt_ref_conv2d_bwd_weight(&xs, x, &wf, ref, NULL, &p, &ys, y, NULL);
  CHECK(rc == RT_REF_OK, "%s: reference: %s", sh->name, rt_ref_strerror(rc));
  if (rc) goto done;

  RtConvPlan *plan = NULL;
  size_t ws_bytes = 0;
  RtCudaStatus s = rt_cudnn_conv_plan(g->dnn, &d, &plan, &ws_bytes, err, sizeof err);
  if (s && sh->groups > 1 && strstr(err, "CUDNN_STATUS_NOT_SUPPORTED")) {
    printf("%-22s %-4s %-10s unsupported: %s\n", sh->name, dtn, KIND_NAMES[kind], err);
    goto done;
  }
  CHECK(!s, "%s %s %s: %s", sh->name, dtn, KIND_NAMES[kind], err);
  if (s) goto done;
  int ok =
      (kind == CG_CONV_BWD_DATA ? alloc_nan(g, nx, dt, &bx) : upload(g, x, nx, dt, &bx)) &&
      (kind == CG_CONV_BWD_FILTER ? alloc_nan(g, nw, dt, &bw) : upload(g, w, nw, dt, &bw)) &&
      (kind == CG_CONV_FWD ? alloc_nan(g, ny, dt, &by) : upload(g, y, ny, dt, &by)) &&
      (!ws_bytes || !RT_CU(g->api, MemAlloc, (&ws, ws_bytes), "workspace", err, sizeof err)) &&
      !rt_cudnn_conv_exec(g->dnn, plan, &(RtConvIo){.x = bx, .w = bw, .y = by, .workspace = ws}, err, sizeof err) &&
      !RT_CU(g->api, StreamSynchronize, (g->stream), "conv", err, sizeof err) &&
      download(g,
               kind == CG_CONV_FWD        ? by
               : kind == CG_CONV_BWD_DATA ? bx
                                          : bw,
               nout, dt, got);
  CHECK(ok, "%s %s %s: %s", sh->name, dtn, KIND_NAMES[kind], err);
  if (!ok) goto done;

  int64_t at = 0;
  double rel = rel_error(got, ref, nout, &at), worst = fabs((double)got[at] - (double)ref[at]);
  double tol = dt == IR_DT_F32 ? 1e-4 : 1e-2;
  int pass = rel < tol; /* false for NaN */
  printf("%-22s %-4s %-10s rel err %.3e  (tol %.0e) %s  ws %zu B\n", sh->name, dtn, KIND_NAMES[kind], rel, tol,
         pass ? "ok" : "FAIL", ws_bytes);
  CHECK(pass, "%s %s %s: relative error %.3e >= %.0e; largest diff %.4g at %" PRId64 " (got %.6g want %.6g)", sh->name,
        dtn, KIND_NAMES[kind], rel, tol, worst, at, got[at], ref[at]);
done:
  if (bx) g->api->MemFree(bx);
  if (bw) g->api->MemFree(bw);
  if (by) g->api->MemFree(by);
  if (ws) g->api->MemFree(ws);
  free(x), free(w), free(y), free(ref), free(got);
}

/* Shape sh's f16 forward convolution with GenStats: y and the sums it
 * wrote against sums of that y in double. */
static void check_genstats(Gpu *g, const Shape *sh) {
  CgConvDesc d = shape_desc(sh, CG_CONV_FWD, IR_DT_F16);
  d.genstats = 1;
  RtRefAct xs = {d.n, d.c, d.h, d.w, RT_REF_NHWC}, ys = {d.n, d.k, d.ho, d.wo, RT_REF_NHWC};
  int64_t nx = rt_ref_act_count(&xs), ny = rt_ref_act_count(&ys), nw = (int64_t)d.k * d.c * d.r * d.s;
  float *x = rand_array(nx, IR_DT_F16), *w = rand_array(nw, IR_DT_F16), *y = malloc(sizeof *y * (size_t)ny);
  float *st = malloc(sizeof *st * 2 * (size_t)d.k);
  double *ref = calloc(3 * (size_t)d.k, sizeof *ref);
  CUdeviceptr bx = 0, bw = 0, by = 0, bs = 0, ws = 0;
  CHECK(x && w && y && st && ref, "out of host memory");
  RtConvPlan *plan = NULL, *plain = NULL;
  size_t ws_bytes = 0, plain_ws = 0;
  RtCudaStatus s =
      x && w && y && st && ref ? rt_cudnn_conv_plan(g->dnn, &d, &plan, &ws_bytes, err, sizeof err) : RT_CUDA_ENOMEM;
  CHECK(!s, "%s genstats plan: %s", sh->name, err);
  if (s) goto done;
  int ok = upload(g, x, nx, IR_DT_F16, &bx) && upload(g, w, nw, IR_DT_F16, &bw) && alloc_nan(g, ny, IR_DT_F16, &by) &&
           alloc_nan(g, 2 * (int64_t)d.k, IR_DT_F32, &bs) &&
           (!ws_bytes || !RT_CU(g->api, MemAlloc, (&ws, ws_bytes), "workspace", err, sizeof err)) &&
           !rt_cudnn_conv_exec(g->dnn, plan, &(RtConvIo){.x = bx, .w = bw, .y = by, .stats = bs, .workspace = ws}, err,
                               sizeof err) &&
           !RT_CU(g->api, StreamSynchronize, (g->stream), "conv", err, sizeof err) &&
           download(g, by, ny, IR_DT_F16, y) && download(g, bs, 2 * (int64_t)d.k, IR_DT_F32, st);
  CHECK(ok, "%s genstats run: %s", sh->name, err);
  if (!ok) goto done;
  CHECK(rt_cudnn_conv_exec(g->dnn, plan, &(RtConvIo){.x = bx, .w = bw, .y = by, .workspace = ws}, err, sizeof err) ==
            RT_CUDA_EARG,
        "a GenStats plan ran without its statistics buffer");
  d.genstats = 0;
  CHECK(!rt_cudnn_conv_plan(g->dnn, &d, &plain, &plain_ws, err, sizeof err) && plain != plan &&
            rt_cudnn_conv_exec(g->dnn, plain, &(RtConvIo){.x = bx, .w = bw, .y = by, .stats = bs, .workspace = ws}, err,
                               sizeof err) == RT_CUDA_EARG,
        "plain and GenStats plans of %s not told apart", sh->name);
  for (int64_t i = 0; i < ny; i++) {
    int k = (int)(i % d.k);
    ref[k] += y[i], ref[d.k + k] += (double)y[i] * y[i], ref[2 * d.k + k] += fabs(y[i]);
  }
  double worst1 = 0, worst2 = 0;
  for (int k = 0; k < d.k; k++) {
    /* y is the f32 accumulator rounded to f16: 2^-11 relative per element */
    double e1 = fabs(st[k] - ref[k]) / (ref[2 * d.k + k] * 1e-3 + 1e-3);
    double e2 = fabs(st[d.k + k] - ref[d.k + k]) / (ref[d.k + k] * 2e-3 + 1e-3);
    if (!(e1 <= worst1)) worst1 = e1;
    if (!(e2 <= worst2)) worst2 = e2;
  }
  int pass = worst1 <= 1 && worst2 <= 1;
  printf("%-22s f16  fwd+genstats sums %.2f, squares %.2f of tolerance %s  ws %zu B\n", sh->name, worst1, worst2,
         pass ? "ok" : "FAIL", ws_bytes);
  CHECK(pass, "%s genstats: sums off by %.2f, squares by %.2f of the tolerance", sh->name, worst1, worst2);
done:
  CUdeviceptr bufs[] = {bx, bw, by, bs, ws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) g->api->MemFree(bufs[i]);
  free(x), free(w), free(y), free(st), free(ref);
}

/* Shape sh's f16 forward convolution (with GenStats) or weight gradient
 * with the scale-bias-relu prologue, against the reference convolution of
 * relu(x * scale + bias) rounded to f16 (the prologue's FP32 result is
 * converted to f16 for the tensor cores). */
static void check_prologue(Gpu *g, const Shape *sh, CgConvKind kind) {
  CgConvDesc d = shape_desc(sh, kind, IR_DT_F16);
  d.prologue = 1;
  d.genstats = kind == CG_CONV_FWD;
  RtRefAct xs = {d.n, d.c, d.h, d.w, RT_REF_NHWC}, ys = {d.n, d.k, d.ho, d.wo, RT_REF_NHWC};
  RtRefFilter wf = {d.k, d.c, d.r, d.s, RT_REF_KRSC};
  RtRefConvParam p = {d.stride[0], d.stride[1], d.pad[0], d.pad[1], d.pad[0], d.pad[1], 1, 1, 1};
  int64_t nx = rt_ref_act_count(&xs), ny = rt_ref_act_count(&ys), nw = (int64_t)d.k * d.c * d.r * d.s;
  int64_t nout = kind == CG_CONV_FWD ? ny : nw;
  float *x = rand_array(nx, IR_DT_F16), *w = rand_array(nw, IR_DT_F16), *y = rand_array(ny, IR_DT_F16);
  float *sb = rand_array(2 * (int64_t)d.c, IR_DT_F16), *a = malloc(sizeof *a * (size_t)nx);
  float *ref = malloc(sizeof *ref * (size_t)nout), *got = malloc(sizeof *got * (size_t)nout);
  CUdeviceptr bx = 0, bw = 0, by = 0, bs = 0, bsb = 0, ws = 0;
  const char *kn = KIND_NAMES[kind];
  CHECK(x && w && y && sb && a && ref && got, "out of host memory");
  if (!x || !w || !y || !sb || !a || !ref || !got) goto done;
  for (int64_t i = 0; i < nx; i++) {
    float v = x[i] * sb[i % d.c] + sb[d.c + i % d.c];
    a[i] = v > 0 ? v : 0;
  }
  rt_ref_round_f16(nx, a, a);
  int rc = kind == CG_CONV_FWD ? rt_ref_conv2d_fwd(&xs, a, &wf, w, NULL, &p, &ys, ref, NULL)
                               : rt_ref_conv2d_bwd_weight(&xs, a, &wf, ref, NULL, &p, &ys, y, NULL);
  CHECK(rc == RT_REF_OK, "%s: reference: %s", sh->name, rt_ref_strerror(rc));
  if (rc) goto done;
  RtConvPlan *plan = NULL;
  size_t ws_bytes = 0;
  RtCudaStatus s = rt_cudnn_conv_plan(g->dnn, &d, &plan, &ws_bytes, err, sizeof err);
  CHECK(!s, "%s prologue %s plan: %s", sh->name, kn, err);
  if (s) goto done;
  int fwd = kind == CG_CONV_FWD;
  RtConvIo io;
  int ok = upload(g, x, nx, IR_DT_F16, &bx) && upload(g, sb, 2 * (int64_t)d.c, IR_DT_F16, &bsb) &&
           (fwd ? upload(g, w, nw, IR_DT_F16, &bw) && alloc_nan(g, ny, IR_DT_F16, &by) &&
                      alloc_nan(g, 2 * (int64_t)d.k, IR_DT_F32, &bs)
                : alloc_nan(g, nw, IR_DT_F16, &bw) && upload(g, y, ny, IR_DT_F16, &by)) &&
           (!ws_bytes || !RT_CU(g->api, MemAlloc, (&ws, ws_bytes), "workspace", err, sizeof err));
  io = (RtConvIo){.x = bx, .w = bw, .y = by, .stats = bs, .sb = bsb, .workspace = ws};
  ok = ok && !rt_cudnn_conv_exec(g->dnn, plan, &io, err, sizeof err) &&
       !RT_CU(g->api, StreamSynchronize, (g->stream), "conv", err, sizeof err) &&
       download(g, fwd ? by : bw, nout, IR_DT_F16, got);
  CHECK(ok, "%s prologue %s run: %s", sh->name, kn, err);
  if (!ok) goto done;
  io.sb = 0;
  CHECK(rt_cudnn_conv_exec(g->dnn, plan, &io, err, sizeof err) == RT_CUDA_EARG,
        "a prologue plan ran without its scale and bias");
  io.sb = bsb;
  float ms = -1;
  CHECK(!rt_cudnn_conv_time(g->dnn, plan, &io, 3, &ms, err, sizeof err) && ms > 0, "%s prologue %s timing: %s",
        sh->name, kn, err);
  CHECK(rt_cudnn_conv_time(g->dnn, plan, &io, 0, &ms, err, sizeof err) == RT_CUDA_EARG,
        "conv timing with 0 runs accepted");
  char what[64];
  snprintf(what, sizeof what, "prologue+%s", kn);
  judge_fused(sh->name, what, got, ref, nout, ws_bytes);
done:
  CUdeviceptr bufs[] = {bx, bw, by, bs, bsb, ws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) g->api->MemFree(bufs[i]);
  free(x), free(w), free(y), free(sb), free(a), free(ref), free(got);
}

/* Shape sh's f16 forward convolution with the epilogue flags epi (scale and
 * bias, a residual, relu), or its data gradient [plus a residual] masked by
 * relu's output (CG_EPI_DRELU), against the reference convolution then the
 * same arithmetic in f32, rounded to f16 once. */
static void check_epilogue(Gpu *g, const Shape *sh, int epi) {
  int fwd = !(epi & CG_EPI_DRELU);
  CgConvDesc d = shape_desc(sh, fwd ? CG_CONV_FWD : CG_CONV_BWD_DATA, IR_DT_F16);
  d.epilogue = epi;
  RtRefAct xs = {d.n, d.c, d.h, d.w, RT_REF_NHWC}, ys = {d.n, d.k, d.ho, d.wo, RT_REF_NHWC};
  RtRefFilter wf = {d.k, d.c, d.r, d.s, RT_REF_KRSC};
  RtRefConvParam p = {d.stride[0], d.stride[1], d.pad[0], d.pad[1], d.pad[0], d.pad[1], 1, 1, 1};
  int64_t nx = rt_ref_act_count(&xs), ny = rt_ref_act_count(&ys), nw = (int64_t)d.k * d.c * d.r * d.s;
  int64_t nout = fwd ? ny : nx;
  float *x = rand_array(nx, IR_DT_F16), *w = rand_array(nw, IR_DT_F16), *y = rand_array(ny, IR_DT_F16);
  float *extra = rand_array(nout, IR_DT_F16), *esb = rand_array(2 * (int64_t)d.k, IR_DT_F32);
  float *addend = rand_array(nout, IR_DT_F16); /* the data gradient's residual */
  float *ref = malloc(sizeof *ref * (size_t)nout), *got = malloc(sizeof *got * (size_t)nout);
  CUdeviceptr bx = 0, bw = 0, by = 0, be = 0, bsb = 0, ba = 0, ws = 0;
  char what[64];
  snprintf(what, sizeof what, "%s%s%s", fwd ? "fwd+scale-bias" : "bwd-data+drelu", epi & CG_EPI_RESIDUAL ? "-add" : "",
           epi & CG_EPI_RELU ? "-relu" : "");
  CHECK(x && w && y && extra && esb && addend && ref && got, "out of host memory");
  if (!x || !w || !y || !extra || !esb || !addend || !ref || !got) goto done;
  int rc = fwd ? rt_ref_conv2d_fwd(&xs, x, &wf, w, NULL, &p, &ys, ref, NULL)
               : rt_ref_conv2d_bwd_data(&xs, ref, &wf, w, &p, &ys, y, NULL);
  CHECK(rc == RT_REF_OK, "%s: reference: %s", sh->name, rt_ref_strerror(rc));
  if (rc) goto done;
  for (int64_t i = 0; i < nout; i++) {
    float r = ref[i];
    if (fwd) {
      int k = (int)(i % d.k);
      r = r * esb[k] + esb[d.k + k];
      if (epi & CG_EPI_RESIDUAL) r += extra[i];
      if ((epi & CG_EPI_RELU) && r < 0) r = 0;
    } else {
      if (epi & CG_EPI_RESIDUAL) r += addend[i];
      if (!(extra[i] > 0)) r = 0;
    }
    ref[i] = r;
  }
  rt_ref_round_f16(nout, ref, ref);
  RtConvPlan *plan = NULL;
  size_t ws_bytes = 0;
  RtCudaStatus s = rt_cudnn_conv_plan(g->dnn, &d, &plan, &ws_bytes, err, sizeof err);
  CHECK(!s, "%s %s plan: %s", sh->name, what, err);
  if (s) goto done;
  int ok = upload(g, w, nw, IR_DT_F16, &bw) && upload(g, extra, nout, IR_DT_F16, &be) &&
           (fwd ? upload(g, x, nx, IR_DT_F16, &bx) && alloc_nan(g, ny, IR_DT_F16, &by) &&
                      upload(g, esb, 2 * (int64_t)d.k, IR_DT_F32, &bsb)
                : alloc_nan(g, nx, IR_DT_F16, &bx) && upload(g, y, ny, IR_DT_F16, &by) &&
                      (!(epi & CG_EPI_RESIDUAL) || upload(g, addend, nout, IR_DT_F16, &ba))) &&
           (!ws_bytes || !RT_CU(g->api, MemAlloc, (&ws, ws_bytes), "workspace", err, sizeof err));
  RtConvIo io = {.x = bx,
                 .w = bw,
                 .y = by,
                 .workspace = ws,
                 .esb = bsb,
                 .residual = epi & CG_EPI_RESIDUAL ? (fwd ? be : ba) : 0,
                 .mask = fwd ? 0 : be};
  ok = ok && !rt_cudnn_conv_exec(g->dnn, plan, &io, err, sizeof err) &&
       !RT_CU(g->api, StreamSynchronize, (g->stream), "conv", err, sizeof err) &&
       download(g, fwd ? by : bx, nout, IR_DT_F16, got);
  CHECK(ok, "%s %s run: %s", sh->name, what, err);
  if (!ok) goto done;
  judge_fused(sh->name, what, got, ref, nout, ws_bytes);
done:
  CUdeviceptr bufs[] = {bx, bw, by, be, bsb, ba, ws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) g->api->MemFree(bufs[i]);
  free(x), free(w), free(y), free(extra), free(esb), free(addend), free(ref), free(got);
}

/* max |got - ref| / max |ref| over n values (NaN when got holds one). */
static double rel_max(const float *got, const double *ref, int n) {
  double worst = 0, top = 0;
  for (int i = 0; i < n; i++) {
    double diff = fabs((double)got[i] - ref[i]);
    if (!(diff <= worst)) worst = diff;
    if (fabs(ref[i]) > top) top = fabs(ref[i]);
  }
  return worst / (top > 0 ? top : 1);
}

/* A dbn row's data: its references and device buffers. */
typedef struct DbnCase {
  const Shape *sh;
  const char *dtn;
  CgConvDesc d;
  int64_t nx;
  const float *z, *ref, *mean, *invstd, *gamma;
  const double *dgamma, *dbeta; /* references, in double */
  const double *abc;            /* the coefficients' closed forms (see check_dbn) */
  RtConvIo io;                  /* every buffer but the workspace */
  double tol;
} DbnCase;

/* bytes of all-ones (NaN) at p, on the stream. */
static int fill_nan(Gpu *g, CUdeviceptr p, size_t bytes) {
  return !RT_CU(g->api, MemsetD8Async, (p, 0xff, bytes, g->stream), "test fill", err, sizeof err);
}

/* One dbn plan (from dnn) run on c's buffers and judged: one printed row,
 * one check; 1 when dnn made a plan, 0 when not.  The plan is timed once,
 * then run twice: its outputs start as NaN and are zeroed before each run,
 * so outputs an engine accumulates into without that zeroing fail. */
static int judge_dbn(Gpu *g, DbnCase *c, RtCudnn *dnn, const char *how, int expect) {
  const CgConvDesc *d = &c->d;
  int C = d->c;
  int64_t nx = c->nx;
  RtConvPlan *plan = NULL;
  size_t ws_bytes = 0;
  CUdeviceptr ws = 0;
  int planned = 0;
  float *got = malloc(sizeof *got * (size_t)nx), *dz = malloc(sizeof *dz * (size_t)nx);
  float *dzref = malloc(sizeof *dzref * (size_t)nx), *out = malloc(sizeof *out * 5 * (size_t)C);
  CHECK(got && dz && dzref && out, "out of host memory");
  if (!got || !dz || !dzref || !out) goto done;
  RtCudaStatus s = rt_cudnn_conv_plan(dnn, d, &plan, &ws_bytes, err, sizeof err);
  if (s && s != RT_CUDA_EARG) {
    printf("%-22s %-4s dbn: no engine: %s%s\n", c->sh->name, c->dtn, err,
           expect ? "" : "  (not supported here; NETC_EXPECT_DBN=1 makes this a failure)");
    CHECK(!expect, "%s %s dbn %s: no engine: %s", c->sh->name, c->dtn, how, err);
    goto done;
  }
  CHECK(!s, "%s %s dbn %s plan: %s", c->sh->name, c->dtn, how, err);
  if (s) goto done;
  planned = 1;
  RtConvIo io = c->io;
  io.bn.z = 0;
  CHECK(rt_cudnn_conv_exec(dnn, plan, &io, err, sizeof err) == RT_CUDA_EARG, "a dbn plan ran without z");
  io = c->io;
  io.mask = io.bn.z;
  CHECK(rt_cudnn_conv_exec(dnn, plan, &io, err, sizeof err) == RT_CUDA_EARG, "a dbn plan ran with a drelu mask");
  io = c->io;
  float ms = -1;
  int ok =
      (!ws_bytes || !RT_CU(g->api, MemAlloc, (&ws, ws_bytes), "workspace", err, sizeof err)) &&
      fill_nan(g, io.bn.dgamma, sizeof(float) * (size_t)C) && fill_nan(g, io.bn.dbeta, sizeof(float) * (size_t)C) &&
      fill_nan(g, io.bn.abc, 3 * sizeof(float) * (size_t)C) && fill_nan(g, io.x, elem_bytes(d->dtype) * (size_t)nx);
  io.workspace = ws;
  ok = ok && !rt_cudnn_conv_time(dnn, plan, &io, 1, &ms, err, sizeof err) &&
       !rt_cudnn_conv_exec(dnn, plan, &io, err, sizeof err) && !rt_cudnn_conv_exec(dnn, plan, &io, err, sizeof err) &&
       !RT_CU(g->api, StreamSynchronize, (g->stream), "conv", err, sizeof err) &&
       download(g, io.x, nx, d->dtype, got) && download(g, io.bn.dgamma, C, IR_DT_F32, out) &&
       download(g, io.bn.dbeta, C, IR_DT_F32, out + C) &&
       download(g, io.bn.abc, 3 * (int64_t)C, IR_DT_F32, out + 2 * C);
  CHECK(ok, "%s %s dbn %s run: %s", c->sh->name, c->dtn, how, err);
  if (!ok) goto done;
  /* a, b, c applied to the x it wrote, against the batch norm's backward of that x */
  const float *a = out + 2 * C, *b = out + 3 * C, *cc = out + 4 * C;
  for (int64_t i = 0; i < nx; i++) {
    int k = (int)(i % C);
    dz[i] = (float)((double)a[k] * got[i] + (double)b[k] * c->z[i] + cc[k]);
  }
  RtRefAct xs = {d->n, d->c, d->h, d->w, RT_REF_NHWC};
  int rc = rt_ref_batchnorm_bwd(&xs, c->z, got, c->gamma, c->mean, c->invstd, dzref, NULL, NULL);
  CHECK(rc == RT_REF_OK, "%s: batch-norm reference: %s", c->sh->name, rt_ref_strerror(rc));
  double ex = rel_error(got, c->ref, nx, NULL), eg = rel_max(out, c->dgamma, C), eb = rel_max(out + C, c->dbeta, C);
  double ez = rel_error(dz, dzref, nx, NULL), e3[3];
  for (int i = 0; i < 3; i++) e3[i] = rel_max(out + (2 + i) * C, c->abc + i * C, C);
  int pass = rc == RT_REF_OK && ex < c->tol && eg < c->tol && eb < c->tol && ez < c->tol; /* false for NaN */
  for (int i = 0; i < 3; i++) pass = pass && e3[i] < c->tol;
  printf("%-22s %-4s bwd-data+dbn %-5s dx %.1e dgamma %.1e dbeta %.1e a %.1e b %.1e c %.1e dz %.1e (tol %.0e) %s  "
         "ws %zu B\n",
         c->sh->name, c->dtn, how, ex, eg, eb, e3[0], e3[1], e3[2], ez, c->tol, pass ? "ok" : "FAIL", ws_bytes);
  CHECK(pass, "%s %s dbn %s: errors dx %.3e dgamma %.3e dbeta %.3e a %.3e b %.3e c %.3e dz %.3e (tol %.0e)",
        c->sh->name, c->dtn, how, ex, eg, eb, e3[0], e3[1], e3[2], ez, c->tol);
done:
  if (ws) g->api->MemFree(ws);
  free(got), free(dz), free(dzref), free(out);
  return planned;
}

/* Shape sh's data gradient with dbn in dt (f16 or bf16) on random data: z
 * with its own batch statistics (mean, invstd = 1/sqrt(var + 1e-5)),
 * gamma in [0.5, 1.5), beta in [-0.25, 0.25).  Expected: the reference
 * data gradient masked by rt_ref_bn_relu_mask, rounded to dt; dgamma and
 * dbeta its sums in double; with k = gamma * invstd and M = N*H*W, the
 * batch-norm backward dz = k * (x - dbeta/M - (z - mean) * invstd *
 * dgamma/M) regrouped: a = k, b = -k * invstd * dgamma/M, c = -b * mean -
 * k * dbeta/M (dz alone would let a small c's error pass). */
static void check_dbn(Gpu *g, const Shape *sh, IrDtype dt, int expect) {
  DbnCase c;
  memset(&c, 0, sizeof c);
  c.sh = sh;
  c.dtn = dt == IR_DT_BF16 ? "bf16" : "f16";
  c.tol = dt == IR_DT_BF16 ? 3e-2 : 1e-2;
  c.d = shape_desc(sh, CG_CONV_BWD_DATA, dt);
  c.d.dbn = 1;
  const CgConvDesc *d = &c.d;
  int C = d->c;
  RtRefAct xs = {d->n, d->c, d->h, d->w, RT_REF_NHWC}, ys = {d->n, d->k, d->ho, d->wo, RT_REF_NHWC};
  RtRefFilter wf = {d->k, d->c, d->r, d->s, RT_REF_KRSC};
  RtRefConvParam p = {d->stride[0], d->stride[1], d->pad[0], d->pad[1], d->pad[0], d->pad[1], 1, 1, 1};
  int64_t nx = rt_ref_act_count(&xs), ny = rt_ref_act_count(&ys), nw = (int64_t)d->k * d->c * d->r * d->s;
  int64_t m = nx / C;
  c.nx = nx;
  float *w = rand_array(nw, dt), *dy = rand_array(ny, dt), *z = rand_array(nx, dt);
  float *ref = malloc(sizeof *ref * (size_t)nx), *ch = malloc(sizeof *ch * 4 * (size_t)C);
  double *sums = calloc(7 * (size_t)C, sizeof *sums);
  CUdeviceptr bufs[11] = {0};
  CHECK(w && dy && z && ref && ch && sums, "out of host memory");
  if (!w || !dy || !z || !ref || !ch || !sums) goto done;
  float *mean = ch, *invstd = ch + C, *gamma = ch + 2 * C, *beta = ch + 3 * C;
  for (int64_t i = 0; i < nx; i++) sums[i % C] += z[i];
  for (int k = 0; k < C; k++) mean[k] = (float)(sums[k] / (double)m);
  for (int64_t i = 0; i < nx; i++) {
    double v = (double)z[i] - sums[i % C] / (double)m;
    sums[C + i % C] += v * v;
  }
  for (int k = 0; k < C; k++) {
    invstd[k] = (float)(1.0 / sqrt(sums[C + k] / (double)m + 1e-5));
    gamma[k] = 1.0f + 0.5f * rand_value();
    beta[k] = 0.25f * rand_value();
  }
  int rc = rt_ref_conv2d_bwd_data(&xs, ref, &wf, w, &p, &ys, dy, NULL);
  if (!rc) rc = rt_ref_bn_relu_mask(&xs, z, ref, gamma, beta, mean, invstd, ref);
  CHECK(rc == RT_REF_OK, "%s: reference: %s", sh->name, rt_ref_strerror(rc));
  if (rc) goto done;
  if (dt == IR_DT_BF16)
    rt_ref_round_bf16(nx, ref, ref);
  else
    rt_ref_round_f16(nx, ref, ref);
  double *dgamma = sums + 2 * C, *dbeta = sums + 3 * C;
  for (int64_t i = 0; i < nx; i++) {
    int k = (int)(i % C);
    dgamma[k] += (double)ref[i] * (((double)z[i] - mean[k]) * invstd[k]);
    dbeta[k] += ref[i];
  }
  double *abc = sums + 4 * C;
  for (int k = 0; k < C; k++) {
    double kk = (double)gamma[k] * invstd[k];
    abc[k] = kk;
    abc[C + k] = -kk * invstd[k] * dgamma[k] / (double)m;
    abc[2 * C + k] = -abc[C + k] * mean[k] - kk * dbeta[k] / (double)m;
  }
  c.z = z, c.ref = ref, c.mean = mean, c.invstd = invstd, c.gamma = gamma, c.dgamma = dgamma, c.dbeta = dbeta;
  c.abc = abc;
  int ok = upload(g, w, nw, dt, &bufs[0]) && upload(g, dy, ny, dt, &bufs[1]) && alloc_nan(g, nx, dt, &bufs[2]) &&
           upload(g, z, nx, dt, &bufs[3]) && upload(g, mean, C, IR_DT_F32, &bufs[4]) &&
           upload(g, invstd, C, IR_DT_F32, &bufs[5]) && upload(g, gamma, C, IR_DT_F32, &bufs[6]) &&
           upload(g, beta, C, IR_DT_F32, &bufs[7]) && alloc_nan(g, C, IR_DT_F32, &bufs[8]) &&
           alloc_nan(g, C, IR_DT_F32, &bufs[9]) && alloc_nan(g, 3 * (int64_t)C, IR_DT_F32, &bufs[10]);
  CHECK(ok, "%s dbn buffers: %s", sh->name, err);
  if (!ok) goto done;
  c.io = (RtConvIo){.w = bufs[0], .y = bufs[1], .x = bufs[2]};
  c.io.bn.z = bufs[3], c.io.bn.mean = bufs[4], c.io.bn.invstd = bufs[5], c.io.bn.gamma = bufs[6];
  c.io.bn.beta = bufs[7], c.io.bn.dgamma = bufs[8], c.io.bn.dbeta = bufs[9], c.io.bn.abc = bufs[10];
  if (judge_dbn(g, &c, g->dnn, "heur", expect)) judge_dbn(g, &c, g->dnn_tuned, "tuned", expect);
done:
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) g->api->MemFree(bufs[i]);
  free(w), free(dy), free(z), free(ref), free(ch), free(sums);
}

/* A random operand value of a quantized convolution in dtype qt, and its
 * code: an integer in [-127, 127] (i8), or an E4M3 value of magnitude at
 * most 8 (f8e4m3). */
static float quant_value(IrDtype qt, uint8_t *code) {
  if (qt == IR_DT_I8) {
    int8_t q = (int8_t)lrintf(127 * rand_value());
    *code = (uint8_t)q;
    return q;
  }
  *code = rt_ref_f32_to_f8(8 * rand_value(), RT_REF_E4M3);
  return rt_ref_f8_to_f32(*code, RT_REF_E4M3);
}

/* Shape sh's quantized forward convolution of dtype qt (i8: x and w
 * integers in [-127, 127]; f8e4m3: E4M3 values) with the epilogue flags epi
 * (scale and bias always: the dequantization and a folded batch norm),
 * into ydt (f32 or f16, the residual too), against the reference
 * convolution of the same values then the epilogue's arithmetic: within
 * 1e-5 in f32, 2e-3 in f16 (i8's sums are exact in f32 at these sizes);
 * FP8 within 1e-3 and 3e-3 (Hopper's FP8 tensor cores accumulate more
 * narrowly than FP32). */
static void check_quant(Gpu *g, const Shape *sh, IrDtype qt, int epi, IrDtype ydt) {
  CgConvDesc d = shape_desc(sh, CG_CONV_FWD, qt);
  d.ydtype = d.rdtype = ydt;
  d.epilogue = epi | CG_EPI_AFFINE;
  RtRefAct xs = {d.n, d.c, d.h, d.w, RT_REF_NHWC}, ys = {d.n, d.k, d.ho, d.wo, RT_REF_NHWC};
  RtRefFilter wf = {d.k, d.c, d.r, d.s, RT_REF_KRSC};
  RtRefConvParam p = {d.stride[0], d.stride[1], d.pad[0], d.pad[1], d.pad[0], d.pad[1], 1, 1, 1};
  int64_t nx = rt_ref_act_count(&xs), ny = rt_ref_act_count(&ys), nw = (int64_t)d.k * d.c * d.r * d.s;
  float *x = malloc(sizeof *x * (size_t)nx), *w = malloc(sizeof *w * (size_t)nw);
  float *res = rand_array(ny, ydt), *esb = rand_array(2 * (int64_t)d.k, IR_DT_F32);
  float *ref = malloc(sizeof *ref * (size_t)ny), *got = malloc(sizeof *got * (size_t)ny);
  uint8_t *qx = malloc((size_t)nx), *qw = malloc((size_t)nw);
  const char *qn = qt == IR_DT_I8 ? "i8" : "fp8";
  CUdeviceptr bx = 0, bw = 0, by = 0, bres = 0, bsb = 0, ws = 0;
  char what[64];
  snprintf(what, sizeof what, "fwd+scale-bias%s%s->%s", epi & CG_EPI_RESIDUAL ? "-add" : "",
           epi & CG_EPI_RELU ? "-relu" : "", ydt == IR_DT_F32 ? "f32" : "f16");
  CHECK(x && w && res && esb && ref && got && qx && qw, "out of host memory");
  if (!x || !w || !res || !esb || !ref || !got || !qx || !qw) goto done;
  for (int64_t i = 0; i < nx; i++) x[i] = quant_value(qt, &qx[i]);
  for (int64_t i = 0; i < nw; i++) w[i] = quant_value(qt, &qw[i]);
  if (qt == IR_DT_I8)
    for (int i = 0; i < d.k; i++) esb[i] *= 1e-4f; /* a dequantization's scale: sums reach 1e6 */
  int rc = rt_ref_conv2d_fwd(&xs, x, &wf, w, NULL, &p, &ys, ref, NULL);
  CHECK(rc == RT_REF_OK, "%s: reference: %s", sh->name, rt_ref_strerror(rc));
  if (rc) goto done;
  for (int64_t i = 0; i < ny; i++) {
    int k = (int)(i % d.k);
    float r = ref[i] * esb[k] + esb[d.k + k];
    if (epi & CG_EPI_RESIDUAL) r += res[i];
    ref[i] = (epi & CG_EPI_RELU) && r < 0 ? 0 : r;
  }
  RtConvPlan *plan = NULL;
  size_t ws_bytes = 0;
  RtCudaStatus s = rt_cudnn_conv_plan(g->dnn, &d, &plan, &ws_bytes, err, sizeof err);
  CHECK(!s, "%s %s %s plan: %s", sh->name, qn, what, err);
  if (s) goto done;
  int ok = !RT_CU(g->api, MemAlloc, (&bx, (size_t)nx), "x", err, sizeof err) &&
           !RT_CU(g->api, MemcpyHtoD, (bx, qx, (size_t)nx), "x", err, sizeof err) &&
           !RT_CU(g->api, MemAlloc, (&bw, (size_t)nw), "w", err, sizeof err) &&
           !RT_CU(g->api, MemcpyHtoD, (bw, qw, (size_t)nw), "w", err, sizeof err) && alloc_nan(g, ny, ydt, &by) &&
           upload(g, res, ny, ydt, &bres) && upload(g, esb, 2 * (int64_t)d.k, IR_DT_F32, &bsb) &&
           (!ws_bytes || !RT_CU(g->api, MemAlloc, (&ws, ws_bytes), "workspace", err, sizeof err));
  RtConvIo io = {.x = bx, .w = bw, .y = by, .workspace = ws, .esb = bsb, .residual = epi & CG_EPI_RESIDUAL ? bres : 0};
  ok = ok && !rt_cudnn_conv_exec(g->dnn, plan, &io, err, sizeof err) &&
       !RT_CU(g->api, StreamSynchronize, (g->stream), "conv", err, sizeof err) && download(g, by, ny, ydt, got);
  CHECK(ok, "%s %s %s run: %s", sh->name, qn, what, err);
  if (!ok) goto done;
  double rel = rel_error(got, ref, ny, NULL),
         tol = qt == IR_DT_I8 ? (ydt == IR_DT_F32 ? 1e-5 : 2e-3) : (ydt == IR_DT_F32 ? 1e-3 : 3e-3);
  int pass = rel < tol;
  printf("%-22s %-4s %-26s rel err %.3e  (tol %.0e) %s  ws %zu B\n", sh->name, qn, what, rel, tol, pass ? "ok" : "FAIL",
         ws_bytes);
  CHECK(pass, "%s %s %s: relative error %.3e", sh->name, qn, what, rel);
done:
  CUdeviceptr bufs[] = {bx, bw, by, bres, bsb, ws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) g->api->MemFree(bufs[i]);
  free(x), free(w), free(res), free(esb), free(ref), free(got), free(qx), free(qw);
}

static const Shape CHECKED[] = {
    {"stem 7x7 s2 C=4", 2, 4, 112, 112, 64, 7, 7, 2, 3, 1, 1, 0},
    {"1x1 s1", 4, 64, 56, 56, 256, 1, 1, 1, 0, 1, 1, 0},
    {"3x3 s1 p1", 2, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 0},
    {"3x3 s2 p1", 2, 128, 56, 56, 128, 3, 3, 2, 1, 1, 1, 0},
    {"1x1 s2 downsample", 8, 512, 28, 28, 1024, 1, 1, 2, 0, 1, 1, 0},
    {"3x3 p2 dilation 2", 3, 64, 28, 28, 64, 3, 3, 1, 2, 2, 1, 0},
    {"3x3 p1 groups 4", 2, 64, 28, 28, 128, 3, 3, 1, 1, 1, 4, 0},
    /* ResNeXt-50 32x4d's layer1 and layer2.0 3x3 convolutions, smaller */
    {"3x3 p1 g32 of 4", 2, 128, 28, 28, 128, 3, 3, 1, 1, 1, 32, 0},
    {"3x3 s2 p1 g32 of 8", 2, 256, 28, 28, 256, 3, 3, 2, 1, 1, 32, 0},
};

/* The dbn rows' shapes: x (dx, z) is the batch-normed side, C channels. */
static const Shape DBN_SHAPES[] = {
    {"3x3 s1 p1 64>64", 2, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, 0},
    {"1x1 s2 256>512", 2, 256, 28, 28, 512, 1, 1, 2, 0, 1, 1, 0},
    {"1x1 s1 64>256", 2, 64, 28, 28, 256, 1, 1, 1, 0, 1, 1, 0},
};

/* ResNet-50 (torchvision v1.5: stride on the 3x3) at batch 256; count is
 * how many convolutions of the network have the shape. */
static const Shape RESNET50[] = {
    {"stem 7x7/2 4>64", BENCH_BATCH, 4, 224, 224, 64, 7, 7, 2, 3, 1, 1, 1},
    {"l1 1x1 64>64", BENCH_BATCH, 64, 56, 56, 64, 1, 1, 1, 0, 1, 1, 1},
    {"l1 3x3 64>64", BENCH_BATCH, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 3},
    {"l1 1x1 64>256", BENCH_BATCH, 64, 56, 56, 256, 1, 1, 1, 0, 1, 1, 4},
    {"l1 1x1 256>64", BENCH_BATCH, 256, 56, 56, 64, 1, 1, 1, 0, 1, 1, 2},
    {"l2 1x1 256>128", BENCH_BATCH, 256, 56, 56, 128, 1, 1, 1, 0, 1, 1, 1},
    {"l2 3x3/2 128>128", BENCH_BATCH, 128, 56, 56, 128, 3, 3, 2, 1, 1, 1, 1},
    {"l2 ds 1x1/2 256>512", BENCH_BATCH, 256, 56, 56, 512, 1, 1, 2, 0, 1, 1, 1},
    {"l2 1x1 128>512", BENCH_BATCH, 128, 28, 28, 512, 1, 1, 1, 0, 1, 1, 4},
    {"l2 1x1 512>128", BENCH_BATCH, 512, 28, 28, 128, 1, 1, 1, 0, 1, 1, 3},
    {"l2 3x3 128>128", BENCH_BATCH, 128, 28, 28, 128, 3, 3, 1, 1, 1, 1, 3},
    {"l3 1x1 512>256", BENCH_BATCH, 512, 28, 28, 256, 1, 1, 1, 0, 1, 1, 1},
    {"l3 3x3/2 256>256", BENCH_BATCH, 256, 28, 28, 256, 3, 3, 2, 1, 1, 1, 1},
    {"l3 ds 1x1/2 512>1024", BENCH_BATCH, 512, 28, 28, 1024, 1, 1, 2, 0, 1, 1, 1},
    {"l3 1x1 256>1024", BENCH_BATCH, 256, 14, 14, 1024, 1, 1, 1, 0, 1, 1, 6},
    {"l3 1x1 1024>256", BENCH_BATCH, 1024, 14, 14, 256, 1, 1, 1, 0, 1, 1, 5},
    {"l3 3x3 256>256", BENCH_BATCH, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 5},
    {"l4 1x1 1024>512", BENCH_BATCH, 1024, 14, 14, 512, 1, 1, 1, 0, 1, 1, 1},
    {"l4 3x3/2 512>512", BENCH_BATCH, 512, 14, 14, 512, 3, 3, 2, 1, 1, 1, 1},
    {"l4 ds 1x1/2 1024>2048", BENCH_BATCH, 1024, 14, 14, 2048, 1, 1, 2, 0, 1, 1, 1},
    {"l4 1x1 512>2048", BENCH_BATCH, 512, 7, 7, 2048, 1, 1, 1, 0, 1, 1, 3},
    {"l4 1x1 2048>512", BENCH_BATCH, 2048, 7, 7, 512, 1, 1, 1, 0, 1, 1, 2},
    {"l4 3x3 512>512", BENCH_BATCH, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, 2},
};
enum { NSHAPES = sizeof RESNET50 / sizeof RESNET50[0] };

typedef struct Bench {
  CUdeviceptr x, w, y, stats, sb, ws; /* sb: a prologue's scale and bias, or an epilogue's */
  size_t ws_bytes;
  CUevent ev[2];
} Bench;

/* Milliseconds per run of d planned on dnn, or -1 (err says why). */
static double time_conv(Gpu *g, Bench *b, RtCudnn *dnn, const CgConvDesc *d) {
  RtConvPlan *plan;
  size_t ws_bytes;
  if (rt_cudnn_conv_plan(dnn, d, &plan, &ws_bytes, err, sizeof err)) return -1;
  if (ws_bytes > b->ws_bytes) {
    if (b->ws) g->api->MemFree(b->ws);
    b->ws = 0, b->ws_bytes = 0;
    if (RT_CU(g->api, MemAlloc, (&b->ws, ws_bytes), "bench workspace", err, sizeof err)) return -1;
    b->ws_bytes = ws_bytes;
  }
  float ms = 0;
  for (int i = 0; i < BENCH_WARMUP + BENCH_RUNS; i++) {
    if (i == BENCH_WARMUP && RT_CU(g->api, EventRecord, (b->ev[0], g->stream), "bench", err, sizeof err)) return -1;
    RtConvIo io = {.x = b->x,
                   .w = b->w,
                   .y = b->y,
                   .stats = d->genstats ? b->stats : 0,
                   .sb = d->prologue ? b->sb : 0,
                   .esb = d->epilogue & CG_EPI_AFFINE ? b->sb : 0,
                   .workspace = b->ws};
    if (rt_cudnn_conv_exec(dnn, plan, &io, err, sizeof err)) return -1;
  }
  if (RT_CU(g->api, EventRecord, (b->ev[1], g->stream), "bench", err, sizeof err) ||
      RT_CU(g->api, EventSynchronize, (b->ev[1]), "bench", err, sizeof err) ||
      RT_CU(g->api, EventElapsedTime, (&ms, b->ev[0], b->ev[1]), "bench", err, sizeof err))
    return -1;
  return ms / BENCH_RUNS;
}

/* Device buffer of bytes, filled with small random f16 values (a random
 * f32 bit pattern pair never forms a NaN from them either). */
static int bench_buffer(Gpu *g, size_t bytes, CUdeviceptr *out) {
  enum { CHUNK = 1 << 22 };
  uint16_t *host = malloc(sizeof *host * CHUNK);
  if (!host) return 0;
  for (int i = 0; i < CHUNK; i++) host[i] = rt_ref_f32_to_f16(rand_value());
  int ok = !RT_CU(g->api, MemAlloc, (out, bytes), "bench buffer", err, sizeof err);
  for (size_t at = 0; ok && at < bytes; at += sizeof *host * CHUNK) {
    size_t n = bytes - at < sizeof *host * CHUNK ? bytes - at : sizeof *host * CHUNK;
    ok = !RT_CU(g->api, MemcpyHtoD, (*out + at, host, n), "bench fill", err, sizeof err);
  }
  free(host);
  return ok;
}

/* The timing tables; genstats_only: just the plain/GenStats comparison. */
static void bench(Gpu *g, double started, int genstats_only) {
  size_t maxx = 0, maxw = 0, maxy = 0;
  for (int i = 0; i < NSHAPES; i++) {
    CgConvDesc d = shape_desc(&RESNET50[i], CG_CONV_FWD, IR_DT_F32);
    size_t nx = (size_t)d.n * d.h * d.w * d.c, nw = (size_t)d.k * d.r * d.s * d.c, ny = (size_t)d.n * d.ho * d.wo * d.k;
    maxx = nx > maxx ? nx : maxx, maxw = nw > maxw ? nw : maxw, maxy = ny > maxy ? ny : maxy;
  }
  Bench b;
  memset(&b, 0, sizeof b);
  int ok = bench_buffer(g, 4 * maxx, &b.x) && bench_buffer(g, 4 * maxw, &b.w) && bench_buffer(g, 4 * maxy, &b.y) &&
           !RT_CU(g->api, MemAlloc, (&b.stats, 2 * sizeof(float) * 2048), "bench", err, sizeof err) &&
           bench_buffer(g, 2 * sizeof(float) * 2048, &b.sb) && /* a prologue's f16 or an epilogue's f32 */
           !RT_CU(g->api, EventCreate, (&b.ev[0], CU_EVENT_DEFAULT), "bench", err, sizeof err) &&
           !RT_CU(g->api, EventCreate, (&b.ev[1], CU_EVENT_DEFAULT), "bench", err, sizeof err);
  CHECK(ok, "bench setup: %s", err);
  double total_ms[3] = {0, 0, 0}, total_flop[3] = {0, 0, 0};
  char table[NSHAPES + 3][200];
  int rows = 0;
  /* the stem's other forms (f32, f32 with TF32, f16 on 8 channels), then the f16 rows */
  static const Shape STEM8 = {"stem 7x7/2 8>64", BENCH_BATCH, 8, 224, 224, 64, 7, 7, 2, 3, 1, 1, 1};
  for (int row = 0; ok && !genstats_only && row < NSHAPES + 3; row++) {
    if (now_s() - started > BENCH_BUDGET_S) {
      printf("bench: stopped after %d of %d shapes (time budget)\n", row, NSHAPES + 3);
      break;
    }
    int i = (row + NSHAPES) % (NSHAPES + 3); /* the stem's forms first */
    const Shape *sh = i < NSHAPES + 2 ? &RESNET50[i < NSHAPES ? i : 0] : &STEM8;
    IrDtype dt = i < NSHAPES || i == NSHAPES + 2 ? IR_DT_F16 : IR_DT_F32;
    int tf32 = i == NSHAPES + 1;
    double ms[3], ms_heur[3];
    int n = snprintf(table[rows], sizeof table[rows], "%-22s %-4s %2d", sh->name,
                     dt == IR_DT_F16 ? "f16"
                     : tf32          ? "tf32"
                                     : "f32",
                     sh->count);
    for (int k = 0; k < 3; k++) {
      CgConvDesc d = shape_desc(sh, (CgConvKind)k, dt);
      d.tf32 = tf32;
      double flop = 2.0 * d.n * d.ho * d.wo * d.k * (d.c / d.groups) * d.r * d.s;
      ms_heur[k] = time_conv(g, &b, g->dnn, &d);
      CHECK(ms_heur[k] > 0, "bench %s %s: %s", sh->name, KIND_NAMES[k], err);
      ms[k] = time_conv(g, &b, g->dnn_tuned, &d);
      CHECK(ms[k] > 0, "bench %s %s (tuned): %s", sh->name, KIND_NAMES[k], err);
      if (ms[k] > 0 && i < NSHAPES) total_ms[k] += sh->count * ms[k], total_flop[k] += sh->count * flop;
      n += snprintf(table[rows] + n, sizeof table[rows] - (size_t)n, " | %7.3f %6.1f %7.3f", ms[k],
                    ms[k] > 0 ? flop / ms[k] * 1e-9 : 0.0, ms_heur[k]);
    }
    rows++;
  }
  double plain_ms = 0, fused_ms = 0, pro_ms = 0, wplain_ms = 0, wpro_ms = 0;
  printf("\nf16, tuned, ms per run: forward plain, with GenStats, with the prologue and GenStats (a prologue\n"
         "shape: 1x1 s1 and 3x3 with C = the bottleneck width); weight gradient plain and with the prologue\n");
  for (int i = 1; ok && i < NSHAPES; i++) {
    const Shape *sh = &RESNET50[i];
    CgConvDesc d = shape_desc(sh, CG_CONV_FWD, IR_DT_F16);
    double plain = time_conv(g, &b, g->dnn_tuned, &d);
    d.genstats = 1;
    double fused = time_conv(g, &b, g->dnn_tuned, &d);
    CHECK(plain > 0 && fused > 0, "bench %s genstats: %s", sh->name, err);
    d.prologue = 1;
    double pro = time_conv(g, &b, g->dnn_tuned, &d);
    CgConvDesc dw = shape_desc(sh, CG_CONV_BWD_FILTER, IR_DT_F16);
    double wplain = time_conv(g, &b, g->dnn_tuned, &dw);
    dw.prologue = 1;
    double wpro = time_conv(g, &b, g->dnn_tuned, &dw);
    printf("%-22s %2d  plain %7.3f  +genstats %7.3f (%+.0f%%)  +prologue %7.3f  | wgrad %7.3f  +prologue %7.3f%s\n",
           sh->name, sh->count, plain, fused, plain > 0 ? 100.0 * (fused - plain) / plain : 0.0, pro, wplain, wpro,
           pro > 0 && wpro > 0 ? "" : "  (a prologue plan failed)");
    plain_ms += sh->count * plain, fused_ms += sh->count * fused, wplain_ms += sh->count * wplain;
    pro_ms += sh->count * (pro > 0 ? pro : fused), wpro_ms += sh->count * (wpro > 0 ? wpro : wplain);
  }
  printf("weighted by use: plain %.2f ms, with GenStats %.2f ms, with the prologue %.2f ms; wgrad %.2f ms, with "
         "the prologue %.2f ms\n",
         plain_ms, fused_ms, pro_ms, wplain_ms, wpro_ms);
  /* inference's forward convolutions: f16 into f16 against i8 into f32 and
   * into f16 and E4M3 into f16, each with a scale-bias-relu epilogue */
  double f16_ms = 0, i8_ms[2] = {0, 0}, f8_ms = 0;
  printf("\ninference forward with scale-bias-relu, tuned, ms per run: f16 -> f16, i8 -> f32, i8 -> f16, "
         "e4m3 -> f16\n");
  for (int i = 1; ok && !genstats_only && i < NSHAPES && now_s() - started < BENCH_BUDGET_S; i++) {
    const Shape *sh = &RESNET50[i];
    CgConvDesc d = shape_desc(sh, CG_CONV_FWD, IR_DT_F16);
    d.epilogue = CG_EPI_AFFINE | CG_EPI_RELU;
    double t16 = time_conv(g, &b, g->dnn_tuned, &d), t8[2];
    for (int f16 = 0; f16 < 2; f16++) {
      d.dtype = IR_DT_I8, d.ydtype = f16 ? IR_DT_F16 : IR_DT_F32;
      t8[f16] = time_conv(g, &b, g->dnn_tuned, &d);
      CHECK(t8[f16] > 0, "bench %s i8 -> %s: %s", sh->name, f16 ? "f16" : "f32", err);
      i8_ms[f16] += sh->count * (t8[f16] > 0 ? t8[f16] : t16);
    }
    d.dtype = IR_DT_F8E4M3, d.ydtype = IR_DT_F16;
    double tf8 = time_conv(g, &b, g->dnn_tuned, &d);
    CHECK(tf8 > 0, "bench %s e4m3 -> f16: %s", sh->name, err);
    f8_ms += sh->count * (tf8 > 0 ? tf8 : t16);
    printf("%-22s %2d  f16 %7.3f  i8>f32 %7.3f (%.2fx)  i8>f16 %7.3f (%.2fx)  e4m3>f16 %7.3f (%.2fx)\n", sh->name,
           sh->count, t16, t8[0], t8[0] > 0 ? t16 / t8[0] : 0.0, t8[1], t8[1] > 0 ? t16 / t8[1] : 0.0, tf8,
           tf8 > 0 ? t16 / tf8 : 0.0);
    CHECK(t16 > 0, "bench %s f16: %s", sh->name, err);
    f16_ms += sh->count * t16;
  }
  if (!genstats_only)
    printf("weighted by use: f16 %.2f ms, i8 -> f32 %.2f ms (%.2fx), i8 -> f16 %.2f ms (%.2fx), e4m3 -> f16 %.2f ms "
           "(%.2fx)\n",
           f16_ms, i8_ms[0], i8_ms[0] > 0 ? f16_ms / i8_ms[0] : 0.0, i8_ms[1], i8_ms[1] > 0 ? f16_ms / i8_ms[1] : 0.0,
           f8_ms, f8_ms > 0 ? f16_ms / f8_ms : 0.0);
  if (b.ev[0]) g->api->EventDestroy(b.ev[0]);
  if (b.ev[1]) g->api->EventDestroy(b.ev[1]);
  CUdeviceptr *bufs[] = {&b.x, &b.w, &b.y, &b.stats, &b.sb, &b.ws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (*bufs[i]) g->api->MemFree(*bufs[i]);

  if (!genstats_only)
    printf("\nResNet-50 convs, batch %d, NHWC, FP32 accumulation; ms per run (tuned), TFLOP/s, ms (heuristics' "
           "first)\n",
           BENCH_BATCH);
  if (!genstats_only)
    printf("%-22s %-4s %2s | %-22s | %-22s | %-22s\n", "shape", "dt", "x", "fwd  ms  TF/s  heur", "dgrad ms TF/s heur",
           "wgrad ms TF/s heur");
  for (int i = 0; i < rows; i++) printf("%s\n", table[i]);
  double all_ms = total_ms[0] + total_ms[1] + total_ms[2], all_flop = total_flop[0] + total_flop[1] + total_flop[2];
  if (!genstats_only)
    printf("weighted by use (f16 rows): fwd %.2f ms %.1f TF/s, dgrad %.2f ms %.1f TF/s, wgrad %.2f ms %.1f TF/s; "
           "all convs %.2f ms per step, %.1f TF/s\n",
           total_ms[0], total_ms[0] > 0 ? total_flop[0] / total_ms[0] * 1e-9 : 0, total_ms[1],
           total_ms[1] > 0 ? total_flop[1] / total_ms[1] * 1e-9 : 0, total_ms[2],
           total_ms[2] > 0 ? total_flop[2] / total_ms[2] * 1e-9 : 0, all_ms, all_ms > 0 ? all_flop / all_ms * 1e-9 : 0);
}

int main(int argc, char **argv) {
  int run_bench = !(argc > 1 && !strcmp(argv[1], "--no-bench"));
  int genstats_only = argc > 1 && !strcmp(argv[1], "--bench-genstats");
  double started = now_s();
  Gpu g;
  memset(&g, 0, sizeof g);
  int count = 0;
  RtCudaStatus s = rt_cuda_device_count(&count, err, sizeof err);
  if (s == RT_CUDA_ENODRIVER || s == RT_CUDA_ENODEVICE) return check_skip(err);
  if (!s && count == 0) return check_skip("no GPU (the driver sees no device)");
  if (s || rt_cuda_ctx_init(&g.ctx, 0, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  g.api = rt_cuda_ctx_api(g.ctx);
  g.stream = rt_cuda_ctx_stream(g.ctx);
  s = rt_cudnn_init(&g.dnn, g.stream, 0, err, sizeof err);
  if (s == RT_CUDA_ENODRIVER) {
    rt_cuda_ctx_free(g.ctx);
    return check_skip(err);
  }
  CHECK(!s, "rt_cudnn_init: %s", err);
  if (!s) s = rt_cudnn_init(&g.dnn_tuned, g.stream, 1, err, sizeof err);
  CHECK(!s, "rt_cudnn_init(tune): %s", err);

  if (!s) {
    CgConvDesc bad = shape_desc(&CHECKED[1], CG_CONV_FWD, IR_DT_F32);
    bad.ho++;
    RtConvPlan *plan;
    size_t ws;
    CHECK(rt_cudnn_conv_plan(g.dnn, &bad, &plan, &ws, err, sizeof err) == RT_CUDA_EARG, "bad ho accepted");
    CgConvDesc d = shape_desc(&CHECKED[1], CG_CONV_FWD, IR_DT_F32);
    RtConvPlan *p1 = NULL, *p2 = NULL;
    CHECK(!rt_cudnn_conv_plan(g.dnn, &d, &p1, &ws, err, sizeof err) &&
              !rt_cudnn_conv_plan(g.dnn, &d, &p2, &ws, err, sizeof err) && p1 == p2,
          "plan not cached: %s", err);
    /* dbn only on f16/bf16 data gradients without an epilogue, C a multiple of 4 */
    CgConvDesc dbn[4];
    for (int i = 0; i < 4; i++) {
      dbn[i] = shape_desc(&DBN_SHAPES[0], i == 1 ? CG_CONV_FWD : CG_CONV_BWD_DATA, i ? IR_DT_F16 : IR_DT_F32);
      dbn[i].dbn = 1;
    }
    dbn[2].epilogue = CG_EPI_DRELU;
    dbn[3].c = 6;
    for (int i = 0; i < 4; i++)
      CHECK(rt_cudnn_conv_plan(g.dnn, &dbn[i], &plan, &ws, err, sizeof err) == RT_CUDA_EARG && strstr(err, "dbn"),
            "invalid dbn description %d accepted or not named: %s", i, err);
  }
  for (size_t i = 0; !s && i < sizeof CHECKED / sizeof CHECKED[0]; i++)
    for (int dt = 0; dt < 2; dt++)
      for (int k = 0; k < 3; k++) check_case(&g, &CHECKED[i], dt ? IR_DT_F16 : IR_DT_F32, (CgConvKind)k);
  for (size_t i = 1; !s && i <= 4; i++) check_genstats(&g, &CHECKED[i]);
  for (size_t i = 1; !s && i <= 4; i++) {
    check_prologue(&g, &CHECKED[i], CG_CONV_FWD);
    check_prologue(&g, &CHECKED[i], CG_CONV_BWD_FILTER);
    check_epilogue(&g, &CHECKED[i], CG_EPI_AFFINE | CG_EPI_RELU);
    check_epilogue(&g, &CHECKED[i], CG_EPI_AFFINE | CG_EPI_RESIDUAL | CG_EPI_RELU);
    check_epilogue(&g, &CHECKED[i], CG_EPI_AFFINE);
    check_epilogue(&g, &CHECKED[i], CG_EPI_DRELU);
    check_epilogue(&g, &CHECKED[i], CG_EPI_RESIDUAL | CG_EPI_DRELU);
    for (int f16 = 0; f16 < 2; f16++) {
      IrDtype ydt = f16 ? IR_DT_F16 : IR_DT_F32;
      for (int f8 = 0; f8 < 2; f8++) {
        IrDtype qt = f8 ? IR_DT_F8E4M3 : IR_DT_I8;
        check_quant(&g, &CHECKED[i], qt, CG_EPI_AFFINE, ydt);
        check_quant(&g, &CHECKED[i], qt, CG_EPI_AFFINE | CG_EPI_RELU, ydt);
        check_quant(&g, &CHECKED[i], qt, CG_EPI_AFFINE | CG_EPI_RESIDUAL | CG_EPI_RELU, ydt);
      }
    }
  }
  const char *expect_dbn = getenv("NETC_EXPECT_DBN");
  for (size_t i = 0; !s && i < sizeof DBN_SHAPES / sizeof DBN_SHAPES[0]; i++)
    for (int dt = 0; dt < 2; dt++)
      check_dbn(&g, &DBN_SHAPES[i], dt ? IR_DT_BF16 : IR_DT_F16, !dt && expect_dbn && !strcmp(expect_dbn, "1"));
  if (!s && run_bench) bench(&g, started, genstats_only);
  rt_cudnn_free(g.dnn_tuned);
  rt_cudnn_free(g.dnn);
  rt_cuda_ctx_free(g.ctx);
  return check_report();
}
