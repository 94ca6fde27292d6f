// `vtrn logs CHIP [-f] [--tail N]`: the chip's firmware log (its dmesg).
// With -f the command streams until vtrnd closes the stream (e.g. on
// `vtrn down`) or the user interrupts it; with --json each frame is then one
// JSON document on its own line, so a reader can parse line by line.
#include <iostream>
#include <memory>

#include "cli_error.h"
#include "commands.h"
#include "daemon.h"
#include "render.h"

namespace tools {
namespace {

struct LogsOptions {
  uint32_t chip = 0;
  bool follow = false;
  uint32_t tail = 0;
  bool json = false;
};

nlohmann::json frame_json(uint32_t chip, const Vtrn__Api__LogsResponse& logs) {
  nlohmann::json lines = nlohmann::json::array();
  for (size_t i = 0; i < logs.n_lines; ++i) lines.push_back(logs.lines[i]);
  return {{"chip", chip}, {"lines", lines}, {"dropped", logs.dropped}};
}

void print_frame(const LogsOptions& opts, const Vtrn__Api__LogsResponse& logs) {
  if (opts.json && opts.follow) {
    std::cout << frame_json(opts.chip, logs).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else if (opts.json) {
    print_json(frame_json(opts.chip, logs));
  } else {
    if (logs.dropped > 0) std::cout << "-- " << logs.dropped << " lines lost to ring overrun --\n";
    for (size_t i = 0; i < logs.n_lines; ++i) std::cout << format_log_line(logs.lines[i]) << "\n";
  }
  std::cout.flush();
}

void run_logs(const LogsOptions& opts) {
  DaemonConnection conn = DaemonConnection::open();
  Vtrn__Api__Request req;
  Vtrn__Api__LogsRequest body;
  vtrn__api__request__init(&req);
  vtrn__api__logs_request__init(&body);
  body.chip = opts.chip;
  body.follow = opts.follow;
  body.tail = opts.tail;
  req.body_case = VTRN__API__REQUEST__BODY_LOGS;
  req.logs = &body;
  if (!opts.follow) {
    drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_LOGS);
    print_frame(opts, *resp->logs);
    return;
  }
  conn.send(&req);
  for (;;) {
    drv::ResponsePtr resp = conn.next();
    if (!resp) return;  // vtrnd closed the stream
    if (resp->body_case == VTRN__API__RESPONSE__BODY_LOGS) print_frame(opts, *resp->logs);
  }
}

}  // namespace

void add_logs_command(CLI::App& app, Action* action) {
  auto opts = std::make_shared<LogsOptions>();
  CLI::App* sub = app.add_subcommand("logs", "Print a chip's firmware log");
  sub->add_option("chip", opts->chip, "Chip id")->required()->check(chip_id_validator());
  sub->add_flag("-f,--follow", opts->follow, "Keep printing new lines until interrupted");
  sub->add_option("--tail", opts->tail, "Start with the last N lines (0: all kept)")
      ->check(CLI::Range(0u, 1000000u));
  sub->add_flag("--json", opts->json, "JSON: one document, or one line per frame with -f");
  sub->callback([opts, action] { *action = [opts] { run_logs(*opts); }; });
}

}  // namespace tools
