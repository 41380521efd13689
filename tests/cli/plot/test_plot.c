/* test_plot.c - `netrun plot` (runtime/netrun_plot.c): a generated
 * training log becomes a PNG of the expected size whose panels hold their
 * curves (pixels of each series' colour counted in each half, read back
 * with cairo through the plot's own dlopen table); malformed logs fail with
 * exit status 1 and the file and line named; usage errors exit 2.
 *
 *   test_plot WORKDIR            everything above (77 without libcairo.so.2)
 *   test_plot WORKDIR nocairo    run with NETC_CAIRO_LIB naming a missing
 *                                file: plotting must say libcairo.so.2 is missing */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "netrun_plot.h"

static char work[2048];

static const char *at(const char *rel) {
  static char buf[8][4096];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", work, rel);
  return buf[k];
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL, "cannot write %s", path);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* A log like `netrun train --log` writes: steps_per_epoch step lines per
 * epoch, an epoch line after each (with top-5 when top5), unknown fields,
 * an unknown kind of line and a blank line. */
static void write_log(const char *path, int epochs, int steps_per_epoch, int with_test, int top5) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL, "cannot write %s", path);
  if (!f) return;
  unsigned x = 12345;
  int step = 0;
  for (int e = 1; e <= epochs; e++) {
    for (int i = 0; i < steps_per_epoch; i++) {
      step++;
      x = x * 1103515245u + 12345u;
      double noise = (double)(x >> 16 & 1023) / 1023.0 - 0.5;
      fprintf(f, "{\"step\": %d, \"epoch\": %d, \"loss\": %.6g, \"lr\": 0.05, \"images_per_s\": 812.5, \"new\": [1]}\n",
              step, e, 2.3 * exp(-step / 80.0) + 0.3 + 0.2 * noise);
    }
    if (e == 2) fprintf(f, "{\"event\": \"checkpoint\", \"path\": \"run.ckpt\"}\n\n");
    fprintf(f, "{\"epoch\": %d, \"steps\": %d, \"loss_mean\": 0.7, \"test_accuracy\": %.4f", e, steps_per_epoch,
            with_test ? 0.6 + 0.05 * e : -1.0);
    if (top5) fprintf(f, ", \"test_top5\": %.4f", 0.85 + 0.02 * e);
    fprintf(f, ", \"images_per_s\": 900}\n");
  }
  fclose(f);
}

typedef struct Counts {
  long blue, orange, green; /* loss, top-1, top-5 */
} Counts;

/* Pixels of each series' colour in columns [x0, x1). */
static Counts count(const uint32_t *px, int w, int h, int x0, int x1) {
  Counts c = {0, 0, 0};
  for (int y = 0; y < h; y++)
    for (int x = x0; x < x1; x++) {
      uint32_t p = px[(size_t)y * (size_t)w + (size_t)x];
      int r = p >> 16 & 255, g = p >> 8 & 255, b = p & 255;
      c.blue += b > r + 60 && b > g + 30;
      c.orange += r > g + 60 && r > b + 100;
      c.green += g > r + 50 && g > b + 50;
    }
  return c;
}

static int png_signature(const char *path) {
  static const unsigned char SIG[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  unsigned char got[8];
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  size_t n = fread(got, 1, 8, f);
  fclose(f);
  return n == 8 && memcmp(got, SIG, 8) == 0;
}

/* Plots log into png and checks the picture; returns the colour counts of
 * the left and right panels. */
static void plot_ok(const char *log, const char *png, Counts *left, Counts *right) {
  char err[1024] = "";
  remove(png);
  CHECK(netrun_plot(log, png, err, sizeof err) == 0, "plot %s: %s", log, err);
  CHECK(png_signature(png), "%s is not a PNG", png);
  int w = 0, h = 0;
  uint32_t *px = NULL;
  CHECK(netrun_plot_read_png(png, &w, &h, &px, err, sizeof err) == 0, "read back: %s", err);
  CHECK(w == NETRUN_PLOT_WIDTH && h == NETRUN_PLOT_HEIGHT, "size %dx%d", w, h);
  if (px && w == NETRUN_PLOT_WIDTH && h == NETRUN_PLOT_HEIGHT) {
    *left = count(px, w, h, 0, w / 2);
    *right = count(px, w, h, w / 2, w);
    long white = 0, dark = 0;
    for (long i = 0; i < (long)w * h; i++) {
      white += (px[i] & 0xffffff) == 0xffffff;
      dark += (px[i] >> 16 & 255) < 80 && (px[i] >> 8 & 255) < 80 && (px[i] & 255) < 80;
    }
    CHECK(white > (long)w * h / 2, "a white background (%ld of %ld pixels)", white, (long)w * h);
    CHECK(dark > 2000, "axes, ticks and text in dark ink (%ld pixels)", dark);
  }
  free(px);
}

/* A log that must fail: exit 1 from the command, and `want` in the message. */
static void plot_fails(const char *name, const char *text, const char *want) {
  const char *log = at(name);
  if (text) write_file(log, text);
  char err[1024] = "";
  CHECK(netrun_plot(log, at("bad.png"), err, sizeof err) == -1, "%s must fail", name);
  CHECK(strstr(err, want) != NULL, "%s: message '%s' lacks '%s'", name, err, want);
  char *argv[] = {"plot", (char *)log, (char *)at("bad.png"), NULL};
  CHECK(netrun_plot_main(3, argv) == 1, "netrun plot %s must exit 1", name);
}

static int run_all(void) {
  char why[512];
  if (netrun_plot_cairo_ready(why, sizeof why)) return check_skip(why);

  Counts l, r;
  write_log(at("run.jsonl"), 6, 50, 1, 1);
  plot_ok(at("run.jsonl"), at("run.png"), &l, &r);
  CHECK(l.blue > 800, "the loss panel holds the loss curves (%ld blue pixels)", l.blue);
  CHECK(r.orange > 300 && r.green > 300, "the accuracy panel holds top-1 and top-5 (%ld orange, %ld green)", r.orange,
        r.green);
  CHECK(l.orange == 0 && l.green == 0 && r.blue == 0, "series in the wrong panel (left %ld/%ld, right %ld)", l.orange,
        l.green, r.blue);

  /* top-1 only; one epoch (a single point) */
  write_log(at("one.jsonl"), 1, 30, 1, 0);
  plot_ok(at("one.jsonl"), at("one.png"), &l, &r);
  CHECK(l.blue > 300 && r.orange > 20 && r.green == 0, "one epoch: %ld blue, %ld orange, %ld green", l.blue, r.orange,
        r.green);
  /* no test set (accuracy -1): the accuracy panel says so and has no curve */
  write_log(at("notest.jsonl"), 3, 20, 0, 0);
  plot_ok(at("notest.jsonl"), at("notest.png"), &l, &r);
  CHECK(l.blue > 300 && r.orange == 0 && r.green == 0, "no test set: %ld blue, %ld orange", l.blue, r.orange);
  /* a log that stops within the first epoch: steps only */
  write_file(at("steps.jsonl"), "{\"step\": 1, \"loss\": 2.3}\n{\"step\": 2, \"loss\": 2.1}\n");
  plot_ok(at("steps.jsonl"), at("steps.png"), &l, &r);
  CHECK(l.blue > 100, "two steps: %ld blue pixels", l.blue);
  /* a run killed while writing its last record: that torn line is skipped (a warning), the rest drawn */
  write_file(at("torn.jsonl"), "{\"step\": 1, \"loss\": 2.3}\n{\"step\": 2, \"loss\": 2.1}\n{\"step\": 3, \"lo");
  plot_ok(at("torn.jsonl"), at("torn.png"), &l, &r);
  CHECK(l.blue > 100, "torn last line: %ld blue pixels", l.blue);
  plot_fails("tornmid.jsonl", "{\"step\": 1, \"loss\": 2.3}\n{\"step\": 2, \"lo\n{\"step\": 3, \"loss\": 2.1}",
             "tornmid.jsonl:2: not a JSON object");

  char *ok[] = {"plot", (char *)at("run.jsonl"), (char *)at("cli.png"), NULL};
  CHECK(netrun_plot_main(3, ok) == 0 && png_signature(at("cli.png")), "netrun plot LOG OUT");

  plot_fails("bad3.jsonl", "{\"step\": 1, \"loss\": 2.3}\n{\"step\": 2, \"loss\": 2.2}\n{\"step\": 3, \"loss\": \n",
             "bad3.jsonl:3: not a JSON object");
  plot_fails("empty.jsonl", "", "empty.jsonl: the log is empty");
  plot_fails("blank.jsonl", "\n  \n", "blank.jsonl: the log is empty");
  plot_fails("nosteps.jsonl", "{\"epoch\": 1, \"test_accuracy\": 0.5}\n{\"epoch\": 2, \"test_accuracy\": 0.6}\n",
             "nosteps.jsonl: no step lines");
  plot_fails("noloss.jsonl", "{\"step\": 1, \"loss\": 2.3}\n{\"step\": 2, \"lr\": 0.1}\n",
             "noloss.jsonl:2: a step line");
  plot_fails("strloss.jsonl", "{\"step\": 1, \"loss\": \"2.3\"}\n", "strloss.jsonl:1:");
  plot_fails("array.jsonl", "{\"step\": 1, \"loss\": 2.3}\n[1, 2]\n", "array.jsonl:2: not a JSON object");
  plot_fails("badacc.jsonl", "{\"step\": 1, \"loss\": 2.3}\n{\"epoch\": 1, \"test_accuracy\": null}\n",
             "badacc.jsonl:2: \"test_accuracy\" is not a number");
  plot_fails("missing.jsonl", NULL, "missing.jsonl: cannot open the log");

  char err[1024] = "";
  CHECK(netrun_plot(at("run.jsonl"), at("no-dir/out.png"), err, sizeof err) == -1 && strstr(err, "no-dir/out.png"),
        "an unwritable PNG names it: %s", err);
  char *none[] = {"plot", NULL}, *one[] = {"plot", (char *)at("run.jsonl"), NULL};
  char *three[] = {"plot", (char *)at("run.jsonl"), (char *)at("x.png"), "extra", NULL};
  char *opt[] = {"plot", "--bogus", (char *)at("x.png"), NULL};
  CHECK(netrun_plot_main(1, none) == 2 && netrun_plot_main(2, one) == 2 && netrun_plot_main(4, three) == 2 &&
            netrun_plot_main(3, opt) == 2,
        "usage errors exit 2");
  return check_report();
}

/* NETC_CAIRO_LIB names a missing library: the log still reads, the plot fails clearly. */
static int run_nocairo(void) {
  write_log(at("nc.jsonl"), 2, 10, 1, 0);
  char err[1024] = "";
  CHECK(netrun_plot(at("nc.jsonl"), at("nc.png"), err, sizeof err) == -1, "plot without cairo must fail");
  CHECK(strstr(err, "libcairo.so.2 is missing"), "message: %s", err);
  struct stat sb;
  CHECK(stat(at("nc.png"), &sb) != 0, "no PNG without cairo");
  char *argv[] = {"plot", (char *)at("nc.jsonl"), (char *)at("nc.png"), NULL};
  CHECK(netrun_plot_main(3, argv) == 1, "exit 1 without cairo");
  return check_report();
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "nocairo") != 0)) {
    fprintf(stderr, "usage: test_plot WORKDIR [nocairo]\n");
    return 2;
  }
  snprintf(work, sizeof work, "%s", argv[1]);
  mkdir(work, 0755);
  return argc == 3 ? run_nocairo() : run_all();
}
