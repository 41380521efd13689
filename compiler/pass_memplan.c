/* pass_memplan.c - liveness analysis and buffer reuse: one arena per step.
 *
 * Gives every input and activation a byte offset in one arena, sized for one
 * batch, so that the runtime allocates it once and calls no allocator
 * while a step runs.  Assumes a verified graph whose nodes run in list order
 * (any pass may have run before; fused, relayout and cast nodes are values
 * like any other).  Guarantees: every INPUT and ACT value has offset >= 0,
 * aligned to MEMPLAN_ALIGN, with offset + size <= g->plan_bytes; two values
 * whose lifetimes meet never share a byte; g->plan_batch is the batch the
 * sizes were computed for.  PARAM and STATE values live in separate
 * persistent storage and keep offset -1.
 *
 * Time is the node index.  An activation lives from its producer to its last
 * consumer (a graph output to past the last node), or longer when a consumer
 * holds its inputs (`hold=H`, pass_overlap: H nodes past it); an input lives for the
 * whole step, so it is never overwritten while the step runs, and so does the
 * result of a node marked `once` (pass_hoist), which later steps read without
 * running the node again.  A node's
 * results therefore never share memory with its inputs: no op works in place
 * on an activation (sgd_update and batchnorm_train write PARAM/STATE).
 * Offsets come from greedy-by-size: inputs first, then activations largest
 * first, each placed in the smallest gap left between the already placed
 * buffers whose lifetimes meet its own, or on top of them; graphs of more
 * than SWEEP_MIN buffers are placed by a sweep over time (below).
 *
 *   before:  %1 = relu(%0) : f32[N,64]        after:  plan bytes=768 batch=1
 *            %2 = relu(%1) : f32[N,64]                %1 = relu(%0) : f32[N,64] @256
 *            %3 = relu(%2) : f32[N,64]                %2 = relu(%1) : f32[N,64] @512
 *                                                      %3 = relu(%2) : f32[N,64] @256
 */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "summary.h"

enum { MEMPLAN_ALIGN = 256 };

typedef struct Buf {
  int value;
  int start, end; /* inclusive node indices; -1 and nnode for the whole step */
  int64_t size;   /* bytes, rounded up to MEMPLAN_ALIGN */
} Buf;

static int planned_kind(IrValueKind k) { return k == IR_VAL_ACT || k == IR_VAL_INPUT; }

/* Bytes of value v at batch (ir_value_bytes: a quantized value's scales
 * included), aligned; -1 when it does not fit in int64. */
static int64_t buf_size(const IrGraph *g, int v, int64_t batch) {
  int64_t n = ir_value_bytes(g, v, batch);
  if (n < 0 || n > INT64_MAX - MEMPLAN_ALIGN) return -1;
  return (n + MEMPLAN_ALIGN - 1) / MEMPLAN_ALIGN * MEMPLAN_ALIGN;
}

/* The lifetime of every planned value of g, in value order, into a malloc'd
 * array (*n entries).  Returns NULL when out of memory, or with *n = -1 - v
 * when value v is too large for int64. */
static Buf *live_ranges(const IrGraph *g, int64_t batch, int *n) {
  int *idx = malloc(sizeof(int) * ((size_t)g->nval + 1));
  Buf *b = malloc(sizeof(Buf) * ((size_t)g->nval + 1));
  if (!idx || !b) {
    free(idx), free(b);
    return NULL;
  }
  *n = 0;
  for (int v = 0; v < g->nval; v++) {
    idx[v] = -1;
    const IrValue *val = &g->val[v];
    if (!planned_kind(val->kind)) continue;
    int64_t size = buf_size(g, v, batch);
    if (size < 0) {
      free(idx), free(b);
      *n = -1 - v;
      return NULL;
    }
    /* an input, and a result computed once for many steps (`once`, pass_hoist), lives for the whole step */
    int whole = val->kind == IR_VAL_INPUT || (val->def >= 0 && ir_node_once(&g->node[val->def]));
    b[*n] = (Buf){v, whole ? -1 : val->def, whole ? g->nnode : val->def, size};
    idx[v] = (*n)++;
  }
  for (int i = 0; i < g->nnode; i++) {
    /* hold=H (pass_overlap): the inputs stay live for the H nodes after i */
    int64_t hold = ir_attr_int(&g->node[i], "hold", 0);
    int until = hold > 0 ? (int)(hold < g->nnode - i ? i + hold : g->nnode - 1) : i;
    for (int k = 0; k < g->node[i].nin; k++) {
      int j = idx[g->node[i].in[k]];
      if (j >= 0 && b[j].end < until) b[j].end = until;
    }
  }
  for (int i = 0; i < g->noutput; i++)
    if (idx[g->output[i]] >= 0) b[idx[g->output[i]]].end = g->nnode;
  free(idx);
  return b;
}

/* The largest sum of live sizes at any one time; -1 when it overflows int64
 * or memory runs out. */
static int64_t peak_live(const IrGraph *g, const Buf *b, int n) {
  size_t steps = (size_t)g->nnode + 3; /* times -1 .. nnode, and one past */
  int64_t *born = calloc(steps, sizeof *born), *dies = calloc(steps, sizeof *dies), cur = 0, peak = 0;
  int bad = !born || !dies;
  for (int i = 0; i < n && !bad; i++)
    bad = __builtin_add_overflow(born[b[i].start + 1], b[i].size, &born[b[i].start + 1]) ||
          __builtin_add_overflow(dies[b[i].end + 2], b[i].size, &dies[b[i].end + 2]);
  for (size_t t = 0; t < steps && !bad; t++) {
    bad = __builtin_add_overflow(cur, born[t], &cur);
    cur -= dies[t];
    if (cur > peak) peak = cur;
  }
  free(born), free(dies);
  return bad ? -1 : peak;
}

/* Inputs first (in value order, so they sit at the bottom of the arena),
 * then larger first, then earlier first. */
static int by_placement_order(const void *pa, const void *pb) {
  const Buf *a = pa, *b = pb;
  int ia = a->start < 0, ib = b->start < 0;
  if (ia != ib) return ib - ia;
  if (!ia && a->size != b->size) return a->size > b->size ? -1 : 1;
  if (a->start != b->start) return a->start - b->start;
  return a->value - b->value;
}

/* Offset for b[k] given b[0..k-1] placed (their offsets in off[], their
 * indices in order[] by offset): the smallest gap between buffers alive at
 * the same time that holds it, else the top of those buffers.  (Buffers of
 * one offset may come in any order: the gap before the first is the same,
 * and the others' gaps are not positive.) */
static int64_t best_fit(const Buf *b, const int64_t *off, const int *order, int k) {
  int64_t at = 0, best = -1, best_gap = INT64_MAX;
  for (int i = 0; i < k; i++) {
    int j = order[i];
    if (b[j].start > b[k].end || b[k].start > b[j].end) continue;
    int64_t gap = off[j] - at;
    if (gap >= b[k].size && gap < best_gap) best = at, best_gap = gap;
    if (off[j] + b[j].size > at) at = off[j] + b[j].size;
  }
  return best >= 0 ? best : at;
}

/* Inserts k into order[0..k-1], kept sorted by off[]. */
static void insert_by_offset(int *order, const int64_t *off, int k) {
  int lo = 0, hi = k;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (off[order[mid]] <= off[k])
      lo = mid + 1;
    else
      hi = mid;
  }
  memmove(order + lo + 1, order + lo, sizeof *order * (size_t)(k - lo));
  order[lo] = k;
}

/* --- the sweep for very large graphs ------------------------------------------ */

/* Above this many planned buffers (generated networks of tens of thousands
 * of layers; ResNet-152's training graph has under a thousand) best_fit's
 * scan of every placed buffer makes the pass quadratic, and the buffers are
 * placed by a sweep over time instead: an allocator run in step order,
 * each buffer taken at its start from the smallest free block that holds
 * it (or the top), and given back once the node after its end runs.  Near
 * linear (a heap of live buffers, the free blocks in offset order), and
 * just as safe -- buffers whose lifetimes meet never share a byte -- though
 * its arena may be larger than greedy-by-size's. */
enum { SWEEP_MIN = 16384 };

typedef struct Block {
  int64_t at, size;
} Block;

typedef struct Sweep {
  Block *free; /* by offset, never touching */
  int nfree;
  int64_t top;
  int *heap; /* live buffers by end (a min-heap of indices into b) */
  int nheap;
} Sweep;

static void heap_push(Sweep *s, const Buf *b, int k) {
  int i = s->nheap++;
  while (i > 0 && b[s->heap[(i - 1) / 2]].end > b[k].end) s->heap[i] = s->heap[(i - 1) / 2], i = (i - 1) / 2;
  s->heap[i] = k;
}

static int heap_pop(Sweep *s, const Buf *b) {
  int top = s->heap[0], last = s->heap[--s->nheap], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= s->nheap) break;
    if (c + 1 < s->nheap && b[s->heap[c + 1]].end < b[s->heap[c]].end) c++;
    if (b[last].end <= b[s->heap[c]].end) break;
    s->heap[i] = s->heap[c], i = c;
  }
  if (s->nheap) s->heap[i] = last;
  return top;
}

/* Gives [at, at + size) back: merged with its neighbours, or lowering the top. */
static void sweep_free(Sweep *s, int64_t at, int64_t size) {
  int lo = 0, hi = s->nfree;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (s->free[mid].at < at)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo > 0 && s->free[lo - 1].at + s->free[lo - 1].size == at) { /* joins the block before */
    lo--, at = s->free[lo].at, size += s->free[lo].size;
    memmove(s->free + lo, s->free + lo + 1, sizeof *s->free * (size_t)(--s->nfree - lo));
  }
  if (lo < s->nfree && at + size == s->free[lo].at) { /* and the one after */
    size += s->free[lo].size;
    memmove(s->free + lo, s->free + lo + 1, sizeof *s->free * (size_t)(--s->nfree - lo));
  }
  if (at + size == s->top) {
    s->top = at;
    return;
  }
  memmove(s->free + lo + 1, s->free + lo, sizeof *s->free * (size_t)(s->nfree - lo));
  s->free[lo] = (Block){at, size};
  s->nfree++;
}

/* The offset for size bytes: the smallest free block that holds it, else
 * the top; -1 when the top would pass INT64_MAX. */
static int64_t sweep_take(Sweep *s, int64_t size) {
  int best = -1;
  for (int i = 0; i < s->nfree; i++)
    if (s->free[i].size >= size && (best < 0 || s->free[i].size < s->free[best].size)) best = i;
  if (best < 0) {
    if (s->top > INT64_MAX - size) return -1;
    s->top += size;
    return s->top - size;
  }
  int64_t at = s->free[best].at;
  s->free[best].at += size, s->free[best].size -= size;
  if (!s->free[best].size) memmove(s->free + best, s->free + best + 1, sizeof *s->free * (size_t)(--s->nfree - best));
  return at;
}

/* Start first, then larger first, then value order (inputs, start -1, first). */
static int by_start(const void *pa, const void *pb) {
  const Buf *a = pa, *b = pb;
  if (a->start != b->start) return a->start - b->start;
  if (a->size != b->size) return a->size > b->size ? -1 : 1;
  return a->value - b->value;
}

/* off[k] for every b[k] (b sorted by by_start); the number placed (< n: b[that]
 * does not fit in int64), or -1 when out of memory. */
static int sweep_place(Buf *b, int n, int64_t *off, int64_t *top) {
  Sweep s = {malloc(sizeof(Block) * ((size_t)n + 1)), 0, 0, malloc(sizeof(int) * ((size_t)n + 1)), 0};
  if (!s.free || !s.heap) {
    free(s.free), free(s.heap);
    return -1;
  }
  int64_t high = 0;
  int k;
  for (k = 0; k < n; k++) {
    while (s.nheap && b[s.heap[0]].end < b[k].start) {
      int j = heap_pop(&s, b);
      sweep_free(&s, off[j], b[j].size);
    }
    if ((off[k] = sweep_take(&s, b[k].size)) < 0) break;
    if (s.top > high) high = s.top;
    heap_push(&s, b, k);
  }
  free(s.free), free(s.heap);
  *top = high;
  return k;
}

static void report_too_large(const IrGraph *g, PassCtx *cx, int v, int64_t batch) {
  char t[128];
  diag_error(cx->d, (SrcLoc){0}, "memplan: a value of type %s does not fit in the arena at batch %lld",
             ir_type_str(&g->val[v].type, t, sizeof t), (long long)batch);
}

static int64_t plan_batch(const IrGraph *g, const PassCtx *cx) {
  if (cx->batch > 0) return cx->batch;
  const IrAttr *a = ir_train_find(g, "batch");
  if (a && a->kind == IR_ATTR_INT && a->i[0] > 0) return a->i[0];
  return 1;
}

IrGraph *pass_memplan(IrGraph *g, PassCtx *cx) {
  int64_t batch = plan_batch(g, cx);
  int n;
  Buf *b = live_ranges(g, batch, &n);
  if (!b) {
    if (n < 0) report_too_large(g, cx, -1 - n, batch);
    return NULL;
  }
  int sweep = n > SWEEP_MIN;
  qsort(b, (size_t)n, sizeof *b, sweep ? by_start : by_placement_order);
  int64_t *off = malloc(sizeof *off * ((size_t)n + 1));
  int *order = malloc(sizeof *order * ((size_t)n + 1));
  if (!off || !order) {
    free(b), free(off), free(order);
    return NULL;
  }
  for (int v = 0; v < g->nval; v++) g->val[v].offset = -1;
  int64_t top = 0;
  int k;
  if (sweep) {
    if ((k = sweep_place(b, n, off, &top)) < 0) {
      free(b), free(off), free(order);
      return NULL;
    }
    for (int i = 0; i < k; i++) g->val[b[i].value].offset = off[i];
  } else {
    for (k = 0; k < n; k++) {
      off[k] = best_fit(b, off, order, k);
      if (off[k] > INT64_MAX - b[k].size) break;
      insert_by_offset(order, off, k);
      if (off[k] + b[k].size > top) top = off[k] + b[k].size;
      g->val[b[k].value].offset = off[k];
    }
  }
  if (k < n) report_too_large(g, cx, b[k].value, batch);
  g->plan_bytes = top;
  g->plan_batch = batch;
  free(b), free(off), free(order);
  return k == n ? g : NULL;
}

int64_t pass_memplan_lower_bound(const IrGraph *g) {
  int n;
  Buf *b = live_ranges(g, g->plan_batch > 0 ? g->plan_batch : 1, &n);
  if (!b) return -1;
  int64_t peak = peak_live(g, b, n);
  free(b);
  return peak;
}
