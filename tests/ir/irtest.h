/* irtest.h - what the IR tests share: a small hand-built net that uses
 * every op, printing to and reading from strings, a structural comparison
 * of two graphs up to renumbering, and capturing diagnostics as text. */
#ifndef NETC_IRTEST_H
#define NETC_IRTEST_H

#include <stddef.h>

#include "ir.h"

/* conv/bn/relu/conv+bias/add/maxpool/avgpool/global_avgpool/flatten/linear/
 * softmax_cross_entropy on an f32[N,3,8,8] image; value ids are deliberately
 * not in print order, and one param is unused. */
IrGraph *irtest_small_net(Arena *a);

/* ir_print into a malloc'd string (free it). */
char *irtest_print(const IrGraph *g, const IrPrintOpts *o);

/* Diagnostics written to a string: irtest_diag_begin, use d, then
 * irtest_diag_end returns the text (malloc'd; free it). */
typedef struct IrtestDiag {
  Diag d;
  char *buf;
  size_t len;
} IrtestDiag;
void irtest_diag_begin(IrtestDiag *c);
char *irtest_diag_end(IrtestDiag *c);

/* ir_read of a C string with diagnostics captured into *msgs (may be NULL). */
IrGraph *irtest_read(Arena *a, const char *text, char **msgs);

/* 1 when b equals a up to value renumbering; otherwise 0 and a reason in why. */
int irtest_equal(const IrGraph *a, const IrGraph *b, char *why, size_t whylen);

#endif
