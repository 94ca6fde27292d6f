// Power and thermal configuration of one chip: operating points, model
// coefficients and thermal-zone parameters, as the board DTB gives them.
//
// This is the const half of the power module (the runtime state lives in the
// objects of power.h); the board parser fills it from the "vtrn,chip" node,
// its operating-points, power-model and thermal-zones children, and
// validate() checks it once at init. Every default below is the value the
// binding documents for an absent optional property, so a parser only
// overwrites what the tree says. Units are in every name: mhz, mv, mw, mc
// (milli-degrees Celsius), pf (picofarads), pj (picojoules), ms, ns.
//
// The operating-point table is ordered fastest first, like NVML P-states:
// pstate 0 is the highest frequency, and "stepping down" means pstate + 1.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace vtrn::power {

inline constexpr uint32_t kMaxOperatingPoints = 16;
inline constexpr uint32_t kMaxCores = 8;        // = board::kMaxNeuronCores
inline constexpr uint32_t kMaxThermalZones = 8; // = board::kMaxThermalZones
inline constexpr uint32_t kMaxPorts = 16;       // = board::kMaxPorts

// Closed list; values are stable (they appear in logs, RPC replies and tests).
enum class Status : uint32_t {
  kOk = 0,
  kBadConfig = 1,   // validate() rejected the configuration (see ConfigError)
  kOutOfRange = 2,  // an argument is outside its documented range
  kBadState = 3,    // not allowed in the current device power state
  kNotInitialized = 4,
};

const char* status_name(Status s);

// Which power consumers heat a thermal zone (ThermalZoneConfig::sources).
enum HeatSource : uint32_t {
  kHeatCores = 1u << 0,
  kHeatUncore = 1u << 1,
  kHeatHbm = 1u << 2,
  kHeatLinks = 1u << 3,
};
inline constexpr uint32_t kHeatAll = kHeatCores | kHeatUncore | kHeatHbm | kHeatLinks;

struct OperatingPoint {
  uint32_t frequency_mhz = 0;  // 100..10000, strictly decreasing down the table
  uint32_t voltage_mv = 0;     // 300..2000, never increasing down the table
};

// One first-order RC zone: C dT/dt = P - (T - T_ambient) / R.
// tau = R * C; with these units tau_us = resistance_mc_per_w * capacitance_mj_per_c.
struct ThermalZoneConfig {
  int32_t throttle_mc = 95000;         // vtrn,throttle-millicelsius (existing binding)
  int32_t critical_mc = 105000;        // vtrn,critical-millicelsius, > throttle
  int32_t hysteresis_mc = 5000;        // 100..50000, throttle - this > ambient; step up below throttle - this
  int32_t ambient_mc = 35000;          // -40000..throttle-1
  uint32_t resistance_mc_per_w = 1000; // 1..100000 (1 = 0.001 K/W)
  uint32_t capacitance_mj_per_c = 4000;// 1..100000000 (mJ per K)
  uint32_t sources = kHeatAll;         // HeatSource bits, nonzero
};

// Coefficients of the activity-based model (see power_model.h for formulas).
struct PowerModelConfig {
  uint32_t core_ceff_pf = 20000;             // effective switched capacitance per core, 1..1000000
  uint32_t core_wfi_dynamic_permille = 30;   // clock-tree share left in WFI, 0..1000
  uint32_t core_leakage_mw = 3000;           // per core at leakage_ref_mv / leakage_ref_mc, 0..100000
  uint32_t leakage_ref_mv = 900;             // 300..2000
  int32_t leakage_ref_mc = 85000;            // -40000..150000
  uint32_t leakage_doubling_mc = 25000;      // leakage doubles per this rise, 5000..200000
  uint32_t core_gated_residual_permille = 20;// share of leakage a gated core keeps, 0..1000
  uint32_t uncore_mw = 8000;                 // fabric, DMA, control at D0, 0..1000000
  uint32_t d3hot_mw = 500;                   // always-on domain in D3hot, 0..1000000
  uint32_t hbm_stacks = 2;                   // from the hbm node (vtrn,stacks), 0..8
  uint32_t hbm_background_mw = 1500;         // per stack at D0 (refresh, PHY), 0..100000
  uint32_t hbm_self_refresh_mw = 150;        // per stack in D3hot, 0..100000
  uint32_t hbm_pj_per_byte = 30;             // access energy, 0..10000
  uint32_t link_l0_mw = 1200;                // per port in L0 without traffic, 0..100000
  uint32_t link_l0s_mw = 600;                // per port in L0s, 0..link_l0_mw
  uint32_t link_l1_mw = 100;                 // per port in L1, 0..link_l0s_mw
  uint32_t link_pj_per_byte = 40;            // transfer energy, 0..10000
};

struct PowerConfig {
  uint32_t core_count = 0;  // vtrn,neuron-cores, 1..kMaxCores
  uint32_t port_count = 0;  // link ports, 0..kMaxPorts
  uint32_t opp_count = 0;   // 1..kMaxOperatingPoints
  OperatingPoint opps[kMaxOperatingPoints] = {};
  uint32_t zone_count = 0;  // 1..kMaxThermalZones
  ThermalZoneConfig zones[kMaxThermalZones] = {};
  PowerModelConfig model;
  uint32_t governor_interval_ms = 100;  // thermal/cap decisions at most this often, 1..10000
  uint32_t power_average_ms = 1000;     // time constant of the average-power filter, 1..60000
  uint32_t autosuspend_delay_ms = 0;    // idle time before runtime D3hot; 0 = off, ..3600000
};

// Names the first offending value: field is a static string such as
// "opps.voltage_mv", index the table entry (0 when not a table).
struct ConfigError {
  Status status = Status::kOk;
  const char* field = "";
  uint32_t index = 0;
  [[nodiscard]] bool ok() const { return status == Status::kOk; }
};

[[nodiscard]] ConfigError validate(const PowerConfig& cfg);

// The configuration the binding's defaults produce for a chip like
// vtrn-dev1's (six operating points 1400..400 MHz, a "die" zone heated by
// cores, uncore and links, an "hbm" zone heated by HBM). Tests and the
// firmware's fallback both use it; it passes validate().
PowerConfig dev_board_config(uint32_t core_count, uint32_t port_count);

}  // namespace vtrn::power
