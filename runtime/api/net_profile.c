/* net_profile.c - a GPU model's step timed kernel by kernel (net.h,
 * docs/profiling.md).
 *
 * net_profile makes a second GPU executor of the model's training (or
 * inference) graph -- the graph is already planned for the model's batch
 * and its kernels are in the NVRTC cache, so this costs the cuDNN plans and
 * the device memory, not a compile -- copies the model's parameters and
 * state into it, writes seeded inputs, and has rt_gpu_profile time it.  The
 * profiled steps train the copy, never the model.  The rows then get their
 * layer names and source locations from the graph, and a kind, a bound and
 * achieved rates from net_profile_classify.
 *
 * The host-side parts (classification, the trace file) need no GPU and are
 * built without the CUDA toolkit too. */
#include "net_impl.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef NET_HAVE_GPU
#include "rt_gpu.h"
#endif

enum { DEFAULT_REPS = 10 };

#define LATENCY_MS 0.005 /* under 5 us a kernel is mostly launch and tail */

const char *net_profile_kind_name(NetProfKind k) {
  static const char *const NAMES[] = {"conv fwd", "conv dgrad", "conv wgrad", "batch norm",   "elementwise", "pooling",
                                      "linear",   "loss",       "optimizer",  "casts/layout", "other"};
  return (unsigned)k < sizeof NAMES / sizeof NAMES[0] ? NAMES[k] : "?";
}

const char *net_profile_bound_name(NetProfBound b) {
  static const char *const NAMES[] = {"memory", "compute", "latency"};
  return (unsigned)b < sizeof NAMES / sizeof NAMES[0] ? NAMES[b] : "?";
}

/* A cuDNN convolution by its direction, a generated one (`_mma_`) as a
 * forward convolution; another generated kernel by its node's op (the
 * kernels after a fused convolution are its batch norm or relu mask). */
static NetProfKind kind_of(const char *op, const char *kernel) {
  static const struct {
    const char *prefix;
    NetProfKind kind;
  } CONV[] = {{"cudnn_conv_fwd", NET_PROF_CONV_FWD},
              {"cudnn_conv_dgrad", NET_PROF_CONV_DGRAD},
              {"cudnn_conv_wgrad", NET_PROF_CONV_WGRAD}};
  static const struct {
    const char *op;
    NetProfKind kind;
  } OPS[] = {
      {"batchnorm", NET_PROF_BATCHNORM},
      {"batchnorm_train", NET_PROF_BATCHNORM},
      {"batchnorm_bwd", NET_PROF_BATCHNORM},
      {"batchnorm_relu_bwd", NET_PROF_BATCHNORM},
      {"conv2d_bn_train", NET_PROF_BATCHNORM},
      {"conv2d_bn", NET_PROF_BATCHNORM},
      {"conv2d_bn_stats", NET_PROF_BATCHNORM},
      {"conv2d_bwd_data_bn_relu", NET_PROF_BATCHNORM},
      {"relu", NET_PROF_ELEMENTWISE},
      {"add", NET_PROF_ELEMENTWISE},
      {"add_relu", NET_PROF_ELEMENTWISE},
      {"relu_bwd", NET_PROF_ELEMENTWISE},
      {"conv2d_bwd_data_relu", NET_PROF_ELEMENTWISE},
      {"conv2d", NET_PROF_ELEMENTWISE},
      {"maxpool", NET_PROF_POOLING},
      {"avgpool", NET_PROF_POOLING},
      {"global_avgpool", NET_PROF_POOLING},
      {"maxpool_bwd", NET_PROF_POOLING},
      {"avgpool_bwd", NET_PROF_POOLING},
      {"global_avgpool_bwd", NET_PROF_POOLING},
      {"maxpool_bn_relu_bwd", NET_PROF_POOLING},
      {"maxpool_bn_relu", NET_PROF_POOLING},
      {"maxpool_bwd_win", NET_PROF_POOLING},
      {"batchnorm_relu_bwd_win", NET_PROF_BATCHNORM},
      {"softmax_cross_entropy", NET_PROF_LOSS},
      {"softmax_cross_entropy_bwd", NET_PROF_LOSS},
      {"sgd_update", NET_PROF_OPTIMIZER},
      {"nonfinite_check", NET_PROF_OPTIMIZER},
      {"loss_scale_update", NET_PROF_OPTIMIZER},
      {"cast", NET_PROF_CAST},
      {"relayout", NET_PROF_CAST},
  };
  /* linear, linear_bwd_data, linear_bwd_weight, generated or on cuDNN (a 1x1 convolution) */
  if (strncmp(op, "linear", strlen("linear")) == 0) return NET_PROF_LINEAR;
  if (strstr(kernel, "_mma_")) return NET_PROF_CONV_FWD; /* stem_conv.cu's generated convolution */
  for (size_t i = 0; i < sizeof CONV / sizeof CONV[0]; i++)
    if (strncmp(kernel, CONV[i].prefix, strlen(CONV[i].prefix)) == 0) return CONV[i].kind;
  for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
    if (strcmp(op, OPS[i].op) == 0) return OPS[i].kind;
  return NET_PROF_OTHER;
}

void net_profile_classify(NetProfile *p) {
  if (!p) return;
  p->kernels_ms = 0;
  for (int i = 0; i < p->nrows; i++) {
    NetProfRow *r = &p->rows[i];
    r->kind = kind_of(r->op, r->kernel);
    double s = r->ms > 0 ? r->ms * 1e-3 : 0;
    r->tflops = s > 0 ? r->flops / s / 1e12 : 0;
    r->gbs = s > 0 ? r->bytes / s / 1e9 : 0;
    double fc = p->peak_tflops > 0 ? r->tflops / p->peak_tflops : 0;
    double fm = p->peak_gbs > 0 ? r->gbs / p->peak_gbs : 0;
    r->peak_share = fc > fm ? fc : fm;
    r->bound = r->ms < LATENCY_MS ? NET_BOUND_LATENCY : fc > fm ? NET_BOUND_COMPUTE : NET_BOUND_MEMORY;
    p->kernels_ms += r->ms;
  }
}

void net_profile_free(NetProfile *p) {
  if (!p) return;
  free(p->rows);
  memset(p, 0, sizeof *p);
}

/* --- the trace ------------------------------------------------------------ */

static cJSON *meta_event(const char *what, int tid, const char *name) {
  cJSON *e = cJSON_CreateObject(), *args = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "name", what);
  cJSON_AddStringToObject(e, "ph", "M");
  cJSON_AddNumberToObject(e, "pid", 1);
  cJSON_AddNumberToObject(e, "tid", tid);
  cJSON_AddStringToObject(args, "name", name);
  cJSON_AddItemToObject(e, "args", args);
  return e;
}

static cJSON *span_event(const char *name, const char *cat, int tid, double start_ms, double ms) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "name", name);
  cJSON_AddStringToObject(e, "cat", cat);
  cJSON_AddStringToObject(e, "ph", "X");
  cJSON_AddNumberToObject(e, "ts", start_ms * 1e3);
  cJSON_AddNumberToObject(e, "dur", ms * 1e3);
  cJSON_AddNumberToObject(e, "pid", 1);
  cJSON_AddNumberToObject(e, "tid", tid);
  return e;
}

static cJSON *kernel_event(const NetProfRow *r) {
  cJSON *e = span_event(r->kernel, net_profile_kind_name(r->kind), 1, r->start_ms, r->ms);
  cJSON *args = cJSON_CreateObject();
  cJSON_AddStringToObject(args, "layer", r->layer);
  cJSON_AddStringToObject(args, "op", r->op);
  cJSON_AddStringToObject(args, "loc", r->loc);
  cJSON_AddNumberToObject(args, "node", r->node);
  cJSON_AddNumberToObject(args, "flops", r->flops);
  cJSON_AddNumberToObject(args, "bytes", r->bytes);
  cJSON_AddStringToObject(args, "bound", net_profile_bound_name(r->bound));
  cJSON_AddItemToObject(e, "args", args);
  return e;
}

/* The whole document; NULL when out of memory. */
static cJSON *trace_json(const NetProfile *p) {
  cJSON *root = cJSON_CreateObject(), *ev = cJSON_CreateArray(), *other = cJSON_CreateObject();
  if (!root || !ev || !other) {
    cJSON_Delete(root), cJSON_Delete(ev), cJSON_Delete(other);
    return NULL;
  }
  cJSON_AddItemToObject(root, "traceEvents", ev);
  cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
  char pname[320];
  snprintf(pname, sizeof pname, "netc %s step, batch %lld (%s)", p->inference ? "inference" : "training",
           (long long)p->batch, p->device);
  cJSON_AddItemToArray(ev, meta_event("process_name", 1, pname));
  cJSON_AddItemToArray(ev, meta_event("thread_name", 1, "kernels"));
  cJSON_AddItemToArray(ev, meta_event("thread_name", 2, "layers"));
  for (int i = 0; i < p->nrows; i++) {
    const NetProfRow *r = &p->rows[i];
    cJSON_AddItemToArray(ev, kernel_event(r));
    int last = i;
    while (last + 1 < p->nrows && p->rows[last + 1].node == r->node) last++;
    if (i == 0 || p->rows[i - 1].node != r->node) {
      const NetProfRow *z = &p->rows[last];
      cJSON *layer =
          span_event(*r->layer ? r->layer : r->op, "layer", 2, r->start_ms, z->start_ms + z->ms - r->start_ms);
      cJSON *args = cJSON_CreateObject();
      cJSON_AddStringToObject(args, "op", r->op);
      cJSON_AddStringToObject(args, "loc", r->loc);
      cJSON_AddItemToObject(layer, "args", args);
      cJSON_AddItemToArray(ev, layer);
    }
  }
  cJSON_AddStringToObject(other, "device", p->device);
  cJSON_AddNumberToObject(other, "batch", (double)p->batch);
  cJSON_AddNumberToObject(other, "step_ms", p->step_ms);
  cJSON_AddNumberToObject(other, "kernels_ms", p->kernels_ms);
  cJSON_AddNumberToObject(other, "peak_tflops", p->peak_tflops);
  cJSON_AddNumberToObject(other, "peak_gbs", p->peak_gbs);
  cJSON_AddNumberToObject(other, "reps", p->reps);
  cJSON_AddItemToObject(root, "otherData", other);
  return root;
}

NetStatus net_profile_trace(const NetProfile *p, const char *path) {
  if (!p || !path) return net_fail(NET_ERR_ARG, "net_profile_trace: %s is NULL", p ? "path" : "the profile");
  cJSON *root = trace_json(p);
  char *text = root ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!text) return net_fail(NET_ERR_NOMEM, "%s: out of memory writing the trace", path);
  size_t plen = strlen(path) + 32;
  char *tmp = malloc(plen);
  if (!tmp) {
    cJSON_free(text);
    return net_fail(NET_ERR_NOMEM, "%s: out of memory writing the trace", path);
  }
  snprintf(tmp, plen, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  int ok = f && fwrite(text, 1, strlen(text), f) == strlen(text) && fputc('\n', f) != EOF;
  if (f && fclose(f) != 0) ok = 0;
  NetStatus s = NET_OK;
  if (!ok || rename(tmp, path) != 0) {
    s = net_fail(NET_ERR_IO, "%s: cannot write the trace (%s)", path, f ? "write failed" : "cannot create the file");
    remove(tmp);
  }
  free(tmp);
  cJSON_free(text);
  return s;
}

/* --- the profile ---------------------------------------------------------- */

#ifdef NET_HAVE_GPU
static uint64_t next_rand(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 33;
}

/* Parameters and state from the model's executor `home` into x (same graph). */
static NetStatus copy_weights(const IrGraph *g, NetExec *home, RtGpu *x) {
  int64_t most = 1;
  for (int v = 0; v < g->nval; v++)
    if ((g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE) && rt_gpu_numel(x, v) > most)
      most = rt_gpu_numel(x, v);
  int64_t *buf = malloc(sizeof(int64_t) * (size_t)most);
  if (!buf) return net_fail(NET_ERR_NOMEM, "out of memory");
  NetStatus s = NET_OK;
  for (int v = 0; v < g->nval && !s; v++) {
    if (g->val[v].kind != IR_VAL_PARAM && g->val[v].kind != IR_VAL_STATE) continue;
    s = net_exec_read(home, v, buf, net_err_buf(), NET_ERRMAX);
    if (!s) s = net_status_of_cuda(rt_gpu_write(x, v, buf, net_err_buf(), NET_ERRMAX));
  }
  free(buf);
  return s ? net_failed(s) : NET_OK;
}

/* Seeded images and labels, the base rate and a loss scale of 1. */
static NetStatus write_inputs(NetModel *m, const NetIo *io, RtGpu *x, int inference) {
  uint64_t st = 42;
  for (int64_t i = 0; i < m->batch * m->sample; i++)
    m->img[i] = (float)((int64_t)(next_rand(&st) % 2001) - 1000) / 1000.0f;
  for (int64_t i = 0; i < m->batch; i++) m->lab[i] = (int64_t)(next_rand(&st) % (uint64_t)m->classes);
  float lr = inference ? 0 : (float)net_train_lr(m->gt), one = 1;
  if (lr <= 0) lr = 1e-3f;
  char *err = net_err_buf();
  RtCudaStatus s = rt_gpu_write(x, io->image, m->img, err, NET_ERRMAX);
  if (!s && io->label >= 0) s = rt_gpu_write(x, io->label, m->lab, err, NET_ERRMAX);
  if (!s && io->lr >= 0) s = rt_gpu_write(x, io->lr, &lr, err, NET_ERRMAX);
  if (!s && io->scale >= 0) s = rt_gpu_write(x, io->scale, &one, err, NET_ERRMAX);
  return s ? net_failed(net_status_of_cuda(s)) : NET_OK;
}

static void copy_str(char *dst, size_t len, const char *src) { snprintf(dst, len, "%s", src ? src : ""); }

/* The executor's records as rows, with their layer, op and location from g. */
static NetStatus fill_rows(const IrGraph *g, const RtGpuProfile *rp, NetProfile *out) {
  out->rows = calloc((size_t)rp->nrec + 1, sizeof *out->rows);
  if (!out->rows) return net_fail(NET_ERR_NOMEM, "out of memory");
  out->nrows = rp->nrec;
  for (int i = 0; i < rp->nrec; i++) {
    const RtGpuProfRec *r = &rp->rec[i];
    const IrNode *n = &g->node[r->node];
    NetProfRow *w = &out->rows[i];
    w->node = r->node;
    copy_str(w->layer, sizeof w->layer, n->name);
    copy_str(w->op, sizeof w->op, ir_op_info(n->op) ? ir_op_info(n->op)->name : "?");
    if (n->loc.file) snprintf(w->loc, sizeof w->loc, "%s:%d:%d", n->loc.file, n->loc.line, n->loc.col);
    copy_str(w->kernel, sizeof w->kernel, r->kernel);
    w->ms = r->ms, w->start_ms = r->start_ms, w->flops = r->flops, w->bytes = r->bytes;
  }
  out->reps = rp->reps;
  out->step_ms = rp->step_ms;
  out->peak_tflops = rp->peak_tflops;
  out->peak_gbs = rp->peak_gbs;
  copy_str(out->device, sizeof out->device, rp->device);
  return NET_OK;
}

static NetStatus profile_gpu(NetModel *m, int inference, int reps, NetProfile *out) {
  NetStatus s = inference ? net_infer_ready(m) : NET_OK;
  if (s) return s;
  IrGraph *g = inference ? m->gi : m->gt;
  NetExec *home = inference ? m->xi : m->xt;
  RtGpuOpts go = {.device = m->ordinal, .cache_dir = m->cache_dir, .opts = &m->opts};
  net_model_prebuilt(&m->graphs, g, &go.prebuilt, &go.prebuilt_arch);
  RtGpu *x = NULL;
  RtGpuProfile rp = {0};
  s = net_status_of_cuda(rt_gpu_new(g, m->batch, &go, &x, net_err_buf(), NET_ERRMAX));
  if (s) {
    net_failed(s);
  } else if (!(s = copy_weights(g, home, x)) && !(s = write_inputs(m, inference ? &m->ii : &m->it, x, inference))) {
    s = net_status_of_cuda(rt_gpu_profile(x, reps, &rp, net_err_buf(), NET_ERRMAX));
    if (!s) s = fill_rows(g, &rp, out);
  }
  rt_gpu_profile_free(&rp);
  rt_gpu_free(x);
  return s;
}
#endif

NetStatus net_profile(NetModel *m, const NetProfileOpts *o, NetProfile *out) {
  if (!out) return net_fail(NET_ERR_ARG, "net_profile: out is NULL");
  memset(out, 0, sizeof *out);
  if (!m) return net_fail(NET_ERR_ARG, "net_profile: the model is NULL");
  int inference = o && o->inference, reps = o && o->reps ? o->reps : DEFAULT_REPS;
  if (reps < 1 || reps > 1000) return net_fail(NET_ERR_ARG, "net_profile: reps must be in 1..1000, not %d", reps);
  if (!m->gpu)
    return net_fail(NET_ERR_NO_GPU, "net_profile: the model runs on the CPU; profiling times GPU kernels "
                                    "(load it with device \"gpu\")");
  if (!inference && !m->xt) return net_fail(NET_ERR_ARG, "net_profile: the model was loaded for inference only");
  out->inference = inference;
  out->batch = m->batch;
#ifdef NET_HAVE_GPU
  NetStatus s = profile_gpu(m, inference, reps, out);
  if (s) {
    net_profile_free(out);
    return s;
  }
  net_profile_classify(out);
  return NET_OK;
#else
  return net_fail(NET_ERR_NO_GPU, "net_profile: this netrt was built without the GPU back end");
#endif
}
