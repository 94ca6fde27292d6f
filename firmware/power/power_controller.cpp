// fw::power::Controller and the board-to-config translation (see
// fw/power_controller.h).
#include "fw/power_controller.h"

#include <libfdt.h>
#include <stdio.h>
#include <string.h>

#include "fw/wire.h"
#include "vtrn/link.h"
#include "vtrn_ctrl.pb-c.h"

namespace fw::power {

using vtrn::power::CoreState;
using vtrn::power::DeviceState;
using vtrn::power::LinkPowerState;
using vtrn::Code;
using vtrn::Error;
using vtrn::power::Status;

namespace {

bool read_u32(const void* fdt, int node, const char* name, uint32_t lo, uint32_t hi, bool* present,
              uint32_t* out, vtrn::Error* error) {
  int len = 0;
  const void* p = fdt_getprop(fdt, node, name, &len);
  *present = p != nullptr;
  if (p == nullptr) return true;
  if (len != 4) {
    *error = vtrn::Error(vtrn::Code::kBadProperty, "%s: %d bytes, expected one u32 cell", name, len);
    return false;
  }
  const uint32_t v = fdt32_ld(static_cast<const fdt32_t*>(p));
  if (v < lo || v > hi) {
    *error = vtrn::Error(vtrn::Code::kBadProperty, "%s: %u out of range %u..%u", name, unsigned(v),
                         unsigned(lo), unsigned(hi));
    return false;
  }
  *out = v;
  return true;
}

int find_chip(const void* fdt, uint32_t chip_id) {
  const int chips = fdt_path_offset(fdt, "/chips");
  if (chips < 0) return -1;
  int node;
  fdt_for_each_subnode(node, fdt, chips) {
    int len = 0;
    const void* reg = fdt_getprop(fdt, node, "reg", &len);
    if (reg != nullptr && len == 4 && fdt32_ld(static_cast<const fdt32_t*>(reg)) == chip_id) {
      return node;
    }
  }
  return -1;
}

CoreState core_state_of(uint32_t cores_state) {
  switch (cores_state) {
    case 0: return CoreState::kGated;
    case 2: return CoreState::kRunning;
    default: return CoreState::kIdle;
  }
}

Vtrn__Ctrl__PowerDeviceState proto_state(DeviceState s) {
  switch (s) {
    case DeviceState::kD0: return VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_D0;
    case DeviceState::kQuiescing: return VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_QUIESCING;
    case DeviceState::kD3hot: return VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_D3HOT;
    case DeviceState::kResuming: return VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_RESUMING;
  }
  return VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_D0;
}

// Largest cap accepted: 100 kW, far above any modeled chip; caps below the
// lowest point's draw are legal (the governor then holds the lowest point).
constexpr uint32_t kMaxCapMw = 100000000;
constexpr uint32_t kMaxAutosuspendMs = 3600000;

// Every power request is answered with the status; the response fields of
// the five alias one message type.
const Route kRoutes[] = {
    route<&Controller::set_state>(VTRN__CTRL__REQUEST__BODY_POWER_SET_STATE,
                                  VTRN__CTRL__RESPONSE__BODY_POWER_SET_STATE),
    route<&Controller::set_cap>(VTRN__CTRL__REQUEST__BODY_POWER_SET_CAP,
                                VTRN__CTRL__RESPONSE__BODY_POWER_SET_CAP),
    route<&Controller::set_pstate_limit>(VTRN__CTRL__REQUEST__BODY_POWER_SET_PSTATE_LIMIT,
                                         VTRN__CTRL__RESPONSE__BODY_POWER_SET_PSTATE_LIMIT),
    route<&Controller::set_autosuspend>(VTRN__CTRL__REQUEST__BODY_POWER_SET_AUTOSUSPEND,
                                        VTRN__CTRL__RESPONSE__BODY_POWER_SET_AUTOSUSPEND),
    route<&Controller::status>(VTRN__CTRL__REQUEST__BODY_POWER_STATUS,
                               VTRN__CTRL__RESPONSE__BODY_POWER_STATUS),
};

}  // namespace

std::span<const Route> Controller::routes() const { return kRoutes; }

LinkPowerState link_power_state(uint32_t ltssm_state) {
  using vtrn::link::LinkState;
  switch (ltssm_state) {
    case uint32_t(LinkState::kL0s): return LinkPowerState::kL0s;
    case uint32_t(LinkState::kL1): return LinkPowerState::kL1;
    case uint32_t(LinkState::kL0):
    case uint32_t(LinkState::kPolling):
    case uint32_t(LinkState::kConfiguration):
    case uint32_t(LinkState::kRecovery):
    case uint32_t(LinkState::kLoopback): return LinkPowerState::kL0;
    default: return LinkPowerState::kDown;
  }
}

vtrn::Error read_board_extras(const void* fdt, size_t size, uint32_t chip_id,
                              BoardPowerExtras* out) {
  using vtrn::Code;
  using vtrn::Error;
  *out = BoardPowerExtras{};
  if (fdt_check_full(fdt, size) != 0) {
    return Error(Code::kBadTree, "board dtb: not a valid flattened device tree");
  }
  const int chip = find_chip(fdt, chip_id);
  if (chip < 0) {
    return Error(Code::kNoSuchChip, "board dtb: no chip with reg %u", unsigned(chip_id));
  }
  Error msg;
  int len = 0;
  const void* opp = fdt_getprop(fdt, chip, "vtrn,operating-points", &len);
  if (opp != nullptr) {
    const uint32_t cells = len > 0 ? uint32_t(len) / 4 : 0;
    if (len <= 0 || len % 8 != 0 || cells / 2 > vtrn::power::kMaxOperatingPoints) {
      return Error(Code::kBadProperty,
                   "chip %u: vtrn,operating-points: %d bytes, expected 1..%u <MHz mV> pairs",
                   unsigned(chip_id), len, unsigned(vtrn::power::kMaxOperatingPoints));
    }
    const auto* c = static_cast<const fdt32_t*>(opp);
    out->opp_count = cells / 2;
    for (uint32_t i = 0; i < out->opp_count; ++i) {
      out->opps[i].frequency_mhz = fdt32_ld(&c[2 * i]);
      out->opps[i].voltage_mv = fdt32_ld(&c[2 * i + 1]);
    }
  }
  bool present = false;
  if (!read_u32(fdt, chip, "vtrn,autosuspend-delay-ms", 0, kMaxAutosuspendMs, &present,
                &out->autosuspend_delay_ms, &msg)) {
    return msg.prefix("chip %u: ", unsigned(chip_id));
  }
  // Link power per state; the order L0 >= L0s >= L1 is checked with the
  // defaults filled in (vtrn::power::validate names the field).
  const struct {
    const char* name;
    bool* present;
    uint32_t* value;
  } kLinkPower[] = {
      {"vtrn,link-l0-milliwatts", &out->has_link_l0_mw, &out->link_l0_mw},
      {"vtrn,link-l0s-milliwatts", &out->has_link_l0s_mw, &out->link_l0s_mw},
      {"vtrn,link-l1-milliwatts", &out->has_link_l1_mw, &out->link_l1_mw},
  };
  for (const auto& lp : kLinkPower) {
    if (!read_u32(fdt, chip, lp.name, 0, 100000, lp.present, lp.value, &msg)) {
      return msg.prefix("chip %u: ", unsigned(chip_id));
    }
  }
  const int zones = fdt_subnode_offset(fdt, chip, "thermal-zones");
  if (zones < 0) return Error();
  int node;
  fdt_for_each_subnode(node, fdt, zones) {
    const void* reg = fdt_getprop(fdt, node, "reg", &len);
    if (reg == nullptr || len != 4) continue;  // the board parser rejects these
    const uint32_t index = fdt32_ld(static_cast<const fdt32_t*>(reg));
    if (index >= vtrn::power::kMaxThermalZones) continue;
    BoardPowerExtras::Zone& z = out->zones[index];
    uint32_t v = 0;
    bool ok = read_u32(fdt, node, "vtrn,ambient-millicelsius", 0, 100000, &present, &v, &msg);
    if (ok && present) z.has_ambient = true, z.ambient_mc = int32_t(v);
    ok = ok && read_u32(fdt, node, "vtrn,hysteresis-millicelsius", 100, 50000, &present, &v, &msg);
    if (ok && present) z.has_hysteresis = true, z.hysteresis_mc = int32_t(v);
    ok = ok && read_u32(fdt, node, "vtrn,resistance-millicelsius-per-watt", 1, 100000, &present,
                        &z.resistance_mc_per_w, &msg);
    ok = ok && read_u32(fdt, node, "vtrn,capacitance-millijoules-per-celsius", 1, 100000000,
                        &present, &z.capacitance_mj_per_c, &msg);
    if (!ok) {
      return msg.prefix("chip %u: thermal zone %u: ", unsigned(chip_id), unsigned(index));
    }
  }
  return Error();
}

vtrn::power::PowerConfig config_from_chip(const vtrn::board::Chip& chip,
                                          const BoardPowerExtras& extras) {
  vtrn::power::PowerConfig c = vtrn::power::dev_board_config(chip.neuron_cores, chip.port_count);
  c.model.hbm_stacks = chip.hbm.stacks;
  c.governor_interval_ms = chip.telemetry_period_ms;
  c.autosuspend_delay_ms = extras.autosuspend_delay_ms;
  if (extras.has_link_l0_mw) c.model.link_l0_mw = extras.link_l0_mw;
  if (extras.has_link_l0s_mw) c.model.link_l0s_mw = extras.link_l0s_mw;
  if (extras.has_link_l1_mw) c.model.link_l1_mw = extras.link_l1_mw;
  if (extras.opp_count != 0) {
    c.opp_count = extras.opp_count;
    for (uint32_t i = 0; i < extras.opp_count; ++i) c.opps[i] = extras.opps[i];
  }
  if (chip.thermal_zone_count != 0) {
    const vtrn::power::ThermalZoneConfig die = c.zones[0];
    const vtrn::power::ThermalZoneConfig hbm = c.zones[1];
    c.zone_count = chip.thermal_zone_count;
    for (uint32_t i = 0; i < chip.thermal_zone_count; ++i) {
      const vtrn::board::ThermalZone& bz = chip.thermal_zones[i];
      const bool is_hbm = strcmp(bz.name, "hbm") == 0;
      vtrn::power::ThermalZoneConfig z = is_hbm ? hbm : die;
      z.throttle_mc = bz.throttle_mc;
      z.critical_mc = bz.critical_mc;
      if (bz.index < vtrn::power::kMaxThermalZones) {
        const BoardPowerExtras::Zone& e = extras.zones[bz.index];
        if (e.has_ambient) z.ambient_mc = e.ambient_mc;
        if (e.has_hysteresis) z.hysteresis_mc = e.hysteresis_mc;
        if (e.resistance_mc_per_w != 0) z.resistance_mc_per_w = e.resistance_mc_per_w;
        if (e.capacitance_mj_per_c != 0) z.capacitance_mj_per_c = e.capacitance_mj_per_c;
      }
      c.zones[i] = z;
    }
  }
  return c;
}

vtrn::power::ConfigError Controller::configure(const vtrn::power::PowerConfig& cfg,
                                               uint64_t now_ns) {
  quiesce_pending_ = resume_pending_ = in_flight_ = activity_seen_ = false;
  transitions_ = 0;
  last_refresh_ns_ = now_ns;
  for (CoreSample& s : last_) s = CoreSample{};
  link_event_count_ = 0;
  for (LinkPowerState& l : link_noted_) l = LinkPowerState::kDown;
  for (uint64_t& b : link_tx_seen_) b = 0;
  return pm_.init(cfg, this, now_ns);
}

void Controller::note_link(uint32_t port, LinkPowerState s, uint64_t tx_bytes, uint64_t now_ns) {
  if (port >= pm_.config().port_count || port >= vtrn::power::kMaxPorts) return;
  // The counter only grows; a smaller value (the port restarted) counts from 0.
  const uint64_t sent = tx_bytes >= link_tx_seen_[port] ? tx_bytes - link_tx_seen_[port] : tx_bytes;
  link_tx_seen_[port] = tx_bytes;
  if (sent != 0) (void)pm_.add_link_bytes(port, sent);
  if (s == link_noted_[port] || link_event_count_ == kMaxLinkEvents) return;
  link_events_[link_event_count_++] = LinkEvent{now_ns, port, s};
  link_noted_[port] = s;
}

void Controller::set_baseline(const CoreSample* samples, uint32_t n) {
  for (uint32_t i = 0; i < n && i < vtrn::power::kMaxCores; ++i) last_[i] = samples[i];
}

void Controller::refresh(const CoreSample* samples, uint32_t n, uint64_t now_ns) {
  const uint32_t cores = pm_.config().core_count;
  const uint64_t start = last_refresh_ns_ < now_ns ? last_refresh_ns_ : now_ns;
  const uint64_t dt = now_ns - start;
  const bool gated = pm_.device().state() == DeviceState::kD3hot;
  struct Event {
    uint64_t t;
    uint32_t index;  // core, or port for a link event
    bool link;
    uint32_t state;  // CoreState or LinkPowerState
  };
  Event events[3 * vtrn::power::kMaxCores + kMaxLinkEvents];
  uint32_t event_count = 0;
  auto add_event = [&](uint64_t t, uint32_t core, CoreState st) {
    events[event_count++] = Event{t, core, false, uint32_t(st)};
  };
  uint32_t intensity[vtrn::power::kMaxCores] = {};
  for (uint32_t i = 0; i < n && i < cores; ++i) {
    const CoreSample& s = samples[i];
    CoreSample& prev = last_[i];
    // Counters only grow; a smaller value (a core restarted) counts from 0.
    uint64_t d_off = s.off_ns >= prev.off_ns ? s.off_ns - prev.off_ns : s.off_ns;
    uint64_t d_idle = s.idle_ns >= prev.idle_ns ? s.idle_ns - prev.idle_ns : s.idle_ns;
    uint64_t d_busy = s.busy_ns >= prev.busy_ns ? s.busy_ns - prev.busy_ns : s.busy_ns;
    uint32_t state = s.state;
    if (gated) {
      // D3hot: the compute domain is off whatever the counters say; only
      // the always-on management path runs (charged as d3hot power).
      d_off += d_idle + d_busy;
      d_idle = d_busy = 0;
      state = 0;
    }
    uint64_t d[3] = {d_off, d_idle, d_busy};  // gated, idle, running
    const uint64_t sum = d_off + d_idle + d_busy;
    if (sum > dt && sum != 0) {
      // Sampling skew: squeeze the window's counters into the window.
      for (uint64_t& x : d) x = x / sum * dt + x % sum * dt / sum;
    }
    const CoreState order_all[3] = {CoreState::kGated, CoreState::kIdle, CoreState::kRunning};
    const CoreState now_state = core_state_of(state);
    if (s.intensity_permille >= 1 && s.intensity_permille <= 1000) {
      intensity[i] = s.intensity_permille;
    }
    // The current state's segment goes last, so it extends to now_ns.
    uint64_t t = start;
    for (uint32_t k = 0; k < 3; ++k) {
      if (order_all[k] == now_state || d[k] == 0) continue;
      add_event(t, i, order_all[k]);
      t += d[k];
    }
    add_event(t, i, now_state);
    prev = s;
  }
  // Link changes of the window, clamped into it (the link layer's clock
  // read can straddle the refresh's by a little).
  for (uint32_t k = 0; k < link_event_count_; ++k) {
    const LinkEvent& l = link_events_[k];
    const uint64_t t = l.t < start ? start : l.t > now_ns ? now_ns : l.t;
    events[event_count++] = Event{t, l.port, true, uint32_t(l.state)};
  }
  link_event_count_ = 0;
  // Every PowerManager call integrates all cores up to its timestamp, so the
  // events of all cores are applied in time order (stable: one core's
  // events keep their order at equal times).
  for (uint32_t i = 0; i < n && i < cores; ++i) {
    if (intensity[i] != 0) (void)pm_.set_core_intensity(i, intensity[i], start);
  }
  for (uint32_t a = 1; a < event_count; ++a) {
    const Event e = events[a];
    uint32_t b = a;
    while (b > 0 && events[b - 1].t > e.t) {
      events[b] = events[b - 1];
      --b;
    }
    events[b] = e;
  }
  for (uint32_t k = 0; k < event_count; ++k) {
    const Event& e = events[k];
    if (e.link) {
      (void)pm_.set_link_state(e.index, LinkPowerState(e.state), e.t);
    } else {
      (void)pm_.set_core_state(e.index, CoreState(e.state), e.t);
    }
  }
  if (activity_seen_) {
    activity_seen_ = false;
    pm_.get(now_ns);
    pm_.put(now_ns);
  }
  pm_.step(now_ns);
  last_refresh_ns_ = now_ns;
}

void Controller::note_activity(uint64_t now_ns) {
  if (pm_.device().state() == DeviceState::kD0) {
    // Charged at the end of the window (refresh): an integration in the
    // middle of a window would break the exact replay of core activity.
    activity_seen_ = true;
    return;
  }
  pm_.get(now_ns);
  pm_.put(now_ns);
}

void Controller::complete(uint64_t now_ns) {
  // A completion may start the next transition (a pending request), which
  // sets the flags again: loop until nothing more can be done now.
  for (int guard = 0; guard < 4; ++guard) {
    if (quiesce_pending_ && pm_.device().state() == DeviceState::kQuiescing) {
      if (in_flight_) return;
      quiesce_pending_ = false;
      ++transitions_;
      (void)pm_.quiesce_done(now_ns, true);
      continue;
    }
    quiesce_pending_ = false;
    if (resume_pending_ && pm_.device().state() == DeviceState::kResuming) {
      resume_pending_ = false;
      ++transitions_;
      (void)pm_.resume_done(now_ns);
      continue;
    }
    resume_pending_ = false;
    return;
  }
}

bool Controller::active() const { return pm_.device().state() == DeviceState::kD0; }

int32_t Controller::hottest_mc() const {
  const uint32_t n = pm_.config().zone_count;
  int32_t t = n ? pm_.temperature_mc(0) : 0;
  for (uint32_t z = 1; z < n; ++z) t = pm_.temperature_mc(z) > t ? pm_.temperature_mc(z) : t;
  return t;
}

Error Controller::answer(Status st, Vtrn__Ctrl__PowerStatusResponse* out) const {
  if (st != Status::kOk) return Error(Code::kInternal, "power: %s", vtrn::power::status_name(st));
  const vtrn::power::ClockBudget b = pm_.clock_budget();
  out->state = proto_state(pm_.device().state());
  out->pstate = pm_.pstate();
  out->pstate_count = pm_.config().opp_count;
  out->frequency_mhz = b.frequency_mhz;
  out->power_cap_mw = pm_.governor().power_cap_mw();
  out->pstate_limit = pm_.governor().host_limit();
  out->autosuspend_delay_ms = pm_.device().autosuspend_delay_ms();
  out->clock_event_reasons = pm_.clock_event_reasons();
  return Error();
}

Error Controller::set_state(const Vtrn__Ctrl__PowerSetStateRequest& r,
                            Vtrn__Ctrl__PowerStatusResponse& out, Call& c) {
  Status st;
  const uint32_t state = wire(r.state);
  if (state == VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_D0) {
    st = pm_.request_device_state(DeviceState::kD0, c.now_ns());
  } else if (state == VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_D3HOT) {
    st = pm_.request_device_state(DeviceState::kD3hot, c.now_ns());
  } else {
    return Error(Code::kInvalidArgument, "power_set_state.state: %d, must be D0 (0) or D3HOT (2)",
                 int(state));
  }
  complete(c.now_ns());
  return answer(st, &out);
}

Error Controller::set_cap(const Vtrn__Ctrl__PowerSetCapRequest& r,
                          Vtrn__Ctrl__PowerStatusResponse& out, Call& c) {
  if (r.cap_mw > kMaxCapMw) {
    return Error(Code::kInvalidArgument, "power_set_cap.cap_mw: %u, must be 0 (no cap) .. %u",
                 unsigned(r.cap_mw), unsigned(kMaxCapMw));
  }
  return answer(pm_.set_power_cap_mw(r.cap_mw, c.now_ns()), &out);
}

Error Controller::set_pstate_limit(const Vtrn__Ctrl__PowerSetPstateLimitRequest& r,
                                   Vtrn__Ctrl__PowerStatusResponse& out, Call& c) {
  if (r.pstate >= pm_.config().opp_count) {
    return Error(Code::kInvalidArgument,
                 "power_set_pstate_limit.pstate: %u, the chip has pstates 0..%u",
                 unsigned(r.pstate), unsigned(pm_.config().opp_count - 1));
  }
  return answer(pm_.set_pstate_limit(r.pstate, c.now_ns()), &out);
}

Error Controller::set_autosuspend(const Vtrn__Ctrl__PowerSetAutosuspendRequest& r,
                                  Vtrn__Ctrl__PowerStatusResponse& out, Call& c) {
  if (r.delay_ms > kMaxAutosuspendMs) {
    return Error(Code::kInvalidArgument,
                 "power_set_autosuspend.delay_ms: %u, must be 0 (off) .. %u",
                 unsigned(r.delay_ms), unsigned(kMaxAutosuspendMs));
  }
  pm_.set_autosuspend_delay_ms(r.delay_ms, c.now_ns());
  return answer(Status::kOk, &out);
}

Error Controller::status(const Vtrn__Ctrl__PowerStatusRequest&,
                         Vtrn__Ctrl__PowerStatusResponse& out, Call&) {
  return answer(Status::kOk, &out);
}

}  // namespace fw::power
