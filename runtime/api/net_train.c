/* net_train.c - net_train: the training loop over either executor.
 *
 * The data are bytes in NCHW order: synthetic, an IDX folder or the
 * caller's arrays held in memory, or an ImageFolder JPEG tree read batch by
 * batch by rt_loader's threads while the steps run.  Each epoch shuffles
 * the training set (seeded), feeds every full batch normalized per channel
 * as (x/255 - mean[c])/std[c] with the rate of the train section's schedule
 * (rt_sched) for step t, checks the loss, then evaluates top-1 and top-5
 * accuracy with the inference graph (parameters copied by name from the
 * training executor, see net_api.c).  A partial last batch is dropped, as
 * PyTorch's drop_last.  With `steps` the run stops after that many steps,
 * evaluating the epoch it stopped in.  With accum_steps K a step is K
 * batches accumulated into one update (docs/training.md): steps, epochs,
 * the schedule and checkpoints count updates, the loss is their mean.
 * Batches go to the executor as bytes through its input pipeline
 * (net_exec.h, docs/data.md), normalized on the device on the GPU; batch
 * b + 1 is staged before step b runs, so its copy overlaps the step.  The
 * time spent staging a batch (waiting for the loader, gathering bytes in
 * memory, waiting for a free pinned buffer) is the data wait.
 *
 * Folder data: the training loader starts epoch e + 1 as soon as epoch e's
 * last batch is taken, so its threads work during the evaluation; the
 * evaluation pass is a second loader visiting every test image once.
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
#include "rt_loader.h"
#include "rt_sched.h"

static const float FMNIST_MEAN = 0.2860f, FMNIST_STD = 0.3530f;
static const float IMAGENET_MEAN[3] = {0.485f, 0.456f, 0.406f}, IMAGENET_STD[3] = {0.229f, 0.224f, 0.225f};

typedef struct Set {
  const uint8_t *images, *labels;
  int64_t n;
} Set;

typedef struct Data {
  Set train, test;
  RtIdxSet idx_train, idx_test;
  uint8_t *owned; /* synthetic bytes */
  RtFolder ftrain, ftest;
  RtLoader *ltrain, *ltest; /* NET_DATA_FOLDER (ltest NULL without a test set) */
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
    return net_failed(net_status_of_idx(rt_idx_load(img, lab, set, net_err_buf(), NET_ERRMAX)));
  }
  return NET_ERR_DATA;
}

/* Scans the ImageFolder trees and starts their loaders. */
static NetStatus load_folder(NetModel *m, const NetTrainConfig *c, Data *d) {
  RtAugKind aug;
  if (!c->train_dir) return net_fail(NET_ERR_ARG, "net_train: NET_DATA_FOLDER without train_dir");
  if (rt_augment_parse(c->augment, &aug))
    return net_fail(NET_ERR_ARG, "net_train: augment '%s' is not auto, rrc, pad_crop, flip or none", c->augment);
  if (c->workers < 0) return net_fail(NET_ERR_ARG, "net_train: %d workers", c->workers);
  if (m->it.c != 3)
    return net_fail(NET_ERR_DATA, "%s: JPEG folders hold RGB images, but the model's input has %lld channels",
                    c->train_dir, (long long)m->it.c);
  char *err = net_err_buf();
  RtFolderStatus fs = rt_folder_scan(c->train_dir, (int)m->classes, &d->ftrain, err, NET_ERRMAX);
  if (!fs && c->test_dir) fs = rt_folder_scan(c->test_dir, (int)m->classes, &d->ftest, err, NET_ERRMAX);
  if (fs) return net_failed(net_status_of_folder(fs));
  for (int k = 0; c->test_dir && k < d->ftrain.nclass; k++)
    if (d->ftest.nclass != d->ftrain.nclass || strcmp(d->ftest.classes[k], d->ftrain.classes[k]))
      return net_fail(NET_ERR_DATA, "%s: its %d class folders are not the %d of %s (class %d: '%s' there)",
                      c->test_dir, d->ftest.nclass, d->ftrain.nclass, c->train_dir, k, d->ftrain.classes[k]);
  RtLoaderConfig lc = {.set = &d->ftrain, .limit = c->train_limit, .batch = m->batch, .H = (int)m->it.h,
                       .W = (int)m->it.w, .train = 1, .augment = aug, .seed = c->seed, .workers = c->workers};
  RtLoaderStatus ls = rt_loader_new(&lc, &d->ltrain, err, NET_ERRMAX);
  if (ls) return net_failed(net_status_of_loader(ls));
  if (!c->test_dir) return NET_OK;
  lc.set = &d->ftest, lc.limit = c->test_limit, lc.train = 0;
  ls = rt_loader_new(&lc, &d->ltest, err, NET_ERRMAX);
  return net_failed(net_status_of_loader(ls));
}

static NetStatus load_data(NetModel *m, const NetTrainConfig *c, Data *d) {
  switch (c->data) {
  case NET_DATA_FOLDER:
    return load_folder(m, c, d);
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

/* Per-channel x * scale[c] + shift[c] for bytes x: the caller's mean3/std3,
 * else the scalar mean/std, else the data kind's default. */
static void normalization(const NetTrainConfig *c, float scale[3], float shift[3]) {
  for (int k = 0; k < 3; k++) {
    float mean, std;
    if (c->std3[0] > 0) mean = c->mean3[k], std = c->std3[k];
    else if (c->std > 0) mean = c->mean, std = c->std;
    else if (c->data == NET_DATA_FOLDER) mean = IMAGENET_MEAN[k], std = IMAGENET_STD[k];
    else if (c->data == NET_DATA_IDX) mean = FMNIST_MEAN, std = FMNIST_STD;
    else mean = 0.5f, std = 0.5f;
    scale[k] = 1.0f / (255.0f * std), shift[k] = -mean / std;
  }
}

/* The conversion of n NCHW byte images into io's input (rt_ref_input.h):
 * channel c normalized with entry min(c, 2) (a one-channel model takes the
 * first). */
static RtRefInput input_of(const NetIo *io, int64_t n, const float scale[3], const float shift[3]) {
  RtRefInput in = {.n = n, .c = io->c, .h = io->h, .w = io->w, .dc = io->c, .dst_nhwc = io->nhwc};
  memcpy(in.scale, scale, sizeof in.scale);
  memcpy(in.shift, shift, sizeof in.shift);
  return in;
}

/* The training batches go through the executor's input pipeline
 * (net_exec.h): batch b + 1 is staged -- drawn from the loader or the
 * shuffled set into a free (pinned, on the GPU) buffer and sent -- right
 * after batch b is fed and before step b, so on the GPU its copy runs
 * during step b.  Labels wait here by slot until their batch is fed. */
typedef struct Feed {
  int64_t *lab[2];
  int fill, next; /* slot to stage into, slot to feed */
} Feed;

/* Stages batch b of the epoch; the time it takes (the loader, the gather,
 * a free buffer) is data wait. */
static NetStatus stage(NetModel *m, Data *d, Feed *f, const int64_t *order, int64_t b, double *wait) {
  int64_t B = m->batch, S = m->sample, *lab = f->lab[f->fill];
  double w0 = now_s();
  uint8_t *buf;
  NetStatus s = net_exec_input_buffer(m->xt, &buf, net_err_buf(), NET_ERRMAX);
  if (s) return net_failed(s);
  if (d->ltrain) {
    RtLoaderBatch lb;
    if (rt_loader_next(d->ltrain, &lb, net_err_buf(), NET_ERRMAX) != 1) return net_failed(NET_ERR_DATA);
    memcpy(buf, lb.images, (size_t)(B * S));
    memcpy(lab, lb.labels, sizeof(int64_t) * (size_t)B);
  } else {
    for (int64_t i = 0; i < B; i++) {
      int64_t idx = order[b * B + i];
      memcpy(buf + i * S, d->train.images + idx * S, (size_t)S);
      lab[i] = d->train.labels[idx];
    }
  }
  *wait += now_s() - w0;
  if ((s = net_exec_input_send(m->xt, net_err_buf(), NET_ERRMAX))) return net_failed(s);
  f->fill ^= 1;
  return NET_OK;
}

/* The oldest staged batch into the step's inputs (images on the
 * executor's stream, labels into m->lab). */
static NetStatus feed(NetModel *m, Feed *f) {
  NetStatus s = net_exec_input_feed(m->xt, net_err_buf(), NET_ERRMAX);
  if (s) return net_failed(s);
  memcpy(m->lab, f->lab[f->next], sizeof(int64_t) * (size_t)m->batch);
  f->next ^= 1;
  return NET_OK;
}

/* Top-1 and top-5 counts of n <= batch images through the inference graph. */
static NetStatus eval_batch(NetModel *m, const uint8_t *u8, const int64_t *labels, int64_t n, const float scale[3],
                            const float shift[3], int64_t *top1, int64_t *top5) {
  NetStatus s = net_infer_ready(m);
  if (s) return s;
  memset(m->img, 0, sizeof(float) * (size_t)(m->batch * m->sample));
  RtRefInput in = input_of(&m->ii, n, scale, shift);
  rt_ref_input_u8(&in, u8, m->img);
  return net_evaluate_batch(m, n, labels, top1, top5);
}

/* The evaluation pass over the test set: in memory, or the test loader's
 * epoch (every image once; unreadable ones are left out of test_n). */
static NetStatus evaluate(NetModel *m, Data *d, const float scale[3], const float shift[3], NetEpochInfo *ep) {
  int64_t top1 = 0, top5 = 0, n = 0;
  NetStatus s = NET_OK;
  if (d->ltest) {
    rt_loader_start(d->ltest, 0);
    RtLoaderBatch b;
    int got;
    while (!s && (got = rt_loader_next(d->ltest, &b, net_err_buf(), NET_ERRMAX)) != 0) {
      if (got < 0) return net_failed(NET_ERR_DATA);
      if (b.n) s = eval_batch(m, b.images, b.labels, b.n, scale, shift, &top1, &top5);
      n += b.n;
    }
  } else if (scale[0] == scale[1] && scale[1] == scale[2] && shift[0] == shift[1] && shift[1] == shift[2]) {
    float std = 1.0f / (255.0f * scale[0]);
    s = net_evaluate_u8(m, d->test.images, d->test.labels, d->test.n, -shift[0] * std, std, &ep->test_accuracy,
                        &ep->test_top5);
    ep->test_n = d->test.n;
    return s;
  } else {
    int64_t *lab = malloc(sizeof(int64_t) * (size_t)m->batch);
    if (!lab) return net_fail(NET_ERR_NOMEM, "out of memory");
    for (int64_t at = 0; at < d->test.n && !s; at += m->batch) {
      int64_t k = d->test.n - at < m->batch ? d->test.n - at : m->batch;
      for (int64_t i = 0; i < k; i++) lab[i] = d->test.labels[at + i];
      s = eval_batch(m, d->test.images + at * m->sample, lab, k, scale, shift, &top1, &top5);
    }
    free(lab);
    n = d->test.n;
  }
  ep->test_n = n;
  ep->test_accuracy = n ? (double)top1 / (double)n : 0;
  ep->test_top5 = n ? (double)top5 / (double)n : 0;
  return s;
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
  int64_t B = m->batch;
  if (!d->ltrain && d->train.n < B)
    return net_fail(NET_ERR_DATA, "training set of %lld images is smaller than one batch of %lld",
                    (long long)d->train.n, (long long)B);
  if ((s = check_labels(m, &d->train, "training")) || (s = check_labels(m, &d->test, "test"))) return s;
  /* accumulation: a step (update) takes K batches, so an epoch has spe * K of them */
  int64_t K = c->accum_steps > 0 ? c->accum_steps : 1;
  int64_t spe = (d->ltrain ? rt_loader_batches(d->ltrain) : d->train.n / B) / K;
  if (spe < 1)
    return net_fail(NET_ERR_DATA, "an epoch of %lld batches of %lld is less than one step of %lld accumulated batches",
                    (long long)(d->ltrain ? rt_loader_batches(d->ltrain) : d->train.n / B), (long long)B,
                    (long long)K);
  int have_test = d->ltest ? 1 : d->test.n > 0;
  int64_t epochs = c->epochs;
  if (!epochs && c->steps) epochs = (c->steps + spe - 1) / spe;
  if (!epochs) {
    const IrAttr *a = ir_train_find(m->gt, "epochs");
    epochs = a && a->kind == IR_ATTR_INT ? a->i[0] : 0;
  }
  if (epochs < 1) return net_fail(NET_ERR_ARG, "no epoch count (give epochs or steps; the train section has none)");
  int64_t total = c->steps > 0 && c->steps < epochs * spe ? c->steps : epochs * spe;
  RtSched sched;
  if ((s = net_status_of_sched(rt_sched_init(&sched, m->gt, spe, epochs, net_err_buf(), NET_ERRMAX))))
    return net_failed(s);
  float scale[3], shift[3], loss_scale = net_train_loss_scale(m->gt);
  normalization(c, scale, shift);
  int64_t *order = malloc(sizeof(int64_t) * (size_t)(d->train.n ? d->train.n : 1));
  Feed fq = {{malloc(sizeof(int64_t) * (size_t)B), malloc(sizeof(int64_t) * (size_t)B)}, 0, 0};
  if (!order || !fq.lab[0] || !fq.lab[1]) {
    free(order), free(fq.lab[0]), free(fq.lab[1]);
    return net_fail(NET_ERR_NOMEM, "out of memory");
  }
  for (int64_t i = 0; i < d->train.n; i++) order[i] = i;
  uint64_t rng = c->seed ^ 0x5f3759df2545f491ull;
  double head[10], tail[10], t_run = 0, wait_run = 0, t_start = now_s();
  int64_t t = 0, last_ckpt = 0, started = -1;
  /* a resumed run starts at the checkpoint's step of the same plan: the
   * epochs before it only shuffle (the order of each epoch is as it was) */
  NetTrainState st = {.seed = c->seed, .epochs = epochs, .steps_total = total, .accum_steps = K};
  if (c->resume && !(s = net_checkpoint_load(m, c->resume, &st))) {
    if (st.accum_steps != K)
      s = net_fail(NET_ERR_ARG,
                   "%s: made by a run accumulating %lld batches per step; this run accumulates %lld (resume with "
                   "the same --accum)",
                   c->resume, (long long)st.accum_steps, (long long)K);
    else if (st.seed != c->seed || st.epochs != epochs || st.steps_total != total)
      s = net_fail(NET_ERR_ARG,
                   "%s: made by a run of %lld epochs, %lld steps, seed %llu; this run has %lld, %lld, seed %llu "
                   "(resume with the same settings)",
                   c->resume, (long long)st.epochs, (long long)st.steps_total, (unsigned long long)st.seed,
                   (long long)epochs, (long long)total, (unsigned long long)c->seed);
    else if (st.step >= total)
      s = net_fail(NET_ERR_ARG, "%s: the run it continues is complete (%lld of %lld steps)", c->resume,
                   (long long)st.step, (long long)total);
    t = last_ckpt = st.step;
  }
  int64_t t_first = t;
  RtRefInput in = input_of(&m->it, B, scale, shift);
  if (!s) s = net_failed(net_exec_input_start(m->xt, m->it.image, &in, net_err_buf(), NET_ERRMAX));
  if (!s && K > 1) s = net_failed(net_exec_accum_set(m->xt, (int)K, net_err_buf(), NET_ERRMAX));
  if (s) {
    free(order), free(fq.lab[0]), free(fq.lab[1]);
    return s;
  }
  char bad[1024] = "";
  res->test_accuracy = res->test_top5 = -1;
  for (int64_t e = 0; e < epochs && t < total && !s; e++) {
    NetEpochInfo ep = {.epoch = e, .test_accuracy = -1, .test_top5 = -1, .unreadable_first = bad};
    double t0 = now_s(), sum = 0, ehead[10], etail[10];
    for (int64_t i = d->train.n - 1; !d->ltrain && i > 0; i--) {
      int64_t j = (int64_t)(mix(&rng) % (uint64_t)(i + 1)), tmp = order[i];
      order[i] = order[j], order[j] = tmp;
    }
    if (e < st.epoch) continue;
    if (d->ltrain && started != e) rt_loader_start(d->ltrain, e);
    started = e;
    int64_t b0 = e == st.epoch ? st.batch_in_epoch : 0;
    for (int64_t b = 0; d->ltrain && b < b0 * K && !s; b++) { /* the batches the checkpoint has seen */
      RtLoaderBatch lb;
      if (rt_loader_next(d->ltrain, &lb, net_err_buf(), NET_ERRMAX) != 1) s = net_failed(NET_ERR_DATA);
    }
    double micro_sum = 0; /* accumulation: the losses of this update's batches so far */
    for (int64_t b = b0 * K; b < spe * K && t < total && !s; b++) { /* b: the batch; step t takes b / K */
      if (b == b0 * K && (s = stage(m, d, &fq, order, b, &ep.data_wait_seconds))) break;
      if ((s = feed(m, &fq))) break;
      /* the loader fills the next epoch's first batches during the evaluation */
      if (d->ltrain && b == spe * K - 1 && e + 1 < epochs && t + 1 < total) rt_loader_start(d->ltrain, started = e + 1);
      if (b + 1 < spe * K && (t + 1 < total || (b + 1) % K) &&
          (s = stage(m, d, &fq, order, b + 1, &ep.data_wait_seconds)))
        break;
      double lr = rt_sched_lr(&sched, t);
      float loss = 0;
      if ((s = net_step_run(m, (float)lr, loss_scale, &loss, NULL))) break;
      micro_sum += loss;
      if ((b + 1) % K) continue; /* the update comes with the step's last batch */
      loss = (float)(micro_sum / (double)K), micro_sum = 0;
      if (t - t_first < 10) head[t - t_first] = loss;
      tail[(t - t_first) % 10] = loss;
      if (ep.steps < 10) ehead[ep.steps] = loss;
      etail[ep.steps % 10] = loss;
      ep.lr_last = lr;
      sum += loss;
      t++, ep.steps++;
      double el = now_s() - t_start;
      if (c->on_step && (t % (c->log_every > 0 ? c->log_every : 1) == 0 || t == total)) {
        NetStepInfo si = {.step = t, .steps_total = total, .epoch = e, .epochs = epochs, .loss = loss, .lr = lr,
                          .images_per_s = (double)((t - t_first) * K * B) / (t_run + now_s() - t0), .elapsed_s = el,
                          .data_wait_s = wait_run + ep.data_wait_seconds};
        if (c->on_step(&si, c->user)) s = net_fail(NET_STOPPED, "stopped by the caller after step %lld", (long long)t);
      }
      st.step = t, st.lr = lr;
      st.epoch = b + 1 == spe * K ? e + 1 : e, st.batch_in_epoch = b + 1 == spe * K ? 0 : (b + 1) / K;
      if (!s && c->checkpoint && c->checkpoint_every > 0 && t % c->checkpoint_every == 0) {
        if ((s = net_checkpoint_save(m, c->checkpoint, &st))) break;
        last_ckpt = t;
        if (c->on_checkpoint && c->on_checkpoint(t, c->checkpoint, c->user))
          s = net_fail(NET_STOPPED, "stopped by the caller after checkpoint %lld", (long long)t);
      }
    }
    ep.train_seconds = now_s() - t0;
    t_run += ep.train_seconds;
    wait_run += ep.data_wait_seconds;
    res->epochs = e + 1, res->steps = t;
    res->train_seconds = t_run;
    res->data_wait_seconds = wait_run;
    res->images_per_s = t_run > 0 ? (double)((t - t_first) * K * B) / t_run : 0;
    int64_t ran = t - t_first; /* steps of this call (a resumed run starts later) */
    res->loss_first = window_mean(head, ran);
    double tl[10];
    int64_t k = ran < 10 ? ran : 10;
    for (int64_t i = 0; i < k; i++) tl[i] = tail[(ran - 1 - i) % 10];
    res->loss_last = window_mean(tl, k);
    if (s) break;
    ep.loss_mean = ep.steps ? sum / (double)ep.steps : 0;
    ep.loss_first = window_mean(ehead, ep.steps);
    ep.loss_last = window_mean(etail, ep.steps);
    ep.images_per_s = ep.train_seconds > 0 ? (double)(ep.steps * K * B) / ep.train_seconds : 0;
    if (have_test) {
      double t1 = now_s();
      if ((s = evaluate(m, d, scale, shift, &ep))) break;
      ep.eval_seconds = now_s() - t1;
      res->test_accuracy = ep.test_accuracy, res->test_top5 = ep.test_top5;
    }
    if (d->ltrain) {
      int64_t more = d->ltest ? rt_loader_unreadable(d->ltest, NULL, 0) : 0;
      ep.unreadable = rt_loader_unreadable(d->ltrain, bad, sizeof bad) + more;
      if (more && !bad[0]) rt_loader_unreadable(d->ltest, bad, sizeof bad);
      res->unreadable = ep.unreadable;
    }
    if (c->on_epoch && c->on_epoch(&ep, c->user))
      s = net_fail(NET_STOPPED, "stopped by the caller after epoch %lld", (long long)e);
  }
  if ((!s || s == NET_STOPPED) && c->checkpoint && t > last_ckpt) {
    NetStatus cs = net_checkpoint_save(m, c->checkpoint, &st);
    if (!cs && c->on_checkpoint) c->on_checkpoint(t, c->checkpoint, c->user);
    if (cs) s = cs;
  }
  if (K > 1) net_exec_accum_set(m->xt, 1, NULL, 0); /* net_step runs whole steps again */
  free(order);
  free(fq.lab[0]);
  free(fq.lab[1]);
  return s;
}

NetStatus net_train(NetModel *m, const NetTrainConfig *cfg) {
  if (!m || !cfg) return net_fail(NET_ERR_ARG, "net_train: %s is NULL", m ? "the config" : "the model");
  if (!m->xt) return net_fail(NET_ERR_ARG, "net_train: the model was loaded for inference only");
  if (cfg->epochs < 0 || cfg->steps < 0 || cfg->checkpoint_every < 0)
    return net_fail(NET_ERR_ARG, "net_train: epochs, steps and checkpoint_every must not be negative");
  if (cfg->accum_steps < 0 || cfg->accum_steps > 1 << 20)
    return net_fail(NET_ERR_ARG, "net_train: accum_steps %lld (batches accumulated per step: 1 to %d; 0 means 1)",
                    (long long)cfg->accum_steps, 1 << 20);
  if (!(cfg->std >= 0) || !isfinite(cfg->std) || !isfinite(cfg->mean))
    return net_fail(NET_ERR_ARG, "net_train: normalization std %g, mean %g (std must be positive, 0: the default)",
                    (double)cfg->std, (double)cfg->mean);
  int std3 = cfg->std3[0] != 0 || cfg->std3[1] != 0 || cfg->std3[2] != 0;
  for (int k = 0; k < 3; k++)
    if ((std3 && !(cfg->std3[k] > 0)) || !isfinite(cfg->std3[k]) || !isfinite(cfg->mean3[k]))
      return net_fail(NET_ERR_ARG, "net_train: channel %d normalization std %g, mean %g (give three positive stds, "
                      "or none)", k, (double)cfg->std3[k], (double)cfg->mean3[k]);
  NetTrainResult local = {0}, *res = cfg->result ? cfg->result : &local;
  memset(res, 0, sizeof *res);
  Data d = {0};
  NetStatus s = run(m, cfg, &d, res);
  net_exec_input_stop(m->xt);
  rt_loader_free(d.ltrain);
  rt_loader_free(d.ltest);
  rt_folder_free(&d.ftrain);
  rt_folder_free(&d.ftest);
  rt_idx_free(&d.idx_train);
  rt_idx_free(&d.idx_test);
  free(d.owned);
  return s;
}
