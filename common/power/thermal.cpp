// Exact-solution RC thermal zone (see vtrn/thermal.h).
#include "vtrn/thermal.h"

#include "vtrn/power_fixed.h"

namespace vtrn::power {

namespace {
// Power is capped where it enters the model so P * R stays far inside
// int64 (1e9 mW * 1e5 mC/W = 1e14 uC).
constexpr uint64_t kMaxPowerMw = 1000000000ull;
}  // namespace

void ThermalZone::init(const ThermalZoneConfig& cfg) {
  cfg_ = cfg;
  // R [mK/W] * C [mJ/K] = 1e-6 s = 1 us.
  tau_ns_ = static_cast<uint64_t>(cfg.resistance_mc_per_w) * cfg.capacitance_mj_per_c * 1000;
  set_temperature_mc(cfg.ambient_mc);
}

void ThermalZone::set_temperature_mc(int32_t mc) {
  temp_uc_ = static_cast<int64_t>(mc) * 1000;
  max_mc_ = mc;
}

int64_t ThermalZone::steady_state_mc(uint64_t power_mw) const {
  if (power_mw > kMaxPowerMw) power_mw = kMaxPowerMw;
  // mW * mK/W = uK.
  return cfg_.ambient_mc + static_cast<int64_t>(power_mw * cfg_.resistance_mc_per_w / 1000);
}

void ThermalZone::step(uint64_t power_mw, uint64_t dt_ns) {
  if (dt_ns == 0) return;
  if (power_mw > kMaxPowerMw) power_mw = kMaxPowerMw;
  const int64_t ss_uc = static_cast<int64_t>(cfg_.ambient_mc) * 1000 +
                        static_cast<int64_t>(power_mw * cfg_.resistance_mc_per_w);
  const int64_t e = static_cast<int64_t>(exp_neg_ratio_q30(dt_ns, tau_ns_));  // <= 2^30
  int64_t diff = temp_uc_ - ss_uc;
  // |diff| * 2^30 must fit in int64: beyond 8e9 uC (8000 K) the model is
  // meaningless anyway.
  constexpr int64_t kLim = 8000000000ll;
  if (diff > kLim) diff = kLim;
  if (diff < -kLim) diff = -kLim;
  temp_uc_ = ss_uc + ((diff * e + (1ll << (kQ - 1))) >> kQ);
  const int32_t t = temperature_mc();
  if (t > max_mc_) max_mc_ = t;
}

int32_t ThermalZone::temperature_mc() const {
  // Round to nearest (floor division for negatives).
  const int64_t q = temp_uc_ >= 0 ? (temp_uc_ + 500) / 1000 : -((-temp_uc_ + 499) / 1000);
  return static_cast<int32_t>(q);
}

}  // namespace vtrn::power
