/* traintest.c - model compiles for the training tests (see traintest.h).
 *
 * Models compile through the whole pipeline with netc's defaults, as a user
 * gets them: fused ops, NHWC with padded channels, f16 (simulated on the
 * CPU), the memory plan. */
#include "traintest.h"

#include <stdio.h>
#include <string.h>

#include "compile.h"

static PassCtx pass_ctx(Diag *d, int inference) {
  PassCtx cx = {.d = d, .inference = inference, .precision = IR_DT_F16};
  return cx;
}

IrGraph *traintest_compile(Arena *a, const char *root, const char *rel, int inference) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = pass_ctx(&d, inference);
  return compile_file(a, &d, path, &cx);
}

IrGraph *traintest_compile_text(Arena *a, const char *src, int inference) {
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = pass_ctx(&d, inference);
  return compile_source(a, &d, "test.net", src, strlen(src), &cx);
}
