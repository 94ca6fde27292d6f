// The vtrn CLI's documented exit codes and the one error type its commands
// throw. Every failure ends as one line on stderr, "vtrn: <what went wrong>",
// and one of these codes, so scripts and tests can branch on the code and
// people can read the line. A failed boot adds the chip's last log lines
// (details) after that line, indented, because the error alone rarely says
// why firmware stopped.
//
// This is not a general error framework: subcommands throw CliError, main()
// prints it and returns its code; parse errors are mapped to kUsage there.
// The numbering is a contract (decisions.md, host-tools/README.md and the
// `vtrn --help` footer); never renumber.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tools {

enum class Exit : int {
  kOk = 0,
  kFailed = 1,        // the operation failed (daemon error, chip error, I/O)
  kUsage = 2,         // bad command line
  kNotRunning = 3,    // vtrnd is not running (or is shutting down)
  kUnknownChip = 4,   // the board has no such chip
  kChipNotReady = 5,  // chip not ready, or failed to boot
  kTimeout = 6,       // vtrnd or a chip did not answer in time
  kUntrusted = 7,     // the runtime directory or the server behind its socket is not trusted
  kInterrupted = 130, // Ctrl-C in `vtrn top` (128 + SIGINT, as a shell reports it)
};

// The code's name in the --json error document: "unknown_chip", ...
inline const char* exit_name(Exit code) {
  switch (code) {
    case Exit::kOk: return "ok";
    case Exit::kFailed: return "failed";
    case Exit::kUsage: return "usage";
    case Exit::kNotRunning: return "not_running";
    case Exit::kUnknownChip: return "unknown_chip";
    case Exit::kChipNotReady: return "chip_not_ready";
    case Exit::kTimeout: return "timeout";
    case Exit::kUntrusted: return "untrusted";
    case Exit::kInterrupted: return "interrupted";
  }
  return "failed";
}

class CliError : public std::runtime_error {
 public:
  CliError(Exit code, const std::string& message, std::vector<std::string> details = {})
      : std::runtime_error(message), code_(code), details_(std::move(details)) {}
  [[nodiscard]] Exit code() const { return code_; }
  [[nodiscard]] const std::vector<std::string>& details() const { return details_; }
  // What the command had found before it failed (a job that ended FAILED, a
  // result that did not verify): with --json, main() prints these fields
  // beside "error" in the one document, instead of a second document.
  [[nodiscard]] const nlohmann::json& context() const { return context_; }
  CliError&& with_context(nlohmann::json doc) && {
    context_ = std::move(doc);
    return std::move(*this);
  }

 private:
  Exit code_;
  std::vector<std::string> details_;
  nlohmann::json context_ = nlohmann::json::object();
};

// The document --json prints on stdout when a command fails:
// {"error": {"code": 4, "name": "unknown_chip", "message": "..."}} plus the
// fields of `context` (an object), on one line so JSON Lines streams
// (telemetry --interval --json, top --json, logs -f --json) stay one
// document per line.
inline std::string error_document(Exit code, const std::string& message,
                                  const nlohmann::json& context = nlohmann::json::object()) {
  nlohmann::json doc = context.is_object() ? context : nlohmann::json::object();
  doc["error"] = {{"code", int(code)}, {"name", exit_name(code)}, {"message", message}};
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Footer of `vtrn --help`; README.md repeats it.
inline constexpr const char* kExitCodeHelp =
    "Exit codes: 0 ok, 1 operation failed, 2 usage error, 3 vtrnd not running\n"
    "            (or stopped), 4 unknown chip, 5 chip not ready / failed to boot,\n"
    "            6 timeout, 7 untrusted runtime directory or server,\n"
    "            130 interrupted (Ctrl-C).\n"
    "Errors are one line on stderr: \"vtrn: <what went wrong>\"; with --json also\n"
    "{\"error\": {\"code\": N, \"name\": \"...\", \"message\": \"...\"}} on stdout.";

}  // namespace tools
