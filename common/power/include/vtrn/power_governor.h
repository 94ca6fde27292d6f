// The DVFS governor: picks the operating point from three limits (thermal,
// power cap, host request) and reports why the clock is below maximum as a
// "clock event reasons" bit mask with NVML's bit values.
//
// It decides; it does not measure. The caller (PowerManager) evaluates it
// once per governor interval with the zone temperatures, the average power
// of that interval and a prediction of what every operating point would draw
// with the interval's activity. Each limit is a pstate index (0 = fastest);
// the chosen point is the slowest of the three.
//
// Thermal: a zone at or above its throttle temperature whose steady state at
// the present power is also at or above it steps the limit down one point
// per evaluation (a hot zone that is already cooling toward a steady state
// below the throttle point is left alone). The limit steps back up one point
// per evaluation only when every zone is below throttle - hysteresis, so the
// point can only oscillate as fast as the zones cross the whole hysteresis
// band. A zone at or above its critical temperature forces the lowest point
// at once and latches the critical flag until every zone is below
// critical - hysteresis; counting resumes from the lowest point after that.
//
// Power cap: the highest point whose predicted power plus a learned
// correction fits the cap. The correction follows measured minus predicted
// power at the point that was in force: a larger error takes effect at once
// (fast attack), a smaller one decays in at gain 1/4 per evaluation (slow
// release), so a model that is off by a constant or a proportion still
// converges to the cap from below and a load whose power rises does not
// overshoot for more than one evaluation.
#pragma once

#include <stdint.h>

#include "vtrn/power_config.h"

namespace vtrn::power {

// Bit values are NVML's nvmlClocksEventReason* (a.k.a. ClocksThrottleReason)
// so exporters can pass them through unchanged.
enum ClockEventReason : uint64_t {
  kReasonIdle = 0x1,                // nvmlClocksEventReasonGpuIdle: no core ran in the last window
  kReasonHostRequest = 0x2,         // ...ApplicationsClocksSetting: host pstate limit binds
  kReasonSwPowerCap = 0x4,          // ...SwPowerCap: the power cap binds
  kReasonHwSlowdown = 0x8,          // ...HwSlowdown: set together with HwThermalSlowdown
  kReasonSwThermalSlowdown = 0x20,  // ...SwThermalSlowdown: throttling at the throttle point
  kReasonHwThermalSlowdown = 0x40,  // ...HwThermalSlowdown: critical temperature, emergency point
};
inline constexpr uint64_t kReasonMask = kReasonIdle | kReasonHostRequest | kReasonSwPowerCap |
                                        kReasonHwSlowdown | kReasonSwThermalSlowdown |
                                        kReasonHwThermalSlowdown;

struct GovernorInput {
  int32_t temperature_mc[kMaxThermalZones] = {};
  uint64_t zone_power_mw[kMaxThermalZones] = {};  // interval average of the sources heating the zone
  uint64_t measured_mw = 0;                        // interval average of total power
  uint64_t predicted_mw[kMaxOperatingPoints] = {}; // total power per pstate for the interval's activity
  bool idle = false;                               // no core ran during the interval
};

struct Decision {
  uint32_t pstate = 0;
  uint64_t reasons = 0;
  bool changed = false;
};

class Governor {
 public:
  void init(const PowerConfig& cfg);
  // 0 removes the cap. Applies at the next evaluate() or recompute().
  [[nodiscard]] Status set_power_cap_mw(uint32_t cap_mw);
  // Host limit: no faster than pstate `limit` (0 = no limit).
  [[nodiscard]] Status set_pstate_limit(uint32_t limit);

  Decision evaluate(const GovernorInput& in);
  // Re-derives the point from the present limits (after a host request),
  // without advancing the thermal or cap loops.
  Decision recompute();

  [[nodiscard]] uint32_t pstate() const { return pstate_; }
  [[nodiscard]] uint64_t reasons() const { return reasons_; }
  [[nodiscard]] uint32_t thermal_limit() const { return thermal_limit_; }
  [[nodiscard]] uint32_t cap_limit() const { return cap_limit_; }
  [[nodiscard]] uint32_t host_limit() const { return host_limit_; }
  [[nodiscard]] uint32_t power_cap_mw() const { return cap_mw_; }
  [[nodiscard]] bool critical() const { return critical_; }
  [[nodiscard]] uint32_t critical_events() const { return critical_events_; }
  [[nodiscard]] int64_t cap_correction_mw() const { return correction_mw_; }

 private:
  Decision apply(bool idle);

  uint32_t opp_count_ = 1;
  uint32_t zone_count_ = 0;
  ThermalZoneConfig zones_[kMaxThermalZones] = {};
  uint32_t pstate_ = 0;
  uint64_t reasons_ = 0;
  bool idle_ = false;
  uint32_t thermal_limit_ = 0;
  uint32_t cap_limit_ = 0;
  uint32_t host_limit_ = 0;
  uint32_t cap_mw_ = 0;
  int64_t correction_mw_ = 0;
  bool critical_ = false;
  uint32_t critical_events_ = 0;
};

}  // namespace vtrn::power
