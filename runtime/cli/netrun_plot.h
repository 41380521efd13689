/* netrun_plot.h - `netrun plot LOG.jsonl OUT.png`: the loss and accuracy
 * curves of a `netrun train --log` log as a PNG.
 *
 * The log has one JSON object a line: step lines {"step", "loss", ...} and
 * epoch lines {"epoch", "test_accuracy", "test_top5"?, ...} without "step";
 * other fields and other objects are ignored, blank lines skipped.  The
 * picture (NETRUN_PLOT_WIDTH x NETRUN_PLOT_HEIGHT) has a title and two
 * panels side by side: the training loss against the step (raw, light,
 * and smoothed) on the left half, the test accuracy in percent against the
 * epoch (top-1, and top-5 where the log has it) on the right half.
 *
 * cairo draws it, loaded with dlopen("libcairo.so.2") on first use
 * ($NETC_CAIRO_LIB names another file, for tests), so netrun starts on
 * machines without it; only plotting then fails, saying so. */
#ifndef NETC_NETRUN_PLOT_H
#define NETC_NETRUN_PLOT_H

#include <stddef.h>
#include <stdint.h>

enum { NETRUN_PLOT_WIDTH = 1280, NETRUN_PLOT_HEIGHT = 520 };

/* Draws log_path into png_path.  0 on success; -1 with "file:line: what"
 * (or "file: what", or why cairo is missing) in err. */
int netrun_plot(const char *log_path, const char *png_path, char *err, size_t errlen);

/* The command: argv[0] is "plot", then LOG.jsonl OUT.png.  Returns the exit
 * status: 0, 1 (the log or the PNG failed; message on stderr), 2 (usage). */
int netrun_plot_main(int argc, char **argv);

/* 0 when libcairo.so.2 is loaded; else -1 with why. */
int netrun_plot_cairo_ready(char *why, size_t len);

/* Reads a PNG with cairo into *pixels (width*height ARGB32 words,
 * 0xAARRGGBB, premultiplied; free() them).  0, or -1 with err. */
int netrun_plot_read_png(const char *path, int *width, int *height, uint32_t **pixels, char *err, size_t errlen);

#endif
