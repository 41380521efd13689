/* rt_sched.h - the learning rate at each step, from a graph's train section.
 *
 * The train section (as lowering flattens it into IrGraph.train) gives the
 * base rate `lr` (from optimizer = sgd(lr=...)), `schedule` ("constant",
 * "step" or "cosine"; absent means constant, as docs/language.md says),
 * `warmup_epochs`, and for step `schedule_every` (epochs) and
 * `schedule_gamma`.  With S steps per epoch and E epochs, for step t
 * (0-based, t = epoch * S + batch):
 *
 *   warm-up, t < W = warmup_epochs*S:  lr * (t + 1) / W
 *   constant:                          lr
 *   step:                              lr * gamma^floor(t / (every*S))   epochs counted from the start
 *   cosine:                            lr * (1 + cos(pi * (t - W) / (E*S - W))) / 2
 *
 * so cosine falls from lr right after warm-up towards 0 at the end of the
 * run.  Steps past the run keep the last step's rate.  Unknown schedules,
 * missing or wrong-kind keys, and a warm-up as long as the run are errors. */
#ifndef NETC_RT_SCHED_H
#define NETC_RT_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

typedef enum RtSchedStatus {
  RT_SCHED_OK = 0,
  RT_SCHED_ERR_TRAIN, /* the train section lacks a key, has one of the wrong kind, or an unknown schedule */
  RT_SCHED_ERR_RANGE, /* steps per epoch or epochs below 1 */
} RtSchedStatus;

typedef enum RtSchedKind { RT_SCHED_CONSTANT, RT_SCHED_STEP, RT_SCHED_COSINE } RtSchedKind;

typedef struct RtSched {
  RtSchedKind kind;
  double lr;           /* the optimizer's base rate */
  double gamma;        /* step: factor per decay */
  int64_t every_steps; /* step: steps between decays */
  int64_t warmup_steps;
  int64_t total_steps;
  int64_t warmup_asked; /* when the train section's warm-up (epochs) was not shorter than the run and
                           was cut to half of it: the epochs it asked for; else 0 */
} RtSched;

/* Reads g's train section for a run of `epochs` epochs of steps_per_epoch
 * steps.  A warm-up as long as the run or longer (a short trial run of a
 * model whose recipe warms up for 5 epochs) is cut to half the run's steps,
 * and warmup_asked says so, for the caller to warn once.  On failure *s is
 * zeroed and err says why. */
RtSchedStatus rt_sched_init(RtSched *s, const IrGraph *g, int64_t steps_per_epoch, int64_t epochs, char *err,
                            size_t errlen);
/* The learning rate of step t (t < 0 counts as 0). */
double rt_sched_lr(const RtSched *s, int64_t t);

#endif
