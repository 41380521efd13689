/* net_exec_cpu.c - the CPU backend of the API's executor (net_exec.h's
 * NetExecBackend) over rt_cpu: values live in host memory, so a write or
 * read is a copy, a run is rt_cpu_run, accumulation is rt_cpu_accum, and
 * the input pipeline's batches wait in net_cpu_feed's two buffers until
 * the step that reads them.  rt_cpu returns a bare -1, so each call here
 * names its NetStatus: building the executor NET_ERR_MODEL, a run
 * NET_ERR_RUN, the accumulator NET_ERR_NOMEM (net_status.c lists them).
 * Timing is left to net_exec.c's wall clock (no `time` entry), and there
 * is no device memory to report. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net_exec.h"
#include "net_status.h"
#include "rt_cpu.h"
#include "rt_ref.h"

typedef struct Cpu {
  RtCpu *cpu;
  const IrGraph *g;
  RtCpuAccum *acc;
  NetCpuFeed feed;
  int feed_v, label_v; /* the inputs the pipeline feeds (label_v -1: none) */
  /* data parallel (net_exec_dist_set): the gradients averaged between the
   * backward pass and the optimizer section, through one flat buffer */
  NetExecDist dist;
  int *grad, ngrad;
  float *flat;
  size_t nflat;
  double comm_s; /* the exchanges' wall time, over comm_steps steps */
  int64_t comm_steps;
  RtRefSync sync;     /* synchronized batch norm (NetExecDist.sync_bn): the ranks' sums through dist.sum */
  char sync_why[512]; /* why the last of those sums failed ("" when none did) */
} Cpu;

static void cpu_free(void *self);

static int cpu_present(char *why, size_t len) {
  (void)why, (void)len;
  return 1;
}

static double cpu_total_memory(int ordinal) {
  (void)ordinal;
  return rt_cpu_host_memory();
}

static NetStatus cpu_new(const NetExecOpts *o, const IrGraph *g, int64_t batch, void **self, char *err, size_t len) {
  *self = NULL;
  double need = rt_cpu_plan_bytes(g, batch);
  if (o->memory_limit && need > (double)o->memory_limit)
    return net_status_errf(NET_ERR_DEVICE, err, len,
                           "over the memory limit: graph %s at batch %lld needs %.2f GiB, and the limit is %.2f GiB",
                           g->name ? g->name : "?", (long long)batch, need / 1073741824.0,
                           (double)o->memory_limit / 1073741824.0);
  Cpu *c = calloc(1, sizeof *c);
  if (!c) return net_status_errf(NET_ERR_NOMEM, err, len, "out of memory");
  if (rt_cpu_new(g, batch, &c->cpu, err, len)) {
    cpu_free(c);
    return NET_ERR_MODEL;
  }
  c->g = g;
  *self = c;
  return NET_OK;
}

static void cpu_free(void *self) {
  Cpu *c = self;
  if (!c) return;
  free(c->grad);
  free(c->flat);
  net_cpu_feed_stop(&c->feed);
  rt_cpu_accum_free(c->acc);
  rt_cpu_free(c->cpu);
  free(c);
}

static int cpu_find(const void *self, const char *name) { return rt_cpu_find(((const Cpu *)self)->cpu, name); }

static int64_t cpu_numel(const void *self, int v) { return rt_cpu_numel(((const Cpu *)self)->cpu, v); }

/* Bytes of v on the host: int64 for integer dtypes, float for the rest. */
static size_t value_bytes(const Cpu *c, int v) {
  size_t elem = rt_cpu_is_int(c->cpu, v) ? sizeof(int64_t) : sizeof(float);
  return elem * (size_t)rt_cpu_numel(c->cpu, v);
}

static NetStatus cpu_write(void *self, int v, const void *host, char *err, size_t len) {
  (void)err, (void)len;
  Cpu *c = self;
  memcpy(rt_cpu_data(c->cpu, v), host, value_bytes(c, v));
  return NET_OK;
}

static NetStatus cpu_read(void *self, int v, void *host, char *err, size_t len) {
  (void)err, (void)len;
  Cpu *c = self;
  memcpy(host, rt_cpu_data(c->cpu, v), value_bytes(c, v));
  return NET_OK;
}

/* The gradients replaced by their mean over the ranks, each rounded to its dtype. */
static NetStatus average(Cpu *c, char *err, size_t len) {
  size_t at = 0;
  for (int i = 0; i < c->ngrad; i++) {
    size_t n = (size_t)rt_cpu_numel(c->cpu, c->grad[i]);
    memcpy(c->flat + at, rt_cpu_data(c->cpu, c->grad[i]), sizeof(float) * n);
    at += n;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  NetStatus s = c->dist.allreduce(c->dist.user, c->flat, c->nflat, err, len);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  c->comm_s += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  c->comm_steps++;
  at = 0;
  for (int i = 0; !s && i < c->ngrad; i++) {
    int64_t n = rt_cpu_numel(c->cpu, c->grad[i]);
    float *g = rt_cpu_data(c->cpu, c->grad[i]);
    memcpy(g, c->flat + at, sizeof(float) * (size_t)n);
    IrDtype dt = c->g->val[c->grad[i]].type.dtype;
    if (dt == IR_DT_F16) rt_ref_round_f16(n, g, g);
    if (dt == IR_DT_BF16) rt_ref_round_bf16(n, g, g);
    at += (size_t)n;
  }
  return s;
}

/* RtRefSync.sum: the batch statistics summed over the ranks (a failure
 * also reaches every other rank, whose sum fails too). */
static int sync_sum(void *user, double *v, int n) {
  Cpu *c = user;
  return c->dist.sum(c->dist.user, v, n, c->sync_why, sizeof c->sync_why) != NET_OK;
}

/* A step that failed: NET_ERR_DIST with the ranks' reason when a batch
 * norm's sum over them failed, else NET_ERR_RUN. */
static NetStatus step_failed(Cpu *c, char *err, size_t len) {
  if (!c->sync_why[0]) return NET_ERR_RUN;
  size_t at = strlen(err);
  if (at < len) snprintf(err + at, len - at, " (%s)", c->sync_why);
  c->sync_why[0] = 0;
  return NET_ERR_DIST;
}

/* The optimizer section, after the gradients' average when the run is data parallel. */
static NetStatus optimizer(Cpu *c, char *err, size_t len) {
  NetStatus s = average(c, err, len);
  if (!s && rt_cpu_run_nodes(c->cpu, c->g->opt_first, c->g->nnode, err, len)) s = NET_ERR_RUN;
  return s;
}

static NetStatus cpu_run(void *self, char *err, size_t len) {
  Cpu *c = self;
  if (!c->flat) return rt_cpu_run(c->cpu, err, len) ? NET_ERR_RUN : NET_OK;
  if (rt_cpu_run_nodes(c->cpu, 0, c->g->opt_first, err, len)) return step_failed(c, err, len);
  return optimizer(c, err, len);
}

/* The exchange is the step's own work: all of it is exposed. */
static void cpu_comm_time(const void *self, double *seconds, double *exposed_s, int64_t *steps) {
  const Cpu *c = self;
  *seconds = *exposed_s = c->comm_s, *steps = c->comm_steps;
}

/* The sums are made once and reset for every new update (k is given with each run). */
static NetStatus cpu_accum_set(void *self, const int *grad, int ngrad, int k, char *err, size_t len) {
  (void)k;
  Cpu *c = self;
  if (!c->acc && rt_cpu_accum_new(c->cpu, grad, ngrad, &c->acc, err, len)) return NET_ERR_NOMEM;
  rt_cpu_accum_reset(c->acc);
  return NET_OK;
}

static NetStatus cpu_accum_run(void *self, int k, int last, char *err, size_t len) {
  Cpu *c = self;
  if (!c->flat) return rt_cpu_accum_run(c->acc, k, last, err, len) ? NET_ERR_RUN : NET_OK;
  if (rt_cpu_accum_micro(c->acc, k, last, err, len)) return step_failed(c, err, len);
  return last ? optimizer(c, err, len) : NET_OK;
}

static NetStatus cpu_dist_set(void *self, const NetExecDist *d, const int *grad, int ngrad, char *err, size_t len) {
  Cpu *c = self;
  if (!d) { /* alone again */
    free(c->grad), free(c->flat);
    c->grad = NULL, c->flat = NULL, c->ngrad = 0, c->nflat = 0;
    memset(&c->dist, 0, sizeof c->dist);
    rt_cpu_set_sync(c->cpu, NULL);
    return NET_OK;
  }
  if (!d->allreduce) return net_status_errf(NET_ERR_ARG, err, len, "data parallel on the CPU: no all-reduce");
  if (d->sync_bn && !d->sum) return net_status_errf(NET_ERR_ARG, err, len, "synchronized batch norm: no sum");
  size_t n = 0;
  for (int i = 0; i < ngrad; i++) {
    if (rt_cpu_is_int(c->cpu, grad[i]))
      return net_status_errf(NET_ERR_MODEL, err, len, "data parallel: gradient %%%d is not a float value", grad[i]);
    n += (size_t)rt_cpu_numel(c->cpu, grad[i]);
  }
  int *g = malloc(sizeof(int) * (ngrad > 0 ? (size_t)ngrad : 1));
  float *flat = malloc(sizeof(float) * (n ? n : 1));
  if (!g || !flat) {
    free(g), free(flat);
    return net_status_errf(NET_ERR_NOMEM, err, len, "out of memory for %zu gradient floats", n);
  }
  if (ngrad > 0) memcpy(g, grad, sizeof(int) * (size_t)ngrad);
  free(c->grad), free(c->flat);
  c->dist = *d, c->grad = g, c->ngrad = ngrad, c->flat = flat, c->nflat = n;
  c->sync = (RtRefSync){.sum = sync_sum, .user = c};
  rt_cpu_set_sync(c->cpu, d->sync_bn ? &c->sync : NULL);
  return NET_OK;
}

static NetStatus cpu_input_start(void *self, int v, int label_v, const RtRefInput *in, char *err, size_t len) {
  Cpu *c = self;
  if (rt_cpu_is_int(c->cpu, v))
    return net_status_errf(NET_ERR_ARG, err, len, "input pipeline: value %d is not a float", v);
  if (label_v >= 0 && (!rt_cpu_is_int(c->cpu, label_v) || rt_cpu_numel(c->cpu, label_v) != in->n))
    return net_status_errf(NET_ERR_ARG, err, len, "input pipeline: value %d is not %lld integer labels", label_v,
                           (long long)in->n);
  NetStatus s = net_cpu_feed_start(&c->feed, in, err, len);
  if (!s) c->feed_v = v, c->label_v = label_v;
  return s;
}

static void cpu_input_stop(void *self) { net_cpu_feed_stop(&((Cpu *)self)->feed); }

static NetStatus cpu_input_buffer(void *self, uint8_t **host, char *err, size_t len) {
  return net_cpu_feed_buffer(&((Cpu *)self)->feed, host, err, len);
}

static NetStatus cpu_input_send(void *self, const int64_t *labels, char *err, size_t len) {
  Cpu *c = self;
  if ((c->label_v >= 0) != (labels != NULL))
    return net_status_errf(NET_ERR_ARG, err, len, "input pipeline: labels %s",
                           labels ? "sent to a pipeline without a label value" : "missing");
  return net_cpu_feed_send(&c->feed, labels, err, len);
}

static NetStatus cpu_input_feed(void *self, char *err, size_t len) {
  Cpu *c = self;
  const int64_t *lab = NULL;
  NetStatus s = net_cpu_feed_take(&c->feed, rt_cpu_data(c->cpu, c->feed_v), &lab, err, len);
  if (!s && c->label_v >= 0) s = cpu_write(c, c->label_v, lab, err, len);
  return s;
}

const NetExecBackend net_exec_cpu = {
    .name = "cpu",
    .present = cpu_present,
    .total_memory = cpu_total_memory,
    .new = cpu_new,
    .free = cpu_free,
    .find = cpu_find,
    .numel = cpu_numel,
    .write = cpu_write,
    .read = cpu_read,
    .run = cpu_run,
    .accum_set = cpu_accum_set,
    .accum_run = cpu_accum_run,
    .dist_set = cpu_dist_set,
    .comm_time = cpu_comm_time,
    .input_start = cpu_input_start,
    .input_stop = cpu_input_stop,
    .input_buffer = cpu_input_buffer,
    .input_send = cpu_input_send,
    .input_feed = cpu_input_feed,
};
