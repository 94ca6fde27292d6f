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
// A family's name is unique across types, also once a counter's `_total`
// and a histogram's `_bucket`/`_sum`/`_count` are taken off (OpenMetrics,
// Python's prometheus_client); a value that means "none" (no power cap, no
// pstate limit, autosuspend off) is an absent series, never 0; a state has
// one label value in every family that names it.
//
// Not a general HTTP server: one request per connection (Connection:
// close), request head at most 8 KiB (431 beyond), at most 16 connections
// at once, each dropped after 5 s; only loopback is ever bound. A new
// connection is never refused: when all 16 are open, the one idle longest
// (no complete request yet; else the oldest) is closed to make room, so idle
// or slow clients cannot lock scrapers out. Scrapes read the BAR2 blocks
// directly (seqlock copies), so they never wait for a chip.
#pragma once

#include <stdint.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "job_service.h"
#include "vtrn/drv/chip.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/fd.h"
#include "vtrn/links_abi.h"
#include "vtrn/power_telemetry.h"

namespace drv {

// What one scrape knows about one chip.
struct ChipMetrics {
  uint32_t id = 0;
  bool ready = false;
  std::string fw_version, build_id, board;  // vtrn_chip_info (empty before the first boot)
  std::string pci_bus_id;                   // vtrn_chip_info: the card's host-side PCI address
  uint32_t resets = 0;                      // resets since vtrnd started, any cause
  bool have_telemetry = false;
  TelemetrySample telemetry;
  bool have_power = false;
  vtrn::power::PowerTelemetry power{};
  bool have_links = false;
  vtrn::links::LinksBlock links{};
  // Set by whoever owns the job service (collect_chip_metrics cannot see it).
  bool have_jobs = false;
  JobCounters jobs;
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
  Error start(uint16_t port);
  [[nodiscard]] uint16_t port() const { return port_; }

 private:
  struct Conn {
    UniqueFd fd;
    std::string in;
    std::string out;
    size_t out_off = 0;
    bool responding = false;
    bool half_read = false;  // answered before the request was read to its end (431)
    bool draining = false;   // answered and shut down for writing; reading what is left
    EventLoop::TimerId timer = 0;
  };
  void on_accept();
  void evict_one();
  void drain(uint64_t id);
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
