/* test_gpu_nvjpeg.c - rt_nvjpeg_decode on the GPU against libjpeg's own
 * decode (rt_jpeg_decode_mem, full size).
 *
 * Seven JPEGs made in memory with libjpeg: RGB 4:4:4, RGB 4:2:0 of odd
 * size, grey, progressive 4:2:0, a 640x480 4:2:0 photo-sized one, one cut
 * short in its headers and one that is not a JPEG at all.  Each backend
 * (auto, gpu-hybrid, hardware where the GPU has JPEG engines) decodes them
 * into pitched device buffers (pitch > w * 3): the good ones must come within
 * MAX_DIFF of libjpeg in every byte (the largest and the mean difference are
 * printed per image), the bad ones must be failed[i] = 1 with the status
 * still RT_CUDA_OK and their buffers untouched.  The hardware engines take
 * baseline JPEGs only, so there a progressive image may be refused too (it
 * is the caller's, on the CPU).  The same decoder then decodes a smaller
 * batch and the full one again (the batched state re-initialized), with the
 * same bytes.  NVML is sampled once and printed.
 *
 * Seen on the H200 (nvJPEG 13.0, the same pictures through PIL's libjpeg-
 * turbo): hardware max |diff| 0-1, mean 0.0001, progressive refused; gpu-
 * hybrid max 1-3, mean 0.02-0.03, progressive decoded; CMYK, truncated
 * and junk refused with their buffers untouched on both.
 *
 * Without a driver, a GPU or nvJPEG it prints "skipped: <why>" and exits 77. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h>

#include "check.h"
#include "rt_jpeg.h"
#include "rt_nvjpeg.h"
#include "rt_nvjpeg_pool.h"
#include "rt_nvml.h"

/* the largest byte difference allowed against libjpeg (IDCT and upsampling differ) */
#define MAX_DIFF 8

enum { NIMG = 7, EXTRA_PITCH = 64 };

typedef struct Img {
  const char *name;
  uint8_t *jpg; /* malloc'ed */
  size_t len;
  int bad;         /* not decodable: must be failed */
  int progressive; /* the hardware engines may refuse it */
  RtImage ref;     /* libjpeg's decode (good images) */
  int w, h;        /* the buffer's size */
  size_t pitch;
  CUdeviceptr dev;
  uint8_t *host;
} Img;

/* A smooth test picture with some detail: components 1 or 3. */
static uint8_t *picture(int w, int h, int components) {
  uint8_t *px = malloc((size_t)w * h * components);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      uint8_t *p = px + ((size_t)y * w + x) * components;
      int ring = ((x - w / 2) * (x - w / 2) + (y - h / 3) * (y - h / 3)) / 40 % 64;
      if (components == 1) {
        p[0] = (uint8_t)((x + y) * 191 / (w + h) + ring);
      } else {
        p[0] = (uint8_t)(x * 255 / (w - 1));
        p[1] = (uint8_t)(y * 255 / (h - 1));
        p[2] = (uint8_t)(64 + ring * 2);
      }
    }
  return px;
}

/* px as a JPEG in memory: 4:4:4 or 4:2:0 (colour), baseline or progressive. */
static uint8_t *encode(const uint8_t *px, int w, int h, int components, int quality, int sub420, int progressive,
                       size_t *len) {
  struct jpeg_compress_struct ci;
  struct jpeg_error_mgr em;
  unsigned char *buf = NULL;
  unsigned long size = 0;
  ci.err = jpeg_std_error(&em);
  jpeg_create_compress(&ci);
  jpeg_mem_dest(&ci, &buf, &size);
  ci.image_width = (JDIMENSION)w, ci.image_height = (JDIMENSION)h, ci.input_components = components;
  ci.in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&ci);
  jpeg_set_quality(&ci, quality, TRUE);
  if (!sub420)
    for (int c = 0; c < ci.num_components; c++) ci.comp_info[c].h_samp_factor = ci.comp_info[c].v_samp_factor = 1;
  if (progressive) jpeg_simple_progression(&ci);
  jpeg_start_compress(&ci, TRUE);
  while (ci.next_scanline < ci.image_height) {
    JSAMPROW row = (JSAMPROW)(px + (size_t)ci.next_scanline * w * components);
    jpeg_write_scanlines(&ci, &row, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  *len = size;
  return buf;
}

static void make_good(Img *im, const char *name, int w, int h, int components, int quality, int sub420,
                      int progressive) {
  uint8_t *px = picture(w, h, components);
  im->name = name;
  im->jpg = encode(px, w, h, components, quality, sub420, progressive, &im->len);
  im->progressive = progressive;
  free(px);
}

static void make_images(Img *img) {
  memset(img, 0, NIMG * sizeof *img);
  make_good(&img[0], "rgb444", 64, 48, 3, 95, 0, 0);
  make_good(&img[1], "rgb420-odd", 97, 61, 3, 90, 1, 0);
  make_good(&img[2], "grey", 50, 40, 1, 90, 0, 0);
  make_good(&img[3], "progressive420", 80, 60, 3, 90, 1, 1);
  make_good(&img[4], "photo640x480", 640, 480, 3, 85, 1, 0);
  /* cut short inside its quantization tables: no frame header at all */
  img[5].name = "truncated", img[5].bad = 1, img[5].len = 100;
  img[5].jpg = malloc(img[5].len);
  memcpy(img[5].jpg, img[1].jpg, img[5].len);
  img[6].name = "not-a-jpeg", img[6].bad = 1, img[6].len = 300;
  img[6].jpg = malloc(img[6].len);
  for (size_t i = 0; i < img[6].len; i++) img[6].jpg[i] = (uint8_t)(i * 37 + 11);
}

/* libjpeg's decode of each image; the bad ones must fail there too. */
static int reference(Img *img) {
  char err[512];
  for (int i = 0; i < NIMG; i++) {
    RtJpegStatus s = rt_jpeg_decode_mem(img[i].jpg, img[i].len, img[i].name, 0, &img[i].ref, err, sizeof err);
    if (img[i].bad) {
      CHECK(s != RT_JPEG_OK, "libjpeg decodes the corrupt image %s", img[i].name);
      img[i].w = img[i].h = 64;
    } else {
      CHECK(s == RT_JPEG_OK, "libjpeg: %s", err);
      if (s) return -1;
      img[i].w = img[i].ref.w, img[i].h = img[i].ref.h;
    }
    img[i].pitch = (size_t)img[i].w * 3 + EXTRA_PITCH;
  }
  return 0;
}

static int alloc_buffers(const RtCudaApi *api, Img *img, char *err, size_t errlen) {
  for (int i = 0; i < NIMG; i++) {
    size_t bytes = img[i].pitch * (size_t)img[i].h;
    if (RT_CU(api, MemAlloc, (&img[i].dev, bytes), "test image", err, errlen)) return -1;
    img[i].host = malloc(bytes);
  }
  return 0;
}

static void free_buffers(const RtCudaApi *api, Img *img) {
  for (int i = 0; i < NIMG; i++) {
    if (img[i].dev) api->MemFree(img[i].dev);
    free(img[i].host);
    img[i].dev = 0, img[i].host = NULL;
  }
}

/* Decodes images first..first+n-1 with j; fills each buffer with 0xA5 first
 * and copies every buffer back.  The status of rt_nvjpeg_decode. */
static RtCudaStatus run_batch(RtNvjpeg *j, RtCudaCtx *ctx, Img *img, int first, int n, uint8_t *failed) {
  const RtCudaApi *api = rt_cuda_ctx_api(ctx);
  CUstream st = rt_cuda_ctx_stream(ctx);
  char err[1024] = "";
  const uint8_t *data[NIMG];
  size_t len[NIMG], pitch[NIMG];
  uint8_t *dst[NIMG];
  for (int k = 0; k < n; k++) {
    Img *im = &img[first + k];
    if (RT_CU(api, MemsetD8Async, (im->dev, 0xA5, im->pitch * im->h, st), "test image", err, sizeof err)) break;
    data[k] = im->jpg, len[k] = im->len, pitch[k] = im->pitch, dst[k] = (uint8_t *)(uintptr_t)im->dev;
  }
  CHECK(!*err, "%s", err);
  RtCudaStatus s = rt_nvjpeg_decode(j, n, data, len, dst, pitch, st, failed, err, sizeof err);
  CHECK(s == RT_CUDA_OK, "rt_nvjpeg_decode: %s", err);
  RtCudaStatus c = RT_CU(api, StreamSynchronize, (st), "after decoding", err, sizeof err);
  for (int k = 0; k < n && !c; k++)
    c = RT_CU(api, MemcpyDtoH, (img[first + k].host, img[first + k].dev, img[first + k].pitch * img[first + k].h),
              "test image", err, sizeof err);
  CHECK(c == RT_CUDA_OK, "%s", err);
  return s ? s : c;
}

/* Image i's bytes against libjpeg (good) or untouched (bad); prints the differences. */
static void compare(const Img *im, int failed, RtNvjpegBackend backend) {
  if (im->bad) {
    CHECK(failed == 1, "%s: the corrupt image was not refused", im->name);
    size_t touched = 0;
    for (size_t b = 0; b < im->pitch * im->h; b++) touched += im->host[b] != 0xA5;
    CHECK(touched == 0, "%s: %zu bytes of a refused image's buffer written", im->name, touched);
    printf("  %-16s refused, as it must be\n", im->name);
    return;
  }
  if (failed) {
    int may = backend == RT_NVJPEG_HARDWARE && im->progressive;
    printf("  %-16s refused%s\n", im->name,
           may ? " (progressive: the hardware engines' limit; the CPU decodes it)" : "");
    CHECK(may, "%s: a good image was refused by the %s decoder", im->name, rt_nvjpeg_backend_name(backend));
    return;
  }
  int maxd = 0;
  double sum = 0;
  size_t row = (size_t)im->w * 3, pad_written = 0;
  for (int y = 0; y < im->h; y++) {
    const uint8_t *g = im->host + (size_t)y * im->pitch, *r = im->ref.px + (size_t)y * row;
    for (size_t x = 0; x < row; x++) {
      int d = abs((int)g[x] - (int)r[x]);
      maxd = d > maxd ? d : maxd;
      sum += d;
    }
    for (size_t x = row; x < im->pitch; x++) pad_written += g[x] != 0xA5;
  }
  double mean = sum / ((double)row * im->h);
  printf("  %-16s %dx%d: max |diff| %d, mean |diff| %.4f (bound %d)\n", im->name, im->w, im->h, maxd, mean, MAX_DIFF);
  CHECK(maxd <= MAX_DIFF, "%s: max difference %d from libjpeg > %d (mean %.4f)", im->name, maxd, MAX_DIFF, mean);
  CHECK(pad_written == 0, "%s: %zu bytes written past w * 3 in the rows' padding", im->name, pad_written);
}

static void run_backend(RtCudaCtx *ctx, Img *img, RtNvjpegBackend want) {
  char err[1024] = "";
  RtNvjpeg *j = NULL;
  RtCudaStatus s = rt_nvjpeg_new(8, want, &j, err, sizeof err);
  if (want == RT_NVJPEG_HARDWARE && s != RT_CUDA_OK) {
    printf("backend hardware: not available here (%s)\n", err);
    return;
  }
  CHECK(s == RT_CUDA_OK, "rt_nvjpeg_new(%s): %s", rt_nvjpeg_backend_name(want), err);
  if (s) return;
  RtNvjpegBackend got = rt_nvjpeg_backend(j);
  printf("backend %s: decoder uses %s\n", rt_nvjpeg_backend_name(want), rt_nvjpeg_backend_name(got));
  CHECK(got == RT_NVJPEG_HARDWARE || got == RT_NVJPEG_GPU_HYBRID, "backend %d", (int)got);
  CHECK(want == RT_NVJPEG_AUTO || got == want, "asked for %s, got %s", rt_nvjpeg_backend_name(want),
        rt_nvjpeg_backend_name(got));
  uint8_t failed[NIMG];
  if (run_batch(j, ctx, img, 0, NIMG, failed) == RT_CUDA_OK)
    for (int i = 0; i < NIMG; i++) compare(&img[i], failed[i], got);
  /* the same decoder again: a smaller batch, then the full one (re-initialized) */
  uint8_t *first = malloc(img[4].pitch * img[4].h);
  memcpy(first, img[4].host, img[4].pitch * img[4].h);
  int refused4 = failed[4];
  if (run_batch(j, ctx, img, 0, 2, failed) == RT_CUDA_OK) {
    compare(&img[0], failed[0], got);
    compare(&img[1], failed[1], got);
  }
  if (run_batch(j, ctx, img, 0, NIMG, failed) == RT_CUDA_OK) {
    CHECK(failed[4] == refused4 && memcmp(first, img[4].host, img[4].pitch * img[4].h) == 0,
          "%s: a second decode differs from the first", img[4].name);
    for (int i = 0; i < NIMG; i++)
      if (img[i].bad) CHECK(failed[i] == 1, "%s: not refused the second time", img[i].name);
  }
  free(first);
  rt_nvjpeg_free(j);
}

/* A batch of BESIDE copies of the photo-sized image decoded while the
 * device is busy with about 30 ms of other work on a stream of its own --
 * memsets, or (spin) kernels that fill every SM and spin on the clock, as a
 * training step's kernels fill them -- against the same batch on an idle
 * device: with nvJPEG's own allocators a cudaFree inside the decode can hold
 * it until the other work ends; with the pool (rt_nvjpeg_pool.h) it must
 * not.  The times are printed, not checked (a shared machine's timing is
 * not a test); checked: after the first batch the pool serves every request
 * without the driver, so the decode calls no cudaMalloc or cudaFree of its
 * own. */
enum { BESIDE = 48, BUSY_MEMSETS = 40, SPIN_LAUNCHES = 8, SPIN_BLOCKS = 2048 };

/* netc_spin(cycles): each thread waits until its SM's clock has moved on by cycles. */
static const char SPIN_PTX[] = ".version 7.0\n.target sm_75\n.address_size 64\n"
                               ".visible .entry netc_spin(.param .u64 cycles)\n{\n"
                               " .reg .pred %p<2>;\n .reg .b64 %rd<5>;\n"
                               " ld.param.u64 %rd1, [cycles];\n mov.u64 %rd2, %clock64;\n"
                               "$L_spin:\n mov.u64 %rd3, %clock64;\n sub.s64 %rd4, %rd3, %rd2;\n"
                               " setp.lt.u64 %p1, %rd4, %rd1;\n @%p1 bra $L_spin;\n ret;\n}\n";

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static void run_beside_work(RtCudaCtx *ctx, const Img *im, int pooled, int prio, int spin) {
  const RtCudaApi *api = rt_cuda_ctx_api(ctx);
  CUstream st = rt_cuda_ctx_stream(ctx), other = NULL, mine = NULL;
  int prioritized = 0;
  if (prio && rt_cuda_stream_first(api, &mine, &prioritized, NULL, 0) == RT_CUDA_OK) st = mine;
  char err[1024] = "";
  RtNvjpeg *j = NULL;
  CUdeviceptr dst = 0, junk = 0;
  size_t slice = im->pitch * (size_t)im->h, junk_bytes = (size_t)2 << 30;
  rt_nvjpeg_set_pool(pooled);
  RtCudaStatus s = rt_nvjpeg_new(BESIDE, RT_NVJPEG_AUTO, &j, err, sizeof err);
  rt_nvjpeg_set_pool(1);
  if (!s) s = RT_CU(api, MemAlloc, (&dst, slice * BESIDE), "the batch's pictures", err, sizeof err);
  if (!s) s = RT_CU(api, MemAlloc, (&junk, junk_bytes), "the other work's buffer", err, sizeof err);
  if (!s) s = RT_CU(api, StreamCreate, (&other, CU_STREAM_NON_BLOCKING), "the other work's stream", err, sizeof err);
  RtCudaModule *mod = NULL;
  CUfunction fn = NULL;
  if (!s && spin) s = rt_cuda_module_init(&mod, ctx, SPIN_PTX, "the spinning kernel", err, sizeof err);
  if (!s && spin) s = rt_cuda_module_function(mod, "netc_spin", &fn, err, sizeof err);
  unsigned long long cycles = 4000000ULL; /* about 2 ms at 2 GHz: two waves of blocks a launch on an H100 */
  void *params[] = {&cycles};
  CHECK(!s, "beside other work: %s", err);
  const uint8_t *data[BESIDE];
  size_t len[BESIDE], pitch[BESIDE];
  uint8_t *to[BESIDE], failed[BESIDE];
  for (int k = 0; k < BESIDE; k++)
    data[k] = im->jpg, len[k] = im->len, pitch[k] = im->pitch, to[k] = (uint8_t *)(uintptr_t)(dst + slice * k);
  double idle = 1e30, beside = 0, busy = 0, call = 0; /* call: the host's time in rt_nvjpeg_decode beside the work */
  RtNvjpegPoolStats before = {0};
  for (int round = 0; !s && round < 4; round++) { /* 0: warm-up; 1, 2: idle; 3: beside the other work */
    if (round == 1) before = rt_nvjpeg_pool_stats();
    double t0 = now_ms();
    for (int m = 0; round == 3 && !spin && m < BUSY_MEMSETS && !s; m++)
      s = RT_CU(api, MemsetD8Async, (junk, (unsigned char)m, junk_bytes, other), "the other work", err, sizeof err);
    for (int m = 0; round == 3 && spin && m < SPIN_LAUNCHES && !s; m++)
      s = RT_CU(api, LaunchKernel, (fn, SPIN_BLOCKS, 1, 1, 256, 1, 1, 0, other, params, NULL), "the spinning kernel",
                err, sizeof err);
    double t1 = now_ms();
    if (!s) s = rt_nvjpeg_decode(j, BESIDE, data, len, to, pitch, st, failed, err, sizeof err);
    double tc = now_ms();
    if (!s) s = RT_CU(api, StreamSynchronize, (st), "after the decode", err, sizeof err);
    double t2 = now_ms();
    if (!s) s = RT_CU(api, StreamSynchronize, (other), "after the other work", err, sizeof err);
    double t3 = now_ms();
    if (round == 1 || round == 2) idle = t2 - t1 < idle ? t2 - t1 : idle;
    if (round == 3) beside = t2 - t1, busy = t3 - t0, call = tc - t1;
  }
  CHECK(!s, "beside other work: %s", err);
  RtNvjpegPoolStats after = rt_nvjpeg_pool_stats();
  if (!s) {
    printf("%s allocators%s: %d images of %dx%d decoded in %.1f ms on an idle device, %.1f ms beside %.1f ms of "
           "%s (%.1f ms of it in the decode call)%s\n",
           pooled ? "pooled" : "nvJPEG's",
           !mine         ? ""
           : prioritized ? ", stream of the greatest priority"
                         : ", a stream of its own (no priorities)",
           BESIDE, im->w, im->h, idle, beside, busy, spin ? "kernels filling the SMs" : "memsets", call,
           beside > 0.8 * busy && beside > 2 * idle ? ": held until the other work ended" : "");
    if (pooled)
      CHECK(after.allocations == before.allocations && after.requests >= before.requests,
            "the pool called the driver %lld times after the first batch (of %lld requests)",
            (long long)(after.allocations - before.allocations), (long long)(after.requests - before.requests));
  }
  if (other) api->StreamDestroy(other);
  if (mine) api->StreamDestroy(mine);
  rt_cuda_module_free(mod);
  if (junk) api->MemFree(junk);
  if (dst) api->MemFree(dst);
  rt_nvjpeg_free(j);
}

static void sample_nvml(void) {
  RtNvml *n = NULL;
  char why[512] = "";
  if (rt_nvml_open(NULL, &n, why, sizeof why)) {
    printf("NVML: not available (%s)\n", why);
    return;
  }
  RtNvmlSample s;
  int rc = rt_nvml_sample(n, &s);
  printf("NVML: %s: power %.1f W, SM clock %d MHz, %d C, ECC %s, %lld corrected, %lld uncorrected\n",
         rc ? "nothing read" : "sampled", s.power_w, s.sm_clock_mhz, s.temp_c, s.have_ecc ? "on" : "unknown/off",
         s.ecc_corrected, s.ecc_uncorrected);
  CHECK(rc == 0, "NVML opened a device but read nothing from it");
  rt_nvml_close(n);
}

int main(void) {
  char err[1024] = "";
  Img img[NIMG];
  make_images(img);
  int ok = reference(img) == 0;

  const RtCudaApi *api = NULL;
  RtCudaCtx *ctx = NULL;
  RtCudaStatus s = rt_cuda_api(&api, err, sizeof err);
  int count = 0;
  int skip = s == RT_CUDA_ENODRIVER || s == RT_CUDA_ENODEVICE ||
             (s == RT_CUDA_OK && rt_cuda_device_count(&count, err, sizeof err) == RT_CUDA_OK && count == 0);
  if (!skip && s == RT_CUDA_OK) {
    s = rt_cuda_ctx_init(&ctx, 0, err, sizeof err);
    skip = s == RT_CUDA_ENODEVICE;
  }
  if (!skip && s == RT_CUDA_OK) skip = rt_nvjpeg_load(err, sizeof err) == RT_CUDA_ENOLIB;
  if (skip) {
    for (int i = 0; i < NIMG; i++) free(img[i].jpg), rt_image_free(&img[i].ref);
    rt_cuda_ctx_free(ctx);
    return check_skip(count == 0 && !*err ? "the CUDA driver sees no GPU" : err);
  }
  CHECK(s == RT_CUDA_OK, "CUDA: %s", err);
  if (s == RT_CUDA_OK && ok && alloc_buffers(api, img, err, sizeof err) == 0) {
    run_backend(ctx, img, RT_NVJPEG_AUTO);
    run_backend(ctx, img, RT_NVJPEG_GPU_HYBRID);
    run_backend(ctx, img, RT_NVJPEG_HARDWARE);
    run_beside_work(ctx, &img[4], 0, 0, 0);
    run_beside_work(ctx, &img[4], 1, 0, 0);
    run_beside_work(ctx, &img[4], 1, 1, 0);
    run_beside_work(ctx, &img[4], 1, 0, 1);
    run_beside_work(ctx, &img[4], 1, 1, 1);
  } else if (*err) {
    CHECK(0, "%s", err);
  }
  sample_nvml();
  free_buffers(api, img);
  for (int i = 0; i < NIMG; i++) free(img[i].jpg), rt_image_free(&img[i].ref);
  rt_cuda_ctx_free(ctx);
  return check_report();
}
