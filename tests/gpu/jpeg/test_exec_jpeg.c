/* test_exec_jpeg.c - the GPU decoder's pipeline as net_train uses it
 * (net_exec_input_start_jpeg, net_exec_input_send_items, feed): a batch
 * of JPEG files -- baseline 4:2:0 and 4:4:4, grey, progressive (which the
 * JPEG engines refuse: decoded on the host), one already decoded on the
 * CPU (an RGB item carrying only the part of its picture the window
 * reads) and one corrupt file -- each with its own window and
 * flip, into an f32 NCHW input and an NHWC input padded to 4 channels.
 * Every picture is compared with the CPU's path for the same window:
 * libjpeg's full decode, rt_augment_apply, rt_ref_input_u8.  Pixels
 * differ only by the decoders' IDCTs: the largest difference in levels is
 * printed and bounded (BOUND); host-decoded items must match exactly; the
 * corrupt file is black and counted; labels arrive with the batch; a short
 * batch leaves zeros after it.  On the CPU executor the decoder is refused
 * with a message.  `test_exec_jpeg` runs the CPU checks, `--gpu` the GPU
 * ones (77 without a GPU or nvJPEG). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "check.h"
#include "data/jpegtest.h"
#include "net_exec.h"
#include "cg_nvrtc.h"
#include "rt_augment.h"
#include "rt_gpu_jpeg.h"
#include "rt_jpeg.h"

enum { N = 6, H = 48, W = 40, BOUND = 6 };

typedef struct Pic {
  const char *name;
  uint8_t *bytes; /* the file, or RGB pixels for the RGB item */
  size_t len;
  int w, h, rgb;
  RtAugWindow win;
  int box[4];    /* the RGB item: the part of the picture it carries (x, y, w, h) */
  uint8_t *part; /* its bytes */
} Pic;

static uint8_t *picture(int w, int h, int comps, int seed) {
  uint8_t *px = malloc((size_t)w * h * comps);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < comps; c++)
        px[((size_t)y * w + x) * comps + c] =
            (uint8_t)(128 + 90 * sin(0.07 * x * (c + 1) + 0.05 * y + seed) + 30 * cos(0.11 * y * (2 - c % 2)));
  return px;
}

static uint8_t *file_bytes(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)n);
  *len = b && fread(b, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
  fclose(f);
  return b;
}

/* Picture k: a JPEG written as asked (comps 1 or 3, sub 4:2:0, prog). */
static void make_jpeg(Pic *p, const char *name, int w, int h, int comps, int sub, int prog, int seed) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/netc_test_exec_jpeg_%d.jpg", seed);
  uint8_t *px = picture(w, h, comps, seed);
  CHECK(jt_write_as(path, px, w, h, comps, 92, sub, prog, 0) == 0, "%s: written", name);
  free(px);
  p->name = name, p->bytes = file_bytes(path, &p->len), p->w = w, p->h = h;
  remove(path);
}

static void make_pics(Pic *p) {
  make_jpeg(&p[0], "baseline 4:2:0", 117, 93, 3, 1, 0, 1);
  make_jpeg(&p[1], "baseline 4:4:4", 64, 80, 3, 0, 0, 2);
  make_jpeg(&p[2], "grey", 75, 61, 1, 0, 0, 3);
  make_jpeg(&p[3], "progressive", 90, 70, 3, 1, 1, 4);
  p[4] = (Pic){.name = "rgb item",
               .bytes = picture(55, 66, 3, 5),
               .len = 55 * 66 * 3,
               .w = 55,
               .h = 66,
               .rgb = 1,
               .box = {5, 10, 45, 50}};
  p[4].part = malloc(45 * 50 * 3);
  for (int y = 0; y < 50; y++) memcpy(p[4].part + y * 45 * 3, p[4].bytes + ((y + 10) * 55 + 5) * 3, 45 * 3);
  make_jpeg(&p[5], "corrupt", 80, 60, 3, 1, 0, 6);
  memset(p[5].bytes + 2, 0x5a, p[5].len - 4); /* the markers' bodies destroyed, header size kept below */
  const RtAugWindow win[N] = {{10, 7, 80.5, 70, 1}, {0, 0, 64, 80, 0},  {3.25, 2, 60, 50, 1},
                              {5, 5, 70, 60, 0},    {8, 12, 30, 35, 1}, {0, 0, 80, 60, 0}};
  for (int i = 0; i < N; i++) p[i].win = win[i];
}

/* The CPU path's floats of picture p: libjpeg, the window, the conversion. */
static int cpu_path(const Pic *p, const RtRefInput *in, float *out) {
  RtImage im = {0};
  char err[256];
  if (p->rgb)
    im = (RtImage){.px = p->bytes, .w = p->w, .h = p->h, .full_w = p->w, .full_h = p->h};
  else if (rt_jpeg_decode_mem(p->bytes, p->len, p->name, 0, &im, err, sizeof err))
    return -1;
  uint8_t u8[3 * H * W];
  rt_augment_apply(&im, &p->win, H, W, u8);
  RtRefInput one = *in;
  one.n = 1;
  rt_ref_input_u8(&one, u8, out);
  if (!p->rgb) rt_image_free(&im);
  return 0;
}

/* Feeds the oldest batch sent (n of the pictures, with labels) and
 * compares the input and the labels with the CPU's path. */
static NetStatus check_batch(NetExec *x, int v, int lab, const Pic *p, const RtRefInput *in, int n,
                             const int64_t *labels, float *got, float *want) {
  char err[4096];
  int nhwc = in->dst_nhwc;
  size_t per = (size_t)in->dc * H * W;
  NetStatus s = net_exec_input_feed(x, err, sizeof err);
  if (!s) s = net_exec_read(x, v, got, err, sizeof err);
  CHECK(!s, "feed and read: %s", err);
  int64_t gl[N];
  if (!s && !net_exec_read(x, lab, gl, err, sizeof err))
    for (int i = 0; i < N; i++) CHECK(gl[i] == labels[i], "batch of %d: label %d is %lld", n, i, (long long)gl[i]);
  for (int i = 0; i < n && !s; i++) {
    const float *gi = got + (size_t)i * per;
    int corrupt = i == 5, ok = cpu_path(&p[i], in, want) == 0;
    CHECK(ok != corrupt, "%s: libjpeg %s it", p[i].name, ok ? "reads" : "refuses");
    double worst = 0;
    for (size_t k = 0; k < per; k++) {
      int c = nhwc ? (int)(k % 4) : (int)(k / (H * W));
      if (c == 3) {
        CHECK(gi[k] == 0, "%s: padded channel %zu is %g", p[i].name, k, gi[k]);
        continue;
      }
      float w = corrupt ? in->shift[c] : want[k]; /* the CPU path in the same layout */
      double levels = fabs((double)gi[k] - w) / in->scale[c];
      if (levels > worst) worst = levels;
    }
    int exact = p[i].rgb || i == 3 || corrupt; /* host-decoded (progressive: when refused) or black */
    printf("%s %s: largest difference %.2f levels\n", nhwc ? "nhwc" : "nchw", p[i].name, worst);
    CHECK(worst <= (exact && i != 3 ? 0.01 : BOUND), "%s: %.2f levels from the CPU's path", p[i].name, worst);
  }
  for (size_t k = (size_t)n * per; n < N && k < N * per; k++)
    CHECK(got[k] == 0, "short batch: element %zu after it is %g", k, got[k]);
  return s;
}

static void run_gpu(int nhwc) {
  Arena a;
  arena_init(&a);
  IrGraph *g = ir_graph_new(&a, "jpeg_input");
  int dc = nhwc ? 4 : 3;
  IrType t = {.dtype = IR_DT_F32, .layout = nhwc ? IR_LAYOUT_NHWC : IR_LAYOUT_NCHW, .rank = 4};
  const int64_t dims[2][4] = {{IR_DIM_N, 3, H, W}, {IR_DIM_N, H, W, 4}};
  memcpy(t.dim, dims[nhwc], sizeof t.dim);
  IrType tl = {.dtype = IR_DT_I32, .layout = IR_LAYOUT_ROW, .rank = 1, .dim = {IR_DIM_N}};
  int v = ir_value_add(g, IR_VAL_INPUT, t, "image"), lab = ir_value_add(g, IR_VAL_INPUT, tl, "label");
  size_t per = (size_t)dc * H * W;
  g->val[v].offset = 0, g->val[lab].offset = (int64_t)(N * per * 4 + 255) / 256 * 256;
  g->plan_bytes = g->val[lab].offset + 256, g->plan_batch = N;
  char err[4096];
  NetExec *x = NULL;
  NetStatus s = net_exec_new(1, NULL, g, N, &x, err, sizeof err);
  CHECK(!s, "executor: %s", err);
  RtRefInput in = {.n = N,
                   .c = 3,
                   .h = H,
                   .w = W,
                   .dc = dc,
                   .dst_nhwc = nhwc,
                   .scale = {0.02f, 0.03f, 0.04f},
                   .shift = {-1.0f, -0.5f, 0.25f}};
  if (!s && (s = net_exec_input_start_jpeg(x, v, lab, &in, 0, err, sizeof err))) {
    if (strstr(err, "libnvjpeg")) printf("skipped: %s\n", err);
    CHECK(strstr(err, "libnvjpeg") != NULL, "start: %s", err);
  }
  Pic p[N];
  memset(p, 0, sizeof p);
  make_pics(p);
  RtLoaderItem it[N];
  for (int i = 0; i < N; i++)
    it[i] = (RtLoaderItem){.kind = p[i].rgb ? RT_ITEM_RGB : RT_ITEM_JPEG,
                           .data = p[i].rgb ? p[i].part : p[i].bytes,
                           .len = p[i].rgb ? 45 * 50 * 3 : p[i].len,
                           .w = p[i].w,
                           .h = p[i].h,
                           .win = p[i].win,
                           .name = p[i].name,
                           .bx = p[i].box[0],
                           .by = p[i].box[1],
                           .bw = p[i].box[2],
                           .bh = p[i].box[3]};
  const int64_t labels[N] = {5, 0, 3, 1, 4, 2}, labels2[N] = {1, 1, 1, 0, 0, 0};
  float *got = malloc(sizeof(float) * N * per), *want = malloc(sizeof(float) * per);
  char dec[64] = "";
  for (int round = 0; !s && round < 2; round++) {
    /* round 1: the first two pictures only (a short batch) */
    int n = round ? 2 : N;
    s = net_exec_input_send_items(x, it, n, round ? labels2 : labels, err, sizeof err);
    CHECK(!s, "send: %s", err);
    if (!s) s = check_batch(x, v, lab, p, &in, n, round ? labels2 : labels, got, want);
  }
  /* Round 2: as many batches as the pipeline takes (every slot) sent
   * before any is fed, from copies of the items' bytes that are
   * overwritten and freed right after each send (the pipeline keeps its
   * own), one more refused, and all fed in order: full, short, full. */
  int depth = s ? 0 : net_exec_input_depth(x);
  CHECK(s || depth >= 2, "the GPU decoder takes %d batches sent and not fed, not 2 or more", depth);
  for (int b = 0; !s && b <= depth; b++) {
    RtLoaderItem copy[N];
    uint8_t *mine[N];
    for (int i = 0; i < N; i++) {
      copy[i] = it[i];
      mine[i] = malloc(it[i].len);
      memcpy(mine[i], it[i].data, it[i].len);
      copy[i].data = mine[i];
    }
    NetStatus sb = net_exec_input_send_items(x, copy, b % 2 ? 2 : N, b % 2 ? labels2 : labels, err, sizeof err);
    if (b < depth) s = sb;
    CHECK(b < depth ? !sb : sb == NET_ERR_ARG && strstr(err, "sent and not fed") != NULL, "pipelined send %d: %s", b,
          sb ? err : "taken");
    for (int i = 0; i < N; i++) memset(mine[i], 0xab, it[i].len), free(mine[i]);
  }
  for (int b = 0; !s && b < depth; b++)
    s = check_batch(x, v, lab, p, &in, b % 2 ? 2 : N, b % 2 ? labels2 : labels, got, want);
  double rate[NET_DECODER_RATES] = {0};
  net_exec_input_decoder(x, NULL, 0, NULL, NULL, rate);
  /* every full batch holds an RGB item, so per JPEG is fewer images a second */
  CHECK(s || (rate[0] > 0 && rate[3] > 0 && rate[3] < rate[0]), "rates: %g images/s, %g JPEGs/s", rate[0], rate[3]);
  int64_t host = 0, failed = 0;
  net_exec_input_decoder(x, dec, sizeof dec, &host, &failed, NULL);
  printf("decoder %s: %lld decoded on the host, %lld failed\n", dec, (long long)host, (long long)failed);
  CHECK(s || failed == 1 + (depth + 1) / 2, "the corrupt file is counted once per batch it was in (%d): %lld",
        1 + (depth + 1) / 2, (long long)failed);
  for (int i = 0; i < N; i++) free(p[i].bytes), free(p[i].part);
  free(got), free(want);
  net_exec_free(x);
  arena_free(&a);
}

/* The crop kernel's source for f32/f16/bf16, NCHW and NHWC padded to 4,
 * compiles with NVRTC (no GPU needed; skipped without NVRTC); 1 channel
 * of pictures and an integer input are refused. */
static void check_sources(void) {
  char err[8192];
  int major, minor;
  if (cg_nvrtc_version(&major, &minor, err, sizeof err)) {
    printf("NVRTC not loadable, the crop kernel not compiled: %s\n", err);
    return;
  }
  const IrDtype dts[3] = {IR_DT_F32, IR_DT_F16, IR_DT_BF16};
  for (int i = 0; i < 6; i++) {
    RtRefInput in = {.n = N, .c = 3, .h = H, .w = W, .dc = i % 2 ? 4 : 3, .dst_nhwc = i % 2, .scale = {1, 1, 1}};
    char *src = NULL, name[64];
    RtCudaStatus s = rt_gpu_jpeg_source(&in, dts[i / 2], &src, name, sizeof name, err, sizeof err);
    CHECK(!s, "source %d: %s", i, err);
    CgNvrtcOut out = {0};
    if (!s)
      CHECK(!cg_nvrtc_compile(src, name, "sm_90", CG_NVRTC_CUBIN, NULL, 0, &out, err, sizeof err),
            "%s does not compile: %s", name, err);
    cg_nvrtc_out_free(&out);
    free(src);
  }
  RtRefInput grey = {.n = N, .c = 1, .h = H, .w = W, .dc = 1, .scale = {1, 1, 1}};
  char *src = NULL, name[64];
  CHECK(rt_gpu_jpeg_source(&grey, IR_DT_F32, &src, name, sizeof name, err, sizeof err) == RT_CUDA_EARG,
        "one channel of pictures is refused");
  grey.c = 3, grey.dc = 3;
  CHECK(rt_gpu_jpeg_source(&grey, IR_DT_I32, &src, name, sizeof name, err, sizeof err) == RT_CUDA_EARG,
        "an integer input is refused");
  free(src);
}

static void run_cpu(void) {
  Arena a;
  arena_init(&a);
  IrGraph *g = ir_graph_new(&a, "jpeg_input");
  IrType t = {.dtype = IR_DT_F32, .layout = IR_LAYOUT_NCHW, .rank = 4, .dim = {IR_DIM_N, 3, H, W}};
  int v = ir_value_add(g, IR_VAL_INPUT, t, "image");
  char err[1024] = "";
  NetExec *x = NULL;
  NetStatus s = net_exec_new(0, NULL, g, N, &x, err, sizeof err);
  CHECK(!s, "cpu executor: %s", err);
  RtRefInput in = {.n = N, .c = 3, .h = H, .w = W, .dc = 3, .scale = {1, 1, 1}};
  if (!s)
    CHECK(net_exec_input_start_jpeg(x, v, -1, &in, 0, err, sizeof err) == NET_ERR_NO_GPU && strstr(err, "GPU executor"),
          "the CPU executor refuses the GPU decoder: %s", err);
  RtLoaderItem one = {0};
  CHECK(net_exec_input_send_items(x, &one, 1, NULL, err, sizeof err) == NET_ERR_ARG, "items need a started decoder");
  CHECK(net_exec_input_depth(x) == 2, "the byte pipeline takes 2 batches ahead, not %d", net_exec_input_depth(x));
  net_exec_free(x);
  arena_free(&a);
}

int main(int argc, char **argv) {
  int gpu = argc > 1 && strcmp(argv[1], "--gpu") == 0;
  char why[512] = "";
  if (!gpu) {
    run_cpu();
    check_sources();
    return check_report();
  }
  if (!net_exec_gpu_present(why, sizeof why)) return check_skip(why);
  run_gpu(0);
  run_gpu(1);
  return check_report();
}
