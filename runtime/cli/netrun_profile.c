/* netrun_profile.c - `netrun profile MODEL`: one GPU training step (or
 * inference pass) timed kernel by kernel through net_profile, printed as a
 * table sorted by time -- per kernel, or summed per layer or per IR op --
 * then totalled by kind (conv fwd/dgrad/wgrad, batch norm, elementwise,
 * ...) and by what bounds each kernel, with an optional Chrome/Perfetto
 * trace.  docs/profiling.md explains every column.
 *
 * Percentages are of the sum of the kernels' times, so they add up to 100;
 * the header also gives the captured graph's replay time, what a training
 * step really takes. */
#include "netrun_profile.h"
#include "netrun_files.h"
#include "netrun_opt.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_FAIL = NETRUN_EXIT_FAIL, EXIT_USAGE = NETRUN_EXIT_USAGE, DEFAULT_TOP = 30, NAME_MAX_LEN = 400 };

/* A line of the table: one row, or the rows of a layer or op summed. */
typedef struct Line {
  NetProfRow sum; /* ms, flops, bytes summed; kind and bound of the sum */
  char name[NAME_MAX_LEN];
  int kernels;
  double biggest; /* ms of its longest row: that row's op and kernel give the kind */
} Line;

static void usage(FILE *f) {
  fprintf(f,
          "usage: netrun profile MODEL [options]\n"
          "\n"
          "Times every kernel of one training step on the GPU (events around each kernel, median over\n"
          "--reps steps), prints them sorted by time with achieved TFLOP/s and GB/s against the device's\n"
          "peaks, then the time by kind.  Layers are NVTX ranges for Nsight Systems.  See docs/profiling.md.\n"
          "\n"
          "  --batch N            batch size (default: the model's)\n"
          "  --inference          the inference graph instead of the training step\n"
          "  --reps N             profiled steps, median taken (default 10)\n"
          "  --top K              rows to print (default %d; 0: all)\n"
          "  --by kernel|layer|op one row per kernel (default), per layer, or per IR op\n"
          "  --trace FILE.json    write a Chrome trace (ui.perfetto.dev, chrome://tracing)\n"
          "  --cache DIR          NVRTC kernel cache (default $XDG_CACHE_HOME/netc or ~/.cache/netc)\n"
          "  --precision P        fp32, fp16 or bf16, for a .net MODEL\n"
          "  --device gpu         accepted as by the other commands (a profile runs on the GPU)\n",
          DEFAULT_TOP);
}

static int cmp_line(const void *a, const void *b) {
  double x = ((const Line *)a)->sum.ms, y = ((const Line *)b)->sum.ms;
  return (x < y) - (x > y);
}

/* Index of the line rows[i] joins (adding it when new), or -1 when out of room. */
static int line_of(Line *lines, int *n, const NetProfRow *r, NetrunProfBy by) {
  char key[NAME_MAX_LEN];
  if (by == NETRUN_BY_KERNEL)
    snprintf(key, sizeof key, "%s%s%s", r->kernel, *r->layer ? "  " : "", r->layer);
  else if (by == NETRUN_BY_LAYER)
    snprintf(key, sizeof key, "%s (%s)", *r->layer ? r->layer : "unnamed", r->op);
  else
    snprintf(key, sizeof key, "%s", r->op);
  /* a layer is one node: two unnamed nodes stay apart */
  for (int i = 0; by != NETRUN_BY_KERNEL && i < *n; i++)
    if (strcmp(lines[i].name, key) == 0 && (by == NETRUN_BY_OP || lines[i].sum.node == r->node)) return i;
  Line *l = &lines[(*n)++];
  memset(l, 0, sizeof *l);
  snprintf(l->name, sizeof l->name, "%s", key);
  l->sum.node = r->node;
  return (int)(l - lines);
}

/* The rows of p grouped `by` into a classified profile of lines. */
static Line *group(const NetProfile *p, NetrunProfBy by, int *nline) {
  Line *lines = calloc((size_t)p->nrows + 1, sizeof *lines);
  NetProfile q = *p;
  q.rows = calloc((size_t)p->nrows + 1, sizeof *q.rows);
  if (!lines || !q.rows) {
    free(lines);
    free(q.rows);
    return NULL;
  }
  int n = 0;
  for (int i = 0; i < p->nrows; i++) {
    const NetProfRow *r = &p->rows[i];
    Line *l = &lines[line_of(lines, &n, r, by)];
    l->kernels++;
    l->sum.ms += r->ms, l->sum.flops += r->flops, l->sum.bytes += r->bytes;
    if (l->kernels == 1 || r->ms > l->biggest) {
      l->biggest = r->ms;
      memcpy(l->sum.op, r->op, sizeof r->op);
      memcpy(l->sum.kernel, r->kernel, sizeof r->kernel);
    }
  }
  q.nrows = n;
  for (int i = 0; i < n; i++) q.rows[i] = lines[i].sum;
  net_profile_classify(&q);
  for (int i = 0; i < n; i++) lines[i].sum = q.rows[i];
  free(q.rows);
  qsort(lines, (size_t)n, sizeof *lines, cmp_line);
  *nline = n;
  return lines;
}

static double pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0; }

static void print_kinds(FILE *f, const NetProfile *p) {
  double ms[NET_PROF_KINDS] = {0}, fl[NET_PROF_KINDS] = {0}, by[NET_PROF_KINDS] = {0};
  int count[NET_PROF_KINDS] = {0}, order[NET_PROF_KINDS];
  for (int i = 0; i < p->nrows; i++) {
    const NetProfRow *r = &p->rows[i];
    if ((unsigned)r->kind >= NET_PROF_KINDS) continue;
    ms[r->kind] += r->ms, fl[r->kind] += r->flops, by[r->kind] += r->bytes, count[r->kind]++;
  }
  for (int k = 0; k < NET_PROF_KINDS; k++) order[k] = k;
  for (int a = 1; a < NET_PROF_KINDS; a++) /* insertion sort by time, longest first */
    for (int b = a; b > 0 && ms[order[b]] > ms[order[b - 1]]; b--) {
      int t = order[b];
      order[b] = order[b - 1], order[b - 1] = t;
    }
  fprintf(f, "\nby kind:\n%10s %7s %8s %9s %8s  %s\n", "ms", "%", "TFLOP/s", "GB/s", "kernels", "kind");
  for (int i = 0; i < NET_PROF_KINDS; i++) {
    int k = order[i];
    if (!count[k]) continue;
    double s = ms[k] * 1e-3;
    fprintf(f, "%10.3f %6.1f%% %8.2f %9.1f %8d  %s\n", ms[k], pct(ms[k], p->kernels_ms), s > 0 ? fl[k] / s / 1e12 : 0,
            s > 0 ? by[k] / s / 1e9 : 0, count[k], net_profile_kind_name((NetProfKind)k));
  }
  double bound[3] = {0};
  for (int i = 0; i < p->nrows; i++)
    if ((unsigned)p->rows[i].bound < 3) bound[p->rows[i].bound] += p->rows[i].ms;
  fprintf(f, "\nby bound: memory %.3f ms (%.1f%%), compute %.3f ms (%.1f%%), latency (< 5 us) %.3f ms (%.1f%%)\n",
          bound[NET_BOUND_MEMORY], pct(bound[NET_BOUND_MEMORY], p->kernels_ms), bound[NET_BOUND_COMPUTE],
          pct(bound[NET_BOUND_COMPUTE], p->kernels_ms), bound[NET_BOUND_LATENCY],
          pct(bound[NET_BOUND_LATENCY], p->kernels_ms));
}

int netrun_profile_print(FILE *f, const NetProfile *p, NetrunProfBy by, int top) {
  int n = 0;
  Line *lines = group(p, by, &n);
  if (!lines) return -1;
  static const char *const BY[] = {"kernel", "layer", "op"};
  fprintf(f, "%s step, batch %lld, on %s: peak %.1f TFLOP/s (f16 tensor), %.0f GB/s; median of %d steps\n",
          p->inference ? "inference" : "training", (long long)p->batch, p->device, p->peak_tflops, p->peak_gbs,
          p->reps);
  fprintf(f, "step (captured graph replay) %.3f ms; sum of %d kernels %.3f ms (%.1f%% of the replay)\n", p->step_ms,
          p->nrows, p->kernels_ms, pct(p->kernels_ms, p->step_ms));
  fprintf(f, "\n%10s %7s %8s %9s %6s  %-8s %-12s %s %s\n", "ms", "%", "TFLOP/s", "GB/s", "%peak", "bound", "kind",
          (unsigned)by < 3 ? BY[by] : "?", by == NETRUN_BY_KERNEL ? "(layer)" : "(kernels)");
  int shown = top > 0 && top < n ? top : n;
  for (int i = 0; i < shown; i++) {
    const Line *l = &lines[i];
    fprintf(f, "%10.3f %6.1f%% %8.2f %9.1f %5.1f%%  %-8s %-12s %s", l->sum.ms, pct(l->sum.ms, p->kernels_ms),
            l->sum.tflops, l->sum.gbs, 100.0 * l->sum.peak_share, net_profile_bound_name(l->sum.bound),
            net_profile_kind_name(l->sum.kind), l->name);
    if (by != NETRUN_BY_KERNEL) fprintf(f, " (%d)", l->kernels);
    fputc('\n', f);
  }
  if (shown < n) {
    double rest = 0;
    for (int i = shown; i < n; i++) rest += lines[i].sum.ms;
    fprintf(f, "%10.3f %6.1f%%  ... %d more (--top 0 shows all)\n", rest, pct(rest, p->kernels_ms), n - shown);
  }
  free(lines);
  print_kinds(f, p);
  return 0;
}

typedef struct ProfOpts {
  const char *model, *trace, *cache, *precision;
  long long batch, reps, top;
  int inference;
  NetrunProfBy by;
} ProfOpts;

/* 0, 1 for --help (printed), or an exit status. */
static int parse(int argc, char **argv, ProfOpts *o) {
  static const struct option longopts[] = {
      {"batch", required_argument, NULL, 'b'},
      {"inference", no_argument, NULL, 'I'},
      {"reps", required_argument, NULL, 'r'},
      {"top", required_argument, NULL, 't'},
      {"trace", required_argument, NULL, 'T'},
      {"by", required_argument, NULL, 'y'},
      {"cache", required_argument, NULL, 'K'},
      {"precision", required_argument, NULL, 'p'},
      {"device", required_argument, NULL, 'D'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
    case 'b':
      if (netrun_opt_int("--batch", optarg, 1, 1 << 20, &o->batch)) return EXIT_USAGE;
      break;
    case 'r':
      if (netrun_opt_int("--reps", optarg, 1, 1000, &o->reps)) return EXIT_USAGE;
      break;
    case 't':
      if (netrun_opt_int("--top", optarg, 0, 1 << 30, &o->top)) return EXIT_USAGE;
      break;
    case 'I': o->inference = 1; break;
    case 'T': o->trace = optarg; break;
    case 'K': o->cache = optarg; break;
    case 'y': {
      static const char *const BY[] = {"kernel", "layer", "op"};
      if (netrun_opt_word("--by", optarg, BY, 3)) return EXIT_USAGE;
      o->by = strcmp(optarg, "kernel") == 0  ? NETRUN_BY_KERNEL
              : strcmp(optarg, "layer") == 0 ? NETRUN_BY_LAYER
                                             : NETRUN_BY_OP;
      break;
    }
    case 'D': /* accepted for symmetry with the other commands: a profile times GPU kernels */
      if (strcmp(optarg, "gpu") != 0) {
        fprintf(stderr, "netrun: error: profile times the GPU's kernels: --device must be gpu, not '%s'\n", optarg);
        return EXIT_USAGE;
      }
      break;
    case 'p':
      if (netrun_opt_precision(optarg)) return EXIT_USAGE;
      o->precision = optarg;
      break;
    case 'h': usage(stdout); return 1;
    default: return netrun_opt_bad(c, argv, "profile");
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "netrun: error: profile takes one MODEL\n");
    usage(stderr);
    return EXIT_USAGE;
  }
  o->model = argv[optind];
  return 0;
}

int netrun_profile_main(int argc, char **argv) {
  ProfOpts o = {.reps = 10, .top = DEFAULT_TOP};
  int rc = parse(argc, argv, &o);
  if (rc) return rc == 1 ? 0 : rc;
  const char *ins[] = {o.model};
  const NetrunOutput outs[] = {{o.trace, 0, NULL}};
  if ((rc = netrun_files_check(ins, 1, NULL, outs, 1))) return rc;
  NetLoadOpts lo = {.device = "gpu",
                    .batch = o.batch,
                    .seed = 1,
                    .precision = o.precision,
                    .cache_dir = o.cache,
                    .inference_only = o.inference};
  NetModel *m = NULL;
  if (net_load(o.model, &lo, &m)) {
    fprintf(stderr, "netrun: error: %s\n", net_last_error());
    return EXIT_FAIL;
  }
  NetProfileOpts po = {.inference = o.inference, .reps = (int)o.reps};
  NetProfile p;
  int status = EXIT_FAIL;
  if (net_profile(m, &po, &p) || (o.trace && net_profile_trace(&p, o.trace))) {
    fprintf(stderr, "netrun: error: %s: %s\n", o.model, net_last_error());
  } else {
    printf("netrun: profile of %s, ", o.model);
    if (netrun_profile_print(stdout, &p, o.by, (int)o.top))
      fprintf(stderr, "netrun: error: out of memory\n");
    else
      status = 0;
    if (!status && o.trace) printf("\ntrace: %s (open in ui.perfetto.dev or chrome://tracing)\n", o.trace);
  }
  net_profile_free(&p);
  net_free(m);
  return status;
}
