/* rt_ref_precision.c - rounding that simulates reduced precision on FP32
 * data: IEEE binary16 and bfloat16 (round to nearest, ties to even; f16
 * keeps subnormals; overflow to inf; NaN stays NaN, quieted), the two FP8
 * formats (saturating; rt_ref.h) and symmetric saturating int8
 * quantization.  Bit-exact integer arithmetic, so the
 * result never depends on the host's float rounding mode except rintf in
 * int8 quantization (the default mode, nearest-even, is assumed). */
#include <math.h>
#include <string.h>

#include "rt_ref.h"

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Shifts m right by sh bits, rounding to nearest even (1 <= sh <= 31). */
static uint32_t shift_rne(uint32_t m, int sh) {
  uint32_t q = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return q;
}

uint16_t rt_ref_f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x3ff);
  if (a >= 0x477ff000u) return sign | 0x7c00; /* >= 65520 rounds past 65504 */
  if (a >= 0x38800000u)                       /* normal in f16: >= 2^-14 */
    return sign | (uint16_t)shift_rne(a - 0x38000000u, 13);
  int e = (int)(a >> 23);
  if (e < 102) return sign; /* below 2^-25: rounds to zero */
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  /* value = m * 2^(e-150); in units of 2^-24 that is m >> (126 - e) */
  return sign | (uint16_t)shift_rne(m, 126 - e);
}

float rt_ref_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0) {
    float v = (float)m * 0x1p-24f;
    return sign ? -v : v;
  }
  if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
  return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t rt_ref_f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

float rt_ref_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

int rt_ref_round_f16(int64_t n, const float *x, float *y) {
  if (n < 0) return RT_REF_ESHAPE;
  if (n && (!x || !y)) return RT_REF_EARG;
  for (int64_t i = 0; i < n; i++) y[i] = rt_ref_f16_to_f32(rt_ref_f32_to_f16(x[i]));
  return RT_REF_OK;
}

int rt_ref_round_bf16(int64_t n, const float *x, float *y) {
  if (n < 0) return RT_REF_ESHAPE;
  if (n && (!x || !y)) return RT_REF_EARG;
  for (int64_t i = 0; i < n; i++) y[i] = rt_ref_bf16_to_f32(rt_ref_f32_to_bf16(x[i]));
  return RT_REF_OK;
}

/* --- FP8 ------------------------------------------------------------------ */

typedef struct F8Format {
  int mbits, bias;
  uint8_t max_code; /* the largest finite magnitude's code */
  uint8_t nan;
} F8Format;

static const F8Format F8[2] = {
    [RT_REF_E4M3] = {3, 7, 0x7e, 0x7f},
    [RT_REF_E5M2] = {2, 15, 0x7b, 0x7e},
};

float rt_ref_f8_to_f32(uint8_t b, RtRefF8 fmt) {
  const F8Format *F = &F8[fmt];
  int sign = b & 0x80, e = (b & 0x7f) >> F->mbits, m = b & ((1 << F->mbits) - 1);
  int emax_field = (1 << (7 - F->mbits)) - 1;
  float v;
  if (fmt == RT_REF_E4M3 && (b & 0x7f) == 0x7f) return NAN;
  if (fmt == RT_REF_E5M2 && e == emax_field)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = ldexpf((float)m, 1 - F->bias - F->mbits); /* subnormal: m * 2^(1-bias-mbits) */
  else
    v = ldexpf((float)((1 << F->mbits) | m), e - F->bias - F->mbits);
  return sign ? -v : v;
}

float rt_ref_f8_max(RtRefF8 fmt) { return rt_ref_f8_to_f32(F8[fmt].max_code, fmt); }

uint8_t rt_ref_f32_to_f8(float f, RtRefF8 fmt) {
  const F8Format *F = &F8[fmt];
  uint8_t sign = signbit(f) ? 0x80 : 0;
  if (isnan(f)) return sign | F->nan;
  float a = fabsf(f), top = rt_ref_f8_max(fmt);
  if (a >= top) return sign | F->max_code; /* saturating (inf too) */
  /* the step of a's binade (the subnormals' below the smallest normal),
   * then a / step rounded half to even: exact, as step is a power of two */
  int emin = 1 - F->bias, e;
  frexpf(a, &e);
  e -= 1; /* a in [2^e, 2^(e+1)) */
  if (e < emin) e = emin;
  double q = nearbyint((double)a / ldexp(1.0, e - F->mbits)); /* 0 .. 2^(mbits+1) */
  if (q == 0) return sign;
  if (q >= (double)(2 << F->mbits)) q /= 2, e++;             /* rounded up into the next binade */
  if (q < (double)(1 << F->mbits)) return sign | (uint8_t)q; /* subnormal (e == emin) */
  uint8_t code = (uint8_t)(((e + F->bias) << F->mbits) | ((int)q - (1 << F->mbits)));
  return sign | (code > F->max_code ? F->max_code : code);
}

int rt_ref_round_f8(int64_t n, const float *x, float scale, RtRefF8 fmt, float *y) {
  if (n < 0) return RT_REF_ESHAPE;
  if ((n && (!x || !y)) || !(scale > 0) || (fmt != RT_REF_E4M3 && fmt != RT_REF_E5M2)) return RT_REF_EARG;
  for (int64_t i = 0; i < n; i++) y[i] = scale * rt_ref_f8_to_f32(rt_ref_f32_to_f8(x[i] / scale, fmt), fmt);
  return RT_REF_OK;
}

static int8_t quant_one(float x, float scale) {
  float q = rintf(x / scale);
  if (isnan(q)) return 0;
  if (q > 127) return 127;
  if (q < -128) return -128;
  return (int8_t)q;
}

int rt_ref_quant_i8(int64_t n, const float *x, float scale, int8_t *q) {
  if (n < 0) return RT_REF_ESHAPE;
  if (!(scale > 0) || (n && (!x || !q))) return RT_REF_EARG;
  for (int64_t i = 0; i < n; i++) q[i] = quant_one(x[i], scale);
  return RT_REF_OK;
}

int rt_ref_dequant_i8(int64_t n, const int8_t *q, float scale, float *y) {
  if (n < 0) return RT_REF_ESHAPE;
  if (!(scale > 0) || (n && (!q || !y))) return RT_REF_EARG;
  for (int64_t i = 0; i < n; i++) y[i] = (float)q[i] * scale;
  return RT_REF_OK;
}

int rt_ref_round_i8(int64_t n, const float *x, float scale, float *y) {
  if (n < 0) return RT_REF_ESHAPE;
  if (!(scale > 0) || (n && (!x || !y))) return RT_REF_EARG;
  for (int64_t i = 0; i < n; i++) y[i] = (float)quant_one(x[i], scale) * scale;
  return RT_REF_OK;
}

float rt_ref_f8_delayed_scale(const float *h, int64_t H, float amax, RtRefF8 fmt) {
  float top = 0;
  for (int64_t i = 0; i < H; i++) top = h[i] > top ? h[i] : top;
  if (!(top > 0)) top = amax;
  return top > 0 ? top / rt_ref_f8_max(fmt) : 1.0f;
}

void rt_ref_amax_push(float *h, int64_t H, float amax) {
  if (H < 1) return;
  memmove(h + 1, h, sizeof *h * (size_t)(H - 1));
  h[0] = amax;
}
