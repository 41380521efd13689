/* test_gpu_input.c - the input pipeline: rt_ref_input_u8 (the plain-C
 * conversion of a batch of bytes into the image input), and the GPU's
 * generated kernel and double-buffered pinned copies against it.
 *
 * Without a GPU: the reference on hand-worked values (normalization per
 * channel, padded channels zero, an NHWC source the same as its NCHW
 * transpose), and every configuration's kernel source compiled with NVRTC
 * for sm_90 (when NVRTC loads); then exit 77.  With a GPU: for each
 * configuration an executor holding only the input value, three batches of
 * random bytes sent through the two pinned buffers (two in flight at
 * once), each fed and read back: f32 must equal the reference bit for bit,
 * f16/bf16 the reference rounded to the dtype (within 1e-6 of the largest
 * magnitude, and in practice exactly).  Misuse (feeding with nothing sent,
 * taking a third buffer) is refused with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "check.h"
#include "rt_gpu_input.h"
#include "cg_nvrtc.h"
#include "rt_ref.h"
#include "rt_ref_input.h"

typedef struct Config {
  RtRefInput in;
  IrDtype dt;
} Config;

/* FashionMNIST's and ImageNet's normalizations, as net_train makes them. */
#define FM_SCALE (1 / (255 * 0.3530f))
#define FM_SHIFT (-0.2860f / 0.3530f)
#define FM \
  {FM_SCALE, FM_SCALE, FM_SCALE}, { FM_SHIFT, FM_SHIFT, FM_SHIFT }
#define IN \
  {1 / (255 * 0.229f), 1 / (255 * 0.224f), 1 / (255 * 0.225f)}, { -0.485f / 0.229f, -0.456f / 0.224f, -0.406f / 0.225f }

static const Config CONFIGS[] = {
    {{5, 1, 28, 28, 0, 1, 0, FM}, IR_DT_F32}, /* fmnist, as resnet50_fmnist.net declares its image */
    {{5, 1, 28, 28, 0, 1, 0, FM}, IR_DT_F16},
    {{4, 3, 7, 9, 0, 3, 0, IN}, IR_DT_F32},     /* a loader's RGB batch into an NCHW image */
    {{4, 3, 7, 9, 0, 4, 1, IN}, IR_DT_F16},     /* into NHWC padded 3 -> 4 */
    {{3, 3, 5, 6, 1, 8, 1, IN}, IR_DT_BF16},    /* NHWC bytes, padded 3 -> 8 */
    {{6, 784, 1, 1, 0, 784, 0, FM}, IR_DT_F32}, /* a flat [N, F] input */
};
enum { NCONFIG = sizeof CONFIGS / sizeof CONFIGS[0], NBATCH = 3 };

static void check_reference(void) {
  /* one image, 3 channels of 2 pixels, NCHW bytes -> NHWC with 4 channels */
  const uint8_t x[6] = {0, 255, 10, 20, 30, 40};
  RtRefInput in = {1, 3, 1, 2, 0, 4, 1, {1, 2, 3}, {0.5f, -1, 0}};
  float y[8];
  memset(y, 0xff, sizeof y);
  rt_ref_input_u8(&in, x, y);
  const float want[8] = {0.5f, -1 + 20, 90, 0, 255.5f, -1 + 40, 120, 0};
  for (int i = 0; i < 8; i++) CHECK(y[i] == want[i], "reference y[%d] = %g, want %g", i, y[i], want[i]);
  /* the same bytes stored NHWC give the same result */
  const uint8_t xt[6] = {0, 10, 30, 255, 20, 40};
  float y2[8];
  in.src_nhwc = 1;
  rt_ref_input_u8(&in, xt, y2);
  CHECK(memcmp(y, y2, sizeof y) == 0, "an NHWC source differs from its NCHW transpose");
  /* a one-channel set takes entry 0; more than three channels reuse entry 2 */
  RtRefInput one = {2, 1, 1, 1, 0, 1, 0, {2, 9, 9}, {1, 9, 9}};
  const uint8_t x1[2] = {3, 4};
  rt_ref_input_u8(&one, x1, y);
  CHECK(y[0] == 7 && y[1] == 9, "one channel: %g %g, want 7 9", y[0], y[1]);
  RtRefInput bad = in;
  bad.dc = 2;
  CHECK(!rt_ref_input_ok(&bad) && rt_ref_input_ok(&in), "rt_ref_input_ok accepts dc < c or refuses a good one");
}

/* Every configuration's source compiles (NVRTC, no GPU); 0 when NVRTC is missing. */
static int check_sources(void) {
  char err[8192];
  int major, minor;
  if (cg_nvrtc_version(&major, &minor, err, sizeof err)) {
    printf("NVRTC not loadable, kernel sources not compiled: %s\n", err);
    return 0;
  }
  for (int i = 0; i < NCONFIG; i++) {
    char *src = NULL, name[64];
    RtCudaStatus s = rt_gpu_input_source(&CONFIGS[i].in, CONFIGS[i].dt, &src, name, sizeof name, err, sizeof err);
    CHECK(!s, "config %d: source: %s", i, err);
    if (s) continue;
    CgNvrtcOut out = {0};
    CgStatus ns = cg_nvrtc_compile(src, name, "sm_90", CG_NVRTC_CUBIN, NULL, 0, &out, err, sizeof err);
    CHECK(!ns, "config %d: %s does not compile: %s", i, name, err);
    cg_nvrtc_out_free(&out);
    free(src);
  }
  char *src = NULL, name[64];
  CHECK(rt_gpu_input_source(&CONFIGS[0].in, IR_DT_I32, &src, name, sizeof name, err, sizeof err) == RT_CUDA_EARG,
        "an integer input is refused");
  CHECK(strstr(err, "i32") != NULL, "the message names the dtype: %s", err);
  free(src);
  return 1;
}

static int64_t out_numel(const RtRefInput *in) { return in->n * in->dc * in->h * in->w; }

/* An executor whose graph is one input value of in's destination shape. */
static RtGpu *input_only(Arena *a, const Config *c, int *v, char *err, size_t errlen) {
  const RtRefInput *in = &c->in;
  IrGraph *g = ir_graph_new(a, "input_only");
  IrType t = {.dtype = c->dt, .layout = in->dst_nhwc ? IR_LAYOUT_NHWC : IR_LAYOUT_NCHW, .rank = 4};
  int64_t dims[4] = {IR_DIM_N, in->dc, in->h, in->w};
  if (in->dst_nhwc) dims[1] = in->h, dims[2] = in->w, dims[3] = in->dc;
  memcpy(t.dim, dims, sizeof dims);
  *v = ir_value_add(g, IR_VAL_INPUT, t, "image");
  g->val[*v].offset = 0;
  g->plan_bytes = (out_numel(in) * (int64_t)ir_dtype_size(c->dt) + 255) / 256 * 256;
  g->plan_batch = in->n;
  RtGpuOpts o = {0};
  RtGpu *x = NULL;
  if (rt_gpu_new(g, in->n, &o, &x, err, errlen)) return NULL;
  return x;
}

static float rounded(IrDtype dt, float f) {
  return dt == IR_DT_F16    ? rt_ref_f16_to_f32(rt_ref_f32_to_f16(f))
         : dt == IR_DT_BF16 ? rt_ref_bf16_to_f32(rt_ref_f32_to_bf16(f))
                            : f;
}

/* Batch b's result read back against the reference. */
static void compare(int ci, int b, RtGpu *x, int v, const uint8_t *bytes) {
  const Config *c = &CONFIGS[ci];
  int64_t n = out_numel(&c->in);
  float *got = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)n);
  char err[2048];
  if (!got || !want || rt_gpu_read(x, v, got, err, sizeof err)) {
    CHECK(0, "config %d batch %d: reading the input: %s", ci, b, got && want ? err : "out of memory");
    free(got), free(want);
    return;
  }
  rt_ref_input_u8(&c->in, bytes, want);
  double big = 1e-30, worst = 0;
  int64_t at = 0, exact = 0;
  for (int64_t i = 0; i < n; i++) {
    want[i] = rounded(c->dt, want[i]);
    double d = fabs((double)got[i] - want[i]);
    if (fabs(want[i]) > big) big = fabs(want[i]);
    if (d > worst) worst = d, at = i;
    exact += got[i] == want[i];
  }
  double tol = c->dt == IR_DT_F32 ? 0 : 1e-6 * big;
  CHECK(worst <= tol, "config %d (%s) batch %d: [%lld] got %.9g want %.9g; %lld of %lld exact", ci,
        ir_dtype_name(c->dt), b, (long long)at, got[at], want[at], (long long)exact, (long long)n);
  if (worst > tol)
    for (int64_t i = 0; i < 4 && i < n; i++)
      fprintf(stderr, "  [%lld] got %.9g want %.9g\n", (long long)i, got[i], want[i]);
  free(got), free(want);
}

static void check_gpu(int ci, uint64_t *seed) {
  const Config *c = &CONFIGS[ci];
  char err[8192];
  Arena a;
  arena_init(&a);
  int v = -1;
  RtGpu *x = input_only(&a, c, &v, err, sizeof err);
  CHECK(x != NULL, "config %d: executor: %s", ci, err);
  RtGpuInput *p = NULL;
  RtCudaStatus s = x ? rt_gpu_input_new(x, v, &c->in, &p, err, sizeof err) : RT_CUDA_EARG;
  CHECK(!s, "config %d: pipeline: %s", ci, err);
  size_t bytes = (size_t)(c->in.n * c->in.c * c->in.h * c->in.w);
  uint8_t *kept[NBATCH] = {0};
  for (int b = 0; !s && b < NBATCH; b++) {
    if (!(kept[b] = malloc(bytes))) break;
    for (size_t i = 0; i < bytes; i++) kept[b][i] = (uint8_t)((*seed = *seed * 6364136223846793005ull + 1) >> 56);
  }
  /* batches 0 and 1 in flight together, then 2 while 1 waits */
  uint8_t *host;
  int sent = 0, fed = 0;
  while (!s && fed < NBATCH && kept[NBATCH - 1]) {
    if (sent < NBATCH && sent - fed < 2) {
      if (!(s = rt_gpu_input_buffer(p, &host, err, sizeof err))) {
        memcpy(host, kept[sent], bytes);
        s = rt_gpu_input_send(p, NULL, err, sizeof err);
      }
      CHECK(!s, "config %d: sending batch %d: %s", ci, sent, err);
      sent++;
      if (sent - fed == 2) {
        RtCudaStatus r = rt_gpu_input_buffer(p, &host, err, sizeof err);
        CHECK(r == RT_CUDA_EARG && strstr(err, "not fed"), "a third buffer with two in flight: %d %s", r, err);
      }
      continue;
    }
    s = rt_gpu_input_feed(p, err, sizeof err);
    CHECK(!s, "config %d: feeding batch %d: %s", ci, fed, err);
    if (!s) compare(ci, fed, x, v, kept[fed]);
    fed++;
  }
  if (p) {
    RtCudaStatus r = rt_gpu_input_feed(p, err, sizeof err);
    CHECK(r == RT_CUDA_EARG && strstr(err, "no batch"), "feeding with nothing sent: %d %s", r, err);
  }
  rt_gpu_input_free(p);
  rt_gpu_free(x);
  for (int b = 0; b < NBATCH; b++) free(kept[b]);
  arena_free(&a);
}

int main(void) {
  check_reference();
  check_sources();
  char why[512] = "";
  int count = 0;
  if (rt_cuda_device_count(&count, why, sizeof why) || count < 1) {
    if (count < 1 && !why[0]) snprintf(why, sizeof why, "the CUDA driver sees no GPU");
    check_report();
    return check_nfail ? 1 : check_skip(why);
  }
  uint64_t seed = 12345;
  for (int i = 0; i < NCONFIG; i++) check_gpu(i, &seed);
  return check_report();
}
