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
// request `vtrn telemetry` makes, in fixed-width columns with a unit on every
// number, fitting an 80-column terminal. On a terminal it draws on the
// alternate screen with plain ANSI codes (no curses) and reads keys in raw
// mode: q quits (exit 0), Ctrl-C exits 130; either way, and when vtrnd stops
// (exit 3, as `telemetry --interval`), the terminal is put back as it was.
// When stdout is not a terminal it prints each frame as plain lines. --once
// or --count N print that many frames and exit (scripts, tests). DMA
// throughput needs two frames, so the first shows "-" there.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
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
  uint64_t count = 0;  // stop after this many frames (0: until q)
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

// Widths fit every value the formatters below produce up to 999.9 C,
// 99999 W, 9999999 J, 99999 MHz, 999 GB/s; fixed_row() cuts anything wider.
const std::vector<FixedColumn> kTopColumns = {
    {"CHIP", 4, false},  {"STATE", 8, false},  {"DEV", 9, false},  {"TEMP", 6, true},
    {"POWER", 6, true},  {"ENERGY", 8, true},  {"P", 2, true},     {"FREQ", 8, true},
    {"CORE%", 5, true},  {"DMA/s", 9, true},   {"LIMIT", 5, false}};

std::string energy_text(double j) {
  if (j < 1000) return fixed_unit(j, 1, "J");
  if (j < 1e7) return fixed_unit(j, 0, "J");
  return fixed_unit(j / 1e3, 0, "kJ");
}

std::string rate_text(double bytes_per_s) {
  const double mb = bytes_per_s / 1e6;
  if (mb < 10) return fixed_unit(mb, 2, "MB/s");
  if (mb < 10000) return fixed_unit(mb, 0, "MB/s");
  return fixed_unit(mb / 1000, 1, "GB/s");
}

// One frame: a title line, the column header and one row per chip (READY or
// not).
std::string render_top(const nlohmann::json& list, const nlohmann::json& chips,
                       std::map<uint32_t, Prev>* prev, double interval_s, bool interactive) {
  std::map<uint32_t, const nlohmann::json*> by_id;
  for (const auto& c : chips) by_id[c.at("chip").get<uint32_t>()] = &c;
  std::string rows;
  for (const auto& s : list.at("chips")) {
    const uint32_t id = s.at("id").get<uint32_t>();
    std::vector<std::string> cells{std::to_string(id), s.at("state").get<std::string>()};
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      rows += fixed_row(kTopColumns, cells);
      continue;
    }
    const nlohmann::json& c = *it->second;
    const uint64_t up = c.at("uptime_ns").get<uint64_t>();
    const uint64_t dma = c.at("dma_bytes").get<uint64_t>();
    std::string rate = "-";
    auto p = prev->find(id);
    if (p != prev->end() && up > p->second.uptime_ns && dma >= p->second.dma_bytes) {
      rate = rate_text(double(dma - p->second.dma_bytes) / (double(up - p->second.uptime_ns) * 1e-9));
    }
    (*prev)[id] = Prev{up, dma};
    if (!c.contains("power")) {
      cells.resize(9, "-");
      cells.push_back(rate);
      rows += fixed_row(kTopColumns, cells);
      continue;
    }
    const nlohmann::json& pw = c.at("power");
    // The mean over the chip's NeuronCores: one fixed-width number however
    // many cores the board gives a chip (per core: `vtrn telemetry`).
    uint64_t permille = 0;
    const size_t cores = pw.at("cores").size();
    for (const auto& k : pw.at("cores")) permille += k.at("utilization_permille").get<uint32_t>();
    const std::string util = cores ? fixed_unit(double(permille) / double(cores) / 10.0, 0, "%") : "-";
    const uint32_t f = pw.at("frequency_mhz").get<uint32_t>();
    cells.push_back(pw.at("device_state").get<std::string>());
    cells.push_back(fixed_unit(pw.at("temperature_c").get<double>(), 1, "C"));
    const double w = pw.at("power_w").get<double>();
    cells.push_back(fixed_unit(w, w < 1000 ? 1 : 0, "W"));
    cells.push_back(energy_text(pw.at("energy_j").get<double>()));
    cells.push_back(std::to_string(pw.at("pstate").get<uint32_t>()));
    cells.push_back(f ? std::to_string(f) + "MHz" : "off");
    cells.push_back(util);
    cells.push_back(rate);
    cells.push_back(short_reasons(pw));
    rows += fixed_row(kTopColumns, cells);
  }
  char when[16];
  const time_t now = time(nullptr);
  struct tm tmv;
  localtime_r(&now, &tmv);
  strftime(when, sizeof when, "%H:%M:%S", &tmv);
  char head[160];
  snprintf(head, sizeof head, "vtrn top  %s  %zu chips  every %.1f s  %s%s\n",
           list.at("board").get<std::string>().c_str(), list.at("chips").size(), interval_s, when,
           interactive ? "  (q quits)" : "");
  return std::string(head) + fixed_header(kTopColumns) + rows;
}

// The terminal while `top` runs interactively: input in raw mode (keys
// arrive one at a time, unechoed; Ctrl-C arrives as a byte, not a signal),
// output on the alternate screen with the cursor hidden. Everything is put
// back by the destructor (q, an error such as vtrnd stopping) and by the
// signal handler (SIGINT/SIGTERM/SIGHUP from elsewhere), which uses only
// async-signal-safe calls and exits 128 + signal.
class TopTerminal {
 public:
  TopTerminal(bool raw_input, bool screen) {
    if (screen) {
      screen_ = true;
      write_all(kEnter);
    }
    if (raw_input && tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG | IEXTEN);
      raw.c_iflag &= ~tcflag_t(IXON | ICRNL);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      raw_ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0;
    }
    active_ = this;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  }
  ~TopTerminal() {
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
    restore();
    active_ = nullptr;
  }
  TopTerminal(const TopTerminal&) = delete;
  TopTerminal& operator=(const TopTerminal&) = delete;

  bool raw() const { return raw_; }

 private:
  static constexpr const char* kEnter = "\033[?1049h\033[?25l";  // alternate screen, hide cursor
  static constexpr const char* kLeave = "\033[?25h\033[?1049l";
  static void write_all(const char* s) {
    size_t n = strlen(s);
    while (n > 0) {
      const ssize_t w = write(STDOUT_FILENO, s, n);
      if (w <= 0) return;
      s += w;
      n -= size_t(w);
    }
  }
  void restore() {
    if (raw_) tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
    if (screen_) write_all(kLeave);
    raw_ = screen_ = false;
  }
  static void on_signal(int sig) {
    if (active_ != nullptr) active_->restore();
    _exit(128 + sig);
  }
  static inline TopTerminal* volatile active_ = nullptr;
  termios saved_{};
  bool raw_ = false;
  bool screen_ = false;
};

enum class Key { kNone, kQuit, kInterrupt };

// Waits until `deadline` for a key on stdin (when it is a terminal in raw
// mode); q quits at once, Ctrl-C interrupts, anything else is ignored.
Key wait_for_key(bool keys, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = deadline - std::chrono::steady_clock::now();
    const int ms = int(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1));
    if (!keys) {
      std::this_thread::sleep_until(deadline);
      return Key::kNone;
    }
    pollfd pfd{STDIN_FILENO, POLLIN, 0};
    const int r = poll(&pfd, 1, ms);
    if (r == 0) return Key::kNone;
    if (r < 0) {
      if (errno == EINTR) continue;
      std::this_thread::sleep_until(deadline);
      return Key::kNone;
    }
    char buf[32];
    const ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n <= 0) {  // the terminal went away: stop reading it, keep drawing
      std::this_thread::sleep_until(deadline);
      return Key::kNone;
    }
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == 'q' || buf[i] == 'Q') return Key::kQuit;
      if (buf[i] == 0x03) return Key::kInterrupt;
    }
  }
}

// A refresh may not hang the view: a vtrnd that does not answer within this
// ends `top` with exit 6 and the terminal restored.
constexpr int kTopCallTimeoutMs = 10000;

// Exit 130 as a shell reports Ctrl-C; the terminal is restored first (the
// TopTerminal in run_top() is destroyed as this unwinds).
struct TopInterrupted {};

void run_top_frames(const TopOptions& o, bool interactive, bool keys) {
  const uint64_t frames = o.once ? 1 : o.count;
  std::map<uint32_t, Prev> prev;
  const auto period = std::chrono::microseconds(int64_t(o.interval_s * 1e6));
  auto next = std::chrono::steady_clock::now();
  for (uint64_t n = 0; frames == 0 || n < frames; ++n) {
    if (n > 0) {
      next += period;
      const Key k = wait_for_key(keys, next);
      if (k == Key::kQuit) return;
      if (k == Key::kInterrupt) throw TopInterrupted{};
    }
    DaemonConnection conn = DaemonConnection::open();
    drv::ResponsePtr lr = request_list(conn, kTopCallTimeoutMs);
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
      const std::string frame = render_top(list, chips, &prev, o.interval_s, keys);
      if (interactive) {
        // Home, the frame, clear to the end: plain VT100. Only input is raw;
        // output processing (\n -> \r\n) stays on.
        std::cout << "\033[H" << frame << "\033[J";
      } else {
        if (n > 0) std::cout << "\n";
        std::cout << frame;
      }
    }
    std::cout.flush();
  }
}

void run_top(const TopOptions& o) {
  const bool interactive = !o.json && !o.once && isatty(STDOUT_FILENO) == 1;
  const bool keys = interactive && isatty(STDIN_FILENO) == 1;
  try {
    TopTerminal term(keys, interactive);
    run_top_frames(o, interactive, keys && term.raw());
  } catch (const TopInterrupted&) {
    std::cout.flush();
    throw CliError(Exit::kInterrupted, "interrupted");
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
    add_interval_options(sub, &o->interval_s, &o->count, "refresh every INTERVAL (default 1)",
                         /*count_needs_interval=*/false);
    sub->add_flag("--once", o->once, "Print one frame and exit (as --count 1)");
    sub->add_flag("--json", o->json, "One JSON object per line per refresh instead of a table");
    sub->callback([o, action] { *action = [o] { run_top(*o); }; });
  }
}

}  // namespace tools
