// The vtrn subcommands. Each add_*_command() registers one subcommand with
// its options (validated by CLI11) and, when the user picks it, stores the
// function that runs it in *action; main() runs that after parsing, so a
// parse error never runs half a command. Commands print their result on
// stdout (a table, or one JSON document with --json) and report failures by
// throwing CliError.
#pragma once

#include <stdint.h>

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "size_arg.h"

namespace tools {

using Action = std::function<void()>;

// A chip id as typed: decimal digits only, so "-1" and "abc" are usage
// errors with a readable message instead of a conversion error.
inline CLI::Validator chip_id_validator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (value.empty() || value.size() > 9 || value.find_first_not_of("0123456789") != std::string::npos)
          return "must be a non-negative integer, got '" + value + "'";
        return {};
      },
      "CHIP", "chip id");
}

// A size or count as typed ("4K", "64M"), parsed by parse_size into
// lo..hi and replaced by its decimal value for the option's integer, so a
// negative, overflowing or out-of-range value is a usage error naming the
// accepted range. Use it for every size and count option, in place of
// CLI::AsSizeValue (which wraps "-1") and CLI::Range (which names no unit).
inline CLI::Validator size_validator(uint64_t lo, uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        const drv::Result<uint64_t> v = parse_size(value, lo, hi);
        if (!v.ok()) return v.error().detail();
        value = std::to_string(v.value());
        return {};
      },
      "SIZE", "size");
}

// The refresh options `vtrn top` and `vtrn telemetry` share:
// -i/--interval SECONDS (--watch is the same option, the name `telemetry`
// had first) and --count N. `count_needs_interval`: --count without
// --interval is a usage error (telemetry, which otherwise prints once).
inline CLI::Option* add_interval_options(CLI::App* sub, double* interval_s, uint64_t* count,
                                         const std::string& what, bool count_needs_interval) {
  CLI::Option* interval = sub->add_option("-i,--interval,--watch", *interval_s, "Seconds: " + what)
                              ->check(CLI::Range(0.05, 3600.0));
  CLI::Option* n = sub->add_option("--count", *count, "Stop after N samples (default: never)")
                       ->check(CLI::Range(uint64_t(1), uint64_t(1) << 40));
  if (count_needs_interval) n->needs(interval);
  return interval;
}

void add_up_command(CLI::App& app, Action* action);
void add_down_command(CLI::App& app, Action* action);
void add_ls_command(CLI::App& app, Action* action);
void add_info_command(CLI::App& app, Action* action);
void add_logs_command(CLI::App& app, Action* action);
void add_ping_command(CLI::App& app, Action* action);
void add_telemetry_command(CLI::App& app, Action* action);
void add_bench_command(CLI::App& app, Action* action);
void add_dma_command(CLI::App& app, Action* action);
// Service commands; each lives in its own cmd_<name>.cpp.
void add_mem_command(CLI::App& app, Action* action);          // vtrn mem (HBM)
void add_inject_command(CLI::App& app, Action* action);       // vtrn inject KIND CHIP ...
// `vtrn inject ecc CHIP ADDR ...`, registered under the inject command by the
// HBM code (cmd_mem.cpp).
void add_inject_ecc_subcommand(CLI::App& inject, Action* action);
void add_reset_command(CLI::App& app, Action* action);        // vtrn reset CHIP
void add_qmp_command(CLI::App& app, Action* action);          // vtrn qmp CHIP COMMAND...
void add_jobs_commands(CLI::App& app, Action* action);        // submit, run, jobs, job
void add_link_commands(CLI::App& app, Action* action);        // link, topo
void add_power_commands(CLI::App& app, Action* action);       // power, top
// `vtrn run allreduce|allgather`, after add_jobs_commands.
void add_collective_commands(CLI::App& app, Action* action);

}  // namespace tools
