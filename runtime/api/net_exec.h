/* net_exec.h - one executor behind the API: the CPU executor or the GPU
 * executor under one small interface {new, write, read, run}, so that the
 * API's step, inference and training loop are written once for both.
 *
 * Values are read and written from the host as float (float dtypes) or
 * int64 (integer dtypes), in the IR's memory order, as both executors do.
 * On the GPU the first run captures the step as a CUDA graph and every run
 * replays it.  Internal to libnetrt_api. */
#ifndef NETC_NET_EXEC_H
#define NETC_NET_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "net.h"
#include "rt_model.h"
#include "rt_ref_input.h"

typedef struct NetExec NetExec;

/* Is a GPU usable?  1, or 0 with the reason ("no CUDA driver (...)", "this
 * build has no GPU back end ...") in why. */
int net_exec_gpu_present(char *why, size_t len);
/* The NetStatus of an RtCudaStatus (rt_cuda.h) from the GPU runtime. */
NetStatus net_exec_cuda_status(int rt_cuda_status);

/* An executor of g at batch on the GPU (gpu != 0, device ordinal `ordinal`)
 * or the CPU.  g must be planned for batch on the GPU. */
/* prebuilt, arch: g's kernel programs from a model.so and their target
 * (rt_gpu.h's RtGpuOpts.prebuilt), or NULL. */
NetStatus net_exec_new(int gpu, int ordinal, const char *cache_dir, int tune, const RtModelProgram *prebuilt,
                       const char *arch, const IrGraph *g, int64_t batch, NetExec **out,
                       char *err, size_t len);
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
 * of x, converted by rt_ref_input_u8's formula into v's dtype and layout.
 * On the GPU (rt_gpu_input.h) a batch goes from one of two pinned buffers
 * to the device on a copy stream, overlapping the step before it, and is
 * converted on the step's stream; on the CPU it is converted when fed.
 * Per batch: net_exec_input_buffer (may wait for a free buffer), fill it,
 * net_exec_input_send; net_exec_input_feed before the step that reads it
 * (at most two sent and not fed).  While a pipeline runs, host writes of
 * v are skipped: the step reads the fed batch.  Start again replaces it;
 * stop takes an executor without one. */
NetStatus net_exec_input_start(NetExec *x, int v, const RtRefInput *in, char *err, size_t len);
void net_exec_input_stop(NetExec *x);
NetStatus net_exec_input_buffer(NetExec *x, uint8_t **host, char *err, size_t len);
NetStatus net_exec_input_send(NetExec *x, char *err, size_t len);
NetStatus net_exec_input_feed(NetExec *x, char *err, size_t len);

#endif
