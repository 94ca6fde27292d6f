// `vtrn telemetry [CHIP]`: the telemetry block each chip's firmware
// refreshes every period, as vtrnd last read it. All chips when CHIP is
// omitted; the table has one column per chip.
#include <stdio.h>

#include <iostream>
#include <memory>

#include "commands.h"
#include "daemon.h"
#include "json_conv.h"
#include "render.h"

namespace tools {
namespace {

struct TelemetryOptions {
  int32_t chip = -1;
  bool json = false;
};

std::string render_telemetry(const nlohmann::json& chips) {
  std::vector<std::string> headers{"FIELD"};
  for (const auto& c : chips) headers.push_back("CHIP " + std::to_string(c.at("chip").get<uint32_t>()));
  Table t(headers);
  auto row = [&t, &chips](const std::string& label, auto format) {
    std::vector<std::string> cells{label};
    for (const auto& c : chips) cells.push_back(format(c));
    t.add(cells);
  };
  auto count = [](const char* key) {
    return [key](const nlohmann::json& c) { return std::to_string(c.at(key).get<uint64_t>()); };
  };
  row("uptime", [](const nlohmann::json& c) { return format_ns(c.at("uptime_ns").get<uint64_t>()); });
  row("heartbeat", count("heartbeat"));
  row("period", [](const nlohmann::json& c) { return std::to_string(c.at("period_ms").get<uint32_t>()) + " ms"; });
  row("NeuronCores", count("neuron_cores"));
  row("idle time", [](const nlohmann::json& c) { return format_ns(c.at("idle_ns").get<uint64_t>()); });
  row("idle ratio", [](const nlohmann::json& c) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.1f %%", c.at("idle_ratio").get<double>() * 100.0);
    return std::string(buf);
  });
  row("interrupts", count("irq_count"));
  row("doorbell interrupts", count("doorbell_irq_count"));
  row("timer interrupts", count("timer_irq_count"));
  row("control requests", count("ctrl_requests"));
  row("control errors", count("ctrl_errors"));
  row("events sent", count("events_sent"));
  row("host doorbells received", count("host_rx_events"));
  row("log bytes", [](const nlohmann::json& c) { return format_bytes(c.at("log_bytes").get<uint64_t>()); });
  row("DMA descriptors", count("dma_descriptors"));
  row("DMA completions", count("dma_completions"));
  row("DMA bytes", [](const nlohmann::json& c) { return format_bytes(c.at("dma_bytes").get<uint64_t>()); });
  row("DMA busy", [](const nlohmann::json& c) { return format_ns(c.at("dma_busy_ns").get<uint64_t>()); });
  row("temperature", [](const nlohmann::json& c) {
    // The firmware has no thermal model yet and publishes 0: show that the
    // value is absent rather than a plausible-looking 0.0 C.
    const int32_t mc = c.at("temperature_mc").get<int32_t>();
    if (mc == 0) return std::string("-");
    char buf[32];
    snprintf(buf, sizeof buf, "%.1f C", mc / 1000.0);
    return std::string(buf);
  });
  return t.render();
}

void run_telemetry(const TelemetryOptions& opts) {
  DaemonConnection conn = DaemonConnection::open();
  drv::ResponsePtr resp = request_telemetry(conn, opts.chip);
  const Vtrn__Api__TelemetryResponse& tel = *resp->telemetry;
  nlohmann::json chips = nlohmann::json::array();
  for (size_t i = 0; i < tel.n_chips; ++i) chips.push_back(to_json(*tel.chips[i]));
  if (opts.json)
    print_json({{"chips", chips}});
  else
    std::cout << render_telemetry(chips);
}

}  // namespace

void add_telemetry_command(CLI::App& app, Action* action) {
  auto opts = std::make_shared<TelemetryOptions>();
  CLI::App* sub = app.add_subcommand("telemetry", "Show chip telemetry (every chip when CHIP is omitted)");
  sub->add_option("chip", opts->chip, "Chip id")->check(chip_id_validator());
  sub->add_flag("--json", opts->json, "Print one JSON document instead of a table");
  sub->callback([opts, action] { *action = [opts] { run_telemetry(*opts); }; });
}

}  // namespace tools
