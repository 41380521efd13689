/* test_ckpt.c - checkpoints (net_checkpoint_save/load, runtime/net_ckpt.c)
 * on the CPU with models/smallcnn.net: a round trip keeps every parameter,
 * state and position entry; a run of N steps equals N/2 steps, a
 * checkpoint, a fresh model loading it and N/2 more steps, bit for bit;
 * every refusal names the file and leaves the model unchanged; a failed
 * save leaves the previous checkpoint whole and no file behind.
 * Usage: test_ckpt SOURCE_DIR WORKDIR */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "net.h"
#include "rt_safetensors.h"

enum { BATCH = 8, STEPS = 6 };

static char root[2048], work[2048];

static const char *at(const char *dir, const char *rel) {
  static char buf[8][8192];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, rel);
  return buf[k];
}

static NetModel *load(const char *model, int64_t batch, uint64_t seed) {
  NetLoadOpts o = {.device = "cpu", .batch = batch, .seed = seed};
  NetModel *m = NULL;
  NetStatus s = net_load(at(root, model), &o, &m);
  CHECK(s == NET_OK && m, "net_load %s: %s: %s", model, net_status_name(s), net_last_error());
  return m;
}

/* Batch i of the test's deterministic data, and its rate (a decaying schedule). */
static void batch_of(int i, float *img, int64_t *lab, NetBatch *b) {
  uint32_t x = 2654435761u * (uint32_t)(i + 1);
  for (int j = 0; j < BATCH * 784; j++) img[j] = (float)((x = x * 1664525u + 1013904223u) >> 22) / 512.0f - 1.0f;
  for (int j = 0; j < BATCH; j++) lab[j] = (x = x * 1664525u + 1013904223u) >> 28 & 7;
  *b = (NetBatch){.n = BATCH, .images = img, .labels = lab, .lr = 0.05f * (1.0f - (float)i / (2 * STEPS))};
}

/* Runs steps [from, to) of the data on m; their losses go to loss[from..]. */
static int run_steps(NetModel *m, int from, int to, float *loss) {
  static float img[BATCH * 784];
  static int64_t lab[BATCH];
  for (int i = from; i < to; i++) {
    NetBatch b;
    NetStepOut out = {0};
    batch_of(i, img, lab, &b);
    NetStatus s = net_step(m, &b, &out);
    CHECK(s == NET_OK, "step %d: %s", i, net_last_error());
    if (s) return 0;
    if (loss) loss[i] = out.loss;
  }
  return 1;
}

/* The whole file, or NULL. */
static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)n + 1);
  if (p && fread(p, 1, (size_t)n, f) != (size_t)n) free(p), p = NULL;
  fclose(f);
  *len = (size_t)n;
  return p;
}

/* Every tensor of a and b agrees in name, dtype, shape and bytes; returns
 * the number of tensors compared (0 when they differ). */
static size_t same_tensors(const char *a, const char *b, int verbose) {
  RtStFile *fa = NULL, *fb = NULL;
  char err[RT_ST_ERRMAX];
  size_t n = 0;
  if (rt_st_open(a, &fa, err, sizeof err) || rt_st_open(b, &fb, err, sizeof err)) {
    CHECK(0, "%s", err);
  } else if (rt_st_count(fa) == rt_st_count(fb)) {
    n = rt_st_count(fa);
    for (size_t i = 0; i < rt_st_count(fa) && n; i++) {
      const RtStTensor *t = rt_st_tensor(fa, i), *u = rt_st_find(fb, t->name);
      if (!u || u->dtype != t->dtype || u->nbytes != t->nbytes || u->ndim != t->ndim ||
          memcmp(u->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim) || memcmp(u->data, t->data, t->nbytes)) {
        if (verbose) fprintf(stderr, "tensor %s differs between %s and %s\n", t->name, a, b);
        n = 0;
      }
    }
  }
  rt_st_close(fa);
  rt_st_close(fb);
  return n;
}

/* Writes src's tensors and metadata to dst with `key` set to value (NULL: removed). */
static void rewrite_meta(const char *src, const char *dst, const char *key, const char *value) {
  RtStFile *f = NULL;
  char err[RT_ST_ERRMAX];
  if (rt_st_open(src, &f, err, sizeof err)) {
    CHECK(0, "%s", err);
    return;
  }
  RtStWriter *w = rt_st_writer_new();
  for (size_t i = 0; i < rt_st_count(f); i++) {
    const RtStTensor *t = rt_st_tensor(f, i);
    rt_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes, RT_ST_BORROW);
  }
  for (size_t i = 0; i < rt_st_meta_count(f); i++) {
    const char *k, *v;
    rt_st_meta_at(f, i, &k, &v);
    if (strcmp(k, key) != 0) rt_st_writer_set_meta(w, k, v);
  }
  if (value) rt_st_writer_set_meta(w, key, value);
  CHECK(rt_st_writer_write(w, dst) == RT_ST_OK, "rewrite %s: %s", dst, rt_st_writer_error(w));
  rt_st_writer_free(w);
  rt_st_close(f);
}

/* Writes src to dst with element `at` of the F32 tensor `name` set to x. */
static void poison(const char *src, const char *dst, const char *name, int64_t at, float x) {
  RtStFile *f = NULL;
  char err[RT_ST_ERRMAX];
  if (rt_st_open(src, &f, err, sizeof err)) {
    CHECK(0, "%s", err);
    return;
  }
  RtStWriter *w = rt_st_writer_new();
  int found = 0;
  for (size_t i = 0; i < rt_st_count(f); i++) {
    const RtStTensor *t = rt_st_tensor(f, i);
    if (strcmp(t->name, name) != 0 || t->dtype != RT_ST_F32 || at >= t->numel) {
      rt_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes, RT_ST_BORROW);
      continue;
    }
    float *data = malloc(t->nbytes);
    if (!data) continue;
    memcpy(data, t->data, t->nbytes);
    data[at] = x;
    rt_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, data, t->nbytes, RT_ST_COPY);
    free(data);
    found = 1;
  }
  CHECK(found, "%s has no F32 '%s' with an element %lld", src, name, (long long)at);
  for (size_t i = 0; i < rt_st_meta_count(f); i++) {
    const char *k, *v;
    rt_st_meta_at(f, i, &k, &v);
    rt_st_writer_set_meta(w, k, v);
  }
  CHECK(rt_st_writer_write(w, dst) == RT_ST_OK, "poison %s: %s", dst, rt_st_writer_error(w));
  rt_st_writer_free(w);
  rt_st_close(f);
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static const NetTrainState POS = {.step = 3,
                                  .epoch = 1,
                                  .batch_in_epoch = 2,
                                  .epochs = 4,
                                  .steps_total = 40,
                                  .seed = 18446744073709551557ull,
                                  .lr = 0.0421875,
                                  .accum_steps = 3};

static void test_round_trip(void) {
  NetModel *m = load("models/smallcnn.net", BATCH, 7), *m2 = load("models/smallcnn.net", BATCH, 9);
  if (m && m2 && run_steps(m, 0, 3, NULL)) {
    CHECK(net_checkpoint_save(m, at(work, "rt.ckpt"), &POS) == NET_OK, "save: %s", net_last_error());
    CHECK(net_weights_save(m, at(work, "rt_a.safetensors")) == NET_OK, "%s", net_last_error());
    NetTrainState st = {0};
    NetStatus s = net_checkpoint_load(m2, at(work, "rt.ckpt"), &st);
    CHECK(s == NET_OK, "load: %s", net_last_error());
    CHECK(net_weights_save(m2, at(work, "rt_b.safetensors")) == NET_OK, "%s", net_last_error());
    size_t n = same_tensors(at(work, "rt_a.safetensors"), at(work, "rt_b.safetensors"), 1);
    CHECK(n > 20, "parameters, momentum buffers and loss scale must come back identical (%zu tensors)", n);
    CHECK(same_tensors(at(work, "rt_a.safetensors"), at(work, "rt.ckpt"), 1) == n, "the checkpoint holds the weights");
    CHECK(st.step == 3 && st.epoch == 1 && st.batch_in_epoch == 2 && st.epochs == 4 && st.steps_total == 40,
          "position %lld %lld %lld %lld %lld", (long long)st.step, (long long)st.epoch, (long long)st.batch_in_epoch,
          (long long)st.epochs, (long long)st.steps_total);
    CHECK(st.seed == POS.seed && st.lr == POS.lr && st.batch == BATCH && !st.from_weights,
          "seed %llu lr %.17g batch %lld", (unsigned long long)st.seed, st.lr, (long long)st.batch);
    CHECK(st.accum_steps == 3, "accumulation %lld batches per step, saved as 3", (long long)st.accum_steps);
    CHECK(strcmp(st.model_name, "smallcnn") == 0 && strlen(st.model_hash) == 64, "model '%s' hash '%s'", st.model_name,
          st.model_hash);
    RtStFile *f = NULL;
    char err[RT_ST_ERRMAX];
    if (rt_st_open(at(work, "rt.ckpt"), &f, err, sizeof err) == RT_ST_OK) {
      const char *v = rt_st_meta_get(f, "netc.checkpoint"), *fmt = rt_st_meta_get(f, "format");
      CHECK(v && strcmp(v, "1") == 0 && fmt && strcmp(fmt, "pt") == 0, "metadata version %s format %s", v, fmt);
      rt_st_close(f);
    }
    CHECK(count_files(work) == 3, "no temporary file left beside the checkpoint (%d files)", count_files(work));
  }
  net_free(m);
  net_free(m2);
}

/* N steps in one go against N/2, checkpoint, a fresh model, N/2 more. */
static void test_resume_exact(void) {
  float loss_a[STEPS], loss_b[STEPS];
  NetModel *a = load("models/smallcnn.net", BATCH, 7), *b = load("models/smallcnn.net", BATCH, 7);
  NetModel *c = load("models/smallcnn.net", BATCH, 1234);
  if (a && b && c && run_steps(a, 0, STEPS, loss_a) && run_steps(b, 0, STEPS / 2, loss_b)) {
    NetTrainState st = {.step = STEPS / 2,
                        .batch_in_epoch = STEPS / 2,
                        .epochs = 1,
                        .steps_total = STEPS,
                        .seed = 5,
                        .lr = 0.05 * (1.0 - (STEPS / 2 - 1) / (2.0 * STEPS))};
    CHECK(net_checkpoint_save(b, at(work, "half.ckpt"), &st) == NET_OK, "save: %s", net_last_error());
    net_free(b);
    b = NULL;
    NetTrainState got = {0};
    CHECK(net_checkpoint_load(c, at(work, "half.ckpt"), &got) == NET_OK, "load: %s", net_last_error());
    CHECK(got.step == STEPS / 2, "step %lld", (long long)got.step);
    if (run_steps(c, (int)got.step, STEPS, loss_b)) {
      for (int i = 0; i < STEPS; i++)
        CHECK(loss_a[i] == loss_b[i], "loss of step %d: %.9g vs %.9g", i, loss_a[i], loss_b[i]);
      CHECK(net_weights_save(a, at(work, "full.safetensors")) == NET_OK, "%s", net_last_error());
      CHECK(net_weights_save(c, at(work, "resumed.safetensors")) == NET_OK, "%s", net_last_error());
      CHECK(same_tensors(at(work, "full.safetensors"), at(work, "resumed.safetensors"), 1) > 20,
            "resumed weights differ from an uninterrupted run");
      /* the comparison can fail: the checkpoint (step N/2) differs from step N */
      CHECK(same_tensors(at(work, "full.safetensors"), at(work, "half.ckpt"), 0) == 0, "step N/2 equals step N?");
    }
  }
  net_free(a);
  net_free(b);
  net_free(c);
}

/* A load of path into m that must fail with status want and a message
 * naming path and containing `what`, leaving m's weights as ref. */
static void refused(NetModel *m, const char *path, NetStatus want, const char *what, const char *ref) {
  NetTrainState st = {.step = 99};
  NetStatus s = net_checkpoint_load(m, path, &st);
  const char *msg = net_last_error();
  printf("refused: %s\n", msg);
  CHECK(s == want, "%s: got %s want %s (%s)", path, net_status_name(s), net_status_name(want), msg);
  CHECK(strstr(msg, path) && strstr(msg, what), "message for %s lacks the file or '%s': %s", path, what, msg);
  CHECK(st.step == 99, "a refused load must leave the state alone");
  CHECK(net_weights_save(m, at(work, "after.safetensors")) == NET_OK, "%s", net_last_error());
  CHECK(same_tensors(ref, at(work, "after.safetensors"), 1) > 0, "a refused load (%s) changed the model", what);
}

static void test_refusals(void) {
  NetModel *m = load("models/smallcnn.net", BATCH, 7), *other = load("models/mlp.net", BATCH, 7);
  NetModel *m4 = load("models/smallcnn.net", 4, 7);
  if (!m || !other || !m4) goto done;
  char ck[4096], ref[4096];
  snprintf(ck, sizeof ck, "%s", at(work, "good.ckpt"));
  snprintf(ref, sizeof ref, "%s", at(work, "ref.safetensors"));
  CHECK(net_checkpoint_save(m, ck, &POS) == NET_OK, "save: %s", net_last_error());
  run_steps(m, 0, 1, NULL); /* m now differs from the checkpoint: a load that goes through shows */
  CHECK(net_weights_save(m, ref) == NET_OK, "%s", net_last_error());

  refused(m, at(work, "no-such.ckpt"), NET_ERR_IO, "", ref);
  FILE *f = fopen(at(work, "text.ckpt"), "w");
  if (f) fputs("step 3\nnot a safetensors file\n", f), fclose(f);
  refused(m, at(work, "text.ckpt"), NET_ERR_IO, "", ref);

  CHECK(net_checkpoint_save(other, at(work, "mlp.ckpt"), &POS) == NET_OK, "save mlp: %s", net_last_error());
  refused(m, at(work, "mlp.ckpt"), NET_ERR_WEIGHTS, "another model: 'mlp'", ref);
  char ref4[4096];
  snprintf(ref4, sizeof ref4, "%s", at(work, "ref4.safetensors"));
  CHECK(net_weights_save(m4, ref4) == NET_OK, "%s", net_last_error());
  refused(m4, ck, NET_ERR_WEIGHTS, "batch 8, this model runs batch 4", ref4);

  rewrite_meta(ck, at(work, "v2.ckpt"), "netc.checkpoint", "2");
  refused(m, at(work, "v2.ckpt"), NET_ERR_WEIGHTS, "format version 2 is newer", ref);
  rewrite_meta(ck, at(work, "nostep.ckpt"), "netc.step", NULL);
  refused(m, at(work, "nostep.ckpt"), NET_ERR_WEIGHTS, "lacks the position entries netc.step", ref);
  rewrite_meta(ck, at(work, "noversion.ckpt"), "netc.checkpoint", NULL);
  refused(m, at(work, "noversion.ckpt"), NET_ERR_WEIGHTS, "format version", ref);
  rewrite_meta(ck, at(work, "badstep.ckpt"), "netc.step", "-3");
  refused(m, at(work, "badstep.ckpt"), NET_ERR_WEIGHTS, "'netc.step' is '-3'", ref);
  rewrite_meta(ck, at(work, "badlr.ckpt"), "netc.lr", "nan");
  refused(m, at(work, "badlr.ckpt"), NET_ERR_WEIGHTS, "'netc.lr' is 'nan'", ref);
  /* non-finite values and negative running variances: the tensor and its first bad element named */
  poison(ck, at(work, "nan.ckpt"), "conv2.weight", 17, NAN);
  refused(m, at(work, "nan.ckpt"), NET_ERR_WEIGHTS, "nan.ckpt: tensor 'conv2.weight': element 17 is NaN", ref);
  poison(ck, at(work, "inf.ckpt"), "fc.bias", 3, -INFINITY);
  refused(m, at(work, "inf.ckpt"), NET_ERR_WEIGHTS, "tensor 'fc.bias': element 3 is -inf", ref);
  poison(ck, at(work, "var.ckpt"), "bn1.running_var", 2, -0.5f);
  refused(m, at(work, "var.ckpt"), NET_ERR_WEIGHTS, "tensor 'bn1.running_var': element 2 is -0.5, a variance below 0",
          ref);
  poison(ck, at(work, "momentum.ckpt"), "conv1.weight.momentum_buffer", 0, NAN);
  refused(m, at(work, "momentum.ckpt"), NET_ERR_WEIGHTS, "'conv1.weight.momentum_buffer': element 0 is NaN", ref);

  /* a plain weights file: refused, unless asked for; then position 0 */
  CHECK(net_weights_save(other, at(work, "mlp.safetensors")) == NET_OK, "%s", net_last_error());
  refused(m, ref, NET_ERR_WEIGHTS, "a weights file, not a checkpoint", ref);
  NetTrainState st = {.step = 5, .allow_weights = 1};
  CHECK(net_checkpoint_load(m4, ref, &st) == NET_OK, "weights as a start: %s", net_last_error());
  CHECK(st.from_weights && st.step == 0 && st.epoch == 0 && st.batch_in_epoch == 0 && st.batch == 4,
        "weights start at position 0 (from_weights %d step %lld)", st.from_weights, (long long)st.step);
  CHECK(net_weights_save(m4, at(work, "m4.safetensors")) == NET_OK, "%s", net_last_error());
  CHECK(same_tensors(ref, at(work, "m4.safetensors"), 1) > 0, "weights loaded with allow_weights differ");
  /* another model's weights stay refused even when weights are allowed */
  st.allow_weights = 1;
  CHECK(net_checkpoint_load(m, at(work, "mlp.safetensors"), &st) == NET_ERR_WEIGHTS, "mlp weights into smallcnn");

  NetTrainState ok = {0};
  CHECK(net_checkpoint_load(m, ck, &ok) == NET_OK && ok.step == 3, "the good checkpoint loads: %s", net_last_error());
  CHECK(net_checkpoint_load(NULL, ck, &ok) == NET_ERR_ARG && net_checkpoint_save(m, NULL, &ok) == NET_ERR_ARG &&
            net_checkpoint_load(m, ck, NULL) == NET_ERR_ARG,
        "NULL arguments");
  NetTrainState neg = POS;
  neg.step = -1;
  CHECK(net_checkpoint_save(m, at(work, "neg.ckpt"), &neg) == NET_ERR_ARG, "a negative step is refused");
  NetTrainState past = POS;
  past.step = past.steps_total + 1;
  CHECK(net_checkpoint_save(m, at(work, "past.ckpt"), &past) == NET_ERR_ARG &&
            strstr(net_last_error(), "outside the plan"),
        "a step past the plan is refused: %s", net_last_error());
  past = POS, past.epoch = past.epochs + 1;
  CHECK(net_checkpoint_save(m, at(work, "past.ckpt"), &past) == NET_ERR_ARG, "an epoch past the plan is refused");
  NetLoadOpts io = {.device = "cpu", .batch = BATCH, .inference_only = 1};
  NetModel *inf = NULL;
  if (net_load(at(root, "models/smallcnn.net"), &io, &inf) == NET_OK) {
    CHECK(net_checkpoint_save(inf, ck, &POS) == NET_ERR_MODEL, "inference-only save");
    CHECK(net_checkpoint_load(inf, ck, &ok) == NET_ERR_MODEL, "inference-only load");
  }
  net_free(inf);
done:
  net_free(m);
  net_free(m4);
  net_free(other);
}

/* Saves that fail leave the previous checkpoint whole and nothing beside it. */
static void test_failed_save(void) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/atomic", work);
  mkdir(dir, 0755);
  NetModel *m = load("models/smallcnn.net", BATCH, 7);
  if (!m) return;
  char ck[4096], before[4096];
  snprintf(ck, sizeof ck, "%s", at(dir, "run.ckpt"));
  snprintf(before, sizeof before, "%s", at(work, "before.ckpt"));
  CHECK(net_checkpoint_save(m, ck, &POS) == NET_OK, "save: %s", net_last_error());
  CHECK(net_checkpoint_save(m, before, &POS) == NET_OK, "save: %s", net_last_error());
  run_steps(m, 0, 1, NULL);
  NetTrainState later = POS;
  later.step = 4;

  NetStatus s = net_checkpoint_save(m, at(work, "missing-dir/run.ckpt"), &later);
  CHECK(s == NET_ERR_IO && strstr(net_last_error(), "missing-dir/run.ckpt"), "missing directory: %s %s",
        net_status_name(s), net_last_error());

  struct stat sb;
  CHECK(net_weights_save(m, at(work, "size.safetensors")) == NET_OK && stat(at(work, "size.safetensors"), &sb) == 0,
        "weights size");
  /* A file size limit (it binds root too) fails the write of the weights
   * (4 KiB), then only the final rewrite (room for the weights, not the
   * position entries). */
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old;
  getrlimit(RLIMIT_FSIZE, &old);
  rlim_t limits[] = {4096, (rlim_t)sb.st_size + 16};
  for (int i = 0; i < 2; i++) {
    struct rlimit lim = {limits[i], old.rlim_max};
    setrlimit(RLIMIT_FSIZE, &lim);
    s = net_checkpoint_save(m, ck, &later);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(s == NET_ERR_IO && strstr(net_last_error(), ck), "save %d under a size limit: %s %s", i, net_status_name(s),
          net_last_error());
    NetTrainState st = {0};
    NetModel *fresh = load("models/smallcnn.net", BATCH, 3);
    CHECK(fresh && net_checkpoint_load(fresh, ck, &st) == NET_OK && st.step == 3,
          "the previous checkpoint must survive a failed save %d: %s", i, net_last_error());
    net_free(fresh);
    size_t la, lb;
    unsigned char *a = slurp(ck, &la), *b = slurp(before, &lb);
    CHECK(a && b && la == lb && memcmp(a, b, la) == 0, "checkpoint bytes changed by failed save %d", i);
    free(a);
    free(b);
    CHECK(count_files(dir) == 1, "failed save %d left %d files in %s", i, count_files(dir), dir);
  }
  /* a read-only directory, where permissions bind (not as root) */
  chmod(dir, 0555);
  FILE *probe = fopen(at(dir, "probe"), "w");
  if (probe) {
    fclose(probe);
    remove(at(dir, "probe"));
    printf("note: read-only directory not checked (permissions do not bind this user)\n");
  } else {
    s = net_checkpoint_save(m, ck, &later);
    CHECK(s == NET_ERR_IO && strstr(net_last_error(), ck), "read-only dir: %s", net_last_error());
    CHECK(count_files(dir) == 1, "read-only dir: %d files", count_files(dir));
  }
  chmod(dir, 0755);
  CHECK(net_checkpoint_save(m, ck, &later) == NET_OK, "save after the failures: %s", net_last_error());
  net_free(m);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_ckpt SOURCE_DIR WORKDIR\n");
    return 2;
  }
  snprintf(root, sizeof root, "%s", argv[1]);
  snprintf(work, sizeof work, "%s", argv[2]);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", work, work);
  if (system(cmd) != 0) return check_skip("cannot make the work directory");
  test_round_trip();
  test_resume_exact();
  test_refusals();
  test_failed_save();
  return check_report();
}
