/* netrun.c - the netrun command line, over the public API (net.h).
 *
 *   netrun train MODEL [--device auto|cpu|gpu] [--data DIR | --synthetic]
 *                [--epochs N] [--steps N] [--batch N] [--log FILE.jsonl]
 *                [--checkpoint FILE --every K] [--train-images N]
 *                [--test-images N] [--seed N] [--workers N] [--augment KIND] [--decoder D]
 *                [--accum K] [--export OUT] [--weights W | --resume CKPT]
 *   netrun step MODEL --weights W --inputs B --out OUT [--lr X]
 *               [--loss-scale S] [--precision fp32|fp16|bf16|fp8] [--device ...]
 *   netrun infer MODEL --weights W --inputs B --out OUT [--batch N] [--device ...]
 *   netrun bench MODEL [--batch N] [--inference] [--steps N] [--device ...]
 *               (no GPU: refused unless --device cpu)
 *   netrun export MODEL [--weights IN | --seed N] --out OUT [--batches-tracked N]
 *   netrun --version
 *
 * MODEL is a model.so from `netc -o`, a .net file or an .onnx model (compiled in-process;
 * an .onnx model with the default train section, docs/onnx.md).
 * The device is the GPU when a driver and a GPU are present, else the CPU;
 * `--device gpu` without one fails with "no GPU: why".  `step` runs one
 * training step from given weights on a given batch and writes everything
 * it computed (loss, logits, gradients, updated weights) under torchvision's
 * names: the check of netc against PyTorch (tests/torch/).  `train --data
 * DIR` reads an ImageFolder JPEG data set when DIR holds train/ and test/
 * (or val/) class folders, else a Fashion-MNIST IDX folder (netrun_data.h;
 * neither: an error saying what DIR lacks for each).
 *
 * This file is the only one that prints or exits.  Exit status: 0 success,
 * 1 a failure of the run or its input, 2 usage. */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net.h"
#include "netrun_data.h"
#include "netrun_files.h"
#include "netrun_launch.h"
#include "netrun_plot.h"
#include "netrun_opt.h"
#include "netrun_profile.h"
#include "netrun_report.h"
#include "resize.h"
#include "rt_safetensors.h"
#include "rt_weights.h"

enum { EXIT_FAIL = NETRUN_EXIT_FAIL, EXIT_USAGE = NETRUN_EXIT_USAGE };
enum {
  CALIBRATION_IMAGES = 1024, /* calibrate --data: the training images taken unless --images */
  REPORT_LAYERS = 10,        /* infer --report: the layers listed, largest error first */
};

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

static void usage(FILE *f) {
  fprintf(f, "usage: netrun train MODEL [options]\n"
             "       netrun step MODEL --weights W --inputs B --out OUT [options]\n"
             "       netrun infer MODEL --weights W --inputs B|--data DIR --out OUT [options]\n"
             "       netrun calibrate MODEL --weights W --inputs B|--data DIR --out SCALES [options]\n"
             "       netrun export MODEL [--weights IN | --seed N] --out OUT [options]\n"
             "       netrun bench MODEL [options]\n"
             "       netrun profile MODEL [options]   (netrun profile --help)\n"
             "       netrun plot LOG.jsonl OUT.png\n"
             "       netrun info                      (exit 0 when a GPU is available)\n"
             "\n"
             "MODEL is a model.so (netc -o), a .net file or an .onnx model (with the default train section).\n"
             "\n"
             "common options:\n"
             "  --device D           auto (default: the GPU when present, else the CPU), cpu or gpu\n"
             "  --batch N            batch size (default: the model's)\n"
             "  --cache DIR          NVRTC kernel cache (default $XDG_CACHE_HOME/netc or ~/.cache/netc)\n"
             "  --tune               GPU: time cuDNN's candidate engines for each convolution once, keep the\n"
             "                       fastest (remembered in the cache directory's cudnn-tune.txt)\n"
             "  --gpus N             train, bench: N processes on this machine, one per GPU (data parallel: each\n"
             "                       its batch, gradients averaged with NCCL); --nproc N: N on whichever device\n"
             "                       (with --device cpu, CPU ranks); other launchers set RANK, WORLD_SIZE,\n"
             "                       LOCAL_RANK, MASTER_ADDR and MASTER_PORT as torchrun does\n"
             "  --sync-bn            train, bench, with several ranks: batch norm by the statistics of every\n"
             "                       rank's batch together (N ranks of batch B train as one of N x B)\n"
             "  -h, --help           show this help\n"
             "  -V, --version        show the version\n"
             "\n"
             "train: trains MODEL, with a progress line (loss, images/s, ETA) and test accuracy per epoch.\n"
             "  --data DIR           an ImageFolder data set: DIR/train/<class>/*.jpg and DIR/test/ (or DIR/val/),\n"
             "                       or a Fashion-MNIST IDX folder with\n"
             "                       {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (default " DEFAULT_DATA ")\n"
             "  --workers N          ImageFolder data: reading and decoding threads (default: every processor)\n"
             "  --decoder D          ImageFolder data: who decodes the training JPEGs: gpu (nvJPEG; crop, resize\n"
             "                       and flip on the GPU), cpu (libjpeg-turbo on the workers) or auto (default:\n"
             "                       the GPU's JPEG engines where it has them, else the CPU)\n"
             "  --cpu-share P        with the GPU decoder: the percentage of images the workers decode beside it\n"
             "                       (0: none; default: balanced each epoch from the rates of the one before)\n"
             "  --augment KIND       ImageFolder data: auto (default: rrc from 64 pixels up, else pad_crop),\n"
             "                       rrc, pad_crop, flip or none\n"
             "  --synthetic          seeded synthetic images instead (learnable: class = brightness)\n"
             "  --epochs N           epochs (default: the model's train section)\n"
             "  --steps N            stop after N steps\n"
             "  --accum K            gradient accumulation: each step runs K batches forward and backward and\n"
             "                       updates once with their mean gradient (an effective batch of K * batch);\n"
             "                       steps, epochs and the schedule count updates (default 1)\n"
             "  --train-images N     use the first N training images (default: all)\n"
             "  --test-images N      evaluate on the first N test images (default: all)\n"
             "  --seed N             initialization, shuffling and synthetic data seed (default 1)\n"
             "  --log FILE.jsonl     one JSON object per step and per epoch\n"
             "  --checkpoint FILE    save a checkpoint (safetensors: weights, state, position) every K steps\n"
             "                       and at the end, replaced atomically\n"
             "  --every K            checkpoint interval in steps (default: only at the end)\n"
             "  --resume FILE        continue the run a --checkpoint FILE was written by (same settings): its\n"
             "                       weights, momentum, loss scale, step and place in the epoch; --log appends\n"
             "  --weights FILE       start from these weights (a weights file or a checkpoint: fine-tuning) at\n"
             "                       step 0 with this run's schedule; not with --resume\n"
             "  Ctrl-C (SIGINT) or SIGTERM ends the step in flight, writes the checkpoint (--checkpoint FILE, else\n"
             "  MODEL-interrupted.ckpt.safetensors here, never replacing one), closes the log, prints the command\n"
             "  that resumes, and exits 130 (SIGTERM: 143); a second signal quits at once\n"
             "  --plot OUT.png       draw the loss and accuracy curves of --log into OUT.png at the end\n"
             "  --export OUT         at the end, write the trained weights as a PyTorch state_dict (as\n"
             "                       `netrun export` does: torchvision's keys, no optimizer state)\n"
             "  --mean R,G,B, --std R,G,B  per-channel normalization of x/255 (default: ImageNet's for\n"
             "                       ImageFolder data, Fashion-MNIST's for IDX; given together)\n"
             "\n"
             "step: one training step from the weights in W (safetensors, torchvision names, filters KCRS)\n"
             "on the batch in B (`image` f32 [N,C,H,W], `label` i64 or i32 [N]); writes to OUT `loss`,\n"
             "`logits`, `P.grad` for every parameter P (unscaled, f32, KCRS) and every parameter and state\n"
             "after the update.  With --steps S, B holds S batches back to back (N = S * batch), trained\n"
             "in order; OUT then has the last step's results.\n"
             "  --curve FILE.csv     write step,loss,loss_scale of every step\n"
             "  --weights FILE       parameters and running statistics (momentum buffers optional: 0)\n"
             "  --inputs FILE        the batch: `image` and `label` only (infer ignores `label`); a NaN or an\n"
             "                       infinity in it is refused\n"
             "  --out FILE           where the results go (replaced atomically)\n"
             "  --lr X               learning rate (default: the train section's)\n"
             "  --loss-scale S       loss scale (default: the train section's static scale, else 1)\n"
             "  --precision P        fp32, fp16, bf16 or fp8, for a .net MODEL (default: the train section's, else\n"
             "                       fp16; bench and infer take it too; fp8: fp16 with every convolution but the\n"
             "                       first in FP8 E4M3, the CPU only for now)\n"
             "  --image-size S|HxW   a .net or .onnx MODEL's image height and width (default: as the file\n"
             "                       declares; train, infer and bench take it too; a model.so keeps its own)\n"
             "  --int8 L1,L2|all     a .net or .onnx MODEL's layers to run in int8 (all: every convolution but the\n"
             "                       first; netc --int8; infer and bench on the GPU too, train on the CPU only)\n"
             "  --int8-scales FILE   with --int8: their inputs' calibrated scales (netrun calibrate)\n"
             "  --memory-limit M     at most M GiB (40) or M%% of the device's memory (50%%) for the model's\n"
             "                       activations, parameters, scratch and cuDNN workspace (train, infer, bench too);\n"
             "                       a batch that cannot fit is refused with the largest one that would\n"
             "\n"
             "infer: logits of the images in B (`image` f32 [N,C,H,W], normalized) with the weights in W,\n"
             "written to OUT as `logits` f32 [N, classes].\n"
             "  --data DIR           instead of B: DIR's test images (a data set as train --data takes it),\n"
             "                       normalized as training does (--mean/--std); --images N takes N of them\n"
             "  --report             with --int8 (or --precision fp8) and labels: top-1 and top-5 of that model and\n"
             "                       of the same weights without it (fp16 for fp8), their top-1 agreement and logit\n"
             "                       difference, and the layers whose error grows most (both models on the CPU)\n"
             "\n"
             "calibrate: the int8 scales of MODEL's layers (--int8, default all: every convolution but the first)\n"
             "from the images in B (`image` f32 [N,C,H,W], whole batches), or --data DIR's training images\n"
             "(--images N of them, default 1024, evenly spread), written to OUT for --int8-scales:\n"
             "  --method M           entropy (default), percentile, max or mse\n"
             "  --percentile P       for percentile: the share of magnitudes kept unclipped (default 99.99)\n"
             "\n"
             "export: the weights in IN (a --checkpoint file or a weights file) as a PyTorch state_dict in OUT:\n"
             "exactly the keys of torchvision's model (every parameter and running statistic, f32, filters\n"
             "KCRS, and `<bn>.num_batches_tracked` i64 for every batch norm), no momentum or loss scale, so\n"
             "that model.load_state_dict(safetensors.torch.load_file(OUT), strict=True) takes it.  The model\n"
             "is loaded on the CPU unless --device says otherwise.  Without --weights: the initialization\n"
             "`netrun train --seed N` starts from (--seed, default 1), for a comparison from the same weights.\n"
             "  --batches-tracked N  num_batches_tracked (default: the batches a checkpoint's run trained,\n"
             "                       its steps times its accumulation; 0 for a weights file)\n"
             "\n"
             "bench: images/s of the training step (or --inference) on synthetic inputs held on the device:\n"
             "the step captured, 3 warm-up replays, --steps N timed (default 20); prints the peak device memory.\n"
             "Without a GPU it refuses unless --device cpu is given.  A CPU model whose buffers exceed the\n"
             "machine's memory is refused when it is loaded, with their size.\n");
}

typedef struct Opts {
  const char *model, *device, *data, *log, *checkpoint, *weights, *inputs, *out, *precision, *cache, *curve, *plot,
      *resume, *export_to;
  long long epochs, steps, batch, every, ntrain, ntest, seed, workers, accum;
  long long cpu_share;       /* --cpu-share P as P + 1 (0: not given) */
  long long batches_tracked; /* --batches-tracked N as N + 1 (0: not given) */
  const char *augment, *decoder;
  double lr, loss_scale;
  int synthetic, inference, tune, sync_bn;
  float mean3[3], std3[3];
  int mean_set, std_set;
  int64_t image_hw[2];                  /* --image-size (0: the model's) */
  double memory_limit, memory_fraction; /* --memory-limit: GiB as bytes, or a percentage as a fraction */
  const char *int8, *int8_scales;       /* --int8, --int8-scales */
  int report;                           /* infer --report */
  long long images;                     /* calibrate, infer --data: --images N (0: the command's default) */
  const char *method;                   /* calibrate --method */
  double percentile;                    /* calibrate --percentile */
} Opts;

static const char *const DEVICES[] = {"cpu", "gpu", "auto"};
static const char *const AUGMENTS[] = {"auto", "rrc", "pad_crop", "flip", "none"};
static const char *const DECODERS[] = {"auto", "gpu", "cpu"};
static const char *const CALIB_METHODS[] = {"percentile", "max", "mse", "entropy"};

/* Parses argv (argv[0] is the command) with the options `allowed` lists by
 * their short codes.  0, 1 for --help (printed), or an exit status. */
static int parse(int argc, char **argv, const char *allowed, Opts *o) {
  static const struct option longopts[] = {
      {"device", required_argument, NULL, 'D'},
      {"batch", required_argument, NULL, 'b'},
      {"cache", required_argument, NULL, 'K'},
      {"data", required_argument, NULL, 'd'},
      {"synthetic", no_argument, NULL, 'y'},
      {"epochs", required_argument, NULL, 'e'},
      {"steps", required_argument, NULL, 'n'},
      {"train-images", required_argument, NULL, 't'},
      {"test-images", required_argument, NULL, 'T'},
      {"seed", required_argument, NULL, 's'},
      {"log", required_argument, NULL, 'L'},
      {"checkpoint", required_argument, NULL, 'c'},
      {"every", required_argument, NULL, 'k'},
      {"weights", required_argument, NULL, 'w'},
      {"inputs", required_argument, NULL, 'i'},
      {"out", required_argument, NULL, 'o'},
      {"lr", required_argument, NULL, 'l'},
      {"loss-scale", required_argument, NULL, 'S'},
      {"precision", required_argument, NULL, 'p'},
      {"inference", no_argument, NULL, 'I'},
      {"curve", required_argument, NULL, 'C'},
      {"tune", no_argument, NULL, 'u'},
      {"workers", required_argument, NULL, 'W'},
      {"augment", required_argument, NULL, 'A'},
      {"decoder", required_argument, NULL, 'J'},
      {"cpu-share", required_argument, NULL, 'Q'},
      {"plot", required_argument, NULL, 'P'},
      {"resume", required_argument, NULL, 'R'},
      {"mean", required_argument, NULL, 'M'},
      {"std", required_argument, NULL, 'Z'},
      {"accum", required_argument, NULL, 'a'},
      {"sync-bn", no_argument, NULL, 'V'},
      {"batches-tracked", required_argument, NULL, 'G'},
      {"image-size", required_argument, NULL, 'z'},
      {"memory-limit", required_argument, NULL, 'm'},
      {"int8", required_argument, NULL, '8'},
      {"report", no_argument, NULL, 'r'},
      {"method", required_argument, NULL, 'H'},
      {"percentile", required_argument, NULL, 'E'},
      {"int8-scales", required_argument, NULL, 'F'},
      {"images", required_argument, NULL, 'N'},
      {"export", required_argument, NULL, 'X'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c, li = 0;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":h", longopts, &li)) != -1) {
    if (c != 'h' && c != ':' && c != '?' && !strchr(allowed, c)) {
      fprintf(stderr, "netrun: error: %s does not take '--%s'\n", argv[0], longopts[li].name);
      return EXIT_USAGE;
    }
    switch (c) {
    case 'm': {
      /* G (GiB) or P% (of the device's memory) */
      char *end;
      double v = strtod(optarg, &end);
      int pct = *end == '%';
      if (pct) end++;
      if (!*optarg || *end || !(v > 0) || (pct && v > 100) || (!pct && v > 1e6)) {
        fprintf(stderr,
                "netrun: error: --memory-limit takes GiB (40) or a share of the device's memory (50%%), not '%s'\n",
                optarg);
        return EXIT_USAGE;
      }
      if (pct)
        o->memory_fraction = v / 100, o->memory_limit = 0;
      else
        o->memory_limit = v * 1073741824.0, o->memory_fraction = 0;
      break;
    }
    case '8': o->int8 = optarg; break;
    case 'r': o->report = 1; break;
    case 'H':
      if (netrun_opt_word("--method", optarg, CALIB_METHODS, 4)) return EXIT_USAGE;
      o->method = optarg;
      break;
    case 'E':
      if (netrun_opt_real("--percentile", optarg, 100, &o->percentile)) return EXIT_USAGE;
      break;
    case 'F': o->int8_scales = optarg; break;
    case 'N':
      if (netrun_opt_int("--images", optarg, 1, 1LL << 40, &o->images)) return EXIT_USAGE;
      break;
    case 'z':
      if (resize_parse(optarg, o->image_hw)) {
        fprintf(stderr, "netrun: error: --image-size takes S or HxW, each 1..%d, not '%s'\n", RESIZE_MAX_SIDE, optarg);
        return EXIT_USAGE;
      }
      break;
    case 'D':
      if (netrun_opt_word("--device", optarg, DEVICES, 3)) return EXIT_USAGE;
      o->device = optarg;
      break;
    case 'b':
      if (netrun_opt_int("--batch", optarg, 1, 1 << 20, &o->batch)) return EXIT_USAGE;
      break;
    case 'K': o->cache = optarg; break;
    case 'd': o->data = optarg; break;
    case 'y': o->synthetic = 1; break;
    case 'e':
      if (netrun_opt_int("--epochs", optarg, 1, 100000, &o->epochs)) return EXIT_USAGE;
      break;
    case 'n':
      if (netrun_opt_int("--steps", optarg, 1, 1LL << 40, &o->steps)) return EXIT_USAGE;
      break;
    case 't':
      if (netrun_opt_int("--train-images", optarg, 1, 1LL << 40, &o->ntrain)) return EXIT_USAGE;
      break;
    case 'T':
      if (netrun_opt_int("--test-images", optarg, 1, 1LL << 40, &o->ntest)) return EXIT_USAGE;
      break;
    case 's':
      if (netrun_opt_int("--seed", optarg, 1, 1LL << 62, &o->seed)) return EXIT_USAGE;
      break;
    case 'L': o->log = optarg; break;
    case 'c': o->checkpoint = optarg; break;
    case 'k':
      if (netrun_opt_int("--every", optarg, 1, 1LL << 40, &o->every)) return EXIT_USAGE;
      break;
    case 'w': o->weights = optarg; break;
    case 'i': o->inputs = optarg; break;
    case 'o': o->out = optarg; break;
    case 'l':
      if (netrun_opt_real("--lr", optarg, 1e30, &o->lr)) return EXIT_USAGE;
      break;
    case 'S':
      if (netrun_opt_real("--loss-scale", optarg, 1e30, &o->loss_scale)) return EXIT_USAGE;
      break;
    case 'p':
      if (netrun_opt_precision(optarg)) return EXIT_USAGE;
      o->precision = optarg;
      break;
    case 'I': o->inference = 1; break;
    case 'C': o->curve = optarg; break;
    case 'u': o->tune = 1; break;
    case 'W':
      if (netrun_opt_int("--workers", optarg, 1, 256, &o->workers)) return EXIT_USAGE;
      break;
    case 'P': o->plot = optarg; break;
    case 'M':
      if (netrun_opt_rgb("--mean", optarg, 0, o->mean3)) return EXIT_USAGE;
      o->mean_set = 1;
      break;
    case 'Z':
      if (netrun_opt_rgb("--std", optarg, 1, o->std3)) return EXIT_USAGE;
      o->std_set = 1;
      break;
    case 'R': o->resume = optarg; break;
    case 'X': o->export_to = optarg; break;
    case 'V': o->sync_bn = 1; break;
    case 'a':
      if (netrun_opt_int("--accum", optarg, 1, 1 << 20, &o->accum)) return EXIT_USAGE;
      break;
    case 'A':
      if (netrun_opt_word("--augment", optarg, AUGMENTS, 5)) return EXIT_USAGE;
      o->augment = optarg;
      break;
    case 'Q':
      if (netrun_opt_int("--cpu-share", optarg, 0, 100, &o->cpu_share)) return EXIT_USAGE;
      o->cpu_share++;
      break;
    case 'G':
      if (netrun_opt_int("--batches-tracked", optarg, 0, 1LL << 62, &o->batches_tracked)) return EXIT_USAGE;
      o->batches_tracked++;
      break;
    case 'J':
      if (netrun_opt_word("--decoder", optarg, DECODERS, 3)) return EXIT_USAGE;
      o->decoder = optarg;
      break;
    case 'h': usage(stdout); return 1;
    default: return netrun_opt_bad(c, argv, NULL);
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "netrun: error: %s takes one MODEL\n", argv[0]);
    usage(stderr);
    return EXIT_USAGE;
  }
  o->model = argv[optind];
  return 0;
}

static NetModel *load(const Opts *o, int64_t batch, int inference_only, int keep_grads) {
  int ordinal = 0; /* a rank's GPU: LOCAL_RANK (netrun_launch.h) */
  int ranks = netrun_rank_env(&ordinal);
  NetLoadOpts lo = {.device = o->device,
                    /* --sync-bn among several ranks: GPU kernels whose statistics the ranks add up (opts.h) */
                    .options = ranks && o->sync_bn && !inference_only ? "sync_bn=1" : NULL,
                    .gpu = ordinal,
                    .batch = batch,
                    .seed = (uint64_t)o->seed,
                    .precision = o->precision,
                    .cache_dir = o->cache,
                    .inference_only = inference_only,
                    .keep_grads = keep_grads,
                    .tune = o->tune,
                    .image_h = o->image_hw[0],
                    .image_w = o->image_hw[1],
                    .memory_limit = o->memory_limit,
                    .memory_fraction = o->memory_fraction,
                    .int8 = o->int8,
                    .int8_scales = o->int8_scales};
  NetModel *m = NULL;
  if (net_load(o->model, &lo, &m)) fprintf(stderr, "netrun: error: %s\n", net_last_error());
  return m;
}

/* Every output of the command against every input, and each output's
 * directory, before any work (netrun_files.h); data_dir: an IDX --data. */
static int check_files(const Opts *o, const char *data_dir) {
  const char *ins[] = {o->model, o->weights, o->inputs, o->resume};
  const NetrunOutput outs[] = {{o->out, 0, NULL},       {o->checkpoint, 0, o->resume},
                               {o->export_to, 0, NULL}, {o->plot, 0, NULL},
                               {o->log, 1, NULL},       {o->curve, 1, NULL}};
  return netrun_files_check(ins, sizeof ins / sizeof ins[0], data_dir, outs, sizeof outs / sizeof outs[0]);
}

static const char *where(const NetModel *m) { return strcmp(net_device(m), "gpu") == 0 ? "the GPU" : "the CPU"; }

/* --- train ------------------------------------------------------------- */

typedef struct Progress {
  FILE *log;
  int64_t every;
  int64_t warned;     /* unreadable images already reported */
  const char *saved;  /* the last checkpoint written (NULL: none) */
  int64_t saved_step; /* its step */
  int world;          /* ranks of a data-parallel run: the images/s shown are all of theirs */
  int rank;           /* this process's */
} Progress;

/* Warnings of the run's settings come alike from every rank of a data-parallel run: rank 0 says them. */
static void on_warning(const char *message, void *user) {
  const Progress *p = user;
  if (p && p->rank != 0) return;
  fprintf(stderr, "netrun: warning: %s\n", message);
}

/* The GPU's numbers that NVML gave as JSON members, each after ", ". */
static const char *watch_members(const NetGpuWatch *w, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  if (w->power_w >= 0) n += (size_t)snprintf(buf + n, cap - n, ", \"power_w\": %.1f", w->power_w);
  if (w->sm_clock_mhz >= 0 && n < cap)
    n += (size_t)snprintf(buf + n, cap - n, ", \"sm_clock_mhz\": %d", w->sm_clock_mhz);
  if (w->temp_c >= 0 && n < cap) n += (size_t)snprintf(buf + n, cap - n, ", \"temp_c\": %d", w->temp_c);
  if (w->ecc_corrected >= 0 && n < cap)
    n += (size_t)snprintf(buf + n, cap - n, ", \"ecc_corrected\": %lld, \"ecc_uncorrected\": %lld", w->ecc_corrected,
                          w->ecc_uncorrected);
  const struct {
    const char *name;
    double v;
  } link[] = {{"pcie_tx_mb_s", w->pcie_tx_mb_s},
              {"pcie_rx_mb_s", w->pcie_rx_mb_s},
              {"nvlink_tx_mb_s", w->nvlink_tx_mb_s},
              {"nvlink_rx_mb_s", w->nvlink_rx_mb_s}};
  for (size_t k = 0; k < sizeof link / sizeof link[0]; k++)
    if (link[k].v >= 0 && n < cap) n += (size_t)snprintf(buf + n, cap - n, ", \"%s\": %.1f", link[k].name, link[k].v);
  return buf;
}

static int on_step(const NetStepInfo *s, void *user) {
  Progress *p = user;
  if (p->log) {
    fprintf(p->log,
            "{\"step\": %lld, \"epoch\": %lld, \"loss\": %.6g, \"lr\": %.6g, \"images_per_s\": %.1f, "
            "\"data_wait_s\": %.4g, \"decoder\": \"%s\", \"input_images_per_s\": %.1f, \"step_images_per_s\": %.1f, "
            "\"bound\": \"%s\"",
            (long long)s->step, (long long)s->epoch + 1, s->loss, s->lr, s->images_per_s * p->world, s->data_wait_s,
            s->decoder ? s->decoder : "", s->input_images_per_s, s->step_images_per_s,
            s->input_bound ? "input" : "step");
    if (s->decode_gpu_images_per_s > 0)
      fprintf(p->log, ", \"decode_gpu_images_per_s\": %.1f, \"decode_host_images_per_s\": %.1f",
              s->decode_gpu_images_per_s, s->decode_host_images_per_s);
    if (s->rank_step_images_per_s) {
      fprintf(p->log, ", \"rank_step_images_per_s\": [");
      for (int k = 0; k < s->ranks; k++) fprintf(p->log, "%s%.1f", k ? ", " : "", s->rank_step_images_per_s[k]);
      fprintf(p->log, "], \"slowest_rank\": %d", s->slowest_rank);
    }
    if (s->allreduce_ms >= 0)
      fprintf(p->log, ", \"allreduce_ms\": %.3f, \"allreduce_exposed_ms\": %.3f", s->allreduce_ms,
              s->allreduce_exposed_ms);
    char w[512];
    fprintf(p->log, "%s}\n", watch_members(&s->gpu, w, sizeof w));
    fflush(p->log); /* a record at a time: a killed run leaves at most a torn last line */
  }
  if (s->step % p->every == 0 || s->step == s->steps_total) {
    double eta = s->images_per_s > 0 ? s->elapsed_s * (double)(s->steps_total - s->step) / (double)s->step : 0;
    double wait = s->elapsed_s > 0 ? 100 * s->data_wait_s / s->elapsed_s : 0;
    printf("step %lld/%lld  epoch %lld/%lld  loss %.4f  lr %.4g  %.0f images/s  ETA %.0f s  data wait %.0f%%",
           (long long)s->step, (long long)s->steps_total, (long long)s->epoch + 1, (long long)s->epochs, s->loss, s->lr,
           s->images_per_s * p->world, eta, wait);
    if (s->decoder) printf("  input %s", s->decoder);
    if (s->input_images_per_s > 0) printf(" %.0f/s", s->input_images_per_s);
    if (s->step_images_per_s > 0)
      printf(", step %.0f/s: %s-bound", s->step_images_per_s, s->input_bound ? "input" : "step");
    if (s->rank_step_images_per_s)
      printf("  slowest rank %d: step %.0f/s", s->slowest_rank, s->rank_step_images_per_s[s->slowest_rank]);
    if (s->allreduce_ms >= 0) printf("  all-reduce %.1f ms (%.1f exposed)", s->allreduce_ms, s->allreduce_exposed_ms);
    if (s->gpu.power_w >= 0) printf("  %.0f W", s->gpu.power_w);
    if (s->gpu.sm_clock_mhz >= 0) printf(" %d MHz", s->gpu.sm_clock_mhz);
    if (s->gpu.temp_c >= 0) printf(" %d C", s->gpu.temp_c);
    if (s->gpu.nvlink_tx_mb_s >= 0 && s->gpu.nvlink_rx_mb_s >= 0)
      printf("  NVLink %.1f/%.1f GB/s", s->gpu.nvlink_tx_mb_s / 1000, s->gpu.nvlink_rx_mb_s / 1000);
    if (s->gpu.pcie_tx_mb_s >= 0 && s->gpu.pcie_rx_mb_s >= 0)
      printf("  PCIe %.1f/%.1f GB/s", s->gpu.pcie_tx_mb_s / 1000, s->gpu.pcie_rx_mb_s / 1000);
    printf("\n");
    fflush(stdout);
  }
  return 0;
}

static int on_epoch(const NetEpochInfo *e, void *user) {
  Progress *p = user;
  if (p->log)
    fprintf(p->log,
            "{\"epoch\": %lld, \"steps\": %lld, \"loss_mean\": %.6g, \"test_accuracy\": %.6g, "
            "\"test_top5\": %.6g, \"images_per_s\": %.1f, \"data_wait_s\": %.4g, \"unreadable\": %lld}\n",
            (long long)e->epoch + 1, (long long)e->steps, e->loss_mean, e->test_accuracy, e->test_top5,
            e->images_per_s * p->world, e->data_wait_seconds, (long long)e->unreadable);
  if (p->log) fflush(p->log);
  if (e->unreadable > p->warned) {
    char who[32] = ""; /* each rank reads its own share */
    if (p->world > 1) snprintf(who, sizeof who, "rank %d: ", p->rank);
    fprintf(stderr, "netrun: %swarning: %lld unreadable images skipped so far: %s%s\n", who, (long long)e->unreadable,
            e->unreadable_first, e->unreadable > 3 ? "; ..." : "");
    p->warned = e->unreadable;
  }
  printf("epoch %lld: %lld steps, loss %.4f, %.0f images/s, data wait %.1f s", (long long)e->epoch + 1,
         (long long)e->steps, e->loss_mean, e->images_per_s * p->world, e->data_wait_seconds);
  if (e->test_accuracy >= 0)
    printf(", test accuracy %.2f%% (top-5 %.2f%%) on %lld images", 100 * e->test_accuracy, 100 * e->test_top5,
           (long long)e->test_n);
  printf("\n");
  fflush(stdout);
  return 0;
}

static int on_checkpoint(int64_t step, const char *path, void *user) {
  Progress *p = user;
  p->saved = path, p->saved_step = step;
  printf("checkpoint: step %lld -> %s\n", (long long)step, path);
  fflush(stdout);
  return 0;
}

/* --- interruption ---------------------------------------------------------- */

/* SIGINT or SIGTERM during `train`: the handler only records the signal;
 * net_train polls it (NetTrainConfig.stop) before every step, finishes the
 * step in flight and saves the checkpoint.  A second signal ends netrun at
 * once. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) {
  static const char msg[] = "\nnetrun: stopping after the step in flight (again to quit at once)\n";
  if (stop_signal) _exit(128 + sig);
  stop_signal = sig;
  ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)w;
}

static void catch_stop_signals(int on) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on ? on_stop_signal : SIG_DFL;
  sa.sa_flags = SA_RESTART; /* the loader's reads go on; only the flag changes */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

/* Where an interrupted run without --checkpoint saves itself: MODEL's name
 * without its directory and extension, "-interrupted.ckpt.safetensors", in
 * the current directory; "-interrupted-2" and so on when that exists (never
 * replaced). */
static void interrupted_path(const char *model, char *out, size_t cap) {
  const char *base = strrchr(model, '/');
  base = base ? base + 1 : model;
  size_t n = strcspn(base, ".");
  if (n == 0) n = strlen(base);
  struct stat st;
  for (int k = 1; k < 1000; k++) {
    char num[16] = "";
    if (k > 1) snprintf(num, sizeof num, "-%d", k);
    snprintf(out, cap, "%.*s-interrupted%s.ckpt.safetensors", (int)n, base, num);
    if (lstat(out, &st) != 0) return;
  }
}

/* s in single quotes for a shell, when it needs them. */
static void print_shell_word(const char *s) {
  if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,/:@%") == strlen(s)) {
    printf("%s", s);
    return;
  }
  putchar('\'');
  for (; *s; s++)
    if (*s == '\'')
      printf("'\\''");
    else
      putchar(*s);
  putchar('\'');
}

/* The command that continues the run: this one's arguments without --resume
 * and --weights (the checkpoint holds the weights), then --resume CKPT. */
static void print_resume_command(int argc, char **argv, const char *ckpt) {
  printf("netrun: resume with: netrun");
  for (int i = 0; i < argc; i++) { /* argv[0] is the command */
    const char *a = argv[i];
    int drop = strcmp(a, "--resume") == 0 || strcmp(a, "--weights") == 0;
    if (drop) {
      i++;
      continue;
    }
    if (strncmp(a, "--resume=", 9) == 0 || strncmp(a, "--weights=", 10) == 0) continue;
    putchar(' ');
    print_shell_word(a);
  }
  const char *launch = netrun_launch_option(); /* the ranks' arguments lack --gpus N */
  if (launch) printf(" %s", launch);
  printf(" --resume ");
  print_shell_word(ckpt);
  printf("\n");
}

static int cmd_train(int argc, char **argv) {
  Opts o = {.seed = 1};
  char *copy[256]; /* the arguments in their order, for the resume command (getopt reorders argv) */
  char **given = argc <= 256 ? copy : argv;
  if (argc <= 256) memcpy(copy, argv, sizeof(char *) * (size_t)argc);
  int rc = parse(argc, argv, "DbKdyentTsLckwpWAJQuPRMZaXzm8FV", &o);
  if (rc) return rc == 1 ? 0 : rc;
  if (o.synthetic && o.data) {
    fprintf(stderr, "netrun: error: give --data or --synthetic, not both\n");
    return EXIT_USAGE;
  }
  if (o.every && !o.checkpoint) {
    fprintf(stderr, "netrun: error: --every needs --checkpoint\n");
    return EXIT_USAGE;
  }
  if (o.mean_set != o.std_set) {
    fprintf(stderr, "netrun: error: give --mean and --std together\n");
    return EXIT_USAGE;
  }
  if (o.plot && !o.log) {
    fprintf(stderr, "netrun: error: --plot needs --log (the curves are drawn from it)\n");
    return EXIT_USAGE;
  }
  if (o.weights && o.resume) {
    fprintf(stderr, "netrun: error: give --weights (start a run from them) or --resume (continue a run), not both\n");
    return EXIT_USAGE;
  }
  char train_dir[4096] = "", test_dir[4096] = "", why[4096];
  NetrunLayout layout = o.synthetic ? NETRUN_LAYOUT_NONE
                                    : netrun_data_layout(o.data ? o.data : DEFAULT_DATA, train_dir, test_dir,
                                                         sizeof train_dir, why, sizeof why);
  int folder = layout == NETRUN_LAYOUT_FOLDER;
  if ((o.workers || o.augment || o.decoder || o.cpu_share) && !folder) {
    fprintf(stderr, "netrun: error: --workers, --augment, --decoder and --cpu-share need an ImageFolder --data DIR "
                    "(DIR/train, DIR/test)\n");
    return EXIT_USAGE;
  }
  if (!o.synthetic && layout == NETRUN_LAYOUT_NONE) {
    fprintf(stderr, "netrun: error: %s\n", why);
    return EXIT_FAIL;
  }
  if ((rc = check_files(&o, o.synthetic || folder ? NULL : o.data ? o.data : DEFAULT_DATA))) return rc;
  NetModel *m = load(&o, o.batch, 0, 0);
  if (!m) return EXIT_FAIL;
  /* fine-tuning: the run starts from these weights (a checkpoint's momentum too), at step 0 */
  if (o.weights && net_weights_load(m, o.weights)) {
    fprintf(stderr, "netrun: error: %s\n", net_last_error());
    net_free(m);
    return EXIT_FAIL;
  }
  int rank = 0;
  if (netrun_join(m, o.sync_bn, &rank)) {
    net_free(m);
    return EXIT_FAIL;
  }
  int world = net_dist_world(m);
  if (rank != 0) { /* rank 0 speaks for the run; the others' errors still reach stderr */
    o.log = o.plot = o.export_to = NULL;
    if (!freopen("/dev/null", "w", stdout)) return EXIT_FAIL;
  }
  Progress p = {NULL, 1, 0, NULL, 0, world, rank};
  char stop_ckpt[4096];
  interrupted_path(o.model, stop_ckpt, sizeof stop_ckpt);
  /* a resumed run continues its log */
  if (o.log && !(p.log = fopen(o.log, o.resume ? "a" : "w"))) {
    fprintf(stderr, "netrun: error: cannot write '%s'\n", o.log);
    net_free(m);
    return EXIT_FAIL;
  }
  NetTrainResult r = {0};
  NetTrainConfig c = {.data = o.synthetic ? NET_DATA_SYNTHETIC
                              : folder    ? NET_DATA_FOLDER
                                          : NET_DATA_IDX,
                      .train_dir = train_dir,
                      .test_dir = test_dir,
                      .workers = (int)o.workers,
                      .augment = o.augment,
                      .decoder = o.decoder,
                      .cpu_share = o.cpu_share == 1  ? -1
                                   : o.cpu_share > 1 ? (int)o.cpu_share - 1
                                                     : 0,
                      .idx_dir = o.data ? o.data : DEFAULT_DATA,
                      .train_limit = o.ntrain,
                      .test_limit = o.ntest,
                      .synthetic_n = o.ntrain,
                      .epochs = o.epochs,
                      .steps = o.steps,
                      .seed = (uint64_t)o.seed,
                      .on_step = on_step,
                      .on_epoch = on_epoch,
                      .on_warning = on_warning,
                      .checkpoint = o.checkpoint,
                      .checkpoint_every = o.every,
                      .on_checkpoint = on_checkpoint,
                      .user = &p,
                      .result = &r,
                      .resume = o.resume,
                      .mean3 = {o.mean3[0], o.mean3[1], o.mean3[2]},
                      .std3 = {o.std3[0], o.std3[1], o.std3[2]},
                      .accum_steps = o.accum,
                      .stop = &stop_signal,
                      .stop_checkpoint = stop_ckpt};
  /* about 20 progress lines a run */
  p.every = o.steps ? (o.steps + 19) / 20 : 50;
  char accum[96] = "";
  if (o.accum > 1)
    snprintf(accum, sizeof accum, " x %lld accumulated (%lld images an update)", o.accum,
             (long long)(o.accum * net_batch(m)));
  char ranks[64] = "";
  if (world > 1) snprintf(ranks, sizeof ranks, " on each of %d ranks", world);
  printf("netrun: training %s on %s, batch %lld%s%s, %s\n", o.model, where(m), (long long)net_batch(m), ranks, accum,
         o.synthetic ? "synthetic data"
         : folder    ? train_dir
                     : c.idx_dir);
  fflush(stdout);
  catch_stop_signals(1);
  NetStatus s = net_train(m, &c);
  int sig = stop_signal;
  catch_stop_signals(0);
  if (s == NET_OK && r.skipped_steps)
    fprintf(stderr, "netrun: warning: %lld steps skipped their update (non-finite gradients: dynamic loss scaling)\n",
            (long long)r.skipped_steps);
  if (s == NET_OK)
    printf("netrun: %lld steps, loss %.4f -> %.4f, %.0f images/s, data wait %.1f s, test top-5 %.2f%%, "
           "test accuracy %.2f%%\n",
           (long long)r.steps, r.loss_first, r.loss_last, r.images_per_s * world, r.data_wait_seconds,
           100 * r.test_top5, 100 * r.test_accuracy);
  else if (!(s == NET_STOPPED && sig))
    fprintf(stderr, "netrun: error: %s: %s\n", o.model, net_last_error());
  int log_failed = 0;
  if (p.log) { /* the run's record: the decoder and the GPU's numbers at start and end (ECC counts among them) */
    fprintf(p.log, "{\"run\": \"%s\", \"steps\": %lld, \"images_per_s\": %.1f, \"decoder\": \"%s\"",
            s == NET_OK ? "done"
            : sig       ? "interrupted"
                        : "stopped",
            (long long)r.steps, r.images_per_s, r.decoder);
    char w0[512], w1[512];
    const char *a = watch_members(&r.gpu_start, w0, sizeof w0), *b = watch_members(&r.gpu_end, w1, sizeof w1);
    fprintf(p.log, ", \"gpu_start\": {%s}, \"gpu_end\": {%s}}\n", *a ? a + 2 : "", *b ? b + 2 : "");
    if ((log_failed = ferror(p.log) | fclose(p.log)))
      fprintf(stderr, "netrun: error: %s: cannot write the log (a write failed: disk full?)\n", o.log);
  }
  if (s == NET_STOPPED && sig) { /* the checkpoint is written and the log closed: say how to go on */
    const char *name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    if (p.saved && p.saved_step == r.steps) {
      printf("netrun: interrupted (%s) after step %lld; checkpoint %s\n", name, (long long)r.steps, p.saved);
      print_resume_command(argc, given, p.saved);
    } else if (o.resume) {
      printf("netrun: interrupted (%s) before a step of this run; %s is unchanged\n", name, o.resume);
      print_resume_command(argc, given, o.resume);
    } else {
      printf("netrun: interrupted (%s) before the first step of this run; nothing to save\n", name);
    }
    fflush(stdout);
    net_free(m);
    return 128 + sig;
  }
  int export_failed = 0;
  if (s == NET_OK && o.export_to) {
    /* every step of the run, a resumed one's earlier steps included, ran o.accum batches */
    int64_t batches = r.steps * (o.accum > 1 ? o.accum : 1);
    if ((export_failed = net_weights_export(m, o.export_to, batches) != NET_OK))
      fprintf(stderr, "netrun: error: %s\n", net_last_error());
    else
      printf("netrun: exported the trained weights (num_batches_tracked %lld) to %s\n", (long long)batches,
             o.export_to);
  }
  int plot_failed = 0;
  if (o.plot && r.steps > 0) {
    char err[1024];
    if ((plot_failed = netrun_plot(o.log, o.plot, err, sizeof err) != 0))
      fprintf(stderr, "netrun: error: %s\n", err);
    else
      printf("netrun: plot -> %s\n", o.plot);
  }
  net_free(m);
  return s == NET_OK && !plot_failed && !export_failed && !log_failed ? 0 : EXIT_FAIL;
}

/* --- step and infer ------------------------------------------------------ */

/* `image` F32 [N,C,H,W] (and, when want_labels, `label` I64/I32 [N]) from
 * f, checked against the model's input; labels converted to int64.  A NaN
 * or an infinity in the image is refused by the weights' rule
 * (rt_weights_bad_value): the file, the tensor and the first bad element.
 * Any other tensor is refused, named, in step and infer alike (infer
 * ignores a step batch's `label`). */
static int read_batch(const RtStFile *f, const char *path, int want_labels, int64_t *n, int64_t **labels) {
  int unknown = 0;
  for (size_t i = 0; i < rt_st_count(f); i++) {
    const char *name = rt_st_tensor(f, i)->name;
    if (strcmp(name, "image") == 0 || strcmp(name, "label") == 0) continue;
    if (!unknown++) fprintf(stderr, "netrun: error: %s: unknown tensor", path);
    fprintf(stderr, "%s '%s'", unknown > 1 ? "," : "", name);
  }
  if (unknown) {
    fprintf(stderr, " (an inputs file holds 'image' and 'label' only)\n");
    return -1;
  }
  const RtStTensor *img = rt_st_find(f, "image"), *lab = rt_st_find(f, "label");
  if (!img || (want_labels && !lab)) {
    fprintf(stderr, "netrun: error: %s: needs tensors %s\n", path, want_labels ? "'image' and 'label'" : "'image'");
    return -1;
  }
  if (img->dtype != RT_ST_F32 || img->ndim < 1 || img->shape[0] < 1) {
    fprintf(stderr, "netrun: error: %s: 'image' must be F32 [N,...] with N >= 1\n", path);
    return -1;
  }
  char bad[600];
  if (rt_weights_bad_value(img, bad, sizeof bad)) {
    fprintf(stderr, "netrun: error: %s: %s\n", path, bad);
    return -1;
  }
  *n = img->shape[0];
  if (!want_labels) return 0;
  if ((lab->dtype != RT_ST_I64 && lab->dtype != RT_ST_I32) || lab->ndim != 1 || lab->shape[0] != *n) {
    fprintf(stderr, "netrun: error: %s: 'label' must be I64 or I32 [%lld]\n", path, (long long)*n);
    return -1;
  }
  if (!(*labels = malloc(sizeof(int64_t) * (size_t)*n))) return -1;
  for (int64_t i = 0; i < *n; i++) {
    if (lab->dtype == RT_ST_I64) {
      memcpy(&(*labels)[i], (const char *)lab->data + 8 * i, 8);
    } else {
      int32_t l;
      memcpy(&l, (const char *)lab->data + 4 * i, 4);
      (*labels)[i] = l;
    }
  }
  return 0;
}

static int image_fits(const NetModel *m, const RtStTensor *img, const char *path) {
  int64_t chw[3], per = 1;
  net_image_numel(m, chw);
  for (int i = 1; i < img->ndim; i++) per *= img->shape[i];
  int same = per == chw[0] * chw[1] * chw[2] &&
             (img->ndim != 4 || (img->shape[1] == chw[0] && img->shape[2] == chw[1] && img->shape[3] == chw[2]));
  if (!same)
    fprintf(stderr, "netrun: error: %s: 'image' does not fit the model's input [N,%lld,%lld,%lld]\n", path,
            (long long)chw[0], (long long)chw[1], (long long)chw[2]);
  return same;
}

/* A command on one batch file: parses argv with `allowed`, which must give
 * --weights, --inputs and --out, checks the files and opens the inputs.
 * A command that allows --data (d) takes it instead of --inputs; *in is
 * then NULL.  -1 to go on, else the exit status to return. */
static int batch_command(int argc, char **argv, const char *allowed, Opts *o, RtStFile **in) {
  int rc = parse(argc, argv, allowed, o);
  if (rc) return rc == 1 ? 0 : rc;
  int data_ok = strchr(allowed, 'd') != NULL;
  if (!o->weights || !(o->inputs || (data_ok && o->data)) || !o->out) {
    fprintf(stderr, "netrun: error: %s takes one MODEL and --weights, %s and --out\n", argv[0],
            data_ok ? "--inputs B (or --data DIR)" : "--inputs");
    return EXIT_USAGE;
  }
  if (o->inputs && o->data) {
    fprintf(stderr, "netrun: error: %s takes --inputs or --data, not both\n", argv[0]);
    return EXIT_USAGE;
  }
  if (o->images && !o->data) {
    fprintf(stderr, "netrun: error: --images N is for --data DIR\n");
    return EXIT_USAGE;
  }
  if (o->mean_set != o->std_set) {
    fprintf(stderr, "netrun: error: --mean and --std go together\n");
    return EXIT_USAGE;
  }
  if ((rc = check_files(o, o->data))) return rc;
  if (!o->inputs) {
    *in = NULL;
    return -1;
  }
  char err[2048];
  if (rt_st_open(o->inputs, in, err, sizeof err) != RT_ST_OK) {
    fprintf(stderr, "netrun: error: %s\n", err);
    return EXIT_FAIL;
  }
  return -1;
}

/* --data DIR's images for m (the test set, or the training set for
 * calibration), at most o->images of them (else limit; 0: all), normalized
 * as training does, in at most half the machine's memory. */
static int data_images(const Opts *o, const NetModel *m, int test, int64_t limit, NetImages *imgs) {
  char train[4096], msg[2048], test_dir[4096];
  NetrunLayout kind = netrun_data_layout(o->data, train, test_dir, sizeof train, msg, sizeof msg);
  if (kind == NETRUN_LAYOUT_NONE) {
    fprintf(stderr, "netrun: error: %s\n", msg);
    return -1;
  }
  NetImagesReq r = {.kind = kind == NETRUN_LAYOUT_FOLDER ? NET_DATA_FOLDER : NET_DATA_IDX,
                    .dir = kind == NETRUN_LAYOUT_FOLDER ? (test ? test_dir : train) : o->data,
                    .test = test,
                    .limit = o->images ? o->images : limit,
                    .mean3 = o->mean_set ? o->mean3 : NULL,
                    .std3 = o->std_set ? o->std3 : NULL,
                    .workers = (int)o->workers};
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) r.max_bytes = (size_t)pages * (size_t)page / 2;
  int64_t skipped = 0;
  if (net_images_load(m, &r, imgs, &skipped)) {
    fprintf(stderr, "netrun: error: %s\n", net_last_error());
    return -1;
  }
  if (skipped) fprintf(stderr, "netrun: warning: %s: %lld unreadable images left out\n", o->data, (long long)skipped);
  return 0;
}

static int cmd_step(int argc, char **argv) {
  Opts o = {.seed = 1};
  RtStFile *in = NULL;
  int rc = batch_command(argc, argv, "DKwiolSpnCuzm8F", &o, &in);
  if (rc >= 0) return rc;
  int64_t steps = o.steps > 0 ? o.steps : 1;
  int64_t n = 0, *labels = NULL;
  NetModel *m = NULL;
  int status = EXIT_FAIL;
  FILE *curve = NULL;
  if (read_batch(in, o.inputs, 1, &n, &labels)) goto done;
  if (n % steps) {
    fprintf(stderr, "netrun: error: %s: %lld images do not split into %lld steps\n", o.inputs, (long long)n,
            (long long)steps);
    goto done;
  }
  n /= steps;
  if (!(m = load(&o, n, 0, 1)) || !image_fits(m, rt_st_find(in, "image"), o.inputs)) goto done;
  if (net_weights_load(m, o.weights)) {
    fprintf(stderr, "netrun: error: %s\n", net_last_error());
    goto done;
  }
  if (o.curve && !(curve = fopen(o.curve, "w"))) {
    fprintf(stderr, "netrun: error: cannot write '%s'\n", o.curve);
    goto done;
  }
  if (curve) fprintf(curve, "step,loss,loss_scale\n");
  /* a dynamic scale starts from --loss-scale (NET_ERR_ARG: a static one, given with each step) */
  if (o.loss_scale > 0) (void)net_loss_scale_set(m, (float)o.loss_scale);
  const float *images = rt_st_find(in, "image")->data;
  NetStepOut out = {0};
  for (int64_t t = 0; t < steps; t++) {
    NetBatch b = {.n = n,
                  .images = images + t * n * net_image_numel(m, NULL),
                  .labels = labels + t * n,
                  .lr = (float)o.lr,
                  .loss_scale = (float)o.loss_scale};
    if (net_step(m, &b, &out)) {
      fprintf(stderr, "netrun: error: %s: step %lld: %s\n", o.model, (long long)t + 1, net_last_error());
      goto done;
    }
    if (curve) fprintf(curve, "%lld,%.9g,%g\n", (long long)t + 1, out.loss, out.loss_scale);
  }
  if (curve && fclose(curve)) {
    curve = NULL;
    fprintf(stderr, "netrun: error: cannot write '%s'\n", o.curve);
    goto done;
  }
  curve = NULL;
  if (net_step_save(m, o.out)) {
    fprintf(stderr, "netrun: error: %s: %s\n", o.model, net_last_error());
    goto done;
  }
  char count[32] = "one step";
  if (steps > 1) snprintf(count, sizeof count, "%lld steps", (long long)steps);
  printf("netrun: %s of %s on %s (batch %lld, %s, lr %g, loss scale %g): loss %.6f; wrote %s\n", count, o.model,
         where(m), (long long)n, o.precision ? o.precision : "default precision", out.lr, out.loss_scale, out.loss,
         o.out);
  status = 0;
done:
  if (curve) fclose(curve);
  net_free(m);
  free(labels);
  rt_st_close(in);
  return status;
}

static int cmd_infer(int argc, char **argv) {
  Opts o = {.seed = 1};
  RtStFile *in = NULL;
  int rc = batch_command(argc, argv, "DbKwiopzm8rFdNMZW", &o, &in);
  if (rc >= 0) return rc;
  int fp8 = o.precision && strcmp(o.precision, "fp8") == 0;
  if (o.report && !(o.int8 && *o.int8) && !fp8) {
    fprintf(stderr, "netrun: error: infer --report compares a model with --int8 LAYERS (or --precision fp8) against "
                    "the same without\n");
    rt_st_close(in);
    return EXIT_USAGE;
  }
  int64_t n = 0, *labels = NULL;
  NetModel *m = NULL, *ref = NULL;
  float *logits = NULL, *ref_logits = NULL;
  const float *images = NULL;
  NetImages set = {0};
  NetQuantLayer *layers = NULL;
  int nlayers = 0;
  RtStWriter *w = NULL;
  int status = EXIT_FAIL;
  if (in) {
    if (read_batch(in, o.inputs, o.report, &n, o.report ? &labels : NULL) || !(m = load(&o, o.batch, 1, 0)) ||
        !image_fits(m, rt_st_find(in, "image"), o.inputs))
      goto done;
    images = rt_st_find(in, "image")->data;
  } else {
    if (!(m = load(&o, o.batch, 1, 0)) || data_images(&o, m, 1, 0, &set)) goto done;
    images = set.image, labels = set.label, n = set.n;
    set.label = NULL; /* freed as labels */
  }
  int64_t shape[2] = {n, net_classes(m)};
  if (!(logits = malloc(sizeof(float) * (size_t)(n * shape[1]))) || !(w = rt_st_writer_new())) {
    fprintf(stderr, "netrun: error: out of memory\n");
    goto done;
  }
  if (net_weights_load(m, o.weights) || net_infer(m, images, n, logits)) {
    fprintf(stderr, "netrun: error: %s\n", net_last_error());
    goto done;
  }
  if (rt_st_writer_add(w, "logits", RT_ST_F32, 2, shape, logits, sizeof(float) * (size_t)(n * shape[1]),
                       RT_ST_BORROW) != RT_ST_OK ||
      rt_st_writer_write(w, o.out) != RT_ST_OK) {
    fprintf(stderr, "netrun: error: %s\n", rt_st_writer_error(w));
    goto done;
  }
  printf("netrun: logits of %lld images with %s on %s; wrote %s\n", (long long)n, o.model, where(m), o.out);
  if (o.report) { /* the same network and weights without --int8, and in fp16 for fp8 */
    Opts plain = o;
    plain.int8 = NULL;
    if (fp8) plain.precision = "fp16";
    if (!(ref = load(&plain, o.batch, 1, 0))) goto done;
    if (!(ref_logits = malloc(sizeof(float) * (size_t)(n * shape[1])))) {
      fprintf(stderr, "netrun: error: out of memory\n");
      goto done;
    }
    if (net_weights_load(ref, o.weights) || net_infer(ref, images, n, ref_logits)) {
      fprintf(stderr, "netrun: error: %s\n", net_last_error());
      goto done;
    }
    NetrunReport r = netrun_report(ref_logits, logits, labels, n, shape[1]);
    char qname[300];
    snprintf(qname, sizeof qname, "%s%.260s%s%s", o.int8 ? "--int8 " : "", o.int8 ? o.int8 : "",
             o.int8 && fp8 ? " " : "", fp8 ? "--precision fp8" : "");
    netrun_report_print(stdout, &r, plain.precision ? plain.precision : "without --int8", qname);
    /* layer by layer: both models' values read back, so both on the CPU */
    if (strcmp(net_device(m), "cpu") != 0 || strcmp(net_device(ref), "cpu") != 0) {
      printf("  (the layer-by-layer errors need both models on the CPU: --device cpu)\n");
    } else if (net_quant_errors(m, ref, images, n, &layers, &nlayers)) {
      fprintf(stderr, "netrun: error: %s\n", net_last_error());
      goto done;
    } else {
      netrun_report_layers(stdout, layers, nlayers, REPORT_LAYERS);
    }
  }
  status = 0;
done:
  rt_st_writer_free(w);
  free(logits);
  free(ref_logits);
  free(labels);
  free(layers);
  net_images_free(&set);
  net_free(m);
  net_free(ref);
  rt_st_close(in);
  return status;
}

/* --- calibrate ---------------------------------------------------------- */

/* The int8 scales of MODEL's layers (--int8, default all) from the images
 * in B, with the float model on the CPU (net_calibrate). */
static int cmd_calibrate(int argc, char **argv) {
  Opts o = {.seed = 1};
  RtStFile *in = NULL;
  int rc = batch_command(argc, argv, "DbKwiopz8HEdNMZW", &o, &in);
  if (rc >= 0) return rc;
  if (o.device && strcmp(o.device, "cpu") != 0) {
    fprintf(stderr, "netrun: error: calibrate runs on the CPU (it reads every layer's input back), not --device %s\n",
            o.device);
    rt_st_close(in);
    return EXIT_USAGE;
  }
  int64_t n = 0;
  NetModel *m = NULL;
  NetImages set = {0};
  const float *images = NULL;
  int status = EXIT_FAIL;
  Opts plain = o;
  plain.device = "cpu", plain.int8 = NULL;
  if (in) {
    if (read_batch(in, o.inputs, 0, &n, NULL) || !(m = load(&plain, o.batch, 1, 0)) ||
        !image_fits(m, rt_st_find(in, "image"), o.inputs))
      goto done;
    images = rt_st_find(in, "image")->data;
  } else { /* the training images, CALIBRATION_IMAGES of them spread over the set unless --images */
    if (!(m = load(&plain, o.batch, 1, 0)) || data_images(&o, m, 0, CALIBRATION_IMAGES, &set)) goto done;
    images = set.image, n = set.n;
  }
  const char *layers = o.int8 ? o.int8 : "all";
  NetCalibrateOpts co = {.layers = layers, .method = o.method, .percentile = o.percentile};
  if (net_weights_load(m, o.weights) || net_calibrate(m, images, n, &co, o.out)) {
    fprintf(stderr, "netrun: error: %s\n", net_last_error());
    goto done;
  }
  int64_t used = n / net_batch(m) * net_batch(m);
  printf("netrun: int8 scales of %s's layers (--int8 %s) from %lld images%s%s by %s; wrote %s\n", o.model, layers,
         (long long)used, o.data ? " of " : "", o.data ? o.data : "", o.method ? o.method : "entropy", o.out);
  status = 0;
done:
  net_images_free(&set);
  net_free(m);
  rt_st_close(in);
  return status;
}

/* --- export ------------------------------------------------------------- */

/* IN's weights as a strict PyTorch state_dict in OUT.  num_batches_tracked
 * is what PyTorch would count: one per training-mode forward pass, so a
 * checkpoint's steps times its accumulation. */
static int cmd_export(int argc, char **argv) {
  Opts o = {.seed = 1, .device = "cpu"};
  int rc = parse(argc, argv, "DKwoGs", &o);
  if (rc) return rc == 1 ? 0 : rc;
  if (!o.out) {
    fprintf(stderr, "netrun: error: export takes one MODEL and --out (and --weights, else the --seed's "
                    "initialization)\n");
    return EXIT_USAGE;
  }
  if ((rc = check_files(&o, NULL))) return rc;
  NetTrainState st = {0};
  if (o.weights && net_checkpoint_info(o.weights, &st)) {
    fprintf(stderr, "netrun: error: %s\n", net_last_error());
    return EXIT_FAIL;
  }
  int64_t batches = st.step * (st.accum_steps > 1 ? st.accum_steps : 1);
  if (o.batches_tracked) batches = o.batches_tracked - 1;
  NetModel *m = load(&o, 1, 1, 0);
  if (!m) return EXIT_FAIL;
  int status = EXIT_FAIL;
  char what[4200], kind[32] = "";
  if (o.weights)
    snprintf(what, sizeof what, "%s", o.weights),
        snprintf(kind, sizeof kind, "%s, ", st.from_weights ? "weights" : "checkpoint");
  else
    snprintf(what, sizeof what, "the initialization of seed %lld", o.seed);
  if ((o.weights && net_weights_load(m, o.weights)) || net_weights_export(m, o.out, batches))
    fprintf(stderr, "netrun: error: %s\n", net_last_error());
  else {
    printf("netrun: exported %s of %s (%snum_batches_tracked %lld) to %s\n", what, o.model, kind, (long long)batches,
           o.out);
    status = 0;
  }
  net_free(m);
  return status;
}

/* --- info --------------------------------------------------------------- */

/* Exit 0 when `--device auto` would take the GPU, else 1 with the reason. */
static int cmd_info(int argc, char **argv) {
  if (argc > 1) {
    fprintf(stderr, "netrun: error: info takes no arguments\n");
    return EXIT_USAGE;
  }
  (void)argv;
  char why[512];
  if (net_gpu_available(why, sizeof why)) {
    printf("netrun: a GPU is available: models run there by default\n");
    return 0;
  }
  printf("netrun: no GPU (%s): models run on the CPU executor\n", why);
  return EXIT_FAIL;
}

/* --- bench --------------------------------------------------------------- */

static int cmd_bench(int argc, char **argv) {
  Opts o = {.seed = 1, .steps = 20};
  int rc = parse(argc, argv, "DbKnIpuzm8FV", &o);
  if (rc) return rc == 1 ? 0 : rc;
  if (netrun_opt_range("--steps", o.steps, 1, INT_MAX)) return EXIT_USAGE; /* net_bench counts in int */
  char why[512];
  if ((!o.device || strcmp(o.device, "auto") == 0) && !net_gpu_available(why, sizeof why)) {
    /* a benchmark of the CPU instead of the GPU is not what was asked for */
    fprintf(stderr, "netrun: error: bench: no GPU (%s); give --device cpu to time the CPU executor\n", why);
    return EXIT_FAIL;
  }
  NetModel *m = load(&o, o.batch, o.inference, 0);
  if (!m) return EXIT_FAIL;
  int rank = 0;
  if (!o.inference && netrun_join(m, o.sync_bn, &rank)) {
    net_free(m);
    return EXIT_FAIL;
  }
  char who[32] = "";
  if (net_dist_world(m) > 1) snprintf(who, sizeof who, "rank %d of %d: ", rank, net_dist_world(m));
  NetBenchResult r;
  NetStatus s = net_bench(m, o.inference, (int)o.steps, &r);
  if (s) {
    fprintf(stderr, "netrun: error: %s: %s\n", o.model, net_last_error());
  } else {
    const double gib = 1073741824.0;
    printf("netrun: %sbench %s %s batch %lld on %s: %.3f ms/step, %.0f images/s, peak device memory %.2f GiB%s\n", who,
           o.model, o.inference ? "inference" : "training", (long long)net_batch(m), where(m), r.ms_per_step,
           r.images_per_s, (double)r.device_bytes / gib, r.cache_hit ? " (kernels cached)" : "");
    if (r.device_bytes)
      printf("netrun: device memory: activations %.2f GiB, parameters and state %.2f GiB, scratch and cuDNN "
             "workspace %.2f GiB\n",
             (double)r.activation_bytes / gib, (double)r.param_bytes / gib, (double)r.scratch_bytes / gib);
  }
  net_free(m);
  return s ? EXIT_FAIL : 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : 0;
  }
  if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
    printf("netrun %s\n", NETC_VERSION);
    return 0;
  }
  static const struct {
    const char *name;
    int (*run)(int, char **);
  } CMDS[] = {{"train", cmd_train},       {"step", cmd_step},   {"infer", cmd_infer},
              {"export", cmd_export},     {"bench", cmd_bench}, {"profile", netrun_profile_main},
              {"plot", netrun_plot_main}, {"info", cmd_info},   {"calibrate", cmd_calibrate}};
  for (size_t i = 0; i < sizeof CMDS / sizeof CMDS[0]; i++) {
    if (strcmp(argv[1], CMDS[i].name) != 0) continue;
    int n = argc - 1;
    if (CMDS[i].run == cmd_train || CMDS[i].run == cmd_bench) { /* --gpus N, --nproc N */
      int rc = netrun_launch(&n, argv + 1);
      if (rc >= 0) return rc;
    }
    return CMDS[i].run(n, argv + 1);
  }
  fprintf(stderr, "netrun: error: unknown command '%s' (see netrun --help)\n", argv[1]);
  return EXIT_USAGE;
}
