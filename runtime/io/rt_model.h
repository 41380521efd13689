/* rt_model.h - model.so: what `netc FILE.net -o model.so` writes and the
 * runtime loads.
 *
 * A model.so is an ordinary shared library (made by netc with the system C
 * compiler from generated C arrays) whose exported symbols hold, for the
 * training graph and for the inference graph of one network: the final IR
 * text (the plan: every op, type and arena offset), the CUDA C source of its
 * distinct generated kernels as a few programs, and each program compiled by
 * NVRTC at compile time into a cubin for one architecture (--arch, default
 * sm_90), plus the batch size the plans were made for.  netc needs no GPU
 * to write it.
 *
 * rt_model_open() reads a model.so as data, never dlopening it, after
 * checking the SHA-256 netc sealed it with (or, for convenience, compiles a .net
 * file in-process) and reads both graphs back with ir_read into the
 * caller's arena.  The GPU executor takes an embedded cubin when it matches
 * the GPU and the batch, and JIT-compiles the program with NVRTC otherwise
 * (then cached on disk by a hash of source and options). */
#ifndef NETC_RT_MODEL_H
#define NETC_RT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "cg_prog.h"
#include "ir.h"

typedef struct RtModel {
  IrGraph *train;      /* the training step (autodiff, passes, memory plan) */
  IrGraph *infer;      /* the same network compiled with --inference */
  int64_t batch;       /* the batch both plans and programs were made for */
  char arch[16];       /* "sm_90", or "" when no cubin is embedded */
  char code_opts[256]; /* the code switches its kernels were generated under (opts_code_key) */
  char build[512];     /* netc's version and the compile options, "key value" lines (CG_MODEL_BUILD) */
  CgProgram train_prog, infer_prog;
  void *file; /* the model.so's bytes, which the programs point into (NULL for an in-process compile) */
} RtModel;

/* Opens a model.so (or compiles a .net file with netc's defaults when path
 * ends in ".net").  Graphs live in *a.  0, or -1 with a message naming the
 * file and what is wrong (not a netc model, version mismatch, IR that does
 * not read or verify, ...). */
int rt_model_open(const char *path, Arena *a, RtModel *out, char *err, size_t errlen);
void rt_model_close(RtModel *m); /* takes NULL; frees the file's bytes */

#endif
