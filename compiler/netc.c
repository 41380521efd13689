/* netc.c - the netc command line; the only place in the compiler that exits.
 *
 *   netc FILE.net [--summary] [--dump-ir=DIR] [--print-after=PASS] ...
 *   netc FILE.onnx [--train=TRAIN.net] [the same options]
 *   netc FILE.onnx --emit-net=OUT.net    (the network written as a .net file)
 *
 * A run that asks for no output (no -o, --emit-cuda, --emit-net, --dump-ir,
 * --print-after or --summary) says on stderr what it compiled and that it wrote nothing.
 * The folders of --dump-ir and --emit-cuda are created with their parents.
 *
 * Exit status: 0 success, 1 errors in the input, 2 usage errors. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cg_model.h"
#include "compile.h"
#include "int8_scales.h"
#include "emit_net.h"
#include "opts.h"
#include "resize.h"
#include "summary.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2 };

static void usage(FILE *f) {
  int n;
  const Pass *passes = pipeline_passes(&n);
  fprintf(
      f,
      "usage: netc FILE.net [options]\n"
      "       netc FILE.onnx [--train TRAIN.net] [options]\n"
      "\n"
      "Compiles a network description (or an ONNX model): parses it, derives the IR, runs the passes.\n"
      "\n"
      "options:\n"
      "  --summary            print the layer table, the totals 'params: N', 'macs: N' and the memory plan\n"
      "  --dump-ir=DIR        write the IR after every pass to DIR/NN-PASS.ir\n"
      "  --print-after=PASS   print the IR after PASS to stdout\n"
      "  --no-loc             leave source locations out of IR dumps\n"
      "  --inference          compile for inference: no backward pass, running statistics\n"
      "  --precision=P        default precision: fp16 (default), bf16, fp32, or fp8 (fp16 with every\n"
      "                       convolution but the first in FP8 E4M3, forward; the CPU only for now)\n"
      "  --int8=L1,L2,...     run these layers in int8 (all: every convolution but the first)\n"
      "  --int8-scales=FILE   their inputs' calibrated scales (`netrun calibrate`; default: each tensor's maximum)\n"
      "  --batch=N            batch size the memory plan is made for (default: the train section's)\n"
      "  --image-size=S|HxW   the image input's height and width (default: as the file declares; the\n"
      "                       network must take it: a global pool before the classifier)\n"
      "  -o FILE              write model.so: both graphs (training and inference), their kernels and cubins\n"
      "  --arch=sm_NN         GPU architecture of the cubins in -o (default sm_90)\n"
      "  --emit-cuda=DIR      write each graph's generated CUDA source as DIR/train.cu and DIR/infer.cu\n"
      "  --train=FILE         an ONNX model's train section (a file holding `train { ... }`; default: batch 64,\n"
      "                       sgd(lr=0.1, momentum=0.9, weight_decay=0.0001); docs/onnx.md)\n"
      "  --weights-out=FILE   an ONNX model's initializers as a safetensors file of its parameters and state\n"
      "  --emit-net=FILE      write the forward network as a .net file, every layer under its name, so weights\n"
      "                       saved by name load into it (an ONNX model in the language; docs/onnx.md): a block\n"
      "                       for layers that repeat (layer1.0.*, layer1.1.*, ...), a loop of its calls\n"
      "                       (layer1 = stage1(...)), one line for each other layer\n"
      "  --emit-net-plain=FILE  the same, one line per layer (no blocks)\n"
      "  -fno-PASS            turn a pass off\n"
      "  -h, --help           show this help\n"
      "  -V, --version        show the version\n"
      "\n"
      "passes, in order:\n"
      "  %-18s lower the source to the forward IR (always on)\n",
      "parse");
  for (int i = 0; i < n; i++) fprintf(f, "  %-18s %s\n", passes[i].name, passes[i].what);
}

/* mkdir -p: creates dir and every missing parent.  Returns 0, or -1 with
 * errno set and the first folder that could not be made in failed[]. */
static int make_dirs(const char *dir, char *failed, size_t cap) {
  char path[4096];
  size_t len = strlen(dir);
  if (len == 0 || len >= sizeof path) {
    snprintf(failed, cap, "%s", dir);
    errno = len ? ENAMETOOLONG : ENOENT;
    return -1;
  }
  memcpy(path, dir, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (path[i] != '/' && path[i] != 0) continue;
    char c = path[i];
    path[i] = 0;
    struct stat st;
    if (mkdir(path, 0777) != 0 && !(errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
      if (errno == EEXIST) errno = ENOTDIR;
      snprintf(failed, cap, "%s", path);
      return -1;
    }
    path[i] = c;
  }
  return 0;
}

/* The folder of an option, made with its parents; 0, or -1 after saying why. */
static int make_output_dir(const char *what, const char *dir) {
  char failed[4096];
  if (make_dirs(dir, failed, sizeof failed) == 0) return 0;
  fprintf(stderr, "netc: error: cannot create %s '%s': %s\n", what, failed, strerror(errno));
  return -1;
}

/* 1 when a and b name one existing file (same st_dev and st_ino). */
static int same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* No output may overwrite the input: -o FILE, and each file netc writes in
 * --emit-net FILE, --dump-ir DIR (NN-pass.ir) or --emit-cuda DIR (train.cu, infer.cu),
 * compared by inode with the input before any work.  1 after saying which. */
static int overwrites_input(const char *in, const char *out, const char *net, const char *dump_dir,
                            const char *cuda_dir) {
  char path[4096];
  const char *hit = out && same_file(out, in) ? out : NULL;
  if (!hit && net && same_file(net, in)) hit = net;
  static const char *const CUDA[] = {"train.cu", "infer.cu"};
  for (int i = 0; cuda_dir && !hit && i < 2; i++)
    if (snprintf(path, sizeof path, "%s/%s", cuda_dir, CUDA[i]) < (int)sizeof path && same_file(path, in)) hit = path;
  int n = 0;
  const Pass *passes = pipeline_passes(&n);
  for (int k = 0; dump_dir && !hit && k <= n; k++)
    for (int i = -1; !hit && i < n; i++)
      if (snprintf(path, sizeof path, "%s/%02d-%s.ir", dump_dir, k, i < 0 ? "parse" : passes[i].name) <
              (int)sizeof path &&
          same_file(path, in))
        hit = path;
  if (hit) fprintf(stderr, "netc: error: %s: is the same file as the input %s (refusing to overwrite it)\n", hit, in);
  return hit != NULL;
}

int main(int argc, char **argv) {
  /* one option a line (clang-format would pack them in two columns) */
  /* clang-format off */
  static const struct option longopts[] = {
      {"summary", no_argument, NULL, 's'},
      {"dump-ir", required_argument, NULL, 'D'},
      {"print-after", required_argument, NULL, 'P'},
      {"no-loc", no_argument, NULL, 'L'},
      {"inference", no_argument, NULL, 'I'},
      {"precision", required_argument, NULL, 'p'},
      {"int8", required_argument, NULL, '8'},
      {"int8-scales", required_argument, NULL, 'Q'},
      {"batch", required_argument, NULL, 'b'},
      {"image-size", required_argument, NULL, 'S'},
      {"arch", required_argument, NULL, 'A'},
      {"emit-cuda", required_argument, NULL, 'E'},
      {"train", required_argument, NULL, 'T'},
      {"weights-out", required_argument, NULL, 'W'},
      {"emit-net", required_argument, NULL, 'N'},
      {"emit-net-plain", required_argument, NULL, 'n'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  /* clang-format on */
  PassCtx cx = {.out = stdout, .precision = IR_DT_F16};
  CgModelOpts model = {0};
  int summary = 0, c;
  const char *weights_out = NULL, *emit_net_out = NULL, *scales_path = NULL;
  unsigned emit_net_flags = 0;
  opterr = 0;
  int li = -1;
  while ((c = getopt_long(argc, argv, ":hVf:o:", longopts, &li)) != -1) {
    /* `--emit-net-plain --emit-net=F`: the value left out, the next option taken for it */
    if (optarg && strncmp(optarg, "--", 2) == 0 && c != '?' && c != ':') {
      if (li >= 0)
        fprintf(stderr, "netc: error: --%s needs a value, but what follows it is the option '%s'\n", longopts[li].name,
                optarg);
      else
        fprintf(stderr, "netc: error: -%c needs a value, but what follows it is the option '%s'\n", c, optarg);
      return EXIT_USAGE;
    }
    li = -1;
    switch (c) {
    case 's': summary = 1; break;
    case 'D': cx.dump_dir = optarg; break;
    case 'P':
      if (strcmp(optarg, "parse") && pipeline_find(optarg) < 0) {
        fprintf(stderr, "netc: error: --print-after: unknown pass '%s' (see --help)\n", optarg);
        return EXIT_USAGE;
      }
      cx.print_after = optarg;
      break;
    case 'L': cx.no_loc = 1; break;
    case 'I': cx.inference = 1; break;
    case 'p':
      if (pass_precision_parse(optarg, &cx)) {
        fprintf(stderr, "netc: error: --precision must be " PASS_PRECISION_NAMES ", not '%s'\n", optarg);
        return EXIT_USAGE;
      }
      break;
    case '8': cx.int8_layers = optarg; break;
    case 'Q': scales_path = optarg; break;
    case 'b': {
      char *end;
      long long b = strtoll(optarg, &end, 10);
      if (*optarg == 0 || *end || b < 1 || b > (1 << 20)) {
        fprintf(stderr, "netc: error: --batch must be an integer in 1..1048576, not '%s'\n", optarg);
        return EXIT_USAGE;
      }
      cx.batch = b;
      break;
    }
    case 'S':
      if (resize_parse(optarg, cx.image_hw)) {
        fprintf(stderr, "netc: error: --image-size takes S or HxW, each 1..%d, not '%s'\n", RESIZE_MAX_SIDE, optarg);
        return EXIT_USAGE;
      }
      break;
    case 'f': {
      int p = strncmp(optarg, "no-", 3) == 0 ? pipeline_find(optarg + 3) : -1;
      if (p < 0) {
        fprintf(stderr, "netc: error: unknown flag '-f%s' (passes are turned off with -fno-PASS)\n", optarg);
        return EXIT_USAGE;
      }
      cx.disabled |= 1u << p;
      break;
    }
    case 'o': model.out = optarg; break;
    case 'T': cx.train_file = optarg; break;
    case 'W': weights_out = optarg; break;
    case 'N': emit_net_out = optarg, emit_net_flags = 0; break;
    case 'n': emit_net_out = optarg, emit_net_flags = EMIT_NET_PLAIN; break;
    case 'E': model.emit_cuda = optarg; break;
    case 'A': {
      CgModelTarget t;
      if (cg_model_target(optarg, &t)) {
        fprintf(stderr, "netc: error: --arch must be one of %s, not '%s'\n", cg_model_arches(), optarg);
        return EXIT_USAGE;
      }
      model.arch = optarg;
      break;
    }
    case 'h': usage(stdout); return 0;
    case 'V': printf("netc %s\n", NETC_VERSION); return 0;
    case ':': fprintf(stderr, "netc: error: option '%s' needs a value\n", argv[optind - 1]); return EXIT_USAGE;
    default:
      fprintf(stderr, "netc: error: unknown option '%s' (see netc --help)\n", argv[optind - 1]);
      return EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, optind == argc ? "netc: error: no input file\n" : "netc: error: more than one input file\n");
    usage(stderr);
    return EXIT_USAGE;
  }
  const char *path = argv[optind];
  if (cx.train_file && !compile_is_onnx(path)) {
    fprintf(stderr, "netc: error: --train is for .onnx models; '%s' has its own train section\n", path);
    return EXIT_USAGE;
  }
  if (weights_out && !compile_is_onnx(path)) {
    fprintf(stderr, "netc: error: --weights-out is for .onnx models; '%s' holds no weights\n", path);
    return EXIT_USAGE;
  }
  if (overwrites_input(path, model.out, emit_net_out, cx.dump_dir, model.emit_cuda)) return EXIT_USAGE;
  if ((cx.dump_dir && make_output_dir("dump directory", cx.dump_dir)) ||
      (model.emit_cuda && make_output_dir("directory", model.emit_cuda)))
    return EXIT_INPUT;
  Diag d;
  diag_init(&d, stderr);
  Arena arena;
  arena_init(&arena);
  cx.d = &d;
  Int8Scales scales;
  if (scales_path) {
    if (int8_scales_read(&arena, &d, scales_path, &scales)) {
      diag_finish(&d);
      arena_free(&arena);
      return EXIT_INPUT;
    }
    cx.int8_scales = &scales;
  }
  size_t len = 0;
  char *src = compile_read_file(path, &len, &d);
  IrGraph *g = !src                    ? NULL
               : compile_is_onnx(path) ? compile_onnx(&arena, &d, path, src, len, cx.train_file, weights_out, NULL)
                                       : compile_source(&arena, &d, path, src, len, NULL);
  /* the forward graph's totals at the size asked for (pipeline_run would resize it too) */
  if (g && cx.image_hw[0] && ir_resize_image(g, cx.image_hw[0], cx.image_hw[1], &d)) g = NULL;
  if (g && summary) summary_print(stdout, g);
  /* the forward graph, before any pass, as a .net file */
  if (g && emit_net_out && emit_net_write(emit_net_out, g, &d, path, emit_net_flags)) g = NULL;
  int ok = g && pipeline_run(&g, &cx) == 0;
  if (ok && summary) summary_print_memory(stdout, g);
  /* the code generation switches of the environment (opts.h), read once */
  NetcOpts opts;
  char why[512];
  if (ok && (model.out || model.emit_cuda) && opts_from_env(&opts, why, sizeof why)) {
    fprintf(stderr, "netc: error: %s\n", why);
    ok = 0;
  }
  model.opts = &opts;
  if (ok && (model.out || model.emit_cuda)) ok = cg_model_write(path, &cx, &model) == 0;
  if (ok && !d.nerrors && !summary && !cx.dump_dir && !cx.print_after && !model.out && !model.emit_cuda &&
      !weights_out && !emit_net_out) {
    int npasses, ran = 0;
    pipeline_passes(&npasses);
    for (int i = 0; i < npasses; i++) ran += !(cx.disabled & (1u << i));
    fprintf(stderr,
            "netc: %s: compiled the %s graph (%d ops after %d passes); nothing written "
            "(use -o model.so, --summary, --dump-ir=DIR or --emit-cuda=DIR)\n",
            path, cx.inference ? "inference" : "training", g->nnode, ran);
  }
  diag_finish(&d);
  arena_free(&arena);
  free(src);
  return ok && !d.nerrors ? 0 : EXIT_INPUT;
}
