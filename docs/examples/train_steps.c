/* train_steps.c - the smallest program on netc's C API: load a network, run
 * two training steps on the CPU on synthetic images, print the losses.
 *
 *   cc train_steps.c $(pkg-config --cflags --libs netc) -o train_steps
 *   ./train_steps models/smallcnn.net
 *
 * Exit status 0 when both steps ran and their losses are finite.  See
 * docs/install.md for linking (pkg-config, find_package) and net.h for the
 * API. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <netc/net.h>

/* n images of `sample` floats in [-1, 1) and n labels below `classes`: a
 * fixed batch from a seeded generator, enough to see a step run. */
static void fill_batch(float *images, int64_t *labels, int64_t n, int64_t sample, int64_t classes) {
  unsigned seed = 1;
  for (int64_t i = 0; i < n * sample; i++) {
    seed = seed * 1103515245u + 12345u;
    images[i] = (float)(seed >> 16 & 255) / 128 - 1;
  }
  for (int64_t i = 0; i < n; i++) labels[i] = i % classes;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.net\n", argv[0]);
    return 2;
  }
  NetModel *m = NULL;
  NetLoadOpts opts = {.device = "cpu", .batch = 8, .seed = 1};
  if (net_load(argv[1], &opts, &m) != NET_OK) {
    fprintf(stderr, "%s\n", net_last_error());
    return 1;
  }

  /* one batch of n images (NCHW floats, already normalized) and labels */
  int64_t n = net_batch(m), sample = net_image_numel(m, NULL), classes = net_classes(m);
  float *images = malloc((size_t)(n * sample) * sizeof *images);
  int64_t *labels = malloc((size_t)n * sizeof *labels);
  int ok = images && labels;
  if (ok) fill_batch(images, labels, n, sample, classes);

  NetBatch batch = {.n = n, .images = images, .labels = labels};
  for (int step = 1; ok && step <= 2; step++) {
    NetStepOut out = {0}; /* no logits wanted */
    if (net_step(m, &batch, &out) != NET_OK) {
      fprintf(stderr, "step %d: %s\n", step, net_last_error());
      ok = 0;
    } else {
      printf("step %d on the %s: loss %.4f\n", step, net_device(m), out.loss);
      ok = isfinite(out.loss);
    }
  }
  free(images);
  free(labels);
  net_free(m);
  return ok ? 0 : 1;
}
