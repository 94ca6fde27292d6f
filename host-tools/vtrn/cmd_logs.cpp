// `vtrn logs CHIP [-f] [--tail N]`: the chip's firmware log (its dmesg).
// The history comes in frames of up to 512 lines, gathered until the one
// marked end. With -f the command streams until vtrnd ends the stream (an
// end frame, e.g. on `vtrn down`: exit 0) or the user interrupts it; a vtrnd
// that goes away without one is exit 3. With --json each frame is then one
// JSON document on its own line, so a reader can parse line by line; the
// last has "end": true and "end_reason".
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
    nlohmann::json doc = frame_json(opts.chip, logs);
    if (logs.end) doc.update({{"end", true}, {"end_reason", logs.end_reason ? logs.end_reason : ""}});
    std::cout << doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
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
    // The history comes in frames of up to 512 lines, the last marked end.
    drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_LOGS);
    Vtrn__Api__LogsResponse all = *resp->logs;
    std::vector<char*> lines(all.lines, all.lines + all.n_lines);
    std::vector<drv::ResponsePtr> keep;
    while (!resp->logs->end) {
      keep.push_back(std::move(resp));
      resp = conn.next();
      if (!resp) throw CliError(Exit::kNotRunning, "vtrnd stopped (it closed the connection)");
      if (resp->body_case != VTRN__API__RESPONSE__BODY_LOGS)
        throw CliError(Exit::kFailed, "vtrnd answered with an unexpected message (body " +
                                          std::to_string(int(resp->body_case)) + ")");
      lines.insert(lines.end(), resp->logs->lines, resp->logs->lines + resp->logs->n_lines);
    }
    all.lines = lines.data();
    all.n_lines = lines.size();
    print_frame(opts, all);
    return;
  }
  conn.send(&req);
  for (;;) {
    drv::ResponsePtr resp = conn.next();
    // vtrnd ends the stream with an end frame (vtrn down); a connection that
    // closes without one is a vtrnd that died.
    if (!resp) throw CliError(Exit::kNotRunning, "vtrnd stopped (it closed the connection)");
    if (resp->body_case != VTRN__API__RESPONSE__BODY_LOGS) continue;
    if (resp->logs->n_lines > 0 || resp->logs->dropped > 0 || opts.json) print_frame(opts, *resp->logs);
    if (resp->logs->end) return;
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
