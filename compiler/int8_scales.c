/* int8_scales.c - the calibrated INT8 scales file (see int8_scales.h). */
#include "int8_scales.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"

enum { MAX_LAYERS = 1 << 20 };

int int8_scales_read(Arena *a, Diag *d, const char *path, Int8Scales *out) {
  memset(out, 0, sizeof *out);
  size_t len;
  char *text = compile_read_file(path, &len, d);
  if (!text) return -1;
  SrcLoc none = {0};
  int cap = 0, rc = 0, line = 0;
  for (char *s = text; *s && !rc;) {
    char *end = strchr(s, '\n');
    if (end) *end = 0;
    line++;
    char *p = s + strspn(s, " \t\r");
    if (*p && *p != '#') {
      char name[512];
      double v;
      int used = 0;
      if (sscanf(p, "%511s %lf %n", name, &v, &used) != 2 || p[used + strspn(p + used, " \t\r")]) {
        diag_error(d, none, "%s:%d: not `LAYER SCALE`: '%.80s'", path, line, p);
        rc = -1;
      } else if (!isfinite(v) || !(v > 0) || v > 1e30) {
        diag_error(d, none, "%s:%d: layer '%s': the scale %g is not a positive number", path, line, name, v);
        rc = -1;
      } else if (int8_scales_find(out, name) > 0) {
        diag_error(d, none, "%s:%d: layer '%s' is given twice", path, line, name);
        rc = -1;
      } else if (out->n >= MAX_LAYERS) {
        diag_error(d, none, "%s:%d: more than %d layers", path, line, MAX_LAYERS);
        rc = -1;
      } else {
        if (out->n == cap) {
          int nc = cap ? 2 * cap : 64;
          const char **nl = arena_alloc(a, sizeof *nl * (size_t)nc);
          double *ns = arena_alloc(a, sizeof *ns * (size_t)nc);
          if (!nl || !ns) {
            diag_error(d, none, "%s: out of memory", path);
            rc = -1;
            break;
          }
          if (out->n)
            memcpy(nl, out->layer, sizeof *nl * (size_t)out->n), memcpy(ns, out->scale, sizeof *ns * (size_t)out->n);
          out->layer = nl, out->scale = ns, cap = nc;
        }
        char *copy = arena_alloc(a, strlen(name) + 1);
        if (!copy) {
          diag_error(d, none, "%s: out of memory", path);
          rc = -1;
          break;
        }
        strcpy(copy, name);
        out->layer[out->n] = copy, out->scale[out->n] = v, out->n++;
      }
    }
    s = end ? end + 1 : s + strlen(s);
  }
  free(text);
  return rc;
}

Int8Scales *int8_scales_every(Arena *a, const IrGraph *g, double step) {
  Int8Scales *t = arena_alloc(a, sizeof *t);
  const char **layer = arena_alloc(a, sizeof *layer * ((size_t)g->nnode + 1));
  double *scale = arena_alloc(a, sizeof *scale * ((size_t)g->nnode + 1));
  if (!t || !layer || !scale) return NULL;
  *t = (Int8Scales){.layer = layer, .scale = scale};
  for (int n = 0; n < g->nnode; n++) {
    const IrAttr *p = ir_attr_find(&g->node[n], "precision");
    if (p && p->i[0] == IR_DT_I8 && g->node[n].name) layer[t->n] = g->node[n].name, scale[t->n++] = step;
  }
  return t;
}

double int8_scales_find(const Int8Scales *t, const char *layer) {
  if (!t || !layer) return 0;
  for (int i = 0; i < t->n; i++)
    if (strcmp(t->layer[i], layer) == 0) return t->scale[i];
  return 0;
}

int int8_scales_write(FILE *f, const char *comment, const char *const *layer, const double *scale, int n) {
  fprintf(f, "# netc int8 scales: LAYER SCALE (the input's step: x -> round(x / SCALE))\n");
  if (comment) fprintf(f, "# %s\n", comment);
  for (int i = 0; i < n; i++) fprintf(f, "%s %.9g\n", layer[i], scale[i]);
  return ferror(f) ? -1 : 0;
}
