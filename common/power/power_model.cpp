// Power model formulas (documented in vtrn/power_model.h).
#include "vtrn/power_model.h"

#include "vtrn/power_fixed.h"

namespace vtrn::power {

uint64_t core_dynamic_uw(const PowerModelConfig& m, const OperatingPoint& op) {
  // pF * mV^2 * MHz = 1e-12 * 1e-6 * 1e6 W = 1e-12 W; / 1e6 gives uW.
  // Largest product 1e6 * 4e6 * 1e4 = 4e16 < 2^64.
  const uint64_t v = op.voltage_mv;
  return static_cast<uint64_t>(m.core_ceff_pf) * v * v * op.frequency_mhz / 1000000;
}

uint64_t core_leakage_uw(const PowerModelConfig& m, uint32_t voltage_mv, int32_t temperature_mc) {
  if (m.leakage_ref_mv == 0) return 0;
  const uint64_t at_v = static_cast<uint64_t>(m.core_leakage_mw) * 1000 * voltage_mv /
                        m.leakage_ref_mv;  // <= 1e8 * 2000 / 300
  const uint64_t f = exp2_ratio_q30(static_cast<int64_t>(temperature_mc) - m.leakage_ref_mc,
                                    m.leakage_doubling_mc);  // <= 2^35
  // at_v * f can reach 2^65, so multiply the high and low 15-bit halves of
  // at_v separately: (hi * 2^15 + lo) * f / 2^30.
  return (at_v >> 15) * f / (1ull << 15) + ((at_v & 0x7fff) * f >> kQ);
}

CoreRates core_rates(const PowerModelConfig& m, const OperatingPoint& op, int32_t temperature_mc,
                     uint32_t intensity_permille) {
  return core_rates_from(m, core_dynamic_uw(m, op),
                         core_leakage_uw(m, op.voltage_mv, temperature_mc), intensity_permille);
}

CoreRates core_rates_from(const PowerModelConfig& m, uint64_t dyn, uint64_t leak,
                          uint32_t intensity_permille) {
  CoreRates r;
  r.running_uw = dyn * intensity_permille / 1000 + leak;
  r.idle_uw = dyn * m.core_wfi_dynamic_permille / 1000 + leak;
  r.gated_uw = leak * m.core_gated_residual_permille / 1000;
  return r;
}

uint64_t uncore_uw(const PowerModelConfig& m, bool d3hot) {
  return static_cast<uint64_t>(d3hot ? m.d3hot_mw : m.uncore_mw) * 1000;
}

uint64_t hbm_background_uw(const PowerModelConfig& m, bool d3hot) {
  const uint64_t per_stack = d3hot ? m.hbm_self_refresh_mw : m.hbm_background_mw;
  return per_stack * m.hbm_stacks * 1000;
}

uint64_t link_uw(const PowerModelConfig& m, LinkPowerState s) {
  switch (s) {
    case LinkPowerState::kL0: return static_cast<uint64_t>(m.link_l0_mw) * 1000;
    case LinkPowerState::kL0s: return static_cast<uint64_t>(m.link_l0s_mw) * 1000;
    case LinkPowerState::kL1: return static_cast<uint64_t>(m.link_l1_mw) * 1000;
    case LinkPowerState::kDown: break;
  }
  return 0;
}

}  // namespace vtrn::power
