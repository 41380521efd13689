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
 * b + 1 is staged before step b runs, so its copy overlaps the step (and
 * more where the pipeline takes more: net_exec_input_depth).  The
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
#include <unistd.h>

#include "rt_file.h"
#include "rt_idx.h"
#include "rt_loader.h"
#include "rt_sched.h"

static const float FMNIST_MEAN = 0.2860f, FMNIST_STD = 0.3530f;
static const float IMAGENET_MEAN[3] = {0.485f, 0.456f, 0.406f}, IMAGENET_STD[3] = {0.229f, 0.224f, 0.225f};

typedef struct Set {
  const uint8_t *images, *labels; /* labels: a byte each (IDX, memory) */
  const uint16_t *labels16;       /* or two (synthetic, whose classes may be more than 256) */
  int64_t n;
} Set;

static int64_t set_label(const Set *s, int64_t i) { return s->labels16 ? s->labels16[i] : s->labels[i]; }

typedef struct Data {
  Set train, test;
  RtIdxSet idx_train, idx_test;
  uint8_t *owned; /* synthetic bytes */
  RtFolder ftrain, ftest;
  RtLoader *ltrain, *ltest; /* NET_DATA_FOLDER (ltest NULL without a test set) */
  int defer;                /* ltrain's items go to the GPU decoder (net_exec_input_start_jpeg) */
  int auto_decoder;         /* the decoder was auto's choice: the CPU may take over after the first epoch */
  RtLoaderConfig lc;        /* ltrain's */
  char gpu_decoder[48];     /* its name */
  char decoder[64];         /* who decodes the training images, for the progress line */
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
  if (classes > 65536)
    return net_fail(NET_ERR_ARG, "synthetic images: %lld classes (at most 65536)", (long long)classes);
  size_t at = ((size_t)(total * sample) + 1) & ~(size_t)1; /* the labels, 16 bits each, after the pixels */
  d->owned = malloc(at + sizeof(uint16_t) * (size_t)total);
  if (!d->owned) return net_fail(NET_ERR_NOMEM, "out of memory for %lld synthetic images", (long long)total);
  uint8_t *img = d->owned;
  uint16_t *lab = (uint16_t *)(void *)(d->owned + at);
  uint64_t s = seed * 0x2545f4914f6cdd1dull + 7;
  for (int64_t i = 0; i < total; i++) {
    lab[i] = (uint16_t)(mix(&s) % (uint64_t)classes);
    uint64_t bright = (uint64_t)(((double)lab[i] + 0.5) / (double)classes * 65536.0);
    for (int64_t p = 0; p < sample; p++) {
      uint64_t r = mix(&s);
      img[i * sample + p] = (uint8_t)((r & 0xffff) < bright ? 200 + (r >> 16) % 56 : (r >> 16) % 56);
    }
  }
  d->train = (Set){.images = img, .labels16 = lab, .n = n};
  d->test = (Set){.images = img + n * sample, .labels16 = lab + n, .n = test_n};
  return NET_OK;
}

NetStatus net_load_idx(const char *dir, const char *prefix, RtIdxSet *set) {
  char img[4096], lab[4096];
  for (int gz = 1; gz >= 0; gz--) {
    snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte%s", dir, prefix, gz ? ".gz" : "");
    snprintf(lab, sizeof lab, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gz ? ".gz" : "");
    /* the .gz file when it exists at all (rt_idx_load says what is wrong with it) */
    if (gz && access(img, F_OK) != 0) continue;
    return net_failed(net_status_of_idx(rt_idx_load(img, lab, set, net_err_buf(), NET_ERRMAX)));
  }
  return NET_ERR_DATA;
}

void net_data_normalization(NetDataKind kind, float mean[3], float std[3]) {
  for (int k = 0; k < 3; k++) {
    if (kind == NET_DATA_FOLDER)
      mean[k] = IMAGENET_MEAN[k], std[k] = IMAGENET_STD[k];
    else if (kind == NET_DATA_IDX)
      mean[k] = FMNIST_MEAN, std[k] = FMNIST_STD;
    else
      mean[k] = 0.5f, std[k] = 0.5f;
  }
}

/* Per-channel x * scale[c] + shift[c] for bytes x: the caller's mean3/std3,
 * else the scalar mean/std, else the data kind's default. */
static void normalization(const NetTrainConfig *c, float scale[3], float shift[3]) {
  float dmean[3], dstd[3];
  net_data_normalization(c->data, dmean, dstd);
  for (int k = 0; k < 3; k++) {
    float mean = dmean[k], std = dstd[k];
    if (c->std3[0] > 0)
      mean = c->mean3[k], std = c->std3[k];
    else if (c->std > 0)
      mean = c->mean, std = c->std;
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

/* Who decodes the training set (NetTrainConfig.decoder): the GPU decoder
 * is started here, on the training executor, when it is asked for or auto
 * finds the JPEG engines; otherwise the loader's threads decode. */
static NetStatus choose_decoder(NetModel *m, const NetTrainConfig *c, RtAugKind aug, Data *d) {
  const char *want = c->decoder ? c->decoder : "auto";
  int gpu = strcmp(want, "gpu") == 0, cpu = strcmp(want, "cpu") == 0;
  if (!gpu && !cpu && strcmp(want, "auto") != 0)
    return net_fail(NET_ERR_ARG, "net_train: decoder '%s' is not auto, gpu or cpu", want);
  int H = (int)m->it.h, W = (int)m->it.w;
  RtAugKind k = rt_augment_resolve(aug, H, W);
  const char *why = !m->gpu                ? "the model runs on the CPU"
                    : H < 64 || W < 64     ? "inputs under 64 pixels are decoded by the CPU"
                    : k == RT_AUG_PAD_CROP ? "the pad_crop transform runs on the CPU"
                                           : NULL;
  snprintf(d->decoder, sizeof d->decoder, "cpu");
  if (cpu || (why && !gpu)) return NET_OK;
  if (why) return net_fail(NET_ERR_ARG, "net_train: --decoder gpu: %s", why);
  float scale[3], shift[3];
  normalization(c, scale, shift);
  RtRefInput in = input_of(&m->it, m->batch, scale, shift);
  char msg[NET_ERRMAX];
  /* auto takes the JPEG engines only; gpu also the hybrid backend */
  NetStatus s = net_exec_input_start_jpeg(m->xt, m->it.image, m->it.label, &in, gpu ? 0 : 1, msg, sizeof msg);
  if (s && gpu) return net_fail(s, "net_train: --decoder gpu: %s", msg);
  if (s) return NET_OK;
  d->defer = 1;
  net_exec_input_decoder(m->xt, d->gpu_decoder, sizeof d->gpu_decoder, NULL, NULL, NULL);
  return NET_OK;
}

/* The decoder's name for the progress line: "cpu", or the GPU's and the
 * threads' share beside it ("nvJPEG hardware + cpu 40%"). */
static void name_decoder(Data *d) {
  int share = d->defer ? rt_loader_cpu_share(d->ltrain) : 0;
  if (!d->defer)
    snprintf(d->decoder, sizeof d->decoder, "cpu");
  else if (share)
    snprintf(d->decoder, sizeof d->decoder, "%s + cpu %d%%", d->gpu_decoder, share);
  else
    snprintf(d->decoder, sizeof d->decoder, "%s", d->gpu_decoder);
}

/* Scans the ImageFolder trees, chooses the decoder and starts the loaders. */
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
      return net_fail(NET_ERR_DATA, "%s: its %d class folders are not the %d of %s (class %d: '%s' there)", c->test_dir,
                      d->ftest.nclass, d->ftrain.nclass, c->train_dir, k, d->ftrain.classes[k]);
  NetStatus s = choose_decoder(m, c, aug, d);
  if (s) return s;
  RtLoaderConfig lc = {.set = &d->ftrain,
                       .decode = d->defer ? RT_LOADER_DEFER : RT_LOADER_DECODE,
                       .cpu_share = !d->defer          ? 0
                                    : c->cpu_share > 0 ? c->cpu_share
                                    : c->cpu_share < 0 ? 0
                                                       : 50,
                       .limit = c->train_limit,
                       .batch = m->batch,
                       .H = (int)m->it.h,
                       .W = (int)m->it.w,
                       .train = 1,
                       .augment = aug,
                       .seed = c->seed,
                       .workers = c->workers,
                       .rank = net_dist_rank(m),
                       .world = net_dist_world(m)};
  d->lc = lc;
  d->auto_decoder = d->defer && (!c->decoder || strcmp(c->decoder, "auto") == 0);
  RtLoaderStatus ls = rt_loader_new(&lc, &d->ltrain, err, NET_ERRMAX);
  if (ls) return net_failed(net_status_of_loader(ls));
  if (c->cpu_share < -1 || c->cpu_share > 100)
    return net_fail(NET_ERR_ARG, "net_train: cpu_share %d (a percentage 1..100, -1: none, 0: balanced)", c->cpu_share);
  name_decoder(d);
  if (!c->test_dir) return NET_OK;
  lc.set = &d->ftest, lc.limit = c->test_limit, lc.train = 0, lc.decode = RT_LOADER_DECODE;
  ls = rt_loader_new(&lc, &d->ltest, err, NET_ERRMAX);
  return net_failed(net_status_of_loader(ls));
}

static NetStatus load_data(NetModel *m, const NetTrainConfig *c, Data *d) {
  snprintf(d->decoder, sizeof d->decoder, "memory");
  switch (c->data) {
  case NET_DATA_FOLDER: return load_folder(m, c, d);
  case NET_DATA_SYNTHETIC: {
    int64_t n = c->synthetic_n > 0 ? c->synthetic_n : 16 * m->batch;
    int64_t tn = c->test_limit > 0 ? c->test_limit : n / 10 > 0 ? n / 10 : 1;
    return synthetic(d, n, tn, m->sample, m->classes, c->seed);
  }
  case NET_DATA_IDX: {
    if (!c->idx_dir) return net_fail(NET_ERR_ARG, "net_train: NET_DATA_IDX without idx_dir");
    NetStatus s = net_load_idx(c->idx_dir, "train", &d->idx_train);
    if (!s) s = net_load_idx(c->idx_dir, "t10k", &d->idx_test);
    if (s) return s;
    int64_t sample = (int64_t)d->idx_train.rows * d->idx_train.cols;
    if (sample != m->sample || (int64_t)d->idx_test.rows * d->idx_test.cols != sample)
      return net_fail(NET_ERR_DATA, "%s: images of %dx%d do not fit the model's input of %lld values per image",
                      c->idx_dir, d->idx_train.rows, d->idx_train.cols, (long long)m->sample);
    int64_t n = c->train_limit > 0 && c->train_limit < d->idx_train.n ? c->train_limit : d->idx_train.n;
    int64_t tn = c->test_limit > 0 && c->test_limit < d->idx_test.n ? c->test_limit : d->idx_test.n;
    d->train = (Set){.images = d->idx_train.images, .labels = d->idx_train.labels, .n = n};
    d->test = (Set){.images = d->idx_test.images, .labels = d->idx_test.labels, .n = tn};
    return NET_OK;
  }
  case NET_DATA_MEMORY:
    if (!c->images || !c->labels) return net_fail(NET_ERR_ARG, "net_train: NET_DATA_MEMORY without images or labels");
    d->train = (Set){.images = c->images, .labels = c->labels, .n = c->n};
    if (c->test_images && c->test_labels && c->test_n > 0)
      d->test = (Set){.images = c->test_images, .labels = c->test_labels, .n = c->test_n};
    return NET_OK;
  }
  return net_fail(NET_ERR_ARG, "net_train: unknown data kind %d", (int)c->data);
}

static NetStatus check_labels(const NetModel *m, const Set *s, const char *which) {
  for (int64_t i = 0; i < s->n; i++)
    if (set_label(s, i) >= m->classes)
      return net_fail(NET_ERR_DATA, "%s set: label %lld of image %lld is not one of the %lld classes", which,
                      (long long)set_label(s, i), (long long)i, (long long)m->classes);
  return NET_OK;
}

/* The training batches go through the executor's input pipeline
 * (net_exec.h), their labels with them: batch b + 1 is staged -- drawn
 * from the loader or the shuffled set into a free (pinned, on the GPU)
 * buffer and sent -- right after step b is launched, so the host gathers
 * it while the GPU runs step b and its copy overlaps the step. */
typedef struct Feed {
  int64_t *lab; /* the labels of the batch being staged */
} Feed;

/* Stages batch b of the epoch; the time it takes (the loader, the gather,
 * a free buffer) is data wait. */
static NetStatus stage(NetModel *m, Data *d, Feed *f, const int64_t *order, int64_t b, double *wait) {
  int64_t B = m->batch, S = m->sample, *lab = f->lab;
  int64_t at = (b * net_dist_world(m) + net_dist_rank(m)) * B; /* this rank's share of the epoch's batch b */
  double w0 = now_s();
  NetStatus s;
  if (d->defer) { /* the GPU decoder: the loader's items and their labels */
    RtLoaderBatch lb;
    if (rt_loader_next(d->ltrain, &lb, net_err_buf(), NET_ERRMAX) != 1) return net_failed(NET_ERR_DATA);
    s = net_exec_input_send_items(m->xt, lb.items, (int)lb.n, lb.labels, net_err_buf(), NET_ERRMAX);
    *wait += now_s() - w0; /* the decoder's host work is the loop's time spent on input */
    return net_failed(s);
  }
  uint8_t *buf;
  s = net_exec_input_buffer(m->xt, &buf, net_err_buf(), NET_ERRMAX);
  if (s) return net_failed(s);
  if (d->ltrain) {
    RtLoaderBatch lb;
    if (rt_loader_next(d->ltrain, &lb, net_err_buf(), NET_ERRMAX) != 1) return net_failed(NET_ERR_DATA);
    memcpy(buf, lb.images, (size_t)(B * S));
    memcpy(lab, lb.labels, sizeof(int64_t) * (size_t)B);
  } else {
    for (int64_t i = 0; i < B; i++) {
      int64_t idx = order[at + i];
      memcpy(buf + i * S, d->train.images + idx * S, (size_t)S);
      lab[i] = set_label(&d->train, idx);
    }
  }
  *wait += now_s() - w0;
  return net_failed(net_exec_input_send(m->xt, lab, net_err_buf(), NET_ERRMAX));
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
 * epoch (every image once; unreadable ones are left out of test_n).  In a
 * data-parallel run each rank takes every world-th batch (the loader's
 * evaluation shards, or batches rank, rank + world, ... of the set in
 * memory) and the counts are summed over the ranks. */
static NetStatus evaluate(NetModel *m, Data *d, const float scale[3], const float shift[3], NetEpochInfo *ep) {
  int64_t top1 = 0, top5 = 0, n = 0, R = net_dist_rank(m), W = net_dist_world(m);
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
  } else if (W == 1 && !d->test.labels16 && scale[0] == scale[1] && scale[1] == scale[2] && shift[0] == shift[1] &&
             shift[1] == shift[2]) {
    float std = 1.0f / (255.0f * scale[0]);
    s = net_evaluate_u8(m, d->test.images, d->test.labels, d->test.n, -shift[0] * std, std, &ep->test_accuracy,
                        &ep->test_top5);
    ep->test_n = d->test.n;
    return s;
  } else {
    int64_t *lab = malloc(sizeof(int64_t) * (size_t)m->batch);
    if (!lab) return net_fail(NET_ERR_NOMEM, "out of memory");
    for (int64_t at = R * m->batch; at < d->test.n && !s; at += W * m->batch) {
      int64_t k = d->test.n - at < m->batch ? d->test.n - at : m->batch;
      for (int64_t i = 0; i < k; i++) lab[i] = set_label(&d->test, at + i);
      s = eval_batch(m, d->test.images + at * m->sample, lab, k, scale, shift, &top1, &top5);
      n += k;
    }
    free(lab);
  }
  double sum[3] = {(double)top1, (double)top5, (double)n};
  if (!s) s = net_dist_sum(m, sum, 3);
  top1 = (int64_t)sum[0], top5 = (int64_t)sum[1], n = (int64_t)sum[2];
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

/* --- the run, step by step -------------------------------------------------- */

enum { RANKS_MAX = 512 }; /* ranks whose step rates a logged step gathers (rt_rendezvous_sum's limit) */

/* One call of net_train: what it was asked, its plan (made before the first
 * step) and where it is. */
typedef struct Run {
  NetModel *m;
  const NetTrainConfig *c;
  Data *d;
  NetTrainResult *res;
  /* the plan */
  int64_t K;             /* batches accumulated into one step (update) */
  int64_t spe;           /* steps per epoch: an epoch is spe * K batches */
  int64_t epochs, total; /* of the whole run; total steps (the last epoch may stop early) */
  int have_test;
  RtSched sched;
  float scale[3], shift[3], loss_scale;
  int64_t *order; /* the shuffled training set (not with a loader) */
  uint64_t rng;
  Feed fq;
  int64_t log_every;
  /* where it is */
  NetTrainState st;                /* the position a checkpoint saves, or a resumed run starts from */
  int64_t t;                       /* steps done, counting those of the run a checkpoint resumes */
  int64_t t_first;                 /* the step this call started at */
  int stopping;                    /* NetTrainConfig.stop was seen: the run ends with the step being finished */
  int64_t last_ckpt;               /* the step of the last checkpoint written or read */
  int64_t started;                 /* the epoch the training loader runs (-1: none) */
  double head[10], tail[10];       /* the losses of this call's first ten and (a ring) last ten steps */
  double t_start, t_run, wait_run; /* the call's start; seconds training and waiting for data so far */
  int64_t staged;                  /* batches staged by this call */
  char bad[1024];                  /* the first unreadable image */
  /* dynamic loss scaling: a step skips its update (non-finite gradients) exactly when it halves
   * the scale (backoff 0.5; growth only raises it), so the scale after each step tells */
  float scale_first, scale_last; /* the scale before this call's first step, after its last finished one */
  int64_t skipped;               /* this call's steps that skipped their update */
  NetStatus failed;              /* the ranks' agreement on stopping failed (stop_asked) */
  double rate[RANKS_MAX];        /* every rank's step rate at the last logged step (rank_rates) */
} Run;

/* One epoch's own numbers. */
typedef struct Epoch {
  NetEpochInfo info;
  double t0, sum;            /* when it started, its steps' losses added */
  double head[10], tail[10]; /* its first ten losses and (a ring) last ten */
  int64_t staged;            /* the epoch's batches before this one are staged */
} Epoch;

/* A training set of at least one batch, and labels that are classes. */
static NetStatus check_data(Run *r) {
  const Data *d = r->d;
  int64_t W = net_dist_world(r->m);
  if (!d->ltrain && d->train.n < r->m->batch * W)
    return net_fail(NET_ERR_DATA, "training set of %lld images is smaller than one batch of %lld%s",
                    (long long)d->train.n, (long long)(r->m->batch * W), W > 1 ? " (over every rank)" : "");
  NetStatus s;
  if ((s = check_labels(r->m, &d->train, "training")) || (s = check_labels(r->m, &d->test, "test"))) return s;
  return NET_OK;
}

/* How long the run is: batches per step, steps per epoch, epochs (the
 * config's, else enough for its steps, else the train section's) and steps. */
static NetStatus plan_steps(Run *r) {
  const NetTrainConfig *c = r->c;
  const Data *d = r->d;
  int64_t B = r->m->batch, batches = d->ltrain ? rt_loader_batches(d->ltrain) : d->train.n / (B * net_dist_world(r->m));
  r->K = c->accum_steps > 0 ? c->accum_steps : 1;
  r->spe = batches / r->K;
  if (r->spe < 1)
    return net_fail(NET_ERR_DATA, "an epoch of %lld batches of %lld is less than one step of %lld accumulated batches",
                    (long long)batches, (long long)B, (long long)r->K);
  r->have_test = d->ltest ? 1 : d->test.n > 0;
  r->epochs = c->epochs;
  if (!r->epochs && c->steps) r->epochs = (c->steps + r->spe - 1) / r->spe;
  if (!r->epochs) {
    const IrAttr *a = ir_train_find(r->m->gt, "epochs");
    r->epochs = a && a->kind == IR_ATTR_INT ? a->i[0] : 0;
  }
  if (r->epochs < 1) return net_fail(NET_ERR_ARG, "no epoch count (give epochs or steps; the train section has none)");
  r->total = c->steps > 0 && c->steps < r->epochs * r->spe ? c->steps : r->epochs * r->spe;
  return NET_OK;
}

/* The train section's learning-rate schedule over the plan, the inputs'
 * normalization and the static loss scale. */
static NetStatus make_schedule(Run *r) {
  NetStatus s = net_status_of_sched(rt_sched_init(&r->sched, r->m->gt, r->spe, r->epochs, net_err_buf(), NET_ERRMAX));
  if (s) return net_failed(s);
  if (r->sched.warmup_asked && r->c->on_warning) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "the train section's warm-up of %lld epochs is not shorter than this %lld-epoch run: warming up over "
             "the first %lld of the schedule's %lld steps instead",
             (long long)r->sched.warmup_asked, (long long)r->epochs, (long long)r->sched.warmup_steps,
             (long long)r->sched.total_steps);
    r->c->on_warning(msg, r->c->user);
  }
  normalization(r->c, r->scale, r->shift);
  r->loss_scale = net_train_loss_scale(r->m->gt);
  return NET_OK;
}

/* The training set's order (shuffled every epoch from the seed) and the
 * staged batches' label slots. */
static NetStatus make_order(Run *r) {
  int64_t n = r->d->train.n, B = r->m->batch;
  r->order = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  r->fq = (Feed){malloc(sizeof(int64_t) * (size_t)B)};
  if (!r->order || !r->fq.lab) return net_fail(NET_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < n; i++) r->order[i] = i;
  r->rng = r->c->seed ^ 0x5f3759df2545f491ull;
  return NET_OK;
}

static void free_order(Run *r) {
  free(r->order);
  free(r->fq.lab);
}

/* What identifies the training data, for a checkpoint (NetTrainState.data):
 * the kind, the images the run trains on and their classes (the class
 * folders; else the distinct labels). */
static void describe_data(const NetTrainConfig *c, const Data *d, char *out, size_t cap) {
  static const char *const KIND[] = {[NET_DATA_SYNTHETIC] = "synthetic",
                                     [NET_DATA_IDX] = "IDX",
                                     [NET_DATA_MEMORY] = "memory",
                                     [NET_DATA_FOLDER] = "ImageFolder"};
  const char *kind = (unsigned)c->data < sizeof KIND / sizeof KIND[0] && KIND[c->data] ? KIND[c->data] : "data";
  int64_t n = d->train.n;
  int classes = 0;
  if (d->ltrain) {
    n = rt_loader_size(d->ltrain), classes = d->ftrain.nclass;
  } else {
    uint8_t *seen = calloc(65536, 1); /* a label is at most 16 bits (Set) */
    for (int64_t i = 0; seen && i < d->train.n; i++) classes += !seen[set_label(&d->train, i)]++;
    free(seen);
  }
  snprintf(out, cap, "%s, %lld training images in %d classes", kind, (long long)n, classes);
}

/* The checkpoint's position is one of this plan's: before its end (else
 * the run is complete), in one of its epochs, at one of that epoch's
 * steps, and the step it counts. */
static NetStatus check_position(const Run *r, const NetTrainState *st, const char *path) {
  if (st->step >= r->total)
    return net_fail(NET_ERR_ARG, "%s: the run it continues is complete (%lld of %lld steps)", path, (long long)st->step,
                    (long long)r->total);
  if (st->epoch >= r->epochs || st->batch_in_epoch >= r->spe || st->step != st->epoch * r->spe + st->batch_in_epoch)
    return net_fail(NET_ERR_WEIGHTS,
                    "%s: its position (step %lld: epoch %lld, step %lld of it) is not a place in this run of %lld "
                    "epochs of %lld steps (a damaged or edited checkpoint, or one of another data set)",
                    path, (long long)st->step, (long long)st->epoch + 1, (long long)st->batch_in_epoch + 1,
                    (long long)r->epochs, (long long)r->spe);
  return NET_OK;
}

/* A checkpoint made by a data-parallel run of another number of processes
 * (NetTrainState.world): its position moved onto this run's steps, which
 * take world * batch * K images each -- the same images into the same
 * epoch, so the global order goes on where it was.  Whole-epoch runs only,
 * at a position that is a whole number of this run's steps; said once. */
static NetStatus other_world(Run *r, NetTrainState *st, const char *path) {
  int64_t wo = st->world > 1 ? st->world : 1, W = net_dist_world(r->m);
  st->world = W;
  if (wo == W) return NET_OK;
  const Data *d = r->d;
  int64_t images = d->ltrain ? rt_loader_size(d->ltrain) : d->train.n, B = r->m->batch;
  int64_t spe_old = images / (B * wo) / r->K;
  if (st->steps_total != st->epochs * spe_old || r->total != r->epochs * r->spe)
    return net_fail(NET_ERR_ARG,
                    "%s: made by a run of %lld processes; one of %lld continues it only when both run whole epochs "
                    "(without --steps)",
                    path, (long long)wo, (long long)W);
  if (st->batch_in_epoch * wo % W)
    return net_fail(NET_ERR_ARG,
                    "%s: its position, %lld steps of %lld x %lld images into epoch %lld, is not a whole number of "
                    "steps of %lld x %lld: resume it on %lld processes, or from a checkpoint at an epoch's end",
                    path, (long long)st->batch_in_epoch, (long long)wo, (long long)(B * r->K), (long long)st->epoch + 1,
                    (long long)W, (long long)(B * r->K), (long long)wo);
  st->batch_in_epoch = st->batch_in_epoch * wo / W;
  st->step = st->epoch * r->spe + st->batch_in_epoch;
  st->steps_total = r->total;
  if (r->c->on_warning) {
    char msg[320];
    snprintf(msg, sizeof msg,
             "%s was made by a run of %lld processes; this one has %lld: it goes on at step %lld of %lld (epoch "
             "%lld), each step now %lld images",
             path, (long long)wo, (long long)W, (long long)st->step + 1, (long long)r->total, (long long)st->epoch + 1,
             (long long)(W * B * r->K));
    r->c->on_warning(msg, r->c->user);
  }
  return NET_OK;
}

/* The position to start from: step 0, or the checkpoint's (c->resume) when
 * it was made by a run of the same plan on the same data.  The epochs
 * before it only shuffle, so each epoch's order is as it was. */
static NetStatus resume(Run *r) {
  const NetTrainConfig *c = r->c;
  r->t_start = now_s();
  r->st = (NetTrainState){.seed = c->seed,
                          .epochs = r->epochs,
                          .steps_total = r->total,
                          .accum_steps = r->K,
                          .world = net_dist_world(r->m)};
  NetTrainState *st = &r->st;
  char data[sizeof st->data];
  describe_data(c, r->d, data, sizeof data);
  memcpy(st->data, data, sizeof data);
  NetStatus s = NET_OK;
  if (c->resume && !(s = net_checkpoint_load(r->m, c->resume, st))) {
    if (st->accum_steps != r->K)
      s = net_fail(NET_ERR_ARG,
                   "%s: made by a run accumulating %lld batches per step; this run accumulates %lld (resume with "
                   "the same --accum)",
                   c->resume, (long long)st->accum_steps, (long long)r->K);
    else if ((s = other_world(r, st, c->resume)))
      ;
    else if (st->seed != c->seed || st->epochs != r->epochs || st->steps_total != r->total)
      s = net_fail(NET_ERR_ARG,
                   "%s: made by a run of %lld epochs, %lld steps, seed %llu; this run has %lld, %lld, seed %llu "
                   "(resume with the same settings)",
                   c->resume, (long long)st->epochs, (long long)st->steps_total, (unsigned long long)st->seed,
                   (long long)r->epochs, (long long)r->total, (unsigned long long)c->seed);
    else if (st->data[0] && strcmp(st->data, data) != 0)
      s = net_fail(NET_ERR_ARG, "%s: made by a run on other data (%s); this run's are %s (resume on the same data set)",
                   c->resume, st->data, data);
    else
      s = check_position(r, st, c->resume);
    memcpy(st->data, data, sizeof data); /* this run's checkpoints record it */
    r->t = r->last_ckpt = st->step;
  }
  r->t_first = r->t;
  return s;
}

/* The executor's input pipeline for the training batches, and accumulation
 * over K batches. */
static NetStatus start_input(Run *r) {
  NetModel *m = r->m;
  RtRefInput in = input_of(&m->it, m->batch, r->scale, r->shift);
  NetStatus s = r->d->defer
                    ? NET_OK /* the GPU decoder, started with the loader */
                    : net_failed(net_exec_input_start(m->xt, m->it.image, m->it.label, &in, net_err_buf(), NET_ERRMAX));
  if (!s && r->K > 1) s = net_failed(net_exec_accum_set(m->xt, (int)r->K, net_err_buf(), NET_ERRMAX));
  if (!s && m->it.scale_state >= 0)
    s = net_failed(net_exec_read(m->xt, m->it.scale_state, &r->scale_first, net_err_buf(), NET_ERRMAX));
  r->scale_last = r->scale_first;
  return s;
}

/* Epoch e's numbers, and the training set shuffled for it (also for an
 * epoch a resumed run skips). */
static void begin_epoch(Run *r, int64_t e, Epoch *ep) {
  *ep = (Epoch){.info = {.epoch = e, .test_accuracy = -1, .test_top5 = -1, .unreadable_first = r->bad}, .t0 = now_s()};
  for (int64_t i = r->d->train.n - 1; !r->d->ltrain && i > 0; i--) {
    int64_t j = (int64_t)(mix(&r->rng) % (uint64_t)(i + 1)), tmp = r->order[i];
    r->order[i] = r->order[j], r->order[j] = tmp;
  }
}

/* The training loader on epoch e, past the `seen` batches a checkpoint has
 * seen of it. */
static NetStatus start_loader(Run *r, int64_t e, int64_t seen) {
  RtLoader *l = r->d->ltrain;
  if (!l) return NET_OK;
  if (r->started != e) { /* past the seen batches without making them */
    rt_loader_start_at(l, e, seen);
    r->started = e;
    return NET_OK;
  }
  NetStatus s = NET_OK;
  for (int64_t b = 0; b < seen && !s; b++) {
    RtLoaderBatch lb;
    if (rt_loader_next(l, &lb, net_err_buf(), NET_ERRMAX) != 1) s = net_failed(NET_ERR_DATA);
  }
  return s;
}

/* The images/s the input pipeline can make: data in memory are gathered
 * by the loop itself, so its rate is the batches staged over the time
 * staging took; folder data, the lesser of the loader threads' rate
 * (rt_loader_rate) and, with it, the GPU decoder's (all its items). */
static double input_capacity(const Run *r, double wait) {
  if (!r->d->ltrain) return wait > 0 ? (double)(r->staged * r->m->batch) / wait : 0;
  double rate = rt_loader_rate(r->d->ltrain), dec[NET_DECODER_RATES] = {0};
  if (r->d->defer) net_exec_input_decoder(r->m->xt, NULL, 0, NULL, NULL, dec);
  return dec[0] > 0 && dec[0] < rate ? dec[0] : rate;
}

/* With the GPU decoder: the share of each batch the threads decode beside
 * it that makes the most images/s by the rates measured so far
 * (rt_loader_best_share), that rate into *most; -1 before they are.  The
 * GPU's rate is nvJPEG's per JPEG it decoded (rt_gpu_jpeg_jpeg_rate): its
 * rate over all the batch's items would count the threads' pictures as
 * the GPU's, overstate it by 1 / (1 - s), and, each epoch balanced by the
 * one before, drive the share down to where the GPU holds the step. */
static int best_share(Run *r, double *most) {
  double g[NET_DECODER_RATES] = {0}, h = 0, c = 0;
  net_exec_input_decoder(r->m->xt, NULL, 0, NULL, NULL, g);
  rt_loader_rates(r->d->ltrain, &h, &c);
  return rt_loader_best_share(g[3], h, c, most);
}

/* With the GPU decoder and a balanced share: best_share from the loader's
 * next start on; the share, or -1 when it is kept (a share given, or the
 * rates not measured yet). */
static int balance(Run *r) {
  Data *d = r->d;
  if (!d->defer || r->c->cpu_share != 0) return -1;
  double most;
  int best = best_share(r, &most);
  if (best >= 0) rt_loader_set_cpu_share(d->ltrain, best);
  return best;
}

/* auto's second look, LOOK_AT batches into the first epoch with the GPU
 * decoder (or at its end, when it is shorter), nothing staged past batch
 * `next` yet.  When the threads alone decode (c) faster than the pipeline
 * did, the run goes on with the CPU decoder from batch `next` of epoch e
 * (0: the caller starts the epoch): a loader of DECODE mode and the byte
 * pipeline in place of the GPU's, said once through on_warning.  The
 * measured rate decides, not best_share's forecast: on an H100 (2026-12-07)
 * an nvJPEG decode waited for the device's other work, so a batch took
 * about a step whatever its share and the forecast, which scales the
 * GPU's rate per JPEG, promised what the GPU did not make (0.83 of the
 * bench against the workers' 0.99).  Else it keeps the GPU decoder at the
 * best share, the loader restarted at `next` with it when the share moves
 * by more than 2 points (the first epoch would otherwise run at the
 * starting share to its end). */
enum { LOOK_AT = 12 };

static NetStatus choose_again(Run *r, int64_t e, int64_t next) {
  Data *d = r->d;
  if (!d->auto_decoder) return NET_OK;
  d->auto_decoder = 0; /* one look */
  double h = 0, c = 0, both = input_capacity(r, 0);
  rt_loader_rates(d->ltrain, &h, &c);
  if (!(c > both) || !(both > 0)) {
    int share = balance(r);
    if (share >= 0 && next > 0 && abs(share - rt_loader_cpu_share(d->ltrain)) > 2) {
      rt_loader_start_at(d->ltrain, e, next), r->started = e;
      name_decoder(d);
    }
    return NET_OK;
  }
  NetModel *m = r->m;
  RtLoaderConfig lc = d->lc;
  lc.decode = RT_LOADER_DECODE, lc.cpu_share = 0;
  rt_loader_free(d->ltrain);
  d->ltrain = NULL, d->defer = 0;
  RtLoaderStatus ls = rt_loader_new(&lc, &d->ltrain, net_err_buf(), NET_ERRMAX);
  if (ls) return net_failed(net_status_of_loader(ls));
  if (next > 0) rt_loader_start_at(d->ltrain, e, next), r->started = e;
  RtRefInput in = input_of(&m->it, m->batch, r->scale, r->shift);
  NetStatus s = net_exec_input_start(m->xt, m->it.image, m->it.label, &in, net_err_buf(), NET_ERRMAX);
  if (s) return net_failed(s);
  name_decoder(d);
  if (r->c->on_warning) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "decoder auto: the worker threads (%.0f images/s) are faster here than %s with them (%.0f): decoding "
             "on the CPU from batch %lld of epoch %lld on",
             c, d->gpu_decoder, both, (long long)next + 1, (long long)e + 1);
    r->c->on_warning(msg, r->c->user);
  }
  return NET_OK;
}

/* The end (exclusive) of the batches staged once batch b (of step t) is
 * launched: b + depth, so that with b fed the pipeline holds depth - 1
 * sent and not fed (net_exec_input_depth), within the epoch and the run,
 * and while auto has not looked, not past the batch it looks at (LOOK_AT),
 * so that a change of decoder finds nothing staged beyond it. */
static int64_t stage_end(Run *r, int64_t b, int64_t t) {
  int64_t nb = r->spe * r->K, end = b + net_exec_input_depth(r->m->xt);
  int64_t left = (r->total - t - 1) * r->K + (r->K - 1 - b % r->K); /* batches of the run after b */
  if (end > b + 1 + left) end = b + 1 + left;
  if (end > nb) end = nb;
  if (r->d->auto_decoder && b + 1 < LOOK_AT && end > LOOK_AT) end = LOOK_AT;
  return end;
}

/* A launched micro-step whose loss is not read yet. */
typedef struct Pending {
  int live;
  int64_t b;            /* its batch in the epoch */
  int64_t ticket;       /* its loss (net_exec_fetch) */
  int64_t scale_ticket; /* the dynamic loss scale after it, when it ends a step (else -1) */
  double lr;
} Pending;

/* Batch b of the epoch, a batch of step t, launched: fed (staged now when it is the first this
 * call trains, `first`, else it was staged behind the batches before), the
 * rate and the loss scale posted, the step run and its loss fetched -- all
 * queued without waiting for the device.  Then the batches after it up to
 * stage_end are staged while the step runs.  With the
 * epoch's last batch the loader starts the next epoch, so its threads work
 * during the evaluation. */
static NetStatus launch(Run *r, Epoch *ep, int64_t b, int64_t first, int64_t t, Pending *p) {
  NetModel *m = r->m;
  int64_t e = ep->info.epoch, nb = r->spe * r->K;
  double *wait = &ep->info.data_wait_seconds, lr = rt_sched_lr(&r->sched, t);
  float lrf = (float)lr, scale = r->loss_scale;
  char *err = net_err_buf();
  NetStatus s;
  if (b == first) ep->staged = first;
  if (ep->staged == b) {
    if ((s = stage(m, r->d, &r->fq, r->order, b, wait))) return s;
    ep->staged++, r->staged++;
  }
  s = net_exec_input_feed(m->xt, err, NET_ERRMAX);
  if (!s) s = net_exec_post(m->xt, m->it.lr, &lrf, err, NET_ERRMAX);
  if (!s && m->it.scale >= 0) s = net_exec_post(m->xt, m->it.scale, &scale, err, NET_ERRMAX);
  if (!s) s = net_exec_run(m->xt, err, NET_ERRMAX);
  if (!s) s = net_exec_fetch(m->xt, m->it.loss, &p->ticket, err, NET_ERRMAX);
  p->scale_ticket = -1;
  if (!s && m->it.scale_state >= 0 && (b + 1) % r->K == 0)
    s = net_exec_fetch(m->xt, m->it.scale_state, &p->scale_ticket, err, NET_ERRMAX);
  if (s) return net_failed(s);
  m->infer_stale = 1, m->stepped = 1;
  p->live = 1, p->b = b, p->lr = lr;
  if (r->d->auto_decoder && b + 1 == LOOK_AT && b + 1 < nb && t + 1 < r->total && (s = choose_again(r, e, b + 1)))
    return s;
  if (r->d->ltrain && b == nb - 1 && e + 1 < r->epochs && t + 1 < r->total) {
    if ((s = choose_again(r, e + 1, 0))) return s;
    balance(r);
    rt_loader_start(r->d->ltrain, r->started = e + 1);
    name_decoder(r->d);
  }
  for (int64_t end = stage_end(r, b, t); ep->staged < end; ep->staged++, r->staged++)
    if ((s = stage(m, r->d, &r->fq, r->order, ep->staged, wait))) return s;
  return NET_OK;
}

/* A finished step's loss (the mean of its K batches') into the run's and
 * the epoch's windows and sums. */
static void record_step(Run *r, Epoch *ep, float loss, double lr) {
  int64_t i = r->t - r->t_first, k = ep->info.steps;
  if (i < 10) r->head[i] = loss;
  r->tail[i % 10] = loss;
  if (k < 10) ep->head[k] = loss;
  ep->tail[k % 10] = loss;
  ep->info.lr_last = lr;
  ep->sum += loss;
  r->t++, ep->info.steps++;
}

/* Every rank's step rate, gathered at a logged step of a data-parallel run
 * (each rank adds its own into its slot of a sum over the ranks) into
 * r->rate; the slowest rank into *slowest.  NULL outside a run or past
 * RANKS_MAX. */
static const double *rank_rates(Run *r, double mine, int *slowest, NetStatus *s) {
  double *rate = r->rate;
  int W = net_dist_world(r->m);
  *slowest = 0, *s = NET_OK;
  if (W == 1 || W > RANKS_MAX) return NULL;
  memset(rate, 0, sizeof(double) * (size_t)W);
  rate[net_dist_rank(r->m)] = mine;
  if ((*s = net_dist_sum(r->m, rate, W))) return NULL;
  for (int k = 1; k < W; k++)
    if (rate[k] < rate[*slowest]) *slowest = k;
  return rate;
}

/* on_step, every log_every steps and at the last. */
static NetStatus log_step(Run *r, const Epoch *ep, float loss, double lr) {
  const NetTrainConfig *c = r->c;
  int64_t t = r->t, images = (t - r->t_first) * r->K * r->m->batch;
  double el = now_s() - r->t_start, ran = r->t_run + now_s() - ep->t0;
  double wait = r->wait_run + ep->info.data_wait_seconds;
  if (t % r->log_every != 0 && t != r->total) return NET_OK;
  /* the step's own rate: the device's time in its steps, else the loop's time less its waits */
  double dev_s = 0;
  int64_t dev_steps = 0;
  net_exec_step_time(r->m->xt, &dev_s, &dev_steps);
  double step_rate = dev_steps > 0 && dev_s > 0 ? (double)(dev_steps * r->m->batch) / dev_s
                     : ran - wait > 0           ? (double)images / (ran - wait)
                                                : 0;
  double input_rate = input_capacity(r, wait);
  int slowest;
  NetStatus rs;
  const double *rates = rank_rates(r, step_rate, &slowest, &rs); /* every rank, whether it calls back or not */
  if (rs) return rs;
  if (!c->on_step) return NET_OK;
  NetStepInfo si = {.step = t,
                    .steps_total = r->total,
                    .epoch = ep->info.epoch,
                    .epochs = r->epochs,
                    .loss = loss,
                    .lr = lr,
                    .images_per_s = (double)((t - r->t_first) * r->K * r->m->batch) / (r->t_run + now_s() - ep->t0),
                    .elapsed_s = el,
                    .data_wait_s = wait,
                    .decoder = r->d->decoder,
                    .input_images_per_s = input_rate,
                    .step_images_per_s = step_rate,
                    .input_bound = input_rate > 0 && input_rate < step_rate,
                    .ranks = net_dist_world(r->m),
                    .rank_step_images_per_s = rates,
                    .slowest_rank = slowest};
  double comm_s = 0, comm_exposed_s = 0;
  int64_t comm_steps = 0;
  net_exec_comm_time(r->m->xt, &comm_s, &comm_exposed_s, &comm_steps);
  si.allreduce_ms = si.ranks > 1 && comm_steps > 0 ? 1000 * comm_s / (double)comm_steps : -1;
  si.allreduce_exposed_ms = si.ranks > 1 && comm_steps > 0 ? 1000 * comm_exposed_s / (double)comm_steps : -1;
  double dec[NET_DECODER_RATES] = {0};
  net_exec_input_decoder(r->m->xt, NULL, 0, NULL, NULL, dec);
  si.decode_gpu_images_per_s = dec[1], si.decode_host_images_per_s = dec[2];
  net_exec_watch(r->m->xt, &si.gpu);
  if (c->on_step(&si, c->user)) return net_fail(NET_STOPPED, "stopped by the caller after step %lld", (long long)t);
  return NET_OK;
}

/* The position after the step that batch b ended. */
static void mark_position(Run *r, const Epoch *ep, int64_t b, double lr) {
  int64_t e = ep->info.epoch, nb = r->spe * r->K;
  r->st.step = r->t, r->st.lr = lr;
  r->st.epoch = b + 1 == nb ? e + 1 : e, r->st.batch_in_epoch = b + 1 == nb ? 0 : (b + 1) / r->K;
}

/* A checkpoint every checkpoint_every steps, then on_checkpoint. */
static NetStatus checkpoint_every(Run *r) {
  const NetTrainConfig *c = r->c;
  if (!c->checkpoint || c->checkpoint_every <= 0 || r->t % c->checkpoint_every != 0) return NET_OK;
  if (net_dist_rank(r->m) != 0) { /* rank 0 saves for the run */
    r->last_ckpt = r->t;
    return NET_OK;
  }
  NetStatus s = net_checkpoint_save(r->m, c->checkpoint, &r->st);
  if (s) return s;
  r->last_ckpt = r->t;
  if (c->on_checkpoint && c->on_checkpoint(r->t, c->checkpoint, c->user))
    return net_fail(NET_STOPPED, "stopped by the caller after checkpoint %lld", (long long)r->t);
  return NET_OK;
}

/* Whether the run is to stop (NetTrainConfig.stop): in a data-parallel run,
 * whether it is set on any rank, so that every rank stops after the same
 * step.  A failed agreement stops the run with its error (r->failed). */
static int stop_asked(Run *r) {
  int mine = r->c->stop && *r->c->stop, any = mine;
  if (!r->c->stop || net_dist_world(r->m) == 1) return mine;
  NetStatus s = net_dist_any(r->m, mine, &any);
  if (s && !r->failed) r->failed = s;
  return any || s;
}

/* Does the step that micro-step p ends call back or save (a progress
 * line, a checkpoint, the run's last step)?  Then it is finished before
 * the next batch is launched, so the callback and the checkpoint see the
 * parameters of that step and no later one. */
static int ends_in_sync(Run *r, const Pending *p) {
  if (!p->live || (p->b + 1) % r->K) return 0;
  int64_t t = r->t + 1, every = r->c->checkpoint_every;
  if (stop_asked(r)) r->stopping = 1; /* latched here: the step is finished before any other launch */
  /* a data-parallel run's logged steps gather the ranks' rates: every rank at the same point */
  int logs = r->c->on_step || net_dist_world(r->m) > 1;
  return r->stopping || (logs && (t % r->log_every == 0 || t == r->total)) ||
         (r->c->checkpoint && every > 0 && t % every == 0) || t == r->total;
}

/* Micro-step p's loss, once its step is done on the device; per step
 * (every K batches) the loss into the windows, the log, the position and
 * the checkpoint. */
static NetStatus finish(Run *r, Epoch *ep, Pending *p, double *micro_sum) {
  if (!p->live) return NET_OK;
  float loss = 0;
  p->live = 0;
  NetStatus s = net_exec_fetched(r->m->xt, p->ticket, 1, &loss, NULL, net_err_buf(), NET_ERRMAX);
  if (s) return net_failed(s);
  if (!isfinite(loss))
    return net_fail(NET_ERR_DIVERGED, "the loss is %g (lr %g, loss scale %g)", loss, p->lr, r->loss_scale);
  *micro_sum += loss;
  if ((p->b + 1) % r->K) return NET_OK; /* the update comes with the step's last batch */
  if (p->scale_ticket >= 0) {
    float scale = 0;
    if ((s = net_exec_fetched(r->m->xt, p->scale_ticket, 1, &scale, NULL, net_err_buf(), NET_ERRMAX)))
      return net_failed(s);
    r->skipped += scale < r->scale_last;
    r->scale_last = scale;
    r->res->skipped_steps = r->skipped;
  }
  loss = (float)(*micro_sum / (double)r->K), *micro_sum = 0;
  record_step(r, ep, loss, p->lr);
  s = log_step(r, ep, loss, p->lr);
  mark_position(r, ep, p->b, p->lr);
  if (!s) s = checkpoint_every(r);
  if (!s && r->stopping) s = r->failed ? r->failed : net_fail(NET_STOPPED, "stopped after step %lld", (long long)r->t);
  return s;
}

/* The steps of one epoch, from the checkpoint's batch when a resumed run
 * starts inside it.  Per batch: launch it (staging the next), then finish
 * the one launched before it, whose step the GPU has done by then or is
 * about to -- so the host waits for a step's loss only while the next
 * step is already queued, except at the steps that call back or save. */
static NetStatus train_epoch(Run *r, Epoch *ep) {
  int64_t e = ep->info.epoch, K = r->K, nb = r->spe * K;
  int64_t first = (e == r->st.epoch ? r->st.batch_in_epoch : 0) * K;
  NetStatus s = start_loader(r, e, first);
  double micro_sum = 0; /* accumulation: the losses of this step's batches so far */
  Pending done = {0}, next = {0};
  int64_t launched = r->t;                                            /* steps launched, counting the one in flight */
  for (int64_t b = first; b < nb && launched < r->total && !s; b++) { /* b: the batch; step t takes b / K */
    if (ends_in_sync(r, &done) && (s = finish(r, ep, &done, &micro_sum))) break;
    if ((s = launch(r, ep, b, first, launched, &next))) break;
    if ((b + 1) % K == 0) launched++;
    s = finish(r, ep, &done, &micro_sum);
    done = next, next.live = 0;
  }
  NetStatus last = finish(r, ep, &done, &micro_sum);
  return s ? s : last;
}

/* The run's numbers so far into res, after every epoch's steps (also when
 * one failed). */
static void tally_run(Run *r, Epoch *ep) {
  NetTrainResult *res = r->res;
  int64_t B = r->m->batch, ran = r->t - r->t_first; /* steps of this call (a resumed run starts later) */
  ep->info.train_seconds = now_s() - ep->t0;
  r->t_run += ep->info.train_seconds;
  r->wait_run += ep->info.data_wait_seconds;
  res->epochs = ep->info.epoch + 1, res->steps = r->t;
  res->train_seconds = r->t_run;
  res->data_wait_seconds = r->wait_run;
  res->images_per_s = r->t_run > 0 ? (double)(ran * r->K * B) / r->t_run : 0;
  res->loss_first = window_mean(r->head, ran);
  double tl[10];
  int64_t k = ran < 10 ? ran : 10;
  for (int64_t i = 0; i < k; i++) tl[i] = r->tail[(ran - 1 - i) % 10];
  res->loss_last = window_mean(tl, k);
}

/* Top-1 and top-5 accuracy on the test set, when there is one. */
static NetStatus evaluate_epoch(Run *r, Epoch *ep) {
  NetStatus s = net_dist_average_state(r->m); /* each rank's running statistics saw its own share */
  if (s || !r->have_test) return s;
  double t1 = now_s();
  s = evaluate(r->m, r->d, r->scale, r->shift, &ep->info);
  if (s) return s;
  ep->info.eval_seconds = now_s() - t1;
  r->res->test_accuracy = ep->info.test_accuracy, r->res->test_top5 = ep->info.test_top5;
  return NET_OK;
}

/* The epoch's loss and speed, the loaders' unreadable images, and on_epoch. */
static NetStatus log_epoch(Run *r, Epoch *ep) {
  const NetTrainConfig *c = r->c;
  NetEpochInfo *info = &ep->info;
  info->loss_mean = info->steps ? ep->sum / (double)info->steps : 0;
  info->loss_first = window_mean(ep->head, info->steps);
  info->loss_last = window_mean(ep->tail, info->steps);
  info->images_per_s = info->train_seconds > 0 ? (double)(info->steps * r->K * r->m->batch) / info->train_seconds : 0;
  if (r->d->ltrain) {
    int64_t more = r->d->ltest ? rt_loader_unreadable(r->d->ltest, NULL, 0) : 0;
    info->unreadable = rt_loader_unreadable(r->d->ltrain, r->bad, sizeof r->bad) + more;
    if (more && !r->bad[0]) rt_loader_unreadable(r->d->ltest, r->bad, sizeof r->bad);
    r->res->unreadable = info->unreadable;
  }
  if (c->on_epoch && c->on_epoch(info, c->user))
    return net_fail(NET_STOPPED, "stopped by the caller after epoch %lld", (long long)info->epoch);
  return NET_OK;
}

/* A run that ends well or is stopped saves its last steps, when it saves
 * checkpoints at all; s is the run's status, returned unless the save fails. */
static NetStatus last_checkpoint(Run *r, NetStatus s) {
  const NetTrainConfig *c = r->c;
  const char *path = c->checkpoint ? c->checkpoint : s == NET_STOPPED ? c->stop_checkpoint : NULL;
  if ((s && s != NET_STOPPED) || !path || r->t <= r->last_ckpt || net_dist_rank(r->m) != 0) return s;
  char why[NET_ERRMAX];
  snprintf(why, sizeof why, "%s", s ? net_last_error() : "");
  NetStatus cs = net_checkpoint_save(r->m, path, &r->st);
  if (s && !cs) net_fail(s, "%s", why); /* the stop's message, not the save's */
  if (!cs && c->on_checkpoint) c->on_checkpoint(r->t, path, c->user);
  return cs ? cs : s;
}

/* The training loop as a list: open the data, plan the steps, make the
 * schedule, resume, start the input pipeline; per epoch: train its steps
 * (logging and checkpointing as they go), tally, evaluate, log; a last
 * checkpoint. */
static NetStatus run(NetModel *m, const NetTrainConfig *c, Data *d, NetTrainResult *res) {
  Run r = {.m = m, .c = c, .d = d, .res = res, .started = -1};
  NetStatus s = load_data(m, c, d);
  if (!s) s = check_data(&r);
  if (!s) s = plan_steps(&r);
  if (!s) s = make_schedule(&r);
  r.log_every = c->log_every > 0 ? c->log_every : 1;
  if (!s) s = make_order(&r);
  if (!s) s = resume(&r);
  if (!s) s = net_dist_same_weights(m); /* every rank starts from rank 0's weights */
  if (!s) s = start_input(&r);
  if (s) {
    free_order(&r);
    return s;
  }
  res->test_accuracy = res->test_top5 = -1;
  snprintf(res->decoder, sizeof res->decoder, "%s", d->decoder);
  net_exec_watch(m->xt, &res->gpu_start);
  for (int64_t e = 0; e < r.epochs && r.t < r.total && !s; e++) {
    if (e > 0 && e >= r.st.epoch && stop_asked(&r)) { /* between epochs: nothing in flight */
      s = r.failed ? r.failed : net_fail(NET_STOPPED, "stopped after step %lld", (long long)r.t);
      break;
    }
    Epoch ep;
    begin_epoch(&r, e, &ep);
    if (e < r.st.epoch) continue;
    s = train_epoch(&r, &ep);
    tally_run(&r, &ep);
    if (!s) s = evaluate_epoch(&r, &ep);
    if (!s) s = log_epoch(&r, &ep);
  }
  net_exec_watch(m->xt, &res->gpu_end);
  snprintf(res->decoder, sizeof res->decoder, "%s", d->decoder); /* auto may have moved to the CPU's */
  /* the scale the last step's gradients carry (net_step_save divides by it) */
  float scale = r.loss_scale;
  if (m->stepped && (m->it.scale >= 0 || (m->it.scale_state >= 0 &&
                                          !net_exec_read(m->xt, m->it.scale_state, &scale, net_err_buf(), NET_ERRMAX))))
    m->last_scale = scale;
  int64_t ran = r.t - r.t_first;
  if (!s && ran > 0 && r.skipped == ran)
    s = net_fail(NET_ERR_DIVERGED,
                 "every one of the %lld steps skipped its update: the gradients were not finite at any loss scale "
                 "from %g down to %g (dynamic loss scaling; the parameters are as the run started; a lower init in "
                 "the train section's loss_scale, or a lower rate, may help)",
                 (long long)ran, (double)r.scale_first, (double)r.scale_last);
  s = last_checkpoint(&r, s);
  /* every rank ends here together, unless one failed (the others then learn it from the rendezvous) */
  if ((!s || s == NET_STOPPED) && !r.failed) {
    NetStatus fs = net_dist_finish(m, 1);
    if (!s) s = fs;
  }
  if (r.K > 1) net_exec_accum_set(m->xt, 1, NULL, 0); /* net_step runs whole steps again */
  free_order(&r);
  return s;
}

NetStatus net_train(NetModel *m, const NetTrainConfig *cfg) {
  if (!m || !cfg) return net_fail(NET_ERR_ARG, "net_train: %s is NULL", m ? "the config" : "the model");
  NetTrainResult local = {0}, *res = cfg->result ? cfg->result : &local;
  memset(res, 0, sizeof *res);
  net_exec_watch(NULL, &res->gpu_start), net_exec_watch(NULL, &res->gpu_end); /* unknown until sampled */
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
      return net_fail(NET_ERR_ARG,
                      "net_train: channel %d normalization std %g, mean %g (give three positive stds, "
                      "or none)",
                      k, (double)cfg->std3[k], (double)cfg->mean3[k]);
  /* the checkpoint's place found before training, not after it (rt_file.h) */
  char why[4608];
  if (cfg->checkpoint && rt_file_check_writable(cfg->checkpoint, 1, why, sizeof why))
    return net_fail(NET_ERR_IO, "checkpoint %s", why);
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
