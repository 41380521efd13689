/* opts.h - every switch that changes what netc does, in one typed struct,
 * read in one place.
 *
 * Each field is one row of the table in opts.c: its name ("cuda_graph"),
 * its environment variable (NETC_CUDA_GRAPH), its type, its default and
 * what it means; docs/runtime_gpu.md lists the same rows (a test checks
 * that they agree).  opts_from_env() is the only place netc reads a NETC_*
 * variable; a C API user sets the same names per model instead
 * (NetLoadOpts.options, "cuda_graph=0,genstats=0"), with opts_parse().
 *
 * Rows marked code change the CUDA C the code generator writes: they make
 * up opts_code_key(), which is part of every cubin's cache key
 * (compiler/codegen/cg_cache.h) and is recorded in model.so, so a cubin
 * is never reused under other switches.  The rest change how the runtime
 * runs the same code (cuDNN's fusions, CUDA graphs, streams), or where it
 * finds the libraries it loads.
 *
 * A value that is not one of the row's values is an error naming the
 * variable and what it takes; nothing is silently ignored. */
#ifndef NETC_OPTS_H
#define NETC_OPTS_H

#include <stddef.h>

enum { OPTS_PATH_MAX = 256 }; /* bytes of a path field, its NUL included */

typedef struct NetcOpts {
  /* code generation (opts_code_key) */
  int s2d;          /* 0, 1, 2 = all: the f32 stride-2 stem convolution folded 2x2 into 4C channels (2: its
                       weight gradient too) */
  int pbb;          /* the stem's batch-norm backward with the max-pool's winners by 2x2 cells (pool_bn_bwd.cu) */
  int pool_tile;    /* max pool + batch norm + relu by shared-memory tiles */
  int linear_cudnn; /* linear layers on cuDNN as 1x1 convolutions (else linear.cu) */
  int sync_bn;      /* batch norm's statistics ready to be summed over data-parallel ranks (--sync-bn) */
  int stem_mma;     /* an f16 inference stem on stem_conv.cu's tensor-core kernel, not s2d.cu + cuDNN (off) */
  /* the GPU executor */
  int cuda_graph;            /* the step captured once as a CUDA graph and replayed */
  int genstats;              /* batch-norm statistics from the convolution (cuDNN GenStats) */
  int prologue;              /* a convolution applies the batch norm + relu before it itself */
  int epilogue;              /* a convolution applies its epilogue (inference batch norm, relu backward) */
  int fusion_pick;           /* each fused prologue / epilogue timed against the separate kernel */
  int dbn;                   /* data gradient + batch-norm backward in one cuDNN plan (DgradDreluBNBwdWeight) */
  int multi_tensor;          /* one launch per run of sgd_updates / weight casts */
  int branches;              /* 0, 1, 2 = verbose: weight gradients on a side stream */
  int cudnn_deterministic;   /* only engines cuDNN marks deterministic */
  int cudnn_workspace_mb;    /* cap on each convolution's cuDNN workspace; -1: the executor's default */
  int cudnn_tune_candidates; /* with tuning: configurations timed per convolution; 0: all */
  int cudnn_verbose;         /* print plans, tuning candidates and fusion timings */
  int nvrtc_threads;         /* threads compiling a graph's programs; 0: the usable cores */
  /* libraries and files (read when first needed) */
  char cuda_driver[OPTS_PATH_MAX]; /* libcuda to load; "": libcuda.so.1 */
  char cudnn[OPTS_PATH_MAX];       /* libcudnn to load; "": libcudnn.so.9 */
  char nvrtc[OPTS_PATH_MAX];       /* libnvrtc to load; "": libnvrtc.so.13 */
  char cairo[OPTS_PATH_MAX];       /* libcairo for `netrun plot`; "": libcairo.so.2 */
  char kernel_dir[OPTS_PATH_MAX];  /* where a kernel that fails to compile is saved; "": $TMPDIR, else /tmp */
} NetcOpts;

typedef enum OptsType { OPTS_BOOL, OPTS_INT, OPTS_CHOICE, OPTS_PATH } OptsType;

/* One row of the table. */
typedef struct OptsInfo {
  const char *name; /* "cuda_graph" */
  const char *env;  /* "NETC_CUDA_GRAPH" */
  OptsType type;
  const char *choices; /* OPTS_CHOICE: the values by index, "0|1|all" */
  const char *def;     /* the default, as written */
  int code;            /* changes generated code */
  const char *meaning;
  size_t offset; /* of the field in NetcOpts */
} OptsInfo;

/* The table, in the order documented; *n rows. */
const OptsInfo *opts_table(int *n);
/* Every field at its default. */
void opts_default(NetcOpts *o);
/* Sets one switch by name or variable ("cuda_graph" or "NETC_CUDA_GRAPH").
 * 0, or -1 with a message naming the switch and the values it takes. */
int opts_set(NetcOpts *o, const char *name, const char *value, char *err, size_t errlen);
/* The defaults, then every variable of the table that is set.  0, or -1
 * with a message for the first bad value (every good one is still set, so
 * a library loader may take its path from *o whatever the return). */
int opts_from_env(NetcOpts *o, char *err, size_t errlen);
/* Applies "name=value,name=value" (spaces allowed around commas); NULL or
 * "" changes nothing.  0, or -1 with a message. */
int opts_parse(NetcOpts *o, const char *list, char *err, size_t errlen);
/* The code rows as "s2d=1 pbb=1 pool_tile=1 linear_cudnn=1" into buf (in
 * table order): what a cubin's cache key and model.so record. */
void opts_code_key(const NetcOpts *o, char *buf, size_t len);

#endif
