/* fuzz_onnx.c - libFuzzer harness for the ONNX front end (`netc FILE.onnx`).
 *
 * Feeds arbitrary bytes as an ONNX model through the protobuf reader, the
 * import (with the default train section), the pass pipeline and the
 * verifier, and for every input that compiles checks that the IR text
 * round-trips (print, read back, print again, byte for byte), as
 * fuzz_frontend does for .net files.  Seeded with the models that
 * tests/onnx_import/onnx_make.c writes.  The passes run only on graphs of
 * at most MAX_OPS ops, so that each input takes a bounded time. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"

enum { MAX_OPS = 1000 };

static char *print_graph(const IrGraph *g, size_t *len) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  if (!f) abort();
  IrPrintOpts o = {.no_loc = 1};
  ir_print(f, g, &o);
  fclose(f);
  return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull) devnull = fopen("/dev/null", "w");
  Diag d;
  diag_init(&d, devnull);
  Arena a;
  arena_init(&a);
  PassCtx cx = {.d = &d, .out = devnull};
  IrGraph *g = compile_onnx(&a, &d, "fuzz.onnx", data, size, NULL, NULL, NULL);
  if (g && (g->nnode > MAX_OPS || pipeline_run(&g, &cx))) g = NULL;
  if (g) {
    size_t n1, n2;
    char *t1 = print_graph(g, &n1);
    Diag rd;
    diag_init(&rd, stderr);
    IrGraph *back = ir_read(&a, &rd, "fuzz.ir", t1, n1);
    if (!back) {
      fprintf(stderr, "printed IR does not read back:\n%s\n", t1);
      abort();
    }
    char *t2 = print_graph(back, &n2);
    if (n1 != n2 || memcmp(t1, t2, n1)) {
      fprintf(stderr, "IR round trip differs:\n%s\n---\n%s\n", t1, t2);
      abort();
    }
    free(t1);
    free(t2);
  }
  arena_free(&a);
  return 0;
}
