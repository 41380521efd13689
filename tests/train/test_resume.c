/* test_resume.c - net_train's checkpoints resume a run exactly.
 *
 * On the CPU, models/mlp.net on synthetic data (shuffled each epoch, a
 * schedule with warm-up, momentum): one run of 3 epochs straight through,
 * and the same run stopped by its step callback in the middle of epoch 2
 * (its final checkpoint written at the stop), then resumed from that
 * checkpoint by a fresh model loaded with another seed.  The two final
 * checkpoints must hold identical parameters and momentum buffers, bit for
 * bit.  Also: resuming with other settings, or a finished run, is refused
 * with a message naming the checkpoint; so are a position that is no place
 * in the run (epoch 100 of 3, a step past its epoch's end, a step count
 * that disagrees with them) and other data (netc.data: another count of
 * training images with the same plan), while a checkpoint from before
 * netc.data existed resumes.
 *
 *   test_resume SOURCE_DIR WORK_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "net.h"
#include "rt_safetensors.h"

enum { STOP_AT = 7 };

static int stop_at(const NetStepInfo *s, void *user) {
  (void)user;
  return s->step == STOP_AT;
}

static int stop_at_4(const NetStepInfo *s, void *user) {
  (void)user;
  return s->step == 4;
}

static NetModel *load(const char *model, uint64_t seed) {
  NetLoadOpts o = {.device = "cpu", .seed = seed, .batch = 32};
  NetModel *m = NULL;
  CHECK(net_load(model, &o, &m) == NET_OK, "net_load %s: %s", model, net_last_error());
  return m;
}

static NetTrainConfig config(const char *checkpoint) {
  NetTrainConfig c = {.data = NET_DATA_SYNTHETIC, .synthetic_n = 96, .epochs = 3, .seed = 5, .checkpoint = checkpoint};
  return c;
}

/* Every tensor of a and b is byte-identical (same names, shapes, bytes). */
static void same_tensors(const char *a, const char *b) {
  char err[512];
  RtStFile *fa = NULL, *fb = NULL;
  CHECK(rt_st_open(a, &fa, err, sizeof err) == RT_ST_OK, "%s", err);
  CHECK(rt_st_open(b, &fb, err, sizeof err) == RT_ST_OK, "%s", err);
  if (!fa || !fb) return;
  CHECK(rt_st_count(fa) == rt_st_count(fb), "%zu vs %zu tensors", rt_st_count(fa), rt_st_count(fb));
  int differ = 0;
  for (size_t i = 0; i < rt_st_count(fa); i++) {
    const RtStTensor *ta = rt_st_tensor(fa, i), *tb = rt_st_find(fb, ta->name);
    if (!tb || tb->nbytes != ta->nbytes || memcmp(ta->data, tb->data, ta->nbytes)) {
      if (differ++ < 5) CHECK(0, "tensor %s differs between the straight and the resumed run", ta->name);
    }
  }
  CHECK(differ == 0, "%d tensors differ", differ);
  rt_st_close(fa);
  rt_st_close(fb);
}

/* src's tensors and metadata into dst, with key's value replaced (value
 * NULL: the entry left out). */
static void rewrite(const char *src, const char *dst, const char *key, const char *value) {
  RtStFile *f = NULL;
  char err[RT_ST_ERRMAX];
  CHECK(rt_st_open(src, &f, err, sizeof err) == RT_ST_OK, "%s", err);
  if (!f) return;
  RtStWriter *w = rt_st_writer_new();
  RtStStatus s = w ? RT_ST_OK : RT_ST_ERR_NOMEM;
  for (size_t i = 0; i < rt_st_count(f) && !s; i++) {
    const RtStTensor *t = rt_st_tensor(f, i);
    s = rt_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes, RT_ST_BORROW);
  }
  for (size_t i = 0; i < rt_st_meta_count(f) && !s; i++) {
    const char *k, *v;
    rt_st_meta_at(f, i, &k, &v);
    if (strcmp(k, key) != 0) s = rt_st_writer_set_meta(w, k, v);
  }
  if (!s && value) s = rt_st_writer_set_meta(w, key, value);
  if (!s) s = rt_st_writer_write(w, dst);
  CHECK(s == RT_ST_OK, "rewrite %s: %s", dst, w ? rt_st_writer_error(w) : "out of memory");
  rt_st_writer_free(w);
  rt_st_close(f);
}

/* Resuming from `stopped` with `key` set to `value` fails with want and a
 * message holding `says`, or (want NET_OK) runs to the end. */
static void resume_edited(const char *model, const char *stopped, const char *edited, const char *key,
                          const char *value, NetStatus want, const char *says) {
  rewrite(stopped, edited, key, value);
  NetModel *m = load(model, 1);
  NetTrainConfig c = config(NULL);
  c.resume = edited;
  NetStatus s = net_train(m, &c);
  CHECK(s == want && (!says || strstr(net_last_error(), says)), "%s = %s: status %d: %s", key, value ? value : "(none)",
        (int)s, s ? net_last_error() : "");
  net_free(m);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_resume SOURCE_DIR WORK_DIR\n");
    return 2;
  }
  char model[4096], straight[4096], stopped[4096];
  snprintf(model, sizeof model, "%s/models/mlp.net", argv[1]);
  mkdir(argv[2], 0755);
  snprintf(straight, sizeof straight, "%s/straight.safetensors", argv[2]);
  snprintf(stopped, sizeof stopped, "%s/stopped.safetensors", argv[2]);

  NetModel *m = load(model, 1);
  NetTrainConfig c = config(straight);
  NetTrainResult r;
  c.result = &r;
  CHECK(net_train(m, &c) == NET_OK, "straight run: %s", net_last_error());
  int64_t total = r.steps;
  CHECK(total == 9, "3 epochs of 96 images at batch 32 are 9 steps, not %lld", (long long)total);
  net_free(m);

  m = load(model, 1);
  c = config(stopped);
  c.on_step = stop_at;
  CHECK(net_train(m, &c) == NET_STOPPED, "the stopped run ends NET_STOPPED: %s", net_last_error());
  net_free(m);

  m = load(model, 99); /* other initial weights: the checkpoint must replace them all */
  c = config(stopped);
  c.resume = stopped;
  c.result = &r;
  CHECK(net_train(m, &c) == NET_OK, "resumed run: %s", net_last_error());
  CHECK(r.steps == total, "the resumed run ends at step %lld, not %lld", (long long)r.steps, (long long)total);
  net_free(m);
  same_tensors(straight, stopped);

  /* a finished run, and other settings, are refused */
  m = load(model, 1);
  c = config(NULL);
  c.resume = stopped;
  CHECK(net_train(m, &c) == NET_ERR_ARG && strstr(net_last_error(), "complete"), "finished run: %s", net_last_error());
  c = config(NULL);
  c.epochs = 4;
  c.resume = straight;
  CHECK(net_train(m, &c) == NET_ERR_ARG && strstr(net_last_error(), "straight.safetensors"), "other plan: %s",
        net_last_error());
  net_free(m);

  /* positions that are no place in the run, and other data; a checkpoint stopped at step 4 of 9
   * (epoch 2, its step 2) */
  char early[4096], edited[4096];
  snprintf(early, sizeof early, "%s/early.safetensors", argv[2]);
  snprintf(edited, sizeof edited, "%s/edited.safetensors", argv[2]);
  m = load(model, 1);
  c = config(early);
  c.on_step = stop_at_4;
  CHECK(net_train(m, &c) == NET_STOPPED, "the early run ends NET_STOPPED: %s", net_last_error());
  net_free(m);
  const char *where = "is not a place in this run of 3 epochs of 3 steps";
  resume_edited(model, early, edited, "netc.epoch", "100", NET_ERR_WEIGHTS, "epoch 100 of 3 is outside its own plan");
  resume_edited(model, early, edited, "netc.epoch", "2", NET_ERR_WEIGHTS, where);
  resume_edited(model, early, edited, "netc.batch_in_epoch", "3", NET_ERR_WEIGHTS, where);
  resume_edited(model, early, edited, "netc.step", "5", NET_ERR_WEIGHTS, where);
  resume_edited(model, early, edited, "netc.step", "10", NET_ERR_WEIGHTS, "outside its own plan");
  resume_edited(model, early, edited, "netc.accum_steps", "9223372036854775807", NET_ERR_WEIGHTS, "not an integer in");
  resume_edited(model, early, edited, "netc.data", "ImageFolder, 1281167 training images in 1000 classes", NET_ERR_ARG,
                "made by a run on other data (ImageFolder, 1281167 training images in 1000 classes); "
                "this run's are synthetic, 96 training images in 10 classes");
  resume_edited(model, early, edited, "netc.data", NULL, NET_OK, NULL); /* written before netc.data */
  /* 100 images: the same 3 steps an epoch, other data */
  m = load(model, 1);
  c = config(NULL);
  c.synthetic_n = 100;
  c.resume = early;
  CHECK(net_train(m, &c) == NET_ERR_ARG && strstr(net_last_error(), "synthetic, 96 training images") &&
            strstr(net_last_error(), "this run's are synthetic, 100 training images"),
        "other data: %s", net_last_error());
  net_free(m);
  return check_report();
}
