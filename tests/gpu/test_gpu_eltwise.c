/* test_gpu_eltwise.c - the eltwise.cu kernels on the GPU against the
 * plain-C reference (rt_ref_eltwise.c): each instantiation is compiled
 * with NVRTC for the device's arch, loaded from its cubin, run on random
 * data (1e6 elements, f32 and f16, plus tails and DRAM-sized cases), and
 * compared elementwise (f32 within 1e-6, f16 within 1e-3, relative; both
 * are expected to agree exactly).  Each kernel is then timed with events
 * and its bandwidth printed; with $NETC_GPU_RESULTS set, the timings also
 * go to that file as tab-separated lines for dev/gpu_check.sh.
 *
 * Without a driver or a GPU it prints "skipped: <why>" and exits 77. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_eltwise.h"
#include "rt_cuda.h"
#include "cg_nvrtc.h"
#include "rt_ref.h"

enum { TIMED_LAUNCHES = 20 };

static char err[16384];

typedef struct Gpu {
  RtCudaCtx *ctx;
  const RtCudaApi *api;
  RtCudaDeviceInfo info;
  char arch[16];
  FILE *results;
} Gpu;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* Uniform in [-2, 2), with one value in 16 exactly 0 (relu's edge). */
static float rand_value(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  if ((rng_state >> 60) == 0) return 0.0f;
  return (float)((rng_state >> 40) & 0xffffff) * 0x1p-22f - 2.0f;
}

/* Host values of one input, as the kernel will read them (f16-rounded
 * for f16); a relu output when the op's first input is a forward output. */
static float *make_input(int64_t n, GpuDtype dt, int relu_output) {
  float *x = malloc(sizeof *x * (size_t)(n ? n : 1));
  if (!x) return NULL;
  for (int64_t i = 0; i < n; i++) x[i] = rand_value();
  if (relu_output) rt_ref_relu_fwd(n, x, x);
  if (dt == GPU_F16) rt_ref_round_f16(n, x, x);
  return x;
}

/* The kernel's storage format: f32 as is, f16 as binary16 bits. */
static void *to_device_format(const float *x, int64_t n, GpuDtype dt) {
  void *p = malloc(gpu_dtype_size(dt) * (size_t)(n ? n : 1));
  if (!p) return NULL;
  if (dt == GPU_F32) {
    memcpy(p, x, sizeof *x * (size_t)n);
  } else {
    uint16_t *h = p;
    for (int64_t i = 0; i < n; i++) h[i] = rt_ref_f32_to_f16(x[i]);
  }
  return p;
}

/* out0 (and out1) of op by the reference; f16 results rounded to f16. */
static int reference(GpuEltOp op, GpuDtype dt, int64_t n, const float *a, const float *b, float *o0, float *o1) {
  int rc = RT_REF_EARG;
  switch (op) {
  case GPU_ELT_RELU_FWD: rc = rt_ref_relu_fwd(n, a, o0); break;
  case GPU_ELT_RELU_BWD: rc = rt_ref_relu_bwd(n, a, b, o0); break;
  case GPU_ELT_ADD_FWD: rc = rt_ref_add_fwd(n, a, b, o0); break;
  case GPU_ELT_ADD_BWD: rc = rt_ref_add_bwd(n, a, o0, o1); break;
  case GPU_ELT_ADD_RELU_FWD: rc = rt_ref_add_relu_fwd(n, a, b, o0); break;
  case GPU_ELT_ADD_RELU_BWD: rc = rt_ref_add_relu_bwd(n, a, b, o0); break;
  default: break;
  }
  if (rc == RT_REF_OK && dt == GPU_F16) {
    rt_ref_round_f16(n, o0, o0);
    if (o1) rt_ref_round_f16(n, o1, o1);
  }
  return rc;
}

/* Compares the device result (storage format) with want; returns the
 * largest relative difference and prints the first mismatches. */
static double compare(const char *kname, const char *which, const void *got, const float *want, int64_t n, GpuDtype dt,
                      double rtol, int64_t *bad) {
  double worst = 0;
  *bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float g = dt == GPU_F32 ? ((const float *)got)[i] : rt_ref_f16_to_f32(((const uint16_t *)got)[i]);
    double w = want[i], scale = fabs(w) > 1 ? fabs(w) : 1;
    double d = isnan(g) ? INFINITY : fabs(g - w) / scale;
    if (d > worst) worst = d;
    if (d > rtol && (*bad)++ < 5) fprintf(stderr, "%s %s[%" PRId64 "]: got %.9g want %.9g\n", kname, which, i, g, w);
  }
  return worst;
}

static CUdeviceptr alloc_copy(Gpu *g, const void *host, size_t bytes, const char *what, int *ok) {
  CUdeviceptr p = 0;
  if (!*ok) return 0;
  if (RT_CU(g->api, MemAlloc, (&p, bytes), what, err, sizeof err) ||
      RT_CU(g->api, MemcpyHtoD, (p, host, bytes), what, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    *ok = 0;
  }
  return p;
}

/* One kernel: compile, load, run, compare, time.  Returns 0 when the
 * kernel could not be set up or run (reported), 1 otherwise. */
static int run_case(Gpu *g, int index, GpuEltOp op, GpuDtype dt, int64_t n) {
  const RtCudaApi *api = g->api;
  const int nin = gpu_eltwise_nin(op), nout = gpu_eltwise_nout(op);
  const int vec = gpu_eltwise_vec(dt);
  const size_t esz = gpu_dtype_size(dt), bytes = esz * (size_t)n;
  const int bwd_of_relu = op == GPU_ELT_RELU_BWD || op == GPU_ELT_ADD_RELU_BWD;
  char kname[64], *src = NULL;
  CgNvrtcOut image = {0};
  RtCudaModule *mod = NULL;
  CUfunction fn;
  CUevent ev0 = NULL, ev1 = NULL;
  CUdeviceptr din[2] = {0, 0}, dout[2] = {0, 0};
  float *in[2] = {NULL, NULL}, *want[2] = {NULL, NULL};
  void *hin[2] = {NULL, NULL}, *hout = NULL;
  int ok = 1;

  if (gpu_eltwise_source(index, op, dt, n, vec, kname, sizeof kname, &src, err, sizeof err) ||
      cg_nvrtc_compile(src, kname, g->arch, CG_NVRTC_CUBIN, NULL, 0, &image, err, sizeof err) ||
      rt_cuda_module_init(&mod, g->ctx, image.image, kname, err, sizeof err) ||
      rt_cuda_module_function(mod, kname, &fn, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    ok = 0;
    goto done;
  }
  for (int i = 0; i < nin; i++) {
    in[i] = make_input(n, dt, i == 0 && bwd_of_relu);
    hin[i] = in[i] ? to_device_format(in[i], n, dt) : NULL;
  }
  for (int i = 0; i < nout; i++) want[i] = malloc(sizeof(float) * (size_t)n);
  hout = malloc(bytes);
  if (!in[nin - 1] || !hin[nin - 1] || !want[nout - 1] || !hout) {
    fprintf(stderr, "%s: out of host memory\n", kname);
    ok = 0;
    goto done;
  }
  CHECK(reference(op, dt, n, in[0], in[1], want[0], want[1]) == RT_REF_OK, "%s: reference failed", kname);
  for (int i = 0; i < nin; i++) din[i] = alloc_copy(g, hin[i], bytes, "kernel input", &ok);
  memset(hout, 0xff, bytes); /* NaN in both dtypes: unwritten shows */
  for (int i = 0; i < nout; i++) dout[i] = alloc_copy(g, hout, bytes, "kernel output", &ok);
  if (!ok) goto done;

  unsigned grid = gpu_eltwise_grid(n, vec, (unsigned)g->info.sm_count * 8u);
  void *params[] = {&din[0], &din[1], &din[1], &dout[0], &dout[1]}; /* in2 unused by these ops */
  CUstream st = rt_cuda_ctx_stream(g->ctx);
  if (RT_CU(api, LaunchKernel, (fn, grid, 1, 1, GPU_ELTWISE_BLOCK, 1, 1, 0, st, params, NULL), kname, err,
            sizeof err) ||
      RT_CU(api, StreamSynchronize, (st), kname, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    ok = 0;
    goto done;
  }
  double worst = 0;
  const double rtol = dt == GPU_F16 ? 1e-3 : 1e-6;
  for (int i = 0; i < nout && ok; i++) {
    if (RT_CU(api, MemcpyDtoH, (hout, dout[i], bytes), "kernel output", err, sizeof err)) {
      fprintf(stderr, "%s\n", err);
      ok = 0;
      break;
    }
    int64_t bad;
    double d = compare(kname, i ? "out1" : "out0", hout, want[i], n, dt, rtol, &bad);
    CHECK(bad == 0, "%s: %" PRId64 " of %" PRId64 " elements differ (max rel %g)", kname, bad, n, d);
    if (d > worst) worst = d;
  }
  if (!ok) goto done;

  float ms = 0;
  if (RT_CU(api, EventCreate, (&ev0, CU_EVENT_DEFAULT), "timing", err, sizeof err) ||
      RT_CU(api, EventCreate, (&ev1, CU_EVENT_DEFAULT), "timing", err, sizeof err) ||
      RT_CU(api, EventRecord, (ev0, st), "timing", err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    ok = 0;
    goto done;
  }
  for (int it = 0; it < TIMED_LAUNCHES && ok; it++)
    if (RT_CU(api, LaunchKernel, (fn, grid, 1, 1, GPU_ELTWISE_BLOCK, 1, 1, 0, st, params, NULL), kname, err,
              sizeof err))
      ok = 0;
  if (!ok || RT_CU(api, EventRecord, (ev1, st), "timing", err, sizeof err) ||
      RT_CU(api, EventSynchronize, (ev1), "timing", err, sizeof err) ||
      RT_CU(api, EventElapsedTime, (&ms, ev0, ev1), "timing", err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    ok = 0;
    goto done;
  }
  double per = ms / TIMED_LAUNCHES;
  double gbs = (double)(nin + nout) * (double)bytes / (per * 1e6);
  printf("%-22s n=%-9" PRId64 " grid=%-5u max rel diff %-9.3g %8.4f ms %8.1f GB/s\n", kname, n, grid, worst, per, gbs);
  if (g->results) fprintf(g->results, "%s\t%" PRId64 "\t%.3g\t%.4f\t%.1f\n", kname, n, worst, per, gbs);

done:
  if (ev0) api->EventDestroy(ev0);
  if (ev1) api->EventDestroy(ev1);
  for (int i = 0; i < 2; i++) {
    if (din[i]) api->MemFree(din[i]);
    if (dout[i]) api->MemFree(dout[i]);
    free(in[i]);
    free(hin[i]);
    free(want[i]);
  }
  free(hout);
  rt_cuda_module_free(mod);
  cg_nvrtc_out_free(&image);
  free(src);
  CHECK(ok, "kernel %d (%s %s, n=%" PRId64 ") did not run", index, gpu_eltwise_op_name(op), gpu_dtype_name(dt), n);
  return ok;
}

int main(void) {
  Gpu g = {0};
  RtCudaStatus s = rt_cuda_api(&g.api, err, sizeof err);
  if (s == RT_CUDA_ENODRIVER || s == RT_CUDA_ENODEVICE) return check_skip(err);
  CHECK(s == RT_CUDA_OK, "driver: %s", err);
  if (s) return check_report();
  int count = 0;
  if (rt_cuda_device_count(&count, err, sizeof err) == RT_CUDA_OK && count == 0)
    return check_skip("the CUDA driver sees no GPU");
  s = rt_cuda_ctx_init(&g.ctx, 0, err, sizeof err);
  if (s == RT_CUDA_ENODEVICE) return check_skip(err);
  CHECK(s == RT_CUDA_OK, "context: %s", err);
  if (s) return check_report();
  s = rt_cuda_device_info(0, &g.info, err, sizeof err);
  CHECK(s == RT_CUDA_OK, "device info: %s", err);
  int major = 0, minor = 0;
  if (cg_nvrtc_version(&major, &minor, err, sizeof err)) {
    rt_cuda_ctx_free(g.ctx);
    CHECK(0, "a GPU but no NVRTC: %s", err);
    return check_report();
  }
  snprintf(g.arch, sizeof g.arch, "sm_%d%d", g.info.cc_major, g.info.cc_minor);
  printf("%s (%s, %d SMs), NVRTC %d.%d\n", g.info.name, g.arch, g.info.sm_count, major, minor);
  const char *results = getenv("NETC_GPU_RESULTS");
  if (results && *results && !(g.results = fopen(results, "w"))) fprintf(stderr, "cannot write %s\n", results);

  int index = 0;
  for (int dt = 0; dt < GPU_DTYPE_COUNT; dt++)
    for (int op = 0; op < GPU_ELT_OP_COUNT; op++) run_case(&g, index++, (GpuEltOp)op, (GpuDtype)dt, 1000000);
  /* tails that are not a whole vector, and a size below one vector */
  run_case(&g, index++, GPU_ELT_ADD_RELU_FWD, GPU_F16, 1000003);
  run_case(&g, index++, GPU_ELT_ADD_BWD, GPU_F32, 1001);
  run_case(&g, index++, GPU_ELT_RELU_BWD, GPU_F16, 5);
  /* DRAM-sized (far beyond L2): the bandwidth numbers that mean something */
  for (int dt = 0; dt < GPU_DTYPE_COUNT; dt++) {
    run_case(&g, index++, GPU_ELT_RELU_FWD, (GpuDtype)dt, (int64_t)1 << 26);
    run_case(&g, index++, GPU_ELT_ADD_FWD, (GpuDtype)dt, (int64_t)1 << 26);
  }
  if (g.results) fclose(g.results);
  rt_cuda_ctx_free(g.ctx);
  return check_report();
}
