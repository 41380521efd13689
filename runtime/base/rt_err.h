/* rt_err.h - the one way the runtime's libraries write a message into a
 * caller's buffer.  Every library reports errors as a status code plus text
 * in a char buffer the caller owns (err, errlen bytes; errlen 0 or err NULL:
 * no text wanted); these format that text. */
#ifndef NETC_RT_ERR_H
#define NETC_RT_ERR_H

#include <stdarg.h>
#include <stddef.h>

/* printf into err (truncated to errlen - 1 characters); returns -1, so that
 * `return rt_errf(err, errlen, ...);` ends a function that fails with -1. */
int rt_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same from a va_list, for wrappers that return another status. */
void rt_verrf(char *err, size_t errlen, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

#endif
