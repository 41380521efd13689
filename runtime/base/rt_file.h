/* rt_file.h - the one way the runtime opens a file it reads, and the checks
 * that keep an output from landing on an input.
 *
 * Only regular files are read as tensors, checkpoints, weights, models,
 * inputs or data: a directory, device (/dev/zero), FIFO or socket is
 * refused as "not a regular file (a FIFO)".  The open never blocks: it is
 * made with O_NONBLOCK (a FIFO with no writer returns at once), the kind is
 * taken by fstat on the descriptor, and O_NONBLOCK is cleared only on a
 * regular file.  Messages go into the caller's err buffer without the path;
 * the caller prefixes it ("PATH: not a regular file (a directory)"). */
#ifndef NETC_RT_FILE_H
#define NETC_RT_FILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

/* "a directory", "a FIFO", "a character device", ... for a file's mode. */
const char *rt_file_kind(mode_t mode);
/* PATH opened read-only when it is a regular file: the descriptor, or -1
 * with the reason in err ("cannot open: ...", "not a regular file (...)").
 * When st is not NULL it receives the file's fstat, for a bounded read. */
int rt_file_open_regular(const char *path, struct stat *st, char *err, size_t errlen);
/* The same as a FILE* in binary read mode; NULL with the reason. */
FILE *rt_file_fopen_regular(const char *path, char *err, size_t errlen);
/* 1 when both paths name one existing file (same st_dev and st_ino), or,
 * when neither exists yet, the same name in one directory (two outputs). */
int rt_file_same(const char *a, const char *b);
/* 0 when PATH can be written, checked before the work that writes it:
 * replace (an output written whole to a temporary and renamed over PATH):
 * PATH, if it exists, is a regular file (or a symlink to one), and its
 * directory exists and is writable; a stream (a log appended or truncated in
 * place): PATH, if it exists, is writable (a device such as /dev/stdout is
 * fine), else its directory exists and is writable.  -1 with "PATH: ..." in
 * err otherwise. */
int rt_file_check_writable(const char *path, int replace, char *err, size_t errlen);

#endif
