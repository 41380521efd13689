/* fuzz_frontend.c - libFuzzer harness for the whole front end.
 *
 * Feeds arbitrary bytes through parse, lowering, the pass pipeline and the
 * verifier, and for every input that compiles checks that the IR text
 * round-trips: print, read back, print again, byte for byte.  Crashes,
 * sanitizer reports, leaks and round-trip mismatches are findings.  A few
 * bytes of `for` can make a network of a million ops; the passes run only
 * on networks of at most MAX_OPS (the seeds' largest, ResNet-152, has
 * about 520), so that each input takes a bounded time: what the fuzzer
 * looks for is wrong behaviour, not how the passes scale. */
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
  IrGraph *g = compile_source(&a, &d, "fuzz.net", (const char *)data, size, NULL);
  if (g && (g->nnode > MAX_OPS || pipeline_run(&g, &cx))) g = NULL;
  if (g) fuzz_check_roundtrip(&a, g);
  arena_free(&a);
  return 0;
}
