/* netrun_plot.c - `netrun plot`: reads a training log (JSON lines, cJSON)
 * into series and draws them with cairo, loaded with dlopen
 * (netrun_plot.h gives the contract).
 *
 * The only static state is cairo's table and the reason it could not be
 * loaded, written once under pthread_once and read-only afterwards.  A
 * panel maps data to pixels with a linear Axis per direction whose range
 * is widened to "nice" tick steps (1, 2 or 5 times a power of ten). */
#include "netrun_plot.h"

#include "opts.h"
#include "rt_err.h"
#include "rt_file.h"

#include <cairo.h>
#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- cairo, loaded at run time --------------------------------------------- */

typedef struct CairoApi {
  cairo_surface_t *(*image_surface_create)(cairo_format_t, int, int);
  cairo_surface_t *(*image_surface_create_from_png)(const char *);
  int (*image_surface_get_width)(cairo_surface_t *);
  int (*image_surface_get_height)(cairo_surface_t *);
  int (*image_surface_get_stride)(cairo_surface_t *);
  unsigned char *(*image_surface_get_data)(cairo_surface_t *);
  cairo_status_t (*surface_status)(cairo_surface_t *);
  void (*surface_flush)(cairo_surface_t *);
  cairo_status_t (*surface_write_to_png)(cairo_surface_t *, const char *);
  void (*surface_destroy)(cairo_surface_t *);
  cairo_t *(*create)(cairo_surface_t *);
  void (*destroy)(cairo_t *);
  cairo_status_t (*status)(cairo_t *);
  const char *(*status_to_string)(cairo_status_t);
  void (*save)(cairo_t *);
  void (*restore)(cairo_t *);
  void (*set_source_rgba)(cairo_t *, double, double, double, double);
  void (*paint)(cairo_t *);
  void (*set_line_width)(cairo_t *, double);
  void (*set_dash)(cairo_t *, const double *, int, double);
  void (*new_path)(cairo_t *);
  void (*move_to)(cairo_t *, double, double);
  void (*line_to)(cairo_t *, double, double);
  void (*rectangle)(cairo_t *, double, double, double, double);
  void (*arc)(cairo_t *, double, double, double, double, double);
  void (*stroke)(cairo_t *);
  void (*fill)(cairo_t *);
  void (*clip)(cairo_t *);
  void (*rotate)(cairo_t *, double);
  void (*select_font_face)(cairo_t *, const char *, cairo_font_slant_t, cairo_font_weight_t);
  void (*set_font_size)(cairo_t *, double);
  void (*text_extents)(cairo_t *, const char *, cairo_text_extents_t *);
  void (*show_text)(cairo_t *, const char *);
} CairoApi;

static struct {
  pthread_once_t once;
  int ok;
  CairoApi api;
  char why[512];
} cairo = {PTHREAD_ONCE_INIT, 0, {0}, ""};

static int load_sym(void *lib, const char *name, void *slot, size_t slot_size) {
  void *p = dlsym(lib, name);
  if (!p || slot_size != sizeof p) {
    snprintf(cairo.why, sizeof cairo.why, "libcairo.so.2 has no %s (cairo too old?)", name);
    return 0;
  }
  memcpy(slot, &p, sizeof p); /* POSIX: object and function pointers agree */
  return 1;
}

#define LOAD(field) \
  if (!load_sym(lib, "cairo_" #field, &a->field, sizeof a->field)) return 0

static int load_table(void *lib, CairoApi *a) {
  LOAD(image_surface_create);
  LOAD(image_surface_create_from_png);
  LOAD(image_surface_get_width);
  LOAD(image_surface_get_height);
  LOAD(image_surface_get_stride);
  LOAD(image_surface_get_data);
  LOAD(surface_status);
  LOAD(surface_flush);
  LOAD(surface_write_to_png);
  LOAD(surface_destroy);
  LOAD(create);
  LOAD(destroy);
  LOAD(status);
  LOAD(status_to_string);
  LOAD(save);
  LOAD(restore);
  LOAD(set_source_rgba);
  LOAD(paint);
  LOAD(set_line_width);
  LOAD(set_dash);
  LOAD(new_path);
  LOAD(move_to);
  LOAD(line_to);
  LOAD(rectangle);
  LOAD(arc);
  LOAD(stroke);
  LOAD(fill);
  LOAD(clip);
  LOAD(rotate);
  LOAD(select_font_face);
  LOAD(set_font_size);
  LOAD(text_extents);
  LOAD(show_text);
  return 1;
}

static void load_cairo(void) {
  static NetcOpts o; /* read once, for the library's path only */
  opts_from_env(&o, NULL, 0);
  const char *path = *o.cairo ? o.cairo : "libcairo.so.2";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(cairo.why, sizeof cairo.why,
             "libcairo.so.2 is missing, so nothing can be drawn (%s); install "
             "Debian's libcairo2",
             e ? e : path);
    return;
  }
  cairo.ok = load_table(lib, &cairo.api);
  /* the library stays loaded for the life of the process, like the table */
}

int netrun_plot_cairo_ready(char *why, size_t len) {
  pthread_once(&cairo.once, load_cairo);
  if (!cairo.ok && why && len) snprintf(why, len, "%s", cairo.why);
  return cairo.ok ? 0 : -1;
}

int netrun_plot_read_png(const char *path, int *width, int *height, uint32_t **pixels, char *err, size_t errlen) {
  *pixels = NULL;
  if (netrun_plot_cairo_ready(err, errlen)) return -1;
  const CairoApi *c = &cairo.api;
  cairo_surface_t *s = c->image_surface_create_from_png(path);
  cairo_status_t st = c->surface_status(s);
  if (st != CAIRO_STATUS_SUCCESS) {
    c->surface_destroy(s);
    return rt_errf(err, errlen, "%s: cannot read the PNG: %s", path, c->status_to_string(st));
  }
  c->surface_flush(s);
  int w = c->image_surface_get_width(s), h = c->image_surface_get_height(s), stride = c->image_surface_get_stride(s);
  const unsigned char *data = c->image_surface_get_data(s);
  uint32_t *px = data ? malloc(sizeof *px * (size_t)w * (size_t)h + 1) : NULL;
  if (px)
    for (int y = 0; y < h; y++)
      memcpy(px + (size_t)y * (size_t)w, data + (size_t)y * (size_t)stride, sizeof *px * (size_t)w);
  c->surface_destroy(s);
  if (!px) return rt_errf(err, errlen, "%s: out of memory for a %dx%d image", path, w, h);
  *width = w, *height = h, *pixels = px;
  return 0;
}

/* --- the log ----------------------------------------------------------------- */

typedef struct Series {
  double *x, *y;
  int n, cap;
} Series;

typedef struct Log {
  Series loss;       /* step, loss */
  Series top1, top5; /* epoch, percent */
  int lines, epochs; /* non-blank lines; epoch lines */
} Log;

static int series_add(Series *s, double x, double y) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 256;
    double *nx = realloc(s->x, sizeof *nx * (size_t)cap);
    if (!nx) return -1;
    s->x = nx;
    double *ny = realloc(s->y, sizeof *ny * (size_t)cap);
    if (!ny) return -1;
    s->y = ny, s->cap = cap;
  }
  s->x[s->n] = x, s->y[s->n] = y, s->n++;
  return 0;
}

static void series_free(Series *s) {
  free(s->x);
  free(s->y);
}

static void log_free(Log *lg) {
  series_free(&lg->loss);
  series_free(&lg->top1);
  series_free(&lg->top5);
}

/* The number called key in o: 1 found, 0 absent, -1 present but not a finite number. */
static int number(const cJSON *o, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v) return 0;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return -1;
  *out = v->valuedouble;
  return 1;
}

/* One line's object into lg: "file:line: what" in err on failure. */
static int take_line(Log *lg, const cJSON *o, const char *path, int line, char *err, size_t errlen) {
  double step, loss, epoch, acc, top5;
  int has_step = number(o, "step", &step);
  if (has_step < 0) return rt_errf(err, errlen, "%s:%d: \"step\" is not a number", path, line);
  if (has_step) {
    if (number(o, "loss", &loss) != 1)
      return rt_errf(err, errlen, "%s:%d: a step line needs a finite number \"loss\"", path, line);
    return series_add(&lg->loss, step, loss) ? rt_errf(err, errlen, "out of memory reading %s", path) : 0;
  }
  int has_epoch = number(o, "epoch", &epoch);
  if (has_epoch < 0) return rt_errf(err, errlen, "%s:%d: \"epoch\" is not a number", path, line);
  if (!has_epoch) return 0; /* neither a step nor an epoch line: a kind this reader does not know */
  lg->epochs++;
  int has_acc = number(o, "test_accuracy", &acc), has_top5 = number(o, "test_top5", &top5);
  if (has_acc < 0 || has_top5 < 0)
    return rt_errf(err, errlen, "%s:%d: \"%s\" is not a number", path, line,
                   has_acc < 0 ? "test_accuracy" : "test_top5");
  /* accuracy -1: the run had no test set */
  if ((has_acc && acc >= 0 && series_add(&lg->top1, epoch, 100 * acc)) ||
      (has_top5 && top5 >= 0 && series_add(&lg->top5, epoch, 100 * top5)))
    return rt_errf(err, errlen, "out of memory reading %s", path);
  return 0;
}

static int log_read(Log *lg, const char *path, char *err, size_t errlen) {
  char why[128]; /* a regular file only, opened without blocking (rt_file.h) */
  FILE *f = rt_file_fopen_regular(path, why, sizeof why);
  if (!f)
    return rt_errf(err, errlen, "%s: cannot open the log: %s", path,
                   why + (strncmp(why, "cannot open: ", 13) == 0 ? 13 : 0));
  char *buf = NULL;
  size_t cap = 0;
  ssize_t len;
  int line = 0, rc = 0;
  while (!rc && (len = getline(&buf, &cap, f)) >= 0) {
    line++;
    if (strspn(buf, " \t\r\n") == (size_t)len) continue;
    lg->lines++;
    cJSON *o = cJSON_ParseWithLength(buf, (size_t)len);
    if ((!o || !cJSON_IsObject(o)) && buf[len - 1] != '\n' && feof(f)) {
      /* a last line without its newline: a run killed while writing it (netrun flushes every
       * record, so only this one can be torn) -- skipped, with a warning */
      fprintf(stderr, "netrun: warning: %s:%d: the last line is torn (no newline, not JSON); skipped\n", path, line);
      lg->lines--;
    } else if (!o || !cJSON_IsObject(o))
      rc = rt_errf(err, errlen, "%s:%d: not a JSON object: %.60s", path, line, buf);
    else
      rc = take_line(lg, o, path, line, err, errlen);
    cJSON_Delete(o);
  }
  if (!rc && ferror(f)) rc = rt_errf(err, errlen, "%s: read error after line %d", path, line);
  free(buf);
  fclose(f);
  if (!rc && lg->lines == 0) rc = rt_errf(err, errlen, "%s: the log is empty", path);
  if (!rc && lg->loss.n == 0)
    rc =
        rt_errf(err, errlen, "%s: no step lines (objects with \"step\" and \"loss\") in its %d lines", path, lg->lines);
  return rc;
}

/* --- drawing ------------------------------------------------------------------ */

typedef struct Axis {
  double lo, hi, tick; /* data range, widened to whole ticks */
  double p0, p1;       /* pixels of lo and hi */
} Axis;

typedef struct Rgb {
  double r, g, b;
} Rgb;

static const Rgb INK = {0.15, 0.15, 0.15}, GRID = {0.88, 0.88, 0.88};
static const Rgb LOSS = {0.12, 0.38, 0.80}, TOP1 = {0.85, 0.33, 0.05}, TOP5 = {0.20, 0.60, 0.25};

static double nice_step(double span, int most) {
  double raw = span / most, p = pow(10, floor(log10(raw)));
  double m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* Widens [lo, hi] to whole ticks (about `most` of them). */
static Axis axis_make(double lo, double hi, int most, double p0, double p1) {
  if (!(hi > lo)) {
    double pad = fabs(lo) > 0 ? fabs(lo) * 0.05 : 0.5;
    lo -= pad, hi += pad;
  }
  double t = nice_step(hi - lo, most);
  return (Axis){floor(lo / t + 1e-9) * t, ceil(hi / t - 1e-9) * t, t, p0, p1};
}

static double axis_px(const Axis *a, double v) { return a->p0 + (v - a->lo) / (a->hi - a->lo) * (a->p1 - a->p0); }

static void ink(cairo_t *cr, Rgb c, double alpha) { cairo.api.set_source_rgba(cr, c.r, c.g, c.b, alpha); }

/* Text at (x, y); ax, ay: 0 left/top, 0.5 centre, 1 right/bottom of the text. */
static void text(cairo_t *cr, double x, double y, double ax, double ay, const char *s) {
  const CairoApi *c = &cairo.api;
  cairo_text_extents_t e;
  c->text_extents(cr, s, &e);
  c->move_to(cr, x - e.x_bearing - ax * e.width, y - e.y_bearing - ay * e.height);
  c->show_text(cr, s);
}

static void tick_label(char *buf, size_t len, double v, double tick) {
  if (fabs(v) < tick * 1e-6) v = 0;
  snprintf(buf, len, "%.*f", tick >= 1 ? 0 : (int)ceil(-log10(tick) - 1e-9), v);
}

/* Grid, ticks, labels and the frame of a panel at (x, y, w, h). */
static void draw_axes(cairo_t *cr, const Axis *ax, const Axis *ay, double x, double y, double w, double h,
                      const char *xlabel, const char *ylabel, const char *title) {
  const CairoApi *c = &cairo.api;
  char buf[64];
  c->set_line_width(cr, 1);
  c->set_font_size(cr, 13);
  for (double v = ax->lo; v <= ax->hi + ax->tick * 1e-6; v += ax->tick) {
    double px = floor(axis_px(ax, v)) + 0.5;
    ink(cr, GRID, 1);
    c->move_to(cr, px, y), c->line_to(cr, px, y + h), c->stroke(cr);
    ink(cr, INK, 1);
    c->move_to(cr, px, y + h), c->line_to(cr, px, y + h + 5), c->stroke(cr);
    tick_label(buf, sizeof buf, v, ax->tick);
    text(cr, px, y + h + 9, 0.5, 0, buf);
  }
  for (double v = ay->lo; v <= ay->hi + ay->tick * 1e-6; v += ay->tick) {
    double py = floor(axis_px(ay, v)) + 0.5;
    ink(cr, GRID, 1);
    c->move_to(cr, x, py), c->line_to(cr, x + w, py), c->stroke(cr);
    ink(cr, INK, 1);
    c->move_to(cr, x - 5, py), c->line_to(cr, x, py), c->stroke(cr);
    tick_label(buf, sizeof buf, v, ay->tick);
    text(cr, x - 9, py, 1, 0.5, buf);
  }
  ink(cr, INK, 1);
  c->rectangle(cr, x + 0.5, y + 0.5, w, h), c->stroke(cr);
  c->set_font_size(cr, 14);
  text(cr, x + w / 2, y + h + 32, 0.5, 0, xlabel);
  c->save(cr);
  c->move_to(cr, 0, 0);
  c->rotate(cr, -M_PI / 2);
  text(cr, -(y + h / 2), x - 62, 0.5, 0, ylabel); /* rotated: (x, y) is (-y, x) */
  c->restore(cr);
  c->select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  c->set_font_size(cr, 15);
  text(cr, x + w / 2, y - 10, 0.5, 1, title);
  c->select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
}

static void draw_line(cairo_t *cr, const Series *s, const double *y, const Axis *ax, const Axis *ay, Rgb col,
                      double alpha, double width) {
  const CairoApi *c = &cairo.api;
  c->new_path(cr);
  for (int i = 0; i < s->n; i++) {
    double px = axis_px(ax, s->x[i]), py = axis_px(ay, y[i]);
    if (i)
      c->line_to(cr, px, py);
    else
      c->move_to(cr, px, py);
  }
  ink(cr, col, alpha);
  c->set_line_width(cr, width);
  c->stroke(cr);
}

static void draw_marks(cairo_t *cr, const Series *s, const Axis *ax, const Axis *ay, Rgb col) {
  const CairoApi *c = &cairo.api;
  ink(cr, col, 1);
  for (int i = 0; i < s->n; i++) {
    c->new_path(cr);
    c->arc(cr, axis_px(ax, s->x[i]), axis_px(ay, s->y[i]), 4, 0, 2 * M_PI);
    c->fill(cr);
  }
}

static void legend(cairo_t *cr, double x, double y, const char *const *names, const Rgb *cols, int n) {
  const CairoApi *c = &cairo.api;
  c->set_font_size(cr, 13);
  for (int i = 0; i < n; i++) {
    ink(cr, cols[i], 1);
    c->set_line_width(cr, 2.5);
    c->move_to(cr, x, y + 18 * i), c->line_to(cr, x + 24, y + 18 * i), c->stroke(cr);
    ink(cr, INK, 1);
    text(cr, x + 30, y + 18 * i, 0, 0.5, names[i]);
  }
}

static void range(const Series *s, double *lo, double *hi, int use_x) {
  for (int i = 0; i < s->n; i++) {
    double v = use_x ? s->x[i] : s->y[i];
    if (v < *lo) *lo = v;
    if (v > *hi) *hi = v;
  }
}

/* Debiased exponential moving average, heavier for longer series. */
static void smooth(const Series *s, double *out) {
  double beta = s->n < 40 ? 0 : 1 - 40.0 / s->n, acc = 0, w = 0;
  if (beta > 0.98) beta = 0.98;
  for (int i = 0; i < s->n; i++) {
    acc = beta * acc + (1 - beta) * s->y[i];
    w = beta * w + (1 - beta);
    out[i] = acc / w;
  }
}

enum { PAD_L = 90, PAD_R = 30, PAD_T = 80, PAD_B = 70 };

static void panel_loss(cairo_t *cr, const Log *lg, double x0, double w0, const double *smoothed) {
  double x = x0 + PAD_L, y = PAD_T, w = w0 - PAD_L - PAD_R, h = NETRUN_PLOT_HEIGHT - PAD_T - PAD_B;
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  range(&lg->loss, &xlo, &xhi, 1);
  range(&lg->loss, &ylo, &yhi, 0);
  Axis ax = axis_make(xlo, xhi, 8, x, x + w), ay = axis_make(ylo < 0 ? ylo : 0, yhi, 6, y + h, y);
  draw_axes(cr, &ax, &ay, x, y, w, h, "step", "training loss", "Training loss");
  cairo.api.save(cr);
  cairo.api.rectangle(cr, x, y, w, h);
  cairo.api.clip(cr);
  draw_line(cr, &lg->loss, lg->loss.y, &ax, &ay, LOSS, 0.3, 1);
  draw_line(cr, &lg->loss, smoothed, &ax, &ay, LOSS, 1, 2.5);
  if (lg->loss.n == 1) draw_marks(cr, &lg->loss, &ax, &ay, LOSS);
  cairo.api.restore(cr);
  const char *names[] = {"raw", "smoothed"};
  const Rgb cols[] = {{0.6, 0.74, 0.93}, LOSS};
  legend(cr, x + w - 120, y + 18, names, cols, 2);
}

static void panel_accuracy(cairo_t *cr, const Log *lg, double x0, double w0) {
  double x = x0 + PAD_L, y = PAD_T, w = w0 - PAD_L - PAD_R, h = NETRUN_PLOT_HEIGHT - PAD_T - PAD_B;
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  range(&lg->top1, &xlo, &xhi, 1);
  range(&lg->top5, &xlo, &xhi, 1);
  range(&lg->top1, &ylo, &yhi, 0);
  range(&lg->top5, &ylo, &yhi, 0);
  if (lg->top1.n + lg->top5.n == 0) xlo = 1, xhi = lg->epochs > 1 ? lg->epochs : 2, ylo = 0, yhi = 100;
  if (xhi - xlo < 1) xlo -= 0.5, xhi += 0.5;
  Axis ax = axis_make(xlo, xhi, 8, x, x + w), ay = axis_make(ylo, yhi, 6, y + h, y);
  if (ax.tick < 1) ax = axis_make(xlo, xhi, (int)(xhi - xlo), x, x + w); /* whole epochs */
  if (ay.lo < 0 && ylo >= 0) ay.lo = 0;
  if (ay.hi > 100 && yhi <= 100) ay.hi = 100;
  draw_axes(cr, &ax, &ay, x, y, w, h, "epoch", "test accuracy (%)", "Test accuracy");
  if (lg->top1.n + lg->top5.n == 0) {
    ink(cr, INK, 1);
    cairo.api.set_font_size(cr, 15);
    text(cr, x + w / 2, y + h / 2, 0.5, 0.5, "no test accuracy in the log");
    return;
  }
  const Series *s[] = {&lg->top1, &lg->top5};
  const Rgb cols[] = {TOP1, TOP5};
  const char *names[] = {"top-1", "top-5"};
  cairo.api.save(cr);
  cairo.api.rectangle(cr, x, y, w, h);
  cairo.api.clip(cr);
  for (int i = 0; i < 2; i++) {
    if (!s[i]->n) continue;
    draw_line(cr, s[i], s[i]->y, &ax, &ay, cols[i], 1, 2.5);
    draw_marks(cr, s[i], &ax, &ay, cols[i]);
  }
  cairo.api.restore(cr);
  legend(cr, x + w - 100, y + h - 18 - 18 * (lg->top5.n > 0), names, cols, lg->top5.n > 0 ? 2 : 1);
}

static void title(cairo_t *cr, const char *log_path, const Log *lg) {
  const char *base = strrchr(log_path, '/');
  char buf[512];
  double last = lg->top1.n ? lg->top1.y[lg->top1.n - 1] : -1;
  int n = snprintf(buf, sizeof buf, "%s: %d step%s, %d epoch%s", base ? base + 1 : log_path, lg->loss.n,
                   lg->loss.n == 1 ? "" : "s", lg->epochs, lg->epochs == 1 ? "" : "s");
  if (last >= 0 && n > 0 && (size_t)n < sizeof buf)
    snprintf(buf + n, sizeof buf - (size_t)n, ", final test accuracy %.2f%%", last);
  cairo.api.select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo.api.set_font_size(cr, 18);
  ink(cr, INK, 1);
  text(cr, NETRUN_PLOT_WIDTH / 2.0, 18, 0.5, 0, buf);
  cairo.api.select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
}

static int draw(const Log *lg, const char *log_path, const char *png_path, char *err, size_t errlen) {
  const CairoApi *c = &cairo.api;
  double *smoothed = malloc(sizeof *smoothed * (size_t)lg->loss.n);
  if (!smoothed) return rt_errf(err, errlen, "out of memory drawing %s", png_path);
  smooth(&lg->loss, smoothed);
  cairo_surface_t *s = c->image_surface_create(CAIRO_FORMAT_ARGB32, NETRUN_PLOT_WIDTH, NETRUN_PLOT_HEIGHT);
  cairo_t *cr = c->create(s);
  c->set_source_rgba(cr, 1, 1, 1, 1);
  c->paint(cr);
  title(cr, log_path, lg);
  panel_loss(cr, lg, 0, NETRUN_PLOT_WIDTH / 2.0, smoothed);
  panel_accuracy(cr, lg, NETRUN_PLOT_WIDTH / 2.0, NETRUN_PLOT_WIDTH / 2.0);
  cairo_status_t st = c->status(cr);
  if (st == CAIRO_STATUS_SUCCESS) st = c->surface_write_to_png(s, png_path);
  c->destroy(cr);
  c->surface_destroy(s);
  free(smoothed);
  if (st != CAIRO_STATUS_SUCCESS)
    return rt_errf(err, errlen, "%s: cannot write the PNG: %s", png_path, c->status_to_string(st));
  return 0;
}

int netrun_plot(const char *log_path, const char *png_path, char *err, size_t errlen) {
  if (!log_path || !png_path)
    return rt_errf(err, errlen, "netrun_plot: %s is NULL", log_path ? "png_path" : "log_path");
  if (rt_file_same(png_path, log_path))
    return rt_errf(err, errlen, "%s: is the same file as the input %s (refusing to overwrite it)", png_path, log_path);
  Log lg = {0};
  int rc = log_read(&lg, log_path, err, errlen);
  if (!rc) rc = netrun_plot_cairo_ready(err, errlen);
  if (!rc) rc = draw(&lg, log_path, png_path, err, errlen);
  log_free(&lg);
  return rc;
}

int netrun_plot_main(int argc, char **argv) {
  static const char USAGE[] = "usage: netrun plot LOG.jsonl OUT.png\n"
                              "draws the training loss against the step and the test accuracy against the epoch\n"
                              "of a `netrun train --log` log into a PNG\n";
  if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    fputs(USAGE, stdout);
    return 0;
  }
  if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-') {
    fputs(USAGE, stderr);
    return 2;
  }
  char err[1024];
  if (netrun_plot(argv[1], argv[2], err, sizeof err)) {
    fprintf(stderr, "netrun: error: %s\n", err);
    return 1;
  }
  printf("netrun: plot of %s -> %s\n", argv[1], argv[2]);
  return 0;
}
