// `vtrn up`: start vtrnd for a board and wait until every chip is READY.
// The heavy lifting (finding binaries, detaching, undoing a failed start)
// is board_control.cpp; this file is options and output.
#include <iostream>
#include <memory>

#include "board_control.h"
#include "commands.h"
#include "json_conv.h"
#include "render.h"
#include "views.h"

namespace tools {
namespace {

struct UpCommand {
  UpOptions up;
  bool json = false;
};

std::string gdb_command(uint32_t port) {
  return "gdb-multiarch " + firmware_elf_path() + " -ex 'target remote 127.0.0.1:" +
         std::to_string(port) + "'";
}

void run_up(const UpCommand& cmd) {
  BoardUp board = start_board(cmd.up);
  nlohmann::json doc = to_json(*board.list->list);
  doc["vtrnd_pid"] = board.vtrnd_pid;
  doc["wall_ns"] = board.wall_ns;
  nlohmann::json gdb = nlohmann::json::array();
  for (const auto& chip : doc["chips"]) {
    const uint32_t port = chip["gdb_port"].get<uint32_t>();
    if (port != 0)
      gdb.push_back({{"chip", chip["id"]}, {"port", port}, {"command", gdb_command(port)}});
  }
  doc["gdb"] = gdb;
  if (cmd.json) {
    print_json(doc);
    return;
  }
  std::cout << "vtrnd running (pid " << board.vtrnd_pid << "), board " << doc["board"].get<std::string>()
            << " up in " << format_ns(board.wall_ns) << "\n"
            << render_chip_table(doc);
  for (const auto& g : gdb)
    std::cout << "chip " << g["chip"].get<uint32_t>() << " gdb: " << g["command"].get<std::string>()
              << "\n";
}

}  // namespace

void add_up_command(CLI::App& app, Action* action) {
  auto cmd = std::make_shared<UpCommand>();
  CLI::App* sub = app.add_subcommand("up", "Start vtrnd and boot every chip of a board");
  sub->add_option("--board", cmd->up.board, "Board description (.dtb, or .dts compiled by vtrnd)")
      ->check(CLI::ExistingFile);
  sub->add_option("--chips", cmd->up.chips, "Resize the board to N chips (clones the last chip)")
      ->check(CLI::Range(1u, 256u));
  sub->add_flag("--gdb", cmd->up.gdb, "Give each chip a gdbstub on 127.0.0.1:(gdb-port + chip)");
  CLI::Option* port =
      sub->add_option("--gdb-port", cmd->up.gdb_port, "First gdbstub port (0: any free port per chip; implies --gdb)")
          ->check(CLI::Range(0u, 65000u));
  sub->add_option("--boot-timeout-ms", cmd->up.boot_timeout_ms,
                  "How long each chip may take to reach READY")
      ->check(CLI::Range(100u, 600000u));
  sub->add_option("--boot-parallel", cmd->up.boot_parallel,
                  "Chips booting at once, the others queued (default: 2 per host CPU)")
      ->check(CLI::Range(1u, 256u));
  sub->add_option("--group", cmd->up.group,
                  "Share the board with the users of this group (runtime directory 0750, socket 0660); "
                  "each is a tenant, you and root the admin");
  sub->add_option("--copy-engine", cmd->up.copy_engine,
                  "Who serves the host DMA queues: engines (the chips' DMA engines, default) or cpu "
                  "(the firmware's copier)")
      ->check(CLI::IsMember({"engines", "cpu"}));
  sub->add_flag("--json", cmd->json, "Print one JSON document instead of a table");
  sub->callback([cmd, action, port] {
    if (port->count() > 0) cmd->up.gdb = true;
    *action = [cmd] { run_up(*cmd); };
  });
}

}  // namespace tools
