/* rt_text.h - a growing, NUL-terminated text buffer: the CUDA source the
 * GPU code generator assembles (rt_gpu_kernels.c, rt_gpu_prog.c,
 * rt_gpu_optim.c).  Zero-initialize an RtText; p stays NULL until the
 * first add.  Running out of memory sets `bad` and makes every later add
 * fail too, so a builder may check once at the end. */
#ifndef NETC_RT_TEXT_H
#define NETC_RT_TEXT_H

#include <stddef.h>

typedef struct RtText {
  char *p;      /* malloc'd; the caller frees it (or takes it) */
  size_t len, cap;
  int bad;      /* an add failed */
} RtText;

/* Appends the n bytes at s.  0, or -1 (bad set). */
int rt_text_add(RtText *t, const char *s, size_t n);
/* Appends the NUL-terminated s. */
int rt_text_puts(RtText *t, const char *s);
/* Appends printf's text, of any length.  0, or -1 (bad set). */
int rt_text_printf(RtText *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
