/* test_conv_timing.c - prints the speed of the im2col+GEMM convolution on
 * ResNet-50's 3x3 (and one 1x1) layers for a single image, in both layouts.
 * A measurement, not a pass/fail: it only checks that the calls succeed
 * and that NCHW and NHWC agree on the answer. */
#include <time.h>

#include "ref_test.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct Layer {
  const char *name;
  int C, H, K, R, stride, pad;
} Layer;

static void time_layer(const Layer *l) {
  RtRefConvParam p = {l->stride, l->stride, l->pad, l->pad, l->pad, l->pad, 1, 1, 1};
  RtRefAct xs[2] = {{1, l->C, l->H, l->H, RT_REF_NCHW}, {1, l->C, l->H, l->H, RT_REF_NHWC}};
  RtRefFilter wf[2] = {{l->K, l->C, l->R, l->R, RT_REF_KCRS}, {l->K, l->C, l->R, l->R, RT_REF_KRSC}};
  RtRefAct ys[2];
  for (int i = 0; i < 2; i++) rt_ref_conv2d_out_shape(&xs[i], &wf[i], &p, &ys[i]);
  int64_t nx = rt_ref_act_count(&xs[0]), ny = rt_ref_act_count(&ys[0]);
  int64_t nw = (int64_t)l->K * l->C * l->R * l->R;
  double flop = 2.0 * (double)ny * l->C * l->R * l->R;
  float *x = rand_array(nx, -1, 1), *w = rand_array(nw, -1, 1), *dy = rand_array(ny, -1, 1);
  float *xt = zero_array(nx), *wt = zero_array(nw), *dyt = zero_array(ny);
  float *y = zero_array(ny), *y2 = zero_array(ny), *y2t = zero_array(ny);
  float *dx = zero_array(nx), *dw = zero_array(nw);
  float *ws = zero_array(rt_ref_conv2d_workspace(&xs[0], &wf[0], &ys[0], &p));
  rt_ref_nchw_to_nhwc(1, l->C, l->H, l->H, x, xt);
  rt_ref_nchw_to_nhwc(l->K, l->C, l->R, l->R, w, wt);
  rt_ref_nchw_to_nhwc(1, l->K, ys[0].H, ys[0].W, dy, dyt);
  for (int i = 0; i < 2; i++) {
    const float *xi = i ? xt : x, *wi = i ? wt : w, *dyi = i ? dyt : dy;
    double best[3] = {1e30, 1e30, 1e30};
    for (int rep = 0; rep < 4; rep++) {
      double t0 = now();
      CHECK(rt_ref_conv2d_fwd(&xs[i], xi, &wf[i], wi, NULL, &p, &ys[i], i ? y2 : y, ws) == 0, "fwd");
      double t1 = now();
      CHECK(rt_ref_conv2d_bwd_data(&xs[i], dx, &wf[i], wi, &p, &ys[i], dyi, ws) == 0, "bwd_data");
      double t2 = now();
      CHECK(rt_ref_conv2d_bwd_weight(&xs[i], xi, &wf[i], dw, NULL, &p, &ys[i], dyi, ws) == 0, "bwd_weight");
      double t3 = now();
      double d[3] = {t1 - t0, t2 - t1, t3 - t2};
      for (int k = 0; k < 3; k++) best[k] = d[k] < best[k] ? d[k] : best[k];
    }
    printf("%-28s %s  fwd %6.1f GFLOP/s  bwd_data %6.1f  bwd_weight %6.1f  (%.0f MFLOP each)\n", l->name,
           i ? "NHWC/KRSC" : "NCHW/KCRS", flop / best[0] * 1e-9, flop / best[1] * 1e-9, flop / best[2] * 1e-9,
           flop * 1e-6);
  }
  rt_ref_nhwc_to_nchw(1, l->K, ys[0].H, ys[0].W, y2, y2t);
  compare_arrays(l->name, y2t, y, ny, 1e-5);
  free(x), free(w), free(dy), free(xt), free(wt), free(dyt), free(y), free(y2), free(y2t);
  free(dx), free(dw), free(ws);
}

int main(void) {
  static const Layer layers[] = {
      {"layer1 3x3 64->64 56x56", 64, 56, 64, 3, 1, 1},     {"layer2 3x3 128->128 28x28", 128, 28, 128, 3, 1, 1},
      {"layer3 3x3 256->256 14x14", 256, 14, 256, 3, 1, 1}, {"layer4 3x3 512->512 7x7", 512, 7, 512, 3, 1, 1},
      {"stem 7x7/2 3->64 224x224", 3, 224, 64, 7, 2, 3},    {"layer3 1x1 1024->256 14x14", 1024, 14, 256, 1, 1, 0},
  };
  for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) time_layer(&layers[i]);
  return check_report();
}
