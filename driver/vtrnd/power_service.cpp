// vtrnd's power service (see power_service.h).
#include "power_service.h"

#include "api_enums.h"
#include "vtrn/power.h"
#include "vtrn_ctrl.pb-c.h"

namespace drv {

namespace vp = vtrn::power;

const char* power_device_state_name(uint32_t s) {
  switch (s) {
    case 0: return "D0";
    case 1: return "quiescing";
    case 2: return "D3hot";
    case 3: return "resuming";
    default: return "unknown";
  }
}

const char* power_core_state_name(uint32_t s) {
  switch (s) {
    case 0: return "running";
    case 1: return "idle";
    case 2: return "gated";
    default: return "unknown";
  }
}

const char* power_link_state_name(uint32_t s) {
  switch (s) {
    case 0: return "down";
    case 1: return "L0";
    case 2: return "L0s";
    case 3: return "L1";
    default: return "unknown";
  }
}

std::vector<const char*> clock_event_reason_names(uint64_t r) {
  static constexpr struct {
    uint64_t bit;
    const char* name;
  } kNames[] = {
      {vp::kReasonIdle, "idle"},
      {vp::kReasonHostRequest, "host_request"},
      {vp::kReasonSwPowerCap, "sw_power_cap"},
      {vp::kReasonHwSlowdown, "hw_slowdown"},
      {vp::kReasonSwThermalSlowdown, "sw_thermal_slowdown"},
      {vp::kReasonHwThermalSlowdown, "hw_thermal_slowdown"},
  };
  std::vector<const char*> out;
  for (const auto& n : kNames) {
    if (r & n.bit) out.push_back(n.name);
  }
  return out;
}

Vtrn__Api__PowerTelemetry* power_telemetry_message(const vp::PowerTelemetry& p, ProtoArena& a) {
  Vtrn__Api__PowerTelemetry& m = *a.make(Vtrn__Api__PowerTelemetry(VTRN__API__POWER_TELEMETRY__INIT));
  m.version = p.version;
  m.timestamp_ns = p.timestamp_ns;
  m.device_state = const_cast<char*>(power_device_state_name(p.device_state));
  m.device_usage = p.device_usage;
  m.autosuspend_delay_ms = p.autosuspend_delay_ms;
  m.autosuspend_count = p.autosuspend_count;
  m.d0_ns = p.d0_ns;
  m.d3hot_ns = p.d3hot_ns;
  m.transition_ns = p.transition_ns;
  m.d3hot_entries = p.d3hot_entries;
  m.failed_suspends = p.failed_suspends;
  m.pstate = p.pstate;
  m.pstate_count = p.pstate_count;
  m.frequency_mhz = p.frequency_mhz;
  m.voltage_mv = p.voltage_mv;
  m.max_frequency_mhz = p.max_frequency_mhz;
  m.clock_duty_ppm = p.clock_duty_ppm;
  m.clock_event_reasons = p.clock_event_reasons;
  const std::vector<const char*> reasons = clock_event_reason_names(p.clock_event_reasons);
  char** reason_ptrs = a.ptrs<char>(reasons.size());
  for (size_t i = 0; i < reasons.size(); ++i) reason_ptrs[i] = const_cast<char*>(reasons[i]);
  m.n_clock_event_reason_names = reasons.size();
  m.clock_event_reason_names = reason_ptrs;
  m.pstate_limit = p.pstate_limit;
  m.power_cap_mw = p.power_cap_mw;
  m.thermal_limit_pstate = p.thermal_limit_pstate;
  m.cap_limit_pstate = p.cap_limit_pstate;
  m.pstate_changes = p.pstate_changes;
  m.critical_events = p.critical_events;
  m.power_mw = p.power_mw;
  m.power_average_mw = p.power_average_mw;
  m.core_power_mw = p.core_power_mw;
  m.uncore_power_mw = p.uncore_power_mw;
  m.hbm_power_mw = p.hbm_power_mw;
  m.link_power_mw = p.link_power_mw;
  m.energy_uj = p.energy_uj;
  m.core_energy_uj = p.core_energy_uj;
  m.uncore_energy_uj = p.uncore_energy_uj;
  m.hbm_energy_uj = p.hbm_energy_uj;
  m.link_energy_uj = p.link_energy_uj;
  m.thermal_throttle_ns = p.thermal_throttle_ns;
  m.power_cap_ns = p.power_cap_ns;
  m.host_limit_ns = p.host_limit_ns;
  m.refresh_ns = p.refresh_ns;
  m.refresh_max_ns = p.refresh_max_ns;
  m.refresh_total_ns = p.refresh_total_ns;
  m.refreshes = p.refreshes;

  // Counts were validated by read_power; clamp anyway so a caller that
  // built the block by hand cannot index past the arrays.
  const uint32_t nc = p.core_count < vp::kMaxCores ? p.core_count : vp::kMaxCores;
  const uint32_t nz = p.zone_count < vp::kMaxThermalZones ? p.zone_count : vp::kMaxThermalZones;
  const uint32_t nl = p.port_count < vp::kMaxPorts ? p.port_count : vp::kMaxPorts;
  Vtrn__Api__PowerCoreTelemetry** core_ptrs = a.ptrs<Vtrn__Api__PowerCoreTelemetry>(nc);
  for (uint32_t i = 0; i < nc; ++i) {
    const vp::PowerTelemetryCore& c = p.cores[i];
    Vtrn__Api__PowerCoreTelemetry& o = *a.make(Vtrn__Api__PowerCoreTelemetry(VTRN__API__POWER_CORE_TELEMETRY__INIT));
    o.core = i;
    o.state = const_cast<char*>(power_core_state_name(c.state));
    o.utilization_permille = c.utilization_permille;
    o.power_mw = c.power_mw;
    o.intensity_permille = c.intensity_permille;
    o.running_ns = c.running_ns;
    o.idle_ns = c.idle_ns;
    o.gated_ns = c.gated_ns;
    o.energy_uj = c.energy_uj;
    o.idle_entries = c.idle_entries;
    o.gated_entries = c.gated_entries;
    core_ptrs[i] = &o;
  }
  Vtrn__Api__PowerZoneTelemetry** zone_ptrs = a.ptrs<Vtrn__Api__PowerZoneTelemetry>(nz);
  for (uint32_t i = 0; i < nz; ++i) {
    const vp::PowerTelemetryZone& z = p.zones[i];
    Vtrn__Api__PowerZoneTelemetry& o = *a.make(Vtrn__Api__PowerZoneTelemetry(VTRN__API__POWER_ZONE_TELEMETRY__INIT));
    o.zone = i;
    o.temperature_mc = z.temperature_mc;
    o.max_temperature_mc = z.max_temperature_mc;
    o.throttle_mc = z.throttle_mc;
    o.critical_mc = z.critical_mc;
    o.hysteresis_mc = z.hysteresis_mc;
    o.ambient_mc = z.ambient_mc;
    o.power_mw = z.power_mw;
    o.heat_sources = z.sources;
    zone_ptrs[i] = &o;
  }
  Vtrn__Api__PowerLinkTelemetry** link_ptrs = a.ptrs<Vtrn__Api__PowerLinkTelemetry>(nl);
  for (uint32_t i = 0; i < nl; ++i) {
    const vp::PowerTelemetryLink& l = p.links[i];
    Vtrn__Api__PowerLinkTelemetry& o = *a.make(Vtrn__Api__PowerLinkTelemetry(VTRN__API__POWER_LINK_TELEMETRY__INIT));
    o.port = i;
    o.state = const_cast<char*>(power_link_state_name(l.state));
    o.power_mw = l.power_mw;
    o.down_ns = l.down_ns;
    o.l0_ns = l.l0_ns;
    o.l0s_ns = l.l0s_ns;
    o.l1_ns = l.l1_ns;
    o.energy_uj = l.energy_uj;
    o.l0s_entries = l.l0s_entries;
    o.l1_entries = l.l1_entries;
    link_ptrs[i] = &o;
  }
  m.n_cores = nc;
  m.cores = core_ptrs;
  m.n_zones = nz;
  m.zones = zone_ptrs;
  m.n_links = nl;
  m.links = link_ptrs;
  return &m;
}

PowerService::PowerService(EventLoop* loop, ReplyFn reply) : loop_(loop), reply_(std::move(reply)) {}



void PowerService::reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st,
                               const std::string& err) {
  drv::reply_error(reply_, cid, id, st, err);
}

void PowerService::set(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__PowerSetRequest& r) {
  // Every power request is answered with the power status, each in the
  // Response member of its own name.
  FwDone<Vtrn__Ctrl__PowerStatusResponse> answer = [this, cid, id](const FwReply<Vtrn__Ctrl__PowerStatusResponse>& res) {
    if (!res.ok()) {
      reply_error(cid, id, to_api(res.error), res.error.detail());
      return;
    }
    const Vtrn__Ctrl__PowerStatusResponse* ps = res.body;
    Vtrn__Api__PowerSetResponse out = VTRN__API__POWER_SET_RESPONSE__INIT;
    out.device_state = const_cast<char*>(power_device_state_name(uint32_t(ps->state)));
    out.pstate = ps->pstate;
    out.pstate_count = ps->pstate_count;
    out.frequency_mhz = ps->frequency_mhz;
    out.power_cap_mw = ps->power_cap_mw;
    out.pstate_limit = ps->pstate_limit;
    out.autosuspend_delay_ms = ps->autosuspend_delay_ms;
    out.clock_event_reasons = ps->clock_event_reasons;
    reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_POWER_SET, &out.base);
  };
  switch (r.setting_case) {
    case VTRN__API__POWER_SET_REQUEST__SETTING_STATE: {
      Vtrn__Ctrl__PowerSetStateRequest st = VTRN__CTRL__POWER_SET_STATE_REQUEST__INIT;
      if (r.state == VTRN__API__POWER_STATE__POWER_STATE_D0) {
        st.state = VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_D0;
      } else if (r.state == VTRN__API__POWER_STATE__POWER_STATE_D3HOT) {
        st.state = VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_D3HOT;
      } else {
        reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                    "power_set.state: expected D0 or D3HOT");
        return;
      }
      return fw_call(*chip, &Vtrn__Ctrl__Request::power_set_state, st, &Vtrn__Ctrl__Response::power_set_state,
                     kTimeoutMs, std::move(answer));
    }
    case VTRN__API__POWER_SET_REQUEST__SETTING_CAP_MW: {
      Vtrn__Ctrl__PowerSetCapRequest cap = VTRN__CTRL__POWER_SET_CAP_REQUEST__INIT;
      cap.cap_mw = r.cap_mw;
      return fw_call(*chip, &Vtrn__Ctrl__Request::power_set_cap, cap, &Vtrn__Ctrl__Response::power_set_cap,
                     kTimeoutMs, std::move(answer));
    }
    case VTRN__API__POWER_SET_REQUEST__SETTING_PSTATE_LIMIT: {
      Vtrn__Ctrl__PowerSetPstateLimitRequest lim = VTRN__CTRL__POWER_SET_PSTATE_LIMIT_REQUEST__INIT;
      lim.pstate = r.pstate_limit;
      return fw_call(*chip, &Vtrn__Ctrl__Request::power_set_pstate_limit, lim,
                     &Vtrn__Ctrl__Response::power_set_pstate_limit, kTimeoutMs, std::move(answer));
    }
    case VTRN__API__POWER_SET_REQUEST__SETTING_AUTOSUSPEND_DELAY_MS: {
      Vtrn__Ctrl__PowerSetAutosuspendRequest as = VTRN__CTRL__POWER_SET_AUTOSUSPEND_REQUEST__INIT;
      as.delay_ms = r.autosuspend_delay_ms;
      return fw_call(*chip, &Vtrn__Ctrl__Request::power_set_autosuspend, as,
                     &Vtrn__Ctrl__Response::power_set_autosuspend, kTimeoutMs, std::move(answer));
    }
    default: {
      // No setting: report the status only.
      Vtrn__Ctrl__PowerStatusRequest status = VTRN__CTRL__POWER_STATUS_REQUEST__INIT;
      return fw_call(*chip, &Vtrn__Ctrl__Request::power_status, status, &Vtrn__Ctrl__Response::power_status,
                     kTimeoutMs, std::move(answer));
    }
  }
}

std::span<const Route> PowerService::bodies() const {
  static constexpr Route kRoutes[] = {
      {VTRN__API__REQUEST__BODY_POWER_SET, true, true},
  };
  return kRoutes;
}

void PowerService::handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) {
  if (req.body_case == VTRN__API__REQUEST__BODY_POWER_SET) set(cid, req.id, chip, *req.power_set);
}

void PowerService::fill_telemetry(Chip& chip, Vtrn__Api__Telemetry& t, ProtoArena& a) {
  vp::PowerTelemetry p{};
  if (chip.power_telemetry(&p).ok()) t.power = power_telemetry_message(p, a);
}

}  // namespace drv
