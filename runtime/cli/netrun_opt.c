/* netrun_opt.c - option checks shared by netrun's commands (netrun_opt.h). */
#include "netrun_opt.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every number starts with a digit, a sign or a point: strtoll and strtod
 * would skip leading white space. */
static int starts_number(const char *s) { return *s && !isspace((unsigned char)*s); }

int netrun_opt_int(const char *opt, const char *s, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = starts_number(s) ? strtoll(s, &end, 10) : 0;
  /* errno: out of long long's range, which strtoll clamps */
  if (!starts_number(s) || *end || errno || v < lo || v > hi) {
    fprintf(stderr, "netrun: error: %s must be an integer in %lld..%lld, not '%s'\n", opt, lo, hi, s);
    return -1;
  }
  *out = v;
  return 0;
}

int netrun_opt_range(const char *opt, long long v, long long lo, long long hi) {
  if (v >= lo && v <= hi) return 0;
  fprintf(stderr, "netrun: error: %s must be an integer in %lld..%lld, not '%lld'\n", opt, lo, hi, v);
  return -1;
}

/* s as a double that a float holds without loss of range: finite, and not
 * denormal or zero when nonzero (strtod's ERANGE: over or under double's
 * range). */
static int parse_float(const char *s, const char **end, double *v) {
  char *e;
  errno = 0;
  *v = starts_number(s) ? strtod(s, &e) : 0;
  *end = starts_number(s) ? e : s;
  if (!starts_number(s) || *end == s || errno || !isfinite(*v) || fabs(*v) > FLT_MAX) return -1;
  return *v != 0 && fabs(*v) < FLT_MIN ? -1 : 0;
}

int netrun_opt_real(const char *opt, const char *s, double hi, double *out) {
  const char *end;
  double v;
  if (parse_float(s, &end, &v) || *end || !(v > 0) || v > hi) {
    fprintf(stderr, "netrun: error: %s must be a positive number from %g to %g (a normal float), not '%s'\n", opt,
            (double)FLT_MIN, hi, s);
    return -1;
  }
  *out = v;
  return 0;
}

int netrun_opt_rgb(const char *opt, const char *s, int positive, float out[3]) {
  double v[3];
  int n = 0, ok = 1;
  const char *end = s;
  while (n < 3 && ok) {
    ok = parse_float(end, &end, &v[n]) == 0;
    n++;
    if (*end != ',') break;
    end++;
  }
  if (n == 1) v[1] = v[2] = v[0];
  ok = ok && *end == 0 && (n == 1 || n == 3);
  for (int i = 0; i < 3 && ok; i++) ok = !positive || v[i] > 0;
  if (!ok) {
    fprintf(stderr,
            "netrun: error: %s takes R,G,B (or one value): 3 %snumbers a float holds (normal, at most %g), not '%s'\n",
            opt, positive ? "positive " : "", (double)FLT_MAX, s);
    return -1;
  }
  for (int i = 0; i < 3; i++) out[i] = (float)v[i];
  return 0;
}

int netrun_opt_word(const char *opt, const char *s, const char *const *words, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, words[i]) == 0) return 0;
  char list[256] = "";
  size_t len = 0;
  for (int i = 0; i < n && len < sizeof list; i++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", words[i]);
  fprintf(stderr, "netrun: error: %s must be %s, not '%s'\n", opt, list, s);
  return -1;
}

int netrun_opt_precision(const char *s) {
  static const char *const P[] = {"fp32", "fp16", "bf16", "fp8"};
  return netrun_opt_word("--precision", s, P, 4);
}

int netrun_opt_bad(int c, char **argv, const char *cmd) {
  if (c == ':')
    fprintf(stderr, "netrun: error: option '%s' needs a value\n", argv[optind - 1]);
  else
    fprintf(stderr, "netrun: error: %s%sunknown option '%s'\n", cmd ? cmd : "", cmd ? ": " : "", argv[optind - 1]);
  return NETRUN_EXIT_USAGE;
}
