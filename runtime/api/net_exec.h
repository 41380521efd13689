/* net_exec.h - one executor behind the API: the CPU executor or the GPU
 * executor under one small interface {new, write, read, run}, so that the
 * API's step, inference and training loop are written once for both.
 *
 * Values are read and written from the host as float (float dtypes) or
 * int64 (integer dtypes), in the IR's memory order, as both executors do.
 * On the GPU the first run captures the step as a CUDA graph and every run
 * replays it.  Internal to libnetrt_api.
 *
 * The header's sections follow its files:
 *   net_exec.c       the interface below: the device-independent part
 *                    (accumulation's count, the input pipeline's state) over
 *                    a backend table
 *   net_exec_cpu.c   the CPU backend, over rt_cpu
 *   net_exec_gpu.c   the GPU backend, over rt_gpu (built only with the GPU
 *                    back end)
 *   net_cpu_feed.c   the CPU side of the input pipeline: two byte buffers
 *   net_graph.c      what the executor reads from the IR: the optimizer
 *                    section and its gradients */
#ifndef NETC_NET_EXEC_H
#define NETC_NET_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "opts.h"
#include "net.h"
#include "rt_loader.h"
#include "rt_model.h"
#include "rt_ref_input.h"

typedef struct NetExec NetExec;

/* Is a GPU usable?  1, or 0 with the reason ("no CUDA driver (...)", "this
 * build has no GPU back end ...") in why. */
int net_exec_gpu_present(char *why, size_t len);
/* GPUs the driver sees (0 without a driver or the GPU back end). */
int net_exec_gpu_count(void);
/* The memory of the device an executor would run on (gpu: GPU `ordinal`,
 * else the machine's), in bytes; 0 when unknown. */
double net_exec_total_memory(int gpu, int ordinal);

/* An executor of g at batch on the GPU (gpu != 0, device ordinal `ordinal`)
 * or the CPU.  g must be planned for batch on the GPU. */
/* o: what the backend is made with (below); NULL: the defaults and the
 * environment's switches. */
typedef struct NetExecOpts NetExecOpts;
NetStatus net_exec_new(int gpu, const NetExecOpts *o, const IrGraph *g, int64_t batch, NetExec **out, char *err,
                       size_t len);
void net_exec_free(NetExec *x); /* takes NULL */
int net_exec_find(const NetExec *x, const char *name);
int64_t net_exec_numel(const NetExec *x, int v);
NetStatus net_exec_write(NetExec *x, int v, const void *host, char *err, size_t len);
NetStatus net_exec_read(NetExec *x, int v, void *host, char *err, size_t len);
NetStatus net_exec_run(NetExec *x, char *err, size_t len);
/* Milliseconds of `steps` runs after `warmup` untimed ones (events on the GPU). */
NetStatus net_exec_time(NetExec *x, int warmup, int steps, double *ms, char *err, size_t len);
size_t net_exec_device_bytes(const NetExec *x);
/* GPU: bytes of the activation arena, the parameters and state, and the
 * scratch with the cuDNN workspace; zeros on the CPU. */
void net_exec_memory(const NetExec *x, size_t part[3]);
int net_exec_cache_hit(const NetExec *x);

/* Gradient accumulation (docs/training.md).  With k > 1 every k
 * net_exec_run calls make one optimizer update: each runs the forward and
 * backward pass (the nodes before the optimizer section) and adds the
 * gradients into f32 sums; the k-th writes their mean into the gradients
 * and runs the optimizer section.  Setting k (1: off, the whole step again)
 * starts a new update with zero sums.  NET_ERR_MODEL for a graph without
 * an optimizer section (IrGraph.opt_first). */
NetStatus net_exec_accum_set(NetExec *x, int k, char *err, size_t len);
/* Micro-steps of the current update already run (0 right after an update). */
int net_exec_accum_pending(const NetExec *x);

/* The input pipeline (docs/data.md): batches of image bytes into input v
 * of x, converted by rt_ref_input_u8's formula into v's dtype and layout,
 * and their labels (int64, given to send) into integer input label_v
 * (-1: images only).
 * On the GPU (rt_gpu_input.h) a batch goes from one of two pinned buffers
 * to the device on a copy stream, overlapping the step before it, and is
 * converted on the step's stream; on the CPU it is converted when fed.
 * Per batch: net_exec_input_buffer (may wait for a free buffer), fill it,
 * net_exec_input_send; net_exec_input_feed before the step that reads it
 * (at most two sent and not fed; net_exec_input_depth).  While a pipeline runs, host writes of
 * v and label_v are skipped: the step reads the fed batch.  Start again
 * replaces it; stop takes an executor without one. */
NetStatus net_exec_input_start(NetExec *x, int v, int label_v, const RtRefInput *in, char *err, size_t len);
void net_exec_input_stop(NetExec *x);
NetStatus net_exec_input_buffer(NetExec *x, uint8_t **host, char *err, size_t len);
NetStatus net_exec_input_send(NetExec *x, const int64_t *labels, char *err, size_t len);
NetStatus net_exec_input_feed(NetExec *x, char *err, size_t len);

/* The GPU decoder in place of the bytes (rt_gpu_jpeg.h): batches of the
 * loader's items (RT_LOADER_DEFER) decoded by nvJPEG with `backend`
 * (rt_nvjpeg.h's RtNvjpegBackend: 0 auto, 1 hardware, 2 GPU hybrid) and
 * transformed on the device into input v (in.c = 3), their labels into
 * label_v; fed with net_exec_input_feed.  A JPEG nvJPEG refuses is decoded
 * on the host.  NET_ERR_NO_GPU on the CPU executor or without nvJPEG. */
NetStatus net_exec_input_start_jpeg(NetExec *x, int v, int label_v, const RtRefInput *in, int backend, char *err,
                                    size_t len);
NetStatus net_exec_input_send_items(NetExec *x, const RtLoaderItem *items, int n, const int64_t *labels, char *err,
                                    size_t len);
/* Which decoder feeds x ("nvJPEG hardware", "nvJPEG GPU hybrid"), "" for bytes;
 * images the decoder left to the host, images nobody could decode, and in
 * rate: [0] the images/s it can make (rt_gpu_jpeg_rate), [1] and [2] of
 * that its GPU's and its host's sides (rt_gpu_jpeg_rates), [3] its rate
 * per JPEG it decoded itself (rt_gpu_jpeg_jpeg_rate); any out may be NULL. */
enum { NET_DECODER_RATES = 4 };
void net_exec_input_decoder(const NetExec *x, char *name, size_t cap, int64_t *host_decoded, int64_t *failed,
                            double rate[NET_DECODER_RATES]);
/* Batches the running pipeline takes sent and not fed: 2 for bytes, the
 * GPU decoder's slots (NetExecBackend.jpeg_depth) for it. */
int net_exec_input_depth(const NetExec *x);

/* The device's power, clock, temperature and ECC counts (NVML, opened on
 * first use); every field -1 where unknown (always on the CPU). */
void net_exec_watch(NetExec *x, NetGpuWatch *w);
/* The device's own time in whole steps so far and how many were timed
 * (the GPU's step clock, rt_gpu_step_time); 0 and 0 where not measured. */
void net_exec_step_time(const NetExec *x, double *seconds, int64_t *steps);
/* The gradients' exchange of a data-parallel run (net_exec_dist_set) in
 * the steps timed so far: its seconds (on the GPU from the first bucket's
 * all-reduce to the last's end, through the step clock), the seconds of
 * it the step waited for (not hidden behind the backward pass; all of it
 * on the CPU), and how many steps were timed; 0, 0, 0 where none. */
void net_exec_comm_time(const NetExec *x, double *seconds, double *exposed_s, int64_t *steps);

/* Per-step values without waiting for the device (on the GPU rt_gpu_mail.h:
 * pinned slots, copies in stream order; on the CPU plain writes and reads):
 * post writes small value v (at most NET_EXEC_MAIL_BYTES in its dtype)
 * before the next run; fetch takes v's value after the runs queued so far
 * and names it by *ticket; fetched gives that value once its copy is done
 * (wait 0: *done = 0 while it runs).  A ticket can be read until
 * NET_EXEC_MAIL_SLOTS more posts and fetches have been made. */
enum { NET_EXEC_MAIL_SLOTS = 64, NET_EXEC_MAIL_BYTES = 256 };
NetStatus net_exec_post(NetExec *x, int v, const void *host, char *err, size_t len);
NetStatus net_exec_fetch(NetExec *x, int v, int64_t *ticket, char *err, size_t len);
NetStatus net_exec_fetched(NetExec *x, int64_t ticket, int wait, void *host, int *done, char *err, size_t len);

/* Data parallel (net_dist.c): every run of x then averages the gradients
 * its optimizer section reads over the ranks before that section runs --
 * on the GPU with NCCL inside the captured step, bucket by bucket as the
 * backward pass makes them; on the CPU through d->allreduce -- and with
 * accumulation, the last micro-step's mean.  Set it before accumulation
 * (NET_ERR_ARG after); every rank calls it (the NCCL join waits for all). */
typedef struct NetExecDist {
  int rank, world;
  const void *nccl_id; /* GPU: the communicator's id (RT_NCCL_ID_BYTES), made by rank 0 */
  size_t bucket_bytes; /* GPU: gradient bytes per all-reduce (0: the executor's default) */
  /* CPU: the mean over the ranks of v[0..n), in place, the same bits on every rank */
  NetStatus (*allreduce)(void *user, float *v, size_t n, char *err, size_t len);
  /* synchronized batch norm (NetDistOpts.sync_bn): sum adds v[0..n) over the ranks in place, the same doubles on
     every rank */
  int sync_bn;
  NetStatus (*sum)(void *user, double *v, int n, char *err, size_t len);
  void *user;
} NetExecDist;
/* d NULL: x steps alone again (a join that failed after this rank's part,
 * so that nothing points at the run's state afterwards). */
NetStatus net_exec_dist_set(NetExec *x, const NetExecDist *d, char *err, size_t len);

/* --- the backend table (net_exec_cpu.c, net_exec_gpu.c) ------------------- */

typedef enum NetDevice { NET_DEVICE_CPU, NET_DEVICE_GPU, NET_DEVICE_COUNT } NetDevice;

/* What a backend is made with besides its graph and batch (the GPU's:
 * rt_gpu.h's RtGpuOpts; the CPU takes none). */
struct NetExecOpts {
  int ordinal;               /* GPU ordinal */
  const char *cache_dir;     /* NVRTC cache (NULL: the default) */
  int tune;                  /* time cuDNN's candidates */
  const CgProgram *prebuilt; /* g's kernel programs from a model.so, or NULL */
  const char *arch;          /* their target */
  const NetcOpts *opts;      /* every switch (opts.h); NULL: the environment's */
  size_t memory_limit;       /* bytes the executor may hold (0: no limit; net_memory.h) */
};

/* One executor kind.  `self` is what new made.  Statuses are NetStatus
 * (library codes go through net_status.h), messages go to err.  The
 * device-independent checks (a started pipeline, k >= 1, the optimizer
 * section) are net_exec.c's; a backend is called only past them. */
typedef struct NetExecBackend {
  const char *name; /* "cpu", "gpu" */
  /* 1 when the device is usable, else 0 with the reason in why. */
  int (*present)(char *why, size_t len);
  int (*count)(void); /* devices of this kind present (NULL: one, the CPU) */
  /* The memory of device `ordinal` in bytes (the machine's for the CPU), 0 when unknown. */
  double (*total_memory)(int ordinal);
  NetStatus (*new)(const NetExecOpts *o, const IrGraph *g, int64_t batch, void **self, char *err, size_t len);
  void (*free)(void *self); /* takes NULL; stops the pipeline, frees the accumulator */
  int (*find)(const void *self, const char *name);
  int64_t (*numel)(const void *self, int v);
  NetStatus (*write)(void *self, int v, const void *host, char *err, size_t len);
  NetStatus (*read)(void *self, int v, void *host, char *err, size_t len);
  NetStatus (*run)(void *self, char *err, size_t len); /* the whole step */
  /* net_exec_time; NULL: net_exec.c times net_exec_run by the wall clock */
  NetStatus (*time)(void *self, int warmup, int steps, double *ms, char *err, size_t len);
  /* device memory (net_exec_device_bytes, net_exec_memory) and kernel cache
   * hits; NULL: none, zeros */
  size_t (*device_bytes)(const void *self);
  void (*memory)(const void *self, size_t part[3]);
  int (*cache_hit)(const void *self);
  /* Accumulation over k > 1 micro-steps: set up (or reset) the sums of the
   * ngrad gradients grad of the graph's optimizer section (IrGraph.opt_first);
   * run one micro-step, the last of its update when `last`. */
  NetStatus (*accum_set)(void *self, const int *grad, int ngrad, int k, char *err, size_t len);
  NetStatus (*accum_run)(void *self, int k, int last, char *err, size_t len);
  /* The input pipeline (net_exec_input_*); input_stop takes a backend without one. */
  NetStatus (*input_start)(void *self, int v, int label_v, const RtRefInput *in, char *err, size_t len);
  void (*input_stop)(void *self);
  NetStatus (*input_buffer)(void *self, uint8_t **host, char *err, size_t len);
  NetStatus (*input_send)(void *self, const int64_t *labels, char *err, size_t len);
  NetStatus (*input_feed)(void *self, char *err, size_t len);
  /* the GPU decoder (net_exec_input_start_jpeg ...); NULL: none */
  NetStatus (*jpeg_start)(void *self, int v, int label_v, const RtRefInput *in, int backend, char *err, size_t len);
  NetStatus (*jpeg_send)(void *self, const RtLoaderItem *items, int n, const int64_t *labels, char *err, size_t len);
  void (*jpeg_info)(const void *self, char *name, size_t cap, int64_t *host_decoded, int64_t *failed,
                    double rate[NET_DECODER_RATES]);
  int jpeg_depth;                                                       /* batches its decoder takes sent and not fed */
  void (*watch)(void *self, NetGpuWatch *w);                            /* NULL: nothing known */
  void (*step_time)(const void *self, double *seconds, int64_t *steps); /* NULL: not measured */
  void (*comm_time)(const void *self, double *seconds, double *exposed_s, int64_t *steps); /* NULL: none */
  /* net_exec_post/fetch/fetched; NULL: net_exec.c writes and reads at once */
  NetStatus (*post)(void *self, int v, const void *host, char *err, size_t len);
  NetStatus (*fetch)(void *self, int v, int64_t *ticket, char *err, size_t len);
  NetStatus (*fetched)(void *self, int64_t ticket, int wait, void *host, int *done, char *err, size_t len);
  /* net_exec_dist_set, with the ngrad gradients grad of the optimizer section */
  NetStatus (*dist_set)(void *self, const NetExecDist *d, const int *grad, int ngrad, char *err, size_t len);
} NetExecBackend;

extern const NetExecBackend net_exec_cpu; /* net_exec_cpu.c */
extern const NetExecBackend net_exec_gpu; /* net_exec_gpu.c, in a build with the GPU back end */

/* The backend of device d, or NULL with the reason in err when this build
 * has none (the GPU's without the CUDA toolkit). */
const NetExecBackend *net_exec_backend(NetDevice d, char *err, size_t len);

/* --- net_cpu_feed.c: the CPU side of the input pipeline ------------------- */

/* Two byte buffers taken in turn: one is filled while the other waits to
 * be converted (rt_ref_input_u8) into the step's input; the labels sent
 * with each wait beside it. */
typedef struct NetCpuFeed {
  uint8_t *host; /* 2 * bytes */
  int64_t *lab;  /* 2 * in.n */
  size_t bytes;
  int filling, next_fill, next_feed, sent;
  RtRefInput in;
} NetCpuFeed;

/* Two buffers for batches of in (the caller checked in). */
NetStatus net_cpu_feed_start(NetCpuFeed *f, const RtRefInput *in, char *err, size_t len);
void net_cpu_feed_stop(NetCpuFeed *f); /* takes a stopped (zeroed) one; leaves it zeroed */
/* The buffer to fill (the same one until it is sent); refused with two sent and not taken. */
NetStatus net_cpu_feed_buffer(NetCpuFeed *f, uint8_t **host, char *err, size_t len);
NetStatus net_cpu_feed_send(NetCpuFeed *f, const int64_t *labels, char *err, size_t len);
/* The oldest sent batch converted into dst (the input value's floats);
 * *labels: the in.n labels sent with it (valid until the next send). */
NetStatus net_cpu_feed_take(NetCpuFeed *f, float *dst, const int64_t **labels, char *err, size_t len);

/* --- net_graph.c: what the executor reads from the IR --------------------- */

/* The distinct gradients the sgd_updates of g's optimizer section
 * (IrGraph.opt_first) read (*grad malloc'd).  NET_ERR_MODEL when g has no
 * section, or an sgd_update reads a gradient made inside it. */
NetStatus net_graph_optimizer_section(const IrGraph *g, int **grad, int *ngrad, char *err, size_t len);

#endif
