/* net_train.c - net_train: the training loop over either executor.
 *
 * The data (synthetic, an IDX folder, or the caller's arrays) are bytes in
 * NCHW order; each epoch shuffles the training set (seeded Fisher-Yates),
 * feeds every full batch normalized as (x/255 - mean)/std with the rate of
 * the train section's schedule (rt_sched) for step t, checks the loss, then
 * evaluates top-1 accuracy with the inference graph (parameters copied by
 * name from the training executor, see net_api.c).  A partial last batch
 * is dropped, as PyTorch's drop_last.  With `steps` the run stops after
 * that many steps, evaluating the epoch it stopped in.
 *
 * Synthetic images are noise whose share of bright pixels grows with the
 * class: (c + 0.5)/classes of them, so the mean brightness -- which a
 * global pooling sees -- tells the classes apart, and a working training
 * loop must lift the accuracy far above chance. */
#include "net_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_idx.h"
#include "rt_sched.h"

static const float FMNIST_MEAN = 0.2860f, FMNIST_STD = 0.3530f;

typedef struct Set {
  const uint8_t *images, *labels;
  int64_t n;
} Set;

typedef struct Data {
  Set train, test;
  RtIdxSet idx_train, idx_test;
  uint8_t *owned; /* synthetic bytes */
} Data;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static NetStatus synthetic(Data *d, int64_t n, int64_t test_n, int64_t sample, int64_t classes, uint64_t seed) {
  int64_t total = n + test_n;
  d->owned = malloc((size_t)(total * (sample + 1)));
  if (!d->owned) return net_fail(NET_ERR_NOMEM, "out of memory for %lld synthetic images", (long long)total);
  uint8_t *img = d->owned, *lab = d->owned + total * sample;
  uint64_t s = seed * 0x2545f4914f6cdd1dull + 7;
  for (int64_t i = 0; i < total; i++) {
    lab[i] = (uint8_t)(mix(&s) % (uint64_t)classes);
    uint64_t bright = (uint64_t)(((double)lab[i] + 0.5) / (double)classes * 65536.0);
    for (int64_t p = 0; p < sample; p++) {
      uint64_t r = mix(&s);
      img[i * sample + p] = (uint8_t)((r & 0xffff) < bright ? 200 + (r >> 16) % 56 : (r >> 16) % 56);
    }
  }
  d->train = (Set){img, lab, n};
  d->test = (Set){img + n * sample, lab + n, test_n};
  return NET_OK;
}

/* DIR/PREFIX-images-idx3-ubyte.gz, else without .gz. */
static NetStatus load_idx(const char *dir, const char *prefix, RtIdxSet *set) {
  char img[4096], lab[4096];
  for (int gz = 1; gz >= 0; gz--) {
    snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte%s", dir, prefix, gz ? ".gz" : "");
    snprintf(lab, sizeof lab, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gz ? ".gz" : "");
    FILE *f = fopen(img, "rb");
    if (!f && gz) continue;
    if (f) fclose(f);
    RtIdxStatus s = rt_idx_load(img, lab, set, net_err_buf(), NET_ERRMAX);
    return s == RT_IDX_OK ? NET_OK : net_failed(s == RT_IDX_ERR_NOMEM ? NET_ERR_NOMEM : NET_ERR_DATA);
  }
  return NET_ERR_DATA;
}

static NetStatus load_data(NetModel *m, const NetTrainConfig *c, Data *d) {
  switch (c->data) {
  case NET_DATA_SYNTHETIC: {
    int64_t n = c->synthetic_n > 0 ? c->synthetic_n : 16 * m->batch;
    return synthetic(d, n, n / 10 > 0 ? n / 10 : 1, m->sample, m->classes, c->seed);
  }
  case NET_DATA_IDX: {
    if (!c->idx_dir) return net_fail(NET_ERR_ARG, "net_train: NET_DATA_IDX without idx_dir");
    NetStatus s = load_idx(c->idx_dir, "train", &d->idx_train);
    if (!s) s = load_idx(c->idx_dir, "t10k", &d->idx_test);
    if (s) return s;
    int64_t sample = (int64_t)d->idx_train.rows * d->idx_train.cols;
    if (sample != m->sample || (int64_t)d->idx_test.rows * d->idx_test.cols != sample)
      return net_fail(NET_ERR_DATA, "%s: images of %dx%d do not fit the model's input of %lld values per image",
                      c->idx_dir, d->idx_train.rows, d->idx_train.cols, (long long)m->sample);
    int64_t n = c->train_limit > 0 && c->train_limit < d->idx_train.n ? c->train_limit : d->idx_train.n;
    int64_t tn = c->test_limit > 0 && c->test_limit < d->idx_test.n ? c->test_limit : d->idx_test.n;
    d->train = (Set){d->idx_train.images, d->idx_train.labels, n};
    d->test = (Set){d->idx_test.images, d->idx_test.labels, tn};
    return NET_OK;
  }
  case NET_DATA_MEMORY:
    if (!c->images || !c->labels) return net_fail(NET_ERR_ARG, "net_train: NET_DATA_MEMORY without images or labels");
    d->train = (Set){c->images, c->labels, c->n};
    if (c->test_images && c->test_labels && c->test_n > 0) d->test = (Set){c->test_images, c->test_labels, c->test_n};
    return NET_OK;
  }
  return net_fail(NET_ERR_ARG, "net_train: unknown data kind %d", (int)c->data);
}

static NetStatus check_labels(const NetModel *m, const Set *s, const char *which) {
  for (int64_t i = 0; i < s->n; i++)
    if (s->labels[i] >= m->classes)
      return net_fail(NET_ERR_DATA, "%s set: label %d of image %lld is not one of the %lld classes", which,
                      s->labels[i], (long long)i, (long long)m->classes);
  return NET_OK;
}

static double window_mean(const double *w, int64_t n) {
  int64_t k = n < 10 ? n : 10;
  double s = 0;
  for (int64_t i = 0; i < k; i++) s += w[i];
  return k ? s / (double)k : 0;
}

static NetStatus run(NetModel *m, const NetTrainConfig *c, Data *d, NetTrainResult *res) {
  NetStatus s = load_data(m, c, d);
  if (s) return s;
  int64_t B = m->batch, S = m->sample;
  if (d->train.n < B)
    return net_fail(NET_ERR_DATA, "training set of %lld images is smaller than one batch of %lld",
                    (long long)d->train.n, (long long)B);
  if ((s = check_labels(m, &d->train, "training")) || (s = check_labels(m, &d->test, "test"))) return s;
  int64_t spe = d->train.n / B;
  int64_t epochs = c->epochs;
  if (!epochs && c->steps) epochs = (c->steps + spe - 1) / spe;
  if (!epochs) {
    const IrAttr *a = ir_train_find(m->gt, "epochs");
    epochs = a && a->kind == IR_ATTR_INT ? a->i[0] : 0;
  }
  if (epochs < 1) return net_fail(NET_ERR_ARG, "no epoch count (give epochs or steps; the train section has none)");
  int64_t total = c->steps > 0 && c->steps < epochs * spe ? c->steps : epochs * spe;
  RtSched sched;
  if (rt_sched_init(&sched, m->gt, spe, epochs, net_err_buf(), NET_ERRMAX)) return net_failed(NET_ERR_MODEL);
  float std = c->std > 0 ? c->std : c->data == NET_DATA_IDX ? FMNIST_STD : 0.5f;
  float mean = c->std > 0 ? c->mean : c->data == NET_DATA_IDX ? FMNIST_MEAN : 0.5f;
  float scale = 1.0f / (255.0f * std), shift = -mean / std, loss_scale = net_train_loss_scale(m->gt);
  int64_t *order = malloc(sizeof(int64_t) * (size_t)d->train.n);
  uint8_t *bytes = malloc((size_t)(B * S));
  if (!order || !bytes) {
    free(order), free(bytes);
    return net_fail(NET_ERR_NOMEM, "out of memory");
  }
  for (int64_t i = 0; i < d->train.n; i++) order[i] = i;
  uint64_t rng = c->seed ^ 0x5f3759df2545f491ull;
  double head[10], tail[10], t_run = 0, t_start = now_s();
  int64_t t = 0, last_ckpt = 0;
  res->test_accuracy = -1;
  for (int64_t e = 0; e < epochs && t < total && !s; e++) {
    NetEpochInfo ep = {.epoch = e, .test_accuracy = -1};
    double t0 = now_s(), sum = 0, ehead[10], etail[10];
    for (int64_t i = d->train.n - 1; i > 0; i--) {
      int64_t j = (int64_t)(mix(&rng) % (uint64_t)(i + 1)), tmp = order[i];
      order[i] = order[j], order[j] = tmp;
    }
    for (int64_t b = 0; b < spe && t < total && !s; b++) {
      for (int64_t i = 0; i < B; i++) {
        int64_t idx = order[b * B + i];
        memcpy(bytes + i * S, d->train.images + idx * S, (size_t)S);
        m->lab[i] = d->train.labels[idx];
      }
      net_put_images(&m->it, m->img, NULL, bytes, B, scale, shift);
      double lr = rt_sched_lr(&sched, t);
      float loss = 0;
      if ((s = net_step_run(m, (float)lr, loss_scale, &loss, NULL))) break;
      if (t < 10) head[t] = loss;
      tail[t % 10] = loss;
      if (ep.steps < 10) ehead[ep.steps] = loss;
      etail[ep.steps % 10] = loss;
      ep.lr_last = lr;
      sum += loss;
      t++, ep.steps++;
      double el = now_s() - t_start;
      if (c->on_step && (t % (c->log_every > 0 ? c->log_every : 1) == 0 || t == total)) {
        NetStepInfo si = {.step = t, .steps_total = total, .epoch = e, .epochs = epochs, .loss = loss, .lr = lr,
                          .images_per_s = (double)(t * B) / (t_run + now_s() - t0), .elapsed_s = el};
        if (c->on_step(&si, c->user)) s = net_fail(NET_STOPPED, "stopped by the caller after step %lld", (long long)t);
      }
      if (!s && c->checkpoint && c->checkpoint_every > 0 && t % c->checkpoint_every == 0) {
        if ((s = net_weights_save(m, c->checkpoint))) break;
        last_ckpt = t;
        if (c->on_checkpoint && c->on_checkpoint(t, c->checkpoint, c->user))
          s = net_fail(NET_STOPPED, "stopped by the caller after checkpoint %lld", (long long)t);
      }
    }
    ep.train_seconds = now_s() - t0;
    t_run += ep.train_seconds;
    res->epochs = e + 1, res->steps = t;
    res->train_seconds = t_run;
    res->images_per_s = t_run > 0 ? (double)(t * B) / t_run : 0;
    res->loss_first = window_mean(head, t);
    double tl[10];
    int64_t k = t < 10 ? t : 10;
    for (int64_t i = 0; i < k; i++) tl[i] = tail[(t - 1 - i) % 10];
    res->loss_last = window_mean(tl, k);
    if (s) break;
    ep.loss_mean = ep.steps ? sum / (double)ep.steps : 0;
    ep.loss_first = window_mean(ehead, ep.steps);
    ep.loss_last = window_mean(etail, ep.steps);
    ep.images_per_s = ep.train_seconds > 0 ? (double)(ep.steps * B) / ep.train_seconds : 0;
    if (d->test.n > 0) {
      double t1 = now_s();
      if ((s = net_evaluate_u8(m, d->test.images, d->test.labels, d->test.n, mean, std, &ep.test_accuracy))) break;
      ep.eval_seconds = now_s() - t1;
      ep.test_n = d->test.n;
      res->test_accuracy = ep.test_accuracy;
    }
    if (c->on_epoch && c->on_epoch(&ep, c->user))
      s = net_fail(NET_STOPPED, "stopped by the caller after epoch %lld", (long long)e);
  }
  if ((!s || s == NET_STOPPED) && c->checkpoint && t > last_ckpt) {
    NetStatus cs = net_weights_save(m, c->checkpoint);
    if (!cs && c->on_checkpoint) c->on_checkpoint(t, c->checkpoint, c->user);
    if (cs) s = cs;
  }
  free(order);
  free(bytes);
  return s;
}

NetStatus net_train(NetModel *m, const NetTrainConfig *cfg) {
  if (!m || !cfg) return net_fail(NET_ERR_ARG, "net_train: %s is NULL", m ? "the config" : "the model");
  if (!m->xt) return net_fail(NET_ERR_ARG, "net_train: the model was loaded for inference only");
  if (cfg->epochs < 0 || cfg->steps < 0 || cfg->checkpoint_every < 0)
    return net_fail(NET_ERR_ARG, "net_train: epochs, steps and checkpoint_every must not be negative");
  if (!(cfg->std >= 0) || !isfinite(cfg->std) || !isfinite(cfg->mean))
    return net_fail(NET_ERR_ARG, "net_train: normalization std %g, mean %g (std must be positive, 0: the default)",
                    (double)cfg->std, (double)cfg->mean);
  NetTrainResult local = {0}, *res = cfg->result ? cfg->result : &local;
  memset(res, 0, sizeof *res);
  Data d = {0};
  NetStatus s = run(m, cfg, &d, res);
  rt_idx_free(&d.idx_train);
  rt_idx_free(&d.idx_test);
  free(d.owned);
  return s;
}
