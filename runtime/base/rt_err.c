/* rt_err.c - formatting error text into a caller's buffer (rt_err.h). */
#include "rt_err.h"

#include <stdio.h>

void rt_verrf(char *err, size_t errlen, const char *fmt, va_list ap) {
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
}

int rt_errf(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rt_verrf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}
