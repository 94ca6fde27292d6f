// `vtrn reset CHIP`: reset one chip through vtrnd's recovery path (the same
// one the watchdog takes: QMP system_reset, re-attach to the new boot
// generation) and wait until it is READY again. Everything in flight on that
// chip fails with "chip N was reset: manual reset (vtrn reset)".
#include <iostream>
#include <memory>

#include "cli_error.h"
#include "commands.h"
#include "daemon.h"
#include "reliability_json.h"
#include "render.h"

namespace tools {
namespace {

struct ResetOptions {
  uint32_t chip = 0;
  bool json = false;
};

// A reboot is bounded by vtrnd's boot timeout (10 s by default) plus its
// back-off; this only catches a vtrnd that stopped answering.
constexpr int kResetTimeoutMs = 120000;

void run_reset(const ResetOptions& o) {
  DaemonConnection conn = DaemonConnection::open();
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__ChipResetRequest r = VTRN__API__CHIP_RESET_REQUEST__INIT;
  r.chip = o.chip;
  req.body_case = VTRN__API__REQUEST__BODY_CHIP_RESET;
  req.chip_reset = &r;
  drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_CHIP_RESET, kResetTimeoutMs);
  const Vtrn__Api__ChipResetResponse& rr = *resp->chip_reset;
  nlohmann::json doc = {{"chip", o.chip},
                        {"elapsed_ns", rr.elapsed_ns},
                        {"boot_generation", rr.boot_generation},
                        {"reset_history", reset_history_json(rr.history)}};
  if (o.json) {
    print_json(doc);
    return;
  }
  std::cout << "chip " << o.chip << ": reset, READY again after " << format_ns(rr.elapsed_ns)
            << " (boot generation " << rr.boot_generation << ", "
            << doc["reset_history"]["count"].get<uint32_t>() << " reset(s) since vtrnd started)\n";
}

}  // namespace

void add_reset_command(CLI::App& app, Action* action) {
  auto o = std::make_shared<ResetOptions>();
  CLI::App* c = app.add_subcommand("reset", "Reset a chip (QMP system_reset) and wait until it is READY again");
  c->add_option("chip", o->chip, "Chip id")->required()->check(chip_id_validator());
  c->add_flag("--json", o->json, "Print one JSON document instead of text");
  c->callback([o, action] { *action = [o] { run_reset(*o); }; });
}

}  // namespace tools
