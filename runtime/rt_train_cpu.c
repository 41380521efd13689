/* rt_train_cpu.c - the CPU training loop: shuffle, normalize, step, copy
 * the parameters to the inference graph, evaluate (see rt_train_cpu.h).
 *
 * Everything a run needs is checked before the first step: the inputs and
 * outputs of both graphs, that every parameter and state of the inference
 * graph has a twin of the same type in the training graph, that the data
 * fit the image input and every label is a class of the logits, and the
 * schedule.  A run then fails only in the executor or by diverging. */
#include "rt_train_cpu.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_init.h"
#include "rt_sched.h"

/* The values a run touches, found once. */
typedef struct Io {
  int image, label, lr, scale; /* inputs; label, lr, scale -1 when the graph has none (scale: also
                                * when the graph keeps a dynamic one as state @loss_scale) */
  int loss, logits;            /* outputs; loss -1 for the inference graph */
  int64_t sample;              /* image elements per sample */
  int64_t classes;
} Io;

typedef struct Run {
  const IrGraph *gt, *gi;
  RtCpu *xt, *xi;
  Io it, ii;
  int *pairs;   /* (inference value, training value) for every param and state */
  int npairs;
  int64_t *order;
  char *err;
  size_t errlen;
} Run;

static RtTrainStatus fail(Run *r, RtTrainStatus st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static RtTrainStatus fail(Run *r, RtTrainStatus st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->err, r->errlen, fmt, ap);
  va_end(ap);
  return st;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mix_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Fisher-Yates; the modulo bias of a 64-bit draw over a set this size is negligible. */
static void shuffle(int64_t *a, int64_t n, uint64_t *s) {
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(mix_next(s) % (uint64_t)(i + 1));
    int64_t t = a[i];
    a[i] = a[j], a[j] = t;
  }
}

static int input_named(const IrGraph *g, const char *name) {
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_INPUT && strcmp(g->val[v].name, name) == 0) return v;
  return -1;
}

/* The precision pass's dynamic loss scaling keeps the scale in the graph. */
static int state_named(const IrGraph *g, const char *name) {
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_STATE && strcmp(g->val[v].name, name) == 0) return 1;
  return 0;
}

static int is_int_dtype(IrDtype dt) { return dt == IR_DT_I32 || dt == IR_DT_I64 || dt == IR_DT_U8; }

/* Finds and checks the image, label, lr and loss_scale inputs and the
 * loss and logits outputs of g; `training` requires all of them. */
static RtTrainStatus find_io(Run *r, const IrGraph *g, int training, Io *io) {
  const char *which = training ? "training graph" : "inference graph";
  io->image = input_named(g, "image");
  io->label = input_named(g, "label");
  io->lr = input_named(g, "lr");
  io->scale = input_named(g, "loss_scale");
  if (io->image < 0) return fail(r, RT_TRAIN_ERR_GRAPH, "%s: no input called 'image'", which);
  const IrType *ti = &g->val[io->image].type;
  if (ti->rank < 2 || ti->dim[0] != IR_DIM_N || is_int_dtype(ti->dtype))
    return fail(r, RT_TRAIN_ERR_GRAPH, "%s: input 'image' must be a float tensor with the batch first", which);
  io->sample = ir_type_numel(ti, 1);
  if (training) {
    if (io->label < 0 || io->lr < 0 || (io->scale < 0 && !state_named(g, "loss_scale")))
      return fail(r, RT_TRAIN_ERR_GRAPH, "%s: needs inputs 'label', 'lr' and 'loss_scale' (is it compiled with autodiff?)",
                  which);
    const IrType *tl = &g->val[io->label].type;
    if (tl->rank != 1 || tl->dim[0] != IR_DIM_N || !is_int_dtype(tl->dtype))
      return fail(r, RT_TRAIN_ERR_GRAPH, "%s: input 'label' must be an integer [N]", which);
    if (ir_type_numel(&g->val[io->lr].type, 1) != 1 || (io->scale >= 0 && ir_type_numel(&g->val[io->scale].type, 1) != 1))
      return fail(r, RT_TRAIN_ERR_GRAPH, "%s: 'lr' and 'loss_scale' must be scalars", which);
    if (g->noutput < 2) return fail(r, RT_TRAIN_ERR_GRAPH, "%s: outputs must be [loss, logits]", which);
    io->loss = g->output[0];
    io->logits = g->output[1];
    if (ir_type_numel(&g->val[io->loss].type, 1) != 1)
      return fail(r, RT_TRAIN_ERR_GRAPH, "%s: its first output (the loss) must be a scalar", which);
  } else {
    if (g->noutput < 1) return fail(r, RT_TRAIN_ERR_GRAPH, "%s: no output", which);
    io->loss = -1;
    io->logits = g->output[g->noutput - 1]; /* [logits], or [loss, logits] without autodiff */
  }
  const IrType *tg = &g->val[io->logits].type;
  if (tg->rank != 2 || tg->dim[0] != IR_DIM_N || tg->dim[1] < 1 || is_int_dtype(tg->dtype))
    return fail(r, RT_TRAIN_ERR_GRAPH, "%s: the logits output must be a float [N, classes]", which);
  io->classes = tg->dim[1];
  return RT_TRAIN_OK;
}

/* Pairs every parameter and state of the inference graph with its twin. */
static RtTrainStatus pair_params(Run *r) {
  r->pairs = malloc(sizeof(int) * 2 * (size_t)(r->gi->nval + 1));
  if (!r->pairs) return fail(r, RT_TRAIN_ERR_NOMEM, "out of memory");
  for (int v = 0; v < r->gi->nval; v++) {
    const IrValue *val = &r->gi->val[v];
    if (val->kind != IR_VAL_PARAM && val->kind != IR_VAL_STATE) continue;
    int t = rt_cpu_find(r->xt, val->name);
    if (t < 0 || r->gt->val[t].kind != val->kind)
      return fail(r, RT_TRAIN_ERR_GRAPH, "@%s of the inference graph is not in the training graph", val->name);
    if (!ir_type_equal(&r->gt->val[t].type, &val->type)) {
      char a[96], b[96];
      return fail(r, RT_TRAIN_ERR_GRAPH, "@%s is %s for inference but %s for training", val->name,
                  ir_type_str(&val->type, a, sizeof a), ir_type_str(&r->gt->val[t].type, b, sizeof b));
    }
    r->pairs[2 * r->npairs] = v;
    r->pairs[2 * r->npairs + 1] = t;
    r->npairs++;
  }
  return RT_TRAIN_OK;
}

static void copy_params(Run *r) {
  for (int i = 0; i < r->npairs; i++) {
    int v = r->pairs[2 * i], t = r->pairs[2 * i + 1];
    size_t elem = rt_cpu_is_int(r->xi, v) ? sizeof(int64_t) : sizeof(float);
    memcpy(rt_cpu_data(r->xi, v), rt_cpu_data(r->xt, t), elem * (size_t)rt_cpu_numel(r->xi, v));
  }
}

static RtTrainStatus check_data(Run *r, const RtTrainData *d, const char *which, const Io *io) {
  if (!d || !d->images || !d->labels || d->n < 1)
    return fail(r, RT_TRAIN_ERR_DATA, "%s set is empty", which);
  if (d->sample_bytes != io->sample)
    return fail(r, RT_TRAIN_ERR_DATA, "%s set: %lld bytes per image, but input 'image' holds %lld", which,
                (long long)d->sample_bytes, (long long)io->sample);
  for (int64_t i = 0; i < d->n; i++)
    if (d->labels[i] >= io->classes)
      return fail(r, RT_TRAIN_ERR_DATA, "%s set: label %d of image %lld is not one of the %lld classes", which,
                  d->labels[i], (long long)i, (long long)io->classes);
  return RT_TRAIN_OK;
}

/* Writes sample `idx` of d, normalized, at dst. */
static void put_image(float *dst, const RtTrainData *d, int64_t idx, float scale, float shift) {
  const uint8_t *src = d->images + idx * d->sample_bytes;
  for (int64_t k = 0; k < d->sample_bytes; k++) dst[k] = (float)src[k] * scale + shift;
}

RtTrainStatus rt_train_cpu_evaluate(RtCpu *x, const IrGraph *g_infer, int64_t batch, const RtTrainData *test,
                                    float mean, float std, double *accuracy, char *err, size_t errlen) {
  Run r = {.gi = g_infer, .err = err, .errlen = errlen};
  RtTrainStatus st = find_io(&r, g_infer, 0, &r.ii);
  if (st) return st;
  if ((st = check_data(&r, test, "test", &r.ii))) return st;
  if (!(std > 0)) return fail(&r, RT_TRAIN_ERR_CONFIG, "normalization std must be positive");
  if (batch < 1 || rt_cpu_numel(x, r.ii.image) != batch * r.ii.sample)
    return fail(&r, RT_TRAIN_ERR_CONFIG, "evaluation batch %lld is not the executor's", (long long)batch);
  float scale = 1.0f / (255.0f * std), shift = -mean / std;
  float *img = rt_cpu_data(x, r.ii.image);
  const float *logits = rt_cpu_data(x, r.ii.logits);
  int64_t *lab = r.ii.label >= 0 && rt_cpu_is_int(x, r.ii.label) ? rt_cpu_data(x, r.ii.label) : NULL;
  int64_t right = 0, C = r.ii.classes;
  for (int64_t at = 0; at < test->n; at += batch) {
    int64_t m = test->n - at < batch ? test->n - at : batch;
    for (int64_t i = 0; i < batch; i++) {
      if (i < m) put_image(img + i * r.ii.sample, test, at + i, scale, shift);
      else memset(img + i * r.ii.sample, 0, sizeof(float) * (size_t)r.ii.sample);
      if (lab) lab[i] = i < m ? test->labels[at + i] : 0; /* a forward-only graph still computes its loss */
    }
    if (rt_cpu_run(x, err, errlen)) return RT_TRAIN_ERR_RUN;
    for (int64_t i = 0; i < m; i++) {
      const float *row = logits + i * C;
      int64_t best = 0;
      for (int64_t c = 1; c < C; c++)
        if (row[c] > row[best]) best = c;
      right += best == test->labels[at + i];
    }
  }
  *accuracy = (double)right / (double)test->n;
  return RT_TRAIN_OK;
}

static int64_t train_int(const IrGraph *g, const char *key) {
  const IrAttr *a = ir_train_find(g, key);
  return a && a->kind == IR_ATTR_INT ? a->i[0] : 0;
}

/* The loss scale fed every step: a static scale from the train section, else 1. */
static float loss_scale_of(const IrGraph *g) {
  const IrAttr *kind = ir_train_find(g, "loss_scale");
  const IrAttr *scale = ir_train_find(g, "loss_scale_scale");
  if (kind && kind->kind == IR_ATTR_STR && kind->s && strcmp(kind->s, "static") == 0 && scale &&
      scale->kind == IR_ATTR_FLOAT)
    return (float)scale->f;
  return 1.0f;
}

static double window_mean(const double *w, int64_t n) {
  double s = 0;
  int64_t m = n < RT_TRAIN_WINDOW ? n : RT_TRAIN_WINDOW;
  for (int64_t i = 0; i < m; i++) s += w[i];
  return m ? s / (double)m : 0;
}

static RtTrainStatus train(Run *r, const RtTrainData *data, const RtTrainData *test, const RtTrainCfg *cfg,
                           RtTrainResult *res) {
  RtTrainStatus st;
  int64_t batch = cfg->batch ? cfg->batch : train_int(r->gt, "batch");
  int64_t epochs = cfg->epochs ? cfg->epochs : train_int(r->gt, "epochs");
  int64_t eval_batch = cfg->eval_batch ? cfg->eval_batch : batch;
  if (batch < 1) return fail(r, RT_TRAIN_ERR_CONFIG, "no batch size (the train section has none, or it is below 1)");
  if (epochs < 1) return fail(r, RT_TRAIN_ERR_CONFIG, "no epoch count (the train section has none, or it is below 1)");
  if (eval_batch < 1) return fail(r, RT_TRAIN_ERR_CONFIG, "evaluation batch %lld below 1", (long long)eval_batch);
  if (!(cfg->std > 0) || !isfinite(cfg->mean)) return fail(r, RT_TRAIN_ERR_CONFIG, "normalization std must be positive");
  if ((st = find_io(r, r->gt, 1, &r->it)) || (st = find_io(r, r->gi, 0, &r->ii))) return st;
  if (r->it.sample != r->ii.sample || r->it.classes != r->ii.classes)
    return fail(r, RT_TRAIN_ERR_GRAPH, "the training and inference graphs have different image or logits shapes");
  if ((st = check_data(r, data, "training", &r->it)) || (st = check_data(r, test, "test", &r->ii))) return st;
  if (data->n < batch)
    return fail(r, RT_TRAIN_ERR_DATA, "training set of %lld images is smaller than one batch of %lld",
                (long long)data->n, (long long)batch);
  int64_t spe = data->n / batch;
  if (cfg->steps_per_epoch > 0 && cfg->steps_per_epoch < spe) spe = cfg->steps_per_epoch;
  RtSched sched;
  if (rt_sched_init(&sched, r->gt, spe, epochs, r->err, r->errlen)) return RT_TRAIN_ERR_CONFIG;

  if (rt_cpu_new(r->gt, batch, &r->xt, r->err, r->errlen) || rt_cpu_new(r->gi, eval_batch, &r->xi, r->err, r->errlen))
    return RT_TRAIN_ERR_GRAPH;
  if ((st = pair_params(r))) return st;
  if (cfg->init && rt_init_cpu(r->xt, r->gt, cfg->seed, r->err, r->errlen)) return RT_TRAIN_ERR_INIT;
  r->order = malloc(sizeof(int64_t) * (size_t)data->n);
  if (!r->order) return fail(r, RT_TRAIN_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < data->n; i++) r->order[i] = i;

  float *img = rt_cpu_data(r->xt, r->it.image);
  int64_t *lab = rt_cpu_data(r->xt, r->it.label);
  float *lr = rt_cpu_data(r->xt, r->it.lr);
  if (r->it.scale >= 0) *(float *)rt_cpu_data(r->xt, r->it.scale) = loss_scale_of(r->gt);
  const float *loss = rt_cpu_data(r->xt, r->it.loss);
  float scale = 1.0f / (255.0f * cfg->std), shift = -cfg->mean / cfg->std;
  uint64_t rng = cfg->seed ^ 0x5f3759df2545f491ull;
  int64_t t = 0;
  double head[RT_TRAIN_WINDOW], tail[RT_TRAIN_WINDOW];
  for (int64_t e = 0; e < epochs; e++) {
    RtTrainEpoch ep = {.epoch = e};
    double t0 = now_s(), sum = 0;
    shuffle(r->order, data->n, &rng);
    for (int64_t s = 0; s < spe; s++, t++) {
      for (int64_t i = 0; i < batch; i++) {
        int64_t idx = r->order[s * batch + i];
        put_image(img + i * r->it.sample, data, idx, scale, shift);
        lab[i] = data->labels[idx];
      }
      ep.lr_last = rt_sched_lr(&sched, t);
      *lr = (float)ep.lr_last;
      if (rt_cpu_run(r->xt, r->err, r->errlen)) return RT_TRAIN_ERR_RUN;
      double l = *loss;
      if (!isfinite(l))
        return fail(r, RT_TRAIN_ERR_DIVERGED, "loss is %g at epoch %lld step %lld (lr %g)", l, (long long)e,
                    (long long)s, ep.lr_last);
      if (s < RT_TRAIN_WINDOW) head[s] = l;
      tail[s % RT_TRAIN_WINDOW] = l;
      sum += l;
      ep.steps = s + 1;
      ep.step_total = t + 1;
    }
    ep.train_seconds = now_s() - t0;
    ep.loss_mean = sum / (double)ep.steps;
    ep.loss_head = window_mean(head, ep.steps);
    ep.loss_tail = window_mean(tail, ep.steps);
    ep.images_per_s = ep.train_seconds > 0 ? (double)(ep.steps * batch) / ep.train_seconds : 0;
    double t1 = now_s();
    copy_params(r);
    if ((st = rt_train_cpu_evaluate(r->xi, r->gi, eval_batch, test, cfg->mean, cfg->std, &ep.test_accuracy, r->err,
                                    r->errlen)))
      return st;
    ep.eval_seconds = now_s() - t1;
    ep.test_n = test->n;
    if (res) {
      if (e == 0) res->loss_first = ep.loss_head;
      res->epochs = e + 1;
      res->steps = t;
      res->loss_last = ep.loss_tail;
      res->test_accuracy = ep.test_accuracy;
      res->train_seconds += ep.train_seconds;
      res->images_per_s = res->train_seconds > 0 ? (double)(t * batch) / res->train_seconds : 0;
    }
    if (cfg->on_epoch && cfg->on_epoch(&ep, cfg->user))
      return fail(r, RT_TRAIN_STOPPED, "stopped by the caller after epoch %lld", (long long)e);
  }
  return RT_TRAIN_OK;
}

RtTrainStatus rt_train_cpu(const IrGraph *g_train, const IrGraph *g_infer, const RtTrainData *data,
                           const RtTrainData *test, const RtTrainCfg *cfg, RtTrainResult *res, char *err,
                           size_t errlen) {
  Run r = {.gt = g_train, .gi = g_infer, .err = err, .errlen = errlen};
  if (res) memset(res, 0, sizeof *res);
  if (errlen) err[0] = 0;
  RtTrainStatus st = train(&r, data, test, cfg, res);
  rt_cpu_free(r.xt);
  rt_cpu_free(r.xi);
  free(r.pairs);
  free(r.order);
  return st;
}
