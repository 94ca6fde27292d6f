// One thermal zone as a first-order RC network: heat capacity C to the
// ambient through thermal resistance R, driven by the power of the sources
// that heat it.
//
//   C dT/dt = P - (T - T_amb) / R
//   => T(t + dt) = T_ss + (T(t) - T_ss) * exp(-dt / (R C)),  T_ss = T_amb + P R
//
// step() applies that exact solution with P held constant over the step, so
// it is stable and exact for any dt (a 1000 s step lands on T_ss), unlike
// explicit Euler which diverges for dt > 2RC. The state is kept in micro-
// degrees so that 1 ms steps on a multi-second time constant do not stall on
// rounding; temperature_mc() reports milli-degrees.
//
// Not a spatial model: zones do not exchange heat with each other.
#pragma once

#include <stdint.h>

#include "vtrn/power_config.h"

namespace vtrn::power {

class ThermalZone {
 public:
  void init(const ThermalZoneConfig& cfg);
  void step(uint64_t power_mw, uint64_t dt_ns);
  // Steady-state temperature for a constant power.
  [[nodiscard]] int64_t steady_state_mc(uint64_t power_mw) const;
  [[nodiscard]] int32_t temperature_mc() const;
  [[nodiscard]] int64_t temperature_uc() const { return temp_uc_; }
  [[nodiscard]] uint64_t tau_ns() const { return tau_ns_; }
  [[nodiscard]] int32_t max_temperature_mc() const { return max_mc_; }
  [[nodiscard]] const ThermalZoneConfig& config() const { return cfg_; }
  // Test and resume hook: set the state directly.
  void set_temperature_mc(int32_t mc);

 private:
  ThermalZoneConfig cfg_{};
  uint64_t tau_ns_ = 0;
  int64_t temp_uc_ = 0;
  int32_t max_mc_ = 0;
};

}  // namespace vtrn::power
