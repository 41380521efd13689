/* netrun_opt.h - the checks netrun's commands share when they read their
 * options (netrun.c, netrun_profile.c): each prints "netrun: error: ..."
 * naming the option and the value, and returns -1 (0 when the value is
 * good). */
#ifndef NETC_NETRUN_OPT_H
#define NETC_NETRUN_OPT_H

enum { NETRUN_EXIT_FAIL = 1, NETRUN_EXIT_USAGE = 2 };

/* s is a decimal integer in lo..hi, into *out: nothing before or after
 * it, no value out of long long's range clamped. */
int netrun_opt_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
/* v, an option's value already read, is in lo..hi (a command that takes
 * fewer than the shared parser allows: bench's int --steps). */
int netrun_opt_range(const char *opt, long long v, long long lo, long long hi);
/* s is a positive number up to hi that a float holds as it is: not
 * denormal, not underflowing to 0, not overflowing (so --lr 1e-46 is
 * refused, never replaced by the default that 0 means). */
int netrun_opt_real(const char *opt, const char *s, double hi, double *out);
/* "R,G,B" or one value for all three: numbers a float holds as they are
 * (zero, or normal and finite), positive when `positive`. */
int netrun_opt_rgb(const char *opt, const char *s, int positive, float out[3]);
/* s is fp32, fp16 or bf16 (--precision). */
int netrun_opt_precision(const char *s);
/* s is one of the `n` words in `words` (for opt); the message lists them. */
int netrun_opt_word(const char *opt, const char *s, const char *const *words, int n);
/* getopt_long returned ':' (a value missing) or '?' (an unknown option) for
 * argv[optind - 1] of command cmd: prints which, returns NETRUN_EXIT_USAGE. */
int netrun_opt_bad(int c, char **argv, const char *cmd);

#endif
