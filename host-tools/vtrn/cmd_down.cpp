// `vtrn down`: stop vtrnd and every chip, and wait until nothing is left.
#include <iostream>
#include <memory>

#include "board_control.h"
#include "commands.h"
#include "render.h"

namespace tools {
namespace {

struct DownOptions {
  bool json = false;
  uint32_t timeout_ms = 20000;
};

void run_down(const DownOptions& opts) {
  const BoardDown down = stop_board(int(opts.timeout_ms));
  const nlohmann::json doc = {{"vtrnd_pid", down.vtrnd_pid}, {"chips_stopped", down.chips_stopped}};
  if (opts.json) {
    print_json(doc);
    return;
  }
  std::cout << "vtrnd stopped";
  if (down.vtrnd_pid > 0) std::cout << " (pid " << down.vtrnd_pid << ")";
  std::cout << ", " << down.chips_stopped << (down.chips_stopped == 1 ? " chip" : " chips")
            << " stopped\n";
}

}  // namespace

void add_down_command(CLI::App& app, Action* action) {
  auto opts = std::make_shared<DownOptions>();
  CLI::App* sub = app.add_subcommand("down", "Stop every chip and vtrnd; remove sockets and shared memory");
  sub->add_option("--timeout-ms", opts->timeout_ms, "How long to wait for vtrnd to exit")
      ->check(CLI::Range(100u, 600000u));
  sub->add_flag("--json", opts->json, "Print one JSON document instead of text");
  sub->callback([opts, action] { *action = [opts] { run_down(*opts); }; });
}

}  // namespace tools
