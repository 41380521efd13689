/* exectest.h - what the CPU executor tests share: graphs from IR text or
 * from a .net model, executors with messages on stderr, seeded random
 * fills, and comparisons that print the worst element. */
#ifndef NETC_EXECTEST_H
#define NETC_EXECTEST_H

#include <stdint.h>

#include "ir.h"
#include "pipeline.h"
#include "rt_cpu.h"

/* ir_read + ir_verify of text; NULL (after printing why) on any error. */
IrGraph *exectest_read(Arena *a, const char *text);
/* Parses and lowers ROOT/rel (a .net file); NULL on errors. */
IrGraph *exectest_model(Arena *a, const char *root, const char *rel);
/* exectest_model, then the passes as cx says (its diagnostics on stderr,
 * its dumps on stdout: cx.d and cx.out are set here); NULL on errors. */
IrGraph *exectest_compile(Arena *a, const char *root, const char *rel, PassCtx cx);
/* rt_cpu_new, printing its message on failure. */
RtCpu *exectest_new(const IrGraph *g, int64_t batch);
/* rt_cpu_run, printing its message on failure; returns its status. */
int exectest_run(RtCpu *x);

/* A graph read from text with its executor, in its own arena. */
typedef struct ExectestCase {
  Arena arena;
  IrGraph *g;
  RtCpu *x;
} ExectestCase;
/* Reads text, makes the executor for batch; 0, or -1 after printing why
 * (the case must still be closed). */
int exectest_open(ExectestCase *c, const char *text, int64_t batch);
void exectest_close(ExectestCase *c);
/* Buffer of the graph's k-th output. */
float *exectest_out(ExectestCase *c, int k);

/* Deterministic uniform numbers in [lo, hi) (xorshift, per-state). */
float exectest_rand(uint64_t *state, float lo, float hi);
/* Fills float value v with uniform [lo, hi); returns v's buffer. */
float *exectest_fill(RtCpu *x, int v, uint64_t *state, float lo, float hi);
/* Value id of the input/param/state called name; -1 (printed) when absent. */
int exectest_val(RtCpu *x, const char *name);
/* The float buffer of the input/param/state called name; NULL when absent. */
float *exectest_f(RtCpu *x, const char *name);

/* max |a - b| / max(1, max |b|) over n elements; prints the worst element
 * as "what[i]: got a want b" when it exceeds tol.  Returns the error. */
double exectest_compare(const char *what, const float *got, const float *want, int64_t n, double tol);
/* ir_verify(g) as after pass `pass`, its messages into buf (len bytes, NUL
 * terminated); nonzero when it refused the graph. */
int exectest_verify_msg(const IrGraph *g, const char *pass, char *buf, size_t len);

#endif
