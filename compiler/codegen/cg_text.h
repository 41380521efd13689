/* cg_text.h - what every file of code generation uses: a growing,
 * NUL-terminated text buffer (the CUDA source the generator assembles:
 * cg_kernels.c, cg_prog.c, cg_multi.c), the status codes of code
 * generation, and the message that goes with them.
 *
 * Zero-initialize a CgText; p stays NULL until the first add.  Running out
 * of memory sets `bad` and makes every later add fail too, so a builder may
 * check once at the end.
 *
 * Errors follow the runtime's convention: a status code, and one message
 * in a buffer the caller owns (err, errlen bytes; err NULL or errlen 0: no
 * text wanted).  The GPU executor turns a CgStatus into its own status in
 * one place (runtime/gpu/rt_gpu_prog.c). */
#ifndef NETC_CG_TEXT_H
#define NETC_CG_TEXT_H

#include <stdarg.h>
#include <stddef.h>

typedef enum CgStatus {
  CG_OK = 0,
  CG_ENOLIB,   /* no libnvrtc could be loaded (the message says why) */
  CG_ECOMPILE, /* a source did not compile (the message has the log) */
  CG_ECALL,    /* another NVRTC call failed */
  CG_EARG,     /* a caller's argument is invalid, or a node has no kernel */
  CG_ENOMEM    /* host memory ran out */
} CgStatus;

typedef struct CgText {
  char *p; /* malloc'd; the caller frees it (or takes it) */
  size_t len, cap;
  int bad; /* an add failed */
} CgText;

/* Appends the n bytes at s.  0, or -1 (bad set). */
int cg_text_add(CgText *t, const char *s, size_t n);
/* Appends the NUL-terminated s. */
int cg_text_puts(CgText *t, const char *s);
/* Appends printf's text, of any length.  0, or -1 (bad set). */
int cg_text_printf(CgText *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* printf into err (truncated to errlen - 1 characters); returns s, so that
 * `return cg_fail(CG_EARG, err, errlen, ...);` ends a failing function. */
CgStatus cg_fail(CgStatus s, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The same as an int: returns -1. */
int cg_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
