/* diag.c - prints errors, warnings and notes the way compilers do (see diag.h).
 *
 *   resnet50.net:12:9: error: unexpected ')', expected an expression
 *     x = f(a, )
 *              ^
 *
 * The source line is looked up in the text given to diag_set_source, so a
 * message about another file (or one without a location) is printed without
 * it.  Bytes that a terminal would not show plainly become '?'; tabs stay
 * tabs in both the source and the caret line so that the caret lines up.
 * Lines longer than LINE_MAX_SHOWN are cut to a window around the caret.
 * After DIAG_MAX_ERRORS errors, errors (and the warnings and notes that
 * follow them) are only counted. */
#include "diag.h"

#include <stdarg.h>
#include <string.h>

enum { LINE_MAX_SHOWN = 120, WINDOW_BEFORE = 50, WINDOW_WIDTH = 100 };

void diag_init(Diag *d, FILE *out) {
  memset(d, 0, sizeof *d);
  d->out = out;
}

void diag_set_source(Diag *d, const char *file, const char *src, size_t len) {
  d->file = file;
  d->src = src;
  d->srclen = len;
}

/* Finds line `line` (1-based) of the source: its start and its length
 * without the newline (and without a '\r' before it).  0 when absent. */
static int find_line(const Diag *d, int line, size_t *start, size_t *len) {
  const char *p = d->src, *end = d->src + d->srclen;
  for (int l = 1; l < line; l++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) return 0;
    p = nl + 1;
  }
  const char *nl = memchr(p, '\n', (size_t)(end - p));
  const char *e = nl ? nl : end;
  if (e > p && e[-1] == '\r') e--;
  *start = (size_t)(p - d->src);
  *len = (size_t)(e - p);
  return 1;
}

static int shown_plain(unsigned char c) { return c == '\t' || (c >= 0x20 && c < 0x7f); }

/* Prints the source line of loc and a caret under its column. */
static void print_source(Diag *d, SrcLoc loc) {
  size_t start, len;
  if (!d->src || !d->file || !loc.file || strcmp(loc.file, d->file) != 0) return;
  if (loc.line < 1 || loc.col < 1 || !find_line(d, loc.line, &start, &len)) return;
  const unsigned char *s = (const unsigned char *)d->src + start;
  size_t caret = (size_t)loc.col - 1; /* may sit just past the end: a newline or end of file */
  size_t from = 0, to = len;
  if (len > LINE_MAX_SHOWN) {
    from = caret > WINDOW_BEFORE ? caret - WINDOW_BEFORE : 0;
    if (from > len) from = len;
    to = from + WINDOW_WIDTH < len ? from + WINDOW_WIDTH : len;
  }
  const char *pre = from > 0 ? "..." : "", *post = to < len ? "..." : "";
  fprintf(d->out, "  %s", pre);
  for (size_t i = from; i < to; i++) fputc(shown_plain(s[i]) ? s[i] : '?', d->out);
  fprintf(d->out, "%s\n  %s", post, from > 0 ? "   " : "");
  for (size_t i = from; i < caret && i < to; i++) fputc(s[i] == '\t' ? '\t' : ' ', d->out);
  if (caret > to) /* past a cut-off end: point at the "..." */
    fputs("   ", d->out);
  fputs("^\n", d->out);
}

static void report(Diag *d, const char *kind, SrcLoc loc, const char *fmt, va_list ap) {
  if (!d->out) return;
  if (!loc.file)
    fputs("netc: ", d->out);
  else if (loc.line < 1)
    fprintf(d->out, "%s: ", loc.file);
  else
    fprintf(d->out, "%s:%d:%d: ", loc.file, loc.line, loc.col > 0 ? loc.col : 1);
  fprintf(d->out, "%s: ", kind);
  vfprintf(d->out, fmt, ap);
  fputc('\n', d->out);
  print_source(d, loc);
}

void diag_error(Diag *d, SrcLoc loc, const char *fmt, ...) {
  if (++d->nerrors > DIAG_MAX_ERRORS) return;
  va_list ap;
  va_start(ap, fmt);
  report(d, "error", loc, fmt, ap);
  va_end(ap);
}

void diag_warning(Diag *d, SrcLoc loc, const char *fmt, ...) {
  d->nwarnings++;
  if (d->nerrors > DIAG_MAX_ERRORS) return;
  va_list ap;
  va_start(ap, fmt);
  report(d, "warning", loc, fmt, ap);
  va_end(ap);
}

void diag_note(Diag *d, SrcLoc loc, const char *fmt, ...) {
  if (d->nerrors > DIAG_MAX_ERRORS) return;
  va_list ap;
  va_start(ap, fmt);
  report(d, "note", loc, fmt, ap);
  va_end(ap);
}

void diag_finish(Diag *d) {
  if (d->out && d->nerrors > DIAG_MAX_ERRORS)
    fprintf(d->out, "%d errors generated; only the first %d are shown.\n", d->nerrors, DIAG_MAX_ERRORS);
  if (d->out) fflush(d->out);
}
