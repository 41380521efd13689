/* cg_text.c - a growing text buffer (cg_text.h). */
#include "cg_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the NUL. */
static int reserve(CgText *t, size_t n) {
  if (t->bad) return -1;
  if (t->len + n + 1 <= t->cap) return 0;
  size_t cap = t->cap ? t->cap : 4096;
  while (cap < t->len + n + 1) cap *= 2;
  char *p = realloc(t->p, cap);
  if (!p) {
    t->bad = 1;
    return -1;
  }
  t->p = p, t->cap = cap;
  return 0;
}

int cg_text_add(CgText *t, const char *s, size_t n) {
  if (reserve(t, n)) return -1;
  memcpy(t->p + t->len, s, n);
  t->len += n;
  t->p[t->len] = 0;
  return 0;
}

int cg_text_puts(CgText *t, const char *s) { return cg_text_add(t, s, strlen(s)); }

int cg_text_printf(CgText *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    t->bad = 1;
    return -1;
  }
  if (reserve(t, (size_t)n)) return -1;
  va_start(ap, fmt);
  vsnprintf(t->p + t->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
  return 0;
}

/* The message into err, when one is wanted. */
static void put(char *err, size_t errlen, const char *fmt, va_list ap) {
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
}

CgStatus cg_fail(CgStatus s, char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  put(err, errlen, fmt, ap);
  va_end(ap);
  return s;
}

int cg_errf(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  put(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}
