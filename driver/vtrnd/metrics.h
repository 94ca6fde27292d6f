// vtrnd's Prometheus exporter: `GET /metrics` on 127.0.0.1:<--metrics-port>,
// served from vtrnd's one epoll loop (no threads), and the text rendering
// of every chip's telemetry in the Prometheus text exposition format 0.0.4.
//
// Naming follows the Prometheus conventions: a `vtrn_` prefix, base units
// in the name (seconds, joules, watts, celsius, bytes, hertz, volts, ratio),
// `_total` on counters, one HELP and one TYPE line per family with every
// sample of the family together, labels chip="N" (plus core, zone, port,
// component, state or reason where a family has several series per chip).
// Firmware values in milli-units are converted to base units here.
//
// Not a general HTTP server: one request per connection (Connection:
// close), request head at most 8 KiB, at most 16 connections at once, each
// dropped after 5 s; only loopback is ever bound. Scrapes read the BAR2
// blocks directly (seqlock copies), so they never wait for a chip.
#pragma once

#include <stdint.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "vtrn/drv/chip.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/fd.h"
#include "vtrn/power_telemetry.h"

namespace drv {

// What one scrape knows about one chip.
struct ChipMetrics {
  uint32_t id = 0;
  bool ready = false;
  bool have_telemetry = false;
  TelemetrySample telemetry;
  bool have_power = false;
  vtrn::power::PowerTelemetry power{};
};

ChipMetrics collect_chip_metrics(Chip& chip);
// The exposition text for these chips (families in a fixed order).
std::string render_metrics(const std::vector<ChipMetrics>& chips);

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr size_t kMaxConnections = 16;
  static constexpr uint64_t kConnTimeoutNs = 5'000'000'000;

  MetricsServer(EventLoop* loop, Render render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds 127.0.0.1:port (0 = any free port) and listens. false + *err.
  bool start(uint16_t port, std::string* err);
  [[nodiscard]] uint16_t port() const { return port_; }

 private:
  struct Conn {
    UniqueFd fd;
    std::string in;
    std::string out;
    size_t out_off = 0;
    bool responding = false;
    EventLoop::TimerId timer = 0;
  };
  void on_accept();
  void on_event(uint64_t id, uint32_t events);
  void respond(Conn& c);
  void close_conn(uint64_t id);

  EventLoop* loop_;
  Render render_;
  UniqueFd listen_;
  uint16_t port_ = 0;
  std::map<uint64_t, Conn> conns_;
  uint64_t next_id_ = 1;
};

}  // namespace drv
