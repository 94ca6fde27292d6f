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

namespace tools {

enum class Exit : int {
  kOk = 0,
  kFailed = 1,        // the operation failed (daemon error, chip error, I/O)
  kUsage = 2,         // bad command line
  kNotRunning = 3,    // vtrnd is not running (or is shutting down)
  kUnknownChip = 4,   // the board has no such chip
  kChipNotReady = 5,  // chip not ready, or failed to boot
  kTimeout = 6,       // vtrnd or a chip did not answer in time
};

class CliError : public std::runtime_error {
 public:
  CliError(Exit code, const std::string& message, std::vector<std::string> details = {})
      : std::runtime_error(message), code_(code), details_(std::move(details)) {}
  [[nodiscard]] Exit code() const { return code_; }
  [[nodiscard]] const std::vector<std::string>& details() const { return details_; }

 private:
  Exit code_;
  std::vector<std::string> details_;
};

// Footer of `vtrn --help`; README.md repeats it.
inline constexpr const char* kExitCodeHelp =
    "Exit codes: 0 ok, 1 operation failed, 2 usage error, 3 vtrnd not running,\n"
    "            4 unknown chip, 5 chip not ready / failed to boot, 6 timeout.\n"
    "Errors are one line on stderr: \"vtrn: <what went wrong>\".";

}  // namespace tools
