/* net_calibrate.c - INT8 calibration (net.h's net_calibrate).
 *
 * The float model's inference graph runs on the calibration images a batch
 * at a time, on the CPU executor, which keeps every value after a run; the
 * input of every layer that --int8=LAYERS would quantize (those whose
 * input the model compiled with --int8=LAYERS casts to i8) is read back and
 * its magnitudes added to a histogram (net_calib_hist.h, which also says
 * how each method -- max, percentile, mse, entropy -- picks the clipping
 * threshold T from it); the scale is T / 127.  Entropy is the default: on
 * the two networks docs/correctness.md measures (ResNet-20 on CIFAR-10 and
 * ResNet-50's body on Fashion-MNIST, f16 against INT8 on the GPU) it kept
 * the top-1 agreement highest of the four.
 *
 * The scales go to the file int8_scales.h describes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "int8_scales.h"
#include "net_calib_hist.h"
#include "net_impl.h"
#include "net_model.h"

static const char *const METHODS[] = {"percentile", "max", "mse", "entropy"};

NetStatus net_calibrate(NetModel *m, const float *images, int64_t n, const NetCalibrateOpts *o, const char *path) {
  if (!m || !images || !o || !path)
    return net_fail(NET_ERR_ARG, "net_calibrate: %s is NULL",
                    !m        ? "the model"
                    : !images ? "images"
                    : !o      ? "opts"
                              : "path");
  const char *method = o->method ? o->method : "entropy";
  int which = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(method, METHODS[i]) == 0) which = i;
  if (which < 0) return net_fail(NET_ERR_ARG, "calibration method '%s': percentile, max, mse or entropy", method);
  double pct = o->percentile > 0 ? o->percentile : 99.99;
  if (!(pct > 0 && pct <= 100)) return net_fail(NET_ERR_ARG, "percentile %g: give one in (0, 100]", pct);
  if (m->gpu)
    return net_fail(NET_ERR_ARG, "net_calibrate: the model runs on the GPU; calibration reads every layer's input "
                                 "back and needs the CPU executor (load it with device \"cpu\")");
  int64_t B = m->batch, per = m->sample;
  if (n < B)
    return net_fail(NET_ERR_ARG, "net_calibrate: %lld images, fewer than one batch of %lld", (long long)n,
                    (long long)B);
  NetStatus s = net_infer_ready(m);
  if (s) return s;
  const IrGraph *g = m->gi;
  const char *layers = o->layers && *o->layers ? o->layers : "all";
  /* which layers: those whose input the same model compiled with --int8=layers casts to i8 (the precision
   * pass decides, as it will for the quantized model) */
  Arena a;
  arena_init(&a);
  NetGraphs q;
  NetLoadOpts qo = {.precision = m->precision, .batch = B, .inference_only = 1, .int8 = layers};
  char why[NET_ERRMAX];
  s = net_model_open(m->path, &a, &qo, &q, why, sizeof why);
  if (s) {
    arena_free(&a);
    return net_fail(s, "net_calibrate: %s", why);
  }
  NetHist *h = NULL;
  int nh = 0;
  for (int k = 0; k < q.infer->nnode && !s; k++) {
    const IrNode *node = &q.infer->node[k];
    if (!node->name || node->nin < 1 || node->op == IR_OP_CAST) continue;
    int x = node->in[0], d = q.infer->val[x].def;
    if (d < 0 || q.infer->node[d].op != IR_OP_CAST || q.infer->val[x].type.dtype != IR_DT_I8) continue;
    int at = -1; /* the layer in the float graph */
    for (int j = 0; j < g->nnode && at < 0; j++)
      if (g->node[j].name && strcmp(g->node[j].name, node->name) == 0 && g->node[j].op != IR_OP_CAST) at = j;
    if (at < 0) continue;
    NetHist *more = realloc(h, sizeof *h * (size_t)(nh + 1));
    if (!more) {
      s = net_fail(NET_ERR_NOMEM, "out of memory");
      break;
    }
    h = more;
    memset(&h[nh], 0, sizeof *h);
    h[nh].node = at, h[nh].value = g->node[at].in[0];
    nh++;
  }
  net_model_close(&q);
  arena_free(&a);
  if (s || !nh) {
    free(h);
    return s ? s : net_fail(NET_ERR_ARG, "net_calibrate: --int8=%s quantizes no layer of this model", layers);
  }
  int64_t most = 0;
  for (int i = 0; i < nh; i++) {
    int64_t k = net_exec_numel(m->xi, h[i].value);
    if (k > most) most = k;
  }
  float *buf = malloc(sizeof(float) * (size_t)(most > 0 ? most : 1));
  float *logits = malloc(sizeof(float) * (size_t)(B * m->classes));
  int64_t batches = n / B;
  for (int64_t b = 0; b < batches && buf && logits && !s; b++) {
    s = net_infer(m, images + b * B * per, B, logits);
    for (int i = 0; i < nh && !s; i++) {
      s = net_failed(net_exec_read(m->xi, h[i].value, buf, net_err_buf(), NET_ERRMAX));
      if (!s) net_hist_add(&h[i], buf, net_exec_numel(m->xi, h[i].value));
    }
  }
  if (!buf || !logits) s = net_fail(NET_ERR_NOMEM, "out of memory");
  const char **layer = calloc((size_t)nh, sizeof *layer);
  double *scale = calloc((size_t)nh, sizeof *scale);
  if (!s && (!layer || !scale)) s = net_fail(NET_ERR_NOMEM, "out of memory");
  for (int i = 0; i < nh && !s; i++) {
    double t = which == 1   ? h[i].max
               : which == 2 ? net_hist_mse(&h[i])
               : which == 3 ? net_hist_entropy(&h[i])
                            : net_hist_percentile(&h[i], pct);
    layer[i] = g->node[h[i].node].name;
    scale[i] = t > 0 ? t / 127 : 1.0 / 127; /* an input that is all zeros: any scale */
  }
  if (!s) {
    char tmp[4200], comment[512];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    if (which == 0)
      snprintf(comment, sizeof comment, "method percentile %g over %lld images", pct, (long long)(batches * B));
    else
      snprintf(comment, sizeof comment, "method %s over %lld images", method, (long long)(batches * B));
    FILE *f = fopen(tmp, "w");
    int bad = !f || int8_scales_write(f, comment, layer, scale, nh) != 0;
    if (f && fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
      remove(tmp);
      s = net_fail(NET_ERR_IO, "%s: cannot write the scales", path);
    }
  }
  free(layer);
  free(scale);
  free(buf);
  free(logits);
  free(h);
  return s;
}
