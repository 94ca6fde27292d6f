// Validation of the power configuration and the dev-board defaults (see
// vtrn/power_config.h; every range here is the one the binding documents).
#include "vtrn/power_config.h"

namespace vtrn::power {

const char* status_name(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kBadConfig: return "bad-config";
    case Status::kOutOfRange: return "out-of-range";
    case Status::kBadState: return "bad-state";
    case Status::kNotInitialized: return "not-initialized";
  }
  return "?";
}

namespace {

ConfigError bad(const char* field, uint32_t index = 0) {
  return ConfigError{Status::kBadConfig, field, index};
}

bool in(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }

}  // namespace

ConfigError validate(const PowerConfig& c) {
  if (!in(c.core_count, 1, kMaxCores)) return bad("core_count");
  if (!in(c.port_count, 0, kMaxPorts)) return bad("port_count");
  if (!in(c.opp_count, 1, kMaxOperatingPoints)) return bad("opp_count");
  for (uint32_t i = 0; i < c.opp_count; ++i) {
    const OperatingPoint& op = c.opps[i];
    if (!in(op.frequency_mhz, 100, 10000)) return bad("opps.frequency_mhz", i);
    if (!in(op.voltage_mv, 300, 2000)) return bad("opps.voltage_mv", i);
    if (i > 0 && op.frequency_mhz >= c.opps[i - 1].frequency_mhz) return bad("opps.frequency_mhz", i);
    if (i > 0 && op.voltage_mv > c.opps[i - 1].voltage_mv) return bad("opps.voltage_mv", i);
  }
  if (!in(c.zone_count, 1, kMaxThermalZones)) return bad("zone_count");
  for (uint32_t i = 0; i < c.zone_count; ++i) {
    const ThermalZoneConfig& z = c.zones[i];
    if (!in(z.ambient_mc, -40000, 100000)) return bad("zones.ambient_mc", i);
    if (!in(z.throttle_mc, -40000, 200000) || z.throttle_mc <= z.ambient_mc) {
      return bad("zones.throttle_mc", i);
    }
    if (!in(z.critical_mc, -40000, 250000) || z.critical_mc <= z.throttle_mc) {
      return bad("zones.critical_mc", i);
    }
    if (!in(z.hysteresis_mc, 100, 50000) ||
        static_cast<int64_t>(z.throttle_mc) - z.hysteresis_mc <= z.ambient_mc) {
      return bad("zones.hysteresis_mc", i);
    }
    if (!in(z.resistance_mc_per_w, 1, 100000)) return bad("zones.resistance_mc_per_w", i);
    if (!in(z.capacitance_mj_per_c, 1, 100000000)) return bad("zones.capacitance_mj_per_c", i);
    if (z.sources == 0 || (z.sources & ~kHeatAll) != 0) return bad("zones.sources", i);
  }
  const PowerModelConfig& m = c.model;
  if (!in(m.core_ceff_pf, 1, 1000000)) return bad("model.core_ceff_pf");
  if (m.core_wfi_dynamic_permille > 1000) return bad("model.core_wfi_dynamic_permille");
  if (m.core_leakage_mw > 100000) return bad("model.core_leakage_mw");
  if (!in(m.leakage_ref_mv, 300, 2000)) return bad("model.leakage_ref_mv");
  if (!in(m.leakage_ref_mc, -40000, 150000)) return bad("model.leakage_ref_mc");
  if (!in(m.leakage_doubling_mc, 5000, 200000)) return bad("model.leakage_doubling_mc");
  if (m.core_gated_residual_permille > 1000) return bad("model.core_gated_residual_permille");
  if (m.uncore_mw > 1000000) return bad("model.uncore_mw");
  if (m.d3hot_mw > 1000000) return bad("model.d3hot_mw");
  if (m.hbm_stacks > 8) return bad("model.hbm_stacks");
  if (m.hbm_background_mw > 100000) return bad("model.hbm_background_mw");
  if (m.hbm_self_refresh_mw > 100000) return bad("model.hbm_self_refresh_mw");
  if (m.hbm_pj_per_byte > 10000) return bad("model.hbm_pj_per_byte");
  if (m.link_l0_mw > 100000) return bad("model.link_l0_mw");
  if (m.link_l0s_mw > 100000) return bad("model.link_l0s_mw");
  if (m.link_l1_mw > 100000) return bad("model.link_l1_mw");
  // Deeper link states never draw more: L0 >= L0s >= L1 >= down (0).
  if (m.link_l0s_mw > m.link_l0_mw) return bad("model.link_l0s_mw");
  if (m.link_l1_mw > m.link_l0s_mw) return bad("model.link_l1_mw");
  if (m.link_pj_per_byte > 10000) return bad("model.link_pj_per_byte");
  if (!in(c.governor_interval_ms, 1, 10000)) return bad("governor_interval_ms");
  if (!in(c.power_average_ms, 1, 60000)) return bad("power_average_ms");
  if (c.autosuspend_delay_ms > 3600000) return bad("autosuspend_delay_ms");
  return ConfigError{};
}

PowerConfig dev_board_config(uint32_t core_count, uint32_t port_count) {
  PowerConfig c;
  c.core_count = core_count;
  c.port_count = port_count;
  constexpr OperatingPoint kOpps[] = {
      {1400, 900}, {1200, 850}, {1000, 800}, {800, 750}, {600, 700}, {400, 650},
  };
  c.opp_count = sizeof(kOpps) / sizeof(kOpps[0]);
  for (uint32_t i = 0; i < c.opp_count; ++i) c.opps[i] = kOpps[i];
  c.zone_count = 2;
  // "die": heated by everything on the die. With two cores flat out at
  // 1400 MHz it settles just above 95 C, so sustained load throttles.
  c.zones[0] = ThermalZoneConfig{95000, 105000, 5000, 35000, 1000, 4000,
                                 kHeatCores | kHeatUncore | kHeatLinks};
  c.zones[1] = ThermalZoneConfig{85000, 95000, 5000, 35000, 4000, 1000, kHeatHbm};
  return c;
}

}  // namespace vtrn::power
