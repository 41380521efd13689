/* rt_nvjpeg_pool.c - nvJPEG's memory kept in a pool (rt_nvjpeg_pool.h
 * gives the contract).
 *
 * A block is one driver allocation: device (cuMemAlloc) or pinned
 * (cuMemHostAlloc with nvJPEG's flags, which are the driver's), its size,
 * context, whether nvJPEG holds it, and whether it was freed since the
 * last fence (held back: not served, but trimmed, since trim runs when the
 * decoders are gone).  A request takes the smallest free
 * block of its kind, flags and context that holds it and is at most twice
 * its size (so a small request does not pin down a large block); else a
 * new block of the request rounded up to an eighth of its power of two.
 * nvJPEG's buffers are a few per handle, so a list searched in full is
 * enough. */
#include "rt_nvjpeg_pool.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct Block {
  void *p;
  size_t size;
  CUcontext ctx;
  unsigned int flags;
  uint8_t pinned, used, held; /* held: freed, not served again before the next fence */
} Block;

static struct {
  pthread_mutex_t mu;
  const RtCudaApi *api;
  CUcontext last; /* the context of the last request made with one current */
  Block *b;
  int n, cap;
  RtNvjpegPoolStats st;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

void rt_nvjpeg_pool_use(const RtCudaApi *api) {
  pthread_mutex_lock(&pool.mu);
  pool.api = api;
  pthread_mutex_unlock(&pool.mu);
}

/* The calling thread's context; a thread without one (a helper thread of
 * nvJPEG's, say) is given the last one seen, so that the driver can serve
 * it. */
static CUcontext current(void) {
  CUcontext c = NULL;
  if (pool.api->CtxGetCurrent) pool.api->CtxGetCurrent(&c);
  if (!c && pool.last && pool.api->CtxSetCurrent(pool.last) == CUDA_SUCCESS) c = pool.last;
  if (c) pool.last = c;
  return c;
}

/* size rounded up to a multiple of an eighth of its power of two */
static size_t rounded(size_t size) {
  size_t p = 1;
  while (p < size / 8) p <<= 1;
  return (size + p - 1) / p * p;
}

static int take(void **out, size_t size, int pinned, unsigned int flags) {
  *out = NULL;
  if (size == 0) size = 1;
  pthread_mutex_lock(&pool.mu);
  int rc = 1;
  if (!pool.api) goto done;
  pool.st.requests++;
  CUcontext ctx = current();
  int best = -1;
  for (int i = 0; i < pool.n; i++) {
    const Block *k = &pool.b[i];
    if (k->used || k->held || k->pinned != pinned || k->flags != flags || k->ctx != ctx || k->size < size ||
        k->size / 2 > size)
      continue;
    if (best < 0 || k->size < pool.b[best].size) best = i;
  }
  if (best < 0) {
    if (pool.n == pool.cap) {
      int cap = pool.cap ? 2 * pool.cap : 16;
      Block *b = realloc(pool.b, sizeof *b * (size_t)cap);
      if (!b) goto done;
      pool.b = b, pool.cap = cap;
    }
    Block k = {.size = rounded(size), .ctx = ctx, .flags = flags, .pinned = (uint8_t)pinned};
    CUresult r;
    if (pinned) {
      r = pool.api->MemHostAlloc(&k.p, k.size, flags);
    } else {
      CUdeviceptr d = 0;
      r = pool.api->MemAlloc(&d, k.size);
      k.p = (void *)(uintptr_t)d;
    }
    if (r != CUDA_SUCCESS) goto done;
    pool.st.allocations++, pool.st.bytes += k.size;
    best = pool.n;
    pool.b[pool.n++] = k;
  }
  pool.b[best].used = 1;
  *out = pool.b[best].p;
  rc = 0;
done:
  pthread_mutex_unlock(&pool.mu);
  return rc;
}

static int give(void *p, int pinned) {
  if (!p) return 0;
  pthread_mutex_lock(&pool.mu);
  int rc = 1;
  for (int i = 0; i < pool.n; i++)
    if (pool.b[i].p == p && pool.b[i].pinned == pinned && pool.b[i].used)
      pool.b[i].used = 0, pool.b[i].held = 1, rc = 0;
  pthread_mutex_unlock(&pool.mu);
  return rc;
}

int rt_nvjpeg_pool_dev_malloc(void **p, size_t size) { return take(p, size, 0, 0); }
int rt_nvjpeg_pool_dev_free(void *p) { return give(p, 0); }
int rt_nvjpeg_pool_pinned_malloc(void **p, size_t size, unsigned int flags) { return take(p, size, 1, flags); }
int rt_nvjpeg_pool_pinned_free(void *p) { return give(p, 1); }

void rt_nvjpeg_pool_fence(void) {
  pthread_mutex_lock(&pool.mu);
  for (int i = 0; i < pool.n; i++) pool.b[i].held = 0;
  pthread_mutex_unlock(&pool.mu);
}

void rt_nvjpeg_pool_trim(void) {
  pthread_mutex_lock(&pool.mu);
  if (pool.api) {
    CUcontext ctx = current();
    int k = 0;
    for (int i = 0; i < pool.n; i++) {
      Block *b = &pool.b[i];
      if (b->used || b->ctx != ctx) {
        pool.b[k++] = *b;
        continue;
      }
      if (b->pinned)
        pool.api->MemFreeHost(b->p);
      else
        pool.api->MemFree((CUdeviceptr)(uintptr_t)b->p);
      pool.st.bytes -= b->size;
    }
    pool.n = k;
  }
  pthread_mutex_unlock(&pool.mu);
}

RtNvjpegPoolStats rt_nvjpeg_pool_stats(void) {
  pthread_mutex_lock(&pool.mu);
  RtNvjpegPoolStats s = pool.st;
  pthread_mutex_unlock(&pool.mu);
  return s;
}
