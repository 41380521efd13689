/* cg_cache.h - the one road from CUDA C to a cubin: NVRTC, with a cache on
 * disk keyed by everything that changes the cubin.
 *
 * Every generated program goes through cg_cache_compile(): the step's
 * programs (cg_prog.c), the multi-tensor program (cg_multi.h), and the
 * executor's accumulation and input kernels.  The key is FNV-1a 64 of the
 * program text, the target arch, the NVRTC version, the NVRTC options and
 * the code switches the program was generated under (opts.h's
 * opts_code_key; the step's programs pass theirs, the executor's own
 * kernels depend on none), so a cubin is never reused under other switches.  The
 * file is <dir>/netc-<kind>-<key>.cubin.
 *
 * The directory is the caller's, else $XDG_CACHE_HOME/netc, else
 * ~/.cache/netc (created when missing).  A missing or unwritable directory
 * only means no caching; a file that is not an ELF image is compiled over.
 * Files are written to a temporary name and renamed, so two processes (or
 * threads) warming one cache never read half a file.  Thread-safe. */
#ifndef NETC_CG_CACHE_H
#define NETC_CG_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "cg_text.h"

/* What a cubin is made from. */
typedef struct CgCompile {
  const char *source; /* the program text, NUL-terminated */
  const char *name;   /* program name in NVRTC's messages and the saved source */
  const char *arch;   /* "sm_90" */
  const char *kind;   /* "step", "multi", "accum", "input": the file name's second word */
  const char *opts;   /* the code switches it was generated under (opts_code_key), or NULL */
} CgCompile;

/* The cubin of c (malloc'd into *cubin, *size bytes): from the cache when
 * there, else compiled by NVRTC and stored.  *hit (may be NULL) says which.
 * CG_ENOLIB when NVRTC cannot be loaded (the message says why). */
CgStatus cg_cache_compile(const CgCompile *c, const char *cache_dir, void **cubin, size_t *size, int *hit, char *err,
                          size_t errlen);

/* The cache directory (want, else $XDG_CACHE_HOME/netc, else
 * ~/.cache/netc) into dir, created when missing; "" when there is none. */
void cg_cache_dir(const char *want, char *dir, size_t len);

/* FNV-1a 64 of n bytes at data, continuing from h (CG_FNV1A_INIT to start). */
#define CG_FNV1A_INIT 0xcbf29ce484222325ull
uint64_t cg_fnv1a(uint64_t h, const void *data, size_t n);

#endif
