/* test_precision.c - f16 and bf16 rounding against known bit patterns
 * (1/3, 65504, the overflow threshold, subnormals, ties to even, NaN,
 * signed zero), an exhaustive f16 round trip, FP8 E4M3 and E5M2 (every
 * code round trips; every midpoint between neighbours ties to the even
 * code, a hair either side rounds to the nearer; saturation; NaN; known
 * values), and int8 quantization (ties to even, saturation, NaN). */
#include "ref_test.h"

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static void f16(void) {
  struct {
    float f;
    uint16_t h;
    const char *what;
  } cases[] = {
      {1.0f, 0x3c00, "1"},
      {-2.0f, 0xc000, "-2"},
      {1.0f / 3, 0x3555, "1/3"},
      {0.1f, 0x2e66, "0.1"},
      {65504.0f, 0x7bff, "65504 (max)"},
      {65519.0f, 0x7bff, "65519 rounds down"},
      {65520.0f, 0x7c00, "65520 ties to even: inf"},
      {1e6f, 0x7c00, "overflow"},
      {-1e6f, 0xfc00, "negative overflow"},
      {INFINITY, 0x7c00, "inf"},
      {-0.0f, 0x8000, "-0"},
      {0x1p-14f, 0x0400, "smallest normal"},
      {0x1p-24f, 0x0001, "smallest subnormal"},
      {0x3ffp-24f, 0x03ff, "largest subnormal"},
      {0x1p-25f, 0x0000, "half the smallest subnormal ties to 0"},
      {0x1.000002p-25f, 0x0001, "just above half rounds up"},
      {0x3p-25f, 0x0002, "1.5 subnormal units ties to 2"},
      {0x1p-26f, 0x0000, "underflow"},
      {0x1.ffcp-15f, 0x0400, "largest subnormal + rounds into the normals"},
      {1.0f + 0x1p-11f, 0x3c00, "tie between 1 and 1+2^-10: even"},
      {1.0f + 0x3p-11f, 0x3c02, "tie rounds up to even"},
      {0x1.002002p+0f, 0x3c01, "just above the tie"},
      {2049.0f, 0x6800, "2049 ties to 2048"},
      {2051.0f, 0x6802, "2051 ties to 2052"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t h = rt_ref_f32_to_f16(cases[i].f);
    CHECK(h == cases[i].h, "f16 %s: got 0x%04x want 0x%04x", cases[i].what, h, cases[i].h);
  }
  CHECK(rt_ref_f16_to_f32(0x3555) == 0.333251953125f, "0x3555");
  CHECK(rt_ref_f16_to_f32(0x7bff) == 65504.0f, "0x7bff");
  CHECK(rt_ref_f16_to_f32(0x0001) == 0x1p-24f, "0x0001");
  CHECK(rt_ref_f16_to_f32(0x83ff) == -0x3ffp-24f, "0x83ff");
  CHECK(rt_ref_f16_to_f32(0xfc00) == -INFINITY, "0xfc00");
  CHECK(isnan(rt_ref_f16_to_f32(0x7e00)) && isnan(rt_ref_f16_to_f32(0x7c01)), "NaN");
  uint16_t hn = rt_ref_f32_to_f16(NAN), hs = rt_ref_f32_to_f16(from_bits(0x7f800001));
  CHECK((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0, "NaN stays NaN: 0x%04x", hn);
  CHECK((hs & 0x7c00) == 0x7c00 && (hs & 0x200) != 0, "signalling NaN is quieted: 0x%04x", hs);
  /* every f16 value survives f16 -> f32 -> f16 */
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = rt_ref_f16_to_f32((uint16_t)h);
    uint16_t back = rt_ref_f32_to_f16(f);
    int nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (nan ? !isnan(f) || (back & 0x7fff) <= 0x7c00 : back != h) bad++;
  }
  CHECK(bad == 0, "f16 round trip: %d values changed", bad);
  /* rounding is monotonic and lands on the nearest f16 */
  bad = 0;
  for (int i = 0; i < 20000; i++) {
    float f = rng_uniform(-70000, 70000) * (i % 2 ? 1e-5f : 1);
    float r = rt_ref_f16_to_f32(rt_ref_f32_to_f16(f));
    uint16_t h = rt_ref_f32_to_f16(f);
    float up = rt_ref_f16_to_f32((uint16_t)(h + 1)), dn = rt_ref_f16_to_f32((uint16_t)(h - 1));
    if ((h & 0x7fff) && (h & 0x7fff) < 0x7bff && (fabsf(f - r) > fabsf(f - up) || fabsf(f - r) > fabsf(f - dn))) bad++;
  }
  CHECK(bad == 0, "f16 nearest: %d values not rounded to the nearest", bad);
  float arr[3] = {1.0f / 3, 65520, 0x1p-25f};
  rt_ref_round_f16(3, arr, arr);
  CHECK(arr[0] == 0.333251953125f && isinf(arr[1]) && arr[2] == 0, "round_f16 in place");
}

static void bf16(void) {
  struct {
    uint32_t f;
    uint16_t h;
    const char *what;
  } cases[] = {
      {0x3f800000, 0x3f80, "1"},
      {0x3eaaaaab, 0x3eab, "1/3"},
      {0x3f808000, 0x3f80, "tie to even (down)"},
      {0x3f818000, 0x3f82, "tie to even (up)"},
      {0x3f808001, 0x3f81, "above the tie"},
      {0x7f7fffff, 0x7f80, "FLT_MAX overflows to inf"},
      {0x7f7f7fff, 0x7f7f, "largest finite bf16 stays"},
      {0xff800000, 0xff80, "-inf"},
      {0x80000000, 0x8000, "-0"},
      {0x00000001, 0x0000, "smallest f32 subnormal"},
      {0x00018000, 0x0002, "subnormal tie to even"},
      {0x7fc00000, 0x7fc0, "quiet NaN"},
      {0x7f800001, 0x7fc0, "signalling NaN quieted, not inf"},
      {0xffc00000, 0xffc0, "negative NaN"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t h = rt_ref_f32_to_bf16(from_bits(cases[i].f));
    CHECK(h == cases[i].h, "bf16 %s: got 0x%04x want 0x%04x", cases[i].what, h, cases[i].h);
  }
  CHECK(rt_ref_bf16_to_f32(0x3eab) == from_bits(0x3eab0000), "bf16 -> f32");
  float arr[2] = {1.0f / 3, -3.0f};
  rt_ref_round_bf16(2, arr, arr);
  CHECK(arr[0] == from_bits(0x3eab0000) && arr[1] == -3.0f, "round_bf16 in place");
}

static void int8(void) {
  const float x[9] = {1.25f, 1.75f, -1.25f, -1.75f, 0.2f, 100, -100, -64, NAN};
  const int8_t want[9] = {2, 4, -2, -4, 0, 127, -128, -128, 0};
  int8_t q[9];
  float y[9];
  CHECK(rt_ref_quant_i8(9, x, 0.5f, q) == 0, "quant");
  for (int i = 0; i < 9; i++) CHECK(q[i] == want[i], "q[%d] = %d want %d", i, q[i], want[i]);
  rt_ref_dequant_i8(9, q, 0.5f, y);
  for (int i = 0; i < 9; i++) CHECK(y[i] == want[i] * 0.5f, "dequant[%d]", i);
  rt_ref_round_i8(9, x, 0.5f, y);
  for (int i = 0; i < 9; i++) CHECK(y[i] == want[i] * 0.5f, "fake quant[%d]", i);
  CHECK(rt_ref_quant_i8(9, x, 0, q) == RT_REF_EARG, "scale 0");
  CHECK(rt_ref_quant_i8(9, x, -1, q) == RT_REF_EARG, "negative scale");
}

static void f8(RtRefF8 fmt) {
  const char *name = fmt == RT_REF_E4M3 ? "e4m3" : "e5m2";
  /* the finite non-negative codes, in increasing order of value */
  float v[128];
  int nv = 0;
  for (int c = 0; c < 128; c++) {
    float x = rt_ref_f8_to_f32((uint8_t)c, fmt);
    if (!isfinite(x)) continue;
    CHECK(nv == 0 || x > v[nv - 1], "%s: code 0x%02x (%g) not above the one before", name, c, x);
    CHECK(rt_ref_f32_to_f8(x, fmt) == c, "%s: %g encodes as 0x%02x, not 0x%02x", name, x, rt_ref_f32_to_f8(x, fmt), c);
    CHECK(rt_ref_f32_to_f8(-x, fmt) == (c | 0x80), "%s: -%g", name, x);
    v[nv++] = x;
  }
  CHECK(nv == (fmt == RT_REF_E4M3 ? 127 : 124), "%s: %d finite codes", name, nv);
  for (int i = 0; i + 1 < nv; i++) {
    float lo = v[i], hi = v[i + 1], mid = (float)(((double)lo + hi) / 2);
    int even = (rt_ref_f32_to_f8(lo, fmt) & 1) == 0 ? i : i + 1;
    CHECK(rt_ref_f8_to_f32(rt_ref_f32_to_f8(mid, fmt), fmt) == v[even], "%s: the tie %g between %g and %g", name, mid,
          lo, hi);
    CHECK(rt_ref_f8_to_f32(rt_ref_f32_to_f8(nextafterf(mid, 0), fmt), fmt) == lo, "%s: below %g", name, mid);
    CHECK(rt_ref_f8_to_f32(rt_ref_f32_to_f8(nextafterf(mid, INFINITY), fmt), fmt) == hi, "%s: above %g", name, mid);
  }
  float top = rt_ref_f8_max(fmt);
  CHECK(top == (fmt == RT_REF_E4M3 ? 448.0f : 57344.0f) && v[nv - 1] == top, "%s: largest %g", name, top);
  CHECK(v[1] == (fmt == RT_REF_E4M3 ? 0x1p-9f : 0x1p-16f), "%s: smallest subnormal %g", name, v[1]);
  CHECK(rt_ref_f32_to_f8(1.0f, fmt) == (fmt == RT_REF_E4M3 ? 0x38 : 0x3c), "%s: 1.0", name);
  CHECK(rt_ref_f8_to_f32(rt_ref_f32_to_f8(top * 1.05f, fmt), fmt) == top, "%s: saturates", name);
  CHECK(rt_ref_f8_to_f32(rt_ref_f32_to_f8(INFINITY, fmt), fmt) == top, "%s: inf saturates", name);
  CHECK(rt_ref_f8_to_f32(rt_ref_f32_to_f8(-INFINITY, fmt), fmt) == -top, "%s: -inf saturates", name);
  CHECK(isnan(rt_ref_f8_to_f32(rt_ref_f32_to_f8(NAN, fmt), fmt)), "%s: NaN stays NaN", name);
  CHECK(rt_ref_f32_to_f8(v[1] / 2, fmt) == 0, "%s: half the smallest ties to 0", name);
  CHECK(rt_ref_f32_to_f8(nextafterf(v[1] / 2, 1), fmt) == 1, "%s: just above half rounds up", name);
  CHECK(rt_ref_f32_to_f8(-0.0f, fmt) == 0x80, "%s: -0", name);
  /* scaled: x / scale rounded, times scale */
  float x[3] = {0.3f, -1000.0f, 7e-4f}, y[3];
  CHECK(rt_ref_round_f8(3, x, 0.01f, fmt, y) == RT_REF_OK, "%s: round_f8", name);
  for (int i = 0; i < 3; i++) {
    float want = 0.01f * rt_ref_f8_to_f32(rt_ref_f32_to_f8(x[i] / 0.01f, fmt), fmt);
    CHECK(y[i] == want, "%s: scaled %g: %g, want %g", name, x[i], y[i], want);
  }
  CHECK(rt_ref_round_f8(3, x, 0.0f, fmt, y) == RT_REF_EARG, "%s: scale 0 refused", name);
}

int main(void) {
  f8(RT_REF_E4M3);
  f8(RT_REF_E5M2);
  f16();
  bf16();
  int8();
  return check_report();
}
