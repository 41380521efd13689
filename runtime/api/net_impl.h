/* net_impl.h - the NetModel behind net.h's opaque handle, shared by the
 * API's files, and the map of the folder:
 *
 *   net.h            the public header
 *   net_api.c        the handle: load onto a device, free, weights in and
 *                    out, the thread's last error
 *   net_run.c        one step, its results to a file, inference,
 *                    evaluation, the benchmark
 *   net_train.c      net_train: the training loop as a list of steps
 *   net_ckpt.c       checkpoints: the weights with the run's position
 *   net_profile.c    a GPU step timed kernel by kernel
 *   net_model.c/h    where the graphs come from: a model.so or a .net file
 *   net_exec.c/h     one executor interface over a table of backends
 *   net_exec_cpu.c   the CPU backend, over rt_cpu
 *   net_exec_gpu.c   the GPU backend, over rt_gpu (only with the GPU library)
 *   net_cpu_feed.c   the CPU side of the executor's input pipeline
 *   net_graph.c      the optimizer section of a graph, for accumulation
 *   net_status.c/h   the one place library status codes become NetStatus
 *
 * Internal to libnetrt_api. */
#ifndef NETC_NET_IMPL_H
#define NETC_NET_IMPL_H

#include <stdint.h>

#include "arena.h"
#include "ir.h"
#include "net.h"
#include "net_exec.h"
#include "net_model.h"
#include "net_status.h"
#include "rt_weights.h"

enum { NET_ERRMAX = 4096 };

/* The values a step touches in one executor (-1 when absent). */
typedef struct NetIo {
  int image, label, lr, scale, loss, logits;
  int scale_state; /* STATE @loss_scale of a dynamically scaled graph (then scale is -1) */
  int nhwc;        /* the image input is stored NHWC (the API takes NCHW) */
  int64_t c, h, w; /* image dims, NCHW */
} NetIo;

struct NetModel {
  Arena arena;
  NetGraphs graphs;
  IrGraph *gt, *gi; /* training (NULL when inference_only) and inference graphs */
  int gpu, ordinal;
  char *cache_dir;
  char *path, *precision; /* what net_load was given (precision NULL: the default): net_calibrate compiles again */
  int tune;               /* time cuDNN's candidates (NetLoadOpts.tune) */
  NetcOpts opts;          /* every switch (opts.h): the environment's, then NetLoadOpts.options */
  int keep_grads;
  int64_t batch;             /* of the training executor (and the inference one) */
  double memory_limit, held; /* bytes the executors may hold together (0: no limit), and what those made hold */
  int64_t classes, sample;
  NetExec *xt, *xi; /* xi made on first use */
  NetIo it, ii;
  int *pairs, npairs; /* (inference value, training value) of every param and state */
  int infer_stale;    /* the training executor stepped since the last copy */
  int stepped;        /* a net_step ran (net_step_save has something to save) */
  float last_scale;
  float *img; /* one batch of images in the executor's layout */
  int64_t *lab;
  struct NetDist *dist;                  /* net_dist_join's run, or NULL */
  void (*dist_leave)(struct NetDist *d); /* net_free's way out of it (net_dist.c's) */
};

/* Records a failure for net_last_error() and returns s. */
NetStatus net_fail(NetStatus s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's message buffer (NET_ERRMAX bytes), for calls that
 * fill it themselves; then return net_failed(s). */
char *net_err_buf(void);
NetStatus net_failed(NetStatus s);

/* One step of the training executor on m->img/m->lab (already filled for
 * n = m->batch images): writes inputs, runs, reads the loss.  A graph that
 * scales dynamically ignores `scale`: *scale_used (may be NULL) is the
 * scale of its STATE @loss_scale before the step. */
NetStatus net_step_run(NetModel *m, float lr, float scale, float *loss, float *scale_used);
/* Top-1 and top-5 accuracy (top5 may be NULL) of the inference graph over n u8 images. */
NetStatus net_evaluate_u8(NetModel *m, const uint8_t *images, const uint8_t *labels, int64_t n, float mean, float std,
                          double *accuracy, double *top5);
/* Where class `label` ranks in one row of C logits: how many classes score
 * higher, ties going to the lower index as argmax takes the first.  C (a
 * miss at every k) when label is not a class or any logit of the row is
 * not finite: a row of NaNs is never a correct prediction. */
int64_t net_eval_rank(const float *row, int64_t C, int64_t label);
/* Runs the inference graph on m->img, filled by the caller (after
 * net_infer_ready) with n <= batch images in the inference input's layout,
 * the rest zeros; adds to *top1 and *top5 the images whose label ranks
 * first and among the first five. */
NetStatus net_evaluate_batch(NetModel *m, int64_t n, const int64_t *labels, int64_t *top1, int64_t *top5);
/* Converts n NCHW u8/f32 samples into dst in the image input's layout. */
void net_put_images(const NetIo *io, float *dst, const float *f32, const uint8_t *u8, int64_t n, float scale,
                    float shift);
/* net_weights_save with more "__metadata__" entries from meta (may be NULL). */
NetStatus net_weights_save_meta(NetModel *m, const char *path, RtWeightsMetaFn meta, void *meta_user);
/* Rebuilds the executors for batch n, keeping the parameters. */
NetStatus net_rebatch(NetModel *m, int64_t n);
/* Makes the inference executor and copies the trained parameters into it
 * when the training executor stepped since the last copy. */
NetStatus net_infer_ready(NetModel *m);

/* --- net_dist.c: the model's side of a data-parallel run (net_dist_join) ---
 * Each is a collective: every rank calls it at the same point of its run.
 * On a model not joined each does nothing and returns NET_OK. */
/* v[0..n) replaced by its sum over the ranks (added in rank order: the same bits everywhere). */
NetStatus net_dist_sum(NetModel *m, double *v, int n);
/* Every rank holds rank 0's parameters and state (a SHA-256 of the training executor's). */
NetStatus net_dist_same_weights(NetModel *m);
/* The training executor's float state outside the optimizer's (the batch-norm running
 * statistics) averaged over the ranks. */
NetStatus net_dist_average_state(NetModel *m);
/* *any: whether `mine` is set on any rank (a stop asked for on one rank stops all at one step). */
NetStatus net_dist_any(NetModel *m, int mine, int *any);
/* The run's end on every rank: a barrier that says whether all went well
 * (ok); a rank closing after it is no loss to the others. */
NetStatus net_dist_finish(NetModel *m, int ok);

/* An IDX pair DIR/PREFIX-{images-idx3,labels-idx1}-ubyte, the .gz files
 * when they exist (net_train.c); the message in net_err_buf on failure. */
NetStatus net_load_idx(const char *dir, const char *prefix, RtIdxSet *set);
double net_train_lr(const IrGraph *g);
float net_train_loss_scale(const IrGraph *g);

#endif
