/* test_profile_host.c - the host side of profiling, on any machine: a
 * fabricated profile classified (kinds, bounds, achieved rates), printed
 * (sorting, grouping by layer and op, totals by kind), written as a trace
 * and read back; then the errors: NULL arguments, a CPU model, a trace
 * that cannot be written, and netrun profile's usage.  Runs with a driver
 * that does not exist, so models load on the CPU.
 *
 *   test_profile_host SOURCE_DIR WORK_DIR */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "net.h"
#include "netrun_profile.h"

typedef struct Fake {
  int node;
  const char *layer, *op, *kernel;
  double ms, flops, bytes;
} Fake;

/* Peaks 1000 TFLOP/s and 4000 GB/s; starts laid end to end. */
static const Fake FAKE[] = {
    {0, "conv1", "conv2d_bn_train", "cudnn_conv_fwd f16 [128,32,32,8]x[16,3,3]", 0.100, 5e10, 4e7},
    {0, "conv1", "conv2d_bn_train", "k0_conv2d_bn_train_stats_f16_nhwc", 0.050, 0, 1e8},
    {1, "layer1.0", "add_relu", "k1_add_relu_f16_nhwc", 0.003, 0, 1e6},
    {2, "layer1.0.conv1", "conv2d_bwd_data", "cudnn_conv_dgrad f16 [128,32,32,16]x[16,3,3]", 0.200, 1e11, 2e7},
    {3, "layer1.0.conv1", "conv2d_bwd_weight", "cudnn_conv_wgrad f16 [128,32,32,16]x[16,3,3]", 0.150, 1e11, 2e7},
    {4, "", "sgd_update", "k4_sgd_update_f32", 0.020, 0, 1e7},
    {5, "", "cast", "k5_cast_f16", 0.010, 0, 8e6},
    {6, "", "flatten", "k6_flatten_f16", 0.006, 0, 1e6},
    {7, "fc", "linear", "k7_linear_f16", 0.030, 3e9, 1e6},
    {8, "", "softmax_cross_entropy", "k8_softmax_cross_entropy_rows_f32", 0.008, 0, 1e5},
    {9, "maxpool", "maxpool", "k9_maxpool_f16_nhwc", 0.040, 0, 6e7},
    {10, "layer1.0", "batchnorm_relu_bwd", "k10_batchnorm_relu_bwd_f16_nhwc", 0.060, 0, 1.2e8},
};
enum { NFAKE = sizeof FAKE / sizeof FAKE[0] };

static const char *S(const char *s) { return s ? s : "(none)"; }

static void fabricate(NetProfile *p, NetProfRow *rows) {
  memset(p, 0, sizeof *p);
  memset(rows, 0, sizeof(NetProfRow) * NFAKE);
  double t = 0;
  for (int i = 0; i < NFAKE; i++) {
    NetProfRow *r = &rows[i];
    r->node = FAKE[i].node;
    snprintf(r->layer, sizeof r->layer, "%s", FAKE[i].layer);
    snprintf(r->op, sizeof r->op, "%s", FAKE[i].op);
    snprintf(r->kernel, sizeof r->kernel, "%s", FAKE[i].kernel);
    snprintf(r->loc, sizeof r->loc, "models/fake.net:%d:3", 10 + i);
    r->ms = FAKE[i].ms, r->flops = FAKE[i].flops, r->bytes = FAKE[i].bytes;
    r->start_ms = t;
    t += r->ms + 0.001;
  }
  p->rows = rows, p->nrows = NFAKE, p->reps = 5, p->batch = 128;
  p->step_ms = 0.8, p->peak_tflops = 1000, p->peak_gbs = 4000;
  snprintf(p->device, sizeof p->device, "Fake GPU");
}

static void test_classify(void) {
  NetProfRow rows[NFAKE];
  NetProfile p;
  fabricate(&p, rows);
  net_profile_classify(&p);
  static const NetProfKind KIND[NFAKE] = {NET_PROF_CONV_FWD,   NET_PROF_BATCHNORM,  NET_PROF_ELEMENTWISE,
                                          NET_PROF_CONV_DGRAD, NET_PROF_CONV_WGRAD, NET_PROF_OPTIMIZER,
                                          NET_PROF_CAST,       NET_PROF_OTHER,      NET_PROF_LINEAR,
                                          NET_PROF_LOSS,       NET_PROF_POOLING,    NET_PROF_BATCHNORM};
  double sum = 0;
  for (int i = 0; i < NFAKE; i++) {
    CHECK(rows[i].kind == KIND[i], "row %d (%s, %s): kind %s, want %s", i, rows[i].op, rows[i].kernel,
          net_profile_kind_name(rows[i].kind), net_profile_kind_name(KIND[i]));
    sum += rows[i].ms;
  }
  CHECK_CLOSE(p.kernels_ms, sum, 1e-12, "kernels_ms");
  /* conv fwd: 5e10 FLOP in 0.1 ms = 500 TFLOP/s (50%), 4e7 B = 400 GB/s (10%) */
  CHECK_CLOSE(rows[0].tflops, 500, 1e-9, "conv tflops");
  CHECK_CLOSE(rows[0].gbs, 400, 1e-9, "conv gbs");
  CHECK_CLOSE(rows[0].peak_share, 0.5, 1e-9, "conv peak share");
  CHECK(rows[0].bound == NET_BOUND_COMPUTE, "conv bound %s", net_profile_bound_name(rows[0].bound));
  /* stats: 1e8 B in 0.05 ms = 2000 GB/s, half the bandwidth */
  CHECK_CLOSE(rows[1].gbs, 2000, 1e-9, "stats gbs");
  CHECK_CLOSE(rows[1].peak_share, 0.5, 1e-9, "stats peak share");
  CHECK(rows[1].bound == NET_BOUND_MEMORY, "stats bound %s", net_profile_bound_name(rows[1].bound));
  CHECK(rows[2].bound == NET_BOUND_LATENCY, "3 us kernel bound %s", net_profile_bound_name(rows[2].bound));
  /* linear: 3e9 FLOP in 0.03 ms = 100 TFLOP/s (10%) beats 33 GB/s */
  CHECK(rows[8].bound == NET_BOUND_COMPUTE, "linear bound %s", net_profile_bound_name(rows[8].bound));
  CHECK(strcmp(net_profile_kind_name(NET_PROF_CAST), "casts/layout") == 0, "cast kind name");
  CHECK(strcmp(net_profile_kind_name(NET_PROF_KINDS), "?") == 0, "out-of-range kind name");
  CHECK(strcmp(net_profile_bound_name(NET_BOUND_LATENCY), "latency") == 0, "latency name");
  /* no peaks known: shares 0, and still a bound from the times */
  p.peak_tflops = 0, p.peak_gbs = 0;
  net_profile_classify(&p);
  CHECK(rows[0].peak_share == 0 && rows[0].bound == NET_BOUND_MEMORY, "no peaks: share %g bound %s", rows[0].peak_share,
        net_profile_bound_name(rows[0].bound));
  net_profile_classify(NULL);
}

/* The table printed into a string. */
static char *table(const NetProfile *p, NetrunProfBy by, int top) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  int rc = netrun_profile_print(f, p, by, top);
  fclose(f);
  CHECK(rc == 0, "netrun_profile_print returned %d", rc);
  return buf;
}

/* The line of text holding needle, as a new string ("" when none). */
static char *line_with(const char *text, const char *needle) {
  const char *at = text ? strstr(text, needle) : NULL;
  if (!at) return strdup("");
  const char *a = at, *b = at;
  while (a > text && a[-1] != '\n') a--;
  while (*b && *b != '\n') b++;
  return strndup(a, (size_t)(b - a));
}

static void test_table(void) {
  NetProfRow rows[NFAKE];
  NetProfile p;
  fabricate(&p, rows);
  net_profile_classify(&p);
  double total = p.kernels_ms;

  char *t = table(&p, NETRUN_BY_KERNEL, 3);
  CHECK(t && strstr(t, "Fake GPU") && strstr(t, "median of 5 steps"), "header:\n%s", S(t));
  fputs(S(t), stdout);
  /* sorted: dgrad 0.200, wgrad 0.150, conv fwd 0.100, then 9 more */
  const char *d = t ? strstr(t, "cudnn_conv_dgrad") : NULL, *w = t ? strstr(t, "cudnn_conv_wgrad") : NULL;
  const char *f = t ? strstr(t, "cudnn_conv_fwd") : NULL;
  CHECK(d && w && f && d < w && w < f, "rows not sorted by time:\n%s", S(t));
  CHECK(t && !strstr(t, "k9_maxpool"), "--top 3 printed a fourth row:\n%s", S(t));
  CHECK(t && strstr(t, "... 9 more"), "no '9 more' line:\n%s", S(t));
  char pc[32];
  snprintf(pc, sizeof pc, "%.1f%%", 100 * 0.2 / total);
  char *ld = line_with(t, "cudnn_conv_dgrad");
  CHECK(strstr(ld, "0.200") && strstr(ld, pc) && strstr(ld, "compute") && strstr(ld, "conv dgrad") &&
            strstr(ld, "layer1.0.conv1"),
        "dgrad line '%s' (want 0.200, %s, compute, conv dgrad, its layer)", ld, pc);
  free(ld);
  /* totals by kind: batch norm is 0.050 + 0.060 in 2 kernels */
  char *lb = line_with(t ? strstr(t, "by kind:") : NULL, "batch norm");
  snprintf(pc, sizeof pc, "%.1f%%", 100 * 0.11 / total);
  CHECK(strstr(lb, "0.110") && strstr(lb, pc) && strstr(lb, " 2 "), "batch norm total '%s' (want 0.110, %s, 2)", lb,
        pc);
  free(lb);
  char *ll = line_with(t, "by bound:");
  CHECK(strstr(ll, "latency (< 5 us) 0.003 ms"), "bound totals '%s'", ll);
  free(ll);
  free(t);

  t = table(&p, NETRUN_BY_LAYER, 0);
  char *l1 = line_with(t, "conv1 (conv2d_bn_train)");
  CHECK(strstr(l1, "0.150") && strstr(l1, "(2)") && strstr(l1, "conv fwd"), "layer line '%s'", l1);
  free(l1);
  /* two unnamed nodes stay apart */
  CHECK(t && strstr(t, "unnamed (sgd_update)") && strstr(t, "unnamed (cast)"), "unnamed layers:\n%s", S(t));
  CHECK(t && !strstr(t, "more (--top 0"), "--top 0 cut rows:\n%s", S(t));
  free(t);

  t = table(&p, NETRUN_BY_OP, 0);
  char *lo = line_with(t, "conv2d_bn_train");
  CHECK(strstr(lo, "0.150") && strstr(lo, "(2)"), "op line '%s'", lo);
  free(lo);
  free(t);
}

static void test_trace(const char *work) {
  NetProfRow rows[NFAKE];
  NetProfile p;
  fabricate(&p, rows);
  net_profile_classify(&p);
  char path[4096];
  snprintf(path, sizeof path, "%s/trace.json", work);
  CHECK(net_profile_trace(&p, path) == NET_OK, "trace: %s", net_last_error());
  FILE *f = fopen(path, "rb");
  char *text = NULL;
  long n = 0;
  if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (text = calloc((size_t)n + 1, 1)) && fread(text, 1, (size_t)n, f) != (size_t)n)
    n = 0;
  if (f) fclose(f);
  cJSON *root = text ? cJSON_Parse(text) : NULL;
  CHECK(root != NULL, "%s is not JSON", path);
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  /* 3 names, 12 kernels, 11 layers (node 0 has two kernels) */
  CHECK(cJSON_GetArraySize(ev) == 3 + NFAKE + 11, "%d events", cJSON_GetArraySize(ev));
  int kernels = 0, layers = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, ev) {
    const char *ph = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "ph"));
    if (!ph || strcmp(ph, "X")) continue;
    double tid = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "tid"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
    double ts = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "ts"));
    double dur = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "dur"));
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    if (tid == 1) {
      const NetProfRow *r = &rows[kernels++];
      CHECK(name && strcmp(name, r->kernel) == 0, "kernel event %d is '%s'", kernels, name ? name : "?");
      CHECK_CLOSE(ts, r->start_ms * 1e3, 1e-9, "kernel ts (us)");
      CHECK_CLOSE(dur, r->ms * 1e3, 1e-9, "kernel dur (us)");
      const char *layer = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(args, "layer"));
      CHECK(layer && strcmp(layer, r->layer) == 0, "args.layer '%s'", layer ? layer : "?");
      CHECK_CLOSE(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(args, "flops")), r->flops, 1e-12, "flops");
      CHECK_CLOSE(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(args, "bytes")), r->bytes, 1e-12, "bytes");
      const char *cat = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "cat"));
      CHECK(cat && strcmp(cat, net_profile_kind_name(r->kind)) == 0, "cat '%s'", cat ? cat : "?");
    } else if (tid == 2) {
      if (layers++ == 0) {
        /* conv1 spans its two kernels: 0 .. 0.101 + 0.050 ms */
        CHECK(name && strcmp(name, "conv1") == 0, "first layer '%s'", name ? name : "?");
        CHECK_CLOSE(dur, (0.101 + 0.050) * 1e3, 1e-9, "layer dur (us)");
      }
    }
  }
  CHECK(kernels == NFAKE && layers == 11, "%d kernel and %d layer events", kernels, layers);
  cJSON_Delete(root);
  free(text);
  /* nothing but the trace left behind */
  DIR *dir = opendir(work);
  struct dirent *de;
  int others = 0;
  while (dir && (de = readdir(dir)))
    if (de->d_name[0] != '.' && strcmp(de->d_name, "trace.json")) others++;
  if (dir) closedir(dir);
  CHECK(others == 0, "%d stray files in %s", others, work);

  snprintf(path, sizeof path, "%s/no/such/dir/trace.json", work);
  CHECK(net_profile_trace(&p, path) == NET_ERR_IO, "unwritable trace");
  CHECK(strstr(net_last_error(), path) != NULL, "message names the file: %s", net_last_error());
  CHECK(net_profile_trace(NULL, path) == NET_ERR_ARG, "NULL profile");
  /* an empty profile is a valid trace */
  NetProfile empty = {0};
  snprintf(path, sizeof path, "%s/empty.json", work);
  CHECK(net_profile_trace(&empty, path) == NET_OK, "empty trace: %s", net_last_error());
  remove(path);
}

static void test_errors(const char *root) {
  NetProfile p;
  CHECK(net_profile(NULL, NULL, &p) == NET_ERR_ARG && p.rows == NULL, "NULL model");
  char model[4096];
  snprintf(model, sizeof model, "%s/models/smallcnn.net", root);
  NetLoadOpts lo = {.device = "auto", .batch = 4, .seed = 1};
  NetModel *m = NULL;
  NetStatus s = net_load(model, &lo, &m);
  CHECK(s == NET_OK, "load %s: %s", model, net_last_error());
  if (m) {
    CHECK(net_profile(m, NULL, NULL) == NET_ERR_ARG, "NULL out");
    NetProfileOpts o = {.reps = 5000};
    CHECK(net_profile(m, &o, &p) == NET_ERR_ARG, "5000 reps");
    CHECK(net_profile(m, NULL, &p) == NET_ERR_NO_GPU, "a CPU model: %s", net_last_error());
    CHECK(strstr(net_last_error(), "CPU") != NULL, "message says why: %s", net_last_error());
    CHECK(p.rows == NULL && p.nrows == 0, "no rows after a failure");
    net_free(m);
  }
  net_profile_free(NULL);

  char a0[] = "profile", bad_by[] = "--by=row", help[] = "--help", top[] = "--top=x";
  char *v1[] = {a0, model, bad_by, NULL};
  CHECK(netrun_profile_main(3, v1) == 2, "--by row is a usage error");
  char *v2[] = {a0, NULL};
  CHECK(netrun_profile_main(1, v2) == 2, "no MODEL is a usage error");
  char *v3[] = {a0, help, NULL};
  CHECK(netrun_profile_main(2, v3) == 0, "--help");
  char *v4[] = {a0, model, top, NULL};
  CHECK(netrun_profile_main(3, v4) == 2, "--top x is a usage error");
  char *v5[] = {a0, model, NULL};
  CHECK(netrun_profile_main(2, v5) == 1, "no GPU: a failure, not a crash");
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_profile_host SOURCE_DIR WORK_DIR\n");
    return 2;
  }
  mkdir(argv[2], 0755);
  char stale[4096];
  snprintf(stale, sizeof stale, "%s/trace.json", argv[2]);
  remove(stale);
  test_classify();
  test_table();
  test_trace(argv[2]);
  test_errors(argv[1]);
  return check_report();
}
