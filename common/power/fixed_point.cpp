// Integer exp/exp2 and the energy accumulator (see vtrn/power_fixed.h for
// why the power module avoids floating point and libm).
#include "vtrn/power_fixed.h"

namespace vtrn::power {

namespace {

constexpr uint64_t kFjPerUj = 1000000000ull;
constexpr uint64_t kNsPerS = 1000000000ull;

// round(2^32 / k) for k = 1..13: multiplying by these replaces the
// divisions of the series (a 64-bit divide costs tens of cycles on A53).
constexpr uint64_t kInv[14] = {0,          4294967296, 2147483648, 1431655765, 1073741824,
                               858993459,  715827883,  613566757,  536870912,  477218588,
                               429496730,  390451572,  357913941,  330382100};

// exp(r) for r in [0, ln 2) in Q30, by the Taylor series in Horner form:
// 1 + r(1 + r/2(1 + r/3(...(1 + r/13)))). The 13th-order remainder is
// < ln2^14 / 14! < 1e-13; each step rounds once (< 2^-30), and every
// product stays below 2^63.
uint64_t exp_small_q30(uint64_t r) {
  uint64_t s = kOneQ30;
  for (uint32_t k = 13; k >= 1; --k) {
    const uint64_t t = (s * r + (kOneQ30 >> 1)) >> kQ;  // < 2^31
    s = kOneQ30 + ((t * kInv[k] + (1ull << 31)) >> 32);
  }
  return s;
}

}  // namespace

uint64_t exp_q30(int64_t x) {
  constexpr int64_t kMin = -44 * static_cast<int64_t>(kOneQ30);
  constexpr int64_t kMax = 8 * static_cast<int64_t>(kOneQ30);
  if (x <= kMin) return 0;
  if (x > kMax) x = kMax;
  // x = n ln2 + r with r in [0, ln2): floor division for negative x.
  int64_t n = x / kLn2Q30;
  int64_t r = x - n * kLn2Q30;
  if (r < 0) {
    r += kLn2Q30;
    --n;
  }
  const uint64_t m = exp_small_q30(static_cast<uint64_t>(r));
  if (n >= 0) return m << n;
  const int64_t s = -n;
  if (s >= 62) return 0;
  return (m + (1ull << (s - 1))) >> s;
}

uint64_t exp_neg_ratio_q30(uint64_t num, uint64_t den) {
  if (den == 0) return 0;
  const uint64_t whole = num / den;
  if (whole >= 44) return 0;
  uint64_t rem = num % den;
  // rem << 30 must fit: shrink both until den < 2^34 (rem < den). Losing
  // the low bits of a denominator that large costs < 2^-33 relative.
  while (den >= (1ull << 34)) {
    den >>= 1;
    rem >>= 1;
  }
  const uint64_t frac = (rem << kQ) / den;
  const int64_t x = static_cast<int64_t>((whole << kQ) + frac);
  return exp_q30(-x);
}

uint64_t exp2_ratio_q30(int64_t num, int64_t den) {
  if (den <= 0) return kOneQ30;
  constexpr int64_t kLo = -20, kHi = 5;
  if (num <= kLo * den) return kOneQ30 >> 20;
  if (num >= kHi * den) return kOneQ30 << 5;
  // |num/den| <= 20 here. Split into whole and fractional parts so the
  // multiply by ln2 stays inside 64 bits for any num and den.
  int64_t whole = num / den;
  int64_t rem = num % den;
  uint64_t d = static_cast<uint64_t>(den);
  uint64_t r = static_cast<uint64_t>(rem < 0 ? -rem : rem);
  while (d >= (1ull << 33)) {
    d >>= 1;
    r >>= 1;
  }
  int64_t frac = static_cast<int64_t>((r << kQ) / d);
  if (rem < 0) frac = -frac;
  const int64_t y_q30 = whole * static_cast<int64_t>(kOneQ30) + frac;
  // y * ln2 with y in Q30 (|y| <= 20 * 2^30 < 2^35) and ln2 in Q30 (< 2^30):
  // product < 2^65 would overflow, so multiply by ln2 in Q15 halves.
  const int64_t hi = kLn2Q30 >> 15, lo = kLn2Q30 & 0x7fff;
  const int64_t x_q30 = ((y_q30 * hi) >> 15) + ((y_q30 * lo) >> 30);
  return exp_q30(x_q30);
}

void EnergyAccumulator::add_power(uint64_t power_uw, uint64_t duration_ns) {
  if (power_uw == 0) return;  // links down, gated cores without leakage
  if (duration_ns < kNsPerS) {
    add_femtojoules(power_uw * duration_ns);
    return;
  }
  // uW * s = uJ exactly; the sub-second part is uW * ns = fJ < 1.8e19.
  uj_ += power_uw * (duration_ns / kNsPerS);
  add_femtojoules(power_uw * (duration_ns % kNsPerS));
}

void EnergyAccumulator::add_femtojoules(uint64_t fj) {
  uj_ += fj / kFjPerUj;
  fj_ += fj % kFjPerUj;
  if (fj_ >= kFjPerUj) {
    fj_ -= kFjPerUj;
    ++uj_;
  }
}

uint64_t average_power_uw(const EnergyAccumulator& before, const EnergyAccumulator& after,
                          uint64_t dt_ns) {
  if (dt_ns == 0) return 0;
  const uint64_t duj = after.microjoules() - before.microjoules();
  const int64_t dfj = static_cast<int64_t>(after.femtojoules_remainder()) -
                      static_cast<int64_t>(before.femtojoules_remainder());
  // uJ / ns = 1e9 uW: exact in fJ while the interval's energy is < 1.8e10 uJ.
  if (duj < 18000000000ull) {
    const uint64_t fj = duj * kFjPerUj + static_cast<uint64_t>(dfj);
    return fj / dt_ns;
  }
  return duj / (dt_ns / 1000) * 1000000;
}

}  // namespace vtrn::power
