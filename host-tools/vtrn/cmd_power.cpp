// `vtrn power CHIP [--state d0|d3 | --cap WATTS | --pstate N |
// --autosuspend-ms MS]` and `vtrn top`.
//
// power: one setting per call, forwarded by vtrnd to the chip's power
// service; the answer is the chip's power status after the change (no
// setting: the status only). A D3 request returns as soon as the chip
// accepted it; the state it reached is printed (quiescing while work
// drains, then D3hot).
//
// top: a live view of every chip, one line each, from the same telemetry
// request `vtrn telemetry` makes. It fits an 80-column terminal; on a tty it
// redraws with a plain ANSI home+clear (no alternate screen, no curses), and
// when stdout is not a tty it prints each frame as plain lines. --once prints
// one frame and exits (scripts, tests). DMA throughput needs two frames, so
// the first shows "-" there.
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "cli_error.h"
#include "commands.h"
#include "daemon.h"
#include "json_conv.h"
#include "power_view.h"
#include "render.h"

namespace tools {

nlohmann::json power_to_json(const Vtrn__Api__PowerTelemetry& p) {
  nlohmann::json reasons = nlohmann::json::array();
  for (size_t i = 0; i < p.n_clock_event_reason_names; ++i) {
    reasons.push_back(p.clock_event_reason_names[i]);
  }
  nlohmann::json zones = nlohmann::json::array();
  int32_t hottest = INT32_MIN;
  for (size_t i = 0; i < p.n_zones; ++i) {
    const Vtrn__Api__PowerZoneTelemetry& z = *p.zones[i];
    hottest = z.temperature_mc > hottest ? z.temperature_mc : hottest;
    zones.push_back({{"zone", z.zone},
                     {"temperature_mc", z.temperature_mc},
                     {"temperature_c", z.temperature_mc / 1000.0},
                     {"max_temperature_c", z.max_temperature_mc / 1000.0},
                     {"throttle_c", z.throttle_mc / 1000.0},
                     {"critical_c", z.critical_mc / 1000.0},
                     {"hysteresis_c", z.hysteresis_mc / 1000.0},
                     {"ambient_c", z.ambient_mc / 1000.0},
                     {"power_mw", z.power_mw},
                     {"power_w", z.power_mw / 1000.0},
                     {"heat_sources", z.heat_sources}});
  }
  nlohmann::json cores = nlohmann::json::array();
  for (size_t i = 0; i < p.n_cores; ++i) {
    const Vtrn__Api__PowerCoreTelemetry& c = *p.cores[i];
    cores.push_back({{"core", c.core},
                     {"state", c.state},
                     {"utilization_permille", c.utilization_permille},
                     {"utilization_ratio", c.utilization_permille / 1000.0},
                     {"intensity_permille", c.intensity_permille},
                     {"power_mw", c.power_mw},
                     {"power_w", c.power_mw / 1000.0},
                     {"energy_uj", c.energy_uj},
                     {"energy_j", c.energy_uj / 1e6},
                     {"running_ns", c.running_ns},
                     {"idle_ns", c.idle_ns},
                     {"gated_ns", c.gated_ns},
                     {"idle_entries", c.idle_entries},
                     {"gated_entries", c.gated_entries}});
  }
  nlohmann::json links = nlohmann::json::array();
  for (size_t i = 0; i < p.n_links; ++i) {
    const Vtrn__Api__PowerLinkTelemetry& l = *p.links[i];
    links.push_back({{"port", l.port},
                     {"state", l.state},
                     {"power_mw", l.power_mw},
                     {"power_w", l.power_mw / 1000.0},
                     {"down_ns", l.down_ns},
                     {"l0_ns", l.l0_ns},
                     {"l0s_ns", l.l0s_ns},
                     {"l1_ns", l.l1_ns},
                     {"energy_uj", l.energy_uj},
                     {"l0s_entries", l.l0s_entries},
                     {"l1_entries", l.l1_entries}});
  }
  return {{"version", p.version},
          {"timestamp_ns", p.timestamp_ns},
          {"device_state", p.device_state},
          {"device_usage", p.device_usage},
          {"autosuspend_delay_ms", p.autosuspend_delay_ms},
          {"autosuspend_count", p.autosuspend_count},
          {"d0_ns", p.d0_ns},
          {"d3hot_ns", p.d3hot_ns},
          {"transition_ns", p.transition_ns},
          {"d3hot_entries", p.d3hot_entries},
          {"failed_suspends", p.failed_suspends},
          {"temperature_c", p.n_zones ? hottest / 1000.0 : 0.0},
          {"pstate", p.pstate},
          {"pstate_count", p.pstate_count},
          {"frequency_mhz", p.frequency_mhz},
          {"max_frequency_mhz", p.max_frequency_mhz},
          {"voltage_mv", p.voltage_mv},
          {"clock_duty_ppm", p.clock_duty_ppm},
          {"clock_event_reasons", p.clock_event_reasons},
          {"clock_event_reason_names", reasons},
          {"pstate_limit", p.pstate_limit},
          {"power_cap_mw", p.power_cap_mw},
          {"power_cap_w", p.power_cap_mw / 1000.0},
          {"thermal_limit_pstate", p.thermal_limit_pstate},
          {"cap_limit_pstate", p.cap_limit_pstate},
          {"pstate_changes", p.pstate_changes},
          {"critical_events", p.critical_events},
          {"power_mw", p.power_mw},
          {"power_w", p.power_mw / 1000.0},
          {"power_average_mw", p.power_average_mw},
          {"power_average_w", p.power_average_mw / 1000.0},
          {"core_power_w", p.core_power_mw / 1000.0},
          {"uncore_power_w", p.uncore_power_mw / 1000.0},
          {"hbm_power_w", p.hbm_power_mw / 1000.0},
          {"link_power_w", p.link_power_mw / 1000.0},
          {"energy_uj", p.energy_uj},
          {"energy_j", p.energy_uj / 1e6},
          {"core_energy_j", p.core_energy_uj / 1e6},
          {"uncore_energy_j", p.uncore_energy_uj / 1e6},
          {"hbm_energy_j", p.hbm_energy_uj / 1e6},
          {"link_energy_j", p.link_energy_uj / 1e6},
          {"thermal_throttle_ns", p.thermal_throttle_ns},
          {"power_cap_ns", p.power_cap_ns},
          {"host_limit_ns", p.host_limit_ns},
          {"refresh_ns", p.refresh_ns},
          {"refresh_max_ns", p.refresh_max_ns},
          {"refresh_total_ns", p.refresh_total_ns},
          {"refreshes", p.refreshes},
          {"zones", zones},
          {"cores", cores},
          {"links", links}};
}

std::string short_reasons(const nlohmann::json& power) {
  static const std::map<std::string, std::string> kShort = {
      {"idle", "idle"},           {"host_request", "host"},
      {"sw_power_cap", "cap"},    {"hw_slowdown", "hw"},
      {"sw_thermal_slowdown", "thermal"}, {"hw_thermal_slowdown", "crit"}};
  std::string s;
  for (const auto& r : power.at("clock_event_reason_names")) {
    auto it = kShort.find(r.get<std::string>());
    const std::string word = it == kShort.end() ? r.get<std::string>() : it->second;
    if (word == "hw") continue;  // always paired with crit
    s += (s.empty() ? "" : ",") + word;
  }
  return s.empty() ? "-" : s;
}

namespace {

// Vtrn power.

struct PowerOptions {
  uint32_t chip = 0;
  std::string state;
  double cap_w = -1;
  int64_t pstate = -1;
  int64_t autosuspend_ms = -1;
  bool json = false;
};

void run_power(const PowerOptions& o) {
  Vtrn__Api__Request req;
  Vtrn__Api__PowerSetRequest body;
  vtrn__api__request__init(&req);
  vtrn__api__power_set_request__init(&body);
  body.chip = o.chip;
  if (!o.state.empty()) {
    body.setting_case = VTRN__API__POWER_SET_REQUEST__SETTING_STATE;
    body.state = o.state == "d0" ? VTRN__API__POWER_STATE__POWER_STATE_D0
                                 : VTRN__API__POWER_STATE__POWER_STATE_D3HOT;
  } else if (o.cap_w >= 0) {
    body.setting_case = VTRN__API__POWER_SET_REQUEST__SETTING_CAP_MW;
    body.cap_mw = uint32_t(std::llround(o.cap_w * 1000.0));
  } else if (o.pstate >= 0) {
    body.setting_case = VTRN__API__POWER_SET_REQUEST__SETTING_PSTATE_LIMIT;
    body.pstate_limit = uint32_t(o.pstate);
  } else if (o.autosuspend_ms >= 0) {
    body.setting_case = VTRN__API__POWER_SET_REQUEST__SETTING_AUTOSUSPEND_DELAY_MS;
    body.autosuspend_delay_ms = uint32_t(o.autosuspend_ms);
  }
  req.body_case = VTRN__API__REQUEST__BODY_POWER_SET;
  req.power_set = &body;
  DaemonConnection conn = DaemonConnection::open();
  drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_POWER_SET);
  const Vtrn__Api__PowerSetResponse& r = *resp->power_set;
  nlohmann::json doc = {{"chip", o.chip},
                        {"device_state", r.device_state},
                        {"pstate", r.pstate},
                        {"pstate_count", r.pstate_count},
                        {"frequency_mhz", r.frequency_mhz},
                        {"power_cap_mw", r.power_cap_mw},
                        {"power_cap_w", r.power_cap_mw / 1000.0},
                        {"pstate_limit", r.pstate_limit},
                        {"autosuspend_delay_ms", r.autosuspend_delay_ms},
                        {"clock_event_reasons", r.clock_event_reasons}};
  if (o.json) {
    print_json(doc);
    return;
  }
  char cap[32];
  if (r.power_cap_mw == 0) {
    snprintf(cap, sizeof cap, "none");
  } else {
    snprintf(cap, sizeof cap, "%.3g W", r.power_cap_mw / 1000.0);
  }
  Table t({"CHIP", "DEVICE", "PSTATE", "FREQUENCY", "POWER CAP", "PSTATE LIMIT", "AUTOSUSPEND"});
  t.add({std::to_string(o.chip), r.device_state,
         std::to_string(r.pstate) + "/" + std::to_string(r.pstate_count - 1),
         r.frequency_mhz ? std::to_string(r.frequency_mhz) + " MHz" : "gated", cap,
         r.pstate_limit ? std::to_string(r.pstate_limit) : "none",
         r.autosuspend_delay_ms ? std::to_string(r.autosuspend_delay_ms) + " ms" : "off"});
  std::cout << t.render();
}

// Vtrn top.

struct TopOptions {
  double interval_s = 1.0;
  bool once = false;
  bool json = false;
};

struct Prev {
  uint64_t uptime_ns = 0;
  uint64_t dma_bytes = 0;
};

std::string fixed_unit(double v, int decimals, const char* unit) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.*f%s", decimals, v, unit);
  return buf;
}

// One frame: a header line and one row per chip (READY or not).
std::string render_top(const nlohmann::json& list, const nlohmann::json& chips,
                       std::map<uint32_t, Prev>* prev, double interval_s) {
  std::map<uint32_t, const nlohmann::json*> by_id;
  for (const auto& c : chips) by_id[c.at("chip").get<uint32_t>()] = &c;
  Table t({"CHIP", "STATE", "DEV", "TEMP", "POWER", "ENERGY", "P", "FREQ", "CORE%", "DMA/s",
           "LIMIT"});
  for (const auto& s : list.at("chips")) {
    const uint32_t id = s.at("id").get<uint32_t>();
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      t.add({std::to_string(id), s.at("state").get<std::string>(), "-", "-", "-", "-", "-", "-",
             "-", "-", "-"});
      continue;
    }
    const nlohmann::json& c = *it->second;
    const uint64_t up = c.at("uptime_ns").get<uint64_t>();
    const uint64_t dma = c.at("dma_bytes").get<uint64_t>();
    std::string rate = "-";
    auto p = prev->find(id);
    if (p != prev->end() && up > p->second.uptime_ns && dma >= p->second.dma_bytes) {
      const double mbps = double(dma - p->second.dma_bytes) / (double(up - p->second.uptime_ns) * 1e-9) / 1e6;
      rate = mbps >= 1000 ? fixed_unit(mbps / 1000, 1, "G") : fixed_unit(mbps, 0, "M");
    }
    (*prev)[id] = Prev{up, dma};
    if (!c.contains("power")) {
      t.add({std::to_string(id), s.at("state").get<std::string>(), "-", "-", "-", "-", "-", "-",
             "-", rate, "-"});
      continue;
    }
    const nlohmann::json& pw = c.at("power");
    std::string util;
    for (const auto& k : pw.at("cores")) {
      util += (util.empty() ? "" : " ") +
              std::to_string(k.at("utilization_permille").get<uint32_t>() / 10);
    }
    const uint32_t f = pw.at("frequency_mhz").get<uint32_t>();
    t.add({std::to_string(id), s.at("state").get<std::string>(),
           pw.at("device_state").get<std::string>(), fixed_unit(pw.at("temperature_c").get<double>(), 1, "C"),
           fixed_unit(pw.at("power_w").get<double>(), 1, "W"),
           fixed_unit(pw.at("energy_j").get<double>(), pw.at("energy_j").get<double>() < 1000 ? 1 : 0, "J"),
           std::to_string(pw.at("pstate").get<uint32_t>()), f ? std::to_string(f) : "off",
           util.empty() ? "-" : util, rate, short_reasons(pw)});
  }
  char when[16];
  const time_t now = time(nullptr);
  struct tm tmv;
  localtime_r(&now, &tmv);
  strftime(when, sizeof when, "%H:%M:%S", &tmv);
  char head[96];
  snprintf(head, sizeof head, "vtrn top  %s  %zu chips  every %.1f s  %s\n",
           list.at("board").get<std::string>().c_str(), list.at("chips").size(), interval_s, when);
  return std::string(head) + t.render();
}

void run_top(const TopOptions& o) {
  const bool tty = isatty(STDOUT_FILENO) == 1;
  std::map<uint32_t, Prev> prev;
  const auto period = std::chrono::microseconds(int64_t(o.interval_s * 1e6));
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    DaemonConnection conn = DaemonConnection::open();
    drv::ResponsePtr lr = request_list(conn);
    const nlohmann::json list = to_json(*lr->list);
    drv::ResponsePtr tr = request_telemetry(conn, -1);
    nlohmann::json chips = nlohmann::json::array();
    for (size_t i = 0; i < tr->telemetry->n_chips; ++i) {
      const Vtrn__Api__Telemetry& t = *tr->telemetry->chips[i];
      nlohmann::json c = to_json(t);
      if (t.power != nullptr) c["power"] = power_to_json(*t.power);
      chips.push_back(std::move(c));
    }
    if (o.json) {
      std::cout << nlohmann::json{{"board", list.at("board")}, {"chips", chips}}.dump() << "\n";
    } else {
      const std::string frame = render_top(list, chips, &prev, o.interval_s);
      // Home + clear screen: plain VT100, works in any terminal emulator.
      if (tty && !o.once) std::cout << "\033[H\033[2J";
      std::cout << frame;
      if (!tty && !o.once) std::cout << "\n";
    }
    std::cout.flush();
    if (o.once) return;
    next += period;
    std::this_thread::sleep_until(next);
  }
}

}  // namespace

void add_power_commands(CLI::App& app, Action* action) {
  {
    auto o = std::make_shared<PowerOptions>();
    CLI::App* sub = app.add_subcommand(
        "power", "Set a chip's device power state, power cap, pstate limit or autosuspend delay "
                 "(no option: show its power status)");
    sub->add_option("chip", o->chip, "Chip id")->required()->check(chip_id_validator());
    auto* st = sub->add_option("--state", o->state, "Device power state: d0 or d3 (D3hot)")
                   ->check(CLI::IsMember({"d0", "d3"}));
    auto* cap = sub->add_option("--cap", o->cap_w, "Power cap in watts (0 removes the cap)")
                    ->check(CLI::Range(0.0, 100000.0));
    auto* ps = sub->add_option("--pstate", o->pstate,
                               "Run no faster than this operating point (0 removes the limit)")
                   ->check(CLI::Range(int64_t(0), int64_t(15)));
    auto* as = sub->add_option("--autosuspend-ms", o->autosuspend_ms,
                               "Enter D3hot after this much idle time (0 turns it off)")
                   ->check(CLI::Range(int64_t(0), int64_t(3600000)));
    st->excludes(cap)->excludes(ps)->excludes(as);
    cap->excludes(ps)->excludes(as);
    ps->excludes(as);
    sub->add_flag("--json", o->json, "Print one JSON document instead of a table");
    sub->callback([o, action] { *action = [o] { run_power(*o); }; });
  }
  {
    auto o = std::make_shared<TopOptions>();
    CLI::App* sub = app.add_subcommand("top", "Live view of every chip: temperature, power, "
                                              "energy, operating point, core use, DMA rate");
    sub->add_option("--interval", o->interval_s, "Seconds between refreshes")
        ->check(CLI::Range(0.1, 3600.0));
    sub->add_flag("--once", o->once, "Print one frame and exit");
    sub->add_flag("--json", o->json, "One JSON object per line per refresh instead of a table");
    sub->callback([o, action] { *action = [o] { run_top(*o); }; });
  }
}

}  // namespace tools
