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
 * in STATE @loss_scale on the device, takes no scale from the caller, and
 * starts from the train section's init (or net_loss_scale_set's). */
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
  NET_STOPPED,  /* a net_train callback asked to stop (not a failure of the run) */
  NET_ERR_DIST, /* data parallel: another rank failed, left or did not answer in time (the message names it) */
} NetStatus;

/* "NET_ERR_IO", ... */
const char *net_status_name(NetStatus s);
/* The calling thread's last failure message ("" before any). */
const char *net_last_error(void);

/* --- loading ---------------------------------------------------------- */

typedef struct NetLoadOpts {
  const char *device;      /* "auto" or NULL: the GPU when a driver and a GPU are present, else the CPU; "cpu"; "gpu" */
  int gpu;                 /* GPU ordinal */
  int64_t batch;           /* 0: the batch the model was compiled for (a .net file: its train section's) */
  uint64_t seed;           /* parameter initialization (rt_init) */
  const char *precision;   /* .net files only: "fp32", "fp16" or "bf16" (NULL: the train section's, else fp16) */
  const char *cache_dir;   /* NVRTC kernel cache (NULL: $XDG_CACHE_HOME/netc, else ~/.cache/netc) */
  int tune;                /* GPU: time cuDNN's candidate engines for every convolution once and keep the
                          * fastest; winners are remembered in cache_dir/cudnn-tune.txt for later loads */
  int inference_only;      /* no training executor: net_step and net_train fail */
  int keep_grads;          /* keep every parameter's gradient readable after a step (for net_step_save) */
  const char *options;     /* switches over the environment's NETC_* ones, "cuda_graph=0,genstats=0" (NULL: none);
                          * docs/runtime_gpu.md lists them.  An unknown name or bad value fails the load */
  int64_t image_h;         /* .net and .onnx files: the image input's height and width (0: as the file declares; */
  int64_t image_w;         /* image_w 0: image_h).  A model.so keeps its own (netc --image-size) */
  double memory_limit;     /* bytes the model's executors may hold together: activations, parameters and state,
                          * GPU scratch and cuDNN workspace (0: no limit).  A batch whose plan does not fit
                          * fails the load (NET_ERR_DEVICE) naming the largest batch that would */
  double memory_fraction;  /* or this share, in (0, 1], of the device's memory (the machine's for the CPU) */
  const char *int8;        /* .net and .onnx files: layers to run in i8, "layer4.2.conv3,fc" or "all" (every
                           * convolution but the first; netc --int8).  The GPU has no i8 kernels yet */
  const char *int8_scales; /* with int8: a file of their inputs' calibrated scales (net_calibrate; netc
                            * --int8-scales), or NULL: each tensor quantized by its own maximum */
} NetLoadOpts;

/* Loads path (a model.so, or a .net file), builds its executors on the
 * device and initializes every parameter and state from the seed
 * (torchvision's initialization; see rt_init.h).  opts may be NULL (all
 * defaults).  *out is NULL on failure. */
NetStatus net_load(const char *path, const NetLoadOpts *opts, NetModel **out);
void net_free(NetModel *m); /* takes NULL */

/* 1 when a model loaded with device "auto" would run on a GPU (a CUDA driver
 * that sees a GPU, and a build with the GPU back end); else 0 with the
 * reason in why (may be NULL). */
int net_gpu_available(char *why, size_t len);

/* The GPUs a model could run on (ordinals 0 .. count-1); 0 without a
 * CUDA driver or the GPU back end. */
int net_gpu_count(void);

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
/* Writes every parameter and state (F32), optimizer state (momentum
 * buffers, the dynamic loss scale) included: net_weights_load (or a
 * checkpoint) puts all of it back.  The file is replaced atomically. */
NetStatus net_weights_save(NetModel *m, const char *path);
/* Writes a PyTorch state_dict, exactly the keys torchvision's model has:
 * every parameter and running statistic (F32, filters KCRS), and for every
 * batch norm `<bn>.num_batches_tracked` (I64 scalar, = batches_tracked,
 * >= 0: the training batches it saw), no optimizer state.
 * load_state_dict(..., strict=True) takes it; so does net_weights_load.
 * Replaced atomically (docs/training.md, "Exporting to PyTorch"). */
NetStatus net_weights_export(NetModel *m, const char *path, int64_t batches_tracked);

/* --- checkpoints (docs/training.md) --------------------------------------- */

/* Where a training run stands.  A checkpoint is a weights file (everything
 * net_weights_save writes) with this in its "__metadata__". */
typedef struct NetTrainState {
  int64_t step;                /* steps done; the run resumes with step + 1 */
  int64_t epoch;               /* 0-based epoch of the next step */
  int64_t batch_in_epoch;      /* steps of that epoch already done */
  int64_t epochs, steps_total; /* the run's plan */
  uint64_t seed;               /* the run's shuffling and data seed */
  double lr;                   /* rate of the last step */
  int64_t batch;               /* out: the training batch (save takes the model's) */
  char model_name[64];         /* out: the graph's name (save takes the model's) */
  char model_hash[65];         /* out: SHA-256 (hex) of the parameter and state names and shapes */
  int allow_weights;           /* in (load): a plain weights file loads, at position 0 */
  int from_weights;            /* out (load): it was a plain weights file */
  int64_t accum_steps;         /* batches accumulated per step (0 counts as 1); a checkpoint without
                           * the entry, written before it existed, loads as 1 */
  char data[96];               /* the training data ("ImageFolder, 5000 training images in 10 classes"),
                                * which net_train resumes on no other; "": not recorded (older
                                * checkpoints, or a caller's own loop) */
  int64_t world;               /* the processes of the data-parallel run that made it (0 counts as 1; a
                                * checkpoint without the entry loads as 1): each step took world * batch
                                * images (net_dist_join) */
} NetTrainState;

/* Writes m's parameters and state and st's position to path, replaced
 * atomically: a failed save leaves the previous file as it was. */
NetStatus net_checkpoint_save(NetModel *m, const char *path, const NetTrainState *st);
/* Loads a checkpoint of this model at this batch into m and *st.  A
 * missing or malformed file, another model or batch, a newer format or
 * missing position entries are errors (NET_ERR_IO, NET_ERR_WEIGHTS) that
 * leave m unchanged; a plain weights file is one too unless
 * st->allow_weights. */
NetStatus net_checkpoint_load(NetModel *m, const char *path, NetTrainState *st);
/* Reads only the position of the checkpoint at path into *st, for no
 * model (model_name, model_hash and batch are the file's); a plain weights
 * file gives a zero position with from_weights set.  A file that is not
 * safetensors, or a malformed position, is an error. */
NetStatus net_checkpoint_info(const char *path, NetTrainState *st);

/* --- one step, inference ------------------------------------------------ */

typedef struct NetBatch {
  int64_t n;                /* images in the batch (the training batch; another one rebuilds, see above) */
  const float *images;      /* n*C*H*W floats, NCHW, already normalized; or NULL and ... */
  const uint8_t *images_u8; /* ... n*C*H*W bytes, NCHW, fed as (x/255 - mean)/std */
  float mean, std;          /* normalization of images_u8 (std 0: mean 0, std 1) */
  const int64_t *labels;    /* n class indices */
  float lr;                 /* <= 0: the train section's base rate */
  float loss_scale;         /* <= 0: the train section's static scale, else 1 */
} NetBatch;

typedef struct NetStepOut {
  float loss;           /* the step's mean loss (unscaled) */
  float lr, loss_scale; /* what the step was fed */
  float *logits;        /* NULL, or n*classes floats to fill */
} NetStepOut;

/* One training step: forward, backward, SGD update of the parameters in
 * place.  out may be NULL. */
NetStatus net_step(NetModel *m, const NetBatch *in, NetStepOut *out);
/* Sets the scale a dynamically scaled graph's next step starts from (its
 * STATE @loss_scale; the step adjusts it from there).  NET_ERR_ARG for a
 * graph with a static scale, which takes its scale per step (NetBatch). */
NetStatus net_loss_scale_set(NetModel *m, float scale);
/* Writes what the last net_step computed: `loss`, `logits` [n, classes],
 * `P.grad` for every parameter P (unscaled; needs NetLoadOpts.keep_grads
 * on the GPU, whose memory plan otherwise reuses their buffers), and every
 * parameter and state after the update. */
NetStatus net_step_save(NetModel *m, const char *path);

/* Logits [n, classes] of n normalized NCHW images with the inference graph
 * (running batch-norm statistics), after copying the trained parameters
 * into it. */
NetStatus net_infer(NetModel *m, const float *images, int64_t n, float *logits);

/* INT8 calibration: runs m's inference graph (m loaded without int8, on
 * the CPU) on the whole batches among n normalized NCHW images and writes
 * to path the scale of the input of every layer that `layers` would
 * quantize, for NetLoadOpts.int8_scales and netc --int8-scales (the file
 * compiler/int8_scales.h describes; written atomically). */
typedef struct NetCalibrateOpts {
  const char *layers; /* as NetLoadOpts.int8 (NULL: "all") */
  const char *method; /* "entropy" (NULL: the default), "percentile", "max" or "mse" */
  double percentile;  /* for "percentile": the share of magnitudes kept unclipped (0: 99.99) */
} NetCalibrateOpts;
NetStatus net_calibrate(NetModel *m, const float *images, int64_t n, const NetCalibrateOpts *o, const char *path);

/* Where an int8 (or fp8) model loses accuracy, layer by layer: q (loaded
 * with int8, or precision fp8) and ref (the same network and weights
 * without it), both on the CPU, run
 * the same n images (whole batches of their common batch size; a last
 * partial batch too).  For each layer of q that takes an i8 or f8e4m3 input:
 *   in     the relative L2 difference of its input, before quantization,
 *          from ref's input of the layer of that name: the error it is handed
 *   act    the relative L2 error its input's quantization makes (the cast's
 *          output against its input, in q: the scale q uses); NaN where
 *          its producer requantized the input itself (pass requant: no
 *          cast), whose `in` is then the input after its quantization
 *   weight the same for its weight (per output channel), 0 when the weight
 *          is not quantized
 *   out    the relative L2 difference of its output from ref's output of
 *          the layer of that name: the error accumulated up to it
 * summed over all images (in, out: NaN where ref has no such layer).  *layers (free it) gets *n of them in graph order;
 * the names are q's and live as long as q. */
typedef struct NetQuantLayer {
  const char *layer;
  double in, act, weight, out;
} NetQuantLayer;
NetStatus net_quant_errors(NetModel *q, NetModel *ref, const float *images, int64_t n, NetQuantLayer **layers,
                           int *nlayers);

/* --- the training loop -------------------------------------------------- */

typedef enum NetDataKind {
  NET_DATA_SYNTHETIC = 0, /* seeded images whose class shows in their pixels (learnable), 10% held out */
  NET_DATA_IDX,           /* a Fashion-MNIST/MNIST folder: {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] */
  NET_DATA_MEMORY,        /* the arrays below */
  NET_DATA_FOLDER,        /* ImageFolder JPEG trees train_dir/<class>/<image>.jpg (docs/data.md) */
} NetDataKind;

/* The normalization (x/255 - mean[c]) / std[c] a data kind gets unless the
 * caller gives one: ImageNet's for FOLDER, Fashion-MNIST's for IDX, 0.5 and
 * 0.5 otherwise. */
void net_data_normalization(NetDataKind kind, float mean[3], float std[3]);

/* A labelled image set read into memory as m's normalized float input:
 * for net_calibrate and net_infer on a data set rather than a batch file.
 * FOLDER: dir is one split of an ImageFolder set (DIR/test, DIR/train),
 * read with the evaluation transform training's test pass uses; IDX: dir
 * holds the four files, and `test` picks t10k-* (else train-*).  At most
 * `limit` images (0: all), evenly spread over the set; normalized as
 * training does, (x/255 - mean[c]) / std[c], the given mean3/std3 or the
 * kind's default.  A set whose floats would take more than max_bytes (0: no
 * limit) is refused.  Unreadable images are left out, counted in *skipped
 * (may be NULL).  Free with net_images_free. */
typedef struct NetImages {
  float *image;   /* n images, NCHW as m takes them */
  int64_t *label; /* n */
  int64_t n;
} NetImages;
typedef struct NetImagesReq {
  NetDataKind kind; /* NET_DATA_FOLDER or NET_DATA_IDX */
  const char *dir;
  int test;
  int64_t limit;
  const float *mean3, *std3; /* both or neither (NULL: the default) */
  int workers;               /* FOLDER: decoding threads (0: every processor) */
  size_t max_bytes;
} NetImagesReq;
NetStatus net_images_load(const NetModel *m, const NetImagesReq *r, NetImages *out, int64_t *skipped);
void net_images_free(NetImages *s); /* takes NULL */

/* What the GPU says while it trains, through NVML (libnvidia-ml.so.1,
 * loaded at run time): -1 in every field it cannot tell (no NVML, the CPU
 * executor, ECC off, no NVLink). */
typedef struct NetGpuWatch {
  double power_w;
  int sm_clock_mhz, temp_c;
  long long ecc_corrected, ecc_uncorrected; /* volatile counts since the driver loaded */
  /* the interconnect, MB/s (10^6 bytes) sent and received: PCIe as NVML
   * last measured it (over 20 ms, once a second), NVLink over all links
   * averaged over the last second or more (unknown in the first second) */
  double pcie_tx_mb_s, pcie_rx_mb_s;
  double nvlink_tx_mb_s, nvlink_rx_mb_s;
} NetGpuWatch;

typedef struct NetStepInfo {
  int64_t step, steps_total; /* 1-based step just run, and how many the run has */
  int64_t epoch, epochs;     /* 0-based epoch, and how many */
  double loss, lr;
  double images_per_s; /* over the run so far */
  double elapsed_s;
  double data_wait_s; /* of the run so far: time the loop waited for batches */
  /* the input pipeline next to the step: who decodes ("nvJPEG hardware",
   * "cpu", "memory" for data held in memory), the images/s it can make and
   * the images/s the steps run at when they do not wait for it, and which
   * of the two bounds the run (1: the input) */
  const char *decoder;
  double input_images_per_s, step_images_per_s;
  int input_bound;
  NetGpuWatch gpu; /* sampled for this call */
  /* the GPU decoder's two sides: images/s of its decode time on the GPU
   * and of the host's time feeding it (0 without it) */
  double decode_gpu_images_per_s, decode_host_images_per_s;
  /* a data-parallel run (net_dist_join): its ranks, every rank's own step
   * rate (step_images_per_s as that rank measured it; NULL outside a run
   * or past 512 ranks), and the slowest rank, which the others wait for */
  int ranks;
  const double *rank_step_images_per_s;
  int slowest_rank;
  /* this rank's gradient exchange per step, mean over the steps timed so
   * far (ms): all of it (on the GPU from the first bucket's all-reduce to
   * the last's end) and the part the step waited for, not hidden behind
   * the backward pass; -1 outside a data-parallel run or before any step
   * was timed (on the GPU also with gradient accumulation, with CUDA graphs
   * off, or with a driver that cannot record events in a graph) */
  double allreduce_ms, allreduce_exposed_ms;
} NetStepInfo;

typedef struct NetEpochInfo {
  int64_t epoch, steps; /* 0-based; steps run in it */
  double loss_mean;
  double loss_first, loss_last; /* mean of the epoch's first and last min(10, steps) steps */
  double lr_last;               /* the rate of its last step */
  double test_accuracy;         /* top-1, 0..1; -1 when the run has no test set */
  int64_t test_n;
  double train_seconds, eval_seconds, images_per_s;
  double test_top5;             /* 0..1; -1 when the run has no test set */
  double data_wait_seconds;     /* of train_seconds, the time the loop waited for batches */
  int64_t unreadable;           /* NET_DATA_FOLDER: images that could not be read so far (skipped) */
  const char *unreadable_first; /* the first few of their messages ("" when none); valid in the callback */
} NetEpochInfo;

typedef struct NetTrainResult {
  int64_t steps, epochs;
  double loss_first, loss_last; /* mean of the first and last min(10, steps) steps */
  double test_accuracy;         /* after the last epoch (-1: none) */
  double train_seconds, images_per_s;
  double test_top5;               /* after the last epoch (-1: none) */
  double data_wait_seconds;       /* of train_seconds, waiting for batches */
  int64_t unreadable;             /* NET_DATA_FOLDER: images skipped as unreadable */
  int64_t skipped_steps;          /* dynamic loss scaling: steps of this call whose update was skipped for
                                   * non-finite gradients (all of them: net_train fails NET_ERR_DIVERGED) */
  char decoder[64];               /* NetStepInfo.decoder at the end (auto may have moved to the CPU's) */
  NetGpuWatch gpu_start, gpu_end; /* before the first step and after the last */
} NetTrainResult;

/* Callbacks return non-zero to stop the run (net_train then returns NET_STOPPED). */
typedef int (*NetStepFn)(const NetStepInfo *s, void *user);
typedef int (*NetEpochFn)(const NetEpochInfo *e, void *user);
typedef int (*NetCheckpointFn)(int64_t step, const char *path, void *user);
/* Something the run worked around and goes on with (a warm-up longer than
 * the run, shortened to fit): called once per such thing, before the first
 * step; the message has no trailing newline. */
typedef void (*NetWarnFn)(const char *message, void *user);

typedef struct NetTrainConfig {
  NetDataKind data;
  const char *idx_dir;             /* NET_DATA_IDX */
  int64_t train_limit, test_limit; /* NET_DATA_IDX: use the first N images (0: all) */
  int64_t synthetic_n;             /* NET_DATA_SYNTHETIC: training images (0: 16 batches); test_limit
                                    * its test images (0: a tenth as many) */
  const uint8_t *images, *labels;  /* NET_DATA_MEMORY: n images of C*H*W bytes (NCHW), n labels */
  int64_t n;
  const uint8_t *test_images, *test_labels; /* may be NULL: no evaluation */
  int64_t test_n;
  float mean, std;   /* normalization of x/255 (std 0: Fashion-MNIST's for IDX, else 0.5, 0.5;
                                     * a negative or non-finite std or mean is an error) */
  int64_t epochs;    /* 0: the train section's (or as many as `steps` needs) */
  int64_t steps;     /* 0: every full batch of every epoch; else stop after this many */
  uint64_t seed;     /* shuffling and synthetic data (parameters were seeded at load) */
  NetStepFn on_step; /* every log_every steps (0: every step) and at the last */
  int64_t log_every;
  NetEpochFn on_epoch;
  const char *checkpoint; /* net_checkpoint_save here every checkpoint_every steps and at the end */
  int64_t checkpoint_every;
  NetCheckpointFn on_checkpoint; /* after each save; may be NULL */
  const char *resume;            /* a checkpoint of this run (same data, epochs, steps, seed): training
                                     * continues at its step, with its parameters, momentum, loss scale
                                     * and place in the shuffled epoch; NULL: from the start */
  void *user;
  NetTrainResult *result; /* may be NULL; filled as far as the run got */
  /* NET_DATA_FOLDER (train_limit and test_limit take that many images spread
   * evenly over the classes) */
  const char *train_dir, *test_dir; /* ROOT/<class>/<image>.jpg; test_dir may be NULL: no evaluation */
  const char *augment;              /* "auto" (NULL), "rrc", "pad_crop", "flip" or "none" (rt_augment.h) */
  int workers;                      /* decoding threads (0: every processor online) */
  float mean3[3], std3[3];          /* per-channel normalization (RGB) of x/255; std3 all 0: the scalar
                                     * mean/std when given, else ImageNet's for folder data */
  int64_t accum_steps;              /* gradient accumulation: each step (optimizer update) runs this many batches
                                     * forward and backward and updates once with their mean gradient; steps,
                                     * epochs, the schedule and checkpoints count updates (0: 1; docs/training.md) */
  NetWarnFn on_warning;             /* may be NULL: the warnings are not shown */
  const char *decoder;              /* NET_DATA_FOLDER: who decodes the training JPEGs -- "gpu" (nvJPEG: the
                                     * JPEG engines where the GPU has them, else its hybrid decoder; crop,
                                     * resize and flip on the GPU), "cpu" (libjpeg-turbo on the worker
                                     * threads), or "auto" (NULL): the GPU's JPEG engines when the model runs
                                     * on a GPU that has them and the input is 64 pixels or more with a
                                     * transform other than pad_crop, else the CPU (docs/data.md) */
  int cpu_share;                    /* with the GPU decoder: the percentage of the training images the worker
                                     * threads decode themselves beside it (1..100), -1 for none, 0 (default):
                                     * balanced each epoch from the rates measured in the one before */
  const volatile int *stop;         /* may be NULL; polled before every step: once non-zero, the step in
                                     * flight is finished and the run stops (NET_STOPPED) with its position
                                     * saved as a stopped run's is -- a signal handler's flag (netrun: SIGINT) */
  const char *stop_checkpoint;      /* may be NULL; without `checkpoint`, where a stopped run (a callback or
                                     * `stop`) that took steps saves its checkpoint (on_checkpoint is called) */
} NetTrainConfig;

/* Trains: each epoch shuffles the training set, runs a step per full batch
 * with the rate from the train section's schedule (rt_sched.h), then copies
 * the parameters into the inference graph and measures top-1 and top-5
 * accuracy on the test set.  Folder data are decoded and augmented by a
 * pool of threads while the steps run (docs/data.md). */
NetStatus net_train(NetModel *m, const NetTrainConfig *cfg);

/* --- data-parallel training (docs/training.md, "Several GPUs") ------------ */

/* Where this process stands in a data-parallel run: one process per GPU
 * (or per CPU executor), each with its rank.  world 0 takes everything
 * from the environment as torchrun sets it: RANK, WORLD_SIZE, MASTER_ADDR
 * (default 127.0.0.1) and MASTER_PORT. */
typedef struct NetDistOpts {
  int rank, world;
  const char *addr;    /* rank 0's address (NULL: 127.0.0.1) */
  int port;            /* rank 0's port, 1..65535 */
  double timeout_s;    /* each wait for the other ranks (0: 300 s) */
  size_t bucket_bytes; /* GPU: gradient bytes per all-reduce (0: 25 MiB) */
  /* synchronized batch norm: each training batch norm normalizes by the
   * statistics of every rank's batch together (and its backward's data
   * gradient sums its terms over them), so that N ranks of batch B train
   * as one process of batch N x B; every rank must ask the same.  On the
   * GPU the model must be loaded with the option sync_bn=1
   * (NetLoadOpts.options; netrun --sync-bn sets it), whose batch-norm
   * kernels write their sums for the ranks to add inside the step
   * (NET_ERR_ARG without it).  0: each rank's own batch (the running
   * statistics are still averaged every epoch). */
  int sync_bn;
} NetDistOpts;

/* Joins m (loaded for training, on the GPU this process uses) to a
 * data-parallel run: every rank calls it, with the same model file, batch,
 * precision and device kind.  The ranks meet at rank 0's address (the
 * rendezvous: runtime/dist/rt_rendezvous.h); on the GPU they join one
 * NCCL communicator, and each training step all-reduces (averages) the
 * gradients inside its captured graph, bucket by bucket as the backward
 * pass makes them; on the CPU the gradients are averaged over the
 * rendezvous's connections.  net_train then gives each rank its share of
 * every epoch (the global order of one process with world * batch),
 * averages the batch-norm statistics and sums the evaluation over the
 * ranks, checks at its start that every rank holds the same weights, and
 * saves checkpoints on rank 0 only.  A rank that fails, leaves or does not
 * answer within the timeout ends every rank's run with a message naming it
 * (a rank stuck in a collective whose peer died is ended by a watchdog).
 * The images/s that net_train reports (callbacks, NetTrainResult) are this
 * rank's; every rank's step rate comes with each logged step
 * (NetStepInfo.rank_step_images_per_s).  Every rank must pass the same
 * steps, epochs, seed, accumulation, log_every and stop settings, and a
 * callback that stops the run must stop it on every rank.
 * NET_ERR_ARG for a model loaded for inference, or one already joined;
 * NET_ERR_NO_GPU when NCCL cannot be loaded for a GPU model; NET_ERR_DIST
 * when the ranks do not meet or do not agree (another model, batch or
 * device kind on one of them). */
NetStatus net_dist_join(NetModel *m, const NetDistOpts *o);
/* m's rank and world (0 and 1 when not joined). */
int net_dist_rank(const NetModel *m);
int net_dist_world(const NetModel *m);

/* --- benchmark ------------------------------------------------------------ */

typedef struct NetBenchResult {
  double ms_per_step, images_per_s;
  size_t device_bytes;                                 /* peak device memory the executor holds (GPU), or 0 */
  size_t activation_bytes, param_bytes, scratch_bytes; /* its parts: the activation arena (the memory
                               * plan), parameters and state, kernel scratch and cuDNN workspace */
  int cache_hit;                                       /* kernels came from the NVRTC cache */
} NetBenchResult;

/* Times `steps` steps of the training graph (or the inference graph) on
 * seeded inputs written to the device once: the step captured, 3 warm-up
 * replays, then the timed ones (CUDA events on the GPU).  Parameters are
 * changed by training steps. */
NetStatus net_bench(NetModel *m, int inference, int steps, NetBenchResult *r);

/* --- profile (docs/profiling.md) ------------------------------------------ */

/* What a kernel is for, to total the step's time by kind. */
typedef enum NetProfKind {
  NET_PROF_CONV_FWD,
  NET_PROF_CONV_DGRAD,
  NET_PROF_CONV_WGRAD,
  NET_PROF_BATCHNORM,
  NET_PROF_ELEMENTWISE,
  NET_PROF_POOLING,
  NET_PROF_LINEAR,
  NET_PROF_LOSS,
  NET_PROF_OPTIMIZER,
  NET_PROF_CAST,
  NET_PROF_OTHER,
  NET_PROF_KINDS
} NetProfKind;

/* What limits a kernel: a larger share of the peak FLOP rate than of the
 * peak bandwidth is compute, else memory; under 5 us it is latency. */
typedef enum NetProfBound { NET_BOUND_MEMORY, NET_BOUND_COMPUTE, NET_BOUND_LATENCY } NetProfBound;

/* One kernel of the step: a cuDNN convolution or a generated launch. */
typedef struct NetProfRow {
  int node;         /* IR node index */
  char layer[128];  /* the node's layer name ("layer3.2.conv2"; "" when none) */
  char op[40];      /* its IR op ("conv2d_bn_train") */
  char loc[160];    /* its source location ("models/resnet50.net:18:11"; "" when none) */
  char kernel[192]; /* "k17_batchnorm_train_apply_f16_nhwc", "cudnn_conv_fwd f16 [N,H,W,C]x[K,R,S]" */
  double ms;        /* median over the profiled steps */
  double start_ms;  /* start within the last profiled step (for the trace) */
  double flops;     /* convolutions and linear layers; 0 for the rest */
  double bytes;     /* estimate: sizes of the tensors the kernel reads and writes */
  /* from net_profile_classify: */
  NetProfKind kind;
  NetProfBound bound;
  double tflops, gbs; /* achieved */
  double peak_share;  /* max(tflops / peak_tflops, gbs / peak_gbs), 0..1 */
} NetProfRow;

typedef struct NetProfile {
  NetProfRow *rows; /* in step order */
  int nrows, reps, inference;
  int64_t batch;
  double step_ms;     /* one replay of the captured step graph: what training runs */
  double kernels_ms;  /* sum of the rows' ms (net_profile_classify) */
  double peak_tflops; /* the device's dense f16 tensor rate */
  double peak_gbs;    /* its memory bandwidth */
  char device[256];
} NetProfile;

typedef struct NetProfileOpts {
  int inference; /* the inference graph instead of the training step */
  int reps;      /* profiled steps (0: 10); each row keeps the median */
} NetProfileOpts;

/* Times every kernel of one training step (or inference pass) of a GPU
 * model at its batch: the step runs uncaptured reps times with CUDA events
 * around each kernel and an NVTX range per layer (Nsight Systems shows
 * them), then the captured step is timed as a whole.  It runs on a copy of
 * the model's executor (the model's parameters are not changed; the copy
 * holds as much device memory again).  A CPU model is NET_ERR_NO_GPU.
 * o may be NULL; out is freed with net_profile_free. */
NetStatus net_profile(NetModel *m, const NetProfileOpts *o, NetProfile *out);
void net_profile_free(NetProfile *p); /* takes NULL; leaves *p empty */
/* Fills every row's kind, bound, tflops, gbs and peak_share, and
 * kernels_ms, from op, kernel, ms, flops, bytes and the peaks (net_profile
 * calls it; for profiles put together elsewhere). */
void net_profile_classify(NetProfile *p);
/* Writes p as a Chrome trace-event JSON file (ui.perfetto.dev,
 * chrome://tracing): one track of kernels, one of layers.  The file is
 * replaced atomically. */
NetStatus net_profile_trace(const NetProfile *p, const char *path);
const char *net_profile_kind_name(NetProfKind k);   /* "conv fwd", "batch norm", ... */
const char *net_profile_bound_name(NetProfBound b); /* "memory", "compute", "latency" */

#ifdef __cplusplus
}
#endif

#endif
