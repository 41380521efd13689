/* check.h - the assertions of netc's C unit tests.
 *
 * CHECK(cond, fmt, ...) records a failure with file:line and a message and
 * carries on; CHECK_CLOSE compares floats with a relative tolerance and
 * prints both values.  A test's main() ends with `return check_report();`,
 * which prints "N passed, N failed" and returns 0 only when nothing failed.
 * check_skip("why") prints the reason and returns 77, which ctest counts as
 * skipped (SKIP_RETURN_CODE 77). */
#ifndef NETC_CHECK_H
#define NETC_CHECK_H

#include <math.h>
#include <stdio.h>

static int check_npass, check_nfail;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (cond) {                                                                \
      check_npass++;                                                           \
    } else {                                                                   \
      check_nfail++;                                                           \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
    }                                                                          \
  } while (0)

#define CHECK_CLOSE(got, want, rtol, what)                                            \
  do {                                                                                \
    double g_ = (got), w_ = (want);                                                   \
    double d_ = fabs(g_ - w_), s_ = fabs(w_) > 1 ? fabs(w_) : 1;                      \
    CHECK(d_ <= (rtol)*s_, "%s: got %.9g want %.9g (diff %.3g)", (what), g_, w_, d_); \
  } while (0)

static inline int check_report(void) {
  printf("%d passed, %d failed\n", check_npass, check_nfail);
  return check_nfail ? 1 : 0;
}

static inline int check_skip(const char *why) {
  printf("skipped: %s\n", why);
  return 77;
}

#endif
