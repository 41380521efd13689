/* diag.h - diagnostics for people.
 *
 * Errors about the user's input carry a SrcLoc and print like a compiler's:
 *
 *   models/resnet50.net:42:31: error: unknown activation 'relux'
 *     c1 = conv(x, 64, k=7, s=2, act=relux)
 *                                    ^
 *
 * Errors are collected, not fatal at the first; after DIAG_MAX_ERRORS the
 * rest are counted but not printed.  The source line is printed with
 * non-printable bytes shown as '?' and very long lines cut to a window
 * around the caret, so binary garbage cannot flood a terminal. */
#ifndef NETC_DIAG_H
#define NETC_DIAG_H

#include <stddef.h>
#include <stdio.h>

typedef struct SrcLoc {
  const char *file; /* NULL: no location (printed without file:line:col) */
  int line, col;    /* 1-based; col counts bytes */
} SrcLoc;

enum { DIAG_MAX_ERRORS = 20 };

typedef struct Diag {
  FILE *out;        /* where messages go (stderr in the CLI) */
  const char *file; /* the file whose text is below */
  const char *src;  /* its bytes (may contain NULs), for source lines */
  size_t srclen;
  int nerrors, nwarnings;
} Diag;

void diag_init(Diag *d, FILE *out);
void diag_set_source(Diag *d, const char *file, const char *src, size_t len);
void diag_error(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_warning(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_note(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prints "N errors generated." style summary line when nerrors > DIAG_MAX_ERRORS. */
void diag_finish(Diag *d);

#endif
