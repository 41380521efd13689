/* bench_gpu_resnet50.c - images per second of ResNet-50 on the GPU executor.
 *
 * For training at batch 64, 128 and 256 and inference at batch 256 (fp16,
 * the whole pipeline): seeded parameters and inputs, the step captured as a
 * CUDA graph, 3 warm-up replays, then 20 replays timed with events
 * (rt_gpu_time).  Prints one line per configuration and a table.  Not a
 * pass/fail test: it exits 0 when every configuration ran, 1 otherwise, 77
 * without a GPU.  `bench_gpu_resnet50 --precompile ROOT CACHE` compiles the
 * kernels of every configuration for an H200 into CACHE, without a GPU.
 * This is what `netrun bench` will call. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gexec.h"

typedef struct Bench {
  int64_t batch;
  int inference;
} Bench;

static const Bench BENCHES[] = {{64, 0}, {128, 0}, {256, 0}, {256, 1}};
enum { NBENCH = sizeof BENCHES / sizeof BENCHES[0], STEPS = 20, WARMUP = 3 };

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* One configuration; writes its table line.  0, or -1 after printing why. */
static int bench(const char *root, const char *cache, const Bench *b, char *line, size_t len) {
  const char *mode = b->inference ? "inference" : "training";
  snprintf(line, len, "resnet50 %-9s fp16 batch %3lld  FAILED", mode, (long long)b->batch);
  Arena arena;
  arena_init(&arena);
  double t0 = now_s();
  IrGraph *g = gexec_compile(&arena, root, "models/resnet50.net", b->batch, b->inference, IR_DT_F16);
  RtGpu *x = NULL;
  void **vals = NULL;
  char err[8192] = "";
  int rc = -1;
  RtGpuOpts o = {.device = 0, .cache_dir = cache};
  if (!g) goto done;
  if (rt_gpu_new(g, b->batch, &o, &x, err, sizeof err)) {
    fprintf(stderr, "resnet50 %s batch %lld: %s\n", mode, (long long)b->batch, err);
    goto done;
  }
  double t_new = now_s() - t0;
  if (!(vals = gexec_values(g, b->batch, 1, 1024.0f)) || gexec_write_all(x, g, vals)) goto done;
  double ms = 0;
  if (rt_gpu_capture(x, err, sizeof err) || rt_gpu_time(x, WARMUP, &ms, err, sizeof err) ||
      rt_gpu_time(x, STEPS, &ms, err, sizeof err)) {
    fprintf(stderr, "resnet50 %s batch %lld: %s\n", mode, (long long)b->batch, err);
    goto done;
  }
  double step = ms / STEPS;
  snprintf(line, len, "resnet50 %-9s fp16 batch %3lld  %8.3f ms/step  %8.0f images/s  %5.1f GiB  setup %.1f s%s", mode,
           (long long)b->batch, step, b->batch * 1000.0 / step, rt_gpu_device_bytes(x) / 1073741824.0, t_new,
           rt_gpu_cache_hit(x) ? " (cubin cached)" : "");
  printf("%s\n", line);
  fflush(stdout);
  rc = 0;
done:
  if (vals) gexec_values_free(g, vals);
  rt_gpu_free(x);
  arena_free(&arena);
  return rc;
}

static int precompile(const char *root, const char *cache) {
  CgDevice d = gexec_h200();
  int bad = 0;
  for (int i = 0; i < NBENCH; i++) {
    Arena arena;
    arena_init(&arena);
    IrGraph *g = gexec_compile(&arena, root, "models/resnet50.net", BENCHES[i].batch, BENCHES[i].inference, IR_DT_F16);
    char err[8192] = "";
    if (!g || rt_gpu_precompile(g, BENCHES[i].batch, &d, cache, err, sizeof err)) {
      fprintf(stderr, "resnet50 batch %lld: %s\n", (long long)BENCHES[i].batch, err);
      bad = 1;
    }
    arena_free(&arena);
  }
  return bad;
}

int main(int argc, char **argv) {
  int pre = argc > 1 && strcmp(argv[1], "--precompile") == 0;
  if (argc < 2 + pre) {
    fprintf(stderr, "usage: bench_gpu_resnet50 [--precompile] SOURCE_DIR [CACHE_DIR]\n");
    return 2;
  }
  const char *root = argv[1 + pre], *cache = argc > 2 + pre ? argv[2 + pre] : NULL;
  if (pre) return precompile(root, cache);
  if (!gexec_have_gpu()) return 77;
  char lines[NBENCH][256];
  int bad = 0;
  for (int i = 0; i < NBENCH; i++) bad |= bench(root, cache, &BENCHES[i], lines[i], sizeof lines[i]) != 0;
  printf("\n");
  for (int i = 0; i < NBENCH; i++) printf("%s\n", lines[i]);
  return bad;
}
