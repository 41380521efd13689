/* net.h - netc's public C API: load a compiled network, train it, run it.
 *
 * A NetModel is one network (its training step and its inference graph,
 * from a model.so written by `netc FILE.net -o model.so`, or a .net file
 * compiled in-process) bound to one device: the GPU executor (CUDA graph
 * captured once, replayed every step) or the plain-C CPU executor.  Its
 * parameters live on that device; they go in and out of safetensors files
 * under torchvision's names.
 *
 *   NetModel *m;
 *   NetLoadOpts o = {.device = "auto", .seed = 1};
 *   if (net_load("models/smallcnn.net", &o, &m)) { puts(net_last_error()); return 1; }
 *   NetTrainConfig c = {.data = NET_DATA_SYNTHETIC, .steps = 100};
 *   if (net_train(m, &c)) puts(net_last_error());
 *   net_weights_save(m, "smallcnn.safetensors");
 *   net_free(m);
 *
 * Conventions.  Every function that can fail returns a NetStatus; NET_OK is
 * 0.  On failure the message (one line, for people) is kept in a buffer of
 * the calling thread and returned by net_last_error() until that thread's
 * next failing call; calls that succeed leave it alone.  Nothing prints,
 * nothing exits, and two models share no state: use each model from one
 * thread at a time (different models may run on different threads).  Every
 * pointer argument may be NULL, which is an error (NET_ERR_ARG), except in
 * net_free.
 *
 * Batch size.  A model is loaded for one training batch (NetLoadOpts.batch,
 * else the one the model was compiled for).  A net_step with another batch
 * rebuilds the training executor for that batch -- on the GPU the memory
 * plan is made again (pass_memplan), the kernels compiled for it (or taken
 * from the NVRTC cache) and the step captured again -- and keeps the
 * parameters; steps of an unchanged batch replay the captured graph.
 * net_infer takes any number of images and runs them in chunks of the
 * inference executor's batch (the training batch), padding the last chunk.
 *
 * Precision and loss scale.  The precision is the compiled graph's (fp16
 * convolutions by default; the CPU executor rounds like the GPU).  The loss
 * scale fed to a step is the caller's, else the train section's static
 * scale, else 1; a graph compiled with dynamic loss scaling keeps its scale
 * in STATE @loss_scale on the device and takes no scale from the caller. */
#ifndef NETC_NET_H
#define NETC_NET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct NetModel NetModel;

typedef enum NetStatus {
  NET_OK = 0,
  NET_ERR_ARG,      /* a NULL handle or pointer, a batch or count below 1, an unknown option value */
  NET_ERR_IO,       /* a file cannot be opened, read or written */
  NET_ERR_MODEL,    /* not a model, compile errors, a graph without what the call needs */
  NET_ERR_WEIGHTS,  /* a weights file that does not fit the model (tensors named in the message) */
  NET_ERR_DATA,     /* images or labels that do not fit the model, a data set that does not load */
  NET_ERR_NO_GPU,   /* device "gpu" asked for, but no driver, no GPU, or a build without the GPU back end */
  NET_ERR_DEVICE,   /* a CUDA, cuDNN or NVRTC call failed (the message names it), or device memory ran out */
  NET_ERR_RUN,      /* the CPU executor failed on a node */
  NET_ERR_DIVERGED, /* the loss became NaN or infinite */
  NET_ERR_NOMEM,
  NET_STOPPED,      /* a net_train callback asked to stop (not a failure of the run) */
} NetStatus;

/* "NET_ERR_IO", ... */
const char *net_status_name(NetStatus s);
/* The calling thread's last failure message ("" before any). */
const char *net_last_error(void);

/* --- loading ---------------------------------------------------------- */

typedef struct NetLoadOpts {
  const char *device;    /* "auto" or NULL: the GPU when a driver and a GPU are present, else the CPU; "cpu"; "gpu" */
  int gpu;               /* GPU ordinal */
  int64_t batch;         /* 0: the batch the model was compiled for (a .net file: its train section's) */
  uint64_t seed;         /* parameter initialization (rt_init) */
  const char *precision; /* .net files only: "fp32", "fp16" or "bf16" (NULL: the train section's, else fp16) */
  const char *cache_dir; /* NVRTC kernel cache (NULL: $XDG_CACHE_HOME/netc, else ~/.cache/netc) */
  int inference_only;    /* no training executor: net_step and net_train fail */
  int keep_grads;        /* keep every parameter's gradient readable after a step (for net_step_save) */
} NetLoadOpts;

/* Loads path (a model.so, or a .net file), builds its executors on the
 * device and initializes every parameter and state from the seed
 * (torchvision's initialization; see rt_init.h).  opts may be NULL (all
 * defaults).  *out is NULL on failure. */
NetStatus net_load(const char *path, const NetLoadOpts *opts, NetModel **out);
void net_free(NetModel *m); /* takes NULL */

/* "gpu" or "cpu": where the model runs. */
const char *net_device(const NetModel *m);
/* The current training batch, the number of classes, and the elements of
 * one image (C*H*W); *chw may give C, H, W (NULL to skip). */
int64_t net_batch(const NetModel *m);
int64_t net_classes(const NetModel *m);
int64_t net_image_numel(const NetModel *m, int64_t chw[3]);

/* --- weights ------------------------------------------------------------ */

/* Reads every parameter and running statistic from a safetensors file
 * (F32/F16/BF16, torchvision names, filters KCRS).  Momentum buffers may be
 * absent (they keep their values); any other missing, extra or mis-shaped
 * tensor is an error and nothing is changed. */
NetStatus net_weights_load(NetModel *m, const char *path);
/* Writes every parameter and state (F32); the file is replaced atomically. */
NetStatus net_weights_save(NetModel *m, const char *path);

/* --- one step, inference ------------------------------------------------ */

typedef struct NetBatch {
  int64_t n;                 /* images in the batch (the training batch; another one rebuilds, see above) */
  const float *images;       /* n*C*H*W floats, NCHW, already normalized; or NULL and ... */
  const uint8_t *images_u8;  /* ... n*C*H*W bytes, NCHW, fed as (x/255 - mean)/std */
  float mean, std;           /* normalization of images_u8 (std 0: mean 0, std 1) */
  const int64_t *labels;     /* n class indices */
  float lr;                  /* <= 0: the train section's base rate */
  float loss_scale;          /* <= 0: the train section's static scale, else 1 */
} NetBatch;

typedef struct NetStepOut {
  float loss;                /* the step's mean loss (unscaled) */
  float lr, loss_scale;      /* what the step was fed */
  float *logits;             /* NULL, or n*classes floats to fill */
} NetStepOut;

/* One training step: forward, backward, SGD update of the parameters in
 * place.  out may be NULL. */
NetStatus net_step(NetModel *m, const NetBatch *in, NetStepOut *out);
/* Writes what the last net_step computed: `loss`, `logits` [n, classes],
 * `P.grad` for every parameter P (unscaled; needs NetLoadOpts.keep_grads
 * on the GPU, whose memory plan otherwise reuses their buffers), and every
 * parameter and state after the update. */
NetStatus net_step_save(NetModel *m, const char *path);

/* Logits [n, classes] of n normalized NCHW images with the inference graph
 * (running batch-norm statistics), after copying the trained parameters
 * into it. */
NetStatus net_infer(NetModel *m, const float *images, int64_t n, float *logits);

/* --- the training loop -------------------------------------------------- */

typedef enum NetDataKind {
  NET_DATA_SYNTHETIC = 0, /* seeded images whose class shows in their pixels (learnable), 10% held out */
  NET_DATA_IDX,           /* a Fashion-MNIST/MNIST folder: {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] */
  NET_DATA_MEMORY,        /* the arrays below */
} NetDataKind;

typedef struct NetStepInfo {
  int64_t step, steps_total;  /* 1-based step just run, and how many the run has */
  int64_t epoch, epochs;      /* 0-based epoch, and how many */
  double loss, lr;
  double images_per_s;        /* over the run so far */
  double elapsed_s;
} NetStepInfo;

typedef struct NetEpochInfo {
  int64_t epoch, steps;       /* 0-based; steps run in it */
  double loss_mean;
  double loss_first, loss_last; /* mean of the epoch's first and last min(10, steps) steps */
  double lr_last;             /* the rate of its last step */
  double test_accuracy;       /* top-1, 0..1; -1 when the run has no test set */
  int64_t test_n;
  double train_seconds, eval_seconds, images_per_s;
} NetEpochInfo;

typedef struct NetTrainResult {
  int64_t steps, epochs;
  double loss_first, loss_last; /* mean of the first and last min(10, steps) steps */
  double test_accuracy;         /* after the last epoch (-1: none) */
  double train_seconds, images_per_s;
} NetTrainResult;

/* Callbacks return non-zero to stop the run (net_train then returns NET_STOPPED). */
typedef int (*NetStepFn)(const NetStepInfo *s, void *user);
typedef int (*NetEpochFn)(const NetEpochInfo *e, void *user);
typedef int (*NetCheckpointFn)(int64_t step, const char *path, void *user);

typedef struct NetTrainConfig {
  NetDataKind data;
  const char *idx_dir;              /* NET_DATA_IDX */
  int64_t train_limit, test_limit;  /* NET_DATA_IDX: use the first N images (0: all) */
  int64_t synthetic_n;              /* NET_DATA_SYNTHETIC: training images (0: 16 batches) */
  const uint8_t *images, *labels;   /* NET_DATA_MEMORY: n images of C*H*W bytes (NCHW), n labels */
  int64_t n;
  const uint8_t *test_images, *test_labels; /* may be NULL: no evaluation */
  int64_t test_n;
  float mean, std;                  /* normalization of x/255 (std 0: Fashion-MNIST's for IDX, else 0.5, 0.5;
                                     * a negative or non-finite std or mean is an error) */
  int64_t epochs;                   /* 0: the train section's (or as many as `steps` needs) */
  int64_t steps;                    /* 0: every full batch of every epoch; else stop after this many */
  uint64_t seed;                    /* shuffling and synthetic data (parameters were seeded at load) */
  NetStepFn on_step;                /* every log_every steps (0: every step) and at the last */
  int64_t log_every;
  NetEpochFn on_epoch;
  const char *checkpoint;           /* net_weights_save here every checkpoint_every steps and at the end */
  int64_t checkpoint_every;
  NetCheckpointFn on_checkpoint;    /* after each save; may be NULL */
  void *user;
  NetTrainResult *result;           /* may be NULL; filled as far as the run got */
} NetTrainConfig;

/* Trains: each epoch shuffles the training set, runs a step per full batch
 * with the rate from the train section's schedule (rt_sched.h), then copies
 * the parameters into the inference graph and measures top-1 accuracy on
 * the test set. */
NetStatus net_train(NetModel *m, const NetTrainConfig *cfg);

/* --- benchmark ------------------------------------------------------------ */

typedef struct NetBenchResult {
  double ms_per_step, images_per_s;
  size_t device_bytes;        /* peak device memory the executor holds (GPU), or 0 */
  int cache_hit;              /* kernels came from the NVRTC cache */
} NetBenchResult;

/* Times `steps` steps of the training graph (or the inference graph) on
 * seeded inputs written to the device once: the step captured, 3 warm-up
 * replays, then the timed ones (CUDA events on the GPU).  Parameters are
 * changed by training steps. */
NetStatus net_bench(NetModel *m, int inference, int steps, NetBenchResult *r);

#ifdef __cplusplus
}
#endif

#endif
