/* cg_model.h - the model writer: `netc FILE.net -o model.so`.
 *
 * cg_model_write() compiles a network twice with the caller's options (the
 * training step, and the same with --inference), generates each graph's
 * kernel programs exactly as the GPU executor would for the target
 * (cg_prog.h: the distinct kernels dealt into up to
 * CG_MAX_PART programs), compiles them with NVRTC, concurrently, to a
 * cubin each for that target, and links everything into a shared library
 * with the system C compiler.  runtime/io/rt_model.c reads it back
 * (rt_model.h).
 *
 * The library exports two symbols: `netc_model`, one byte blob, and
 * `netc_model_size`, its length.  The blob is the format below, every
 * integer little-endian:
 *
 *   0   "NETCMODL"                       8 bytes of magic
 *   8   u32 format version (CG_MODEL_VERSION)
 *   12  u32 header bytes (CG_MODEL_HEADER)
 *   16  i64 batch both plans were made for
 *   24  char arch[16]: "sm_90", or "" when no cubin is embedded
 *   40  CG_MODEL_NSECTION x {u64 offset, u64 size} in CgModelSection order
 *
 * A section of size 0 is absent.  A graph with n programs has CUDA
 * sections 0..n-1 and no others; its cubin k, when present, is program k's.
 * The text sections (IR, CUDA source, options, build) are followed by a NUL
 * byte not counted in their size; every section starts at a multiple of 64
 * bytes.  Version 1 had one program (and one cubin) per graph; version 2 had
 * no CG_MODEL_OPTS section; version 3 no CG_MODEL_BUILD section and no seal.
 *
 * The seal (version 4): after linking, netc appends CG_MODEL_SEAL bytes to
 * the library (the dynamic loader ignores bytes past the last segment):
 *
 *   0   "NETCSEAL"
 *   8   u64 file offset of the blob (the bytes of the netc_model symbol)
 *   16  u64 blob size
 *   24  u64 0 (reserved)
 *   32  SHA-256 of every byte of the file before these 32
 *
 * The runtime never dlopens a model: it reads the file, checks the seal's
 * digest over the whole file, then reads the blob at the sealed offset as
 * data (runtime/io/rt_model.c).  Nothing in the library ever runs. */
#ifndef NETC_CG_MODEL_H
#define NETC_CG_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cg_prog.h"
#include "pipeline.h"

#define CG_MODEL_MAGIC       "NETCMODL"
#define CG_MODEL_SYMBOL      "netc_model"
#define CG_MODEL_SIZE_SYMBOL "netc_model_size"

enum { CG_MODEL_VERSION = 4, CG_MODEL_ARCH_LEN = 16 };

#define CG_MODEL_SEAL_MAGIC "NETCSEAL"
enum { CG_MODEL_SEAL = 64, CG_MODEL_DIGEST = 32 };

typedef enum CgModelSection {
  CG_MODEL_TRAIN_IR, /* ir_print of the training graph, locations included */
  CG_MODEL_INFER_IR, /* the same for the --inference graph */
  CG_MODEL_TRAIN_CU, /* + k: the training graph's kernel program k (CUDA C) */
  CG_MODEL_INFER_CU = CG_MODEL_TRAIN_CU + CG_MAX_PART,
  CG_MODEL_TRAIN_CUBIN = CG_MODEL_INFER_CU + CG_MAX_PART, /* + k: program k compiled for arch */
  CG_MODEL_INFER_CUBIN = CG_MODEL_TRAIN_CUBIN + CG_MAX_PART,
  CG_MODEL_OPTS = CG_MODEL_INFER_CUBIN + CG_MAX_PART, /* the code switches it was generated under (opts_code_key) */
  CG_MODEL_BUILD, /* "netc VERSION\n" and the compile options, one "key value" line each */
  CG_MODEL_NSECTION
} CgModelSection;

enum { CG_MODEL_HEADER = 40 + 16 * CG_MODEL_NSECTION };

/* What the kernels are generated for: the attributes the GPU executor
 * reads from its device (cg_kernels.h's CgDevice). */
typedef struct CgModelTarget {
  char arch[CG_MODEL_ARCH_LEN]; /* "sm_90" */
  int cc_major, cc_minor, sm_count, max_threads_per_block, max_shared_per_block, max_threads_per_sm;
} CgModelTarget;

/* The target of "sm_NN" (see docs/model_so.md for the table and the SM
 * count assumed per arch).  0, or -1 when netc does not know the arch. */
int cg_model_target(const char *arch, CgModelTarget *t);
/* The arches cg_model_target knows, comma-separated, for messages. */
const char *cg_model_arches(void);

typedef struct CgModelOpts {
  const char *out;       /* the model.so to write, or NULL */
  const char *emit_cuda; /* directory for train.cu and infer.cu, or NULL */
  const char *arch;      /* "sm_90" when NULL */
  const NetcOpts *opts;  /* the code switches (opts.h) to generate under; NULL: the defaults */
} CgModelOpts;

/* Whether model section i holds text (IR, CUDA C, the options) rather than a cubin. */
int cg_model_section_is_text(int i);

/* The SHA-256 of n bytes (nettle), as the seal records it. */
void cg_model_digest(const void *data, size_t n, unsigned char out[CG_MODEL_DIGEST]);

/* Appends the seal to the library at path, whose blob is the n bytes at
 * blob (found in the file: its first occurrence).  0, or -1 with a message. */
int cg_model_seal(const char *path, const unsigned char *blob, size_t n, char *err, size_t errlen);

/* Compiles `path` for training and for inference with cx's options (its
 * inference, print_after and dump_dir are overridden) and writes what o
 * asks for.  Errors and warnings go to cx->d.  Returns 0, or -1 with
 * nothing left at o->out (the library appears there whole or not at all). */
int cg_model_write(const char *path, const PassCtx *cx, const CgModelOpts *o);

#endif
