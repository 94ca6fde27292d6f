// PowerManager: event-driven energy and residency accounting, thermal
// stepping, governor cadence and the telemetry snapshot (see vtrn/power.h).
#include "vtrn/power.h"

namespace vtrn::power {

namespace {

constexpr uint32_t to_mw(uint64_t uw) {
  const uint64_t mw = uw / 1000;
  return mw > 0xffffffffull ? 0xffffffffu : static_cast<uint32_t>(mw);
}

constexpr uint32_t kCompHeat[] = {kHeatCores, kHeatUncore, kHeatHbm, kHeatLinks};

}  // namespace

ConfigError PowerManager::init(const PowerConfig& cfg, DeviceHooks* hooks, uint64_t now_ns) {
  initialized_ = false;
  const ConfigError e = validate(cfg);
  if (!e.ok()) return e;
  // Reset every member, then set up from the (validated) config.
  cfg_ = cfg;
  device_.init(hooks, cfg.autosuspend_delay_ms, now_ns);
  governor_.init(cfg);
  for (uint32_t z = 0; z < kMaxThermalZones; ++z) zones_[z] = ThermalZone{};
  for (uint32_t z = 0; z < cfg.zone_count; ++z) zones_[z].init(cfg.zones[z]);
  for (Core& c : cores_) {
    c = Core{};
    c.mark_ns = now_ns;
  }
  for (Link& l : links_) {
    l = Link{};
    l.mark_ns = now_ns;
  }
  chip_mark_ns_ = now_ns;
  total_ = total_at_step_ = total_at_eval_ = EnergyAccumulator{};
  for (uint32_t i = 0; i < kCompCount; ++i) {
    comp_[i] = comp_at_step_[i] = comp_at_eval_[i] = EnergyAccumulator{};
    comp_window_mw_[i] = 0;
  }
  for (uint32_t& z : zone_window_mw_) z = 0;
  start_ns_ = last_step_ns_ = last_eval_ns_ = now_ns;
  window_power_mw_ = 0;
  average_uw_ = 0;
  pstate_changes_ = 0;
  thermal_throttle_ns_ = power_cap_ns_ = host_limit_ns_ = 0;
  initialized_ = true;
  return e;
}

void PowerManager::charge(Component comp, EnergyAccumulator* part, uint64_t uw, uint64_t ns) {
  if (part != nullptr) part->add_power(uw, ns);
  comp_[comp].add_power(uw, ns);
  total_.add_power(uw, ns);
}

int32_t PowerManager::core_temperature_mc() const {
  bool found = false;
  int32_t t = 0;
  for (uint32_t z = 0; z < cfg_.zone_count; ++z) {
    if ((cfg_.zones[z].sources & kHeatCores) == 0) continue;
    const int32_t tz = zones_[z].temperature_mc();
    if (!found || tz > t) t = tz;
    found = true;
  }
  return found ? t : zones_[0].temperature_mc();
}

void PowerManager::integrate_core(Core& c, uint64_t now_ns, uint64_t dyn_uw, uint64_t leak_uw) {
  if (now_ns <= c.mark_ns) return;
  const uint64_t dt = now_ns - c.mark_ns;
  const CoreRates r = core_rates_from(cfg_.model, dyn_uw, leak_uw, c.intensity_permille);
  charge(kCompCores, &c.energy, r.in(c.state), dt);
  c.residency_ns[static_cast<uint32_t>(c.state)] += dt;
  c.mark_ns = now_ns;
}

void PowerManager::integrate_link(Link& l, uint64_t now_ns) {
  if (now_ns <= l.mark_ns) return;
  const uint64_t dt = now_ns - l.mark_ns;
  charge(kCompLinks, &l.energy, link_uw(cfg_.model, l.state), dt);
  l.residency_ns[static_cast<uint32_t>(l.state)] += dt;
  l.mark_ns = now_ns;
}

void PowerManager::integrate(uint64_t now_ns) {
  bool due = false;
  for (uint32_t i = 0; i < cfg_.core_count; ++i) due = due || now_ns > cores_[i].mark_ns;
  if (due) {
    // One operating point and one temperature for every core: compute the
    // expensive part (leakage's exponential) once, not per core.
    const OperatingPoint& op = operating_point();
    const uint64_t dyn = core_dynamic_uw(cfg_.model, op);
    const uint64_t leak = core_leakage_uw(cfg_.model, op.voltage_mv, core_temperature_mc());
    for (uint32_t i = 0; i < cfg_.core_count; ++i) integrate_core(cores_[i], now_ns, dyn, leak);
  }
  for (uint32_t i = 0; i < cfg_.port_count; ++i) integrate_link(links_[i], now_ns);
  if (now_ns > chip_mark_ns_) {
    const uint64_t dt = now_ns - chip_mark_ns_;
    charge(kCompUncore, nullptr, uncore_uw(cfg_.model, d3hot()), dt);
    charge(kCompHbm, nullptr, hbm_background_uw(cfg_.model, d3hot()), dt);
    chip_mark_ns_ = now_ns;
  }
}

Status PowerManager::set_core_state(uint32_t core, CoreState s, uint64_t now_ns) {
  if (!ready()) return Status::kNotInitialized;
  if (core >= cfg_.core_count || static_cast<uint32_t>(s) >= kCoreStateCount) {
    return Status::kOutOfRange;
  }
  integrate(now_ns);
  Core& c = cores_[core];
  if (c.state != s) {
    ++c.entries[static_cast<uint32_t>(s)];
    c.state = s;
  }
  return Status::kOk;
}

Status PowerManager::set_core_intensity(uint32_t core, uint32_t permille, uint64_t now_ns) {
  if (!ready()) return Status::kNotInitialized;
  if (core >= cfg_.core_count || permille > 1000) return Status::kOutOfRange;
  integrate(now_ns);
  cores_[core].intensity_permille = permille;
  return Status::kOk;
}

Status PowerManager::set_link_state(uint32_t port, LinkPowerState s, uint64_t now_ns) {
  if (!ready()) return Status::kNotInitialized;
  if (port >= cfg_.port_count || static_cast<uint32_t>(s) >= kLinkStateCount) {
    return Status::kOutOfRange;
  }
  integrate(now_ns);
  Link& l = links_[port];
  if (l.state != s) {
    ++l.entries[static_cast<uint32_t>(s)];
    l.state = s;
  }
  return Status::kOk;
}

Status PowerManager::add_link_bytes(uint32_t port, uint64_t bytes) {
  if (!ready()) return Status::kNotInitialized;
  if (port >= cfg_.port_count) return Status::kOutOfRange;
  // pJ/byte * bytes = fJ/1000: charge it as (pJ*1000 "uW") over (bytes "ns"),
  // which EnergyAccumulator splits without overflow.
  charge(kCompLinks, &links_[port].energy, uint64_t{cfg_.model.link_pj_per_byte} * 1000, bytes);
  return Status::kOk;
}

void PowerManager::add_hbm_bytes(uint64_t bytes) {
  if (!ready()) return;
  charge(kCompHbm, nullptr, uint64_t{cfg_.model.hbm_pj_per_byte} * 1000, bytes);
}

void PowerManager::apply(const Decision& d) {
  if (d.changed) ++pstate_changes_;
}

Status PowerManager::set_power_cap_mw(uint32_t cap_mw, uint64_t now_ns) {
  if (!ready()) return Status::kNotInitialized;
  integrate(now_ns);
  const Status s = governor_.set_power_cap_mw(cap_mw);
  if (s == Status::kOk) apply(governor_.recompute());
  return s;
}

Status PowerManager::set_pstate_limit(uint32_t pstate, uint64_t now_ns) {
  if (!ready()) return Status::kNotInitialized;
  integrate(now_ns);
  const Status s = governor_.set_pstate_limit(pstate);
  if (s == Status::kOk) apply(governor_.recompute());
  return s;
}

Status PowerManager::request_device_state(DeviceState target, uint64_t now_ns) {
  if (!ready()) return Status::kNotInitialized;
  integrate(now_ns);
  if (target == DeviceState::kD3hot) return device_.request_d3hot(now_ns);
  if (target == DeviceState::kD0) return device_.request_d0(now_ns);
  return Status::kOutOfRange;
}

void PowerManager::set_autosuspend_delay_ms(uint32_t ms, uint64_t now_ns) {
  if (!ready()) return;
  device_.set_autosuspend_delay_ms(ms, now_ns);
}

void PowerManager::get(uint64_t now_ns) {
  if (!ready()) return;
  integrate(now_ns);
  device_.get(now_ns);
}

void PowerManager::put(uint64_t now_ns) {
  if (!ready()) return;
  integrate(now_ns);
  device_.put(now_ns);
}

Status PowerManager::quiesce_done(uint64_t now_ns, bool ok) {
  if (!ready()) return Status::kNotInitialized;
  integrate(now_ns);
  return device_.quiesce_done(now_ns, ok);
}

Status PowerManager::resume_done(uint64_t now_ns) {
  if (!ready()) return Status::kNotInitialized;
  integrate(now_ns);
  return device_.resume_done(now_ns);
}

void PowerManager::step(uint64_t now_ns) {
  if (!ready()) return;
  if (now_ns < last_step_ns_) now_ns = last_step_ns_;
  integrate(now_ns);
  const uint64_t dt = now_ns - last_step_ns_;
  if (dt != 0) {
    // Window statistics: averages over [last step, now].
    uint64_t comp_uw[kCompCount];
    for (uint32_t i = 0; i < kCompCount; ++i) {
      comp_uw[i] = average_power_uw(comp_at_step_[i], comp_[i], dt);
      comp_window_mw_[i] = to_mw(comp_uw[i]);
      comp_at_step_[i] = comp_[i];
    }
    const uint64_t total_uw = average_power_uw(total_at_step_, total_, dt);
    window_power_mw_ = to_mw(total_uw);
    total_at_step_ = total_;
    for (uint32_t i = 0; i < cfg_.core_count; ++i) {
      Core& c = cores_[i];
      c.window_power_mw = to_mw(average_power_uw(c.energy_at_step, c.energy, dt));
      c.energy_at_step = c.energy;
      const uint64_t run = c.residency_ns[0] - c.running_at_step_ns;
      c.utilization_permille = static_cast<uint32_t>(run >= dt ? 1000 : run * 1000 / dt);
      c.running_at_step_ns = c.residency_ns[0];
    }
    for (uint32_t i = 0; i < cfg_.port_count; ++i) {
      Link& l = links_[i];
      l.window_power_mw = to_mw(average_power_uw(l.energy_at_step, l.energy, dt));
      l.energy_at_step = l.energy;
    }

    // Thermal: the window's average power heats each zone (exact solution).
    for (uint32_t z = 0; z < cfg_.zone_count; ++z) {
      uint64_t uw = 0;
      for (uint32_t i = 0; i < kCompCount; ++i) {
        if (cfg_.zones[z].sources & kCompHeat[i]) uw += comp_uw[i];
      }
      zone_window_mw_[z] = to_mw(uw);
      zones_[z].step(uw / 1000, dt);
    }

    // Average power: first-order low-pass with the configured time constant.
    const uint64_t keep = exp_neg_ratio_q30(dt, uint64_t{cfg_.power_average_ms} * 1000000);
    const int64_t diff = static_cast<int64_t>(total_uw) - average_uw_;
    // |diff| < 2^40 uW here, (2^30 - keep) <= 2^30: the product fits.
    average_uw_ += (diff * static_cast<int64_t>(kOneQ30 - keep)) >> kQ;

    // Time spent under each limiter, by the reasons in force over the window.
    const uint64_t r = governor_.reasons();
    if (r & (kReasonSwThermalSlowdown | kReasonHwThermalSlowdown)) thermal_throttle_ns_ += dt;
    if (r & kReasonSwPowerCap) power_cap_ns_ += dt;
    if (r & kReasonHostRequest) host_limit_ns_ += dt;
    last_step_ns_ = now_ns;
  }
  if (now_ns - last_eval_ns_ >= uint64_t{cfg_.governor_interval_ms} * 1000000) {
    evaluate_governor(now_ns);
  }
  // Last: the autosuspend check may call the hooks, which may call back.
  device_.tick(now_ns);
}

void PowerManager::evaluate_governor(uint64_t now_ns) {
  const uint64_t dt = now_ns - last_eval_ns_;
  GovernorInput in;
  uint64_t comp_uw[kCompCount];
  for (uint32_t i = 0; i < kCompCount; ++i) {
    comp_uw[i] = average_power_uw(comp_at_eval_[i], comp_[i], dt);
  }
  for (uint32_t z = 0; z < cfg_.zone_count; ++z) {
    in.temperature_mc[z] = zones_[z].temperature_mc();
    uint64_t uw = 0;
    for (uint32_t i = 0; i < kCompCount; ++i) {
      if (cfg_.zones[z].sources & kCompHeat[i]) uw += comp_uw[i];
    }
    in.zone_power_mw[z] = uw / 1000;
  }
  in.measured_mw = average_power_uw(total_at_eval_, total_, dt) / 1000;

  // Residency shares of the interval (ppm), the activity every point is
  // predicted for. A kernel would run longer at a slower point; assuming the
  // same shares overestimates the saving of stepping down only when cores
  // were partly idle, which errs on the side of the cap.
  uint64_t share_ppm[kMaxCores][kCoreStateCount] = {};
  in.idle = true;
  for (uint32_t i = 0; i < cfg_.core_count; ++i) {
    Core& c = cores_[i];
    for (uint32_t s = 0; s < kCoreStateCount; ++s) {
      const uint64_t d = c.residency_ns[s] - c.residency_at_eval_ns[s];
      share_ppm[i][s] = dt == 0 ? 0 : (d >= dt ? 1000000 : d * 1000000 / dt);
      c.residency_at_eval_ns[s] = c.residency_ns[s];
    }
    if (share_ppm[i][0] != 0) in.idle = false;
  }
  const uint64_t other_uw = comp_uw[kCompUncore] + comp_uw[kCompHbm] + comp_uw[kCompLinks];
  const int32_t t_core = core_temperature_mc();
  for (uint32_t p = 0; p < cfg_.opp_count; ++p) {
    uint64_t uw = other_uw;
    const uint64_t dyn = core_dynamic_uw(cfg_.model, cfg_.opps[p]);
    const uint64_t leak = core_leakage_uw(cfg_.model, cfg_.opps[p].voltage_mv, t_core);
    for (uint32_t i = 0; i < cfg_.core_count; ++i) {
      const CoreRates r = core_rates_from(cfg_.model, dyn, leak, cores_[i].intensity_permille);
      uw += (r.running_uw * share_ppm[i][0] + r.idle_uw * share_ppm[i][1] +
             r.gated_uw * share_ppm[i][2]) / 1000000;
    }
    in.predicted_mw[p] = uw / 1000;
  }

  apply(governor_.evaluate(in));
  total_at_eval_ = total_;
  for (uint32_t i = 0; i < kCompCount; ++i) comp_at_eval_[i] = comp_[i];
  last_eval_ns_ = now_ns;
}

ClockBudget PowerManager::clock_budget() const {
  ClockBudget b;
  if (!ready()) return b;
  b.max_frequency_mhz = cfg_.opps[0].frequency_mhz;
  const DeviceState s = device_.state();
  if (s == DeviceState::kD3hot || s == DeviceState::kResuming) return b;
  b.frequency_mhz = operating_point().frequency_mhz;
  b.duty_ppm = static_cast<uint32_t>(uint64_t{b.frequency_mhz} * 1000000 / b.max_frequency_mhz);
  return b;
}

void PowerManager::snapshot(PowerTelemetry* out) const {
  *out = PowerTelemetry{};
  out->version = kPowerTelemetryVersion;
  if (!ready()) return;
  const uint64_t now = last_step_ns_;
  out->timestamp_ns = now;

  out->device_state = static_cast<uint32_t>(device_.state());
  out->device_usage = device_.usage();
  out->autosuspend_delay_ms = device_.autosuspend_delay_ms();
  out->autosuspend_count = device_.autosuspends();
  out->d0_ns = device_.residency_ns(DeviceState::kD0, now);
  out->d3hot_ns = device_.residency_ns(DeviceState::kD3hot, now);
  out->transition_ns = device_.residency_ns(DeviceState::kQuiescing, now) +
                       device_.residency_ns(DeviceState::kResuming, now);
  out->d3hot_entries = device_.entries(DeviceState::kD3hot);
  out->failed_suspends = device_.failed_suspends();

  const ClockBudget b = clock_budget();
  out->pstate = pstate();
  out->pstate_count = cfg_.opp_count;
  out->frequency_mhz = b.frequency_mhz;
  out->voltage_mv = operating_point().voltage_mv;
  out->max_frequency_mhz = b.max_frequency_mhz;
  out->clock_duty_ppm = b.duty_ppm;
  out->clock_event_reasons = governor_.reasons();
  out->pstate_limit = governor_.host_limit();
  out->power_cap_mw = governor_.power_cap_mw();
  out->thermal_limit_pstate = governor_.thermal_limit();
  out->cap_limit_pstate = governor_.power_cap_mw() != 0 ? governor_.cap_limit() : 0;
  out->pstate_changes = pstate_changes_;
  out->critical_events = governor_.critical_events();

  out->power_mw = window_power_mw_;
  out->power_average_mw = power_average_mw();
  out->core_power_mw = comp_window_mw_[kCompCores];
  out->uncore_power_mw = comp_window_mw_[kCompUncore];
  out->hbm_power_mw = comp_window_mw_[kCompHbm];
  out->link_power_mw = comp_window_mw_[kCompLinks];

  out->energy_uj = total_.microjoules();
  out->core_energy_uj = comp_[kCompCores].microjoules();
  out->uncore_energy_uj = comp_[kCompUncore].microjoules();
  out->hbm_energy_uj = comp_[kCompHbm].microjoules();
  out->link_energy_uj = comp_[kCompLinks].microjoules();

  out->thermal_throttle_ns = thermal_throttle_ns_;
  out->power_cap_ns = power_cap_ns_;
  out->host_limit_ns = host_limit_ns_;

  out->core_count = cfg_.core_count;
  out->zone_count = cfg_.zone_count;
  out->port_count = cfg_.port_count;

  for (uint32_t i = 0; i < cfg_.core_count; ++i) {
    const Core& c = cores_[i];
    PowerTelemetryCore& t = out->cores[i];
    t.state = static_cast<uint32_t>(c.state);
    t.utilization_permille = c.utilization_permille;
    t.power_mw = c.window_power_mw;
    t.intensity_permille = c.intensity_permille;
    t.running_ns = c.residency_ns[0];
    t.idle_ns = c.residency_ns[1];
    t.gated_ns = c.residency_ns[2];
    t.energy_uj = c.energy.microjoules();
    t.idle_entries = c.entries[1];
    t.gated_entries = c.entries[2];
  }
  for (uint32_t z = 0; z < cfg_.zone_count; ++z) {
    const ThermalZoneConfig& zc = cfg_.zones[z];
    PowerTelemetryZone& t = out->zones[z];
    t.temperature_mc = zones_[z].temperature_mc();
    t.max_temperature_mc = zones_[z].max_temperature_mc();
    t.throttle_mc = zc.throttle_mc;
    t.critical_mc = zc.critical_mc;
    t.hysteresis_mc = zc.hysteresis_mc;
    t.ambient_mc = zc.ambient_mc;
    t.power_mw = zone_window_mw_[z];
    t.sources = zc.sources;
  }
  for (uint32_t i = 0; i < cfg_.port_count; ++i) {
    const Link& l = links_[i];
    PowerTelemetryLink& t = out->links[i];
    t.state = static_cast<uint32_t>(l.state);
    t.power_mw = l.window_power_mw;
    t.down_ns = l.residency_ns[0];
    t.l0_ns = l.residency_ns[1];
    t.l0s_ns = l.residency_ns[2];
    t.l1_ns = l.residency_ns[3];
    t.energy_uj = l.energy.microjoules();
    t.l0s_entries = l.entries[2];
    t.l1_entries = l.entries[3];
  }
}

}  // namespace vtrn::power
