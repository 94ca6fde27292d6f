// vtrnd's Prometheus exporter (see metrics.h).
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>

#include "link_service.h"
#include "power_service.h"
#include "vtrn/drv/log.h"
#include "vtrn/power.h"

namespace drv {

namespace vp = vtrn::power;

namespace {

// Families in first-use order; samples of a family stay together however
// the chips interleave, as the exposition format requires.
class Exposition {
 public:
  void add(const char* name, const char* type, const char* help, const std::string& labels,
           double value) {
    sample(family(name, type, help), name, labels, value);
  }
  // A histogram series: cumulative buckets (le = each bound, then +Inf),
  // _sum and _count, all in seconds.
  void histogram(const char* name, const char* help, const std::string& labels,
                 const uint64_t* bounds_ns, const uint64_t* counts, size_t buckets, uint64_t count,
                 double sum_s) {
    Family& f = family(name, "histogram", help);
    const std::string sep = labels.empty() ? "" : ",";
    for (size_t i = 0; i < buckets; ++i) {
      sample(f, std::string(name) + "_bucket",
             labels + sep + "le=\"" + number(double(bounds_ns[i]) / 1e9) + "\"", double(counts[i]));
    }
    sample(f, std::string(name) + "_bucket", labels + sep + "le=\"+Inf\"", double(count));
    sample(f, std::string(name) + "_sum", labels, sum_s);
    sample(f, std::string(name) + "_count", labels, double(count));
  }
  std::string text() const {
    std::string out;
    for (const Family& f : families_) {
      out += "# HELP " + f.name + " " + f.help + "\n";
      out += "# TYPE " + f.name + " " + f.type + "\n";
      out += f.samples;
    }
    return out;
  }

 private:
  struct Family {
    std::string name, type, help, samples;
  };
  Family& family(const char* name, const char* type, const char* help) {
    auto it = index_.find(name);
    if (it == index_.end()) {
      it = index_.emplace(name, families_.size()).first;
      families_.push_back(Family{name, type, help, {}});
    }
    return families_[it->second];
  }
  static void sample(Family& f, const std::string& name, const std::string& labels, double value) {
    std::string line = name;
    if (!labels.empty()) line += "{" + labels + "}";
    line += ' ';
    line += number(value);
    line += '\n';
    f.samples += line;
  }
  static std::string number(double v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  }
  std::map<std::string, size_t> index_;
  std::vector<Family> families_;
};

std::string lbl(uint32_t chip) { return "chip=\"" + std::to_string(chip) + "\""; }
// A label value as the exposition format wants it: \\, \" and \n escaped.
std::string escaped(const std::string& v) {
  std::string out;
  for (char ch : v) {
    if (ch == '\\' || ch == '"') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out;
}
std::string lbl(uint32_t chip, const char* key, const std::string& value) {
  return lbl(chip) + "," + key + "=\"" + value + "\"";
}
std::string lbl(uint32_t chip, const char* k1, const std::string& v1, const char* k2,
                const std::string& v2) {
  return lbl(chip, k1, v1) + "," + k2 + "=\"" + v2 + "\"";
}

constexpr double kNs = 1e-9;

void render_telemetry(Exposition& e, uint32_t chip, const TelemetrySample& s) {
  const vtrn::hostif::Telemetry& t = s.t;
  const std::string c = lbl(chip);
  e.add("vtrn_chip_uptime_seconds", "gauge", "Time since the chip's firmware started.", c,
        double(t.uptime_ns) * kNs);
  e.add("vtrn_chip_heartbeat_total", "counter", "Firmware heartbeats (one per telemetry period).",
        c, double(t.heartbeat));
  e.add("vtrn_chip_telemetry_period_seconds", "gauge", "Telemetry refresh period from the board DTB.",
        c, double(t.period_ms) / 1e3);
  e.add("vtrn_chip_boot_core_idle_seconds_total", "counter", "Time the boot core spent in WFI.", c,
        double(t.idle_ns) * kNs);
  e.add("vtrn_chip_interrupts_total", "counter", "Interrupts the firmware took.", c,
        double(t.irq_count));
  e.add("vtrn_chip_ctrl_requests_total", "counter", "Control requests the firmware consumed.", c,
        double(t.ctrl_requests));
  e.add("vtrn_chip_ctrl_errors_total", "counter", "Control requests answered with an error.", c,
        double(t.ctrl_errors));
  e.add("vtrn_chip_dma_descriptors_total", "counter", "DMA descriptors consumed, all queues.", c,
        double(t.dma_descriptors));
  e.add("vtrn_chip_dma_completions_total", "counter", "DMA completions written, all queues.", c,
        double(t.dma_completions));
  e.add("vtrn_chip_dma_bytes_total", "counter", "Bytes moved by the DMA copy engine.", c,
        double(t.dma_bytes));
  e.add("vtrn_chip_dma_busy_seconds_total", "counter", "Time the DMA engine spent on descriptors.",
        c, double(t.dma_busy_ns) * kNs);
  e.add("vtrn_chip_hbm_capacity_bytes", "gauge", "Allocatable HBM.", c, double(t.hbm_total_bytes));
  e.add("vtrn_chip_hbm_used_bytes", "gauge", "HBM in live allocations.", c,
        double(t.hbm_used_bytes));
  e.add("vtrn_chip_hbm_alloc_failures_total", "counter", "HBM allocations refused.", c,
        double(t.hbm_alloc_failures));
  e.add("vtrn_chip_hbm_retired_pages_total", "counter",
        "HBM pages retired after uncorrectable ECC errors.", c, double(t.hbm_retired_pages));
  e.add("vtrn_chip_ecc_errors_total", "counter", "HBM ECC errors by kind.",
        lbl(chip, "kind", "correctable"), double(t.ecc_correctable));
  e.add("vtrn_chip_ecc_errors_total", "counter", "HBM ECC errors by kind.",
        lbl(chip, "kind", "uncorrectable"), double(t.ecc_uncorrectable));
  e.add("vtrn_chip_jobs_queued", "gauge", "Jobs waiting for a NeuronCore.", c,
        double(t.jobs_queued));
  e.add("vtrn_chip_jobs_running", "gauge", "Jobs on a NeuronCore.", c, double(t.jobs_running));
  e.add("vtrn_chip_jobs_completed_total", "counter", "Jobs that ended DONE.", c,
        double(t.jobs_completed));
  e.add("vtrn_chip_jobs_failed_total", "counter",
        "Jobs that ended FAILED, CANCELLED or TIMED_OUT.", c, double(t.jobs_failed));
  e.add("vtrn_chip_tensor_busy_seconds_total", "counter", "Wall time the tensor engines spent on commands.", c,
        double(t.tensor_busy_ns) / 1e9);
  e.add("vtrn_chip_tensor_modeled_seconds_total", "counter",
        "What the modeled silicon would have taken for the tensor engines' commands.", c,
        double(t.tensor_modeled_ns) / 1e9);
}

void render_power(Exposition& e, uint32_t chip, const vp::PowerTelemetry& p) {
  const std::string c = lbl(chip);
  for (uint32_t z = 0; z < p.zone_count; ++z) {
    const std::string zl = lbl(chip, "zone", std::to_string(z));
    e.add("vtrn_chip_temperature_celsius", "gauge", "Modeled temperature of a thermal zone.", zl,
          p.zones[z].temperature_mc / 1e3);
    e.add("vtrn_chip_temperature_max_celsius", "gauge", "Highest modeled temperature since boot.",
          zl, p.zones[z].max_temperature_mc / 1e3);
    e.add("vtrn_chip_temperature_throttle_celsius", "gauge", "Throttle trip point of the zone.", zl,
          p.zones[z].throttle_mc / 1e3);
    e.add("vtrn_chip_temperature_critical_celsius", "gauge", "Critical trip point of the zone.", zl,
          p.zones[z].critical_mc / 1e3);
  }
  e.add("vtrn_chip_power_watts", "gauge", "Modeled chip power, average of the last refresh window.",
        c, p.power_mw / 1e3);
  e.add("vtrn_chip_power_average_watts", "gauge", "Modeled chip power, low-pass filtered.", c,
        p.power_average_mw / 1e3);
  if (p.power_cap_mw != 0) {
    e.add("vtrn_chip_power_cap_watts", "gauge", "Host power cap (absent: no cap).", c,
          p.power_cap_mw / 1e3);
  }
  const struct {
    const char* name;
    uint32_t mw;
    uint64_t uj;
  } comps[] = {{"core", p.core_power_mw, p.core_energy_uj},
               {"uncore", p.uncore_power_mw, p.uncore_energy_uj},
               {"hbm", p.hbm_power_mw, p.hbm_energy_uj},
               {"link", p.link_power_mw, p.link_energy_uj}};
  for (const auto& k : comps) {
    e.add("vtrn_chip_component_power_watts", "gauge", "Modeled power by component.",
          lbl(chip, "component", k.name), k.mw / 1e3);
  }
  e.add("vtrn_chip_energy_joules_total", "counter", "Modeled energy since boot.", c,
        double(p.energy_uj) / 1e6);
  for (const auto& k : comps) {
    e.add("vtrn_chip_component_energy_joules_total", "counter", "Modeled energy by component.",
          lbl(chip, "component", k.name), double(k.uj) / 1e6);
  }
  e.add("vtrn_chip_frequency_hertz", "gauge", "NeuronCore clock (0 while not clocked).", c,
        double(p.frequency_mhz) * 1e6);
  e.add("vtrn_chip_frequency_max_hertz", "gauge", "Clock of the fastest operating point.", c,
        double(p.max_frequency_mhz) * 1e6);
  e.add("vtrn_chip_voltage_volts", "gauge", "Voltage of the current operating point.", c,
        p.voltage_mv / 1e3);
  e.add("vtrn_chip_pstate", "gauge", "Current operating point (0 = fastest).", c, p.pstate);
  if (p.pstate_limit != 0) {
    e.add("vtrn_chip_pstate_limit", "gauge", "Host pstate limit (absent: no limit).", c,
          p.pstate_limit);
  }
  e.add("vtrn_chip_pstate_changes_total", "counter", "Operating-point changes.", c,
        p.pstate_changes);
  static constexpr struct {
    uint64_t bit;
    const char* name;
  } kReasons[] = {{vp::kReasonIdle, "idle"},
                  {vp::kReasonHostRequest, "host_request"},
                  {vp::kReasonSwPowerCap, "sw_power_cap"},
                  {vp::kReasonHwSlowdown, "hw_slowdown"},
                  {vp::kReasonSwThermalSlowdown, "sw_thermal_slowdown"},
                  {vp::kReasonHwThermalSlowdown, "hw_thermal_slowdown"}};
  for (const auto& r : kReasons) {
    e.add("vtrn_chip_clock_event_reason", "gauge",
          "1 while this NVML-style clock event reason holds the clock down.",
          lbl(chip, "reason", r.name), (p.clock_event_reasons & r.bit) ? 1 : 0);
  }
  e.add("vtrn_chip_clock_limited_seconds_total", "counter", "Time the clock was held down, by limiter.",
        lbl(chip, "limiter", "thermal"), double(p.thermal_throttle_ns) * kNs);
  e.add("vtrn_chip_clock_limited_seconds_total", "counter", "Time the clock was held down, by limiter.",
        lbl(chip, "limiter", "power_cap"), double(p.power_cap_ns) * kNs);
  e.add("vtrn_chip_clock_limited_seconds_total", "counter", "Time the clock was held down, by limiter.",
        lbl(chip, "limiter", "host"), double(p.host_limit_ns) * kNs);
  // One vocabulary in both families: D0, D3hot, and "transition" for the
  // two ways between them (quiescing, resuming), which the firmware's
  // residency counters do not tell apart.
  const char* now = p.device_state == 0 ? "D0" : p.device_state == 2 ? "D3hot" : "transition";
  const struct {
    const char* state;
    uint64_t ns;
  } dev[] = {{"D0", p.d0_ns}, {"D3hot", p.d3hot_ns}, {"transition", p.transition_ns}};
  for (const auto& d : dev) {
    e.add("vtrn_chip_device_power_state", "gauge", "1 for the device power state the chip is in.",
          lbl(chip, "state", d.state), strcmp(now, d.state) == 0 ? 1 : 0);
  }
  for (const auto& d : dev) {
    e.add("vtrn_chip_device_state_seconds_total", "counter", "Residency per device power state.",
          lbl(chip, "state", d.state), double(d.ns) * kNs);
  }
  e.add("vtrn_chip_d3hot_entries_total", "counter", "Entries into D3hot.", c, p.d3hot_entries);
  e.add("vtrn_chip_autosuspends_total", "counter", "Runtime autosuspends started.", c,
        p.autosuspend_count);
  if (p.autosuspend_delay_ms != 0) {
    e.add("vtrn_chip_autosuspend_delay_seconds", "gauge",
          "Idle time before autosuspend (absent: autosuspend off).", c, p.autosuspend_delay_ms / 1e3);
  }
  e.add("vtrn_chip_power_refresh_duration_seconds", "gauge",
        "Firmware time of the last telemetry and governor refresh.", c, double(p.refresh_ns) * kNs);
  e.add("vtrn_chip_power_refresh_seconds_total", "counter",
        "Firmware time spent in telemetry and governor refreshes.", c,
        double(p.refresh_total_ns) * kNs);
  e.add("vtrn_chip_power_refreshes_total", "counter", "Telemetry and governor refreshes.", c,
        double(p.refreshes));
  for (uint32_t i = 0; i < p.core_count; ++i) {
    const vp::PowerTelemetryCore& k = p.cores[i];
    const std::string core = std::to_string(i);
    e.add("vtrn_core_utilization_ratio", "gauge", "Running share of the last refresh window.",
          lbl(chip, "core", core), k.utilization_permille / 1e3);
    e.add("vtrn_core_power_watts", "gauge", "Modeled NeuronCore power, last refresh window.",
          lbl(chip, "core", core), k.power_mw / 1e3);
    e.add("vtrn_core_energy_joules_total", "counter", "Modeled NeuronCore energy since boot.",
          lbl(chip, "core", core), double(k.energy_uj) / 1e6);
    for (uint32_t s = 0; s < vp::kCoreStateCount; ++s) {
      e.add("vtrn_core_power_state", "gauge", "1 for the power state the NeuronCore is in.",
            lbl(chip, "core", core, "state", power_core_state_name(s)), k.state == s ? 1 : 0);
    }
    const uint64_t res[3] = {k.running_ns, k.idle_ns, k.gated_ns};
    for (uint32_t s = 0; s < vp::kCoreStateCount; ++s) {
      e.add("vtrn_core_state_seconds_total", "counter", "NeuronCore residency per power state.",
            lbl(chip, "core", core, "state", power_core_state_name(s)), double(res[s]) * kNs);
    }
  }
  for (uint32_t i = 0; i < p.port_count; ++i) {
    const vp::PowerTelemetryLink& l = p.links[i];
    const std::string port = std::to_string(i);
    for (uint32_t s = 0; s < vp::kLinkStateCount; ++s) {
      e.add("vtrn_link_power_state", "gauge", "1 for the link power state the port is in.",
            lbl(chip, "port", port, "state", power_link_state_name(s)), l.state == s ? 1 : 0);
    }
    const uint64_t res[4] = {l.down_ns, l.l0_ns, l.l0s_ns, l.l1_ns};
    for (uint32_t s = 0; s < vp::kLinkStateCount; ++s) {
      e.add("vtrn_link_state_seconds_total", "counter", "Link residency per power state.",
            lbl(chip, "port", port, "state", power_link_state_name(s)), double(res[s]) * kNs);
    }
    e.add("vtrn_link_low_power_entries_total", "counter", "Entries into L0s and L1.",
          lbl(chip, "port", port, "state", "L0s"), l.l0s_entries);
    e.add("vtrn_link_low_power_entries_total", "counter", "Entries into L0s and L1.",
          lbl(chip, "port", port, "state", "L1"), l.l1_entries);
    e.add("vtrn_link_power_watts", "gauge", "Modeled link port power, last refresh window.",
          lbl(chip, "port", port), l.power_mw / 1e3);
  }
}

void render_links(Exposition& e, uint32_t chip, const vtrn::links::LinksBlock& b) {
  namespace abi = vtrn::links;
  for (uint32_t i = 0; i < b.header.port_count && i < abi::kMaxPorts; ++i) {
    const abi::PortStatus& s = b.ports[i];
    if ((s.flags & abi::kPortWired) == 0) continue;
    const std::string port = std::to_string(s.index);
    const struct {
      const char* kind;
      uint64_t n;
    } errs[] = {{"crc", s.crc_errors},
                {"sequence", s.seq_errors},
                {"replay_timeout", s.replay_timeouts},
                {"transport", s.transport_errors},
                {"protocol", s.protocol_errors},
                {"tx_dropped", s.tx_dropped},
                {"injected_bit", s.injected_bit_errors}};
    for (const auto& k : errs) {
      e.add("vtrn_link_errors_total", "counter", "Link port errors by kind.",
            lbl(chip, "port", port, "kind", k.kind), double(k.n));
    }
    e.add("vtrn_link_replays_total", "counter", "Frames replayed after a NAK or timeout.",
          lbl(chip, "port", port), double(s.replays));
    e.add("vtrn_link_retrains_total", "counter", "Retrains (entries into Recovery).",
          lbl(chip, "port", port), double(s.retrains));
    e.add("vtrn_link_downs_total", "counter", "Times the link went down after being up.",
          lbl(chip, "port", port), double(s.link_downs));
    e.add("vtrn_link_transmit_bytes_total", "counter", "Payload bytes sent on the port.",
          lbl(chip, "port", port), double(s.tx_bytes));
    e.add("vtrn_link_receive_bytes_total", "counter", "Payload bytes received on the port.",
          lbl(chip, "port", port), double(s.rx_bytes));
  }
}

void render_jobs(Exposition& e, uint32_t chip, const JobCounters& j) {
  const JobLatencyHistogram& h = j.latency;
  e.histogram("vtrn_job_latency_seconds",
              "Submit-to-end latency of jobs that ended since vtrnd started, any end.", lbl(chip),
              JobLatencyHistogram::kBoundsNs, h.counts, JobLatencyHistogram::kBuckets, h.count,
              double(h.sum_ns) * kNs);
}

}  // namespace

ChipMetrics collect_chip_metrics(Chip& chip) {
  ChipMetrics m;
  m.id = chip.id();
  m.ready = chip.state() == ChipState::kReady;
  const ChipStatus st = chip.status();
  m.resets = st.reset.count;
  m.pci_bus_id = chip.pci_bus_id();
  if (st.info.valid) {
    m.fw_version = st.info.fw_version;
    m.build_id = st.info.build_id;
    m.board = st.info.board_model;
  }
  if (!m.ready) return m;
  m.have_telemetry = chip.telemetry(&m.telemetry);
  m.have_power = chip.power_telemetry(&m.power).ok();
  m.have_links = read_links_block(chip, &m.links).ok();
  return m;
}

std::string render_metrics(const std::vector<ChipMetrics>& chips) {
  Exposition e;
  for (const ChipMetrics& m : chips) {
    e.add("vtrn_chip_up", "gauge", "1 when the chip is READY.", lbl(m.id), m.ready ? 1 : 0);
  }
  for (const ChipMetrics& m : chips) {
    if (m.fw_version.empty()) continue;
    e.add("vtrn_chip_info", "gauge", "Firmware, board and host PCI address of the chip (always 1).",
          lbl(m.id) + ",fw_version=\"" + escaped(m.fw_version) + "\",build_id=\"" +
              escaped(m.build_id) + "\",board=\"" + escaped(m.board) + "\",pci_bus_id=\"" +
              escaped(m.pci_bus_id) + "\"",
          1);
  }
  for (const ChipMetrics& m : chips) {
    e.add("vtrn_chip_resets_total", "counter",
          "Chip resets since vtrnd started (watchdog, panic, QEMU exit, manual).", lbl(m.id),
          double(m.resets));
  }
  for (const ChipMetrics& m : chips) {
    if (m.have_telemetry) render_telemetry(e, m.id, m.telemetry);
  }
  for (const ChipMetrics& m : chips) {
    if (m.have_jobs) render_jobs(e, m.id, m.jobs);
  }
  for (const ChipMetrics& m : chips) {
    if (m.have_power) render_power(e, m.id, m.power);
  }
  for (const ChipMetrics& m : chips) {
    if (m.have_links) render_links(e, m.id, m.links);
  }
  return e.text();
}

MetricsServer::MetricsServer(EventLoop* loop, Render render)
    : loop_(loop), render_(std::move(render)) {}

MetricsServer::~MetricsServer() {
  while (!conns_.empty()) close_conn(conns_.begin()->first);
  if (listen_) loop_->remove(listen_.get());
}

Error MetricsServer::start(uint16_t port) {
  listen_.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listen_) return Error(Code::kSystem, std::string("metrics: socket: ") + strerror(errno));
  const int one = 1;
  (void)setsockopt(listen_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // loopback only, never 0.0.0.0
  if (bind(listen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_.get(), 16) != 0) {
    Error e(Code::kSystem, "metrics: cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + strerror(errno));
    listen_.reset();
    return e;
  }
  socklen_t len = sizeof a;
  if (getsockname(listen_.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port_ = ntohs(a.sin_port);
  }
  if (Error e = loop_->add(listen_.get(), EPOLLIN, [this](uint32_t) { on_accept(); }); !e.ok()) {
    listen_.reset();
    return e.prefix("metrics: ");
  }
  return Error();
}

void MetricsServer::on_accept() {
  for (;;) {
    int fd = accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN, or a transient error: the next event retries
    UniqueFd owned(fd);
    if (conns_.size() >= kMaxConnections) evict_one();
    const uint64_t id = next_id_++;
    Conn& c = conns_[id];
    c.fd = std::move(owned);
    c.timer = loop_->add_timer_in(kConnTimeoutNs, [this, id] {
      auto it = conns_.find(id);
      if (it == conns_.end()) return;
      it->second.timer = 0;
      close_conn(id);
    });
    if (Error e = loop_->add(c.fd.get(), EPOLLIN, [this, id](uint32_t ev) { on_event(id, ev); }); !e.ok()) {
      DRV_LOGW("metrics: %s, dropping the connection", e.detail().c_str());
      close_conn(id);
    }
  }
}

// Room for a new connection: the oldest that has not sent a whole request
// yet (ids grow with time, so the first such in the map is the oldest),
// else the oldest of all. A scraper's connection lives for one exchange, so
// whatever has been open longest without asking is the one to go.
void MetricsServer::evict_one() {
  for (auto& [id, c] : conns_) {
    if (!c.responding) {
      close_conn(id);
      return;
    }
  }
  if (!conns_.empty()) close_conn(conns_.begin()->first);
}

// After an answer to a request that was not read to its end (431): stop
// writing, keep reading and discarding until the peer closes or the
// connection's timer fires. Closing with unread bytes would send a reset,
// and the peer could lose the answer before reading it.
void MetricsServer::drain(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  c.draining = true;
  (void)shutdown(c.fd.get(), SHUT_WR);
  if (Error e = loop_->modify(c.fd.get(), EPOLLIN); !e.ok()) {
    DRV_LOGW("metrics: %s, dropping the connection", e.detail().c_str());
    close_conn(id);
  }
}

void MetricsServer::close_conn(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  if (it->second.timer != 0) loop_->cancel_timer(it->second.timer);
  loop_->remove(it->second.fd.get());
  conns_.erase(it);
}

void MetricsServer::respond(Conn& c) {
  // Request line: METHOD SP TARGET SP VERSION.
  const size_t eol = c.in.find("\r\n");
  const std::string line = c.in.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  std::string status = "400 Bad Request", body = "bad request\n";
  std::string type = "text/plain; charset=utf-8";
  std::string extra;
  if (sp2 != std::string::npos && line.compare(sp2 + 1, 5, "HTTP/") == 0) {
    const std::string method = line.substr(0, sp1);
    std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const size_t q = target.find('?');
    if (q != std::string::npos) target.resize(q);
    if (target != "/metrics") {
      status = "404 Not Found";
      body = "only /metrics is served here\n";
    } else if (method != "GET" && method != "HEAD") {
      status = "405 Method Not Allowed";
      body = "use GET\n";
      extra = "Allow: GET, HEAD\r\n";
    } else {
      status = "200 OK";
      type = "text/plain; version=0.0.4; charset=utf-8";
      body = render_();
      if (method == "HEAD") {
        c.out = "HTTP/1.1 200 OK\r\nContent-Type: " + type + "\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
        return;
      }
    }
  }
  c.out = "HTTP/1.1 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " +
          std::to_string(body.size()) + "\r\n" + extra + "Connection: close\r\n\r\n" + body;
}

void MetricsServer::on_event(uint64_t id, uint32_t events) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  if (c.draining) {
    char buf[4096];
    for (;;) {
      const ssize_t n = read(c.fd.get(), buf, sizeof buf);
      if (n > 0) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      close_conn(id);  // EOF or error: the peer has what it needed
      return;
    }
  }
  if (!c.responding) {
    if (events & (EPOLLERR | EPOLLHUP)) {
      close_conn(id);
      return;
    }
    char buf[2048];
    bool too_big = false;
    for (;;) {
      const ssize_t n = read(c.fd.get(), buf, sizeof buf);
      if (n > 0) {
        c.in.append(buf, size_t(n));
        if (c.in.size() > kMaxRequestBytes && c.in.find("\r\n\r\n") == std::string::npos) {
          too_big = true;
          break;
        }
        continue;
      }
      if (n == 0) {
        // Peer closed before a full head: nothing to answer.
        if (c.in.find("\r\n\r\n") == std::string::npos) {
          close_conn(id);
          return;
        }
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        close_conn(id);
        return;
      }
      break;
    }
    if (too_big) {
      const std::string body = "request head larger than " + std::to_string(kMaxRequestBytes) + " bytes\n";
      c.out = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; "
              "charset=utf-8\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      c.in.clear();
      c.half_read = true;
    } else if (c.in.find("\r\n\r\n") == std::string::npos) {
      return;
    } else {
      respond(c);
    }
    c.responding = true;
    if (Error e = loop_->modify(c.fd.get(), EPOLLOUT); !e.ok()) {
      DRV_LOGW("metrics: %s, dropping the connection", e.detail().c_str());
      close_conn(id);
      return;
    }
  }
  while (c.out_off < c.out.size()) {
    const ssize_t n = send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off,
                           MSG_NOSIGNAL);
    if (n > 0) {
      c.out_off += size_t(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    break;
  }
  if (c.half_read && c.out_off == c.out.size()) {
    drain(id);
    return;
  }
  close_conn(id);
}

}  // namespace drv
