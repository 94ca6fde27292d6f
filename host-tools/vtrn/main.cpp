// vtrn: the command-line client of vtrnd. Parses the command line (CLI11),
// runs the one chosen subcommand, and turns every failure into one stderr
// line "vtrn: <problem>" plus a documented exit code (cli_error.h); with
// --json, also the error document on stdout.
#include <string.h>

#include <iostream>

#include <CLI/CLI.hpp>

#include "cli_error.h"
#include "commands.h"

namespace {

// --json anywhere before a "--": looked up in argv rather than in the parsed
// options so that a command line CLI11 rejects still gets its error as JSON.
bool json_requested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--") == 0) return false;
    if (strcmp(argv[i], "--json") == 0) return true;
  }
  return false;
}

int fail(bool json, tools::Exit code, const std::string& message,
         const std::vector<std::string>& details = {},
         const nlohmann::json& context = nlohmann::json::object()) {
  std::cout.flush();
  if (json) std::cout << tools::error_document(code, message, context) << std::endl;
  std::cerr << "vtrn: " << message << "\n";
  for (const auto& line : details) std::cerr << "  " << line << "\n";
  return int(code);
}

}  // namespace

int main(int argc, char** argv) {
  const bool json = json_requested(argc, argv);
  CLI::App app{"vtrn: bring a virtual vtrn board up and down and talk to its chips through vtrnd",
               "vtrn"};
  app.footer(tools::kExitCodeHelp);
  app.require_subcommand(1);
  // Show every option's default in --help (subcommands inherit this).
  app.option_defaults()->always_capture_default();
  app.set_help_all_flag("--help-all", "Print help for every subcommand");

  tools::Action action;
  tools::add_up_command(app, &action);
  tools::add_down_command(app, &action);
  tools::add_ls_command(app, &action);
  tools::add_info_command(app, &action);
  tools::add_logs_command(app, &action);
  tools::add_ping_command(app, &action);
  tools::add_telemetry_command(app, &action);
  tools::add_bench_command(app, &action);
  tools::add_dma_command(app, &action);
  tools::add_mem_command(app, &action);  // HBM
  tools::add_reset_command(app, &action);   // reliability
  tools::add_inject_command(app, &action);  // reliability (calls add_inject_ecc_subcommand)
  tools::add_qmp_command(app, &action);     // the chip's QEMU monitor
  tools::add_jobs_commands(app, &action);  // jobs
  tools::add_power_commands(app, &action);  // power
  tools::add_link_commands(app, &action);  // links
  tools::add_collective_commands(app, &action);  // under `run`

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(json, tools::Exit::kUsage, std::string(e.what()) + " (see vtrn --help)");
  }

  try {
    if (action) action();
  } catch (const tools::CliError& e) {
    return fail(json, e.code(), e.what(), e.details(), e.context());
  } catch (const std::exception& e) {
    return fail(json, tools::Exit::kFailed, e.what());
  }
  return int(tools::Exit::kOk);
}
