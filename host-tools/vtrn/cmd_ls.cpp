// `vtrn ls`: one line per chip of the running board.
#include <iostream>
#include <memory>

#include "commands.h"
#include "daemon.h"
#include "json_conv.h"
#include "render.h"
#include "views.h"

namespace tools {

std::string render_chip_table(const nlohmann::json& list) {
  Table table({"CHIP", "STATE", "FIRMWARE", "UPTIME", "PCI", "BAR2", "BOARD", "BOOT"});
  std::string errors;
  for (const auto& chip : list.at("chips")) {
    const uint64_t boot_ns = chip.at("boot_ns").get<uint64_t>();
    const std::string fw = chip.at("fw_version").get<std::string>();
    const std::string pci = chip.at("pci_bus_id").get<std::string>();
    table.add({std::to_string(chip.at("id").get<uint32_t>()), chip.at("state").get<std::string>(),
               fw.empty() ? "-" : fw, format_ns(chip.at("uptime_ns").get<uint64_t>()),
               pci.empty() ? "-" : pci, format_bytes(chip.at("bar2_bytes").get<uint64_t>()),
               chip.at("board").get<std::string>(), boot_ns > 0 ? format_ns(boot_ns) : "-"});
    const std::string error = chip.at("error").get<std::string>();
    if (!error.empty())
      errors += "chip " + std::to_string(chip.at("id").get<uint32_t>()) + ": " + error + "\n";
  }
  return table.render() + errors;
}

namespace {

struct LsOptions {
  bool json = false;
};

void run_ls(const LsOptions& opts) {
  DaemonConnection conn = DaemonConnection::open();
  drv::ResponsePtr resp = request_list(conn);
  const nlohmann::json doc = to_json(*resp->list);
  if (opts.json)
    print_json(doc);
  else
    std::cout << render_chip_table(doc);
}

}  // namespace

void add_ls_command(CLI::App& app, Action* action) {
  auto opts = std::make_shared<LsOptions>();
  CLI::App* sub = app.add_subcommand("ls", "List the chips of the running board");
  sub->add_flag("--json", opts->json, "Print one JSON document instead of a table");
  sub->callback([opts, action] { *action = [opts] { run_ls(*opts); }; });
}

}  // namespace tools
