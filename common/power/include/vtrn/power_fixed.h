// Fixed-point helpers of the power module: exp() in Q30 and exact energy
// accumulation.
//
// Why fixed point: the same sequence of inputs must give the same
// temperatures, energies and operating-point decisions on the host (tests)
// and in the firmware, bit for bit, so the models use only integer
// arithmetic. Why our own exp: the thermal model needs exp(-dt/tau) for its
// exact solution and leakage needs 2^(dT/T_double); picolibc's libm would be
// floating point and differ from glibc in the last bits. The approximation
// is bounded: argument range reduction by ln 2 and a 13-term Taylor series
// on [0, ln 2), error below 4e-9 relative over the whole supported range.
//
// Not a general math library: inputs outside the documented range clamp.
#pragma once

#include <stdint.h>

namespace vtrn::power {

inline constexpr int kQ = 30;
inline constexpr uint64_t kOneQ30 = 1ull << kQ;
inline constexpr int64_t kLn2Q30 = 744261118;  // round(ln 2 * 2^30)

// exp(x) for x in Q30. Clamped to x in [-44, +8]: exp(-44) is far below one
// Q30 ulp (returns 0), exp(8) ~ 2981 fits easily in 64 bits.
[[nodiscard]] uint64_t exp_q30(int64_t x_q30);

// exp(-num / den) in Q30, for any num and den > 0 (den == 0 returns 0).
// Used with num = dt_ns and den = tau_ns; never overflows.
[[nodiscard]] uint64_t exp_neg_ratio_q30(uint64_t num, uint64_t den);

// 2^(num / den) in Q30 for a signed ratio, clamped to [2^-20, 2^5].
[[nodiscard]] uint64_t exp2_ratio_q30(int64_t num, int64_t den);

// Energy counter: microjoules plus an exact femtojoule remainder, so that
// the sum of many short intervals equals one long interval exactly.
// power in uW times time in ns is fJ; it never overflows for power up to
// 1.8e10 uW (18 kW) in any single add, however long the interval.
class EnergyAccumulator {
 public:
  void add_power(uint64_t power_uw, uint64_t duration_ns);
  void add_femtojoules(uint64_t fj);
  [[nodiscard]] uint64_t microjoules() const { return uj_; }
  [[nodiscard]] uint64_t femtojoules_remainder() const { return fj_; }

 private:
  uint64_t uj_ = 0;
  uint64_t fj_ = 0;  // < 1e9
};

// Average power in uW between two readings of one accumulator over dt_ns.
[[nodiscard]] uint64_t average_power_uw(const EnergyAccumulator& before,
                                        const EnergyAccumulator& after, uint64_t dt_ns);

}  // namespace vtrn::power
