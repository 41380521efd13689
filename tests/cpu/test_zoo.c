/* test_zoo.c - the ResNeXts and Wide ResNets of models/ on the CPU executor:
 * torchvision's weights load by name, and the whole pipeline trains and
 * infers as the front end's plain graph does.
 *
 * Each model is compiled twice: the plain graph (front end and autodiff
 * only: NCHW, KCRS, unfused, f32) and the whole pipeline in f32 (grouped 3x3
 * convolutions fused with their batch norms, NHWC and KRSC, the prologue,
 * memplan).
 *
 * 1. The model at RES x RES (its `input image` line rewritten; the layers
 *    and parameters do not depend on the resolution).  A safetensors file
 *    with exactly the tensors of torchvision's state_dict, read from
 *    tests/netc/torchvision/MODEL.names (num_batches_tracked included),
 *    seeded values, filters KCRS as PyTorch writes them, loads strictly into
 *    both graphs (nothing missing or extra but the optimizer's momentum
 *    buffers).  The inference graphs give the same logits (1e-4).  The
 *    training step is compared only loosely: at batch 2 and a 2x2 last
 *    stage, training-mode batch norm amplifies rounding (an input changed by
 *    one ulp moves the loss by 1e-6 and the gradients by several percent,
 *    through relus that flip at 8 values a channel), so the loss must agree
 *    to 1e-3 and the tensors after the step to 25%: gross errors only.
 * 2. Two of the model's own bottlenecks (its `stage` block: a strided one
 *    with its projection, then one more) in a small network of 64 x 16 x 16
 *    images at batch 8, where batch norm sees 512 values a channel and the
 *    gradients are well-conditioned: the whole pipeline's step must match
 *    the plain graph's to rounding (every gradient through the momentum
 *    buffers, every parameter, every running statistic). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"
#include "exectest.h"
#include "rt_ref.h"
#include "rt_weights.h"
#include "io/tmpdir.h"

enum { MAXDIM = 4, BATCH = 2, RES = 64, SMALL_BATCH = 8 };
static const double TOL = 1e-4;        /* logits; the small network's loss and every tensor */
static const double LOSS_LOOSE = 1e-3; /* the whole model's training loss (see above) */
static const double LOOSE = 0.25;      /* the whole model's tensors after a step (see above) */

/* Two of the model's bottlenecks: its block `stage` with 2 blocks, stride 2. */
static const char SMALL_NET[] = "network small {\n"
                                "  input image : f32[64, 16, 16]\n"
                                "  input label : i32[]\n"
                                "  layer   = stage(image, 64, 2, 2)\n"
                                "  avgpool = global_avgpool(layer)\n"
                                "  flat    = flatten(avgpool)\n"
                                "  fc      = linear(flat, 10)\n"
                                "  loss    = softmax_cross_entropy(fc, label)\n"
                                "}\n";

/* Compiles src (plain: front end and autodiff only, f32; full: the whole
 * pipeline in f32) for training or inference. */
static IrGraph *compile_text(Arena *a, const char *path, const char *src, int full, int inference) {
  Diag d;
  diag_init(&d, stderr);
  PassCtx cx = {.d = &d,
                .out = stdout,
                .inference = inference,
                .precision = IR_DT_F32,
                .precision_set = 1,
                .batch = BATCH,
                .disabled = full ? 0 : pipeline_mask_after("autodiff")};
  /* the arena keeps what the graph needs; src outlives the diagnostics */
  return compile_source(a, &d, path, src, strlen(src), &cx);
}

/* ROOT/models/MODEL.net, malloc'd, with its 224 x 224 input made RES x RES
 * (net == NULL) or with its network replaced by net; NULL after a message. */
static char *model_text(const char *root, const char *model, const char *net, char *path, size_t len) {
  snprintf(path, len, "%s/models/%s.net", root, model);
  Diag d;
  diag_init(&d, stderr);
  size_t n;
  char *src = compile_read_file(path, &n, &d);
  if (!src) return NULL;
  if (!net) {
    char want[] = "f32[3, 224, 224]", small[sizeof want];
    char *at = strstr(src, want);
    if (at && snprintf(small, sizeof small, "f32[3, %3d, %3d]", RES, RES) == (int)strlen(want)) {
      memcpy(at, small, strlen(want));
      return src;
    }
    fprintf(stderr, "%s: no '%s' input to shrink\n", path, want);
  } else {
    char *at = strstr(src, "\nnetwork "), *train = strstr(src, "\ntrain {");
    char *out = at && train ? malloc(n + strlen(net) + 1) : NULL;
    if (out) {
      snprintf(out, n + strlen(net) + 1, "%.*s\n%s%s", (int)(at - src), src, net, train);
      free(src);
      return out;
    }
    fprintf(stderr, "%s: no network or train section\n", path);
  }
  free(src);
  return NULL;
}

/* Writes torchvision's state_dict for model (names and shapes from its
 * .names file) to path with seeded values; returns the tensor count, or -1. */
static int write_torchvision(const char *root, const char *model, const char *path) {
  char names[4096], line[512];
  snprintf(names, sizeof names, "%s/tests/netc/torchvision/%s.names", root, model);
  FILE *f = fopen(names, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", names);
    return -1;
  }
  RtStWriter *w = rt_st_writer_new();
  uint64_t seed = 1234;
  int count = 0, bad = 0;
  float *data = NULL;
  size_t cap = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    char name[400], dims[100];
    int64_t shape[MAXDIM], n = 1;
    int nd = 0;
    if (sscanf(line, "%399s [%99[^]]]", name, dims) != 2 && sscanf(line, "%399s []", name) != 1) {
      bad = 1;
      break;
    }
    if (strstr(line, "[]")) dims[0] = 0;
    for (char *p = dims; *p && nd < MAXDIM; nd++) {
      shape[nd] = strtoll(p, &p, 10);
      n *= shape[nd];
      if (*p == ',') p++;
    }
    size_t len = strlen(name);
    if (len > 20 && strcmp(name + len - 20, ".num_batches_tracked") == 0) {
      int64_t steps = 100;
      rt_st_writer_add(w, name, RT_ST_I64, 0, NULL, &steps, sizeof steps, RT_ST_COPY);
      count++;
      continue;
    }
    if ((size_t)n > cap) {
      cap = (size_t)n;
      free(data);
      data = malloc(cap * sizeof *data);
    }
    float lo = -0.2f, hi = 0.2f;
    if (nd >= 2) { /* filters and fc.weight: PyTorch's default range */
      float r = 1.0f / sqrtf((float)(n / shape[0]));
      lo = -r, hi = r;
    } else if (len > 12 && strcmp(name + len - 12, ".running_var") == 0) {
      lo = 0.5f, hi = 1.5f;
    } else if (len > 7 && strcmp(name + len - 7, ".weight") == 0) {
      lo = 0.8f, hi = 1.2f;
    }
    for (int64_t i = 0; i < n; i++) data[i] = exectest_rand(&seed, lo, hi);
    if (rt_st_writer_add(w, name, RT_ST_F32, nd, shape, data, (size_t)n * sizeof *data, RT_ST_COPY) != RT_ST_OK)
      bad = 1;
    count++;
  }
  fclose(f);
  free(data);
  if (!bad && rt_st_writer_write(w, path) != RT_ST_OK) bad = 1;
  if (bad) fprintf(stderr, "%s: %s\n", names, rt_st_writer_error(w));
  rt_st_writer_free(w);
  return bad ? -1 : count;
}

/* An executor for g at batch n, with the file at path loaded strictly. */
static RtCpu *load(const IrGraph *g, int64_t n, const char *path, const char *what) {
  RtCpu *x = g ? exectest_new(g, n) : NULL;
  char err[RT_WEIGHTS_ERRMAX] = "";
  if (x && rt_weights_load_cpu(x, g, path, RT_WEIGHTS_OPTIM_OPTIONAL, err, sizeof err) != RT_WEIGHTS_OK) {
    CHECK(0, "%s: the weights do not load: %s", what, err);
    rt_cpu_free(x);
    return NULL;
  }
  return x;
}

/* The same seeded images (C x H x W, NCHW in both: graph inputs keep their
 * layout) and labels below `classes` for both executors. */
static void feed(RtCpu *a, RtCpu *b, int64_t n, int classes) {
  uint64_t seed = 99;
  int ia = exectest_val(a, "image"), ib = exectest_val(b, "image");
  if (ia < 0 || ib < 0) return;
  exectest_fill(a, ia, &seed, 0, 1);
  memcpy(rt_cpu_data(b, ib), rt_cpu_data(a, ia), sizeof(float) * (size_t)rt_cpu_numel(a, ia));
  int la = rt_cpu_find(a, "label"), lb = rt_cpu_find(b, "label");
  if (la < 0 || lb < 0) return;
  int64_t *labels = rt_cpu_data(a, la);
  for (int64_t i = 0; i < n; i++) labels[i] = (i * 389 + 17) % classes;
  memcpy(rt_cpu_data(b, lb), labels, sizeof(int64_t) * (size_t)n);
}

/* ||got - want|| / ||want|| (the difference's norm when want is 0). */
static double rel_l2(const float *got, const float *want, int64_t n) {
  double dd = 0, ww = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = (double)got[i] - want[i];
    dd += e * e, ww += (double)want[i] * want[i];
  }
  return ww > 0 ? sqrt(dd / ww) : sqrt(dd);
}

/* The worst rel_l2 over every PARAM and STATE of the plain graph against
 * the same name in the full one (KRSC filters transposed back to KCRS);
 * *which gets its name, *count how many were compared. */
static double compare_state(RtCpu *a, const IrGraph *ga, RtCpu *b, const IrGraph *gb, const char **which, int *count) {
  double worst = 0;
  float *t = NULL;
  size_t cap = 0;
  *count = 0, *which = "";
  for (int v = 0; v < ga->nval; v++) {
    const IrValue *val = &ga->val[v];
    if ((val->kind != IR_VAL_PARAM && val->kind != IR_VAL_STATE) || rt_cpu_is_int(a, v)) continue;
    int w = rt_cpu_find(b, val->name);
    int64_t n = rt_cpu_numel(a, v);
    if (w < 0 || rt_cpu_numel(b, w) != n) {
      CHECK(0, "%s: missing or of another size in the whole pipeline's graph", val->name);
      continue;
    }
    const float *got = rt_cpu_data(b, w);
    const IrType *ty = &gb->val[w].type;
    if (ty->layout == IR_LAYOUT_KRSC) { /* [K,R,S,C] -> [K,C,R,S] */
      if ((size_t)n > cap) {
        free(t);
        cap = (size_t)n, t = malloc(cap * sizeof *t);
      }
      rt_ref_nhwc_to_nchw((int)ty->dim[0], (int)ty->dim[3], (int)ty->dim[1], (int)ty->dim[2], got, t);
      got = t;
    }
    double e = rel_l2(got, rt_cpu_data(a, v), n);
    if (e > worst) worst = e, *which = val->name;
    (*count)++;
  }
  free(t);
  return worst;
}

/* One SGD step (lr 0.1, loss scale 1) of both: their losses must differ by
 * at most loss_tol relative, their parameters and state after it by tol. */
static void check_step(RtCpu *a, const IrGraph *ga, RtCpu *b, const IrGraph *gb, const char *what, double loss_tol,
                       double tol) {
  *exectest_f(a, "lr") = *exectest_f(b, "lr") = 0.1f;
  *exectest_f(a, "loss_scale") = *exectest_f(b, "loss_scale") = 1;
  CHECK(exectest_run(a) == 0 && exectest_run(b) == 0, "%s: a training step runs", what);
  float la = *(float *)rt_cpu_data(a, ga->output[0]), lb = *(float *)rt_cpu_data(b, gb->output[0]);
  const char *which;
  int count;
  double worst = compare_state(a, ga, b, gb, &which, &count);
  printf("%s: loss %.6f plain, %.6f whole pipeline; after one step, %d parameters, momentum buffers and "
         "running statistics differ by at most %.2e (%s)\n",
         what, la, lb, count, worst, which);
  CHECK(isfinite(la) && fabs(la - lb) <= loss_tol * fabs(la), "%s: loss %g plain, %g whole pipeline", what, la, lb);
  CHECK(count > 10 && worst <= tol, "%s: %s differs by %.2e (at most %.0e)", what, which, worst, tol);
}

/* 1. The whole model at RES x RES with torchvision's tensors. */
static void check_model(const char *root, const char *model, const char *dir) {
  char path[4096], weights[4096], what[256];
  snprintf(weights, sizeof weights, "%s/%s.safetensors", dir, model);
  int tensors = write_torchvision(root, model, weights);
  CHECK(tensors > 0, "%s: torchvision's state_dict written", model);
  char *src = tensors > 0 ? model_text(root, model, NULL, path, sizeof path) : NULL;
  if (!src) return;
  Arena arena;
  arena_init(&arena);
  IrGraph *plain = compile_text(&arena, path, src, 0, 0), *full = compile_text(&arena, path, src, 1, 0);
  IrGraph *pi = compile_text(&arena, path, src, 0, 1), *fi = compile_text(&arena, path, src, 1, 1);
  CHECK(plain && full && pi && fi, "%s compiles at %dx%d (plain and whole pipeline, training and inference)", model,
        RES, RES);
  snprintf(what, sizeof what, "%s at %dx%d, batch %d (%d torchvision tensors)", model, RES, RES, BATCH, tensors);
  RtCpu *a = load(plain, BATCH, weights, "plain"), *b = load(full, BATCH, weights, "whole pipeline");
  if (a && b) {
    feed(a, b, BATCH, 1000);
    check_step(a, plain, b, full, what, LOSS_LOOSE, LOOSE);
  }
  rt_cpu_free(a);
  rt_cpu_free(b);
  a = load(pi, BATCH, weights, "plain inference"), b = load(fi, BATCH, weights, "inference");
  if (a && b) {
    feed(a, b, BATCH, 1000);
    CHECK(exectest_run(a) == 0 && exectest_run(b) == 0, "%s: inference runs", model);
    int64_t n = rt_cpu_numel(a, pi->output[0]);
    CHECK(n == BATCH * 1000 && rt_cpu_numel(b, fi->output[0]) == n, "%s: 1000 logits a sample", model);
    const float *want = rt_cpu_data(a, pi->output[0]);
    double e = exectest_compare("logits", rt_cpu_data(b, fi->output[0]), want, n, TOL);
    printf("%s inference: logits differ by at most %.2e\n", what, e);
    CHECK(!rt_ref_has_nonfinite(n, want) && e <= TOL, "%s: inference logits differ by %.2e", model, e);
  }
  rt_cpu_free(a);
  rt_cpu_free(b);
  arena_free(&arena);
  free(src);
}

/* Seeded parameters for the plain executor x of g (the small network). */
static void fill_small(RtCpu *x, const IrGraph *g) {
  uint64_t seed = 5;
  for (int v = 0; v < g->nval; v++) {
    const IrValue *val = &g->val[v];
    if (val->kind == IR_VAL_ACT || val->kind == IR_VAL_INPUT || rt_cpu_is_int(x, v)) continue;
    size_t len = strlen(val->name);
    if (strstr(val->name, "momentum_buffer")) continue;
    if (val->type.rank >= 2) {
      float r = 1.0f / sqrtf((float)(rt_cpu_numel(x, v) / val->type.dim[0]));
      exectest_fill(x, v, &seed, -r, r);
    } else if (len > 12 && strcmp(val->name + len - 12, ".running_var") == 0) {
      exectest_fill(x, v, &seed, 0.5f, 1.5f);
    } else if (len > 7 && strcmp(val->name + len - 7, ".weight") == 0) {
      exectest_fill(x, v, &seed, 0.8f, 1.2f);
    } else {
      exectest_fill(x, v, &seed, -0.2f, 0.2f);
    }
  }
}

/* 2. Two of the model's bottlenecks, well-conditioned. */
static void check_small(const char *root, const char *model, const char *dir) {
  char path[4096], weights[4096], what[256], err[RT_WEIGHTS_ERRMAX] = "";
  char *src = model_text(root, model, SMALL_NET, path, sizeof path);
  CHECK(src != NULL, "%s: its bottlenecks in a small network", model);
  if (!src) return;
  Arena arena;
  arena_init(&arena);
  IrGraph *plain = compile_text(&arena, path, src, 0, 0), *full = compile_text(&arena, path, src, 1, 0);
  CHECK(plain && full, "%s's bottlenecks compile", model);
  RtCpu *a = plain ? exectest_new(plain, SMALL_BATCH) : NULL;
  if (a) {
    fill_small(a, plain);
    snprintf(weights, sizeof weights, "%s/%s.small.safetensors", dir, model);
    CHECK(rt_weights_save_cpu(a, plain, weights, err, sizeof err) == RT_WEIGHTS_OK, "save: %s", err);
  }
  RtCpu *b = a && full ? load(full, SMALL_BATCH, weights, "small network") : NULL;
  if (a && b) {
    snprintf(what, sizeof what, "%s's stage of 2 bottlenecks, 64x16x16, batch %d", model, SMALL_BATCH);
    feed(a, b, SMALL_BATCH, 10);
    check_step(a, plain, b, full, what, TOL, TOL);
  }
  rt_cpu_free(a);
  rt_cpu_free(b);
  arena_free(&arena);
  free(src);
}

int main(int argc, char **argv) {
  if (argc < 2) return check_skip("usage: exec_test_zoo SOURCE_DIR [MODEL...]");
  static const char *const zoo[] = {"resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2",
                                    "wide_resnet101_2"};
  char dir[1024];
  if (!tmpdir_make(dir, sizeof dir, "zoo")) return check_skip("no scratch directory");
  int n = argc > 2 ? argc - 2 : (int)(sizeof zoo / sizeof *zoo);
  for (int i = 0; i < n; i++) {
    const char *model = argc > 2 ? argv[2 + i] : zoo[i];
    check_small(argv[1], model, dir);
    check_model(argv[1], model, dir);
  }
  tmpdir_remove(dir);
  return check_report();
}
