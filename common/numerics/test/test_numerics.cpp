// Unit tests of the number formats (vtrn/numerics.h) against values worked
// out by hand from the specifications: bf16, OCP OFP8 rev 1.0 (E4M3, E5M2,
// saturating and non-saturating conversion) and OCP MX v1.0 (E2M1 elements,
// E8M0 scales, block quantization). Besides the tables, every code of each
// 8- and 4-bit format is round-tripped, and random f32 values are checked
// against a brute-force nearest-value search over the decoded code table
// (ties to the even code), which catches any rounding slip the tables miss.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// cmocka 1.1 ships no extern "C" guards.
extern "C" {
#include <cmocka.h>
}

#include "vtrn/numerics.h"

using namespace vtrn::num;

namespace {

float f(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}
uint32_t u(float x) {
  uint32_t v;
  memcpy(&v, &x, 4);
  return v;
}
bool is_neg_zero(float x) { return u(x) == 0x80000000u; }

constexpr float kInf = INFINITY;

// dtype names

void test_dtype_names_round_trip_and_reject_unknown(void**) {
  const DType all[] = {DType::kF32, DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2, DType::kMXFP4};
  for (DType d : all) {
    DType back = DType::kMXFP4;
    assert_true(parse_dtype(dtype_name(d), &back));
    assert_int_equal(uint32_t(back), uint32_t(d));
  }
  DType d = DType::kBF16;
  assert_true(parse_dtype("f32", &d));
  assert_int_equal(uint32_t(d), uint32_t(DType::kF32));
  assert_string_equal(dtype_name(DType::kFP8E4M3), "fp8-e4m3");
  assert_string_equal(dtype_name(DType(9)), "unknown");
  d = DType::kBF16;
  assert_false(parse_dtype("FP32", &d));
  assert_false(parse_dtype("fp8", &d));
  assert_false(parse_dtype("", &d));
  assert_false(parse_dtype(nullptr, &d));
  assert_int_equal(uint32_t(d), uint32_t(DType::kBF16));
  assert_true(dtype_valid(4));
  assert_false(dtype_valid(5));
}

// bf16

void test_bf16_rounds_to_nearest_even(void**) {
  assert_int_equal(f32_to_bf16(1.0f), 0x3F80);
  // 1 + 2^-8 is halfway between 0x3F80 and 0x3F81: the even one.
  assert_int_equal(f32_to_bf16(f(0x3F808000u)), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 0x3F81 and 0x3F82: the even one.
  assert_int_equal(f32_to_bf16(f(0x3F818000u)), 0x3F82);
  assert_int_equal(f32_to_bf16(f(0x3F808001u)), 0x3F81);
  assert_int_equal(f32_to_bf16(f(0x3F807FFFu)), 0x3F80);
  assert_int_equal(f32_to_bf16(-1.5f), 0xBFC0);
}

void test_bf16_special_values(void**) {
  assert_int_equal(f32_to_bf16(-0.0f), 0x8000);
  assert_int_equal(f32_to_bf16(kInf), 0x7F80);
  assert_int_equal(f32_to_bf16(-kInf), 0xFF80);
  // The largest f32 is past the largest bf16 by more than half an ulp: inf.
  assert_int_equal(f32_to_bf16(f(0x7F7FFFFFu)), 0x7F80);
  assert_int_equal(f32_to_bf16(f(0x7F7F7FFFu)), 0x7F7F);
  // A signalling NaN whose payload sits in the low half must stay NaN.
  const uint16_t snan = f32_to_bf16(f(0x7F800001u));
  assert_int_equal(snan, 0x7FC0);
  assert_true(isnan(bf16_to_f32(snan)));
  assert_int_equal(f32_to_bf16(f(0xFFC12345u)), 0xFFC1);
  // f32 subnormals round like any other value.
  assert_int_equal(f32_to_bf16(f(0x00010000u)), 0x0001);
  assert_int_equal(f32_to_bf16(f(0x00008000u)), 0x0000);
  assert_int_equal(f32_to_bf16(f(0x00018000u)), 0x0002);
  assert_true(bf16_to_f32(0x0001) == ldexpf(1.0f, -133));
  assert_true(bf16_to_f32(0x7F7F) == 3.38953139e38f);
  assert_true(is_neg_zero(bf16_to_f32(0x8000)));
}

// OFP8 E4M3

void test_e4m3_decodes_the_spec_table(void**) {
  assert_true(e4m3_to_f32(0x7E) == 448.0f);           // max normal S.1111.110
  assert_true(e4m3_to_f32(0xFE) == -448.0f);
  assert_true(isnan(e4m3_to_f32(0x7F)));              // the only NaN, both signs
  assert_true(isnan(e4m3_to_f32(0xFF)));
  assert_true(e4m3_to_f32(0x78) == 256.0f);           // S.1111.000 is a number
  assert_true(e4m3_to_f32(0x77) == 240.0f);
  assert_true(e4m3_to_f32(0x38) == 1.0f);
  assert_true(e4m3_to_f32(0x08) == ldexpf(1.0f, -6));  // min normal
  assert_true(e4m3_to_f32(0x07) == 7 * ldexpf(1.0f, -9));  // max subnormal
  assert_true(e4m3_to_f32(0x01) == ldexpf(1.0f, -9));  // min subnormal
  assert_true(e4m3_to_f32(0x00) == 0.0f);
  assert_true(is_neg_zero(e4m3_to_f32(0x80)));
  int nans = 0;
  for (int c = 0; c < 256; ++c) nans += isnan(e4m3_to_f32(uint8_t(c))) ? 1 : 0;
  assert_int_equal(nans, 2);
  for (int c = 0; c < 256; ++c) assert_false(isinf(e4m3_to_f32(uint8_t(c))));
}

void test_e4m3_encode_rounds_ties_to_even(void**) {
  assert_int_equal(f32_to_e4m3(1.0f, false), 0x38);
  assert_int_equal(f32_to_e4m3(1.0625f, false), 0x38);  // 1 + 1/16: between 1 and 1.125
  assert_int_equal(f32_to_e4m3(1.1875f, false), 0x3A);  // between 1.125 (odd) and 1.25
  assert_int_equal(f32_to_e4m3(1.0626f, false), 0x39);
  assert_int_equal(f32_to_e4m3(ldexpf(1.0f, -9), false), 0x01);
  assert_int_equal(f32_to_e4m3(ldexpf(1.0f, -10), false), 0x00);  // half the min subnormal
  assert_int_equal(f32_to_e4m3(ldexpf(1.0001f, -10), false), 0x01);
  assert_int_equal(f32_to_e4m3(3 * ldexpf(1.0f, -10), false), 0x02);  // 1.5 units -> 2
  assert_int_equal(f32_to_e4m3(5 * ldexpf(1.0f, -10), false), 0x02);  // 2.5 units -> 2
  // 7.5 subnormal units: the tie goes up to the even code, the min normal.
  assert_int_equal(f32_to_e4m3(15 * ldexpf(1.0f, -10), false), 0x08);
  assert_int_equal(f32_to_e4m3(-0.0f, false), 0x80);
  assert_int_equal(f32_to_e4m3(ldexpf(-1.0f, -12), false), 0x80);  // underflow keeps the sign
  assert_int_equal(f32_to_e4m3(f(0x00000001u), false), 0x00);        // f32 subnormal
  assert_int_equal(f32_to_e4m3(-3.0f, true), 0xC4);
}

void test_e4m3_overflow_saturates_or_gives_nan(void**) {
  assert_int_equal(f32_to_e4m3(448.0f, false), 0x7E);
  // 464 is halfway between 448 (even) and the 480 the format lacks.
  assert_int_equal(f32_to_e4m3(464.0f, false), 0x7E);
  assert_int_equal(f32_to_e4m3(464.01f, false), 0x7F);
  assert_int_equal(f32_to_e4m3(464.01f, true), 0x7E);
  assert_int_equal(f32_to_e4m3(1e30f, false), 0x7F);
  assert_int_equal(f32_to_e4m3(-1e30f, false), 0xFF);
  assert_int_equal(f32_to_e4m3(-1e30f, true), 0xFE);
  assert_int_equal(f32_to_e4m3(f(0x7F7FFFFFu), true), 0x7E);
  // No infinities in E4M3: inf is NaN, or max when saturating.
  assert_int_equal(f32_to_e4m3(kInf, false), 0x7F);
  assert_int_equal(f32_to_e4m3(-kInf, false), 0xFF);
  assert_int_equal(f32_to_e4m3(kInf, true), 0x7E);
  assert_int_equal(f32_to_e4m3(-kInf, true), 0xFE);
  // NaN stays NaN in both modes.
  assert_int_equal(f32_to_e4m3(NAN, true), 0x7F);
  assert_int_equal(f32_to_e4m3(NAN, false), 0x7F);
  assert_int_equal(f32_to_e4m3(-NAN, true), 0xFF);
}

// OFP8 E5M2

void test_e5m2_decodes_the_spec_table(void**) {
  assert_true(e5m2_to_f32(0x7B) == 57344.0f);  // max normal S.11110.11
  assert_true(e5m2_to_f32(0x7C) == kInf);
  assert_true(e5m2_to_f32(0xFC) == -kInf);
  assert_true(isnan(e5m2_to_f32(0x7D)));
  assert_true(isnan(e5m2_to_f32(0x7E)));
  assert_true(isnan(e5m2_to_f32(0x7F)));
  assert_true(isnan(e5m2_to_f32(0xFD)));
  assert_true(e5m2_to_f32(0x3C) == 1.0f);
  assert_true(e5m2_to_f32(0x04) == ldexpf(1.0f, -14));     // min normal
  assert_true(e5m2_to_f32(0x03) == 3 * ldexpf(1.0f, -16));  // max subnormal
  assert_true(e5m2_to_f32(0x01) == ldexpf(1.0f, -16));     // min subnormal
  assert_true(is_neg_zero(e5m2_to_f32(0x80)));
  int nans = 0, infs = 0;
  for (int c = 0; c < 256; ++c) {
    nans += isnan(e5m2_to_f32(uint8_t(c))) ? 1 : 0;
    infs += isinf(e5m2_to_f32(uint8_t(c))) ? 1 : 0;
  }
  assert_int_equal(nans, 6);
  assert_int_equal(infs, 2);
}

void test_e5m2_encode_rounding_overflow_and_specials(void**) {
  assert_int_equal(f32_to_e5m2(1.125f, false), 0x3C);  // between 1 and 1.25: even
  assert_int_equal(f32_to_e5m2(1.375f, false), 0x3E);  // between 1.25 (odd) and 1.5
  assert_int_equal(f32_to_e5m2(ldexpf(1.0f, -17), false), 0x00);
  assert_int_equal(f32_to_e5m2(3 * ldexpf(1.0f, -17), false), 0x02);
  assert_int_equal(f32_to_e5m2(57344.0f, false), 0x7B);
  assert_int_equal(f32_to_e5m2(61439.0f, false), 0x7B);
  // 61440 is halfway between 57344 (odd) and 65536: the even neighbour is
  // past the max, so overflow: inf, or max when saturating.
  assert_int_equal(f32_to_e5m2(61440.0f, false), 0x7C);
  assert_int_equal(f32_to_e5m2(61440.0f, true), 0x7B);
  assert_int_equal(f32_to_e5m2(-1e10f, false), 0xFC);
  assert_int_equal(f32_to_e5m2(-1e10f, true), 0xFB);
  assert_int_equal(f32_to_e5m2(kInf, false), 0x7C);
  assert_int_equal(f32_to_e5m2(-kInf, false), 0xFC);
  assert_int_equal(f32_to_e5m2(kInf, true), 0x7B);
  assert_int_equal(f32_to_e5m2(-kInf, true), 0xFB);
  assert_true(isnan(e5m2_to_f32(f32_to_e5m2(NAN, true))));
  assert_true(isnan(e5m2_to_f32(f32_to_e5m2(NAN, false))));
  assert_int_equal(f32_to_e5m2(-0.0f, true), 0x80);
}

// MX element and scale types

void test_e2m1_has_exactly_the_spec_values(void**) {
  const float want[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (uint8_t c = 0; c < 8; ++c) {
    assert_true(e2m1_to_f32(c) == want[c]);
    assert_true(e2m1_to_f32(uint8_t(c | 8)) == -want[c]);
  }
  assert_true(is_neg_zero(e2m1_to_f32(8)));
  // Only the low nibble is the code.
  assert_true(e2m1_to_f32(0xF7) == 6.0f);
  assert_true(e2m1_to_f32(0x7F) == -6.0f);
}

void test_e2m1_encode_ties_saturation_and_specials(void**) {
  assert_int_equal(f32_to_e2m1(0.25f), 0x0);   // 0 (even) vs 0.5
  assert_int_equal(f32_to_e2m1(0.2501f), 0x1);
  assert_int_equal(f32_to_e2m1(0.75f), 0x2);   // 0.5 (odd) vs 1.0
  assert_int_equal(f32_to_e2m1(1.25f), 0x2);   // 1.0 vs 1.5 (odd)
  assert_int_equal(f32_to_e2m1(1.75f), 0x4);   // 1.5 (odd) vs 2.0
  assert_int_equal(f32_to_e2m1(2.5f), 0x4);    // 2 vs 3 (odd)
  assert_int_equal(f32_to_e2m1(3.5f), 0x6);    // 3 (odd) vs 4
  assert_int_equal(f32_to_e2m1(5.0f), 0x6);    // 4 vs 6 (odd)
  assert_int_equal(f32_to_e2m1(5.01f), 0x7);
  assert_int_equal(f32_to_e2m1(7.0f), 0x7);    // saturates
  assert_int_equal(f32_to_e2m1(1e30f), 0x7);
  assert_int_equal(f32_to_e2m1(kInf), 0x7);
  assert_int_equal(f32_to_e2m1(-kInf), 0xF);
  assert_int_equal(f32_to_e2m1(-2.9f), 0xD);
  assert_int_equal(f32_to_e2m1(-0.0f), 0x8);
  assert_int_equal(f32_to_e2m1(-0.1f), 0x8);
  assert_int_equal(f32_to_e2m1(NAN), 0x0);
}

void test_e8m0_is_a_power_of_two_or_nan(void**) {
  for (int e = 0; e < 255; ++e) assert_true(e8m0_to_f32(uint8_t(e)) == ldexpf(1.0f, e - 127));
  assert_true(e8m0_to_f32(127) == 1.0f);
  assert_true(e8m0_to_f32(0) == ldexpf(1.0f, -127));  // an f32 subnormal
  assert_true(isnan(e8m0_to_f32(0xFF)));
}

// exhaustive round trips

void test_every_fp8_and_fp4_code_round_trips(void**) {
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_to_f32(uint8_t(c));
    if (isnan(v)) {
      assert_true((c & 0x7F) == 0x7F);
      assert_true(isnan(e4m3_to_f32(f32_to_e4m3(v, false))));
      continue;
    }
    assert_int_equal(f32_to_e4m3(v, false), c);
    assert_int_equal(f32_to_e4m3(v, true), c);
  }
  for (int c = 0; c < 256; ++c) {
    const float v = e5m2_to_f32(uint8_t(c));
    if (isnan(v)) {
      assert_true(isnan(e5m2_to_f32(f32_to_e5m2(v, true))));
      continue;
    }
    assert_int_equal(f32_to_e5m2(v, false), c);
    if (isinf(v)) {
      assert_int_equal(f32_to_e5m2(v, true), (c & 0x80) | 0x7B);
    } else {
      assert_int_equal(f32_to_e5m2(v, true), c);
    }
  }
  for (int c = 0; c < 16; ++c) assert_int_equal(f32_to_e2m1(e2m1_to_f32(uint8_t(c))), c);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = bf16_to_f32(uint16_t(h));
    if (isnan(v)) {
      assert_true(isnan(bf16_to_f32(f32_to_bf16(v))));
    } else {
      assert_int_equal(f32_to_bf16(v), h);
    }
  }
}

// Brute force: the code whose value is nearest to x, ties to the even code,
// among the finite codes of a table; `overflow` is returned past max + half
// an ulp (the caller passes the format's rule).
template <typename Decode>
int nearest_code(float x, int ncodes, Decode decode) {
  int best = -1;
  double best_d = INFINITY;
  for (int c = 0; c < ncodes; ++c) {
    const float v = decode(uint8_t(c));
    if (!isfinite(v)) continue;
    if (signbit(v) != signbit(x)) continue;  // keep the sign of zero
    const double d = fabs(double(v) - double(x));
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

uint32_t g_rng = 12345;
uint32_t next_rand() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 17;
  g_rng ^= g_rng << 5;
  return g_rng;
}

void test_random_values_encode_to_the_nearest_code(void**) {
  for (int i = 0; i < 100000; ++i) {
    // Exponents spread over each format's range and a little beyond.
    const float m = float(next_rand() % 0x1000000u) / float(0x1000000u) + 1.0f;
    const bool neg = next_rand() & 1u;
    {
      const int e = int(next_rand() % 30) - 22;  // 2^-22 .. 2^7 (< 448 only partly)
      float x = ldexpf(m, e);
      if (x > 448.0f) x = 448.0f;
      if (neg) x = -x;
      assert_int_equal(f32_to_e4m3(x, false), nearest_code(x, 256, e4m3_to_f32));
    }
    {
      const int e = int(next_rand() % 40) - 24;  // 2^-24 .. 2^15
      float x = ldexpf(m, e);
      if (x > 57344.0f) x = 57344.0f;
      if (neg) x = -x;
      assert_int_equal(f32_to_e5m2(x, false), nearest_code(x, 256, e5m2_to_f32));
    }
    {
      const int e = int(next_rand() % 6) - 4;  // 2^-4 .. 2^1 (< 6)
      float x = ldexpf(m, e);
      if (neg) x = -x;
      assert_int_equal(f32_to_e2m1(x), nearest_code(x, 16, e2m1_to_f32));
    }
  }
}

// MX blocks

void test_mx_block_hand_computed(void**) {
  float v[32] = {};
  v[0] = 1.0f;
  v[1] = -0.3f;
  v[2] = 12.0f;   // amax: floor(log2 12) = 3, shared = 3 - 2 = 1, X = 2
  v[3] = 0.75f;
  v[4] = -5.0f;
  v[5] = 7.0f;
  uint8_t packed[16];
  const uint8_t scale = mx_quantize_block(v, packed);
  assert_int_equal(scale, 127 + 1);
  // V/X: 0.5 -> 0x1, -0.15 -> -0 (0x8), 6 -> 0x7, 0.375 -> 0.5 (0x1),
  // -2.5 -> -2 (tie to even, 0xC), 3.5 -> 4 (tie to even, 0x6).
  assert_int_equal(packed[0], 0x81);
  assert_int_equal(packed[1], 0x17);
  assert_int_equal(packed[2], 0x6C);
  for (int i = 3; i < 16; ++i) assert_int_equal(packed[i], 0);
  float out[32];
  mx_dequantize_block(scale, packed, out);
  assert_true(out[0] == 1.0f);
  assert_true(is_neg_zero(out[1]));
  assert_true(out[2] == 12.0f);
  assert_true(out[3] == 1.0f);
  assert_true(out[4] == -4.0f);
  assert_true(out[5] == 8.0f);
  assert_true(out[31] == 0.0f);
}

void test_mx_block_saturates_just_below_the_next_power_of_two(void**) {
  float v[32] = {};
  v[7] = 7.9f;  // floor(log2 7.9) = 2: X = 1, and 7.9 clips to 6
  v[8] = -7.9f;
  uint8_t packed[16];
  assert_int_equal(mx_quantize_block(v, packed), 127);
  assert_int_equal(packed[3], 0x70);
  assert_int_equal(packed[4], 0x0F);
  v[7] = 8.0f;  // the next binade: X = 2
  assert_int_equal(mx_quantize_block(v, packed), 128);
  assert_int_equal(packed[3], 0x60);  // 8/2 = 4 -> 0x6
}

void test_mx_block_of_zeros_gets_the_smallest_scale(void**) {
  float v[32] = {};
  v[5] = -0.0f;
  uint8_t packed[16];
  memset(packed, 0xAA, sizeof packed);
  assert_int_equal(mx_quantize_block(v, packed), 0);
  assert_int_equal(packed[2], 0x80);  // element 5 keeps its sign
  packed[2] = 0;
  for (int i = 0; i < 16; ++i) assert_int_equal(packed[i], 0);
  float out[32];
  mx_dequantize_block(0, packed, out);
  for (int i = 0; i < 32; ++i) assert_true(out[i] == 0.0f);
}

void test_mx_block_with_nan_or_inf_gets_the_nan_scale(void**) {
  float v[32];
  for (int i = 0; i < 32; ++i) v[i] = float(i) * 0.25f;
  uint8_t packed[16];
  v[17] = NAN;
  assert_int_equal(mx_quantize_block(v, packed), kE8M0Nan);
  float out[32];
  mx_dequantize_block(kE8M0Nan, packed, out);
  for (int i = 0; i < 32; ++i) assert_true(isnan(out[i]));
  v[17] = -kInf;
  assert_int_equal(mx_quantize_block(v, packed), kE8M0Nan);
  // Any element codes under a NaN scale still decode as NaN.
  for (int i = 0; i < 16; ++i) packed[i] = 0x35;
  mx_dequantize_block(kE8M0Nan, packed, out);
  for (int i = 0; i < 32; ++i) assert_true(isnan(out[i]));
}

void test_mx_block_scale_clamps_at_the_e8m0_range(void**) {
  float v[32] = {};
  uint8_t packed[16];
  float out[32];
  // amax 2^-125: shared = -127 exactly, V/X = 4.
  v[0] = ldexpf(1.0f, -125);
  assert_int_equal(mx_quantize_block(v, packed), 0);
  assert_int_equal(packed[0], 0x06);
  mx_dequantize_block(0, packed, out);
  assert_true(out[0] == ldexpf(1.0f, -125));
  // amax 2^-130 (an f32 subnormal): shared -132 clamps to -127, V/X = 1/8 -> 0.
  v[0] = ldexpf(1.0f, -130);
  assert_int_equal(mx_quantize_block(v, packed), 0);
  assert_int_equal(packed[0], 0x00);
  // The largest f32: shared = 127 - 2, V/X = 7.99.. clips to 6, finite.
  v[0] = f(0x7F7FFFFFu);
  v[1] = -ldexpf(1.0f, 126);  // V/X = -2
  assert_int_equal(mx_quantize_block(v, packed), 127 + 125);
  assert_int_equal(packed[0], 0xC7);
  mx_dequantize_block(uint8_t(127 + 125), packed, out);
  assert_true(out[0] == 6.0f * ldexpf(1.0f, 125));
  assert_true(out[1] == -ldexpf(1.0f, 126));
}

// operands

void test_operand_and_scale_sizes(void**) {
  assert_int_equal(operand_bytes(DType::kF32, 3, 5), 60);
  assert_int_equal(operand_bytes(DType::kBF16, 3, 5), 30);
  assert_int_equal(operand_bytes(DType::kFP8E4M3, 3, 5), 15);
  assert_int_equal(operand_bytes(DType::kFP8E5M2, 3, 5), 15);
  assert_int_equal(operand_bytes(DType::kMXFP4, 3, 64), 96);
  assert_int_equal(scale_bytes(DType::kMXFP4, 3, 64), 6);
  assert_int_equal(scale_bytes(DType::kBF16, 3, 64), 0);
  // 64-bit arithmetic: no wrap at 4 GiB.
  assert_true(operand_bytes(DType::kF32, 0x10000, 0x10000) == (size_t(1) << 34));
}

void test_check_gemm_names_the_bad_field(void**) {
  assert_true(check_gemm(DType::kMXFP4, 1, 3, 64).ok());
  assert_string_equal(check_gemm(DType::kMXFP4, 1, 3, 64).detail(), "");
  assert_false(check_gemm(DType::kMXFP4, 4, 4, 33).ok());
  assert_string_equal(check_gemm(DType::kMXFP4, 4, 4, 33).detail(), "k: 33 is not a multiple of 32 for mxfp4");
  assert_true(check_gemm(DType::kBF16, 4, 4, 33).ok());
  assert_false(check_gemm(DType::kF32, 0, 4, 4).ok());
  assert_string_equal(check_gemm(DType::kF32, 0, 4, 4).detail(), "m: must be at least 1");
  assert_false(check_gemm(DType::kF32, 4, 0, 4).ok());
  assert_string_equal(check_gemm(DType::kF32, 4, 0, 4).detail(), "n: must be at least 1");
  assert_false(check_gemm(DType::kF32, 4, 4, 0).ok());
  assert_string_equal(check_gemm(DType::kF32, 4, 4, 0).detail(), "k: must be at least 1");
  assert_false(check_gemm(DType(7), 4, 4, 4).ok());
  assert_string_equal(check_gemm(DType(7), 4, 4, 4).detail(), "dtype: 7 is not a known dtype (fp32, bf16, fp8-e4m3, fp8-e5m2, mxfp4)");
  assert_false(check_gemm(DType::kF32, 0xFFFFFFFFu, 4, 0xFFFFFFFFu).ok());
  assert_string_equal(check_gemm(DType::kF32, 0xFFFFFFFFu, 4, 0xFFFFFFFFu).detail(), "a: 4294967295 x 4294967295 elements exceed the 1024 GiB operand limit");
  assert_false(check_gemm(DType::kFP8E4M3, 1u << 20, 1u << 20, 16).ok());
  assert_string_equal(check_gemm(DType::kFP8E4M3, 1u << 20, 1u << 20, 16).detail(), "c: 1048576 x 1048576 elements exceed the 1024 GiB operand limit");
  // Right at the limit: 2^38 f32 elements of c are exactly 2^40 bytes.
  assert_true(check_gemm(DType::kFP8E4M3, 1u << 19, 1u << 19, 16).ok());
  assert_int_equal(int(check_gemm(DType::kMXFP4, 4, 4, 33).code()),
                   int(vtrn::Code::kInvalidArgument));
}

void test_mxfp4_operand_packs_low_nibble_first_with_row_scales(void**) {
  constexpr uint32_t kRows = 2, kK = 64;
  float src[kRows * kK];
  for (uint32_t i = 0; i < kRows * kK; ++i) src[i] = 0.0f;
  src[0] = 1.0f;        // row 0 block 0: X = 2^-2 (amax 1), 1 / X = 4 -> 0x6
  src[1] = -0.5f;       // -2 -> 0xC
  src[32] = 6.0f;       // row 0 block 1: X = 1
  src[64 + 3] = 3.0f;   // row 1 block 0: X = 2^-1, 3 / X = 6 -> 0x7 (odd k: high nibble)
  uint8_t packed[kRows * kK / 2];
  uint8_t scales[kRows * kK / 32];
  quantize_operand(DType::kMXFP4, src, kRows, kK, packed, scales);
  assert_int_equal(scales[0], 125);
  assert_int_equal(scales[1], 127);
  assert_int_equal(scales[2], 126);
  assert_int_equal(scales[3], 0);
  assert_int_equal(packed[0], 0xC6);
  assert_int_equal(packed[16], 0x07);
  assert_int_equal(packed[32 + 1], 0x70);
  float back[kRows * kK];
  dequantize_operand(DType::kMXFP4, packed, scales, kRows, kK, back);
  for (uint32_t i = 0; i < kRows * kK; ++i) assert_true(back[i] == src[i]);
}

void test_operands_of_every_dtype_decode_to_the_scalar_conversions(void**) {
  constexpr uint32_t kRows = 3, kK = 32;
  float src[kRows * kK];
  for (uint32_t i = 0; i < kRows * kK; ++i) src[i] = (float(i) - 40.0f) * 1.37f;
  src[5] = 1e6f;  // saturates in fp8
  uint8_t buf[kRows * kK * 4];
  float back[kRows * kK];
  quantize_operand(DType::kBF16, src, kRows, kK, buf, nullptr);
  dequantize_operand(DType::kBF16, buf, nullptr, kRows, kK, back);
  for (uint32_t i = 0; i < kRows * kK; ++i) assert_true(back[i] == bf16_to_f32(f32_to_bf16(src[i])));
  quantize_operand(DType::kFP8E4M3, src, kRows, kK, buf, nullptr);
  dequantize_operand(DType::kFP8E4M3, buf, nullptr, kRows, kK, back);
  for (uint32_t i = 0; i < kRows * kK; ++i)
    assert_true(back[i] == e4m3_to_f32(f32_to_e4m3(src[i], true)));
  assert_true(back[5] == 448.0f);
  quantize_operand(DType::kFP8E5M2, src, kRows, kK, buf, nullptr);
  dequantize_operand(DType::kFP8E5M2, buf, nullptr, kRows, kK, back);
  assert_true(back[5] == 57344.0f);
  quantize_operand(DType::kF32, src, kRows, kK, buf, nullptr);
  dequantize_operand(DType::kF32, buf, nullptr, kRows, kK, back);
  assert_memory_equal(back, src, sizeof src);
}

// Whole-operand decode goes through tables: every code of every 8-bit
// format, and every packed MXFP4 byte under several scales (the smallest,
// 1, the largest, NaN), must give exactly the scalar conversion's bits.
void test_operand_decode_is_bit_identical_to_the_scalar_conversions_for_every_code(void**) {
  uint8_t codes[256];
  for (uint32_t i = 0; i < 256; ++i) codes[i] = uint8_t(i);
  float back[256];
  dequantize_operand(DType::kFP8E4M3, codes, nullptr, 8, 32, back);
  for (uint32_t i = 0; i < 256; ++i) assert_int_equal(u(back[i]), u(e4m3_to_f32(uint8_t(i))));
  dequantize_operand(DType::kFP8E5M2, codes, nullptr, 8, 32, back);
  for (uint32_t i = 0; i < 256; ++i) assert_int_equal(u(back[i]), u(e5m2_to_f32(uint8_t(i))));
  // 256 packed bytes = 512 elements = 16 blocks of 32, one scale per block.
  const uint8_t scale_set[4] = {0, 127, 254, kE8M0Nan};
  for (uint8_t sc : scale_set) {
    uint8_t scales[16];
    memset(scales, sc, sizeof scales);
    float mx[512];
    dequantize_operand(DType::kMXFP4, codes, scales, 16, 32, mx);
    for (uint32_t i = 0; i < 512; ++i) {
      const uint8_t b = codes[i / 2];
      const float want = e2m1_to_f32(uint8_t(i % 2 == 0 ? b & 0xFu : b >> 4)) * e8m0_to_f32(sc);
      assert_int_equal(u(mx[i]), u(want));
    }
  }
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtype_names_round_trip_and_reject_unknown),
      cmocka_unit_test(test_bf16_rounds_to_nearest_even),
      cmocka_unit_test(test_bf16_special_values),
      cmocka_unit_test(test_e4m3_decodes_the_spec_table),
      cmocka_unit_test(test_e4m3_encode_rounds_ties_to_even),
      cmocka_unit_test(test_e4m3_overflow_saturates_or_gives_nan),
      cmocka_unit_test(test_e5m2_decodes_the_spec_table),
      cmocka_unit_test(test_e5m2_encode_rounding_overflow_and_specials),
      cmocka_unit_test(test_e2m1_has_exactly_the_spec_values),
      cmocka_unit_test(test_e2m1_encode_ties_saturation_and_specials),
      cmocka_unit_test(test_e8m0_is_a_power_of_two_or_nan),
      cmocka_unit_test(test_every_fp8_and_fp4_code_round_trips),
      cmocka_unit_test(test_random_values_encode_to_the_nearest_code),
      cmocka_unit_test(test_mx_block_hand_computed),
      cmocka_unit_test(test_mx_block_saturates_just_below_the_next_power_of_two),
      cmocka_unit_test(test_mx_block_of_zeros_gets_the_smallest_scale),
      cmocka_unit_test(test_mx_block_with_nan_or_inf_gets_the_nan_scale),
      cmocka_unit_test(test_mx_block_scale_clamps_at_the_e8m0_range),
      cmocka_unit_test(test_operand_and_scale_sizes),
      cmocka_unit_test(test_check_gemm_names_the_bad_field),
      cmocka_unit_test(test_mxfp4_operand_packs_low_nibble_first_with_row_scales),
      cmocka_unit_test(test_operands_of_every_dtype_decode_to_the_scalar_conversions),
      cmocka_unit_test(test_operand_decode_is_bit_identical_to_the_scalar_conversions_for_every_code),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
