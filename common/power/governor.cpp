// DVFS governor: thermal throttling with hysteresis, critical emergency,
// power cap with model-error correction, host limit (see
// vtrn/power_governor.h for the policy).
#include "vtrn/power_governor.h"

namespace vtrn::power {

void Governor::init(const PowerConfig& cfg) {
  *this = Governor{};
  opp_count_ = cfg.opp_count == 0 ? 1 : cfg.opp_count;
  zone_count_ = cfg.zone_count;
  for (uint32_t z = 0; z < zone_count_ && z < kMaxThermalZones; ++z) zones_[z] = cfg.zones[z];
}

Status Governor::set_power_cap_mw(uint32_t cap_mw) {
  cap_mw_ = cap_mw;
  if (cap_mw == 0) {
    cap_limit_ = 0;
    correction_mw_ = 0;
  }
  return Status::kOk;
}

Status Governor::set_pstate_limit(uint32_t limit) {
  if (limit >= opp_count_) return Status::kOutOfRange;
  host_limit_ = limit;
  return Status::kOk;
}

Decision Governor::evaluate(const GovernorInput& in) {
  const uint32_t lowest = opp_count_ - 1;

  // Thermal.
  bool at_critical = false;
  bool above_release = false;  // some zone still >= critical - hysteresis
  bool heating = false;        // hot and not heading below the throttle point
  bool all_cool = true;        // every zone below throttle - hysteresis
  for (uint32_t z = 0; z < zone_count_; ++z) {
    const ThermalZoneConfig& c = zones_[z];
    const int64_t t = in.temperature_mc[z];
    if (t >= c.critical_mc) at_critical = true;
    if (t >= static_cast<int64_t>(c.critical_mc) - c.hysteresis_mc) above_release = true;
    if (t >= static_cast<int64_t>(c.throttle_mc) - c.hysteresis_mc) all_cool = false;
    if (t >= c.throttle_mc) {
      const uint64_t p = in.zone_power_mw[z] > 1000000000ull ? 1000000000ull : in.zone_power_mw[z];
      const int64_t ss = c.ambient_mc + static_cast<int64_t>(p * c.resistance_mc_per_w / 1000);
      if (ss >= c.throttle_mc) heating = true;
    }
  }
  if (at_critical) {
    if (!critical_) ++critical_events_;
    critical_ = true;
    thermal_limit_ = lowest;
  } else if (critical_ && !above_release) {
    critical_ = false;
  }
  if (!critical_) {
    if (heating) {
      const uint32_t from = thermal_limit_ > pstate_ ? thermal_limit_ : pstate_;
      if (from < lowest) {
        thermal_limit_ = from + 1;
      }
    } else if (all_cool && thermal_limit_ > 0) {
      --thermal_limit_;
    }
  }

  // Power cap.
  if (cap_mw_ != 0) {
    const int64_t err = static_cast<int64_t>(in.measured_mw) -
                        static_cast<int64_t>(in.predicted_mw[pstate_]);
    // Fast attack, slow release: a window that drew more than the model
    // said counts in full at once (the cap is a limit; a correction that
    // lagged let the load's rising power push the 1 s average over the cap
    // for several windows), one that drew less decays in at gain 1/4, so a
    // single light window does not lift the limit.
    if (err > correction_mw_) correction_mw_ = err;
    else correction_mw_ += (err - correction_mw_) / 4;
    const int64_t lim = static_cast<int64_t>(cap_mw_);
    if (correction_mw_ > lim) correction_mw_ = lim;
    if (correction_mw_ < -lim) correction_mw_ = -lim;
    uint32_t p = 0;
    while (p < lowest &&
           static_cast<int64_t>(in.predicted_mw[p]) + correction_mw_ > lim) {
      ++p;
    }
    cap_limit_ = p;
  }
  return apply(in.idle);
}

Decision Governor::recompute() { return apply(idle_); }

Decision Governor::apply(bool idle) {
  const uint32_t lowest = opp_count_ - 1;
  uint32_t p = host_limit_;
  if (thermal_limit_ > p) p = thermal_limit_;
  if (cap_mw_ != 0 && cap_limit_ > p) p = cap_limit_;
  if (p > lowest) p = lowest;

  uint64_t r = 0;
  if (idle) r |= kReasonIdle;
  if (host_limit_ != 0 && host_limit_ == p) r |= kReasonHostRequest;
  if (cap_mw_ != 0 && cap_limit_ != 0 && cap_limit_ == p) r |= kReasonSwPowerCap;
  if (critical_) {
    r |= kReasonHwThermalSlowdown | kReasonHwSlowdown;
  } else if (thermal_limit_ != 0 && thermal_limit_ == p) {
    r |= kReasonSwThermalSlowdown;
  }
  Decision d;
  d.pstate = p;
  d.reasons = r;
  d.changed = p != pstate_;
  pstate_ = p;
  reasons_ = r;
  idle_ = idle;
  return d;
}

}  // namespace vtrn::power
