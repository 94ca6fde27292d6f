// The power/thermal telemetry block: one fixed-layout snapshot that the
// firmware publishes in BAR2 under the host interface's seqlock
// (vtrn/seqlock.h, common/hostif) and the host reads with seqlock_read(). Byte-for-byte ABI between firmware and
// driver, so: fixed-width fields only, explicit padding, offsets pinned by
// static_assert, the unit in every field name (ns, ms, mhz, mv, mw, uj, mc =
// milli-degrees Celsius, permille, ppm) and enumerations stored as uint32.
// Energies are monotonic 64-bit counters since firmware start; residencies
// likewise. Array entries past the *_count fields are zero.
//
// Version 1. A reader must check `version` and refuse a newer major layout;
// fields are only ever appended (the reserved words shrink).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/power_config.h"

namespace vtrn::power {

inline constexpr uint32_t kPowerTelemetryVersion = 1;

struct PowerTelemetryCore {
  uint32_t state;                 // CoreState
  uint32_t utilization_permille;  // running share of the last refresh window, 0..1000
  uint32_t power_mw;              // average over the last refresh window
  uint32_t intensity_permille;    // activity factor of the running kernel, 0..1000
  uint64_t running_ns;            // residency per state since start
  uint64_t idle_ns;
  uint64_t gated_ns;
  uint64_t energy_uj;
  uint32_t idle_entries;          // transitions into each low-power state
  uint32_t gated_entries;
};
static_assert(sizeof(PowerTelemetryCore) == 56);
static_assert(offsetof(PowerTelemetryCore, running_ns) == 16);

struct PowerTelemetryZone {
  int32_t temperature_mc;
  int32_t max_temperature_mc;  // highest since start
  int32_t throttle_mc;
  int32_t critical_mc;
  int32_t hysteresis_mc;
  int32_t ambient_mc;
  uint32_t power_mw;           // power heating the zone over the last window
  uint32_t sources;            // HeatSource bits
};
static_assert(sizeof(PowerTelemetryZone) == 32);

struct PowerTelemetryLink {
  uint32_t state;       // LinkPowerState
  uint32_t power_mw;    // average over the last refresh window
  uint64_t down_ns;     // residency per link power state since start
  uint64_t l0_ns;
  uint64_t l0s_ns;
  uint64_t l1_ns;
  uint64_t energy_uj;
  uint32_t l0s_entries;
  uint32_t l1_entries;
};
static_assert(sizeof(PowerTelemetryLink) == 56);

struct alignas(8) PowerTelemetry {
  uint32_t seq;       // seqlock; odd while the firmware updates
  uint32_t version;   // kPowerTelemetryVersion
  uint64_t timestamp_ns;  // chip time of this snapshot

  // Device power state.
  uint32_t device_state;          // DeviceState
  uint32_t device_usage;          // outstanding requests/jobs holding D0
  uint32_t autosuspend_delay_ms;  // 0 = autosuspend off
  uint32_t autosuspend_count;
  uint64_t d0_ns;                 // residency since start
  uint64_t d3hot_ns;
  uint64_t transition_ns;         // quiescing + resuming
  uint32_t d3hot_entries;
  uint32_t failed_suspends;

  // Operating point and why.
  uint32_t pstate;                // 0 = fastest
  uint32_t pstate_count;
  uint32_t frequency_mhz;         // current clock (0 while the device is not in D0)
  uint32_t voltage_mv;
  uint32_t max_frequency_mhz;     // pstate 0
  uint32_t clock_duty_ppm;        // frequency / max frequency, 1000000 = full speed
  uint64_t clock_event_reasons;   // ClockEventReason bits (NVML values)
  uint32_t pstate_limit;          // host limit, 0 = none
  uint32_t power_cap_mw;          // 0 = none
  uint32_t thermal_limit_pstate;  // 0 = not throttled
  uint32_t cap_limit_pstate;
  uint32_t pstate_changes;
  uint32_t critical_events;

  // Power, averaged over the last refresh window unless named otherwise.
  uint32_t power_mw;
  uint32_t power_average_mw;      // low-pass, time constant power_average_ms
  uint32_t core_power_mw;
  uint32_t uncore_power_mw;
  uint32_t hbm_power_mw;
  uint32_t link_power_mw;

  // Energy since start.
  uint64_t energy_uj;
  uint64_t core_energy_uj;
  uint64_t uncore_energy_uj;
  uint64_t hbm_energy_uj;
  uint64_t link_energy_uj;

  // Time with the clock held down by each limiter (NVML "violation" time).
  uint64_t thermal_throttle_ns;
  uint64_t power_cap_ns;
  uint64_t host_limit_ns;

  uint32_t core_count;
  uint32_t zone_count;
  uint32_t port_count;
  uint32_t reserved0;
  // Cost of the firmware's refresh (model step, governor, this snapshot),
  // timed by the firmware's own clock; written by the firmware service, not
  // by PowerManager::snapshot (which leaves them 0).
  uint64_t refresh_ns;        // the refresh before this snapshot
  uint64_t refresh_max_ns;
  uint64_t refresh_total_ns;  // since boot
  uint64_t refreshes;
  uint64_t reserved[4];

  PowerTelemetryCore cores[kMaxCores];
  PowerTelemetryZone zones[kMaxThermalZones];
  PowerTelemetryLink links[kMaxPorts];
};
static_assert(offsetof(PowerTelemetry, timestamp_ns) == 8);
static_assert(offsetof(PowerTelemetry, device_state) == 16);
static_assert(offsetof(PowerTelemetry, d0_ns) == 32);
static_assert(offsetof(PowerTelemetry, pstate) == 64);
static_assert(offsetof(PowerTelemetry, clock_event_reasons) == 88);
static_assert(offsetof(PowerTelemetry, power_mw) == 120);
static_assert(offsetof(PowerTelemetry, energy_uj) == 144);
static_assert(offsetof(PowerTelemetry, thermal_throttle_ns) == 184);
static_assert(offsetof(PowerTelemetry, core_count) == 208);
static_assert(offsetof(PowerTelemetry, refresh_ns) == 224);
static_assert(offsetof(PowerTelemetry, cores) == 288);
static_assert(offsetof(PowerTelemetry, zones) == 288 + 56 * kMaxCores);
static_assert(offsetof(PowerTelemetry, links) == 288 + 56 * kMaxCores + 32 * kMaxThermalZones);
static_assert(sizeof(PowerTelemetry) == 288 + 56 * kMaxCores + 32 * kMaxThermalZones +
                                            56 * kMaxPorts);
static_assert(sizeof(PowerTelemetry) % 8 == 0);

}  // namespace vtrn::power
