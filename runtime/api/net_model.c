/* net_model.c - the API's graphs from a .net file or a model.so (see
 * net_model.h).  This file is the one place that knows how a model is
 * opened; swap it when model.so grows new ways in. */
#include "net_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile.h"
#include "int8_scales.h"
#include "pipeline.h"
#include "resize.h"
#include "rt_file.h"
#ifdef NET_HAVE_RT_MODEL
#include "rt_model.h"
#endif

/* Diagnostics into memory: the compiler writes to a FILE*. */
typedef struct Catch {
  Diag d;
  char *buf;
  size_t size;
} Catch;

static int catch_open(Catch *c) {
  c->buf = NULL, c->size = 0;
  FILE *f = open_memstream(&c->buf, &c->size);
  if (!f) return -1;
  diag_init(&c->d, f);
  return 0;
}

/* Closes the stream; copies what was written (without the last newline) to err. */
static void catch_close(Catch *c, char *err, size_t len, const char *fallback) {
  diag_finish(&c->d);
  fclose(c->d.out);
  size_t n = c->buf ? strlen(c->buf) : 0;
  while (n && (c->buf[n - 1] == '\n')) c->buf[--n] = 0;
  if (len) snprintf(err, len, "%s", n ? c->buf : fallback);
  free(c->buf);
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

static IrGraph *compile_one(Arena *a, const char *path, int inference, const NetLoadOpts *o, const Int8Scales *scales,
                            Catch *c) {
  PassCtx cx = {.d = &c->d,
                .out = c->d.out,
                .inference = inference,
                .batch = o->batch,
                .precision = IR_DT_F16,
                .image_hw = {o->image_h, o->image_w ? o->image_w : o->image_h},
                .int8_layers = o->int8 && *o->int8 ? o->int8 : NULL,
                .int8_scales = scales};
  if (o->precision) pass_precision_parse(o->precision, &cx); /* checked by open_net */
  return compile_file(a, &c->d, path, &cx);
}

/* The image input's height and width in g (0, 0 when it has none). */
static void image_size(const IrGraph *g, int64_t hw[2]) {
  hw[0] = hw[1] = 0;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *x = &g->val[v];
    if (x->kind != IR_VAL_INPUT || x->type.rank != 4 || x->type.dtype == IR_DT_I32) continue;
    int nhwc = x->type.layout == IR_LAYOUT_NHWC;
    hw[0] = x->type.dim[nhwc ? 1 : 2], hw[1] = x->type.dim[nhwc ? 2 : 3];
    return;
  }
}

static NetStatus open_net(const char *path, Arena *a, const NetLoadOpts *o, NetGraphs *out, char *err, size_t len) {
  const char *precision = o->precision;
  int want_train = !o->inference_only;
  PassCtx probe_cx = {0};
  if (precision && pass_precision_parse(precision, &probe_cx)) {
    snprintf(err, len, "precision must be " PASS_PRECISION_NAMES ", not '%s'", precision);
    return NET_ERR_ARG;
  }
  /* a regular file, opened without blocking; else the compiler's own reading says why */
  int probe = rt_file_open_regular(path, NULL, NULL, 0);
  if (probe < 0) {
    Catch c;
    if (catch_open(&c)) return NET_ERR_NOMEM;
    size_t n;
    free(compile_read_file(path, &n, &c.d));
    catch_close(&c, err, len, "cannot open the model");
    return NET_ERR_IO;
  }
  close(probe);
  Catch c;
  if (catch_open(&c)) return NET_ERR_NOMEM;
  Int8Scales scales;
  const Int8Scales *sp = o->int8_scales ? &scales : NULL;
  if (sp && int8_scales_read(a, &c.d, o->int8_scales, &scales)) {
    catch_close(&c, err, len, "cannot read the int8 scales");
    return NET_ERR_IO;
  }
  if (want_train) out->train = compile_one(a, path, 0, o, sp, &c);
  if (!want_train || out->train) out->infer = compile_one(a, path, 1, o, sp, &c);
  int ok = out->infer != NULL;
  catch_close(&c, err, len, "compile failed");
  if (!ok) return NET_ERR_MODEL;
  out->batch = out->infer->plan_batch;
  if (out->train && out->train->plan_batch != out->batch) {
    snprintf(err, len, "%s: training and inference plans made for different batches", path);
    return NET_ERR_MODEL;
  }
  return NET_OK;
}

NetStatus net_model_open(const char *path, Arena *a, const NetLoadOpts *o, NetGraphs *out, char *err, size_t len) {
  memset(out, 0, sizeof *out);
  if (o->image_h < 0 || o->image_w < 0 || o->image_h > RESIZE_MAX_SIDE || o->image_w > RESIZE_MAX_SIDE ||
      (o->image_w && !o->image_h)) {
    snprintf(err, len, "image size %lldx%lld: each side must be 1 to %d", (long long)o->image_h, (long long)o->image_w,
             RESIZE_MAX_SIDE);
    return NET_ERR_ARG;
  }
  if (ends_with(path, ".net") || compile_is_onnx(path)) return open_net(path, a, o, out, err, len);
  const char *precision = o->precision;
  int64_t batch = o->batch;
  int want_train = !o->inference_only;
  if ((o->int8 && *o->int8) || o->int8_scales) {
    snprintf(err, len, "%s: the int8 layers and scales are chosen when a model.so is compiled (netc --int8)", path);
    return NET_ERR_ARG;
  }
  if (precision) {
    snprintf(err, len, "%s: the precision is chosen when a model.so is compiled (netc --precision)", path);
    return NET_ERR_ARG;
  }
  /* a model.so is a regular file, opened without blocking, before dlopen sees it */
  char why[256];
  int fd = rt_file_open_regular(path, NULL, why, sizeof why);
  if (fd < 0) {
    snprintf(err, len, "%s: %s", path, why);
    return NET_ERR_IO;
  }
  close(fd);
#ifdef NET_HAVE_RT_MODEL
  RtModel *m = calloc(1, sizeof *m);
  if (!m) return NET_ERR_NOMEM;
  if (rt_model_open(path, a, m, err, len)) {
    free(m);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f ? NET_ERR_MODEL : NET_ERR_IO;
  }
  out->handle = m;
  out->train = want_train ? m->train : NULL;
  out->infer = m->infer;
  out->batch = m->batch;
  if (!out->infer || (want_train && !out->train)) {
    snprintf(err, len, "%s: the model lacks its %s graph", path, out->infer ? "training" : "inference");
    return NET_ERR_MODEL;
  }
  int64_t hw[2];
  image_size(out->infer, hw);
  if (o->image_h && (o->image_h != hw[0] || (o->image_w ? o->image_w : o->image_h) != hw[1])) {
    snprintf(err, len,
             "%s: compiled for %lldx%lld images; the image size is chosen when a model.so is compiled "
             "(netc --image-size)",
             path, (long long)hw[0], (long long)hw[1]);
    return NET_ERR_ARG;
  }
  if (batch > 0 && batch != out->batch) {
    NetStatus s = NET_OK;
    if (out->train) s = net_model_plan(out->train, batch, err, len);
    if (!s) s = net_model_plan(out->infer, batch, err, len);
    if (s) return s;
    out->batch = batch;
  }
  return NET_OK;
#else
  (void)a, (void)want_train, (void)batch;
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, len, "cannot open '%s'", path);
    return NET_ERR_IO;
  }
  fclose(f);
  snprintf(err, len, "%s: this netrt reads .net files only (built without rt_model.c, the model.so loader)", path);
  return NET_ERR_MODEL;
#endif
}

void net_model_close(NetGraphs *m) {
  if (!m) return;
#ifdef NET_HAVE_RT_MODEL
  if (m->handle) {
    rt_model_close(m->handle);
    free(m->handle);
  }
#endif
  m->handle = NULL;
}

void net_model_prebuilt(const NetGraphs *m, const IrGraph *g, const CgProgram **prog, const char **arch) {
  *prog = NULL, *arch = NULL;
#ifdef NET_HAVE_RT_MODEL
  const RtModel *r = m ? m->handle : NULL;
  if (!r || !r->arch[0]) return;
  if (g == r->train) *prog = &r->train_prog;
  if (g == r->infer) *prog = &r->infer_prog;
  if (*prog) *arch = r->arch;
#else
  (void)m, (void)g;
#endif
}

NetStatus net_model_plan(IrGraph *g, int64_t batch, char *err, size_t len) {
  if (g->plan_bytes > 0 && g->plan_batch == batch) return NET_OK;
  Catch c;
  if (catch_open(&c)) return NET_ERR_NOMEM;
  PassCtx cx = {.d = &c.d, .out = c.d.out, .batch = batch};
  int ok = pass_memplan(g, &cx) != NULL;
  char msg[1024];
  catch_close(&c, msg, sizeof msg, "memory plan failed");
  if (!ok) {
    snprintf(err, len, "batch %lld: %s", (long long)batch, msg);
    return NET_ERR_ARG;
  }
  return NET_OK;
}

NetStatus net_model_keep_grads(IrGraph *g, char *err, size_t len) {
  for (int n = 0; n < g->nnode; n++) {
    if (g->node[n].op != IR_OP_SGD_UPDATE) continue;
    int gv = g->node[n].in[1], seen = 0;
    for (int k = 0; k < g->noutput; k++) seen |= g->output[k] == gv;
    if (!seen && ir_output_add(g, gv) < 0) {
      snprintf(err, len, "out of memory");
      return NET_ERR_NOMEM;
    }
  }
  g->plan_bytes = 0; /* the next net_model_plan makes it again */
  return NET_OK;
}
