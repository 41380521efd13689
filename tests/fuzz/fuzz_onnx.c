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
#include "fuzz_roundtrip.h"

enum { MAX_OPS = 1000 };

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
  if (g) fuzz_check_roundtrip(&a, g);
  arena_free(&a);
  return 0;
}
