// `vtrn telemetry [CHIP] [--json] [--interval S [--count N]]`: the
// telemetry block each chip's firmware refreshes every period, as vtrnd last
// read it, with the power/thermal block (kRegionPower) under "power". All
// chips when CHIP is omitted; the table has one column per chip. --interval
// (alias --watch; `vtrn top` takes the same two) repeats every S seconds:
// tables separated by a blank line, or with --json one compact JSON object
// per line (JSON Lines), each stamped with the host's wall clock, until
// interrupted, vtrnd stops (exit 3) or N samples were printed.
#include <stdio.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "commands.h"
#include "daemon.h"
#include "json_conv.h"
#include "power_view.h"
#include "render.h"

namespace tools {
namespace {

struct TelemetryOptions {
  int32_t chip = -1;
  bool json = false;
  double watch_s = 0;   // 0: print once
  uint64_t count = 0;   // with --interval: stop after this many samples (0 = never)
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
  row("wakeups", count("wakeups"));
  row("control requests", count("ctrl_requests"));
  row("control errors", count("ctrl_errors"));
  row("events sent", count("events_sent"));
  row("host doorbells received", count("host_rx_events"));
  row("log bytes", [](const nlohmann::json& c) { return format_bytes(c.at("log_bytes").get<uint64_t>()); });
  row("DMA descriptors", count("dma_descriptors"));
  row("DMA completions", count("dma_completions"));
  row("DMA bytes", [](const nlohmann::json& c) { return format_bytes(c.at("dma_bytes").get<uint64_t>()); });
  row("DMA busy", [](const nlohmann::json& c) { return format_ns(c.at("dma_busy_ns").get<uint64_t>()); });
  if (!chips.empty() && chips[0].contains("jobs_completed")) {
    row("jobs queued / running", [](const nlohmann::json& c) {
      return std::to_string(c.at("jobs_queued").get<uint32_t>()) + " / " +
             std::to_string(c.at("jobs_running").get<uint32_t>());
    });
    row("tensor engines busy / modeled", [](const nlohmann::json& c) {
      return format_ns(c.at("tensor_busy_ns").get<uint64_t>()) + " / " +
             format_ns(c.at("tensor_modeled_ns").get<uint64_t>());
    });
    row("jobs done / failed", [](const nlohmann::json& c) {
      return std::to_string(c.at("jobs_completed").get<uint64_t>()) + " / " +
             std::to_string(c.at("jobs_failed").get<uint64_t>());
    });
    row("job latency p50/p90/p99", [](const nlohmann::json& c) {
      if (c.at("job_latency_p50_ns").get<uint64_t>() == 0) return std::string("-");
      return format_ns(c.at("job_latency_p50_ns").get<uint64_t>()) + " / " +
             format_ns(c.at("job_latency_p90_ns").get<uint64_t>()) + " / " +
             format_ns(c.at("job_latency_p99_ns").get<uint64_t>());
    });
    row("NeuronCore busy (jobs)", [](const nlohmann::json& c) {
      std::string s;
      for (const auto& u : c.at("core_utilization")) {
        char b[16];
        snprintf(b, sizeof b, "%.0f%%", u.get<double>() * 100.0);
        s += (s.empty() ? "" : " ") + std::string(b);
      }
      return s.empty() ? std::string("-") : s;
    });
  }
  if (!chips.empty() && chips[0].contains("hbm_total_bytes")) {
    row("HBM used / total", [](const nlohmann::json& c) {
      return format_bytes(c.at("hbm_used_bytes").get<uint64_t>()) + " / " +
             format_bytes(c.at("hbm_total_bytes").get<uint64_t>());
    });
    row("HBM alloc failures", count("hbm_alloc_failures"));
    row("HBM retired pages", count("hbm_retired_pages"));
    row("ECC corrected / uncorrectable", [](const nlohmann::json& c) {
      return std::to_string(c.at("ecc_correctable").get<uint64_t>()) + " / " +
             std::to_string(c.at("ecc_uncorrectable").get<uint64_t>());
    });
  }
  // Rows from the power/thermal block; "-" for a chip without one.
  auto power_row = [&row](const std::string& label, auto format) {
    row(label, [format](const nlohmann::json& c) {
      return c.contains("power") ? format(c.at("power")) : std::string("-");
    });
  };
  auto num = [](double v, const char* fmt) {
    char buf[48];
    snprintf(buf, sizeof buf, fmt, v);
    return std::string(buf);
  };
  power_row("device power state", [](const nlohmann::json& p) {
    return p.at("device_state").get<std::string>();
  });
  power_row("temperature", [&num](const nlohmann::json& p) {
    std::string s;
    for (const auto& z : p.at("zones")) {
      s += (s.empty() ? "" : " / ") + num(z.at("temperature_c").get<double>(), "%.1f C");
    }
    return s.empty() ? std::string("-") : s;
  });
  power_row("power (window / average)", [&num](const nlohmann::json& p) {
    return num(p.at("power_w").get<double>(), "%.2f W") + " / " +
           num(p.at("power_average_w").get<double>(), "%.2f W");
  });
  power_row("energy", [&num](const nlohmann::json& p) { return num(p.at("energy_j").get<double>(), "%.3f J"); });
  power_row("pstate", [](const nlohmann::json& p) {
    return std::to_string(p.at("pstate").get<uint32_t>()) + " of 0.." +
           std::to_string(p.at("pstate_count").get<uint32_t>() - 1);
  });
  power_row("frequency", [](const nlohmann::json& p) {
    const uint32_t f = p.at("frequency_mhz").get<uint32_t>();
    return f ? std::to_string(f) + " MHz" : std::string("not clocked");
  });
  power_row("throttle reasons", [](const nlohmann::json& p) { return short_reasons(p); });
  power_row("power cap", [&num](const nlohmann::json& p) {
    const double w = p.at("power_cap_w").get<double>();
    return w == 0 ? std::string("none") : num(w, "%.3g W");
  });
  power_row("core utilization", [](const nlohmann::json& p) {
    std::string s;
    for (const auto& k : p.at("cores")) {
      s += (s.empty() ? "" : " ") + std::to_string(k.at("utilization_permille").get<uint32_t>() / 10) + "%";
    }
    return s.empty() ? std::string("-") : s;
  });
  power_row("core power state", [](const nlohmann::json& p) {
    std::string s;
    for (const auto& k : p.at("cores")) s += (s.empty() ? "" : " ") + k.at("state").get<std::string>();
    return s.empty() ? std::string("-") : s;
  });
  power_row("link power state", [](const nlohmann::json& p) {
    std::string s;
    for (const auto& l : p.at("links")) s += (s.empty() ? "" : " ") + l.at("state").get<std::string>();
    return s.empty() ? std::string("-") : s;
  });
  power_row("link power", [&num](const nlohmann::json& p) {
    std::string ports;
    for (const auto& l : p.at("links")) {
      ports += (ports.empty() ? "" : " ") + num(l.at("power_w").get<double>(), "%.2f");
    }
    return num(p.at("link_power_w").get<double>(), "%.2f W") +
           (ports.empty() ? std::string() : " (" + ports + ")");
  });
  power_row("telemetry refresh cost", [](const nlohmann::json& p) {
    return format_ns(p.at("refresh_ns").get<uint64_t>()) + " (max " +
           format_ns(p.at("refresh_max_ns").get<uint64_t>()) + ")";
  });
  return t.render();
}

nlohmann::json sample(DaemonConnection& conn, int32_t chip) {
  drv::ResponsePtr resp = request_telemetry(conn, chip);
  const Vtrn__Api__TelemetryResponse& tel = *resp->telemetry;
  nlohmann::json chips = nlohmann::json::array();
  for (size_t i = 0; i < tel.n_chips; ++i) {
    nlohmann::json c = to_json(*tel.chips[i]);
    if (tel.chips[i]->power != nullptr) c["power"] = power_to_json(*tel.chips[i]->power);
    chips.push_back(std::move(c));
  }
  return chips;
}

void run_telemetry(const TelemetryOptions& opts) {
  DaemonConnection conn = DaemonConnection::open();
  if (opts.watch_s <= 0) {
    const nlohmann::json chips = sample(conn, opts.chip);
    if (opts.json)
      print_json({{"chips", chips}});
    else
      std::cout << render_telemetry(chips);
    return;
  }
  const auto period = std::chrono::microseconds(int64_t(opts.watch_s * 1e6));
  auto next = std::chrono::steady_clock::now();
  for (uint64_t n = 0; opts.count == 0 || n < opts.count; ++n) {
    if (n > 0) {
      next += period;
      std::this_thread::sleep_until(next);
    }
    const nlohmann::json chips = sample(conn, opts.chip);
    if (opts.json) {
      const int64_t unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
      std::cout << nlohmann::json{{"time_unix_ms", unix_ms}, {"chips", chips}}.dump() << "\n";
    } else {
      if (n > 0) std::cout << "\n";
      std::cout << render_telemetry(chips);
    }
    std::cout.flush();
  }
}

}  // namespace

void add_telemetry_command(CLI::App& app, Action* action) {
  auto opts = std::make_shared<TelemetryOptions>();
  CLI::App* sub = app.add_subcommand("telemetry", "Show chip telemetry (every chip when CHIP is omitted)");
  sub->add_option("chip", opts->chip, "Chip id")->check(chip_id_validator());
  sub->add_flag("--json", opts->json, "Print one JSON document instead of a table");
  add_interval_options(sub, &opts->watch_s, &opts->count,
                       "repeat every INTERVAL (with --json: one JSON object per line)",
                       /*count_needs_interval=*/true);
  sub->callback([opts, action] { *action = [opts] { run_telemetry(*opts); }; });
}

}  // namespace tools
