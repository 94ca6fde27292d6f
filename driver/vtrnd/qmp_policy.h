// What `vtrn qmp` may send to a chip's QEMU monitor: the request's command
// parsed into one QMP command (an HMP line becomes human-monitor-command),
// and the read-only allow list that holds by default.
//
// The monitor is the chip's hardware: `stop`, `system_reset`, `quit` or a
// memory write break the firmware under vtrnd, and `x`/`xp` or a memory dump
// read HBM that belongs to the chip's tenants. So by default only commands
// that show state without changing it or reading guest memory pass: the
// `info` subcommands below and the QMP `query-*` family (with a few `qom-*`
// readers). Anything else needs vtrnd started with --allow-qmp-write. The
// parsers take the request's text as hostile: bounded length, no control
// characters, a QMP object with exactly "execute" and optional "arguments".
//
// What it is not: the QMP session (driver/lib/qmp.cpp) or the service
// (qmp_service.cpp); pure functions, unit-tested in drv_qmp_policy.
#pragma once

#include <string>
#include <string_view>

#include "vtrn/drv/error.h"

namespace drv {

struct MonitorCommand {
  std::string execute;         // the QMP command name
  std::string arguments_json;  // its arguments object as JSON text, "" for none
  std::string hmp;             // human-monitor-command: the command line, normalised
};

inline constexpr size_t kMaxHmpLineBytes = 1024;
inline constexpr size_t kMaxQmpJsonBytes = 64 * 1024;

// An HMP command line ("info pci"): words separated by single spaces.
Result<MonitorCommand> hmp_command(std::string_view line);
// A QMP command object: {"execute": "query-status", "arguments": {...}}.
// human-monitor-command's command line is normalised as hmp_command's.
Result<MonitorCommand> qmp_command(std::string_view json);
// Ok when `c` is on the read-only allow list; else kInvalidArgument naming
// the command.
Error check_read_only(const MonitorCommand& c);

}  // namespace drv
