// PowerManager: the chip's power and thermal service core. It owns the
// models (power_model.h, thermal.h), the policies (power_governor.h,
// device_pm.h) and the accounting (per-core and per-link residency, energy),
// and turns them into a clock budget for the job executor and a telemetry
// snapshot for BAR2. Portable C++: the firmware's power service wraps it with
// the timer and the RPC handlers; host tests drive it with a simulated clock.
//
// Time. Every call takes now_ns (monotonic chip time, never decreasing). The
// manager integrates energy and residency event by event: a state change is
// first charged at the old rates up to now_ns, so energy is exact however the
// calls are spaced. step(now_ns) additionally advances the thermal zones with
// the window's average power (exact solution, any window length), refreshes
// the window statistics, lets the governor decide once its interval has
// elapsed and runs the autosuspend check. Call it at least every telemetry
// period; the firmware calls it from the telemetry refresh.
//
// Clock contract with the job executor (clock_budget()):
//   - frequency_mhz is the NeuronCore clock of the current operating point;
//     it is 0 unless the device is in D0 or quiescing (no kernel may run).
//   - A core given a scheduling tick of tick_ns may retire at most
//     cycles_per_tick(tick_ns) = frequency_mhz * tick_ns / 1000 kernel cycles,
//     where a kernel declares its cost in cycles at the reference clock.
//   - Equivalently, for work that cannot be counted in cycles: a core runs
//     kernel code for run_ns_per_tick(tick_ns) = tick_ns * duty_ppm / 1e6 of
//     every tick at the vCPU's native speed and sleeps in WFI for the rest.
//     Either way a kernel takes max_frequency / frequency times longer.
//   - The executor re-reads the budget at every tick (the governor may move
//     the point at any step) and reports each core's state with
//     set_core_state() (kRunning while a kernel executes, kIdle in WFI,
//     kGated after PSCI CPU_OFF) and the kernel's activity factor with
//     set_core_intensity().
//
// Not thread-safe: one context (the power service) makes every call. The
// telemetry snapshot is what crosses to the host, through the seqlock.
#pragma once

#include <stdint.h>

#include "vtrn/device_pm.h"
#include "vtrn/power_config.h"
#include "vtrn/power_fixed.h"
#include "vtrn/power_governor.h"
#include "vtrn/power_model.h"
#include "vtrn/power_telemetry.h"
#include "vtrn/thermal.h"

namespace vtrn::power {

struct ClockBudget {
  uint32_t frequency_mhz = 0;
  uint32_t max_frequency_mhz = 0;
  uint32_t duty_ppm = 0;  // frequency / max frequency, 1000000 = full speed
  [[nodiscard]] uint64_t cycles_per_tick(uint64_t tick_ns) const {
    return static_cast<uint64_t>(frequency_mhz) * tick_ns / 1000;
  }
  [[nodiscard]] uint64_t run_ns_per_tick(uint64_t tick_ns) const {
    return tick_ns / 1000000 * duty_ppm + tick_ns % 1000000 * duty_ppm / 1000000;
  }
};

class PowerManager {
 public:
  // Validates cfg; on error the manager stays uninitialized and every call
  // returns kNotInitialized. Cores start idle, links down, device in D0 at
  // pstate 0, zones at ambient.
  [[nodiscard]] ConfigError init(const PowerConfig& cfg, DeviceHooks* hooks, uint64_t now_ns);

  // Executor, link layer and DMA inputs.
  [[nodiscard]] Status set_core_state(uint32_t core, CoreState s, uint64_t now_ns);
  [[nodiscard]] Status set_core_intensity(uint32_t core, uint32_t permille, uint64_t now_ns);
  [[nodiscard]] Status set_link_state(uint32_t port, LinkPowerState s, uint64_t now_ns);
  [[nodiscard]] Status add_link_bytes(uint32_t port, uint64_t bytes);
  void add_hbm_bytes(uint64_t bytes);

  // Host requests.
  [[nodiscard]] Status set_power_cap_mw(uint32_t cap_mw, uint64_t now_ns);  // 0 = no cap
  [[nodiscard]] Status set_pstate_limit(uint32_t pstate, uint64_t now_ns); // 0 = no limit
  // target kD0 or kD3hot; anything else is kOutOfRange.
  [[nodiscard]] Status request_device_state(DeviceState target, uint64_t now_ns);
  void set_autosuspend_delay_ms(uint32_t ms, uint64_t now_ns);

  // Device PM: work accounting and firmware completions (see device_pm.h).
  void get(uint64_t now_ns);
  void put(uint64_t now_ns);
  [[nodiscard]] Status quiesce_done(uint64_t now_ns, bool ok);
  [[nodiscard]] Status resume_done(uint64_t now_ns);

  void step(uint64_t now_ns);

  [[nodiscard]] ClockBudget clock_budget() const;
  [[nodiscard]] uint32_t pstate() const { return governor_.pstate(); }
  [[nodiscard]] const OperatingPoint& operating_point() const { return cfg_.opps[pstate()]; }
  [[nodiscard]] uint64_t clock_event_reasons() const { return governor_.reasons(); }
  [[nodiscard]] uint64_t energy_uj() const { return total_.microjoules(); }
  [[nodiscard]] uint32_t power_mw() const { return window_power_mw_; }
  [[nodiscard]] uint32_t power_average_mw() const {
    return static_cast<uint32_t>(average_uw_ / 1000);
  }
  [[nodiscard]] int32_t temperature_mc(uint32_t zone) const {
    return zone < cfg_.zone_count ? zones_[zone].temperature_mc() : 0;
  }
  [[nodiscard]] const Governor& governor() const { return governor_; }
  [[nodiscard]] const DeviceStateMachine& device() const { return device_; }
  [[nodiscard]] const PowerConfig& config() const { return cfg_; }

  // Fills every field of *out as of the last step() (timestamp_ns = that
  // step's now_ns); seq is left 0 because the seqlock writer owns it.
  void snapshot(PowerTelemetry* out) const;

 private:
  enum Component : uint32_t { kCompCores = 0, kCompUncore, kCompHbm, kCompLinks, kCompCount };

  struct Core {
    CoreState state = CoreState::kIdle;
    uint32_t intensity_permille = 1000;
    uint64_t mark_ns = 0;  // integrated up to here
    uint64_t residency_ns[kCoreStateCount] = {};
    uint32_t entries[kCoreStateCount] = {};
    EnergyAccumulator energy;
    // At the last step (window statistics) and the last governor evaluation.
    EnergyAccumulator energy_at_step;
    uint64_t running_at_step_ns = 0;
    uint64_t residency_at_eval_ns[kCoreStateCount] = {};
    uint32_t window_power_mw = 0;
    uint32_t utilization_permille = 0;
  };
  struct Link {
    LinkPowerState state = LinkPowerState::kDown;
    uint64_t mark_ns = 0;
    uint64_t residency_ns[kLinkStateCount] = {};
    uint32_t entries[kLinkStateCount] = {};
    EnergyAccumulator energy;
    EnergyAccumulator energy_at_step;
    uint32_t window_power_mw = 0;
  };

  [[nodiscard]] bool ready() const { return initialized_; }
  void integrate(uint64_t now_ns);
  void integrate_core(Core& c, uint64_t now_ns, uint64_t dyn_uw, uint64_t leak_uw);
  void integrate_link(Link& l, uint64_t now_ns);
  void charge(Component comp, EnergyAccumulator* part, uint64_t uw, uint64_t ns);
  [[nodiscard]] int32_t core_temperature_mc() const;
  [[nodiscard]] bool d3hot() const { return device_.state() == DeviceState::kD3hot; }
  void evaluate_governor(uint64_t now_ns);
  void apply(const Decision& d);

  bool initialized_ = false;
  PowerConfig cfg_{};
  DeviceStateMachine device_;
  Governor governor_;
  ThermalZone zones_[kMaxThermalZones];
  Core cores_[kMaxCores];
  Link links_[kMaxPorts];

  uint64_t chip_mark_ns_ = 0;  // uncore and HBM background integrated up to here
  EnergyAccumulator total_;
  EnergyAccumulator comp_[kCompCount];
  EnergyAccumulator total_at_step_;
  EnergyAccumulator comp_at_step_[kCompCount];
  EnergyAccumulator total_at_eval_;
  EnergyAccumulator comp_at_eval_[kCompCount];

  uint64_t start_ns_ = 0;
  uint64_t last_step_ns_ = 0;
  uint64_t last_eval_ns_ = 0;
  uint32_t window_power_mw_ = 0;
  uint32_t comp_window_mw_[kCompCount] = {};
  uint32_t zone_window_mw_[kMaxThermalZones] = {};
  int64_t average_uw_ = 0;
  uint32_t pstate_changes_ = 0;
  uint64_t thermal_throttle_ns_ = 0;
  uint64_t power_cap_ns_ = 0;
  uint64_t host_limit_ns_ = 0;
};

}  // namespace vtrn::power
