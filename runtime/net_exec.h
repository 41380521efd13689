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

typedef struct NetExec NetExec;

/* Is a GPU usable?  1, or 0 with the reason ("no CUDA driver (...)", "this
 * build has no GPU back end ...") in why. */
int net_exec_gpu_present(char *why, size_t len);
/* The NetStatus of an RtCudaStatus (rt_cuda.h) from the GPU runtime. */
NetStatus net_exec_cuda_status(int rt_cuda_status);

/* An executor of g at batch on the GPU (gpu != 0, device ordinal `ordinal`)
 * or the CPU.  g must be planned for batch on the GPU. */
NetStatus net_exec_new(int gpu, int ordinal, const char *cache_dir, int tune, const IrGraph *g, int64_t batch, NetExec **out,
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

#endif
