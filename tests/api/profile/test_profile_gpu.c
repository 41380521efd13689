/* test_profile_gpu.c - net_profile on the GPU: ResNet-20's training step at
 * batch 32 (and its inference pass) profiled; every node with GPU work has
 * rows, convolutions count their FLOPs exactly, the rates stay under the
 * device's peaks, the kernels add up to about the captured step, the
 * model's parameters are untouched, and `netrun profile` prints a table and
 * writes a trace.  Exits 77 without a GPU.
 *
 *   test_profile_gpu SOURCE_DIR CACHE_DIR WORK_DIR */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "net.h"
#include "netrun_profile.h"

static void check_profile(const NetProfile *p, int inference) {
  const char *what = inference ? "inference" : "training";
  CHECK(p->nrows > 20, "%s: %d rows", what, p->nrows);
  CHECK(p->step_ms > 0 && p->kernels_ms > 0, "%s: step %g ms, kernels %g ms", what, p->step_ms, p->kernels_ms);
  /* events around every kernel cost a little; gaps in the replay cost a little: same ballpark */
  CHECK(p->kernels_ms < 3 * p->step_ms && p->kernels_ms > 0.2 * p->step_ms, "%s: kernels %g ms vs step %g ms", what,
        p->kernels_ms, p->step_ms);
  CHECK(p->peak_gbs > 100 && p->peak_tflops > 10, "%s: peaks %g GB/s %g TFLOP/s", what, p->peak_gbs, p->peak_tflops);
  int convs = 0, fwd = 0, wgrad = 0, last = -1, fc = 0;
  for (int i = 0; i < p->nrows; i++) {
    const NetProfRow *r = &p->rows[i];
    CHECK(r->ms > 0 && r->bytes > 0, "%s row %d (%s): ms %g bytes %g", what, i, r->kernel, r->ms, r->bytes);
    CHECK(r->node >= last, "%s: rows out of step order at %d", what, i);
    last = r->node;
    CHECK(r->peak_share < 1.5, "%s: %s at %.0f%% of peak", what, r->kernel, 100 * r->peak_share);
    if (strncmp(r->kernel, "cudnn_conv_", 11) == 0 && r->kind == NET_PROF_LINEAR) {
      fc++; /* the classifier on cuDNN, as a 1x1 convolution */
      CHECK(r->flops > 0 && strncmp(r->layer, "fc", 2) == 0, "%s: linear %s has flops %g, layer '%s'", what, r->kernel,
            r->flops, r->layer);
    } else if (strncmp(r->kernel, "cudnn_conv_", 11) == 0) {
      convs++;
      fwd += r->kind == NET_PROF_CONV_FWD;
      wgrad += r->kind == NET_PROF_CONV_WGRAD;
      CHECK(r->flops > 0 && *r->layer, "%s: conv %s has flops %g, layer '%s'", what, r->kernel, r->flops, r->layer);
    }
  }
  /* ResNet-20: 19 3x3 convolutions + 2 downsampling 1x1 ones */
  CHECK(fwd == 21, "%s: %d forward convolutions", what, fwd);
  CHECK(inference ? convs == 21 : convs >= 21 + 21 + 20, "%s: %d convolutions", what, convs);
  CHECK(!inference || wgrad == 0, "inference has %d wgrads", wgrad);
  CHECK(fc == (inference ? 1 : 3), "%s: %d linear rows on cuDNN", what, fc);
  /* the stem: 2 * 32 * 32*32 * 16 * C * 3*3, its 3 input channels padded to 4 by the layout pass */
  const NetProfRow *stem = NULL;
  for (int i = 0; i < p->nrows && !stem; i++)
    if (p->rows[i].kind == NET_PROF_CONV_FWD) stem = &p->rows[i];
  CHECK(stem && stem->flops == 2.0 * 32 * 32 * 32 * 16 * 4 * 9, "stem flops %g (%s)", stem ? stem->flops : 0,
        stem ? stem->kernel : "none");
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: test_profile_gpu SOURCE_DIR CACHE_DIR WORK_DIR\n");
    return 2;
  }
  char model[4096], trace[4096];
  snprintf(model, sizeof model, "%s/models/resnet20.net", argv[1]);
  mkdir(argv[3], 0755);
  NetLoadOpts lo = {.device = "gpu", .batch = 32, .seed = 1, .cache_dir = argv[2]};
  NetModel *m = NULL;
  NetStatus s = net_load(model, &lo, &m);
  if (s == NET_ERR_NO_GPU) {
    char why[600];
    snprintf(why, sizeof why, "no GPU (%s)", net_last_error());
    return check_skip(why);
  }
  CHECK(s == NET_OK, "load: %s", net_last_error());
  if (!m) return check_report();

  char wpath[4096], wpath2[4096];
  snprintf(wpath, sizeof wpath, "%s/before.safetensors", argv[3]);
  snprintf(wpath2, sizeof wpath2, "%s/after.safetensors", argv[3]);
  CHECK(net_weights_save(m, wpath) == NET_OK, "save: %s", net_last_error());

  NetProfile p;
  NetProfileOpts o = {.reps = 5};
  s = net_profile(m, &o, &p);
  CHECK(s == NET_OK, "profile: %s", net_last_error());
  if (!s) {
    check_profile(&p, 0);
    snprintf(trace, sizeof trace, "%s/resnet20.json", argv[3]);
    CHECK(net_profile_trace(&p, trace) == NET_OK, "trace: %s", net_last_error());
    netrun_profile_print(stdout, &p, NETRUN_BY_KERNEL, 12);
  }
  net_profile_free(&p);

  /* the profiled steps trained a copy: the model's weights are as before */
  CHECK(net_weights_save(m, wpath2) == NET_OK, "save: %s", net_last_error());
  FILE *a = fopen(wpath, "rb"), *b = fopen(wpath2, "rb");
  int same = a && b;
  for (int ca = 0, cb = 0; same && ca != EOF;) {
    ca = fgetc(a), cb = fgetc(b);
    same = ca == cb;
  }
  if (a) fclose(a);
  if (b) fclose(b);
  CHECK(same, "profiling changed the model's weights");

  o.inference = 1;
  s = net_profile(m, &o, &p);
  CHECK(s == NET_OK, "inference profile: %s", net_last_error());
  if (!s) check_profile(&p, 1);
  net_profile_free(&p);
  net_free(m);

  char a0[] = "profile", batch[] = "--batch=32", by[] = "--by=layer", top[] = "--top=8", reps[] = "--reps=3",
       cache[4200], tr[4200];
  snprintf(cache, sizeof cache, "--cache=%s", argv[2]);
  snprintf(tr, sizeof tr, "--trace=%s/cli.json", argv[3]);
  char *av[] = {a0, model, batch, by, top, reps, cache, tr, NULL};
  CHECK(netrun_profile_main(8, av) == 0, "netrun profile failed");
  snprintf(trace, sizeof trace, "%s/cli.json", argv[3]);
  struct stat st;
  CHECK(stat(trace, &st) == 0 && st.st_size > 1000, "netrun profile wrote no trace %s", trace);
  return check_report();
}
