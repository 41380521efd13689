/* netrun.c - the netrun command line: train a network, or run one step.
 *
 *   netrun train MODEL.net [--data DIR] [--epochs N] [--train-images N]
 *                          [--test-images N] [--device cpu|gpu] [--seed N]
 *   netrun step MODEL.net --weights W.safetensors --inputs B.safetensors
 *                         --out OUT.safetensors [--lr X] [--loss-scale S]
 *                         [--precision fp32|fp16|bf16] [--device cpu]
 *
 * Today netrun compiles the .net file in-process (the same pipeline as
 * netc) and trains it on the CPU executor over Fashion-MNIST in IDX form
 * (Debian's dataset-fashion-mnist by default), reporting loss, images/s and
 * test accuracy after every epoch.  The GPU back end, model.so files and
 * the other subcommands come with the runtime's GPU work.
 *
 * `step` runs one training step from given weights on a given batch and
 * writes everything it computed (loss, logits, gradients, updated weights)
 * under torchvision's names: the check of netc against PyTorch
 * (tests/torch/, docs/correctness.md).
 *
 * Exit status: 0 success, 1 a failure of the run or its input, 2 usage. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "rt_idx.h"
#include "rt_train_cpu.h"
#include "rt_weights.h"

enum { EXIT_FAIL = 1, EXIT_USAGE = 2 };

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
static const float FMNIST_MEAN = 0.2860f, FMNIST_STD = 0.3530f; /* of the training images, x/255 */

static void usage(FILE *f) {
  fprintf(f,
          "usage: netrun train MODEL.net [options]\n"
          "       netrun step MODEL.net --weights W --inputs B --out OUT [options]\n"
          "\n"
          "train: trains MODEL on Fashion-MNIST (IDX files) and reports test accuracy.\n"
          "\n"
          "train options:\n"
          "  --data DIR           folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]\n"
          "                       (default " DEFAULT_DATA ")\n"
          "  --epochs N           epochs (default: the model's train section)\n"
          "  --train-images N     use the first N training images (default: all)\n"
          "  --test-images N      evaluate on the first N test images (default: all)\n"
          "  --seed N             initialization and shuffling seed (default 1)\n"
          "  --device cpu|gpu     where to train (default cpu; the GPU back end is not built yet)\n"
          "  -h, --help           show this help\n"
          "\n"
          "step: one training step on the CPU executor from the weights in W (safetensors,\n"
          "torchvision names, filters KCRS) on the batch in B (`image` f32 [N,C,H,W], `label`\n"
          "i64 or i32 [N]); writes to OUT `loss`, `logits`, `P.grad` for every parameter P\n"
          "(unscaled, f32, KCRS) and every parameter and state after the update.\n"
          "\n"
          "step options:\n"
          "  --weights FILE       parameters and running statistics (momentum buffers optional: 0)\n"
          "  --inputs FILE        the batch\n"
          "  --out FILE           where the results go (replaced atomically)\n"
          "  --lr X               learning rate (default: the train section's)\n"
          "  --loss-scale S       loss scale (default: the train section's static scale, else 1)\n"
          "  --precision P        fp32, fp16 or bf16 (default: the train section's, else fp16)\n"
          "  --device cpu         where to run (only the CPU executor so far)\n");
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

/* --- step ------------------------------------------------------------- */

typedef struct StepOpts {
  const char *model, *weights, *inputs, *out;
  double lr, loss_scale; /* < 0: the train section's */
  PassCtx cx;
} StepOpts;

static int parse_real(const char *opt, const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (!*s || *end || !(v > 0) || v > 1e30) {
    fprintf(stderr, "netrun: error: %s must be a positive number, not '%s'\n", opt, s);
    return -1;
  }
  *out = v;
  return 0;
}

static int parse_step(int argc, char **argv, StepOpts *o) {
  static const struct option longopts[] = {
      {"weights", required_argument, NULL, 'w'}, {"inputs", required_argument, NULL, 'i'},
      {"out", required_argument, NULL, 'o'},     {"lr", required_argument, NULL, 'l'},
      {"loss-scale", required_argument, NULL, 'S'}, {"precision", required_argument, NULL, 'p'},
      {"device", required_argument, NULL, 'D'},  {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  static const struct { const char *name; IrDtype dt; } precisions[] = {
      {"fp32", IR_DT_F32}, {"fp16", IR_DT_F16}, {"bf16", IR_DT_BF16}};
  int c;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
    case 'w': o->weights = optarg; break;
    case 'i': o->inputs = optarg; break;
    case 'o': o->out = optarg; break;
    case 'l': if (parse_real("--lr", optarg, &o->lr)) return EXIT_USAGE; break;
    case 'S': if (parse_real("--loss-scale", optarg, &o->loss_scale)) return EXIT_USAGE; break;
    case 'p':
      o->cx.precision_set = 0;
      for (size_t i = 0; i < sizeof precisions / sizeof precisions[0]; i++)
        if (strcmp(optarg, precisions[i].name) == 0) o->cx.precision = precisions[i].dt, o->cx.precision_set = 1;
      if (!o->cx.precision_set) {
        fprintf(stderr, "netrun: error: --precision must be fp32, fp16 or bf16, not '%s'\n", optarg);
        return EXIT_USAGE;
      }
      break;
    case 'D':
      if (strcmp(optarg, "cpu") != 0) {
        fprintf(stderr, "netrun: error: step runs on --device cpu only (the GPU back end is not built yet), not '%s'\n",
                optarg);
        return strcmp(optarg, "gpu") == 0 ? EXIT_FAIL : EXIT_USAGE;
      }
      break;
    case 'h': usage(stdout); return -1;
    case ':': fprintf(stderr, "netrun: error: option '%s' needs a value\n", argv[optind - 1]); return EXIT_USAGE;
    default: fprintf(stderr, "netrun: error: unknown option '%s'\n", argv[optind - 1]); return EXIT_USAGE;
    }
  }
  if (optind != argc - 1 || !o->weights || !o->inputs || !o->out) {
    fprintf(stderr, "netrun: error: step takes one MODEL.net and --weights, --inputs and --out\n");
    usage(stderr);
    return EXIT_USAGE;
  }
  o->model = argv[optind];
  return 0;
}

/* The batch size: the leading dim of `image` in the inputs file. */
static int step_batch(const RtStFile *in, const char *path, int64_t *batch) {
  const RtStTensor *img = rt_st_find(in, "image"), *lab = rt_st_find(in, "label");
  if (!img || !lab) {
    fprintf(stderr, "netrun: error: %s: needs tensors 'image' and 'label'\n", path);
    return -1;
  }
  if (img->dtype != RT_ST_F32 || img->ndim < 1 || img->shape[0] < 1) {
    fprintf(stderr, "netrun: error: %s: 'image' must be F32 [N,...] with N >= 1\n", path);
    return -1;
  }
  if ((lab->dtype != RT_ST_I64 && lab->dtype != RT_ST_I32) || lab->ndim != 1 || lab->shape[0] != img->shape[0]) {
    fprintf(stderr, "netrun: error: %s: 'label' must be I64 or I32 [%lld]\n", path, (long long)img->shape[0]);
    return -1;
  }
  *batch = img->shape[0];
  return 0;
}

/* Writes image and label from the file into the executor's inputs. */
static int step_feed(RtCpu *x, const IrGraph *g, const RtStFile *in, const char *path, int64_t batch) {
  const RtStTensor *img = rt_st_find(in, "image"), *lab = rt_st_find(in, "label");
  int vi = rt_cpu_find(x, "image"), vl = rt_cpu_find(x, "label");
  if (vi < 0 || vl < 0 || rt_cpu_is_int(x, vi) || !rt_cpu_is_int(x, vl)) {
    fprintf(stderr, "netrun: error: %s: needs a float input 'image' and an integer input 'label'\n", g->name);
    return -1;
  }
  const IrType *t = &g->val[vi].type;
  int64_t want[IR_MAX_RANK];
  int rank = rt_weights_file_shape(t, batch, want);
  int same = rank == img->ndim && t->layout != IR_LAYOUT_NHWC;
  for (int i = 0; same && i < rank; i++) same = want[i] == img->shape[i];
  if (!same) {
    char ts[128];
    fprintf(stderr, "netrun: error: %s: 'image' does not fit the model's input %s\n", path,
            ir_type_str(t, ts, sizeof ts));
    return -1;
  }
  memcpy(rt_cpu_data(x, vi), img->data, img->nbytes);
  int64_t *labels = rt_cpu_data(x, vl);
  for (int64_t i = 0; i < batch; i++) {
    if (lab->dtype == RT_ST_I64) {
      memcpy(&labels[i], (const char *)lab->data + 8 * i, 8);
    } else {
      int32_t l;
      memcpy(&l, (const char *)lab->data + 4 * i, 4);
      labels[i] = l;
    }
  }
  return 0;
}

/* Sets the scalar input name to v; -1 when the graph lacks it. */
static int step_scalar(RtCpu *x, const IrGraph *g, const char *name, double v) {
  int id = rt_cpu_find(x, name);
  if (id < 0 || rt_cpu_is_int(x, id) || rt_cpu_numel(x, id) != 1) {
    fprintf(stderr, "netrun: error: %s: no scalar input '%s' (is it compiled with autodiff?)\n", g->name, name);
    return -1;
  }
  *(float *)rt_cpu_data(x, id) = (float)v;
  return 0;
}

/* loss, logits, every P.grad (sgd_update's g / loss_scale), every PARAM and STATE. */
static int step_write(RtCpu *x, const IrGraph *g, const char *path, int64_t batch, double loss_scale) {
  char err[RT_WEIGHTS_ERRMAX] = "";
  RtStWriter *w = rt_st_writer_new();
  RtWeightsStatus st = w ? RT_WEIGHTS_OK : RT_WEIGHTS_ERR_NOMEM;
  static const char *const OUTPUTS[] = {"loss", "logits"};
  if (g->noutput < 2) {
    fprintf(stderr, "netrun: error: %s: the step must return loss and logits\n", g->name);
    rt_st_writer_free(w);
    return -1;
  }
  for (int i = 0; i < 2 && st == RT_WEIGHTS_OK; i++) {
    int v = g->output[i];
    st = rt_weights_add(w, OUTPUTS[i], &g->val[v].type, batch, rt_cpu_data(x, v), 1.0f, err, sizeof err);
  }
  for (int n = 0; n < g->nnode && st == RT_WEIGHTS_OK; n++) {
    const IrNode *node = &g->node[n];
    if (node->op != IR_OP_SGD_UPDATE) continue;
    const IrValue *p = &g->val[node->in[0]];
    char name[1024];
    snprintf(name, sizeof name, "%s.grad", p->name);
    int gv = node->in[1];
    st = rt_weights_add(w, name, &g->val[gv].type, batch, rt_cpu_data(x, gv), (float)(1.0 / loss_scale), err,
                        sizeof err);
  }
  for (int v = 0; v < g->nval && st == RT_WEIGHTS_OK; v++)
    if (g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE)
      st = rt_weights_add(w, g->val[v].name, &g->val[v].type, batch, rt_cpu_data(x, v), 1.0f, err, sizeof err);
  if (st == RT_WEIGHTS_OK && rt_st_writer_write(w, path) != RT_ST_OK) {
    snprintf(err, sizeof err, "%s", rt_st_writer_error(w));
    st = RT_WEIGHTS_ERR_IO;
  }
  if (st != RT_WEIGHTS_OK) fprintf(stderr, "netrun: error: %s\n", w ? err : "out of memory");
  rt_st_writer_free(w);
  return st == RT_WEIGHTS_OK ? 0 : -1;
}

static double train_float(const IrGraph *g, const char *key, double dflt) {
  const IrAttr *a = ir_train_find(g, key);
  return a && a->kind == IR_ATTR_FLOAT ? a->f : dflt;
}

/* The train section's static loss scale, else 1 (as netrun train). */
static double train_loss_scale(const IrGraph *g) {
  const IrAttr *kind = ir_train_find(g, "loss_scale");
  if (kind && kind->kind == IR_ATTR_STR && kind->s && strcmp(kind->s, "static") == 0)
    return train_float(g, "loss_scale_scale", 1.0);
  return 1.0;
}

static int cmd_step(int argc, char **argv) {
  StepOpts o = {.lr = -1, .loss_scale = -1, .cx = {.out = stdout, .precision = IR_DT_F16}};
  int rc = parse_step(argc, argv, &o);
  if (rc) return rc < 0 ? 0 : rc;
  char err[RT_WEIGHTS_ERRMAX];
  RtStFile *in = NULL;
  if (rt_st_open(o.inputs, &in, err, sizeof err) != RT_ST_OK) {
    fprintf(stderr, "netrun: error: %s\n", err);
    return EXIT_FAIL;
  }
  int64_t batch = 0;
  if (step_batch(in, o.inputs, &batch)) {
    rt_st_close(in);
    return EXIT_FAIL;
  }
  Arena arena;
  arena_init(&arena);
  Diag d;
  diag_init(&d, stderr);
  o.cx.d = &d;
  o.cx.batch = batch;
  IrGraph *g = compile_file(&arena, &d, o.model, &o.cx);
  diag_finish(&d);
  RtCpu *x = NULL;
  int status = EXIT_FAIL;
  if (!g) goto done;
  if (rt_cpu_new(g, batch, &x, err, sizeof err)) {
    fprintf(stderr, "netrun: error: %s: %s\n", o.model, err);
    goto done;
  }
  if (rt_weights_load_cpu(x, g, o.weights, RT_WEIGHTS_OPTIM_OPTIONAL, err, sizeof err) != RT_WEIGHTS_OK) {
    fprintf(stderr, "netrun: error: %s\n", err);
    goto done;
  }
  double lr = o.lr > 0 ? o.lr : train_float(g, "lr", -1);
  double scale = o.loss_scale > 0 ? o.loss_scale : train_loss_scale(g);
  if (!(lr > 0)) {
    fprintf(stderr, "netrun: error: %s: no learning rate in the train section; give --lr\n", o.model);
    goto done;
  }
  if (step_feed(x, g, in, o.inputs, batch) || step_scalar(x, g, "lr", lr) ||
      step_scalar(x, g, "loss_scale", scale))
    goto done;
  if (rt_cpu_run(x, err, sizeof err)) {
    fprintf(stderr, "netrun: error: %s: %s\n", o.model, err);
    goto done;
  }
  if (step_write(x, g, o.out, batch, scale)) goto done;
  printf("netrun: one step of %s on the CPU (batch %lld, %s, lr %g, loss scale %g): loss %.6f; wrote %s\n",
         o.model, (long long)batch, o.cx.precision_set ? ir_dtype_name(o.cx.precision) : "default precision", lr,
         scale, *(const float *)rt_cpu_data(x, g->output[0]), o.out);
  status = 0;
done:
  rt_cpu_free(x);
  arena_free(&arena);
  rt_st_close(in);
  return status;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : 0;
  }
  if (strcmp(argv[1], "train") == 0) return cmd_train(argc - 1, argv + 1);
  if (strcmp(argv[1], "step") == 0) return cmd_step(argc - 1, argv + 1);
  fprintf(stderr, "netrun: error: unknown command '%s' (see netrun --help)\n", argv[1]);
  return EXIT_USAGE;
}
