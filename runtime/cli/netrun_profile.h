/* netrun_profile.h - `netrun profile`: where a GPU training step spends its
 * time, kernel by kernel (docs/profiling.md). */
#ifndef NETC_NETRUN_PROFILE_H
#define NETC_NETRUN_PROFILE_H

#include <stdio.h>

#include "net.h"

typedef enum NetrunProfBy { NETRUN_BY_KERNEL, NETRUN_BY_LAYER, NETRUN_BY_OP } NetrunProfBy;

/* netrun profile MODEL [--batch N] [--inference] [--reps N] [--top K]
 *   [--trace FILE.json] [--by kernel|layer|op] [--cache DIR] [--precision P]
 * argv[0] is "profile".  Returns the exit status: 0, 1 a failure, 2 usage. */
int netrun_profile_main(int argc, char **argv);

/* Prints p (classified) to f: a header, the rows grouped `by` sorted by
 * time (the first `top`, 0: all), then the totals by kind and by bound.
 * 0, or -1 when out of memory. */
int netrun_profile_print(FILE *f, const NetProfile *p, NetrunProfBy by, int top);

#endif
