// Unit tests of the elementwise and row kernels (vtrn/kernels.h): add,
// multiply and GELU against double references, exp_f32 against libm's exp
// over the whole f32 range (ulp error and the special cases), softmax
// (stability with large values, -inf entries, NaN and all -inf rows, rows
// summing to one) and row sums, with range splits and special values.
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

#include <vector>

#include "vtrn/kernels.h"

using namespace vtrn;

namespace {

constexpr float kInf = INFINITY;

uint32_t g_rng;
float rand_unit() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 17;
  g_rng ^= g_rng << 5;
  return float(g_rng % 2000001u) / 1000000.0f - 1.0f;
}

int setup(void**) {
  g_rng = 0x1234567u;
  return 0;
}

// Distance in f32 ulps between a float and an exact (double) value.
double ulps(float got, double want) {
  const double ulp = ldexp(1.0, ilogb(fmax(fabs(want), 0x1p-126)) - 23);
  return fabs(double(got) - want) / ulp;
}

void test_add_and_mul_over_a_range_are_exact_and_leave_the_rest(void**) {
  std::vector<float> a(50), b(50), out(50, -7.0f);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = rand_unit() * 100;
    b[i] = rand_unit() * 100;
  }
  a[10] = NAN;
  b[11] = kInf;
  a[12] = -kInf;
  b[12] = kInf;
  kern::add_range(a.data(), b.data(), out.data(), 5, 45);
  for (size_t i = 0; i < out.size(); ++i) {
    if (i < 5 || i >= 45) {
      assert_true(out[i] == -7.0f);
    } else if (i == 10 || i == 12) {
      assert_true(isnan(out[i]));  // NaN in, and -inf + inf
    } else {
      assert_true(out[i] == a[i] + b[i]);
    }
  }
  assert_true(out[11] == kInf);
  kern::mul_range(a.data(), b.data(), out.data(), 0, 50);
  for (size_t i = 0; i < out.size(); ++i) {
    if (i == 10) {
      assert_true(isnan(out[i]));
    } else {
      assert_true(out[i] == a[i] * b[i]);
    }
  }
  // In place: out aliases a.
  const std::vector<float> before = a;
  kern::add_range(a.data(), b.data(), a.data(), 0, 5);
  for (size_t i = 0; i < 5; ++i) assert_true(a[i] == before[i] + b[i]);
  for (size_t i = 5; i < a.size(); ++i) assert_true(memcmp(&a[i], &before[i], 4) == 0);
}

double gelu_ref(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

void test_gelu_matches_the_erf_form(void**) {
  std::vector<float> x, out;
  for (int i = -2000; i <= 2000; ++i) x.push_back(float(i) * 0.005f);  // -10 .. 10
  for (int i = 0; i < 1000; ++i) x.push_back(rand_unit() * 40.0f);
  x.push_back(1e-30f);
  x.push_back(-1e-30f);
  x.push_back(3e38f);
  out.resize(x.size());
  kern::gelu_range(x.data(), out.data(), 0, x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = gelu_ref(x[i]);
    // Absolute floor: for x << 0 gelu is a tiny negative number whose
    // relative error through erf's cancellation is large and irrelevant.
    const double tol = 8 * 0x1p-24 * fabs(want) + 1e-7;
    if (fabs(double(out[i]) - want) > tol) print_error("gelu(%g) = %g, want %g\n", x[i], out[i], want);
    assert_true(fabs(double(out[i]) - want) <= tol);
  }
  float s[4] = {NAN, kInf, -kInf, -0.0f};
  float r[4];
  kern::gelu_range(s, r, 0, 4);
  assert_true(isnan(r[0]));
  assert_true(r[1] == kInf);
  // -inf * (1 + erf(-inf)) = -inf * 0: NaN in IEEE arithmetic, as the erf
  // form computes it; the limit would be 0.
  assert_true(isnan(r[2]));
  assert_true(r[3] == 0.0f);
}

void test_exp_is_within_two_ulp_over_the_f32_range(void**) {
  double worst = 0;
  // Every 97th f32 bit pattern from -104 to 89 covers all binades densely.
  for (uint32_t bits = 0; bits < 0xFF800000u; bits += 97) {
    float x;
    memcpy(&x, &bits, 4);
    if (isnan(x) || x > 88.8f || x < -104.0f) continue;
    const double want = exp(double(x));
    const float got = kern::exp_f32(x);
    if (want > 3.4028234663852886e38) {
      assert_true(got == kInf);
      continue;
    }
    const double e = ulps(got, want);
    worst = e > worst ? e : worst;
  }
  print_message("exp_f32 worst error %.3f ulp\n", worst);
  assert_true(worst <= 2.0);
}

void test_exp_special_cases(void**) {
  assert_true(kern::exp_f32(0.0f) == 1.0f);
  assert_true(kern::exp_f32(-0.0f) == 1.0f);
  assert_true(kern::exp_f32(-kInf) == 0.0f);
  assert_true(kern::exp_f32(kInf) == kInf);
  assert_true(isnan(kern::exp_f32(NAN)));
  assert_true(kern::exp_f32(88.72283172607421875f) < kInf);   // largest finite result
  assert_true(kern::exp_f32(88.72283935546875f) == kInf);     // next float up overflows
  // Gradual underflow: exp(-100) is an f32 subnormal, not zero.
  const float sub = kern::exp_f32(-100.0f);
  assert_true(sub > 0.0f && sub < 0x1p-126f);
  assert_true(fabs(double(sub) - exp(-100.0)) <= 0x1p-149);
  assert_true(kern::exp_f32(-104.0f) == 0.0f);
  assert_true(kern::exp_f32(-1e30f) == 0.0f);
}

void softmax_ref(const float* x, double* y, uint32_t cols) {
  double mx = -INFINITY;
  for (uint32_t j = 0; j < cols; ++j) mx = fmax(mx, double(x[j]));
  double s = 0;
  for (uint32_t j = 0; j < cols; ++j) s += exp(double(x[j]) - mx);
  for (uint32_t j = 0; j < cols; ++j) y[j] = exp(double(x[j]) - mx) / s;
}

// Half an ulp of the f32 difference x_j - max, the absolute error it adds to
// the exponent (and so the relative error it adds to exp).
double diff_err(const float* x, uint32_t cols, uint32_t j) {
  float mx = -kInf;
  for (uint32_t i = 0; i < cols; ++i) mx = x[i] > mx ? x[i] : mx;
  const float d = x[j] - mx;
  if (d == 0 || isinf(d)) return 0;
  return ldexp(1.0, ilogb(d) - 24);
}

void test_softmax_is_stable_and_sums_to_one(void**) {
  constexpr uint32_t kRows = 6, kCols = 37;
  std::vector<float> x(kRows * kCols), y(kRows * kCols, -1.0f);
  for (float& v : x) v = rand_unit() * 20.0f;
  for (uint32_t j = 0; j < kCols; ++j) x[kCols + j] += 1e4f;     // large: naive exp overflows
  for (uint32_t j = 0; j < kCols; ++j) x[2 * kCols + j] -= 1e4f;  // very negative
  x[3 * kCols + 5] = -kInf;                                       // -inf entries give 0
  x[3 * kCols + 9] = -kInf;
  kern::softmax_rows(x.data(), y.data(), kCols, 0, 3);
  kern::softmax_rows(x.data(), y.data(), kCols, 3, kRows);
  std::vector<double> ref(kCols);
  for (uint32_t r = 0; r < kRows; ++r) {
    softmax_ref(&x[r * kCols], ref.data(), kCols);
    double sum = 0;
    for (uint32_t j = 0; j < kCols; ++j) {
      const float got = y[r * kCols + j];
      assert_true(isfinite(got));
      // x_j - max is rounded to f32 before exp: that error (half an ulp of
      // the difference, absolute) becomes a relative error of the result.
      assert_true(fabs(double(got) - ref[j]) <= ref[j] * (8 * 0x1p-24 + diff_err(x.data() + r * kCols, kCols, j)));
      sum += got;
    }
    assert_true(fabs(sum - 1.0) <= kCols * 0x1p-23);
  }
  assert_true(y[3 * kCols + 5] == 0.0f);
  assert_true(y[3 * kCols + 9] == 0.0f);
}

void test_softmax_special_rows(void**) {
  constexpr uint32_t kCols = 4;
  float x[4 * kCols] = {
      1, NAN, 2, 3,                  // NaN: all NaN
      -kInf, -kInf, -kInf, -kInf,    // only -inf: undefined, NaN
      0, kInf, 1, 2,                 // +inf: inf - inf, NaN
      5, 5, 5, 5,                    // equal: uniform
  };
  float y[4 * kCols];
  kern::softmax_rows(x, y, kCols, 0, 4);
  for (uint32_t j = 0; j < 3 * kCols; ++j) assert_true(isnan(y[j]));
  for (uint32_t j = 0; j < kCols; ++j) assert_true(y[3 * kCols + j] == 0.25f);
  // In place.
  kern::softmax_rows(x + 3 * kCols, x + 3 * kCols, kCols, 0, 1);
  for (uint32_t j = 0; j < kCols; ++j) assert_true(x[3 * kCols + j] == 0.25f);
  // One column: always 1 for a finite value.
  float one = -1e30f, out = 0;
  kern::softmax_rows(&one, &out, 1, 0, 1);
  assert_true(out == 1.0f);
}

void test_sum_rows_accumulates_within_the_f32_bound(void**) {
  constexpr uint32_t kRows = 5, kCols = 1003;
  std::vector<float> x(kRows * kCols);
  for (float& v : x) v = rand_unit() * 1000.0f;
  std::vector<float> out(kRows, -1.0f);
  kern::sum_rows(x.data(), out.data(), kCols, 1, kRows);
  assert_true(out[0] == -1.0f);
  for (uint32_t r = 1; r < kRows; ++r) {
    double s = 0, sa = 0;
    for (uint32_t j = 0; j < kCols; ++j) {
      s += x[r * kCols + j];
      sa += fabs(double(x[r * kCols + j]));
    }
    // Any order of kCols - 1 additions: gamma(kCols) * sum |x|.
    const double bound = kCols * 0x1p-24 / (1 - kCols * 0x1p-24) * sa;
    assert_true(fabs(double(out[r]) - s) <= bound);
  }
  // Exact for integers, in every tail length.
  for (uint32_t cols = 1; cols < 20; ++cols) {
    std::vector<float> ints(cols);
    double want = 0;
    for (uint32_t j = 0; j < cols; ++j) {
      ints[j] = float(j * 3) - 7.0f;
      want += ints[j];
    }
    float got = 0;
    kern::sum_rows(ints.data(), &got, cols, 0, 1);
    assert_true(double(got) == want);
  }
}

void test_sum_rows_special_values(void**) {
  float x[3 * 4] = {1, 2, NAN, 3, 1, kInf, 2, 3, kInf, -kInf, 0, 0};
  float out[3];
  kern::sum_rows(x, out, 4, 0, 3);
  assert_true(isnan(out[0]));
  assert_true(out[1] == kInf);
  assert_true(isnan(out[2]));
  // Large values do not overflow when the true sum is finite.
  float big[8] = {3e38f, -3e38f, 3e38f, -3e38f, 1, 1, 1, 1};
  float s = 0;
  kern::sum_rows(big, &s, 8, 0, 1);
  assert_true(s == 4.0f);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_add_and_mul_over_a_range_are_exact_and_leave_the_rest, setup),
      cmocka_unit_test_setup(test_gelu_matches_the_erf_form, setup),
      cmocka_unit_test_setup(test_exp_is_within_two_ulp_over_the_f32_range, setup),
      cmocka_unit_test_setup(test_exp_special_cases, setup),
      cmocka_unit_test_setup(test_softmax_is_stable_and_sums_to_one, setup),
      cmocka_unit_test_setup(test_softmax_special_rows, setup),
      cmocka_unit_test_setup(test_sum_rows_accumulates_within_the_f32_bound, setup),
      cmocka_unit_test_setup(test_sum_rows_special_values, setup),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
