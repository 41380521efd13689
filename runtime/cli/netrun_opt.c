/* netrun_opt.c - option checks shared by netrun's commands (netrun_opt.h). */
#include "netrun_opt.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int netrun_opt_int(const char *opt, const char *s, long long lo, long long hi, long long *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) {
    fprintf(stderr, "netrun: error: %s must be an integer in %lld..%lld, not '%s'\n", opt, lo, hi, s);
    return -1;
  }
  *out = v;
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
  static const char *const P[] = {"fp32", "fp16", "bf16"};
  return netrun_opt_word("--precision", s, P, 3);
}

int netrun_opt_bad(int c, char **argv, const char *cmd) {
  if (c == ':')
    fprintf(stderr, "netrun: error: option '%s' needs a value\n", argv[optind - 1]);
  else
    fprintf(stderr, "netrun: error: %s%sunknown option '%s'\n", cmd ? cmd : "", cmd ? ": " : "", argv[optind - 1]);
  return NETRUN_EXIT_USAGE;
}
