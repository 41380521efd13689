/* opts.c - the table of netc's switches and the one reader of NETC_*
 * variables (opts.h). */
#include "opts.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F(field) offsetof(NetcOpts, field)

static const OptsInfo TABLE[] = {
    /* code generation: part of the cache key and of model.so */
    {"s2d", "NETC_S2D", OPTS_CHOICE, "0|1|all", "1", 1,
     "the f32 stride-2 stem convolution folded 2x2 into 4C channels (all: its weight gradient too)", F(s2d)},
    {"pbb", "NETC_PBB", OPTS_BOOL, NULL, "1", 1,
     "the stem's batch-norm backward reads the max pool's winners by 2x2 cells (pool_bn_bwd.cu), not pixel by "
     "pixel",
     F(pbb)},
    {"pool_tile", "NETC_POOL_TILE", OPTS_BOOL, NULL, "1", 1,
     "max pool + batch norm + relu by shared-memory tiles, not the grid-stride kernel", F(pool_tile)},
    {"linear_cudnn", "NETC_LINEAR_CUDNN", OPTS_BOOL, NULL, "1", 1,
     "linear layers on cuDNN as 1x1 convolutions, not linear.cu", F(linear_cudnn)},
    {"sync_bn", "NETC_SYNC_BN", OPTS_BOOL, NULL, "0", 1,
     "training batch norms write their statistics' sums in f64 for a data-parallel run to add over the ranks "
     "(synchronized batch norm, netrun --sync-bn; no cuDNN DgradDreluBNBwdWeight)",
     F(sync_bn)},
    {"stem_mma", "NETC_STEM_MMA", OPTS_BOOL, NULL, "0", 1,
     "an f16 inference stem (4 channels, stride 2) folded and summed on tensor cores by stem_conv.cu in "
     "one launch, not folded by s2d.cu for cuDNN (off until it has run on a GPU)",
     F(stem_mma)},
    /* the GPU executor */
    {"cuda_graph", "NETC_CUDA_GRAPH", OPTS_BOOL, NULL, "1", 0,
     "the step captured once as a CUDA graph and replayed (0: launched node by node every step)", F(cuda_graph)},
    {"genstats", "NETC_GENSTATS", OPTS_BOOL, NULL, "1", 0,
     "batch-norm statistics written by the convolution (cuDNN GenStats), not by their own kernels", F(genstats)},
    {"prologue", "NETC_PROLOGUE", OPTS_BOOL, NULL, "1", 0,
     "a convolution applies the batch norm + relu before it itself (cuDNN), not a kernel into scratch", F(prologue)},
    {"epilogue", "NETC_EPILOGUE", OPTS_BOOL, NULL, "1", 0,
     "a convolution applies its epilogue (inference batch norm, relu backward) itself, not its own kernel",
     F(epilogue)},
    {"fusion_pick", "NETC_FUSION_PICK", OPTS_BOOL, NULL, "1", 0,
     "each fused prologue / epilogue / GenStats cuDNN plans is timed against the separate kernel (0: every one "
     "kept)",
     F(fusion_pick)},
    {"dbn", "NETC_DBN", OPTS_BOOL, NULL, "1", 0,
     "a data gradient followed by a batch norm + relu backward in one cuDNN plan (DgradDreluBNBwdWeight)", F(dbn)},
    {"multi_tensor", "NETC_MULTI_TENSOR", OPTS_BOOL, NULL, "1", 0,
     "one launch per run of sgd_updates / weight casts, not one per node", F(multi_tensor)},
    {"branches", "NETC_BRANCHES", OPTS_CHOICE, "0|1|verbose", "1", 0,
     "weight gradients on a side stream that overlaps the data gradients (verbose: print the side nodes and "
     "their overlap when made)",
     F(branches)},
    {"cudnn_deterministic", "NETC_CUDNN_DETERMINISTIC", OPTS_BOOL, NULL, "0", 0,
     "only engines cuDNN marks deterministic (bit-identical runs; no GenStats or DgradDreluBNBwdWeight)",
     F(cudnn_deterministic)},
    {"cudnn_workspace_mb", "NETC_CUDNN_WORKSPACE_MB", OPTS_INT, NULL, "-1", 0,
     "cap on each convolution's cuDNN workspace in MiB (0: none; -1: the executor's default cap)",
     F(cudnn_workspace_mb)},
    {"cudnn_tune_candidates", "NETC_CUDNN_TUNE_CANDIDATES", OPTS_INT, NULL, "8", 0,
     "with --tune: how many acceptable engine configurations of each convolution are timed (0: every one)",
     F(cudnn_tune_candidates)},
    {"cudnn_verbose", "NETC_CUDNN_VERBOSE", OPTS_BOOL, NULL, "0", 0,
     "print each cuDNN plan's description and workspace when it is made, each engine timed by --tune, and each "
     "fused plan's timing against the plain one",
     F(cudnn_verbose)},
    {"nvrtc_threads", "NETC_NVRTC_THREADS", OPTS_INT, NULL, "0", 0,
     "threads compiling a graph's kernel programs (0: the usable cores, at most 16); the cubins are the same",
     F(nvrtc_threads)},
    /* libraries and files */
    {"cuda_driver", "NETC_CUDA_DRIVER", OPTS_PATH, NULL, "", 0, "the CUDA driver library (default libcuda.so.1)",
     F(cuda_driver)},
    {"cudnn", "NETC_CUDNN", OPTS_PATH, NULL, "", 0, "the cuDNN library (default libcudnn.so.9)", F(cudnn)},
    {"nvrtc", "NETC_NVRTC", OPTS_PATH, NULL, "", 0, "the NVRTC library (default libnvrtc.so.13)", F(nvrtc)},
    {"cairo", "NETC_CAIRO_LIB", OPTS_PATH, NULL, "", 0, "the cairo library of `netrun plot` (default libcairo.so.2)",
     F(cairo)},
    {"kernel_dir", "NETC_KERNEL_DIR", OPTS_PATH, NULL, "", 0,
     "where the source of a kernel that fails to compile is saved (default $TMPDIR, else /tmp)", F(kernel_dir)},
};
enum { NTABLE = sizeof TABLE / sizeof TABLE[0] };

const OptsInfo *opts_table(int *n) {
  *n = NTABLE;
  return TABLE;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

/* The index of v in choices ("0|1|all"), or -1. */
static int choice(const char *choices, const char *v) {
  size_t n = strlen(v);
  for (int i = 0; *choices; i++) {
    const char *bar = strchr(choices, '|');
    size_t len = bar ? (size_t)(bar - choices) : strlen(choices);
    if (len == n && memcmp(choices, v, n) == 0) return i;
    if (!bar) break;
    choices = bar + 1;
  }
  return -1;
}

static int set_row(NetcOpts *o, const OptsInfo *r, const char *v, char *err, size_t errlen) {
  char *p = (char *)o + r->offset, *end = NULL;
  switch (r->type) {
  case OPTS_BOOL:
    if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
      return fail(err, errlen, "%s=%s: expected 0 or 1 (%s)", r->env, v, r->meaning);
    *(int *)p = v[0] == '1';
    return 0;
  case OPTS_CHOICE: {
    int i = choice(r->choices, v);
    if (i < 0) return fail(err, errlen, "%s=%s: expected one of %s (%s)", r->env, v, r->choices, r->meaning);
    *(int *)p = i;
    return 0;
  }
  case OPTS_INT: {
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < -1 || n > 1 << 30)
      return fail(err, errlen, "%s=%s: expected a whole number of -1 or more (%s)", r->env, v, r->meaning);
    *(int *)p = (int)n;
    return 0;
  }
  case OPTS_PATH:
    if (strlen(v) >= OPTS_PATH_MAX) return fail(err, errlen, "%s: a path of %d bytes or more", r->env, OPTS_PATH_MAX);
    snprintf(p, OPTS_PATH_MAX, "%s", v);
    return 0;
  }
  return fail(err, errlen, "%s: unknown type", r->env);
}

void opts_default(NetcOpts *o) {
  memset(o, 0, sizeof *o);
  for (int i = 0; i < NTABLE; i++) set_row(o, &TABLE[i], TABLE[i].def, NULL, 0);
}

int opts_set(NetcOpts *o, const char *name, const char *value, char *err, size_t errlen) {
  for (int i = 0; name && i < NTABLE; i++)
    if (strcmp(name, TABLE[i].name) == 0 || strcmp(name, TABLE[i].env) == 0)
      return set_row(o, &TABLE[i], value ? value : "", err, errlen);
  return fail(err, errlen, "unknown option '%s' (docs/runtime_gpu.md lists them)", name ? name : "");
}

int opts_from_env(NetcOpts *o, char *err, size_t errlen) {
  opts_default(o);
  int rc = 0;
  for (int i = 0; i < NTABLE; i++) {
    const char *v = getenv(TABLE[i].env);
    if (v && set_row(o, &TABLE[i], v, rc ? NULL : err, rc ? 0 : errlen)) rc = -1;
  }
  return rc;
}

int opts_parse(NetcOpts *o, const char *list, char *err, size_t errlen) {
  while (list && *list) {
    while (*list == ' ' || *list == ',') list++;
    if (!*list) break;
    size_t n = strcspn(list, ",");
    char item[320];
    if (n >= sizeof item) return fail(err, errlen, "options: an item of over %zu bytes", sizeof item - 1);
    memcpy(item, list, n);
    item[n] = 0;
    while (n && item[n - 1] == ' ') item[--n] = 0;
    char *eq = strchr(item, '=');
    if (!eq) return fail(err, errlen, "options: '%s' is not name=value", item);
    *eq = 0;
    if (opts_set(o, item, eq + 1, err, errlen)) return -1;
    list += strcspn(list, ",");
  }
  return 0;
}

void opts_code_key(const NetcOpts *o, char *buf, size_t len) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < NTABLE && at < len; i++) {
    if (!TABLE[i].code) continue;
    int v = *(const int *)((const char *)o + TABLE[i].offset);
    int w = snprintf(buf + at, len - at, "%s%s=%d", at ? " " : "", TABLE[i].name, v);
    if (w < 0) break;
    at += (size_t)w;
  }
}
