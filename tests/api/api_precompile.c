/* api_precompile.c - warms the NVRTC kernel cache for the GPU API test on a
 * machine without a GPU: the graphs net_load makes (same compile, same
 * plans) compiled for an H200 into CACHE.
 *
 *   api_precompile ROOT CACHE [MODEL:BATCH:PRECISION[:grads|:infer] ...]
 *
 * With job arguments, those instead: e.g. models/resnet50.net:4:fp32:grads
 * is what `netrun step --precision fp32` on 4 images loads (training graph
 * with kept gradients); :infer makes the inference graph only.  Without, the default jobs:
 * smallcnn in fp32 (training with kept gradients, and inference) at batch
 * 32, as test_api_gpu loads it, and ResNet-50's training step at batch 256
 * (default precision, and bf16), as `netrun bench models/resnet50.net
 * --batch 256 [--precision bf16]` loads it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_model.h"
#include "rt_gpu.h"

typedef struct Job {
  const char *model;
  int64_t batch;
  int train, keep_grads, infer;
  const char *precision;
} Job;

static const Job JOBS[] = {{"models/smallcnn.net", 32, 1, 1, 1, "fp32"},
                           {"models/resnet50.net", 256, 1, 0, 0, NULL},
                           {"models/resnet50.net", 256, 1, 0, 0, "bf16"}};

static int job(const char *root, const char *cache, const Job *j) {
  char path[4096], err[8192] = "";
  snprintf(path, sizeof path, "%s/%s", root, j->model);
  Arena a;
  arena_init(&a);
  NetGraphs g;
  CgDevice dev = {.sm_count = 132, .max_threads_per_block = 1024, .max_shared_per_block = 49152, .cc_major = 9};
  NetLoadOpts lo = {.precision = j->precision, .batch = j->batch, .inference_only = !j->train};
  NetStatus s = net_model_open(path, &a, &lo, &g, err, sizeof err);
  if (!s && g.train && j->keep_grads) s = net_model_keep_grads(g.train, err, sizeof err);
  if (!s && g.train) s = net_model_plan(g.train, j->batch, err, sizeof err);
  if (!s && g.train && rt_gpu_precompile(g.train, j->batch, &dev, cache, err, sizeof err)) s = NET_ERR_DEVICE;
  if (!s && j->infer && rt_gpu_precompile(g.infer, j->batch, &dev, cache, err, sizeof err)) s = NET_ERR_DEVICE;
  net_model_close(&g);
  arena_free(&a);
  if (s)
    fprintf(stderr, "%s batch %lld: %s\n", j->model, (long long)j->batch, err);
  else
    printf("precompiled %s batch %lld %s\n", j->model, (long long)j->batch, j->precision ? j->precision : "");
  return s != NET_OK;
}

/* MODEL:BATCH:PRECISION[:grads|:infer] into j (spec is modified: j points into it). */
static int parse_job(char *spec, Job *j) {
  char *model = strtok(spec, ":"), *batch = strtok(NULL, ":"), *prec = strtok(NULL, ":"), *grads = strtok(NULL, ":");
  if (!model || !batch || !prec || atoll(batch) < 1 || (grads && strcmp(grads, "grads") && strcmp(grads, "infer")))
    return -1;
  int infer = grads && !strcmp(grads, "infer");
  *j = (Job){model, atoll(batch), !infer, grads && !infer, infer, prec};
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: api_precompile SOURCE_DIR CACHE_DIR [MODEL:BATCH:PRECISION[:grads|:infer] ...]\n");
    return 2;
  }
  int bad = 0;
  for (int i = 3; i < argc; i++) {
    Job j;
    if (parse_job(argv[i], &j)) {
      fprintf(stderr, "api_precompile: bad job '%s' (MODEL:BATCH:PRECISION[:grads|:infer])\n", argv[i]);
      return 2;
    }
    bad |= job(argv[1], argv[2], &j);
  }
  for (size_t i = 0; argc == 3 && i < sizeof JOBS / sizeof JOBS[0]; i++) bad |= job(argv[1], argv[2], &JOBS[i]);
  return bad;
}
