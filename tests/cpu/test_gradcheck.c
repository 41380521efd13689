/* test_gradcheck.c - graph-level gradient check of the CPU executor.
 *
 * A hand-written training graph (conv2d+bias -> batchnorm_train -> relu ->
 * conv2d -> residual add -> maxpool -> avgpool -> two heads: flatten ->
 * linear and global_avgpool -> flatten -> linear -> add -> softmax cross
 * entropy with smoothing) and its backward in exactly the training ops the
 * autodiff pass emits, with a loss scale of 4.  Every parameter gradient and
 * the input gradient is compared with central finite differences of the
 * loss, got by re-running the graph with one element perturbed.  The check
 * is "double-checked": a difference is only trusted when steps h and h/2
 * agree (a step that crosses a relu or maxpool kink shows up as a
 * disagreement and that element is skipped, and counted). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "exectest.h"

static const char *GRAPH =
    "graph gc {\n"
    "  input %0 x : f32[N,2,5,5] NCHW\n"
    "  input %1 label : i64[N]\n"
    "  input %2 scale : f32[]\n"
    "  param @c1.w : f32[3,2,3,3] KCRS\n"
    "  param @c1.b : f32[3]\n"
    "  param @bn.w : f32[3]\n"
    "  param @bn.b : f32[3]\n"
    "  state @bn.rm : f32[3]\n"
    "  state @bn.rv : f32[3]\n"
    "  param @c2.w : f32[3,3,3,3] KCRS\n"
    "  param @fc1.w : f32[4,48]\n"
    "  param @fc1.b : f32[4]\n"
    "  param @fc2.w : f32[4,3]\n"
    "  %3 = conv2d(%0, @c1.w, @c1.b) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,3,5,5] NCHW  # c1\n"
    "  %4, %5, %6 = batchnorm_train(%3, @bn.w, @bn.b, @bn.rm, @bn.rv) {eps=1e-05 momentum=0.1}"
    " : f32[N,3,5,5] NCHW, f32[3], f32[3]  # bn\n"
    "  %7 = relu(%4) : f32[N,3,5,5] NCHW  # relu\n"
    "  %8 = conv2d(%7, @c2.w) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[N,3,5,5] NCHW  # c2\n"
    "  %9 = add(%8, %7) : f32[N,3,5,5] NCHW  # res\n"
    "  %10 = maxpool(%9) {k=3x3 s=2x2 p=1x1} : f32[N,3,3,3] NCHW  # mp\n"
    "  %11 = avgpool(%10) {k=2x2 s=1x1 p=1x1 include_pad=0} : f32[N,3,4,4] NCHW  # ap\n"
    "  %12 = flatten(%11) : f32[N,48]  # flat1\n"
    "  %13 = linear(%12, @fc1.w, @fc1.b) : f32[N,4]  # fc1\n"
    "  %14 = global_avgpool(%11) : f32[N,3,1,1] NCHW  # gap\n"
    "  %15 = flatten(%14) : f32[N,3]  # flat2\n"
    "  %16 = linear(%15, @fc2.w) : f32[N,4]  # fc2\n"
    "  %17 = add(%13, %16) : f32[N,4]  # logits\n"
    "  %18 = softmax_cross_entropy(%17, %1) {smoothing=0.1} : f32[]  # loss\n"
    "  %19 = softmax_cross_entropy_bwd(%17, %1, %2) {smoothing=0.1} : f32[N,4]\n"
    "  %20 = linear_bwd_weight(%19, %12) : f32[4,48]\n"
    "  %21 = channel_sum(%19) : f32[4]\n"
    "  %22 = linear_bwd_data(%19, @fc1.w) : f32[N,48]\n"
    "  %23 = unflatten(%22) {shape=3x4x4} : f32[N,3,4,4] NCHW\n"
    "  %24 = linear_bwd_weight(%19, %15) : f32[4,3]\n"
    "  %25 = linear_bwd_data(%19, @fc2.w) : f32[N,3]\n"
    "  %26 = unflatten(%25) {shape=3x1x1} : f32[N,3,1,1] NCHW\n"
    "  %27 = global_avgpool_bwd(%26) {in_hw=4x4} : f32[N,3,4,4] NCHW\n"
    "  %28 = add(%23, %27) : f32[N,3,4,4] NCHW\n"
    "  %29 = avgpool_bwd(%28) {k=2x2 s=1x1 p=1x1 include_pad=0 in_hw=3x3} : f32[N,3,3,3] NCHW\n"
    "  %30 = maxpool_bwd(%29, %9) {k=3x3 s=2x2 p=1x1} : f32[N,3,5,5] NCHW\n"
    "  %31 = conv2d_bwd_weight(%30, %7) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[3,3,3,3] KCRS\n"
    "  %32 = conv2d_bwd_data(%30, @c2.w) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1 in_hw=5x5} : f32[N,3,5,5] NCHW\n"
    "  %33 = add(%30, %32) : f32[N,3,5,5] NCHW\n"
    "  %34 = relu_bwd(%33, %7) : f32[N,3,5,5] NCHW\n"
    "  %35, %36, %37 = batchnorm_bwd(%34, %3, @bn.w, %5, %6) : f32[N,3,5,5] NCHW, f32[3], f32[3]\n"
    "  %38 = conv2d_bwd_weight(%35, %0) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1} : f32[3,2,3,3] KCRS\n"
    "  %39 = channel_sum(%35) : f32[3]\n"
    "  %40 = conv2d_bwd_data(%35, @c1.w) {k=3x3 s=1x1 p=1x1 d=1x1 groups=1 in_hw=5x5} : f32[N,2,5,5] NCHW\n"
    "  output %18, %40, %38, %39, %36, %37, %31, %20, %21, %24\n"
    "}\n";

/* The graph's outputs after the loss, and what each is the gradient of. */
static const char *WRT[] = {"x", "c1.w", "c1.b", "bn.w", "bn.b", "c2.w", "fc1.w", "fc1.b", "fc2.w"};
enum { NWRT = sizeof WRT / sizeof WRT[0], BATCH = 2 };
static const float SCALE = 4;

static double loss_at(ExectestCase *c) {
  exectest_run(c->x);
  return exectest_out(c, 0)[0];
}

/* Central difference of the loss in element i of p with step h. */
static double central(ExectestCase *c, float *p, int64_t i, float h) {
  float keep = p[i];
  p[i] = keep + h;
  double up = loss_at(c);
  p[i] = keep - h;
  double down = loss_at(c);
  p[i] = keep;
  return (up - down) / (2.0 * h);
}

static void check_grad(ExectestCase *c, int k, const float *analytic) {
  int v = exectest_val(c->x, WRT[k]);
  float *p = rt_cpu_data(c->x, v);
  int64_t n = rt_cpu_numel(c->x, v);
  double scale = 1e-3, worst = 0;
  int64_t at = -1, skipped = 0;
  static double fd[256];
  for (int64_t i = 0; i < n; i++) {
    double a = central(c, p, i, 2e-3f), b = central(c, p, i, 1e-3f);
    fd[i] = fabs(a - b) <= 2e-3 + 0.05 * fabs(a) ? b : NAN;
    if (fd[i] != fd[i])
      skipped++;
    else if (fabs(fd[i]) > scale)
      scale = fabs(fd[i]);
  }
  for (int64_t i = 0; i < n; i++) {
    if (fd[i] != fd[i]) continue;
    double d = fabs(analytic[i] / SCALE - fd[i]);
    if (d > worst) worst = d, at = i;
  }
  /* the difference quotient's own resolution: the f32 loss moves in steps
   * of about |loss| * FLT_EPSILON, and (up - down) / 2h carries a few of
   * them over h = 1e-3 (a gradient that is exactly 0, as a convolution's
   * bias before a training-mode batch norm has, reads as that noise, 2e-4
   * with some BLAS builds) */
  double noise = 8.0 * fabs(loss_at(c)) * FLT_EPSILON / 1e-3;
  if (scale < noise / 1e-2) scale = noise / 1e-2;
  double rel = worst / scale;
  printf("d loss / d %-6s %3lld elements: max |analytic - fd| / max |fd| = %.2e (worst [%lld]: %.6g vs %.6g), "
         "%lld skipped at kinks\n",
         WRT[k], (long long)n, rel, (long long)at, at >= 0 ? analytic[at] / SCALE : 0.0, at >= 0 ? fd[at] : 0.0,
         (long long)skipped);
  CHECK(rel <= 1e-2, "gradient of %s off by %.3g (relative to max-norm)", WRT[k], rel);
  CHECK(skipped * 4 <= n, "%lld of %lld elements of %s were at kinks", (long long)skipped, (long long)n, WRT[k]);
}

int main(void) {
  ExectestCase c;
  if (exectest_open(&c, GRAPH, BATCH)) {
    CHECK(0, "gradient-check graph did not load");
    exectest_close(&c);
    return check_report();
  }
  uint64_t seed = 2024;
  exectest_fill(c.x, exectest_val(c.x, "x"), &seed, -1, 1);
  exectest_fill(c.x, exectest_val(c.x, "c1.w"), &seed, -0.5f, 0.5f);
  exectest_fill(c.x, exectest_val(c.x, "c1.b"), &seed, -0.5f, 0.5f);
  exectest_fill(c.x, exectest_val(c.x, "bn.w"), &seed, 0.5f, 1.5f);
  exectest_fill(c.x, exectest_val(c.x, "bn.b"), &seed, -0.5f, 0.5f);
  exectest_fill(c.x, exectest_val(c.x, "c2.w"), &seed, -0.3f, 0.3f);
  exectest_fill(c.x, exectest_val(c.x, "fc1.w"), &seed, -0.5f, 0.5f);
  exectest_fill(c.x, exectest_val(c.x, "fc1.b"), &seed, -0.5f, 0.5f);
  exectest_fill(c.x, exectest_val(c.x, "fc2.w"), &seed, -1, 1);
  exectest_f(c.x, "scale")[0] = SCALE;
  int64_t *label = rt_cpu_data(c.x, exectest_val(c.x, "label"));
  label[0] = 1, label[1] = 3;

  CHECK(exectest_run(c.x) == 0, "training graph runs");
  double loss = exectest_out(&c, 0)[0];
  printf("loss %.6f\n", loss);
  CHECK(isfinite(loss) && loss > 0, "loss %g", loss);
  /* Copy the analytic gradients out: the finite differences re-run the graph. */
  static float grads[NWRT][256];
  for (int k = 0; k < NWRT; k++) {
    int64_t n = rt_cpu_numel(c.x, c.g->output[k + 1]);
    CHECK(n == rt_cpu_numel(c.x, exectest_val(c.x, WRT[k])) && n <= 256, "gradient %s has %lld elements", WRT[k],
          (long long)n);
    memcpy(grads[k], exectest_out(&c, k + 1), sizeof(float) * (size_t)(n <= 256 ? n : 256));
  }
  for (int k = 0; k < NWRT; k++) check_grad(&c, k, grads[k]);
  exectest_close(&c);
  return check_report();
}
