/* test_layout.c - NCHW <-> NHWC copies (and KCRS <-> KRSC through them)
 * checked element by element against the index formulas, round trips, and
 * channel padding/unpadding in both layouts. */
#include "ref_test.h"

static void transposes(int N, int C, int H, int W) {
  RtRefAct a = {N, C, H, W, RT_REF_NCHW}, b = {N, C, H, W, RT_REF_NHWC};
  int64_t n = rt_ref_act_count(&a);
  float *x = rand_array(n, -1, 1), *t = zero_array(n), *back = zero_array(n);
  CHECK(rt_ref_nchw_to_nhwc(N, C, H, W, x, t) == 0, "to nhwc");
  int bad = 0;
  for (int i = 0; i < N; i++)
    for (int c = 0; c < C; c++)
      for (int h = 0; h < H; h++)
        for (int w = 0; w < W; w++) bad += t[rt_ref_act_index(&b, i, c, h, w)] != x[rt_ref_act_index(&a, i, c, h, w)];
  CHECK(bad == 0, "nchw -> nhwc %dx%dx%dx%d: %d misplaced", N, C, H, W, bad);
  /* the NHWC index formula, spelled out once here */
  CHECK(rt_ref_act_index(&b, N - 1, C - 1, H - 1, 0) == (((int64_t)(N - 1) * H + H - 1) * W) * C + C - 1, "nhwc index");
  rt_ref_nhwc_to_nchw(N, C, H, W, t, back);
  CHECK(memcmp(back, x, sizeof *x * (size_t)n) == 0, "round trip");
  /* filters: KCRS is NCHW-shaped */
  RtRefFilter f1 = {N, C, H, W, RT_REF_KCRS}, f2 = {N, C, H, W, RT_REF_KRSC};
  bad = 0;
  for (int k = 0; k < N; k++)
    for (int c = 0; c < C; c++)
      for (int r = 0; r < H; r++)
        for (int s = 0; s < W; s++)
          bad += t[rt_ref_filter_index(&f2, k, c, r, s)] != x[rt_ref_filter_index(&f1, k, c, r, s)];
  CHECK(bad == 0, "kcrs -> krsc: %d misplaced", bad);
  free(x), free(t), free(back);
}

static void padding(RtRefLayout layout) {
  RtRefAct xs = {2, 3, 4, 5, layout}, ps = {2, 8, 4, 5, layout};
  int64_t n = rt_ref_act_count(&xs), np = rt_ref_act_count(&ps);
  float *x = rand_array(n, 1, 2), *p = rand_array(np, 5, 6), *back = zero_array(n);
  CHECK(rt_ref_pad_channels(&xs, x, 8, p) == 0, "pad");
  int bad = 0;
  for (int i = 0; i < 2; i++)
    for (int c = 0; c < 8; c++)
      for (int h = 0; h < 4; h++)
        for (int w = 0; w < 5; w++) {
          float got = p[rt_ref_act_index(&ps, i, c, h, w)];
          float want = c < 3 ? x[rt_ref_act_index(&xs, i, c, h, w)] : 0.0f;
          bad += got != want;
        }
  CHECK(bad == 0, "padded tensor: %d wrong", bad);
  CHECK(rt_ref_unpad_channels(&ps, p, 3, back) == 0, "unpad");
  CHECK(memcmp(back, x, sizeof *x * (size_t)n) == 0, "unpad gives x back");
  CHECK(rt_ref_pad_channels(&xs, x, 2, p) == RT_REF_ESHAPE, "pad to fewer channels");
  CHECK(rt_ref_unpad_channels(&xs, x, 4, p) == RT_REF_ESHAPE, "unpad to more channels");
  free(x), free(p), free(back);
}

int main(void) {
  transposes(2, 3, 4, 5);
  transposes(1, 64, 7, 7);
  transposes(3, 33, 35, 1);
  transposes(2, 1, 1, 9);
  padding(RT_REF_NCHW);
  padding(RT_REF_NHWC);
  CHECK(rt_ref_nchw_to_nhwc(0, 1, 1, 1, NULL, NULL) == RT_REF_ESHAPE, "empty");
  return check_report();
}
