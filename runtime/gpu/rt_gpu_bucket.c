/* rt_gpu_bucket.c - all-reduce buckets in production order
 * (rt_gpu_bucket.h gives the rules).
 *
 * One pass over the nodes' outputs finds each gradient's producer (and a
 * second writer), one over the inputs of the nodes before the optimizer
 * section finds a read after the producer; then the gradients are sorted
 * by producer and cut into buckets.  Linear in the graph plus
 * ngrad log ngrad. */
#include "rt_gpu_bucket.h"

#include <stdlib.h>
#include <string.h>

#include "rt_err.h"

typedef struct Made {
  int producer, k; /* the producing node, and the gradient's index in the caller's list */
} Made;

static int by_producer(const void *a, const void *b) {
  const Made *x = a, *y = b;
  if (x->producer != y->producer) return x->producer < y->producer ? -1 : 1;
  return (x->k > y->k) - (x->k < y->k);
}

static const char *node_name(const IrGraph *g, int i) {
  const IrNode *n = &g->node[i];
  if (n->name) return n->name;
  const IrOpInfo *info = ir_op_info(n->op);
  return info ? info->name : "?";
}

void rt_gpu_bucket_plan_free(RtGpuBucketPlan *p) {
  if (!p) return;
  free(p->grad);
  free(p->producer);
  free(p->bucket);
  memset(p, 0, sizeof *p);
}

/* slot[v] = the index of value v in grad, or -1; each gradient's producer
 * into made[k].producer (-1: none).  0, or -1 with the message. */
static int find_producers(const IrGraph *g, const int *grad, int ngrad, int *slot, Made *made, char *err,
                          size_t errlen) {
  for (int v = 0; v < g->nval; v++) slot[v] = -1;
  for (int k = 0; k < ngrad; k++) {
    int v = grad[k];
    if (v < 0 || v >= g->nval)
      return rt_errf(err, errlen, "all-reduce buckets: gradient %d is value %%%d, which graph %s does not have", k, v,
                     g->name ? g->name : "?");
    if (slot[v] >= 0)
      return rt_errf(err, errlen, "all-reduce buckets: value %%%d is named twice (gradients %d and %d)", v, slot[v], k);
    slot[v] = k;
    made[k] = (Made){.producer = -1, .k = k};
  }
  for (int i = 0; i < g->nnode; i++) {
    const IrNode *n = &g->node[i];
    for (int o = 0; o < n->nout; o++) {
      int v = n->out[o];
      if (v < 0 || v >= g->nval || slot[v] < 0) continue;
      Made *m = &made[slot[v]];
      if (m->producer >= 0)
        return rt_errf(err, errlen, "all-reduce buckets: gradient %%%d is written by two nodes (%d %s and %d %s)", v,
                       m->producer, node_name(g, m->producer), i, node_name(g, i));
      m->producer = i;
    }
  }
  for (int k = 0; k < ngrad; k++) {
    int p = made[k].producer;
    if (p < 0 || p >= g->opt_first)
      return rt_errf(err, errlen,
                     "all-reduce buckets: gradient %%%d has no producer before the optimizer section (node %d)%s%s",
                     grad[k], g->opt_first, p < 0 ? "" : "; it is written by ", p < 0 ? "" : node_name(g, p));
  }
  /* a read between the producer and the optimizer would race the in-place all-reduce */
  for (int q = 0; q < g->opt_first; q++) {
    const IrNode *n = &g->node[q];
    for (int a = 0; a < n->nin; a++) {
      int v = n->in[a];
      if (v < 0 || v >= g->nval || slot[v] < 0 || q <= made[slot[v]].producer) continue;
      return rt_errf(err, errlen,
                     "all-reduce buckets: gradient %%%d (from node %d %s) is read by node %d %s before the "
                     "optimizer section: its all-reduce would race that read",
                     v, made[slot[v]].producer, node_name(g, made[slot[v]].producer), q, node_name(g, q));
    }
  }
  return 0;
}

int rt_gpu_bucket_plan(const IrGraph *g, const int *grad, int ngrad, const uint64_t *bytes, size_t bucket_bytes,
                       RtGpuBucketPlan *out, char *err, size_t errlen) {
  if (!out) return rt_errf(err, errlen, "rt_gpu_bucket_plan: out is NULL");
  memset(out, 0, sizeof *out);
  if (!g || ngrad < 0 || (ngrad && (!grad || !bytes)))
    return rt_errf(err, errlen, "rt_gpu_bucket_plan: bad arguments (%d gradients)", ngrad);
  if (g->opt_first < 0 || g->opt_first > g->nnode)
    return rt_errf(err, errlen, "all-reduce buckets: graph %s has no optimizer section", g->name ? g->name : "?");
  size_t size = bucket_bytes ? bucket_bytes : RT_GPU_BUCKET_DEFAULT_BYTES;
  int *slot = malloc(sizeof(int) * ((size_t)g->nval + 1));
  Made *made = malloc(sizeof(Made) * ((size_t)ngrad + 1));
  out->grad = malloc(sizeof(int) * ((size_t)ngrad + 1));
  out->producer = malloc(sizeof(int) * ((size_t)ngrad + 1));
  out->bucket = malloc(sizeof(RtGpuBucket) * ((size_t)ngrad + 1));
  int rc = -1;
  if (!slot || !made || !out->grad || !out->producer || !out->bucket)
    rt_errf(err, errlen, "all-reduce buckets: out of host memory");
  else if (!find_producers(g, grad, ngrad, slot, made, err, errlen))
    rc = 0;
  if (rc) {
    free(slot);
    free(made);
    rt_gpu_bucket_plan_free(out);
    return -1;
  }
  qsort(made, (size_t)ngrad, sizeof *made, by_producer);
  out->ngrad = ngrad, out->bucket_bytes = size;
  RtGpuBucket *b = NULL;
  for (int j = 0; j < ngrad; j++) {
    int v = grad[made[j].k];
    out->grad[j] = v, out->producer[j] = made[j].producer;
    if (!b) {
      b = &out->bucket[out->nbucket++];
      *b = (RtGpuBucket){.first = j, .n = 0, .bytes = 0, .done = -1};
    }
    b->n++;
    b->bytes += bytes[v];
    b->done = made[j].producer; /* producers ascend: the latest is the last */
    if (b->bytes >= size) b = NULL;
  }
  free(slot);
  free(made);
  return 0;
}
