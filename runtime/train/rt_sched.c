/* rt_sched.c - learning-rate schedules with linear warm-up (see rt_sched.h). */
#include "rt_sched.h"
#include "rt_err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const double PI = 3.14159265358979323846;

static RtSchedStatus fail(RtSched *s, RtSchedStatus st, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static RtSchedStatus fail(RtSched *s, RtSchedStatus st, char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  memset(s, 0, sizeof *s);
  rt_verrf(err, errlen, fmt, ap);
  va_end(ap);
  return st;
}

/* A train entry of the given kind, or NULL. */
static const IrAttr *train_get(const IrGraph *g, const char *key, IrAttrKind kind) {
  const IrAttr *a = ir_train_find(g, key);
  return a && a->kind == kind ? a : NULL;
}

RtSchedStatus rt_sched_init(RtSched *s, const IrGraph *g, int64_t steps_per_epoch, int64_t epochs, char *err,
                            size_t errlen) {
  memset(s, 0, sizeof *s);
  if (steps_per_epoch < 1 || epochs < 1)
    return fail(s, RT_SCHED_ERR_RANGE, err, errlen,
                "schedule: %lld steps per epoch and %lld epochs; both must be at least 1", (long long)steps_per_epoch,
                (long long)epochs);
  if (epochs > INT64_MAX / steps_per_epoch)
    return fail(s, RT_SCHED_ERR_RANGE, err, errlen, "schedule: %lld epochs of %lld steps is too many",
                (long long)epochs, (long long)steps_per_epoch);
  const IrAttr *lr = train_get(g, "lr", IR_ATTR_FLOAT);
  if (!lr || !(lr->f >= 0) || !isfinite(lr->f))
    return fail(s, RT_SCHED_ERR_TRAIN, err, errlen, "train section: '%s' must be a finite number >= 0", "lr");
  const IrAttr *sched = ir_train_find(g, "schedule");
  if (sched && (sched->kind != IR_ATTR_STR || !sched->s))
    return fail(s, RT_SCHED_ERR_TRAIN, err, errlen, "train section: '%s' must be a name", "schedule");
  const char *name = sched ? sched->s : "constant";
  if (strcmp(name, "constant") == 0) {
    s->kind = RT_SCHED_CONSTANT;
  } else if (strcmp(name, "step") == 0) {
    s->kind = RT_SCHED_STEP;
  } else if (strcmp(name, "cosine") == 0) {
    s->kind = RT_SCHED_COSINE;
  } else {
    return fail(s, RT_SCHED_ERR_TRAIN, err, errlen,
                "train section: unknown schedule '%s' (known: constant, step, cosine)", name);
  }
  int64_t warmup = 0;
  if (sched) {
    const IrAttr *w = train_get(g, "warmup_epochs", IR_ATTR_INT);
    if (!w || w->i[0] < 0)
      return fail(s, RT_SCHED_ERR_TRAIN, err, errlen, "train section: '%s' must be an integer >= 0", "warmup_epochs");
    warmup = w->i[0];
  }
  if (s->kind == RT_SCHED_STEP) {
    const IrAttr *every = train_get(g, "schedule_every", IR_ATTR_INT);
    const IrAttr *gamma = train_get(g, "schedule_gamma", IR_ATTR_FLOAT);
    if (!every || every->i[0] < 1)
      return fail(s, RT_SCHED_ERR_TRAIN, err, errlen, "train section: step schedule needs '%s' >= 1", "schedule_every");
    if (!gamma || !(gamma->f >= 0) || !isfinite(gamma->f))
      return fail(s, RT_SCHED_ERR_TRAIN, err, errlen, "train section: step schedule needs '%s' >= 0", "schedule_gamma");
    s->gamma = gamma->f;
    s->every_steps = every->i[0] > INT64_MAX / steps_per_epoch ? INT64_MAX : every->i[0] * steps_per_epoch;
  }
  s->lr = lr->f;
  s->total_steps = epochs * steps_per_epoch;
  s->warmup_steps = warmup * steps_per_epoch;
  if (warmup > 0 && warmup >= epochs) { /* leave half the run after the warm-up */
    s->warmup_asked = warmup;
    s->warmup_steps = s->total_steps / 2;
  }
  return RT_SCHED_OK;
}

double rt_sched_lr(const RtSched *s, int64_t t) {
  if (t < 0) t = 0;
  if (t >= s->total_steps) t = s->total_steps - 1;
  if (t < s->warmup_steps) return s->lr * (double)(t + 1) / (double)s->warmup_steps;
  switch (s->kind) {
  case RT_SCHED_STEP: return s->lr * pow(s->gamma, (double)(t / s->every_steps));
  case RT_SCHED_COSINE:
    return s->lr * 0.5 * (1.0 + cos(PI * (double)(t - s->warmup_steps) / (double)(s->total_steps - s->warmup_steps)));
  case RT_SCHED_CONSTANT: break;
  }
  return s->lr;
}
