/* test_nvjpeg_pool.c - rt_nvjpeg_pool's policy through a stand-in driver
 * table (no GPU, no CUDA library): the allocations are malloc'd and counted.
 *
 * A freed block is held until the next fence, then serves a later request
 * of up to its size but not one of
 * less than half of it; a new block is the request rounded up to an eighth
 * of its power of two; device and pinned blocks, and pinned blocks of other
 * flags, are never mixed; a block made under one context is not served to
 * another; a thread with no context current gets the last one seen; a
 * failed driver allocation is a non-zero return and NULL; trim returns the
 * free blocks of the current context to the driver and keeps the used
 * ones; the stats count requests, driver calls and bytes held. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rt_nvjpeg_pool.h"

static struct {
  int allocs, frees, fail_next;
  CUcontext ctx;
  int ctx_sets;
} drv;

static CUresult mem_alloc(CUdeviceptr *p, size_t n) {
  if (drv.fail_next) return drv.fail_next = 0, CUDA_ERROR_OUT_OF_MEMORY;
  *p = (CUdeviceptr)(uintptr_t)malloc(n);
  drv.allocs++;
  return CUDA_SUCCESS;
}
static CUresult mem_free(CUdeviceptr p) {
  free((void *)(uintptr_t)p);
  drv.frees++;
  return CUDA_SUCCESS;
}
static CUresult host_alloc(void **p, size_t n, unsigned int flags) {
  (void)flags;
  if (drv.fail_next) return drv.fail_next = 0, CUDA_ERROR_OUT_OF_MEMORY;
  *p = malloc(n);
  drv.allocs++;
  return CUDA_SUCCESS;
}
static CUresult host_free(void *p) {
  free(p);
  drv.frees++;
  return CUDA_SUCCESS;
}
static CUresult ctx_get(CUcontext *c) {
  *c = drv.ctx;
  return CUDA_SUCCESS;
}
static CUresult ctx_set(CUcontext c) {
  drv.ctx = c, drv.ctx_sets++;
  return CUDA_SUCCESS;
}

int main(void) {
  static RtCudaApi api;
  api.MemAlloc = mem_alloc, api.MemFree = mem_free, api.MemHostAlloc = host_alloc, api.MemFreeHost = host_free;
  api.CtxGetCurrent = ctx_get, api.CtxSetCurrent = ctx_set;
  CUcontext A = (CUcontext)(uintptr_t)0x1000, B = (CUcontext)(uintptr_t)0x2000;
  void *p = NULL, *q = NULL, *r = NULL, *d = NULL;
  CHECK(rt_nvjpeg_pool_dev_malloc(&p, 100) != 0 && !p, "no driver table yet: refused");
  rt_nvjpeg_pool_use(&api);
  drv.ctx = A;

  CHECK(rt_nvjpeg_pool_dev_malloc(&p, 1000) == 0 && p, "first request");
  RtNvjpegPoolStats st = rt_nvjpeg_pool_stats();
  CHECK(st.allocations == 1 && st.bytes == 1024, "1000 bytes rounded to 1024 (an eighth of 1024's power): %zu",
        st.bytes);
  CHECK(rt_nvjpeg_pool_dev_free(p) == 0, "freed into the pool");
  CHECK(drv.frees == 0, "nothing went back to the driver");
  void *held = NULL;
  CHECK(rt_nvjpeg_pool_dev_malloc(&held, 900) == 0 && held != p, "a freed block is held until the fence");
  rt_nvjpeg_pool_fence();
  CHECK(rt_nvjpeg_pool_dev_malloc(&q, 900) == 0 && q == p, "after it a smaller request takes the freed block");
  CHECK(rt_nvjpeg_pool_dev_free(q) == 0 && rt_nvjpeg_pool_dev_free(held) == 0, "freed again");
  rt_nvjpeg_pool_fence();
  CHECK(rt_nvjpeg_pool_dev_malloc(&q, 400) == 0 && q != p, "less than half of it: a block of its own");
  CHECK(rt_nvjpeg_pool_dev_malloc(&r, 2000) == 0 && r != p, "more than it holds: a new block");
  CHECK(rt_nvjpeg_pool_pinned_malloc(&d, 1000, 0) == 0 && d != p, "pinned requests never take device blocks");
  CHECK(rt_nvjpeg_pool_dev_free(d) != 0, "a pinned block is not freed as a device one");
  CHECK(rt_nvjpeg_pool_pinned_free(d) == 0, "pinned block freed");
  rt_nvjpeg_pool_fence();
  void *e = NULL, *e1 = NULL;
  CHECK(rt_nvjpeg_pool_pinned_malloc(&e1, 1000, 1) == 0 && e1 != d, "pinned blocks of other flags are not mixed");
  CHECK(rt_nvjpeg_pool_pinned_malloc(&e, 1000, 0) == 0 && e == d, "the same flags take it");
  st = rt_nvjpeg_pool_stats();
  CHECK(st.requests == 8 && st.allocations == 6, "%lld requests, %lld driver calls", (long long)st.requests,
        (long long)st.allocations);

  drv.ctx = B;
  void *f = NULL;
  CHECK(rt_nvjpeg_pool_dev_malloc(&f, 1000) == 0 && f != p, "another context's free block is not served");
  drv.ctx = NULL;
  void *g = NULL;
  CHECK(rt_nvjpeg_pool_dev_malloc(&g, 16) == 0 && drv.ctx == B, "a thread with no context gets the last one (B)");
  drv.ctx = A;
  drv.fail_next = CUDA_ERROR_OUT_OF_MEMORY;
  void *h = (void *)&h;
  CHECK(rt_nvjpeg_pool_dev_malloc(&h, 1 << 20) != 0 && !h, "a failed driver allocation is refused with NULL");
  CHECK(rt_nvjpeg_pool_dev_free((void *)(uintptr_t)0x1234) != 0, "a pointer the pool never gave is refused");
  CHECK(rt_nvjpeg_pool_dev_free(NULL) == 0, "freeing NULL is a no-op");

  /* A's blocks: p and held (free), q (used), r (used), d = e (used, pinned 0), e1 (used, pinned 1) */
  size_t before = rt_nvjpeg_pool_stats().bytes;
  rt_nvjpeg_pool_trim();
  CHECK(drv.frees == 2 && rt_nvjpeg_pool_stats().bytes == before - 2048, "trim freed A's two free blocks (%d)",
        drv.frees);
  CHECK(rt_nvjpeg_pool_dev_malloc(&p, 1000) == 0 && rt_nvjpeg_pool_stats().allocations == 9,
        "after the trim a request calls the driver again");
  rt_nvjpeg_pool_dev_free(p), rt_nvjpeg_pool_dev_free(q), rt_nvjpeg_pool_dev_free(r);
  rt_nvjpeg_pool_pinned_free(e), rt_nvjpeg_pool_pinned_free(e1);
  rt_nvjpeg_pool_trim(); /* held blocks too: trim runs when no decoder is left */
  CHECK(drv.frees == 7, "A's blocks all returned: %d frees", drv.frees);
  drv.ctx = B;
  rt_nvjpeg_pool_dev_free(f), rt_nvjpeg_pool_dev_free(g);
  rt_nvjpeg_pool_trim();
  CHECK(drv.frees == 9 && rt_nvjpeg_pool_stats().bytes == 0, "B's too: %d frees, %zu bytes held", drv.frees,
        rt_nvjpeg_pool_stats().bytes);
  return check_report();
}
