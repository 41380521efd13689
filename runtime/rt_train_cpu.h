/* rt_train_cpu.h - train a compiled graph on the CPU executor over an
 * in-memory labelled image set, and measure it on a test set.
 *
 * Two graphs of one model: the training step (the pipeline through
 * autodiff: inputs image, label, lr, loss_scale; outputs [loss, logits];
 * sgd_update in place) and the same model compiled for inference (running
 * batch-norm statistics, output [logits]).  Evaluating with the training
 * graph would update the running statistics and use batch statistics, so
 * before each evaluation every parameter and state of the inference graph
 * is copied, by name, from the training executor.
 *
 * Each epoch: shuffle the training set (seeded Fisher-Yates, a fresh order
 * per epoch), then for every full batch write the images normalized as
 * (x/255 - mean)/std into `image`, the labels into `label`, the scheduled
 * rate (rt_sched) into `lr` and the loss scale into `loss_scale` (the
 * train section's static scale, else 1: f32 on the CPU cannot overflow the
 * way f16 does, so a dynamic scaler has nothing to do), and run the step.
 * A partial last batch is dropped, as PyTorch's drop_last.  After the epoch
 * the test set is classified (argmax of the logits; a partial last batch is
 * padded and only its real images counted) and the epoch's numbers go to the
 * caller's callback, which may stop the run.
 *
 * Images are bytes in the image input's memory order, one sample after the
 * other; labels are bytes.  Nothing is printed and nothing exits: every
 * failure returns a status with a message in the caller's buffer. */
#ifndef NETC_RT_TRAIN_CPU_H
#define NETC_RT_TRAIN_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "rt_cpu.h"

typedef enum RtTrainStatus {
  RT_TRAIN_OK = 0,
  RT_TRAIN_ERR_GRAPH,    /* a graph lacks an input or output training needs, or the two disagree */
  RT_TRAIN_ERR_DATA,     /* sample size, label range or set size does not fit the graph */
  RT_TRAIN_ERR_CONFIG,   /* batch, epochs or schedule unusable (see rt_sched.h) */
  RT_TRAIN_ERR_INIT,     /* a parameter without an initialization rule (see rt_init.h) */
  RT_TRAIN_ERR_RUN,      /* the executor failed on a node */
  RT_TRAIN_ERR_DIVERGED, /* the loss became NaN or infinite */
  RT_TRAIN_ERR_NOMEM,
  RT_TRAIN_STOPPED,      /* the callback asked to stop (not an error of the run) */
} RtTrainStatus;

/* Images and labels in memory; not copied, must outlive the run. */
typedef struct RtTrainData {
  const uint8_t *images; /* n * sample_bytes, 0..255 */
  const uint8_t *labels; /* n, each < the number of classes */
  int64_t n;
  int64_t sample_bytes;  /* must equal the image input's elements per sample */
} RtTrainData;

/* One epoch's numbers. */
typedef struct RtTrainEpoch {
  int64_t epoch;          /* 0-based */
  int64_t steps;          /* steps run in this epoch */
  int64_t step_total;     /* steps run since the start */
  double loss_mean;       /* mean training loss of the epoch's steps */
  double loss_head;       /* mean loss of its first min(RT_TRAIN_WINDOW, steps) steps */
  double loss_tail;       /* ... and of its last ones */
  double lr_last;         /* rate of the last step */
  double test_accuracy;   /* fraction of the test set classified right, 0..1 */
  int64_t test_n;
  double train_seconds;   /* wall time of the steps (input preparation included) */
  double images_per_s;    /* training images per second of train_seconds */
  double eval_seconds;
} RtTrainEpoch;

enum { RT_TRAIN_WINDOW = 10, RT_TRAIN_ERRMAX = 512 };

/* Return non-zero to stop after this epoch. */
typedef int (*RtTrainEpochFn)(const RtTrainEpoch *e, void *user);

typedef struct RtTrainCfg {
  int64_t batch;          /* 0: the train section's `batch` */
  int64_t epochs;         /* 0: the train section's `epochs` (an error when it has none) */
  int64_t steps_per_epoch;/* 0: every full batch; else at most this many (a shorter run) */
  int64_t eval_batch;     /* 0: the training batch */
  uint64_t seed;          /* initialization and shuffling */
  int init;               /* 1: rt_init the parameters and state first; 0: keep the executor's */
  float mean, std;        /* normalization of x/255 */
  RtTrainEpochFn on_epoch;/* may be NULL */
  void *user;
} RtTrainCfg;

/* Summary of a whole run. */
typedef struct RtTrainResult {
  int64_t epochs, steps;
  double loss_first;      /* mean loss of the first min(RT_TRAIN_WINDOW, steps) steps */
  double loss_last;       /* mean loss of the last ones */
  double test_accuracy;   /* after the last epoch */
  double train_seconds, images_per_s;
} RtTrainResult;

/* Trains `train` (g_train, at batch cfg->batch) on `data`, evaluating
 * g_infer on `test` after each epoch.  Both graphs must outlive the call.
 * *res (may be NULL) is filled as far as the run got. */
RtTrainStatus rt_train_cpu(const IrGraph *g_train, const IrGraph *g_infer, const RtTrainData *data,
                           const RtTrainData *test, const RtTrainCfg *cfg, RtTrainResult *res,
                           char *err, size_t errlen);

/* Classifies `test` with executor x of g_infer, made for `batch` and
 * already holding its parameters; *accuracy in 0..1. */
RtTrainStatus rt_train_cpu_evaluate(RtCpu *x, const IrGraph *g_infer, int64_t batch,
                                    const RtTrainData *test, float mean, float std, double *accuracy,
                                    char *err, size_t errlen);

#endif
