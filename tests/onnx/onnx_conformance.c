/* onnx_conformance.c - runs ONNX's node conformance tests on netc's plain-C
 * reference kernels (runtime/rt_ref.h).
 *
 * Usage: onnx_conformance [--perturb] [NODE_DIR]
 *        (NODE_DIR defaults to Debian's libonnx-testdata)
 *
 * Each NODE_DIR/<test>/model.onnx whose graph is a single node of an op in
 * ONNX_OPS is a case; every test_data_set_K under it is fed through the op's
 * mapper and each graph output is compared with output_K.pb: float values
 * within |got - want| <= 1e-5 + 1e-4 * |want| (NaN matches NaN), integer
 * values exactly, shapes exactly; the first mismatching values are printed
 * with their data set's path, ahead of the case's FAIL line.  A case passes when every data set does;
 * a mapper that cannot express it makes it a skip, never a pass.  Prints a
 * line per case, a per-op table, the skips with reasons and
 * "N passed, N failed, N skipped"; exits 1 if any case failed, 77 when the
 * test data is not installed.
 *
 * --perturb checks the checker: it changes the last value of every output a
 * mapper produced (by 1e-3 relative plus 1e-3, or 1 for integers) before the
 * comparison, and then every case that is not skipped must fail; it exits 1
 * when one still passes. */
#include <dirent.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx_case.h"

#define DEFAULT_NODE_DIR "/usr/share/libonnx-testdata/data/node"

static const double RTOL = 1e-4, ATOL = 1e-5;

enum { MAX_CASES = 4096 };

typedef struct CaseResult {
  char name[128];
  int op;           /* index into ONNX_OPS */
  OnnxRunStatus st; /* ONNX_RUN_ERROR also stands for a mismatch */
  char why[256];
} CaseResult;

/* snprintf into a path buffer; -1 when the path does not fit. */
static int make_path(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int make_path(char *buf, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, len, fmt, ap);
  va_end(ap);
  return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int op_index(const char *op_type) {
  for (int k = 0; k < ONNX_NOPS; k++)
    if (strcmp(ONNX_OPS[k].op_type, op_type) == 0) return k;
  return -1;
}

/* Version of the node's domain among the model's opset imports. */
static int64_t node_opset(const Onnx__ModelProto *m, const Onnx__NodeProto *n) {
  const char *dom = n->domain && strcmp(n->domain, "ai.onnx") ? n->domain : "";
  for (size_t k = 0; k < m->n_opset_import; k++) {
    const char *d = m->opset_import[k]->domain ? m->opset_import[k]->domain : "";
    if (strcmp(d, "ai.onnx") == 0) d = "";
    if (strcmp(d, dom) == 0) return m->opset_import[k]->version;
  }
  return 0;
}

static void shape_str(const OnnxTensor *t, char *buf, size_t len) {
  size_t at = (size_t)snprintf(buf, len, "[");
  for (int d = 0; d < t->ndim && at < len; d++)
    at += (size_t)snprintf(buf + at, len - at, "%s%lld", d ? "," : "", (long long)t->dims[d]);
  if (at < len) snprintf(buf + at, len - at, "]");
}

/* 0 when got matches want; else prints the first mismatches and the largest
 * difference, and summarizes in why. */
static int compare(const char *set, const char *name, const OnnxTensor *got, const OnnxTensor *want, char *why,
                   size_t whylen) {
  char gs[96], ws[96];
  shape_str(got, gs, sizeof gs);
  shape_str(want, ws, sizeof ws);
  if (got->ndim != want->ndim || memcmp(got->dims, want->dims, (size_t)got->ndim * sizeof got->dims[0])) {
    snprintf(why, whylen, "output '%s': shape %s, want %s", name, gs, ws);
    return -1;
  }
  if ((want->f && !got->f) || (want->i && !got->i) || (!want->f && !want->i)) {
    snprintf(why, whylen, "output '%s': got %s, want %s", name, onnx_dtype_name(got->dtype),
             onnx_dtype_name(want->dtype));
    return -1;
  }
  size_t bad = 0, worst = 0;
  double maxdiff = 0;
  for (size_t k = 0; k < want->n; k++) {
    double g = want->f ? got->f[k] : (double)got->i[k];
    double w = want->f ? want->f[k] : (double)want->i[k];
    int ok;
    double d = fabs(g - w);
    if (isnan(w) || isnan(g))
      ok = isnan(w) && isnan(g);
    else if (want->i)
      ok = got->i[k] == want->i[k];
    else
      ok = d <= ATOL + RTOL * fabs(w) || (isinf(w) && g == w);
    if (!ok) {
      if (bad < 5) printf("  %s: %s[%zu]: got %.9g want %.9g (diff %.3g)\n", set, name, k, g, w, d);
      if (!(d <= maxdiff)) {
        maxdiff = d;
        worst = k;
      }
      bad++;
    }
  }
  if (bad) {
    snprintf(why, whylen, "output '%s': %zu of %zu values differ, max diff %.3g at %zu", name, bad, want->n, maxdiff,
             worst);
    return -1;
  }
  return 0;
}

typedef struct DataSet {
  int nin, nout;
  OnnxTensor in[ONNX_MAX_IO], want[ONNX_MAX_IO];
} DataSet;

static void dataset_free(DataSet *ds) {
  for (int k = 0; k < ds->nin; k++) onnx_tensor_free(&ds->in[k]);
  for (int k = 0; k < ds->nout; k++) onnx_tensor_free(&ds->want[k]);
}

/* Loads input_K.pb for graph inputs and output_K.pb for graph outputs. */
static int dataset_load(const char *dir, const Onnx__GraphProto *g, DataSet *ds, char *why, size_t whylen) {
  char path[1024];
  memset(ds, 0, sizeof *ds);
  if (g->n_input > ONNX_MAX_IO || g->n_output > ONNX_MAX_IO) {
    snprintf(why, whylen, "more than %d graph inputs or outputs", ONNX_MAX_IO);
    return -1;
  }
  for (size_t k = 0; k < g->n_input; k++, ds->nin++) {
    if (make_path(path, sizeof path, "%s/input_%zu.pb", dir, k) || onnx_tensor_read(path, &ds->in[k], why, whylen))
      return -1;
  }
  for (size_t k = 0; k < g->n_output; k++, ds->nout++) {
    if (make_path(path, sizeof path, "%s/output_%zu.pb", dir, k) || onnx_tensor_read(path, &ds->want[k], why, whylen))
      return -1;
  }
  return 0;
}

/* Moves the last value of t clearly outside the tolerance. */
static void perturb_last(OnnxTensor *t) {
  if (t->n == 0) return;
  if (t->f)
    t->f[t->n - 1] += 1e-3f * fabsf(t->f[t->n - 1]) + 1e-3f;
  else if (t->i)
    t->i[t->n - 1] += 1;
}

/* Runs one data set; ONNX_RUN_OK only when every graph output matches. */
static OnnxRunStatus run_dataset(const Onnx__ModelProto *m, int op, const char *dir, int perturb, char *why,
                                 size_t whylen) {
  const Onnx__GraphProto *g = m->graph;
  const Onnx__NodeProto *node = g->node[0];
  DataSet ds;
  OnnxCase c;
  memset(&c, 0, sizeof c);
  OnnxRunStatus st = ONNX_RUN_ERROR;
  OnnxTensor init[ONNX_MAX_IO];
  size_t ninit = 0;
  if (dataset_load(dir, g, &ds, why, whylen)) goto done;
  if (node->n_input > ONNX_MAX_IO || node->n_output > ONNX_MAX_IO || g->n_initializer > ONNX_MAX_IO) {
    snprintf(why, whylen, "more than %d node inputs, outputs or initializers", ONNX_MAX_IO);
    goto done;
  }
  for (; ninit < g->n_initializer; ninit++)
    if (onnx_tensor_from_proto(g->initializer[ninit], &init[ninit], why, whylen)) goto done;
  c.node = node;
  c.opset = node_opset(m, node);
  c.nin = (int)node->n_input;
  c.nout = (int)node->n_output;
  for (int k = 0; k < c.nin; k++) {
    const char *name = node->input[k];
    if (!name[0]) continue; /* an omitted optional input */
    for (size_t j = 0; j < g->n_input && !c.in[k]; j++)
      if (strcmp(g->input[j]->name, name) == 0) c.in[k] = &ds.in[j];
    for (size_t j = 0; j < ninit && !c.in[k]; j++)
      if (strcmp(g->initializer[j]->name, name) == 0) c.in[k] = &init[j];
    if (!c.in[k]) {
      snprintf(why, whylen, "node input '%s' has no data", name);
      goto done;
    }
  }
  st = ONNX_OPS[op].run(&c);
  if (st != ONNX_RUN_OK) {
    snprintf(why, whylen, "%s", c.why);
    goto done;
  }
  for (int k = 0; perturb && k < c.nout; k++) perturb_last(&c.out[k]);
  for (size_t k = 0; k < g->n_output && st == ONNX_RUN_OK; k++) {
    int j = 0;
    while (j < c.nout && strcmp(node->output[j], g->output[k]->name) != 0) j++;
    if (j == c.nout || (!c.out[j].f && !c.out[j].i)) {
      snprintf(why, whylen, "output '%s' not produced", g->output[k]->name);
      st = ONNX_RUN_ERROR;
    } else if (compare(dir, g->output[k]->name, &c.out[j], &ds.want[k], why, whylen)) {
      st = ONNX_RUN_ERROR;
    }
  }
done:
  for (int k = 0; k < c.nout; k++) onnx_tensor_free(&c.out[k]);
  for (size_t k = 0; k < ninit; k++) onnx_tensor_free(&init[k]);
  dataset_free(&ds);
  return st;
}

/* Runs every data set of one test directory into r; 0 when the directory
 * is not a case (not a single node of a covered op). */
static int run_case(const char *root, const char *name, int perturb, CaseResult *r) {
  char path[1024], why[256] = "";
  if (make_path(path, sizeof path, "%s/%s/model.onnx", root, name)) return 0;
  Onnx__ModelProto *m = onnx_model_read(path, why, sizeof why);
  if (!m) return 0; /* not a test directory */
  int op = m->graph->n_node == 1 ? op_index(m->graph->node[0]->op_type) : -1;
  if (op < 0) {
    onnx__model_proto__free_unpacked(m, NULL);
    return 0;
  }
  snprintf(r->name, sizeof r->name, "%s", name);
  r->op = op;
  r->st = ONNX_RUN_OK;
  int nsets = 0;
  for (;; nsets++) {
    struct stat sb;
    if (make_path(path, sizeof path, "%s/%s/test_data_set_%d", root, name, nsets) || stat(path, &sb) != 0 ||
        !S_ISDIR(sb.st_mode))
      break;
    r->st = run_dataset(m, op, path, perturb, why, sizeof why);
    if (r->st != ONNX_RUN_OK) break;
  }
  if (nsets == 0 && r->st == ONNX_RUN_OK) {
    r->st = ONNX_RUN_ERROR;
    snprintf(why, sizeof why, "no test_data_set_0");
  }
  snprintf(r->why, sizeof r->why, "%s", why);
  onnx__model_proto__free_unpacked(m, NULL);
  return 1;
}

static void print_summary(const CaseResult *res, int nres) {
  int count[64][3] = {{0}};
  for (int k = 0; k < nres; k++) count[res[k].op][res[k].st]++;
  printf("\n%-26s %6s %6s %7s\n", "op", "passed", "failed", "skipped");
  int tot[3] = {0};
  for (int op = 0; op < ONNX_NOPS; op++) {
    printf("%-26s %6d %6d %7d\n", ONNX_OPS[op].op_type, count[op][ONNX_RUN_OK], count[op][ONNX_RUN_ERROR],
           count[op][ONNX_RUN_SKIP]);
    for (int s = 0; s < 3; s++) tot[s] += count[op][s];
  }
  printf("%-26s %6d %6d %7d\n", "total", tot[ONNX_RUN_OK], tot[ONNX_RUN_ERROR], tot[ONNX_RUN_SKIP]);
  if (tot[ONNX_RUN_SKIP]) printf("\nskipped:\n");
  for (int k = 0; k < nres; k++)
    if (res[k].st == ONNX_RUN_SKIP) printf("  %-52s %s\n", res[k].name, res[k].why);
  if (tot[ONNX_RUN_ERROR]) printf("\nfailed:\n");
  for (int k = 0; k < nres; k++)
    if (res[k].st == ONNX_RUN_ERROR) printf("  %-52s %s\n", res[k].name, res[k].why);
  printf("\n%d passed, %d failed, %d skipped\n", tot[ONNX_RUN_OK], tot[ONNX_RUN_ERROR], tot[ONNX_RUN_SKIP]);
}

int main(int argc, char **argv) {
  int perturb = argc > 1 && strcmp(argv[1], "--perturb") == 0;
  const char *root = argc > 1 + perturb ? argv[1 + perturb] : DEFAULT_NODE_DIR;
  DIR *d = opendir(root);
  if (!d) {
    printf("skipped: %s not found (install Debian's libonnx-testdata)\n", root);
    return 77;
  }
  char **names = NULL;
  size_t nnames = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    if (nnames == cap) {
      cap = cap ? 2 * cap : 256;
      char **grown = realloc(names, cap * sizeof *names);
      if (!grown) break;
      names = grown;
    }
    if (!(names[nnames] = strdup(e->d_name))) break;
    nnames++;
  }
  closedir(d);
  if (nnames) qsort(names, nnames, sizeof *names, cmp_str);

  CaseResult *res = calloc(MAX_CASES, sizeof *res);
  int nres = 0, rc = 0;
  static const char *const LABEL[] = {"PASS", "SKIP", "FAIL"};
  for (size_t k = 0; res && k < nnames && nres < MAX_CASES; k++) {
    if (!run_case(root, names[k], perturb, &res[nres])) continue;
    const CaseResult *r = &res[nres++];
    printf("%s %-52s %s\n", LABEL[r->st], r->name, r->st == ONNX_RUN_OK ? "" : r->why);
  }
  if (!res) {
    printf("out of memory\n");
    rc = 1;
  } else if (nres == 0) {
    printf("skipped: no covered node tests under %s\n", root);
    rc = 77;
  } else if (perturb) {
    int run = 0, caught = 0;
    for (int k = 0; k < nres; k++) {
      run += res[k].st != ONNX_RUN_SKIP;
      caught += res[k].st == ONNX_RUN_ERROR;
    }
    printf("\nperturbed outputs: %d of %d cases detected\n", caught, run);
    rc = caught == run && run > 0 ? 0 : 1;
  } else {
    print_summary(res, nres);
    for (int k = 0; k < nres; k++)
      if (res[k].st == ONNX_RUN_ERROR) rc = 1;
  }
  for (size_t k = 0; k < nnames; k++) free(names[k]);
  free(names);
  free(res);
  return rc;
}
