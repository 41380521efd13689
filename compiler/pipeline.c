/* pipeline.c - the pass table, read top to bottom, and the loop that runs it.
 *
 * After each pass: verify (a failing verifier names the pass that broke the
 * graph), then dump to DIR/NN-name.ir and print if asked.  The lowering's
 * output is dump 00-parse.ir. */
#include "pipeline.h"
#include "resize.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static const Pass PIPELINE[] = {
    {"dce", pass_dce, "remove ops whose results nothing uses"},
    {"autodiff", pass_autodiff, "add the backward pass and the SGD update (inference: drop the loss)"},
    {"fuse", pass_fuse, "fuse conv + batch norm (+ relu), add + relu and their backward forms"},
    {"layout", pass_layout, "NHWC activations, KRSC filters, channels padded for tensor cores"},
    {"precision", pass_precision,
     "assign each op its dtype (f32 first conv but in f16 inference, f16/bf16/i8 elsewhere), insert casts"},
    {"requant", pass_requant, "an i8 convolution read only by calibrated casts to i8 writes that i8 itself"},
    {"prologue", pass_prologue, "batch norm + relu read by convolutions applied in their prologue, not stored"},
    {"overlap", pass_overlap, "weight gradients hold their inputs until the next data gradient, to run beside it"},
    {"hoist", pass_hoist, "an inference graph's weight casts run when the weights change, not every step"},
    {"memplan", pass_memplan, "liveness and buffer reuse: every activation's offset in one arena"},
};

enum { NPASSES = sizeof PIPELINE / sizeof PIPELINE[0] };

const Pass *pipeline_passes(int *n) {
  *n = NPASSES;
  return PIPELINE;
}

int pipeline_find(const char *name) {
  for (int i = 0; i < NPASSES; i++)
    if (strcmp(PIPELINE[i].name, name) == 0) return i;
  return -1;
}

unsigned pipeline_bit(const char *name) {
  int i = pipeline_find(name);
  return i < 0 ? 0 : 1u << i;
}

unsigned pipeline_mask_after(const char *name) {
  unsigned mask = 0;
  for (int i = pipeline_find(name) + 1; i < NPASSES; i++) mask |= 1u << i;
  return mask;
}

static int dump(const IrGraph *g, PassCtx *cx, int index, const char *name) {
  IrPrintOpts o = {.no_loc = cx->no_loc, .pass = name};
  if (cx->print_after && strcmp(cx->print_after, name) == 0) ir_print(cx->out, g, &o);
  if (!cx->dump_dir) return 0;
  char path[4096];
  snprintf(path, sizeof path, "%s/%02d-%s.ir", cx->dump_dir, index, name);
  FILE *f = fopen(path, "w");
  if (!f) {
    diag_error(cx->d, (SrcLoc){0}, "cannot write IR dump '%s': %s", path, strerror(errno));
    return -1;
  }
  ir_print(f, g, &o);
  if (fclose(f)) {
    diag_error(cx->d, (SrcLoc){0}, "cannot write IR dump '%s': %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

int pipeline_run(IrGraph **g, PassCtx *cx) {
  if (cx->dump_dir && mkdir(cx->dump_dir, 0777) && errno != EEXIST) {
    diag_error(cx->d, (SrcLoc){0}, "cannot create dump directory '%s': %s", cx->dump_dir, strerror(errno));
    return -1;
  }
  if (cx->image_hw[0] && ir_resize_image(*g, cx->image_hw[0], cx->image_hw[1], cx->d)) return -1;
  if (ir_verify(*g, cx->d, "parse") || dump(*g, cx, 0, "parse")) return -1;
  for (int i = 0, k = 1; i < NPASSES; i++) {
    if (cx->disabled & (1u << i)) continue;
    IrGraph *next = PIPELINE[i].run(*g, cx);
    if (!next) {
      if (!cx->d->nerrors) diag_error(cx->d, (SrcLoc){0}, "pass '%s' failed", PIPELINE[i].name);
      return -1;
    }
    *g = next;
    if (ir_verify(*g, cx->d, PIPELINE[i].name) || dump(*g, cx, k++, PIPELINE[i].name)) return -1;
  }
  return 0;
}
