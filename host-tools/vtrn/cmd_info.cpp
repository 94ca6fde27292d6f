// `vtrn info CHIP`: everything vtrnd knows about one chip, panic record
// included when the firmware left one.
#include <stdio.h>

#include <iostream>
#include <memory>

#include "commands.h"
#include "daemon.h"
#include "json_conv.h"
#include "reliability_json.h"
#include "render.h"
#include "vtrn/hostif.h"

namespace tools {
namespace {

struct InfoOptions {
  uint32_t chip = 0;
  bool json = false;
};

std::string text_or_dash(const nlohmann::json& value) {
  const std::string s = value.get<std::string>();
  return s.empty() ? "-" : s;
}

std::string render_info(const nlohmann::json& info) {
  const nlohmann::json& s = info.at("summary");
  Table t({});
  auto row = [&t](const std::string& key, const std::string& value) { t.add({key, value}); };
  row("chip", std::to_string(s.at("id").get<uint32_t>()) + " (" + text_or_dash(info.at("chip_name")) + ")");
  row("state", s.at("state").get<std::string>());
  row("firmware", text_or_dash(s.at("fw_version")) + ", build " + text_or_dash(info.at("build_id")));
  row("ABI", std::to_string(info.at("abi_major").get<uint32_t>()) + "." +
                 std::to_string(info.at("abi_minor").get<uint32_t>()) + ", capabilities " +
                 hex(info.at("capabilities").get<uint64_t>()));
  row("board", s.at("board").get<std::string>());
  row("NeuronCores", std::to_string(info.at("neuron_cores").get<uint32_t>()) + " x " +
                         text_or_dash(info.at("cpu")));
  const uint64_t stack = info.at("hbm_bytes_per_stack").get<uint64_t>();
  const uint32_t stacks = info.at("hbm_stacks").get<uint32_t>();
  row("HBM", std::to_string(stacks) + " x " + format_bytes(stack) + " = " + format_bytes(stack * stacks) +
                 ", " + std::to_string(info.at("hbm_channels").get<uint32_t>()) + " channels/stack, " +
                 format_bytes(info.at("hbm_page_bytes").get<uint32_t>()) + " pages");
  row("link ports", std::to_string(info.at("link_ports").get<uint32_t>()));
  row("power domains", std::to_string(info.at("power_domains").get<uint32_t>()));
  row("thermal zones", std::to_string(info.at("thermal_zones").get<uint32_t>()));
  row("telemetry period", std::to_string(info.at("telemetry_period_ms").get<uint32_t>()) + " ms");
  row("timer", std::to_string(info.at("timer_hz").get<uint64_t>()) + " Hz");
  row("GIC", "v" + std::to_string(info.at("gic_version").get<uint32_t>()));
  row("PCI", text_or_dash(s.at("pci_bus_id")) + " (inside the chip " + text_or_dash(s.at("pci_address")) +
                 "), BAR2 " + format_bytes(s.at("bar2_bytes").get<uint64_t>()));
  row("uptime", format_ns(s.at("uptime_ns").get<uint64_t>()));
  row("heartbeat", std::to_string(s.at("heartbeat").get<uint64_t>()));
  const uint64_t boot_ns = s.at("boot_ns").get<uint64_t>();
  row("boot", (boot_ns > 0 ? format_ns(boot_ns) : std::string("-")) + " (QEMU launch to READY), generation " +
                  std::to_string(s.at("boot_generation").get<uint32_t>()));
  row("QEMU pid", std::to_string(s.at("qemu_pid").get<int32_t>()));
  const uint32_t gdb_port = s.at("gdb_port").get<uint32_t>();
  row("gdbstub", gdb_port != 0 ? "127.0.0.1:" + std::to_string(gdb_port) : "-");
  row("QEMU command", text_or_dash(info.at("qemu_cmdline")));
  if (!s.at("error").get<std::string>().empty()) row("error", s.at("error").get<std::string>());
  const nlohmann::json& panic = info.at("panic");
  if (!panic.is_null()) {
    row("panic", text_or_dash(panic.at("reason")));
    const uint32_t cause = panic.at("cause").get<uint32_t>();
    row("panic cause", std::to_string(cause) + " (" + vtrn::hostif::panic_cause_name(cause) + "), EC " +
                           hex(panic.at("ec").get<uint32_t>()) + ", cpu " +
                           std::to_string(panic.at("cpu").get<uint32_t>()));
    row("panic ESR/ELR/FAR", hex(panic.at("esr").get<uint64_t>()) + " / " + hex(panic.at("elr").get<uint64_t>()) +
                                 " / " + hex(panic.at("far").get<uint64_t>()));
  }
  const uint32_t wd = info.at("watchdog_timeout_ms").get<uint32_t>();
  row("watchdog", wd != 0 ? std::to_string(wd) + " ms without a heartbeat" : std::string("-"));
  const nlohmann::json& rh = info.at("reset_history");
  row("resets", reset_history_text(rh));
  if (!rh.at("last_panic").get<std::string>().empty()) row("last panic", rh.at("last_panic").get<std::string>());
  std::string out = t.render();
  for (const auto& line : s.at("last_log")) out += "  | " + line.get<std::string>() + "\n";
  return out;
}

void run_info(const InfoOptions& opts) {
  DaemonConnection conn = DaemonConnection::open();
  drv::ResponsePtr resp = request_info(conn, opts.chip);
  const nlohmann::json doc = to_json(*resp->info->info);
  if (opts.json)
    print_json(doc);
  else
    std::cout << render_info(doc);
}

}  // namespace

void add_info_command(CLI::App& app, Action* action) {
  auto opts = std::make_shared<InfoOptions>();
  CLI::App* sub = app.add_subcommand("info", "Show everything about one chip");
  sub->add_option("chip", opts->chip, "Chip id")->required()->check(chip_id_validator());
  sub->add_flag("--json", opts->json, "Print one JSON document instead of a table");
  sub->callback([opts, action] { *action = [opts] { run_info(*opts); }; });
}

}  // namespace tools
