/* net_model.h - where the API's graphs come from: a model.so through
 * rt_model_open (when the build has rt_model.c: NET_HAVE_RT_MODEL), or a
 * .net file compiled in-process with the netc pipeline, and the memory plan
 * made again for another batch.  Internal to libnetrt_api; compiler
 * diagnostics are caught into the caller's buffer, never printed. */
#ifndef NETC_NET_MODEL_H
#define NETC_NET_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "ir.h"
#include "net.h"
#include "rt_model.h"

typedef struct NetGraphs {
  IrGraph *train; /* NULL when not asked for */
  IrGraph *infer;
  int64_t batch; /* what the plans were made for */
  void *handle;  /* the open model.so, or NULL */
} NetGraphs;

/* Opens path into a, with o's precision ("fp32", "fp16", "bf16" or NULL),
 * batch (0: the model's), image size (0: the model's) and inference_only
 * (no training graph).  A .net or .onnx file is compiled for them; a
 * model.so is planned again for the batch but keeps its precision and image
 * size (asking for others is NET_ERR_ARG).  NET_ERR_IO, NET_ERR_MODEL or
 * NET_ERR_ARG with the compiler's messages in err. */
NetStatus net_model_open(const char *path, Arena *a, const NetLoadOpts *o, NetGraphs *out, char *err, size_t len);
void net_model_close(NetGraphs *m);

/* g's kernel programs compiled into the model.so m was opened from, and
 * their architecture; NULLs for a .net file (or another graph). */
void net_model_prebuilt(const NetGraphs *m, const IrGraph *g, const CgProgram **prog, const char **arch);

/* Makes g's memory plan again for batch (no-op when it already is). */
NetStatus net_model_plan(IrGraph *g, int64_t batch, char *err, size_t len);

/* Makes every sgd_update's gradient a graph output, so that the memory plan
 * keeps it to the end of the step (then plan again). */
NetStatus net_model_keep_grads(IrGraph *g, char *err, size_t len);

#endif
