/* netrun_opt.h - the checks netrun's commands share when they read their
 * options (netrun.c, netrun_profile.c): each prints "netrun: error: ..."
 * naming the option and the value, and returns -1 (0 when the value is
 * good). */
#ifndef NETC_NETRUN_OPT_H
#define NETC_NETRUN_OPT_H

enum { NETRUN_EXIT_FAIL = 1, NETRUN_EXIT_USAGE = 2 };

/* s is an integer in lo..hi, into *out. */
int netrun_opt_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
/* s is fp32, fp16 or bf16 (--precision). */
int netrun_opt_precision(const char *s);
/* s is one of the `n` words in `words` (for opt); the message lists them. */
int netrun_opt_word(const char *opt, const char *s, const char *const *words, int n);
/* getopt_long returned ':' (a value missing) or '?' (an unknown option) for
 * argv[optind - 1] of command cmd: prints which, returns NETRUN_EXIT_USAGE. */
int netrun_opt_bad(int c, char **argv, const char *cmd);

#endif
