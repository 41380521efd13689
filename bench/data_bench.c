/* data_bench.c - images/s of the data loader (runtime/data) on a folder
 * of JPEGs, for 1, 2, 4, ... threads up to every processor: the CPU decode
 * and transform rate, per thread, that sizes the input pipeline
 * (docs/data.md).  Each thread count runs whole epochs for at least
 * --seconds after one warm-up epoch (the files are then in the page cache).
 *
 *   data_bench --make DIR COUNT W H    writes COUNT photo-like JPEGs (4:2:0,
 *                                      quality 90) into DIR/c0 .. DIR/c9
 *   data_bench DIR [--size 224] [--eval] [--augment rrc] [--defer]
 *                  [--threads N] [--images N] [--batch 64] [--seconds 3]
 *
 * --defer measures the RT_LOADER_DEFER mode (header parse and window; the
 * decode left to the GPU), --eval the evaluation transform. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jpegtest.h"
#include "rt_augment.h"
#include "rt_folder.h"
#include "rt_loader.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Smooth shapes and a little noise: about a photo's entropy. */
static int make(const char *dir, int count, int w, int h) {
  uint8_t *px = malloc((size_t)w * (size_t)h * 3);
  if (!px) return 1;
  mkdir(dir, 0755);
  uint64_t s = 1;
  for (int i = 0; i < count; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/c%d", dir, i % 10);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/c%d/%06d.jpg", dir, i % 10, i);
    double fx = 0.01 + 0.003 * (i % 7), fy = 0.013 + 0.002 * (i % 5);
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++)
        for (int c = 0; c < 3; c++) {
          s = s * 6364136223846793005ull + 1442695040888963407ull;
          double v = 128 + 90 * sin(fx * x * (c + 1) + fy * y) * cos(fy * y * 0.7 + c) + (double)(s >> 59);
          px[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    if (jt_write_as(path, px, w, h, 3, 90, 1, 0, 0)) {
      fprintf(stderr, "data_bench: cannot write %s\n", path);
      free(px);
      return 1;
    }
  }
  free(px);
  printf("wrote %d %dx%d JPEGs into %s\n", count, w, h, dir);
  return 0;
}

/* Images per second of `workers` threads, whole epochs for >= seconds. */
static double rate(RtLoaderConfig c, int workers, double seconds, int64_t *images) {
  c.workers = workers;
  RtLoader *l = NULL;
  char err[1024];
  if (rt_loader_new(&c, &l, err, sizeof err) != RT_LOADER_OK) {
    fprintf(stderr, "data_bench: %s\n", err);
    return -1;
  }
  int64_t n = 0;
  double t0 = 0;
  /* epoch 0 warms up; epochs from 1 are timed */
  for (int e = 0; e < 2 || now() - t0 < seconds; e++) {
    if (e == 1) t0 = now();
    rt_loader_start(l, e);
    RtLoaderBatch b;
    int got;
    while ((got = rt_loader_next(l, &b, err, sizeof err)) == 1)
      if (e > 0) n += b.n;
    if (got < 0) {
      fprintf(stderr, "data_bench: %s\n", err);
      rt_loader_free(l);
      return -1;
    }
  }
  double dt = now() - t0;
  rt_loader_free(l);
  *images = n;
  return (double)n / dt;
}

int main(int argc, char **argv) {
  if (argc == 6 && !strcmp(argv[1], "--make")) return make(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: data_bench DIR [--size N] [--eval] [--augment KIND] [--defer] [--threads N] "
                    "[--images N] [--batch N] [--seconds S]\n"
                    "       data_bench --make DIR COUNT W H\n");
    return 2;
  }
  int size = 224, train = 1, defer = 0;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int maxt = online < 1 ? 1 : (int)online;
  int64_t limit = 0, batch = 64;
  double seconds = 3;
  RtAugKind aug = RT_AUG_AUTO;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--eval"))
      train = 0;
    else if (!strcmp(a, "--defer"))
      defer = 1;
    else if (v && !strcmp(a, "--size"))
      size = atoi(v), i++;
    else if (v && !strcmp(a, "--threads"))
      maxt = atoi(v), i++;
    else if (v && !strcmp(a, "--images"))
      limit = atoll(v), i++;
    else if (v && !strcmp(a, "--batch"))
      batch = atoll(v), i++;
    else if (v && !strcmp(a, "--seconds"))
      seconds = atof(v), i++;
    else if (v && !strcmp(a, "--augment") && !rt_augment_parse(v, &aug))
      i++;
    else {
      fprintf(stderr, "data_bench: unknown or incomplete option '%s'\n", a);
      return 2;
    }
  }
  RtFolder set;
  char err[1024];
  if (rt_folder_scan(argv[1], 0, &set, err, sizeof err) != RT_FOLDER_OK) {
    fprintf(stderr, "data_bench: %s\n", err);
    return 1;
  }
  int64_t n = limit && limit < set.n ? limit : set.n;
  if (batch > n) batch = n;
  RtLoaderConfig c = {.set = &set,
                      .limit = limit,
                      .batch = batch,
                      .H = size,
                      .W = size,
                      .train = train,
                      .augment = aug,
                      .seed = 1,
                      .decode = defer ? RT_LOADER_DEFER : RT_LOADER_DECODE};
  printf("%lld images, %dx%d, %s, %s, %ld processors online\n", (long long)n, size, size,
         train ? rt_augment_name(rt_augment_resolve(aug, size, size)) : "evaluation",
         defer ? "deferred (header + window)" : "decoded", online);
  printf("threads   images/s   per thread\n");
  int status = 0;
  for (int t = 1; t <= maxt; t = t * 2 > maxt && t < maxt ? maxt : t * 2) {
    int64_t seen = 0;
    double r = rate(c, t, seconds, &seen);
    if (r < 0) {
      status = 1;
      break;
    }
    printf("%7d %10.0f %12.0f\n", t, r, r / t);
    fflush(stdout);
  }
  rt_folder_free(&set);
  return status;
}
