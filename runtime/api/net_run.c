/* net_run.c - running a loaded model: one training step, its results to a
 * file, inference in chunks of the executor's batch, top-1 evaluation and
 * the benchmark (net.h).
 *
 * Images come in NCHW (floats, or bytes normalized here) and are written in
 * the image input's layout; a graph whose input is NHWC gets them
 * transposed.  A step writes image, label, lr and loss_scale, runs the
 * executor (a graph replay on the GPU) and reads the loss back, which
 * synchronizes with the device once per step. */
#include "net_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_weights.h"

void net_put_images(const NetIo *io, float *dst, const float *f32, const uint8_t *u8, int64_t n, float scale,
                    float shift) {
  int64_t C = io->c, HW = io->h * io->w, S = C * HW;
  for (int64_t i = 0; i < n; i++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t p = 0; p < HW; p++) {
        int64_t from = i * S + c * HW + p, to = i * S + (io->nhwc ? p * C + c : c * HW + p);
        dst[to] = f32 ? f32[from] : (float)u8[from] * scale + shift;
      }
}

NetStatus net_step_run(NetModel *m, float lr, float scale, float *loss, float *scale_used) {
  char *err = net_err_buf();
  NetStatus s = net_exec_write(m->xt, m->it.image, m->img, err, NET_ERRMAX);
  if (!s) s = net_exec_write(m->xt, m->it.label, m->lab, err, NET_ERRMAX);
  if (!s) s = net_exec_write(m->xt, m->it.lr, &lr, err, NET_ERRMAX);
  if (!s && m->it.scale >= 0) s = net_exec_write(m->xt, m->it.scale, &scale, err, NET_ERRMAX);
  if (!s && m->it.scale < 0) s = net_exec_read(m->xt, m->it.scale_state, &scale, err, NET_ERRMAX);
  if (!s) s = net_exec_run(m->xt, err, NET_ERRMAX);
  if (!s) s = net_exec_read(m->xt, m->it.loss, loss, err, NET_ERRMAX);
  if (s) return net_failed(s);
  m->infer_stale = 1, m->stepped = 1, m->last_scale = scale;
  if (scale_used) *scale_used = scale;
  if (!isfinite(*loss)) return net_fail(NET_ERR_DIVERGED, "the loss is %g (lr %g, loss scale %g)", *loss, lr, scale);
  return NET_OK;
}

NetStatus net_step(NetModel *m, const NetBatch *in, NetStepOut *out) {
  if (!m || !in) return net_fail(NET_ERR_ARG, "net_step: %s is NULL", m ? "the batch" : "the model");
  if (!m->xt) return net_fail(NET_ERR_ARG, "net_step: the model was loaded for inference only");
  if (in->n < 1) return net_fail(NET_ERR_ARG, "net_step: batch of %lld images (at least 1)", (long long)in->n);
  if ((!in->images && !in->images_u8) || !in->labels)
    return net_fail(NET_ERR_ARG, "net_step: the batch has no %s", in->labels ? "images" : "labels");
  for (int64_t i = 0; i < in->n; i++)
    if (in->labels[i] < 0 || in->labels[i] >= m->classes)
      return net_fail(NET_ERR_DATA, "net_step: label %lld of image %lld is not one of the %lld classes",
                      (long long)in->labels[i], (long long)i, (long long)m->classes);
  double lr = in->lr > 0 ? in->lr : net_train_lr(m->gt);
  float scale = in->loss_scale > 0 ? in->loss_scale : net_train_loss_scale(m->gt);
  if (!(lr > 0)) return net_fail(NET_ERR_ARG, "net_step: no learning rate given and none in the train section");
  NetStatus s;
  if (in->n != m->batch && (s = net_rebatch(m, in->n))) return s;
  float sd = in->std > 0 ? in->std : 1, mean = in->std > 0 ? in->mean : 0;
  net_put_images(&m->it, m->img, in->images, in->images_u8, in->n, 1.0f / (255.0f * sd), -mean / sd);
  memcpy(m->lab, in->labels, sizeof(int64_t) * (size_t)in->n);
  float loss = 0;
  s = net_step_run(m, (float)lr, scale, &loss, &scale);
  if (out) {
    out->loss = loss, out->lr = (float)lr, out->loss_scale = scale;
    if (!s && out->logits) s = net_exec_read(m->xt, m->it.logits, out->logits, net_err_buf(), NET_ERRMAX);
  }
  return net_failed(s);
}

/* Adds value v of the training executor to w as name, times mul. */
static NetStatus add_value(NetModel *m, RtStWriter *w, const char *name, int v, float mul, void *buf) {
  NetStatus s = net_exec_read(m->xt, v, buf, net_err_buf(), NET_ERRMAX);
  if (s) return net_failed(s);
  RtWeightsStatus ws = rt_weights_add(w, name, &m->gt->val[v].type, m->batch, buf, mul, net_err_buf(), NET_ERRMAX);
  return net_failed(net_status_of_weights(ws));
}

NetStatus net_step_save(NetModel *m, const char *path) {
  if (!m || !path) return net_fail(NET_ERR_ARG, "net_step_save: %s is NULL", m ? "path" : "the model");
  if (!m->xt || !m->stepped) return net_fail(NET_ERR_ARG, "net_step_save: no step has run");
  if (m->gpu && !m->keep_grads)
    return net_fail(NET_ERR_ARG, "net_step_save: on the GPU the gradients are kept only when loaded with keep_grads");
  const IrGraph *g = m->gt;
  int64_t most = 1;
  for (int v = 0; v < g->nval; v++) {
    int64_t k = ir_type_numel(&g->val[v].type, m->batch);
    if (k > most) most = k;
  }
  void *buf = malloc(sizeof(int64_t) * (size_t)most);
  RtStWriter *w = rt_st_writer_new();
  NetStatus s = buf && w ? NET_OK : net_fail(NET_ERR_NOMEM, "out of memory");
  if (!s) s = add_value(m, w, "loss", m->it.loss, 1, buf);
  if (!s) s = add_value(m, w, "logits", m->it.logits, 1, buf);
  for (int n = 0; n < g->nnode && !s; n++) {
    if (g->node[n].op != IR_OP_SGD_UPDATE) continue;
    char name[1024];
    snprintf(name, sizeof name, "%s.grad", g->val[g->node[n].in[0]].name);
    s = add_value(m, w, name, g->node[n].in[1], 1.0f / m->last_scale, buf);
  }
  for (int v = 0; v < g->nval && !s; v++)
    if (g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE)
      s = add_value(m, w, g->val[v].name, v, 1, buf);
  RtStStatus ws;
  if (!s && (ws = rt_st_writer_write(w, path))) s = net_fail(net_status_of_st(ws), "%s", rt_st_writer_error(w));
  rt_st_writer_free(w);
  free(buf);
  return s;
}

int64_t net_eval_rank(const float *row, int64_t C, int64_t label) {
  if (label < 0 || label >= C) return C;
  for (int64_t c = 0; c < C; c++)
    if (!isfinite(row[c])) return C; /* a NaN or an infinity makes no prediction, right or wrong */
  int64_t r = 0;
  for (int64_t c = 0; c < C; c++) r += row[c] > row[label] || (c < label && row[c] == row[label]);
  return r;
}

/* Counts one image in top1 / top5 when its label ranks first / in the
 * first five of its logits row (net_eval_rank). */
static void tally(const float *row, int64_t C, int64_t label, int64_t *top1, int64_t *top5) {
  int64_t r = net_eval_rank(row, C, label);
  *top1 += r < 1, *top5 += r < 5;
}

/* One run of the inference graph on the batch in m->img (labels zeroed: the
 * loss is not used); its logits [batch, classes] into out. */
static NetStatus infer_batch(NetModel *m, float *out) {
  char *err = net_err_buf();
  memset(m->lab, 0, sizeof(int64_t) * (size_t)m->batch);
  NetStatus s = net_exec_write(m->xi, m->ii.image, m->img, err, NET_ERRMAX);
  if (!s && m->ii.label >= 0) s = net_exec_write(m->xi, m->ii.label, m->lab, err, NET_ERRMAX);
  if (!s) s = net_exec_run(m->xi, err, NET_ERRMAX);
  if (!s) s = net_exec_read(m->xi, m->ii.logits, out, err, NET_ERRMAX);
  return s;
}

/* Runs the inference graph over n images (floats or bytes) in chunks of
 * the batch; fills logits (n*classes, may be NULL) and counts the images
 * whose label ranks first (right) and in the top five (right5); labels may
 * be NULL. */
static NetStatus infer_chunks(NetModel *m, const float *f32, const uint8_t *u8, int64_t n, float scale, float shift,
                              float *logits, const uint8_t *labels, int64_t *right, int64_t *right5) {
  NetStatus s = net_infer_ready(m);
  if (s) return s;
  int64_t B = m->batch, S = m->sample, C = m->classes;
  float *out = malloc(sizeof(float) * (size_t)(B * C));
  if (!out) return net_fail(NET_ERR_NOMEM, "out of memory");
  *right = *right5 = 0;
  for (int64_t at = 0; at < n && !s; at += B) {
    int64_t k = n - at < B ? n - at : B;
    memset(m->img, 0, sizeof(float) * (size_t)(B * S));
    net_put_images(&m->ii, m->img, f32 ? f32 + at * S : NULL, u8 ? u8 + at * S : NULL, k, scale, shift);
    if ((s = infer_batch(m, out))) break;
    if (logits) memcpy(logits + at * C, out, sizeof(float) * (size_t)(k * C));
    for (int64_t i = 0; labels && i < k; i++) tally(out + i * C, C, labels[at + i], right, right5);
  }
  free(out);
  return net_failed(s);
}

NetStatus net_infer(NetModel *m, const float *images, int64_t n, float *logits) {
  if (!m || !images || !logits)
    return net_fail(NET_ERR_ARG, "net_infer: %s is NULL", !m ? "the model" : !images ? "images" : "logits");
  if (n < 1) return net_fail(NET_ERR_ARG, "net_infer: %lld images (at least 1)", (long long)n);
  int64_t right, right5;
  return infer_chunks(m, images, NULL, n, 1, 0, logits, NULL, &right, &right5);
}

NetStatus net_evaluate_u8(NetModel *m, const uint8_t *images, const uint8_t *labels, int64_t n, float mean, float std,
                          double *accuracy, double *top5) {
  int64_t right = 0, right5 = 0;
  NetStatus s = infer_chunks(m, NULL, images, n, 1.0f / (255.0f * std), -mean / std, NULL, labels, &right, &right5);
  *accuracy = n ? (double)right / (double)n : 0;
  if (top5) *top5 = n ? (double)right5 / (double)n : 0;
  return s;
}

NetStatus net_evaluate_batch(NetModel *m, int64_t n, const int64_t *labels, int64_t *top1, int64_t *top5) {
  NetStatus s = net_infer_ready(m);
  if (s) return s;
  int64_t B = m->batch, C = m->classes;
  if (n < 0 || n > B)
    return net_fail(NET_ERR_ARG, "net_evaluate_batch: %lld images (at most %lld)", (long long)n, (long long)B);
  float *out = malloc(sizeof(float) * (size_t)(B * C));
  if (!out) return net_fail(NET_ERR_NOMEM, "out of memory");
  s = infer_batch(m, out);
  for (int64_t i = 0; !s && i < n; i++) tally(out + i * C, C, labels[i], top1, top5);
  free(out);
  return net_failed(s);
}

static uint64_t mix(uint64_t *st) {
  uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

NetStatus net_bench(NetModel *m, int inference, int steps, NetBenchResult *r) {
  if (!m || !r) return net_fail(NET_ERR_ARG, "net_bench: %s is NULL", m ? "the result" : "the model");
  if (steps < 1) return net_fail(NET_ERR_ARG, "net_bench: %d steps (at least 1)", steps);
  if (!inference && !m->xt) return net_fail(NET_ERR_ARG, "net_bench: the model was loaded for inference only");
  memset(r, 0, sizeof *r);
  NetStatus s = inference ? net_infer_ready(m) : NET_OK;
  if (s) return s;
  NetExec *x = inference ? m->xi : m->xt;
  const NetIo *io = inference ? &m->ii : &m->it;
  uint64_t st = 42;
  for (int64_t i = 0; i < m->batch * m->sample; i++) m->img[i] = (float)((int64_t)(mix(&st) % 2001) - 1000) / 1000.0f;
  for (int64_t i = 0; i < m->batch; i++) m->lab[i] = (int64_t)(mix(&st) % (uint64_t)m->classes);
  char *err = net_err_buf();
  float lr = inference ? 0 : (float)fmax(net_train_lr(m->gt), 1e-3), one = 1;
  s = net_exec_write(x, io->image, m->img, err, NET_ERRMAX);
  if (!s && io->label >= 0) s = net_exec_write(x, io->label, m->lab, err, NET_ERRMAX);
  if (!s && io->lr >= 0) s = net_exec_write(x, io->lr, &lr, err, NET_ERRMAX);
  if (!s && io->scale >= 0) s = net_exec_write(x, io->scale, &one, err, NET_ERRMAX);
  double ms = 0;
  if (!s) s = net_exec_time(x, 3, steps, &ms, err, NET_ERRMAX);
  if (s) return net_failed(s);
  if (!inference) m->infer_stale = 1;
  r->ms_per_step = ms / steps;
  r->images_per_s = r->ms_per_step > 0 ? (double)m->batch * 1000.0 / r->ms_per_step : 0;
  r->device_bytes = net_exec_device_bytes(m->xt) + net_exec_device_bytes(m->xi);
  size_t part[3];
  net_exec_memory(x, part);
  r->activation_bytes = part[0], r->param_bytes = part[1], r->scratch_bytes = part[2];
  r->cache_hit = net_exec_cache_hit(x);
  return NET_OK;
}
