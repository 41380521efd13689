/* netrun_files.h - a command's outputs checked against its inputs before any
 * work: no output is the same file (st_dev, st_ino) as an input, and each
 * output can be written (its directory exists and is writable; one replaced
 * atomically is not a device, FIFO or directory).  The checks live in
 * runtime/base/rt_file.c; this is netrun's list of what each command reads
 * and writes. */
#ifndef NETC_NETRUN_FILES_H
#define NETC_NETRUN_FILES_H

#include <stddef.h>

typedef struct NetrunOutput {
  const char *path;   /* NULL: not asked for */
  int stream;         /* a log written in place (may be /dev/stdout), not replaced whole */
  const char *may_be; /* the one input this output may be (a --checkpoint that is the --resume), or NULL */
} NetrunOutput;

/* ins: the command's input paths (NULL entries skipped), data_dir: an IDX
 * --data directory whose four files (and .gz forms) are inputs too, or NULL.
 * Prints the first problem as "netrun: error: ..." and returns
 * NETRUN_EXIT_USAGE, else 0. */
int netrun_files_check(const char *const *ins, size_t nins, const char *data_dir, const NetrunOutput *outs,
                       size_t nouts);

#endif
