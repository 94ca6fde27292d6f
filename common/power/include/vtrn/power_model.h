// The activity-based power model: how many microwatts a core, the uncore,
// HBM and a link port draw in a given state, at a given operating point and
// temperature. Pure functions over PowerModelConfig; no state, no time.
//
// Formulas (integer, all results in uW):
//   core dynamic (full activity) = Ceff_pF * V_mV^2 * f_MHz / 1e6
//   core leakage = leak_mW * 1000 * (V / V_ref) * 2^((T - T_ref) / T_double)
//   running = dynamic * intensity/1000 + leakage   (intensity: how hard the
//             kernel toggles the datapath, 1000 = a dense matmul)
//   WFI     = dynamic * wfi_permille/1000 + leakage (clock gated, powered)
//   gated   = leakage * residual_permille/1000      (power gated)
//   uncore  = uncore_mW at D0, d3hot_mW in D3hot
//   HBM     = stacks * background_mW (D0) or self_refresh_mW (D3hot),
//             plus pj_per_byte * bytes moved (energy, not power)
//   link    = l0 / l0s / l1 mW by link power state (0 when down),
//             plus pj_per_byte * bytes moved
// Leakage is linear in V (P = V * I_leak) and exponential in T; the
// exponent is clamped to 2^-20..2^5 so a broken sensor cannot overflow it.
// It is not a circuit simulator: one Ceff per core, no voltage droop.
#pragma once

#include <stdint.h>

#include "vtrn/power_config.h"

namespace vtrn::power {

// Core power states, accounted per core (residency per state).
enum class CoreState : uint32_t {
  kRunning = 0,  // executing a kernel
  kIdle = 1,     // WFI: clock gated, state kept
  kGated = 2,    // power gated (PSCI CPU_OFF): state lost, only residual leakage
};
inline constexpr uint32_t kCoreStateCount = 3;

// Link power states as the link layer reports them. The firmware maps the
// LTSSM (fw::power::link_power_state): L0s and L1 as such; L0 and every
// state in which the SerDes runs (Polling, Configuration, Recovery,
// Loopback) as kL0; Detect and Disabled as kDown. Ordered by draw:
// validate() requires link_l0_mw >= link_l0s_mw >= link_l1_mw.
enum class LinkPowerState : uint32_t {
  kDown = 0,
  kL0 = 1,
  kL0s = 2,
  kL1 = 3,
};
inline constexpr uint32_t kLinkStateCount = 4;

struct CoreRates {
  uint64_t running_uw = 0;  // at the configured intensity
  uint64_t idle_uw = 0;
  uint64_t gated_uw = 0;
  [[nodiscard]] uint64_t in(CoreState s) const {
    return s == CoreState::kRunning ? running_uw : s == CoreState::kIdle ? idle_uw : gated_uw;
  }
};

[[nodiscard]] uint64_t core_dynamic_uw(const PowerModelConfig& m, const OperatingPoint& op);
[[nodiscard]] uint64_t core_leakage_uw(const PowerModelConfig& m, uint32_t voltage_mv,
                                       int32_t temperature_mc);
// The same from a precomputed full-activity dynamic power and leakage (the
// manager computes those once per operating point and temperature).
[[nodiscard]] CoreRates core_rates_from(const PowerModelConfig& m, uint64_t dynamic_uw,
                                        uint64_t leakage_uw, uint32_t intensity_permille);
[[nodiscard]] CoreRates core_rates(const PowerModelConfig& m, const OperatingPoint& op,
                                   int32_t temperature_mc, uint32_t intensity_permille);
[[nodiscard]] uint64_t uncore_uw(const PowerModelConfig& m, bool d3hot);
[[nodiscard]] uint64_t hbm_background_uw(const PowerModelConfig& m, bool d3hot);
[[nodiscard]] uint64_t link_uw(const PowerModelConfig& m, LinkPowerState s);
// Access/transfer energy: pJ per byte times bytes, in fJ.
[[nodiscard]] inline uint64_t transfer_fj(uint32_t pj_per_byte, uint64_t bytes) {
  return static_cast<uint64_t>(pj_per_byte) * bytes * 1000;
}

}  // namespace vtrn::power
