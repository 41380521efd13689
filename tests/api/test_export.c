/* test_export.c - net_weights_export (runtime/api/net.h): a PyTorch
 * state_dict with exactly torchvision's keys.  ResNet-20 trained two steps:
 * the export drops the momentum buffers and the loss scale that
 * net_weights_save keeps, adds `<bn>.num_batches_tracked` (I64 []) beside
 * every running mean, and loads back (also into an inference-only model)
 * to the same bytes.  ResNet-50 and ResNeXt-50: the keys, dtypes and
 * shapes are those of tests/netc/torchvision/NAME.names (torchvision's own
 * state_dict), no more, no less.  net_checkpoint_info reads a
 * checkpoint's position without a model.  Usage: test_export SOURCE_DIR
 * WORKDIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "net.h"
#include "rt_safetensors.h"

static char root[2048], work[2048];

static const char *at(const char *dir, const char *rel) {
  static char buf[4][4096];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, rel);
  return buf[k];
}

static NetModel *load_cpu(const char *model, int64_t batch, int inference_only) {
  NetLoadOpts o = {.device = "cpu", .batch = batch, .seed = 7, .inference_only = inference_only};
  NetModel *m = NULL;
  NetStatus s = net_load(at(root, model), &o, &m);
  CHECK(s == NET_OK && m, "net_load %s: %s: %s", model, net_status_name(s), net_last_error());
  return m;
}

static RtStFile *open_st(const char *path) {
  RtStFile *f = NULL;
  char err[RT_ST_ERRMAX];
  CHECK(rt_st_open(path, &f, err, sizeof err) == RT_ST_OK, "%s", err);
  return f;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int is_optimizer(const char *name) {
  return ends_with(name, ".momentum_buffer") || strcmp(name, "loss_scale") == 0 ||
         strcmp(name, "loss_scale_good_steps") == 0;
}

static int same_file(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  int same = fa && fb;
  while (same) {
    int ca = fgetc(fa), cb = fgetc(fb);
    same = ca == cb;
    if (ca == EOF) break;
  }
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return same;
}

/* Every tensor of `full` but the optimizer's is in `exp` with the same
 * bytes; `exp` adds one I64 [] num_batches_tracked = nbt per running mean. */
static void check_against_full(const RtStFile *full, const RtStFile *exp, int64_t nbt) {
  size_t kept = 0, bns = 0, optim = 0;
  for (size_t i = 0; i < rt_st_count(full); i++) {
    const RtStTensor *t = rt_st_tensor(full, i);
    const RtStTensor *e = rt_st_find(exp, t->name);
    if (is_optimizer(t->name)) {
      optim++;
      CHECK(!e, "export carries optimizer state '%s'", t->name);
      continue;
    }
    kept++;
    CHECK(e && e->dtype == RT_ST_F32 && e->nbytes == t->nbytes && memcmp(e->data, t->data, t->nbytes) == 0,
          "'%s' is not the same F32 tensor in the export", t->name);
    if (!ends_with(t->name, ".running_mean")) continue;
    bns++;
    char name[512];
    snprintf(name, sizeof name, "%.*s.num_batches_tracked", (int)(strlen(t->name) - strlen(".running_mean")), t->name);
    const RtStTensor *n = rt_st_find(exp, name);
    int64_t v = -1;
    if (n && n->dtype == RT_ST_I64 && n->ndim == 0 && n->nbytes == 8) memcpy(&v, n->data, 8);
    CHECK(v == nbt, "'%s' missing, not I64 [], or not %lld", name, (long long)nbt);
  }
  CHECK(optim > 0, "the full save of a training model has no optimizer state to drop");
  CHECK(bns == 21, "resnet20 has 21 batch norms (19 convolutions, 2 projections), found %zu", bns);
  CHECK(rt_st_count(exp) == kept + bns, "export has %zu tensors, want %zu", rt_st_count(exp), kept + bns);
}

static void test_resnet20(void) {
  NetModel *m = load_cpu("models/resnet20.net", 4, 0);
  if (!m) return;
  int64_t chw[3], n = net_image_numel(m, chw);
  float *img = calloc((size_t)(4 * n), sizeof *img);
  int64_t lab[4] = {0, 1, 2, 3};
  for (int64_t i = 0; img && i < 4 * n; i++) img[i] = (float)(i % 17) / 8 - 1;
  NetBatch b = {.n = 4, .images = img, .labels = lab};
  NetStepOut out = {0};
  for (int i = 0; i < 2 && img; i++) CHECK(net_step(m, &b, &out) == NET_OK, "step: %s", net_last_error());
  free(img);
  const char *full = at(work, "r20_full.safetensors"), *exp = at(work, "r20_export.safetensors");
  CHECK(net_weights_save(m, full) == NET_OK, "save: %s", net_last_error());
  CHECK(net_weights_export(m, exp, 2) == NET_OK, "export: %s", net_last_error());
  RtStFile *ff = open_st(full), *fe = open_st(exp);
  if (ff && fe) check_against_full(ff, fe, 2);
  rt_st_close(ff);
  rt_st_close(fe);

  /* the export loads back, into a training model (momentum kept) and an
   * inference-only one, and exports again to the same bytes */
  NetModel *t = load_cpu("models/resnet20.net", 4, 0), *i = load_cpu("models/resnet20.net", 1, 1);
  if (t && i) {
    CHECK(net_weights_load(t, exp) == NET_OK, "load into training: %s", net_last_error());
    CHECK(net_weights_load(i, exp) == NET_OK, "load into inference: %s", net_last_error());
    CHECK(net_weights_export(t, at(work, "r20_t.safetensors"), 2) == NET_OK, "%s", net_last_error());
    CHECK(net_weights_export(i, at(work, "r20_i.safetensors"), 2) == NET_OK, "%s", net_last_error());
    CHECK(same_file(exp, at(work, "r20_t.safetensors")), "training model's re-export differs");
    CHECK(same_file(exp, at(work, "r20_i.safetensors")), "inference model's re-export differs");
  }
  net_free(t);
  net_free(i);

  CHECK(net_weights_export(m, exp, -1) == NET_ERR_ARG, "negative batches_tracked accepted");
  CHECK(net_weights_export(NULL, exp, 0) == NET_ERR_ARG && net_weights_export(m, NULL, 0) == NET_ERR_ARG,
        "NULL accepted");

  /* a checkpoint's position without a model; a weights file is at 0 */
  NetTrainState st = {.step = 5,
                      .epoch = 1,
                      .batch_in_epoch = 1,
                      .epochs = 3,
                      .steps_total = 12,
                      .seed = 9,
                      .lr = 0.05,
                      .accum_steps = 2};
  const char *ck = at(work, "r20_ckpt.safetensors");
  CHECK(net_checkpoint_save(m, ck, &st) == NET_OK, "checkpoint: %s", net_last_error());
  NetTrainState got = {0};
  CHECK(net_checkpoint_info(ck, &got) == NET_OK, "info: %s", net_last_error());
  CHECK(got.step == 5 && got.accum_steps == 2 && got.batch == 4 && !got.from_weights &&
            strcmp(got.model_name, "resnet20") == 0,
        "info: step %lld accum %lld batch %lld from_weights %d model '%s'", (long long)got.step,
        (long long)got.accum_steps, (long long)got.batch, got.from_weights, got.model_name);
  memset(&got, 0, sizeof got);
  CHECK(net_checkpoint_info(exp, &got) == NET_OK && got.from_weights && got.step == 0, "info of a weights file");
  CHECK(net_checkpoint_info(at(work, "absent.safetensors"), &got) == NET_ERR_IO, "info of a missing file");
  net_free(m);
}

/* The export of `model` has exactly the tensors of torchvision's
 * state_dict listed in `names` ("name [d0,d1,...]" lines, '#' comments). */
static void test_names(const char *model, const char *names) {
  NetModel *m = load_cpu(model, 1, 1);
  if (!m) return;
  const char *exp = at(work, "names_export.safetensors");
  CHECK(net_weights_export(m, exp, 0) == NET_OK, "%s: export: %s", model, net_last_error());
  net_free(m);
  RtStFile *f = open_st(exp);
  FILE *nf = fopen(at(root, names), "r");
  CHECK(nf != NULL, "cannot read %s", names);
  if (!f || !nf) {
    rt_st_close(f);
    if (nf) fclose(nf);
    return;
  }
  char line[1024];
  size_t listed = 0;
  int bad = 0;
  while (fgets(line, sizeof line, nf)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char name[512], shape[256];
    if (sscanf(line, "%511s %255s", name, shape) != 2) continue;
    listed++;
    const RtStTensor *t = rt_st_find(f, name);
    char have[256] = "[";
    for (int d = 0; t && d < t->ndim; d++)
      snprintf(have + strlen(have), sizeof have - strlen(have), "%s%lld", d ? "," : "", (long long)t->shape[d]);
    strcat(have, "]");
    RtStDtype want = ends_with(name, ".num_batches_tracked") ? RT_ST_I64 : RT_ST_F32;
    if (!t || t->dtype != want || strcmp(have, shape) != 0) {
      if (bad++ < 5)
        fprintf(stderr, "%s: '%s' is %s %s in the export, torchvision has %s %s\n", model, name,
                t ? rt_st_dtype_name(t->dtype) : "missing", t ? have : "", rt_st_dtype_name(want), shape);
    }
  }
  fclose(nf);
  CHECK(bad == 0, "%s: %d tensors differ from %s", model, bad, names);
  CHECK(listed > 300 && rt_st_count(f) == listed, "%s: export has %zu tensors, torchvision %zu", model, rt_st_count(f),
        listed);
  rt_st_close(f);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_export SOURCE_DIR WORKDIR\n");
    return 2;
  }
  snprintf(root, sizeof root, "%s", argv[1]);
  snprintf(work, sizeof work, "%s", argv[2]);
  mkdir(work, 0777);
  test_resnet20();
  test_names("models/resnet50.net", "tests/netc/torchvision/resnet50.names");
  test_names("models/resnext50_32x4d.net", "tests/netc/torchvision/resnext50_32x4d.names");
  return check_report();
}
