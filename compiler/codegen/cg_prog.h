/* cg_prog.h - the NVRTC programs of a graph: every node's kernels,
 * deduplicated, dealt into a few programs and compiled to cubins.
 *
 * cg_prog_build() emits every node's kernels (cg_kernels.h) for a
 * device, keeps one copy of each distinct kernel, deals the distinct
 * kernels into at most CG_MAX_PART NVRTC programs ("parts") and
 * compiles the parts concurrently, one thread each, for the device's sm_XX
 * (or takes each part's cubin from the on-disk cache when one was made
 * from the same text, options and NVRTC version).  No GPU is needed.
 *
 * Distinct kernels: many launches instantiate a template with the very
 * same defines and differ only in their names (k17_..., k23_..., which
 * carry the node index).  A launch's source is compared with the kernel
 * name and its namespace taken out; launches whose sources then agree (and
 * ask for the same shared memory) all call the kernel of the first of
 * them: its symbol is that first launch's name.  CgKLaunch.name stays each
 * launch's own name, which profiles show; rt_gpu_prog_function() gives the
 * CUfunction a launch calls.
 *
 * The parts depend on the emitted text only: their number is a function of
 * the count of distinct kernels, and the kernels are dealt largest first
 * to the lightest part.  The thread count (CgProg.threads, else
 * $NETC_NVRTC_THREADS, else the usable cores, at most CG_PROG_THREADS)
 * only decides how many compile at once: the cubins and the kernel-to-part
 * map are the same whatever the machine.
 *
 * The halves are separate for the model writer (netc -o, cg_model.c),
 * which embeds each part's text and cubin in model.so: cg_prog_emit()
 * makes the texts, cg_prog_compile() the cubins (through the one
 * compile-and-cache path, cg_cache.h); cg_prog_build_prebuilt() takes an
 * embedded cubin instead of compiling a part whose text is exactly the
 * embedded one.  The GPU executor loads the cubins as modules
 * (runtime/gpu/rt_gpu_prog.h); nothing here needs a GPU or the driver. */
#ifndef NETC_CG_PROG_H
#define NETC_CG_PROG_H

#include <stddef.h>
#include <stdint.h>

#include "cg_kernels.h"
#include "cg_text.h"
#include "ir.h"

/* Kernel programs of one graph at most. */
enum { CG_MAX_PART = 16 };

/* A graph's kernel programs made ahead of time (what a model.so embeds):
 * the CUDA C of each and, when compiled, its cubin for one arch. */
typedef struct CgProgram {
  int npart;                       /* 0 when the graph has no generated kernel */
  const char *source[CG_MAX_PART]; /* CUDA C of program k */
  const void *cubin[CG_MAX_PART];  /* program k compiled for the model's arch, or NULL */
  size_t cubin_size[CG_MAX_PART];
  const char *opts; /* the code switches they were generated under (opts_code_key), or NULL */
} CgProgram;

enum { CG_PROG_THREADS = 16 }; /* compile threads at most */

typedef struct CgProgPart {
  char *source; /* malloc'd program text of the part's distinct kernels */
  size_t source_len;
  void *cubin; /* malloc'd; NULL until compiled */
  size_t size;
  int cache_hit; /* the cubin came from the cache */
  int prebuilt;  /* the cubin came from a model.so */
  int nkernel;   /* distinct kernels in it */
} CgProgPart;

/* What launch j of node i calls. */
typedef struct CgProgSym {
  int part;             /* the part (module) that defines it */
  char name[CG_K_NAME]; /* its symbol: the name of the first launch with the same source */
} CgProgSym;

typedef struct CgProg {
  CgKNode *kn; /* one per node of the graph */
  int nnode;
  char *source; /* malloc'd: every node's kernels joined, names as emitted (--emit-cuda's text);
                    NULL when no node has a kernel */
  size_t source_len;
  int nlaunch;   /* launches of all nodes */
  int ndistinct; /* distinct kernels among them */
  int *first;    /* per node: index of its first launch in sym; first[nnode] = nlaunch */
  CgProgSym *sym;
  int npart; /* 0 when no node has a kernel */
  CgProgPart part[CG_MAX_PART];
  int threads;   /* compile threads; 0: the device options' nvrtc_threads, else the cores */
  int cache_hit; /* every part came from the cache */
  int prebuilt;  /* every part came from a model.so (cg_prog_build_prebuilt) */
} CgProg;

CgStatus cg_prog_build(const IrGraph *g, int64_t batch, const CgDevice *dev, const char *cache_dir, CgProg *out,
                       char *err, size_t errlen);
/* Only the emission: kn, source, sym and the parts' texts, no cubin. */
CgStatus cg_prog_emit(const IrGraph *g, int64_t batch, const CgDevice *dev, CgProg *out, char *err, size_t errlen);
/* The cubin of every part that has none yet, for dev (from the cache or
 * NVRTC, parts compiled concurrently).  CG_ENOLIB when NVRTC cannot be
 * loaded.  On failure the message is the lowest failing part's. */
CgStatus cg_prog_compile(const IrGraph *g, int64_t batch, const CgDevice *dev, const char *cache_dir, CgProg *p,
                         char *err, size_t errlen);
/* cg_prog_build, but part k takes pre->cubin[k] (part.prebuilt = 1) when
 * pre->source[k] equals its emitted text, pre_arch is the device's sm_XX
 * and pre->opts (when set) is the device's code key; the other parts are
 * compiled as cg_prog_build does.  pre may be NULL. */
CgStatus cg_prog_build_prebuilt(const IrGraph *g, int64_t batch, const CgDevice *dev, const char *cache_dir,
                                const CgProgram *pre, const char *pre_arch, CgProg *out, char *err, size_t errlen);
/* The symbol launch j of node i calls, and the part that defines it; NULL
 * when there is no such launch. */
const CgProgSym *cg_prog_sym(const CgProg *p, int node, int launch);
void cg_prog_free(CgProg *p); /* takes NULL; leaves *p empty */

#endif
