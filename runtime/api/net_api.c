/* net_api.c - the API's handle: load a model onto a device, free it, its
 * weights in and out of safetensors, and the thread's last error (net.h).
 *
 * Parameters and state live in one executor, the model's "home": the
 * training executor, or the inference one for an inference_only model.
 * Everything that moves them (initialization, weights files, a rebuild for
 * another batch, the copy into the inference graph) goes through host
 * buffers with the executor's read/write, so it is written once for the CPU
 * and the GPU. */
#include "net_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_memory.h"
#include "rt_init.h"
#include "rt_weights.h"

static _Thread_local char last_error[NET_ERRMAX];

const char *net_last_error(void) { return last_error; }
char *net_err_buf(void) { return last_error; }
NetStatus net_failed(NetStatus s) { return s; }

NetStatus net_fail(NetStatus s, const char *fmt, ...) {
  char msg[NET_ERRMAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memcpy(last_error, msg, sizeof msg);
  return s;
}

const char *net_status_name(NetStatus s) {
  static const char *const NAMES[] = {"NET_OK",          "NET_ERR_ARG",      "NET_ERR_IO",     "NET_ERR_MODEL",
                                      "NET_ERR_WEIGHTS", "NET_ERR_DATA",     "NET_ERR_NO_GPU", "NET_ERR_DEVICE",
                                      "NET_ERR_RUN",     "NET_ERR_DIVERGED", "NET_ERR_NOMEM",  "NET_STOPPED",
                                      "NET_ERR_DIST"};
  return (unsigned)s < sizeof NAMES / sizeof NAMES[0] ? NAMES[s] : "NET_ERR_UNKNOWN";
}

static int is_int_dtype(IrDtype dt) { return dt == IR_DT_I32 || dt == IR_DT_I64 || dt == IR_DT_U8; }

static int input_named(const IrGraph *g, const char *name) {
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_INPUT && strcmp(g->val[v].name, name) == 0) return v;
  return -1;
}

static int ir_value_named(const IrGraph *g, const char *name) {
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_STATE && strcmp(g->val[v].name, name) == 0) return v;
  return -1;
}

double net_train_lr(const IrGraph *g) {
  const IrAttr *a = ir_train_find(g, "lr");
  return a && a->kind == IR_ATTR_FLOAT ? a->f : -1;
}

float net_train_loss_scale(const IrGraph *g) {
  const IrAttr *kind = ir_train_find(g, "loss_scale"), *scale = ir_train_find(g, "loss_scale_scale");
  if (kind && kind->kind == IR_ATTR_STR && kind->s && strcmp(kind->s, "static") == 0 && scale &&
      scale->kind == IR_ATTR_FLOAT)
    return (float)scale->f;
  return 1.0f;
}

/* The step's inputs and outputs in g (training: image, label, lr,
 * loss_scale; outputs [loss, logits, ...]; inference: image, last output). */
static NetStatus find_io(const IrGraph *g, int training, NetIo *io) {
  const char *which = training ? "training graph" : "inference graph";
  io->image = input_named(g, "image");
  io->label = input_named(g, "label");
  io->lr = input_named(g, "lr");
  io->scale = input_named(g, "loss_scale");
  io->scale_state = -1;
  /* an ONNX model's image input keeps its file's name ("input", "x"): the one batched float input */
  if (io->image < 0) {
    int found = 0;
    for (int v = 0; v < g->nval; v++) {
      const IrValue *x = &g->val[v];
      if (x->kind != IR_VAL_INPUT || v == io->lr || v == io->scale || is_int_dtype(x->type.dtype) || x->type.rank < 2 ||
          x->type.dim[0] != IR_DIM_N)
        continue;
      io->image = v;
      found++;
    }
    if (found != 1)
      return net_fail(NET_ERR_MODEL, "%s: no input called 'image'%s", which,
                      found ? ", and more than one batched float input to take for it" : "");
  }
  const IrType *t = &g->val[io->image].type;
  if (t->dim[0] != IR_DIM_N || is_int_dtype(t->dtype) || (t->rank != 2 && t->rank != 4))
    return net_fail(NET_ERR_MODEL, "%s: input '%s' must be a float [N,C,H,W] or [N,F]", which, g->val[io->image].name);
  io->nhwc = t->layout == IR_LAYOUT_NHWC;
  io->c = t->rank == 4 ? t->dim[io->nhwc ? 3 : 1] : t->dim[1];
  io->h = t->rank == 4 ? t->dim[io->nhwc ? 1 : 2] : 1;
  io->w = t->rank == 4 ? t->dim[io->nhwc ? 2 : 3] : 1;
  if (training) {
    /* no INPUT loss_scale: the graph scales dynamically, with the scale in STATE @loss_scale */
    if (io->scale < 0) io->scale_state = ir_value_named(g, "loss_scale");
    if (io->label < 0 || io->lr < 0 || (io->scale < 0 && io->scale_state < 0) || g->noutput < 2)
      return net_fail(NET_ERR_MODEL, "%s: needs inputs 'label', 'lr', a loss scale and outputs [loss, logits]", which);
    if (!is_int_dtype(g->val[io->label].type.dtype))
      return net_fail(NET_ERR_MODEL, "%s: input 'label' must be integer", which);
    io->loss = g->output[0];
    io->logits = g->output[1];
  } else {
    if (g->noutput < 1) return net_fail(NET_ERR_MODEL, "%s: no output", which);
    io->loss = -1;
    io->logits = g->output[g->noutput - 1];
  }
  const IrType *tl = &g->val[io->logits].type;
  if (tl->rank != 2 || tl->dim[0] != IR_DIM_N || is_int_dtype(tl->dtype))
    return net_fail(NET_ERR_MODEL, "%s: the logits output must be a float [N, classes]", which);
  return NET_OK;
}

static NetStatus resolve_device(const NetLoadOpts *o, int *gpu) {
  const char *d = o->device ? o->device : "auto";
  char why[512];
  if (strcmp(d, "cpu") == 0) {
    *gpu = 0;
  } else if (strcmp(d, "gpu") == 0) {
    if (!net_exec_gpu_present(why, sizeof why)) return net_fail(NET_ERR_NO_GPU, "no GPU: %s", why);
    *gpu = 1;
  } else if (strcmp(d, "auto") == 0) {
    *gpu = net_exec_gpu_present(why, sizeof why);
  } else {
    return net_fail(NET_ERR_ARG, "device must be auto, cpu or gpu, not '%s'", d);
  }
  return NET_OK;
}

/* Makes an executor of g at m->batch (planning g for it on the GPU). */
static NetStatus make_exec(NetModel *m, IrGraph *g, NetExec **x) {
  char *err = net_err_buf();
  NetStatus s = m->gpu ? net_model_plan(g, m->batch, err, NET_ERRMAX) : NET_OK;
  const CgProgram *prog;
  const char *arch;
  net_model_prebuilt(&m->graphs, g, &prog, &arch);
  NetExecOpts eo = {.ordinal = m->ordinal,
                    .cache_dir = m->cache_dir,
                    .tune = m->tune,
                    .prebuilt = prog,
                    .arch = arch,
                    .opts = &m->opts};
  double need = 0, budget = m->memory_limit - m->held;
  const double gib = 1073741824.0;
  if (!s && m->memory_limit > 0) {
    /* the training executor leaves room for the inference one, made when the first evaluation runs */
    const IrGraph *also = g == m->gt && m->gi && !m->xi ? m->gi : NULL;
    double later = also ? net_memory_need(also, m->batch, m->gpu) : 0;
    need = net_memory_need(g, m->batch, m->gpu);
    if (need < 0 || later < 0 || need + later > budget) {
      int64_t fits = net_memory_largest_batch(g, also, m->batch, m->gpu, budget);
      char with[160] = "";
      if (also)
        snprintf(with, sizeof with, " and the inference graph's %.2f GiB", later / gib);
      else if (m->held > 0)
        snprintf(with, sizeof with, " beside the training executor's %.2f GiB", m->held / gib);
      char best[96];
      if (fits > 0)
        snprintf(best, sizeof best, "the largest batch that fits is %lld", (long long)fits);
      else
        snprintf(best, sizeof best, "not even batch 1 fits");
      return net_fail(NET_ERR_DEVICE,
                      "graph %s at batch %lld needs %.2f GiB for its %s%s, more than the memory limit of %.2f GiB: %s",
                      g->name ? g->name : "?", (long long)m->batch, need / gib,
                      m->gpu ? "activations, parameters and state" : "values", with, m->memory_limit / gib, best);
    }
    budget -= later;
    eo.memory_limit = (size_t)budget;
  }
  if (!s) s = net_exec_new(m->gpu, &eo, g, m->batch, x, err, NET_ERRMAX);
  if (s == NET_ERR_DEVICE && m->memory_limit > 0) {
    /* the plan fitted, but not the scratch and cuDNN workspace beside it */
    size_t n = strlen(err);
    if (n < NET_ERRMAX - 80)
      snprintf(err + n, NET_ERRMAX - n, " (a batch below %lld, or a higher memory limit)", (long long)m->batch);
  }
  if (!s) m->held += m->gpu ? (double)net_exec_device_bytes(*x) : need;
  return s;
}

static int64_t weight_numel(const IrGraph *g, int v) { return ir_type_numel(&g->val[v].type, 1); }

/* Host copies of every param and state of the home executor (NULL for
 * other values), read from it when `read`. */
static NetStatus shadow_new(NetModel *m, int read, float ***out) {
  const IrGraph *g = m->gt ? m->gt : m->gi;
  NetExec *x = m->xt ? m->xt : m->xi;
  float **sh = calloc((size_t)g->nval + 1, sizeof *sh);
  if (!sh) return net_fail(NET_ERR_NOMEM, "out of memory");
  *out = sh;
  for (int v = 0; v < g->nval; v++) {
    if (!ir_value_is_weight(g, v)) continue;
    if (!(sh[v] = malloc(sizeof(int64_t) * (size_t)(weight_numel(g, v) + 1))))
      return net_fail(NET_ERR_NOMEM, "out of memory");
    NetStatus s = read ? net_exec_read(x, net_exec_find(x, g->val[v].name), sh[v], net_err_buf(), NET_ERRMAX) : NET_OK;
    if (s) return net_failed(s);
  }
  return NET_OK;
}

static void shadow_free(const NetModel *m, float **sh) {
  if (!sh) return;
  const IrGraph *g = m->gt ? m->gt : m->gi;
  for (int v = 0; v < g->nval; v++) free(sh[v]);
  free(sh);
}

static NetStatus shadow_write(NetModel *m, float **sh) {
  const IrGraph *g = m->gt ? m->gt : m->gi;
  NetExec *x = m->xt ? m->xt : m->xi;
  for (int v = 0; v < g->nval; v++) {
    if (!sh[v]) continue;
    NetStatus s = net_exec_write(x, net_exec_find(x, g->val[v].name), sh[v], net_err_buf(), NET_ERRMAX);
    if (s) return net_failed(s);
  }
  m->infer_stale = 1;
  return NET_OK;
}

static NetStatus init_params(NetModel *m, uint64_t seed) {
  const IrGraph *g = m->gt ? m->gt : m->gi;
  float **sh = NULL;
  NetStatus s = shadow_new(m, 0, &sh);
  for (int v = 0; v < g->nval && !s; v++) {
    if (!sh[v]) continue;
    if (is_int_dtype(g->val[v].type.dtype)) {
      memset(sh[v], 0, sizeof(int64_t) * (size_t)weight_numel(g, v));
    } else {
      s = net_failed(net_status_of_init(rt_init_value(g, v, seed, sh[v], net_err_buf(), NET_ERRMAX)));
    }
  }
  if (!s) s = shadow_write(m, sh);
  shadow_free(m, sh);
  return s;
}

/* Buffers for one batch of inputs at m->batch. */
static NetStatus batch_buffers(NetModel *m) {
  free(m->img);
  free(m->lab);
  m->img = malloc(sizeof(float) * (size_t)(m->batch * m->sample));
  m->lab = calloc((size_t)m->batch, sizeof(int64_t));
  return m->img && m->lab ? NET_OK : net_fail(NET_ERR_NOMEM, "out of memory for a batch of %lld", (long long)m->batch);
}

static NetStatus pair_params(NetModel *m) {
  m->pairs = malloc(sizeof(int) * 2 * ((size_t)m->gi->nval + 1));
  if (!m->pairs) return net_fail(NET_ERR_NOMEM, "out of memory");
  for (int v = 0; v < m->gi->nval; v++) {
    const IrValue *val = &m->gi->val[v];
    if (!ir_value_is_weight(m->gi, v)) continue;
    int t = net_exec_find(m->xt, val->name);
    if (t < 0 || !ir_type_equal(&m->gt->val[t].type, &val->type))
      return net_fail(NET_ERR_MODEL, "@%s of the inference graph has no twin of its type in the training graph",
                      val->name);
    m->pairs[2 * m->npairs] = v, m->pairs[2 * m->npairs + 1] = t;
    m->npairs++;
  }
  return NET_OK;
}

static NetStatus load(NetModel *m, const char *path, const NetLoadOpts *o) {
  NetStatus s = resolve_device(o, &m->gpu);
  if (s) return s;
  m->ordinal = o->gpu;
  if (o->cache_dir && !(m->cache_dir = strdup(o->cache_dir))) return net_fail(NET_ERR_NOMEM, "out of memory");
  if (!(m->path = strdup(path)) || (o->precision && !(m->precision = strdup(o->precision))))
    return net_fail(NET_ERR_NOMEM, "out of memory");
  m->tune = o->tune;
  /* every switch: the environment's, then the caller's (opts.h) */
  if (opts_from_env(&m->opts, net_err_buf(), NET_ERRMAX) || opts_parse(&m->opts, o->options, net_err_buf(), NET_ERRMAX))
    return net_failed(NET_ERR_ARG);
  if ((s = net_model_open(path, &m->arena, o, &m->graphs, net_err_buf(), NET_ERRMAX))) return net_failed(s);
  m->gt = m->graphs.train, m->gi = m->graphs.infer;
  m->batch = o->batch ? o->batch : m->graphs.batch;
  if (m->batch < 1) m->batch = 1;
  if (!(o->memory_limit >= 0) || !(o->memory_fraction >= 0 && o->memory_fraction <= 1) ||
      (o->memory_limit > 0 && o->memory_fraction > 0))
    return net_fail(NET_ERR_ARG,
                    "memory limit %g bytes, fraction %g: give bytes >= 0 or a fraction in (0, 1], not both",
                    o->memory_limit, o->memory_fraction);
  m->memory_limit = o->memory_limit;
  if (o->memory_fraction > 0) {
    double total = net_exec_total_memory(m->gpu, m->ordinal);
    if (total <= 0)
      return net_fail(NET_ERR_DEVICE, "a memory limit of %g of the %s: its memory cannot be read", o->memory_fraction,
                      m->gpu ? "GPU" : "machine");
    m->memory_limit = o->memory_fraction * total;
  }
  if (m->gt && o->keep_grads) {
    m->keep_grads = 1;
    if ((s = net_model_keep_grads(m->gt, net_err_buf(), NET_ERRMAX))) return net_failed(s);
  }
  if ((s = find_io(m->gi, 0, &m->ii)) || (m->gt && (s = find_io(m->gt, 1, &m->it)))) return s;
  m->classes = m->gi->val[m->ii.logits].type.dim[1];
  m->sample = m->ii.c * m->ii.h * m->ii.w;
  if (m->gt && (m->it.c * m->it.h * m->it.w != m->sample || m->gt->val[m->it.logits].type.dim[1] != m->classes))
    return net_fail(NET_ERR_MODEL, "%s: the training and inference graphs differ in image or logits shape", path);
  if (m->gt) {
    if ((s = make_exec(m, m->gt, &m->xt)) || (s = pair_params(m))) return s;
  } else if ((s = make_exec(m, m->gi, &m->xi))) {
    return s;
  }
  if ((s = batch_buffers(m))) return s;
  m->last_scale = 1;
  return init_params(m, o->seed);
}

NetStatus net_load(const char *path, const NetLoadOpts *opts, NetModel **out) {
  if (!out) return net_fail(NET_ERR_ARG, "net_load: out is NULL");
  *out = NULL;
  if (!path) return net_fail(NET_ERR_ARG, "net_load: path is NULL");
  NetLoadOpts o = opts ? *opts : (NetLoadOpts){0};
  if (o.batch < 0)
    return net_fail(NET_ERR_ARG, "batch must be at least 1 (0: the model's), not %lld", (long long)o.batch);
  NetModel *m = calloc(1, sizeof *m);
  if (!m) return net_fail(NET_ERR_NOMEM, "out of memory");
  arena_init(&m->arena);
  NetStatus s = load(m, path, &o);
  if (s) {
    char msg[NET_ERRMAX];
    snprintf(msg, sizeof msg, "%s", last_error);
    if (strncmp(msg, path, strlen(path)) != 0 && s != NET_ERR_NO_GPU) net_fail(s, "%s: %s", path, msg);
    net_free(m);
    return s;
  }
  *out = m;
  return NET_OK;
}

void net_free(NetModel *m) {
  if (!m) return;
  if (m->dist) m->dist_leave(m->dist); /* leaves the run before the executor frees its communicator */
  net_exec_free(m->xt);
  net_exec_free(m->xi);
  net_model_close(&m->graphs);
  arena_free(&m->arena);
  free(m->pairs);
  free(m->img);
  free(m->lab);
  free(m->cache_dir);
  free(m->path);
  free(m->precision);
  free(m);
}

int net_gpu_count(void) { return net_exec_gpu_count(); }

const char *net_device(const NetModel *m) { return m && m->gpu ? "gpu" : "cpu"; }
int64_t net_batch(const NetModel *m) { return m ? m->batch : 0; }
int64_t net_classes(const NetModel *m) { return m ? m->classes : 0; }
int net_gpu_available(char *why, size_t len) {
  char local[256];
  return net_exec_gpu_present(why ? why : local, why ? len : sizeof local);
}

NetStatus net_loss_scale_set(NetModel *m, float scale) {
  if (!m || !m->xt) return net_fail(NET_ERR_ARG, "net_loss_scale_set: %s", m ? "no training executor" : "no model");
  if (!(scale > 0) || !isfinite(scale)) return net_fail(NET_ERR_ARG, "net_loss_scale_set: scale %g", (double)scale);
  if (m->it.scale_state < 0)
    return net_fail(NET_ERR_ARG, "the loss scale of this graph is static: give it with each step");
  NetStatus s = net_exec_write(m->xt, m->it.scale_state, &scale, net_err_buf(), NET_ERRMAX);
  return s ? net_failed(s) : NET_OK;
}

int64_t net_image_numel(const NetModel *m, int64_t chw[3]) {
  if (!m) return 0;
  if (chw) chw[0] = m->ii.c, chw[1] = m->ii.h, chw[2] = m->ii.w;
  return m->sample;
}

NetStatus net_rebatch(NetModel *m, int64_t n) {
  if (m->dist)
    return net_fail(NET_ERR_ARG, "batch %lld: a model in a data-parallel run keeps its batch of %lld", (long long)n,
                    (long long)m->batch);
  float **sh = NULL;
  NetStatus s = shadow_new(m, 1, &sh);
  if (!s) {
    net_exec_free(m->xt);
    net_exec_free(m->xi);
    m->xt = m->xi = NULL;
    m->batch = n;
    s = make_exec(m, m->gt ? m->gt : m->gi, m->gt ? &m->xt : &m->xi);
  }
  if (!s) s = shadow_write(m, sh);
  if (!s) s = batch_buffers(m);
  shadow_free(m, sh);
  return s;
}

NetStatus net_infer_ready(NetModel *m) {
  NetStatus s;
  if (!m->xi && (s = make_exec(m, m->gi, &m->xi))) return s;
  if (!m->xt || !m->infer_stale) return NET_OK;
  int64_t most = 1;
  for (int i = 0; i < m->npairs; i++) {
    int64_t k = weight_numel(m->gi, m->pairs[2 * i]);
    if (k > most) most = k;
  }
  int64_t *buf = malloc(sizeof(int64_t) * (size_t)most);
  if (!buf) return net_fail(NET_ERR_NOMEM, "out of memory");
  s = NET_OK;
  for (int i = 0; i < m->npairs && !s; i++) {
    s = net_exec_read(m->xt, m->pairs[2 * i + 1], buf, net_err_buf(), NET_ERRMAX);
    if (!s) s = net_exec_write(m->xi, m->pairs[2 * i], buf, net_err_buf(), NET_ERRMAX);
  }
  free(buf);
  if (s) return net_failed(s);
  m->infer_stale = 0;
  return NET_OK;
}

typedef struct WeightsIo {
  float **sh;
} WeightsIo;

static float *shadow_buf(void *user, int v) { return ((WeightsIo *)user)->sh[v]; }

NetStatus net_weights_load(NetModel *m, const char *path) {
  if (!m || !path) return net_fail(NET_ERR_ARG, "net_weights_load: %s is NULL", m ? "path" : "the model");
  WeightsIo io = {NULL};
  NetStatus s = shadow_new(m, 1, &io.sh);
  if (!s) {
    /* an inference-only model takes a training checkpoint: its optimizer and loss-scale state, and
       nothing else, may be extra (so that infer refuses what step refuses) */
    unsigned flags = RT_WEIGHTS_OPTIM_OPTIONAL | (m->gt ? 0u : (unsigned)RT_WEIGHTS_TRAINING_OK);
    s = net_status_of_weights(
        rt_weights_load(m->gt ? m->gt : m->gi, path, flags, shadow_buf, &io, net_err_buf(), NET_ERRMAX));
    if (!s) s = shadow_write(m, io.sh);
  }
  shadow_free(m, io.sh);
  return s;
}

NetStatus net_weights_save_meta(NetModel *m, const char *path, RtWeightsMetaFn meta, void *meta_user) {
  WeightsIo io = {NULL};
  NetStatus s = shadow_new(m, 1, &io.sh);
  if (!s)
    s = net_status_of_weights(
        rt_weights_save_meta(m->gt ? m->gt : m->gi, path, shadow_buf, &io, meta, meta_user, net_err_buf(), NET_ERRMAX));
  shadow_free(m, io.sh);
  return s;
}

NetStatus net_weights_save(NetModel *m, const char *path) {
  if (!m || !path) return net_fail(NET_ERR_ARG, "net_weights_save: %s is NULL", m ? "path" : "the model");
  return net_weights_save_meta(m, path, NULL, NULL);
}

NetStatus net_weights_export(NetModel *m, const char *path, int64_t batches_tracked) {
  if (!m || !path) return net_fail(NET_ERR_ARG, "net_weights_export: %s is NULL", m ? "path" : "the model");
  if (batches_tracked < 0)
    return net_fail(NET_ERR_ARG, "net_weights_export: batches_tracked %lld is negative", (long long)batches_tracked);
  WeightsIo io = {NULL};
  NetStatus s = shadow_new(m, 1, &io.sh);
  if (!s)
    s = net_status_of_weights(
        rt_weights_export(m->gt ? m->gt : m->gi, path, shadow_buf, &io, batches_tracked, net_err_buf(), NET_ERRMAX));
  shadow_free(m, io.sh);
  return s;
}
