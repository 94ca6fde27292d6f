// Elementwise and row kernels (kernels.h): add, multiply, GELU, row softmax
// and row sum over f32, each over a range so cores can split one step.
//
// exp is our own (exp_f32) rather than libm's expf: picolibc's expf reports
// underflow through errno, which lives in TLS that only the boot core has set
// up, and softmax underflows routinely (exp of x - max for far-below-max x).
// GELU uses erff from the C library (glibc on the host, picolibc on the
// chip), which never touches errno; the two may differ by an ulp.
#include "vtrn/kernels.h"

namespace vtrn::kern {
namespace {

constexpr float kInf = __builtin_inff();
constexpr float kNan = __builtin_nanf("");

float from_bits(uint32_t u) { return __builtin_bit_cast(float, u); }

// Inlined into softmax's loop (a call per element costs real time under TCG).
__attribute__((always_inline)) inline float exp_inline(float x) {
  if (x != x) return x + x;                  // NaN, made quiet
  if (x > 88.72283172607421875f) return kInf;  // exp(x) >= FLT_MAX * (1 + 2^-24)
  if (x < -103.972084045410156f) return 0.0f;  // below half the smallest subnormal
  // x = n ln2 + r, |r| <= ln2/2. n * kLn2Hi is exact (kLn2Hi has 9 trailing
  // zero bits and |n| <= 150), so r carries no cancellation error.
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.42860682030941723e-06f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * kLog2e + kRound) - kRound;
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  // Taylor to degree 7: truncation < 6e-9 relative on |r| <= 0.347.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t ni = int32_t(n);  // -150 .. 128
  // 2^ni may not be a normal f32: scale in two steps so the only rounding is
  // the last multiplication (which gives gradual underflow).
  if (ni > 127) {
    p *= 2.0f;
    ni -= 1;
  } else if (ni < -126) {
    p *= from_bits(uint32_t(127 - 64) << 23);  // 2^-64, exact
    ni += 64;
  }
  return p * from_bits(uint32_t(ni + 127) << 23);
}

}  // namespace

float exp_f32(float x) { return exp_inline(x); }

void add_range(const float* a, const float* b, float* out, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
}

void mul_range(const float* a, const float* b, float* out, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) out[i] = a[i] * b[i];
}

void gelu_range(const float* a, float* out, size_t begin, size_t end) {
  constexpr float kInvSqrt2 = 0.707106781186547524f;
  for (size_t i = begin; i < end; ++i) {
    const float x = a[i];
    out[i] = 0.5f * x * (1.0f + __builtin_erff(x * kInvSqrt2));
  }
}

void softmax_rows(const float* in, float* out, uint32_t cols, uint32_t row_begin,
                  uint32_t row_end) {
  for (uint32_t r = row_begin; r < row_end; ++r) {
    const float* x = in + size_t(r) * cols;
    float* y = out + size_t(r) * cols;
    float mx = -kInf;
    bool nan = false;
    for (uint32_t j = 0; j < cols; ++j) {
      const float v = x[j];
      nan |= v != v;
      mx = v > mx ? v : mx;
    }
    if (nan || mx == kInf || mx == -kInf) {
      // NaN in, inf - inf, or 0/0 for a row of only -inf: undefined.
      for (uint32_t j = 0; j < cols; ++j) y[j] = kNan;
      continue;
    }
    float sum = 0.0f;
    for (uint32_t j = 0; j < cols; ++j) {
      const float e = exp_inline(x[j] - mx);
      y[j] = e;
      sum += e;
    }
    // sum >= 1 (the max contributes exp(0)), so the division is safe.
    for (uint32_t j = 0; j < cols; ++j) y[j] = y[j] / sum;
  }
}

void sum_rows(const float* in, float* out, uint32_t cols, uint32_t row_begin, uint32_t row_end) {
  for (uint32_t r = row_begin; r < row_end; ++r) {
    const float* x = in + size_t(r) * cols;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    uint32_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      for (uint32_t l = 0; l < 8; ++l) acc[l] += x[j + l];
    }
    for (uint32_t l = 0; j < cols; ++j, ++l) acc[l] += x[j];
    out[r] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  }
}

}  // namespace vtrn::kern
