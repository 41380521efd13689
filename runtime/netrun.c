/* netrun.c - the netrun command line: train a network.
 *
 *   netrun train MODEL.net [--data DIR] [--epochs N] [--train-images N]
 *                          [--test-images N] [--device cpu|gpu] [--seed N]
 *
 * Today netrun compiles the .net file in-process (the same pipeline as
 * netc) and trains it on the CPU executor over Fashion-MNIST in IDX form
 * (Debian's dataset-fashion-mnist by default), reporting loss, images/s and
 * test accuracy after every epoch.  The GPU back end, model.so files and
 * the other subcommands come with the runtime's GPU work.
 *
 * Exit status: 0 success, 1 a failure of the run or its input, 2 usage. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "rt_idx.h"
#include "rt_train_cpu.h"

enum { EXIT_FAIL = 1, EXIT_USAGE = 2 };

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
static const float FMNIST_MEAN = 0.2860f, FMNIST_STD = 0.3530f; /* of the training images, x/255 */

static void usage(FILE *f) {
  fprintf(f,
          "usage: netrun train MODEL.net [options]\n"
          "\n"
          "Trains MODEL on Fashion-MNIST (IDX files) and reports test accuracy.\n"
          "\n"
          "options:\n"
          "  --data DIR           folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]\n"
          "                       (default " DEFAULT_DATA ")\n"
          "  --epochs N           epochs (default: the model's train section)\n"
          "  --train-images N     use the first N training images (default: all)\n"
          "  --test-images N      evaluate on the first N test images (default: all)\n"
          "  --seed N             initialization and shuffling seed (default 1)\n"
          "  --device cpu|gpu     where to train (default cpu; the GPU back end is not built yet)\n"
          "  -h, --help           show this help\n");
}

static int parse_count(const char *opt, const char *s, long long max, long long *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || v < 1 || v > max) {
    fprintf(stderr, "netrun: error: %s must be an integer in 1..%lld, not '%s'\n", opt, max, s);
    return -1;
  }
  *out = v;
  return 0;
}

static int on_epoch(const RtTrainEpoch *e, void *user) {
  (void)user;
  printf("epoch %lld: %lld steps, loss %.4f (first %.4f, last %.4f), lr %.4g, %.0f images/s, "
         "test accuracy %.2f%% on %lld images\n",
         (long long)e->epoch + 1, (long long)e->steps, e->loss_mean, e->loss_head, e->loss_tail, e->lr_last,
         e->images_per_s, 100 * e->test_accuracy, (long long)e->test_n);
  fflush(stdout);
  return 0;
}

/* Loads DIR/PREFIX-images-idx3-ubyte.gz (or without .gz) and its labels. */
static int load_set(const char *dir, const char *prefix, RtIdxSet *set) {
  char img[4096], lab[4096], err[512];
  for (int gz = 1; gz >= 0; gz--) {
    snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte%s", dir, prefix, gz ? ".gz" : "");
    snprintf(lab, sizeof lab, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gz ? ".gz" : "");
    FILE *f = fopen(img, "rb");
    if (!f && gz) continue;
    if (f) fclose(f);
    if (rt_idx_load(img, lab, set, err, sizeof err) == RT_IDX_OK) return 0;
    fprintf(stderr, "netrun: error: %s\n", err);
    return -1;
  }
  return -1;
}

static IrGraph *compile_model(Arena *a, const char *path, int inference) {
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d, .out = stdout, .inference = inference, .precision = IR_DT_F16};
  IrGraph *g = compile_file(a, &d, path, &cx);
  diag_finish(&d);
  return g;
}

static int cmd_train(int argc, char **argv) {
  static const struct option longopts[] = {
      {"data", required_argument, NULL, 'd'},         {"epochs", required_argument, NULL, 'e'},
      {"train-images", required_argument, NULL, 't'}, {"test-images", required_argument, NULL, 'T'},
      {"seed", required_argument, NULL, 's'},         {"device", required_argument, NULL, 'D'},
      {"help", no_argument, NULL, 'h'},               {NULL, 0, NULL, 0},
  };
  const char *data = DEFAULT_DATA;
  long long epochs = 0, ntrain = 0, ntest = 0, seed = 1;
  int c;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
    case 'd': data = optarg; break;
    case 'e': if (parse_count("--epochs", optarg, 100000, &epochs)) return EXIT_USAGE; break;
    case 't': if (parse_count("--train-images", optarg, 1LL << 40, &ntrain)) return EXIT_USAGE; break;
    case 'T': if (parse_count("--test-images", optarg, 1LL << 40, &ntest)) return EXIT_USAGE; break;
    case 's': if (parse_count("--seed", optarg, 1LL << 62, &seed)) return EXIT_USAGE; break;
    case 'D':
      if (strcmp(optarg, "gpu") == 0) {
        fprintf(stderr, "netrun: error: --device gpu: the GPU back end is not built yet; use --device cpu\n");
        return EXIT_FAIL;
      }
      if (strcmp(optarg, "cpu") != 0) {
        fprintf(stderr, "netrun: error: --device must be cpu or gpu, not '%s'\n", optarg);
        return EXIT_USAGE;
      }
      break;
    case 'h': usage(stdout); return 0;
    case ':': fprintf(stderr, "netrun: error: option '%s' needs a value\n", argv[optind - 1]); return EXIT_USAGE;
    default: fprintf(stderr, "netrun: error: unknown option '%s'\n", argv[optind - 1]); return EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "netrun: error: train takes one MODEL.net\n");
    usage(stderr);
    return EXIT_USAGE;
  }
  const char *model = argv[optind];
  Arena arena;
  arena_init(&arena);
  RtIdxSet train = {0}, test = {0};
  int status = EXIT_FAIL;
  IrGraph *g_train = compile_model(&arena, model, 0);
  IrGraph *g_infer = g_train ? compile_model(&arena, model, 1) : NULL;
  if (g_infer && load_set(data, "train", &train) == 0 && load_set(data, "t10k", &test) == 0) {
    int64_t sample = (int64_t)train.rows * train.cols;
    RtTrainData td = {train.images, train.labels, ntrain && ntrain < train.n ? ntrain : train.n, sample};
    RtTrainData vd = {test.images, test.labels, ntest && ntest < test.n ? ntest : test.n, sample};
    RtTrainCfg cfg = {.epochs = epochs, .seed = (uint64_t)seed, .init = 1, .mean = FMNIST_MEAN,
                      .std = FMNIST_STD, .on_epoch = on_epoch};
    RtTrainResult res = {0};
    char err[RT_TRAIN_ERRMAX];
    printf("netrun: training %s on the CPU: %lld training and %lld test images from %s\n", model,
           (long long)td.n, (long long)vd.n, data);
    fflush(stdout);
    RtTrainStatus st = rt_train_cpu(g_train, g_infer, &td, &vd, &cfg, &res, err, sizeof err);
    if (st == RT_TRAIN_OK) {
      printf("netrun: %lld steps, loss %.4f -> %.4f, %.0f images/s, test accuracy %.2f%%\n",
             (long long)res.steps, res.loss_first, res.loss_last, res.images_per_s, 100 * res.test_accuracy);
      status = 0;
    } else {
      fprintf(stderr, "netrun: error: %s: %s\n", model, err);
    }
  }
  rt_idx_free(&train);
  rt_idx_free(&test);
  arena_free(&arena);
  return status;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : 0;
  }
  if (strcmp(argv[1], "train") == 0) return cmd_train(argc - 1, argv + 1);
  fprintf(stderr, "netrun: error: unknown command '%s' (see netrun --help)\n", argv[1]);
  return EXIT_USAGE;
}
