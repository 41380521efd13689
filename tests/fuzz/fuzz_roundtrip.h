/* fuzz_roundtrip.h - what the front-end fuzzers (fuzz_frontend.c,
 * fuzz_onnx.c) check of every graph that compiles: its IR text
 * round-trips -- printed, read back, printed again, byte for byte -- and so
 * does the graph written as a .net file (netc --emit-net: the text compiles
 * back to the same IR, or the graph is refused as inexpressible).  A
 * mismatch or a text that does not read back aborts (a finding). */
#ifndef NETC_FUZZ_ROUNDTRIP_H
#define NETC_FUZZ_ROUNDTRIP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "emit_net.h"

static char *fuzz_print_graph(const IrGraph *g, size_t *len) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  if (!f) abort();
  IrPrintOpts o = {.no_loc = 1};
  ir_print(f, g, &o);
  fclose(f);
  return buf;
}

static void fuzz_check_roundtrip(Arena *a, const IrGraph *g) {
  size_t n1, n2;
  char *t1 = fuzz_print_graph(g, &n1);
  Diag rd;
  diag_init(&rd, stderr);
  IrGraph *back = ir_read(a, &rd, "fuzz.ir", t1, n1);
  if (!back) {
    fprintf(stderr, "printed IR does not read back:\n%s\n", t1);
    abort();
  }
  char *t2 = fuzz_print_graph(back, &n2);
  if (n1 != n2 || memcmp(t1, t2, n1)) {
    fprintf(stderr, "IR round trip differs:\n%s\n---\n%s\n", t1, t2);
    abort();
  }
  free(t2);
  /* written as a .net file and compiled back: the same IR (emit_net_text compares) */
  static FILE *quiet; /* refusals (what the language cannot say) are no finding */
  if (!quiet) quiet = fopen("/dev/null", "w");
  Diag ed;
  diag_init(&ed, quiet ? quiet : stderr);
  char *net;
  size_t nn;
  if (emit_net_text(g, &ed, "fuzz", "fuzz.net", 0, &net, &nn) == EMIT_NET_DIFFERS) {
    fprintf(stderr, "the graph written as a .net file does not compile back to its IR:\n%s\n", t1);
    abort();
  }
  free(net);
  free(t1);
}

#endif
