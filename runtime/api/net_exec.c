/* net_exec.c - the API's executor interface (see net_exec.h) over a table
 * of backends: what does not depend on the device lives here -- finding
 * the backend, gradient accumulation's count of micro-steps, the input
 * pipeline's state and its checks, timing by the wall clock -- and every
 * call that touches a device goes through the executor's NetExecBackend
 * (net_exec_cpu.c, net_exec_gpu.c).
 *
 * The table below is the one place that knows which backends this build
 * has: without the CUDA toolkit the GPU entry is absent, and asking for it
 * says so. */
#include "net_exec.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net_status.h"

static const NetExecBackend *const BACKENDS[NET_DEVICE_COUNT] = {
    [NET_DEVICE_CPU] = &net_exec_cpu,
#ifdef NET_HAVE_GPU
    [NET_DEVICE_GPU] = &net_exec_gpu,
#endif
};

struct NetExec {
  const NetExecBackend *be;
  void *self; /* the backend's executor */
  const IrGraph *g;
  int accum, accum_i; /* accumulation: micro-steps per update (1: off), and those run of this update */
  int feeding;        /* a pipeline feeds inputs feed_v and label_v (-1: none): 1 of bytes, 2 the GPU decoder */
  int feed_v, label_v;
  /* net_exec_post/fetch without the backend's own: values read at once */
  uint8_t mail[NET_EXEC_MAIL_SLOTS][NET_EXEC_MAIL_BYTES];
  size_t mail_len[NET_EXEC_MAIL_SLOTS]; /* bytes of the value's host form */
  int64_t mail_next;
};

const NetExecBackend *net_exec_backend(NetDevice d, char *err, size_t len) {
  const NetExecBackend *b = (unsigned)d < NET_DEVICE_COUNT ? BACKENDS[d] : NULL;
  if (!b && d == NET_DEVICE_GPU)
    net_status_errf(NET_ERR_NO_GPU, err, len,
                    "this netrt was built without the GPU back end (no CUDA toolkit at build time)");
  else if (!b)
    net_status_errf(NET_ERR_ARG, err, len, "no executor for device %d", (int)d);
  return b;
}

int net_exec_gpu_present(char *why, size_t len) {
  const NetExecBackend *b = net_exec_backend(NET_DEVICE_GPU, why, len);
  return b && b->present(why, len);
}

int net_exec_gpu_count(void) {
  char why[256];
  const NetExecBackend *b = net_exec_backend(NET_DEVICE_GPU, why, sizeof why);
  return b && b->count && b->present(why, sizeof why) ? b->count() : 0;
}

double net_exec_total_memory(int gpu, int ordinal) {
  char why[256];
  const NetExecBackend *b = net_exec_backend(gpu ? NET_DEVICE_GPU : NET_DEVICE_CPU, why, sizeof why);
  return b && b->total_memory ? b->total_memory(ordinal) : 0;
}

NetStatus net_exec_new(int gpu, const NetExecOpts *o, const IrGraph *g, int64_t batch, NetExec **out, char *err,
                       size_t len) {
  *out = NULL;
  char why[256];
  const NetExecBackend *b = net_exec_backend(gpu ? NET_DEVICE_GPU : NET_DEVICE_CPU, why, sizeof why);
  if (!b) return net_status_errf(NET_ERR_NO_GPU, err, len, "no GPU: %s", why);
  NetExec *x = calloc(1, sizeof *x);
  if (!x) return net_status_errf(NET_ERR_NOMEM, err, len, "out of memory");
  x->be = b, x->g = g, x->accum = 1;
  NetExecOpts none = {0};
  NetStatus s = b->new (o ? o : &none, g, batch, &x->self, err, len);
  if (s) {
    net_exec_free(x);
    return s;
  }
  *out = x;
  return NET_OK;
}

void net_exec_free(NetExec *x) {
  if (!x) return;
  x->be->free(x->self);
  free(x);
}

int net_exec_find(const NetExec *x, const char *name) { return x->be->find(x->self, name); }

int64_t net_exec_numel(const NetExec *x, int v) { return x->be->numel(x->self, v); }

NetStatus net_exec_write(NetExec *x, int v, const void *host, char *err, size_t len) {
  if (x->feeding && (v == x->feed_v || v == x->label_v)) return NET_OK; /* the step reads the pipeline's batch */
  return x->be->write(x->self, v, host, err, len);
}

NetStatus net_exec_read(NetExec *x, int v, void *host, char *err, size_t len) {
  return x->be->read(x->self, v, host, err, len);
}

static NetStatus run_accum(NetExec *x, char *err, size_t len);

NetStatus net_exec_run(NetExec *x, char *err, size_t len) {
  if (x->accum > 1) return run_accum(x, err, len);
  return x->be->run(x->self, err, len);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

NetStatus net_exec_time(NetExec *x, int warmup, int steps, double *ms, char *err, size_t len) {
  if (x->be->time) return x->be->time(x->self, warmup, steps, ms, err, len);
  NetStatus s = NET_OK;
  for (int i = 0; i < warmup && !s; i++) s = net_exec_run(x, err, len);
  double t0 = now_s();
  for (int i = 0; i < steps && !s; i++) s = net_exec_run(x, err, len);
  *ms = (now_s() - t0) * 1000.0;
  return s;
}

size_t net_exec_device_bytes(const NetExec *x) { return x && x->be->device_bytes ? x->be->device_bytes(x->self) : 0; }

void net_exec_memory(const NetExec *x, size_t part[3]) {
  part[0] = part[1] = part[2] = 0;
  if (x && x->be->memory) x->be->memory(x->self, part);
}

int net_exec_cache_hit(const NetExec *x) { return x && x->be->cache_hit ? x->be->cache_hit(x->self) : 0; }

/* --- the input pipeline --------------------------------------------------- */

void net_exec_input_stop(NetExec *x) {
  if (!x) return;
  x->be->input_stop(x->self);
  x->feeding = 0;
}

NetStatus net_exec_input_start(NetExec *x, int v, int label_v, const RtRefInput *in, char *err, size_t len) {
  net_exec_input_stop(x);
  if (!rt_ref_input_ok(in) || v < 0 || net_exec_numel(x, v) != in->n * in->dc * in->h * in->w)
    return net_status_errf(NET_ERR_ARG, err, len,
                           "input pipeline: value %d does not hold a batch of %lldx%lldx%lld images", v,
                           in ? (long long)in->dc : 0, in ? (long long)in->h : 0, in ? (long long)in->w : 0);
  if (label_v >= 0 && net_exec_numel(x, label_v) != in->n)
    return net_status_errf(NET_ERR_ARG, err, len, "input pipeline: value %d does not hold %lld labels", label_v,
                           (long long)in->n);
  NetStatus s = x->be->input_start(x->self, v, label_v, in, err, len);
  if (s) return s;
  x->feeding = 1, x->feed_v = v, x->label_v = label_v;
  return NET_OK;
}

NetStatus net_exec_input_buffer(NetExec *x, uint8_t **host, char *err, size_t len) {
  if (x->feeding != 1) return net_status_errf(NET_ERR_ARG, err, len, "input pipeline: not started");
  return x->be->input_buffer(x->self, host, err, len);
}

NetStatus net_exec_input_send(NetExec *x, const int64_t *labels, char *err, size_t len) {
  if (x->feeding != 1) return net_status_errf(NET_ERR_ARG, err, len, "input pipeline: not started");
  return x->be->input_send(x->self, labels, err, len);
}

NetStatus net_exec_input_feed(NetExec *x, char *err, size_t len) {
  if (!x->feeding) return net_status_errf(NET_ERR_ARG, err, len, "input pipeline: not started");
  return x->be->input_feed(x->self, err, len);
}

NetStatus net_exec_input_start_jpeg(NetExec *x, int v, int label_v, const RtRefInput *in, int backend, char *err,
                                    size_t len) {
  net_exec_input_stop(x);
  if (!x->be->jpeg_start)
    return net_status_errf(NET_ERR_NO_GPU, err, len, "the GPU decoder needs the GPU executor (this one is the %s's)",
                           x->be->name);
  if (!rt_ref_input_ok(in) || in->c != 3 || v < 0 || net_exec_numel(x, v) != in->n * in->dc * in->h * in->w ||
      (label_v >= 0 && net_exec_numel(x, label_v) != in->n))
    return net_status_errf(
        NET_ERR_ARG, err, len,
        "input pipeline: value %d does not hold a batch of RGB images of %lldx%lld (or %d its labels)", v,
        in ? (long long)in->h : 0, in ? (long long)in->w : 0, label_v);
  NetStatus s = x->be->jpeg_start(x->self, v, label_v, in, backend, err, len);
  if (s) return s;
  x->feeding = 2, x->feed_v = v, x->label_v = label_v;
  return NET_OK;
}

NetStatus net_exec_input_send_items(NetExec *x, const RtLoaderItem *items, int n, const int64_t *labels, char *err,
                                    size_t len) {
  if (x->feeding != 2) return net_status_errf(NET_ERR_ARG, err, len, "input pipeline: the GPU decoder is not started");
  return x->be->jpeg_send(x->self, items, n, labels, err, len);
}

void net_exec_input_decoder(const NetExec *x, char *name, size_t cap, int64_t *host_decoded, int64_t *failed,
                            double rate[NET_DECODER_RATES]) {
  int64_t hd = 0, f = 0;
  double r[NET_DECODER_RATES] = {0};
  if (name && cap) name[0] = 0;
  if (x && x->feeding == 2) x->be->jpeg_info(x->self, name, cap, &hd, &f, r);
  if (host_decoded) *host_decoded = hd;
  if (failed) *failed = f;
  if (rate) memcpy(rate, r, sizeof r);
}

int net_exec_input_depth(const NetExec *x) {
  return x && x->feeding == 2 && x->be->jpeg_depth > 0 ? x->be->jpeg_depth : 2;
}

void net_exec_watch(NetExec *x, NetGpuWatch *w) {
  *w = (NetGpuWatch){.power_w = -1,
                     .sm_clock_mhz = -1,
                     .temp_c = -1,
                     .ecc_corrected = -1,
                     .ecc_uncorrected = -1,
                     .pcie_tx_mb_s = -1,
                     .pcie_rx_mb_s = -1,
                     .nvlink_tx_mb_s = -1,
                     .nvlink_rx_mb_s = -1};
  if (x && x->be->watch) x->be->watch(x->self, w);
}

void net_exec_step_time(const NetExec *x, double *seconds, int64_t *steps) {
  *seconds = 0, *steps = 0;
  if (x && x->be->step_time) x->be->step_time(x->self, seconds, steps);
}

void net_exec_comm_time(const NetExec *x, double *seconds, double *exposed_s, int64_t *steps) {
  *seconds = 0, *exposed_s = 0, *steps = 0;
  if (x && x->be->comm_time) x->be->comm_time(x->self, seconds, exposed_s, steps);
}

/* --- per-step values without waiting --------------------------------------- */

/* Value v's host form (float, or int64 for integer dtypes) fits a slot. */
static NetStatus mail_fits(const NetExec *x, int v, char *err, size_t len) {
  int64_t n = net_exec_numel(x, v);
  if (n < 1 || n * 8 > NET_EXEC_MAIL_BYTES)
    return net_status_errf(NET_ERR_ARG, err, len, "value %d of %lld elements is not a per-step scalar (at most %d)", v,
                           (long long)n, NET_EXEC_MAIL_BYTES / 8);
  return NET_OK;
}

NetStatus net_exec_post(NetExec *x, int v, const void *host, char *err, size_t len) {
  NetStatus s = mail_fits(x, v, err, len);
  if (s) return s;
  return x->be->post ? x->be->post(x->self, v, host, err, len) : net_exec_write(x, v, host, err, len);
}

NetStatus net_exec_fetch(NetExec *x, int v, int64_t *ticket, char *err, size_t len) {
  NetStatus s = mail_fits(x, v, err, len);
  if (s || x->be->fetch) return s ? s : x->be->fetch(x->self, v, ticket, err, len);
  int k = (int)(x->mail_next % NET_EXEC_MAIL_SLOTS);
  if ((s = x->be->read(x->self, v, x->mail[k], err, len))) return s;
  IrDtype dt = x->g->val[v].type.dtype;
  int is_int = dt == IR_DT_I32 || dt == IR_DT_I64 || dt == IR_DT_U8;
  x->mail_len[k] = (size_t)net_exec_numel(x, v) * (is_int ? sizeof(int64_t) : sizeof(float));
  *ticket = x->mail_next++;
  return NET_OK;
}

NetStatus net_exec_fetched(NetExec *x, int64_t ticket, int wait, void *host, int *done, char *err, size_t len) {
  if (x->be->fetched) return x->be->fetched(x->self, ticket, wait, host, done, err, len);
  if (ticket < 0 || ticket >= x->mail_next || x->mail_next - ticket > NET_EXEC_MAIL_SLOTS)
    return net_status_errf(NET_ERR_ARG, err, len, "fetched value %lld is not one of the last %d", (long long)ticket,
                           NET_EXEC_MAIL_SLOTS);
  memcpy(host, x->mail[ticket % NET_EXEC_MAIL_SLOTS], x->mail_len[ticket % NET_EXEC_MAIL_SLOTS]);
  if (done) *done = 1;
  return NET_OK;
}

/* --- gradient accumulation ------------------------------------------------ */

NetStatus net_exec_accum_set(NetExec *x, int k, char *err, size_t len) {
  if (k < 1)
    return net_status_errf(NET_ERR_ARG, err, len, "gradient accumulation over %d micro-batches (at least 1)", k);
  x->accum = k, x->accum_i = 0;
  if (k == 1) return NET_OK;
  int *grad, ngrad;
  NetStatus s = net_graph_optimizer_section(x->g, &grad, &ngrad, err, len);
  if (s) {
    x->accum = 1;
    return s;
  }
  s = x->be->accum_set(x->self, grad, ngrad, k, err, len);
  free(grad);
  if (s) x->accum = 1;
  return s;
}

int net_exec_accum_pending(const NetExec *x) { return x ? x->accum_i : 0; }

/* --- data parallel --------------------------------------------------------- */

NetStatus net_exec_dist_set(NetExec *x, const NetExecDist *d, char *err, size_t len) {
  if (x->accum > 1)
    return net_status_errf(NET_ERR_ARG, err, len, "data parallel: set before gradient accumulation, not after");
  if (!x->be->dist_set)
    return net_status_errf(NET_ERR_ARG, err, len, "data parallel: the %s executor has none", x->be->name);
  if (!d) return x->be->dist_set(x->self, NULL, NULL, 0, err, len); /* off: the run is over or never began */
  int *grad = NULL, ngrad = 0;
  NetStatus s = net_graph_optimizer_section(x->g, &grad, &ngrad, err, len);
  if (!s) s = x->be->dist_set(x->self, d, grad, ngrad, err, len);
  free(grad);
  return s;
}

static NetStatus run_accum(NetExec *x, char *err, size_t len) {
  int last = x->accum_i + 1 == x->accum;
  NetStatus s = x->be->accum_run(x->self, x->accum, last, err, len);
  if (!s) x->accum_i = last ? 0 : x->accum_i + 1;
  return s;
}
