/* test_gpu_lossscale.c - dynamic loss scaling on the GPU: a step's tail as
 * the precision pass makes it (nonfinite_check over f32, f16 and bf16
 * gradients with vector tails, three sgd_updates taking its flag as skip,
 * loss_scale_update) run node by node with the generated kernels, against
 * the CPU executor on the same values, in five cases: nothing overflows,
 * growth at growth_interval, and an inf or a nan in each gradient dtype
 * (first element, a vector tail, the middle).  Flag, scale and good-step
 * count must be equal; weights and momentum buffers within 1e-6 relative
 * (f32 arithmetic in both, maybe contracted differently); a skipped step
 * must leave them bit for bit.  A table of the cases is printed last.
 *
 * Without a driver or a GPU it prints "skipped: <why>" and exits 77. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rt_cpu.h"
#include "rt_cuda.h"
#include "cg_kernels.h"
#include "cg_nvrtc.h"
#include "rt_ref.h"

static const char GRAPH[] = "graph ls {\n"
                            "  input %0 g32 : f32[1001]\n"
                            "  input %1 g16 : f16[2051]\n"
                            "  input %2 gbf : bf16[333]\n"
                            "  input %3 lr : f32[]\n"
                            "  param @a.weight : f32[1001]\n"
                            "  state @a.weight.momentum_buffer : f32[1001]\n"
                            "  param @b.weight : f32[2051]\n"
                            "  state @b.weight.momentum_buffer : f32[2051]\n"
                            "  param @c.weight : f32[333]\n"
                            "  state @c.weight.momentum_buffer : f32[333]\n"
                            "  state @loss_scale : f32[]\n"
                            "  state @loss_scale_good_steps : f32[]\n"
                            "  optimizer:\n"
                            "  %4 = nonfinite_check(%0, %1, %2) : f32[]\n"
                            "  sgd_update(@a.weight, %0, @a.weight.momentum_buffer, %3, @loss_scale, %4) "
                            "{momentum=0.9 nesterov=0 weight_decay=0.0001}\n"
                            "  sgd_update(@b.weight, %1, @b.weight.momentum_buffer, %3, @loss_scale, %4) "
                            "{momentum=0.9 nesterov=1 weight_decay=0.0005}\n"
                            "  sgd_update(@c.weight, %2, @c.weight.momentum_buffer, %3, @loss_scale, %4) "
                            "{momentum=0.0 nesterov=0 weight_decay=0.0}\n"
                            "  loss_scale_update(%4, @loss_scale, @loss_scale_good_steps) "
                            "{growth_interval=2 backoff=0.5 growth=2.0}\n"
                            "  output %4\n"
                            "}\n";

typedef struct Case {
  const char *what;
  float steps; /* good steps before the step */
  int bad_in;  /* the gradient input holding a bad value, or -1 */
  int64_t bad_at;
  float bad;
  float want_scale, want_steps, want_flag;
} Case;

static char err[1 << 16];

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(float lo, float hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (float)((rng >> 40) & 0xffffff) * 0x1p-24f;
}

static int find(const IrGraph *g, const char *name) {
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].name && strcmp(g->val[v].name, name) == 0) return v;
  return -1;
}

static size_t bytes_of(const IrGraph *g, RtCpu *x, int v) {
  size_t b = (size_t)rt_cpu_numel(x, v) * ir_dtype_size(g->val[v].type.dtype);
  return b < 16 ? 16 : b;
}

/* Host value v in its device format. */
static void *device_format(const IrGraph *g, RtCpu *x, int v) {
  void *p = calloc(1, bytes_of(g, x, v));
  const float *s = rt_cpu_data(x, v);
  for (int64_t i = 0; p && i < rt_cpu_numel(x, v); i++) {
    IrDtype dt = g->val[v].type.dtype;
    if (dt == IR_DT_F32) ((float *)p)[i] = s[i];
    if (dt == IR_DT_F16) ((uint16_t *)p)[i] = rt_ref_f32_to_f16(s[i]);
    if (dt == IR_DT_BF16) ((uint16_t *)p)[i] = rt_ref_f32_to_bf16(s[i]);
  }
  return p;
}

typedef struct Gpu {
  const RtCudaApi *api;
  RtCudaCtx *ctx;
  CUfunction fn[8][CG_K_MAX_LAUNCH];
  CUdeviceptr *dev;
} Gpu;

static int run_gpu(Gpu *gp, const IrGraph *g, const CgKNode *k) {
  for (int i = 0; i < g->nnode; i++) {
    const IrNode *n = &g->node[i];
    for (int l = 0; l < k[i].nlaunch; l++) {
      const CgKLaunch *L = &k[i].launch[l];
      CUdeviceptr ptr[CG_K_MAX_ARGS];
      void *params[CG_K_MAX_ARGS];
      for (int a = 0; a < L->nargs; a++) {
        ptr[a] = gp->dev[L->args[a].kind == CG_KARG_IN ? n->in[L->args[a].index] : n->out[L->args[a].index]];
        params[a] = &ptr[a];
      }
      if (RT_CU(gp->api, LaunchKernel,
                (gp->fn[i][l], L->grid[0], L->grid[1], L->grid[2], L->block[0], L->block[1], L->block[2], L->smem,
                 rt_cuda_ctx_stream(gp->ctx), params, NULL),
                L->name, err, sizeof err))
        return -1;
    }
  }
  return RT_CU(gp->api, StreamSynchronize, (rt_cuda_ctx_stream(gp->ctx)), "the step", err, sizeof err) ? -1 : 0;
}

/* One case: fill, upload, both executors, compare.  Returns the worst relative weight error. */
static double run_case(Gpu *gp, const IrGraph *g, RtCpu *x, const CgKNode *k, const Case *c) {
  for (int v = 0; v < g->nval; v++) {
    if (g->val[v].kind == IR_VAL_ACT) continue;
    float *p = rt_cpu_data(x, v);
    for (int64_t i = 0; i < rt_cpu_numel(x, v); i++) p[i] = uniform(-1, 1);
    if (g->val[v].type.dtype == IR_DT_F16) rt_ref_round_f16(rt_cpu_numel(x, v), p, p);
    if (g->val[v].type.dtype == IR_DT_BF16) rt_ref_round_bf16(rt_cpu_numel(x, v), p, p);
  }
  *(float *)rt_cpu_data(x, find(g, "lr")) = 0.1f;
  *(float *)rt_cpu_data(x, find(g, "loss_scale")) = 1024;
  *(float *)rt_cpu_data(x, find(g, "loss_scale_good_steps")) = c->steps;
  if (c->bad_in >= 0) ((float *)rt_cpu_data(x, g->node[0].in[c->bad_in]))[c->bad_at] = c->bad;
  int ok = 1;
  for (int v = 0; v < g->nval && ok; v++) {
    void *h = g->val[v].kind == IR_VAL_ACT ? NULL : device_format(g, x, v);
    if (!h) {
      h = malloc(bytes_of(g, x, v));
      memset(h, 0xff, bytes_of(g, x, v)); /* poison: NaN */
    }
    ok = !RT_CU(gp->api, MemcpyHtoD, (gp->dev[v], h, bytes_of(g, x, v)), "upload", err, sizeof err);
    free(h);
  }
  ok = ok && !RT_CU(gp->api, StreamSynchronize, (NULL), "uploads", err, sizeof err);
  CHECK(ok, "%s: %s", c->what, err);
  if (!ok) return INFINITY;
  /* the CPU's copy before its step: what a skipped step must leave */
  float *keep[16] = {0};
  for (int v = 0; v < g->nval && v < 16; v++)
    if (g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE) {
      keep[v] = malloc(sizeof(float) * (size_t)rt_cpu_numel(x, v));
      memcpy(keep[v], rt_cpu_data(x, v), sizeof(float) * (size_t)rt_cpu_numel(x, v));
    }
  int rc = rt_cpu_run(x, err, sizeof err);
  CHECK(rc == 0, "%s: CPU: %s", c->what, err);
  rc = rc || run_gpu(gp, g, k);
  CHECK(rc == 0, "%s: GPU: %s", c->what, err);
  double worst = 0;
  for (int v = 0; v < g->nval && !rc; v++) {
    if (g->val[v].kind == IR_VAL_INPUT) continue;
    int64_t n = rt_cpu_numel(x, v);
    float *got = malloc(bytes_of(g, x, v));
    if (RT_CU(gp->api, MemcpyDtoH, (got, gp->dev[v], bytes_of(g, x, v)), "download", err, sizeof err)) {
      CHECK(0, "%s", err);
      free(got);
      break;
    }
    const float *want = rt_cpu_data(x, v);
    const char *name = g->val[v].name ? g->val[v].name : "flag";
    int exact = g->val[v].type.rank == 0 || (c->want_flag != 0 && keep[v]);
    for (int64_t i = 0; i < n; i++) {
      double e = fabs((double)got[i] - want[i]) / (fabs(want[i]) > 1 ? fabs(want[i]) : 1);
      if (!(e <= worst)) worst = e;
      if (exact ? memcmp(&got[i], &want[i], 4) != 0 : !(e <= 1e-6)) {
        CHECK(0, "%s: %s[%lld]: gpu %.9g cpu %.9g", c->what, name, (long long)i, got[i], want[i]);
        break;
      }
      if (c->want_flag != 0 && keep[v] && g->val[v].type.rank > 0 && memcmp(&want[i], &keep[v][i], 4) != 0) {
        CHECK(0, "%s: the CPU changed %s[%lld] in a skipped step", c->what, name, (long long)i);
        break;
      }
    }
    free(got);
  }
  CHECK(*(float *)rt_cpu_data(x, g->node[0].out[0]) == c->want_flag, "%s: flag %g, want %g", c->what,
        *(float *)rt_cpu_data(x, g->node[0].out[0]), c->want_flag);
  CHECK(*(float *)rt_cpu_data(x, find(g, "loss_scale")) == c->want_scale &&
            *(float *)rt_cpu_data(x, find(g, "loss_scale_good_steps")) == c->want_steps,
        "%s: scale %g good steps %g, want %g %g", c->what, *(float *)rt_cpu_data(x, find(g, "loss_scale")),
        *(float *)rt_cpu_data(x, find(g, "loss_scale_good_steps")), c->want_scale, c->want_steps);
  for (int v = 0; v < 16; v++) free(keep[v]);
  return worst;
}

int main(void) {
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
  RtCudaDeviceInfo info;
  CHECK(rt_cuda_device_info(0, &info, err, sizeof err) == RT_CUDA_OK, "device info: %s", err);
  CgDevice dev = {info.sm_count, 1024, 49152, info.cc_major, info.cc_minor, 0, NULL};
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d%d", info.cc_major, info.cc_minor);

  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, stderr);
  IrGraph *g = ir_read(&a, &d, "ls.ir", GRAPH, sizeof GRAPH - 1);
  CHECK(g && !ir_verify(g, &d, NULL) && g->nnode <= 8, "the test graph reads and verifies");
  RtCpu *x = NULL;
  CgKNode k[8] = {0};
  char *all = calloc(1, 1);
  size_t len = 0;
  int ok = g && rt_cpu_new(g, 1, &x, err, sizeof err) == 0;
  CHECK(ok, "CPU executor: %s", err);
  for (int i = 0; ok && i < g->nnode; i++) {
    ok = cg_kernels_emit(g, i, 1, &dev, &k[i], err, sizeof err) == 0;
    CHECK(ok, "%s", err);
    size_t add = ok && k[i].source ? strlen(k[i].source) : 0;
    all = realloc(all, len + add + 1);
    memcpy(all + len, add ? k[i].source : "", add + 1);
    len += add;
  }
  CgNvrtcOut img = {0};
  RtCudaModule *mod = NULL;
  if (ok) {
    ok = cg_nvrtc_compile(all, "lossscale", arch, CG_NVRTC_CUBIN, NULL, 0, &img, err, sizeof err) == CG_OK &&
         rt_cuda_module_init(&mod, gp.ctx, img.image, "lossscale", err, sizeof err) == RT_CUDA_OK;
    CHECK(ok, "compile: %s", err);
  }
  for (int i = 0; ok && i < g->nnode; i++)
    for (int l = 0; ok && l < k[i].nlaunch; l++) {
      ok = rt_cuda_module_function(mod, k[i].launch[l].name, &gp.fn[i][l], err, sizeof err) == 0;
      CHECK(ok, "%s", err);
    }
  gp.dev = ok ? calloc((size_t)g->nval, sizeof *gp.dev) : NULL;
  for (int v = 0; gp.dev && v < g->nval && ok; v++) {
    ok = !RT_CU(gp.api, MemAlloc, (&gp.dev[v], bytes_of(g, x, v)), "buffer", err, sizeof err);
    CHECK(ok, "%s", err);
  }
  const Case cases[] = {
      {"finite", 0, -1, 0, 0, 1024, 1, 0},
      {"growth", 1, -1, 0, 0, 2048, 0, 0},
      {"inf in f32[0]", 1, 0, 0, INFINITY, 512, 0, 1},
      {"-inf in the f16 tail", 0, 1, 2050, -INFINITY, 512, 0, 1},
      {"nan in bf16", 1, 2, 170, NAN, 512, 0, 1},
  };
  printf("%-24s %6s %8s %6s %12s\n", "case", "flag", "scale", "steps", "worst err");
  for (size_t i = 0; ok && i < sizeof cases / sizeof cases[0]; i++) {
    double w = run_case(&gp, g, x, k, &cases[i]);
    printf("%-24s %6g %8g %6g %12.3g\n", cases[i].what, *(float *)rt_cpu_data(x, g->node[0].out[0]),
           *(float *)rt_cpu_data(x, find(g, "loss_scale")), *(float *)rt_cpu_data(x, find(g, "loss_scale_good_steps")),
           w);
  }
  for (int v = 0; gp.dev && v < g->nval; v++)
    if (gp.dev[v]) gp.api->MemFree(gp.dev[v]);
  free(gp.dev);
  rt_cuda_module_free(mod);
  cg_nvrtc_out_free(&img);
  for (int i = 0; i < 8; i++) cg_kernels_free(&k[i]);
  free(all);
  rt_cpu_free(x);
  arena_free(&a);
  rt_cuda_ctx_free(gp.ctx);
  return check_report();
}
