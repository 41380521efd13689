/* net_quant.c - where an int8 model loses accuracy, layer by layer (net.h's
 * net_quant_errors).
 *
 * The CPU executor keeps every value after a run, as float (an i8 value is
 * its fake-quantized float, rt_cpu_layout.c), so after each batch the
 * inputs and outputs of q's casts to i8 and the outputs of the layers that
 * read them are read back, and so are ref's outputs of the layers of the
 * same names.  A layer whose input its producer requantized (pass requant)
 * has no cast: its input's own quantization error is not separable (NaN),
 * and the error it is handed includes it.  Squared differences and squared references are summed over
 * every image, and the errors are their square roots' ratios. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "net_impl.h"

typedef struct Sum {
  double d2, r2;
} Sum;

typedef struct Track {
  int node;                  /* the layer in q's inference graph */
  int act_in, act_out;       /* the cast of its input: from, to (-1: none) */
  int w_in, w_out;           /* the cast of its weight (-1: none) */
  int out, ref_out;          /* its output in q, and the output of ref's layer of that name (-1: none) */
  int ref_in;                /* the input of ref's layer of that name (-1: none) */
  Sum in, act, weight, diff; /* summed over the batches */
} Track;

/* The producer of value v when it is a cast to i8 or f8e4m3: its input, else -1. */
static int i8_cast_from(const IrGraph *g, int v) {
  int d = g->val[v].def;
  IrDtype dt = g->val[v].type.dtype;
  if (d < 0 || g->node[d].op != IR_OP_CAST || (dt != IR_DT_I8 && dt != IR_DT_F8E4M3)) return -1;
  return g->node[d].in[0];
}

/* Adds sum((a - b)^2) and sum(b^2) of the first k values of values a, b of executors xa, xb. */
static NetStatus add_diff(NetExec *xa, int a, NetExec *xb, int b, int64_t k, float *ba, float *bb, Sum *s) {
  NetStatus st = net_failed(net_exec_read(xa, a, ba, net_err_buf(), NET_ERRMAX));
  if (!st) st = net_failed(net_exec_read(xb, b, bb, net_err_buf(), NET_ERRMAX));
  for (int64_t i = 0; !st && i < k; i++) {
    double d = (double)ba[i] - (double)bb[i];
    s->d2 += d * d, s->r2 += (double)bb[i] * bb[i];
  }
  return st;
}

static double rel(const Sum *s) { return s->r2 > 0 ? sqrt(s->d2 / s->r2) : sqrt(s->d2); }

NetStatus net_quant_errors(NetModel *q, NetModel *ref, const float *images, int64_t n, NetQuantLayer **layers,
                           int *nlayers) {
  if (!q || !ref || !images || !layers || !nlayers)
    return net_fail(NET_ERR_ARG, "net_quant_errors: an argument is NULL");
  *layers = NULL, *nlayers = 0;
  if (q->gpu || ref->gpu)
    return net_fail(NET_ERR_ARG, "net_quant_errors: the models must run on the CPU (their values are read back)");
  if (q->batch != ref->batch || q->sample != ref->sample || q->classes != ref->classes)
    return net_fail(NET_ERR_ARG, "net_quant_errors: the two models differ in batch, image or classes");
  if (n < 1) return net_fail(NET_ERR_ARG, "net_quant_errors: %lld images (at least 1)", (long long)n);
  NetStatus s = net_infer_ready(q);
  if (!s) s = net_infer_ready(ref);
  if (s) return s;
  const IrGraph *g = q->gi, *r = ref->gi;
  Track *t = calloc((size_t)(g->nnode ? g->nnode : 1), sizeof *t);
  if (!t) return net_fail(NET_ERR_NOMEM, "out of memory");
  int nt = 0;
  int64_t most = 0;
  for (int k = 0; k < g->nnode; k++) {
    const IrNode *nd = &g->node[k];
    if (!nd->name || nd->op == IR_OP_CAST || nd->nin < 1 || nd->nout < 1) continue;
    int from = i8_cast_from(g, nd->in[0]);
    /* no cast: an input its producer requantized (pass requant; a step known at compile time), or none */
    if (from < 0 && !(ir_value_step(g, nd->in[0]) > 0)) continue;
    Track *x = &t[nt++];
    *x = (Track){.node = k,
                 .act_in = from,
                 .act_out = nd->in[0],
                 .w_in = -1,
                 .w_out = -1,
                 .out = nd->out[0],
                 .ref_out = -1,
                 .ref_in = -1};
    int wf = nd->nin > 1 ? i8_cast_from(g, nd->in[1]) : -1;
    if (wf >= 0) x->w_in = wf, x->w_out = nd->in[1];
    for (int j = 0; j < r->nnode && x->ref_out < 0; j++) {
      const IrNode *rn = &r->node[j];
      if (!rn->name || rn->op == IR_OP_CAST || strcmp(rn->name, nd->name) != 0 || rn->nout < 1 || rn->nin < 1) continue;
      if (net_exec_numel(ref->xi, rn->out[0]) == net_exec_numel(q->xi, x->out)) x->ref_out = rn->out[0];
      if (net_exec_numel(ref->xi, rn->in[0]) == net_exec_numel(q->xi, x->act_out)) x->ref_in = rn->in[0];
    }
    int v[3] = {x->act_out, x->w_in, x->out};
    for (int i = 0; i < 3; i++)
      if (v[i] >= 0 && net_exec_numel(q->xi, v[i]) > most) most = net_exec_numel(q->xi, v[i]);
  }
  if (!nt) {
    free(t);
    return net_fail(NET_ERR_ARG, "net_quant_errors: the model quantizes no layer's input");
  }
  float *ba = malloc(sizeof(float) * (size_t)most), *bb = malloc(sizeof(float) * (size_t)most);
  float *logits = malloc(sizeof(float) * (size_t)(q->batch * q->classes));
  if (!ba || !bb || !logits) s = net_fail(NET_ERR_NOMEM, "out of memory");
  int64_t B = q->batch;
  for (int64_t at = 0; at < n && !s; at += B) {
    int64_t k = n - at < B ? n - at : B; /* a last partial batch: its first k images only */
    const float *x = images + at * q->sample;
    s = net_infer(q, x, k, logits);
    if (!s) s = net_infer(ref, x, k, logits);
    for (int i = 0; i < nt && !s; i++) {
      Track *y = &t[i];
      int64_t ka = net_exec_numel(q->xi, y->act_out) / B * k, ko = net_exec_numel(q->xi, y->out) / B * k;
      if (y->act_in >= 0) s = add_diff(q->xi, y->act_out, q->xi, y->act_in, ka, ba, bb, &y->act);
      if (!s && y->w_in >= 0 && at == 0)
        s = add_diff(q->xi, y->w_out, q->xi, y->w_in, net_exec_numel(q->xi, y->w_in), ba, bb, &y->weight);
      if (!s && y->ref_out >= 0) s = add_diff(q->xi, y->out, ref->xi, y->ref_out, ko, ba, bb, &y->diff);
      /* handed: its input before its own quantization, or (requantized by its producer) after it */
      if (!s && y->ref_in >= 0)
        s = add_diff(q->xi, y->act_in >= 0 ? y->act_in : y->act_out, ref->xi, y->ref_in, ka, ba, bb, &y->in);
    }
  }
  free(ba), free(bb), free(logits);
  NetQuantLayer *out = s ? NULL : calloc((size_t)nt, sizeof *out);
  if (!s && !out) s = net_fail(NET_ERR_NOMEM, "out of memory");
  for (int i = 0; !s && i < nt; i++)
    out[i] = (NetQuantLayer){.layer = g->node[t[i].node].name,
                             .in = t[i].ref_in >= 0 ? rel(&t[i].in) : NAN,
                             .act = t[i].act_in >= 0 ? rel(&t[i].act) : NAN,
                             .weight = t[i].w_in >= 0 ? rel(&t[i].weight) : 0,
                             .out = t[i].ref_out >= 0 ? rel(&t[i].diff) : NAN};
  free(t);
  if (s) return s;
  *layers = out, *nlayers = nt;
  return NET_OK;
}
