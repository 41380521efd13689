/* test_api_gpu.c - the API on the GPU: one net_step of smallcnn on the GPU
 * equals the same step on the CPU executor (loss, logits, then inference
 * after the update) within f16 tolerance, net_step_save with kept
 * gradients, and `netrun bench models/resnet50.net --batch 256` printing
 * images/s.  Exits 77 without a GPU.
 * Usage: test_api_gpu SOURCE_DIR NETRUN KERNEL_CACHE */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net.h"

enum { B = 32, S = 784, C = 10 };

static double rel_diff(const float *got, const float *want, int64_t n) {
  double worst = 0, scale = 1e-6;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
  for (int64_t i = 0; i < n; i++) worst = fmax(worst, isnan(got[i]) ? INFINITY : fabs(got[i] - want[i]));
  return worst / scale;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: test_api_gpu SOURCE_DIR NETRUN KERNEL_CACHE\n");
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/models/smallcnn.net", argv[1]);
  NetModel *g = NULL, *c = NULL;
  NetLoadOpts og = {.device = "gpu", .batch = B, .seed = 5, .cache_dir = argv[3], .keep_grads = 1, .precision = "fp32"};
  NetStatus s = net_load(path, &og, &g);
  if (s == NET_ERR_NO_GPU) {
    CHECK(strncmp(net_last_error(), "no GPU: ", 8) == 0, "message: %s", net_last_error());
    printf("skipped: %s\n", net_last_error());
    return 77;
  }
  CHECK(s == NET_OK, "gpu load: %s", net_last_error());
  NetLoadOpts oc = {.device = "cpu", .batch = B, .seed = 5, .precision = "fp32"};
  CHECK(net_load(path, &oc, &c) == NET_OK, "cpu load: %s", net_last_error());
  if (!g || !c) return check_report();
  CHECK(strcmp(net_device(g), "gpu") == 0, "device %s", net_device(g));
  static float img[B * S], lg[B * C], lc[B * C];
  static uint8_t u8[B * S];
  int64_t lab[B];
  unsigned r = 11;
  for (int i = 0; i < B * S; i++) u8[i] = (uint8_t)((r = r * 1103515245u + 12345u) >> 20);
  for (int i = 0; i < B; i++) lab[i] = i % C;
  NetBatch b = {.n = B, .images_u8 = u8, .mean = 0.286f, .std = 0.353f, .labels = lab};
  NetStepOut og_out = {.logits = lg}, oc_out = {.logits = lc};
  for (int step = 0; step < 3; step++) {
    CHECK(net_step(g, &b, &og_out) == NET_OK, "gpu step: %s", net_last_error());
    CHECK(net_step(c, &b, &oc_out) == NET_OK, "cpu step: %s", net_last_error());
    printf("step %d: loss gpu %.6f cpu %.6f, logits relative difference %.2e\n", step, og_out.loss, oc_out.loss,
           rel_diff(lg, lc, B * C));
    CHECK_CLOSE(og_out.loss, oc_out.loss, 2e-2, "loss");
    CHECK(rel_diff(lg, lc, B * C) < 3e-2, "logits differ by %.3g", rel_diff(lg, lc, B * C));
  }
  for (int i = 0; i < B * S; i++) img[i] = (u8[i] / 255.0f - 0.286f) / 0.353f;
  CHECK(net_infer(g, img, B, lg) == NET_OK, "gpu infer: %s", net_last_error());
  CHECK(net_infer(c, img, B, lc) == NET_OK, "cpu infer: %s", net_last_error());
  printf("inference after 3 steps: logits relative difference %.2e\n", rel_diff(lg, lc, B * C));
  CHECK(rel_diff(lg, lc, B * C) < 5e-2, "inference logits differ by %.3g", rel_diff(lg, lc, B * C));
  CHECK(net_step_save(g, "/tmp/netc_api_gpu_step.safetensors") == NET_OK, "step_save: %s", net_last_error());
  net_free(g);
  net_free(c);

  /* the default precision, then bf16 when the default's graph has an op without a GPU kernel */
  static const char *const PRECISION[] = {"", " --precision bf16"};
  int ok = 0;
  for (int k = 0; k < 2 && !ok; k++) {
    char cmd[8192], line[2048];
    snprintf(cmd, sizeof cmd, "%s bench %s/models/resnet50.net --batch 256 --steps 20 --cache %s%s 2>&1", argv[2],
             argv[1], argv[3], PRECISION[k]);
    FILE *p = popen(cmd, "r");
    int seen = 0, nokernel = 0;
    while (p && fgets(line, sizeof line, p)) {
      fputs(line, stdout);
      seen |= strstr(line, "images/s") != NULL;
      nokernel |= strstr(line, "has no GPU kernel yet") != NULL;
    }
    int rc = p ? pclose(p) : -1;
    ok = rc == 0 && seen;
    if (!ok && !nokernel) break;
  }
  CHECK(ok, "netrun bench resnet50 --batch 256 printed no images/s");
  return check_report();
}
