/* rt_gpu_branch.c - side-stream joins from read/write byte ranges
 * (rt_gpu_branch.h gives the rules).
 *
 * Two nodes conflict when a range of one overlaps a range of the other and
 * at least one of the two is a write: read after write, write after read
 * and write after write all order them, reads alone do not.  A side node's
 * join is found by scanning the main-stream nodes after it until the first
 * that conflicts; side nodes in between are skipped (their stream keeps
 * them in order).  Quadratic in the worst case, but a scan stops at its
 * first conflict, and a step has a few dozen side nodes. */
#include "rt_gpu_branch.h"

#include <stdlib.h>
#include <string.h>

void rt_gpu_branch_set_init(RtBranchSet *s) { memset(s, 0, sizeof *s); }

void rt_gpu_branch_set_free(RtBranchSet *s) {
  if (!s) return;
  free(s->range);
  free(s->first);
  free(s->side);
  memset(s, 0, sizeof *s);
}

int rt_gpu_branch_add(RtBranchSet *s, uint64_t lo, uint64_t bytes, int write) {
  if (!bytes) return 0;
  if (s->nrange == s->caprange) {
    int cap = s->caprange ? 2 * s->caprange : 64;
    RtBranchRange *r = realloc(s->range, (size_t)cap * sizeof *r);
    if (!r) return -1;
    s->range = r, s->caprange = cap;
  }
  s->range[s->nrange++] = (RtBranchRange){.lo = lo, .hi = lo + bytes, .write = write != 0};
  return 0;
}

int rt_gpu_branch_add_node(RtBranchSet *s, const IrGraph *g, int node, const uint64_t *addr, const uint64_t *bytes) {
  const IrNode *n = &g->node[node];
  for (int k = 0; k < n->nin + n->nout; k++) {
    int v = k < n->nin ? n->in[k] : n->out[k - n->nin];
    if (v >= 0 && v < g->nval && addr[v] && rt_gpu_branch_add(s, addr[v], bytes[v], k >= n->nin)) return -1;
  }
  return 0;
}

int rt_gpu_branch_end_node(RtBranchSet *s, int side) {
  if (s->nnode + 1 >= s->capnode) {
    int cap = s->capnode ? 2 * s->capnode : 64;
    int *f = realloc(s->first, (size_t)cap * sizeof *f);
    if (f) s->first = f;
    int *sd = f ? realloc(s->side, (size_t)cap * sizeof *sd) : NULL;
    if (!sd) return -1;
    s->side = sd, s->capnode = cap;
  }
  if (!s->nnode) s->first[0] = 0;
  s->side[s->nnode] = side != 0;
  s->first[++s->nnode] = s->nrange;
  return 0;
}

static int overlap(const RtBranchRange *a, const RtBranchRange *b) {
  return (a->write || b->write) && a->lo < b->hi && b->lo < a->hi;
}

static int conflict(const RtBranchSet *s, int a, int b) {
  for (int i = s->first[a]; i < s->first[a + 1]; i++)
    for (int j = s->first[b]; j < s->first[b + 1]; j++)
      if (overlap(&s->range[i], &s->range[j])) return 1;
  return 0;
}

void rt_gpu_branch_plan_free(RtBranchPlan *p) {
  if (!p) return;
  free(p->join);
  free(p->wait_at);
  memset(p, 0, sizeof *p);
}

int rt_gpu_branch_plan(const RtBranchSet *s, RtBranchPlan *out) {
  memset(out, 0, sizeof *out);
  int n = s->nnode;
  out->nnode = n;
  out->join = malloc((size_t)(n + 1) * sizeof *out->join);
  out->wait_at = malloc((size_t)(n + 1) * sizeof *out->wait_at);
  if (!out->join || !out->wait_at) {
    rt_gpu_branch_plan_free(out);
    return -1;
  }
  for (int i = 0; i <= n; i++) out->join[i] = out->wait_at[i] = -1;
  long total = 0;
  for (int i = 0; i < n; i++) {
    if (!s->side[i]) continue;
    int q = i + 1, window = 0;
    for (; q < n; q++) {
      if (s->side[q]) continue;
      if (conflict(s, i, q)) break;
      window++;
    }
    out->join[i] = q;
    out->wait_at[q] = i; /* i grows: the latest side node joining at q */
    if (!out->nside || window < out->window_min) out->window_min = window;
    if (window > out->window_max) out->window_max = window;
    out->narrow += window <= 1;
    out->nside++;
    total += window;
  }
  out->window_mean = out->nside ? (double)total / out->nside : 0;
  return 0;
}

int rt_gpu_branch_wait(const RtBranchPlan *p, int lo, int i, int joined) {
  if (!p->nside || i < 0 || i > p->nnode) return -1;
  int w = p->wait_at[i];
  return w >= lo && w > joined ? w : -1;
}
