// `vtrn ping CHIP`: control-queue round trips through vtrnd (request slot,
// doorbell, firmware answer, doorbell back), timed inside vtrnd so socket
// hops to this process are not counted.
#include <iostream>
#include <map>
#include <memory>

#include "cli_error.h"
#include "commands.h"
#include "daemon.h"
#include "render.h"
#include "stats.h"

namespace tools {
namespace {

struct PingOptions {
  PingParams params;
  std::string wait = "block";
  bool json = false;
};

const std::map<std::string, Vtrn__Api__WaitMode> kWaitModes = {
    {"block", VTRN__API__WAIT_MODE__WAIT_BLOCK}, {"spin", VTRN__API__WAIT_MODE__WAIT_SPIN_BLOCK}};

void run_ping(const PingOptions& opts) {
  PingParams params = opts.params;
  params.wait = kWaitModes.at(opts.wait);
  DaemonConnection conn = DaemonConnection::open();
  drv::ResponsePtr resp = request_ping(conn, params);
  const Vtrn__Api__PingResponse& ping = *resp->ping;
  std::vector<uint64_t> rtt(ping.rtt_ns, ping.rtt_ns + ping.n_rtt_ns);
  const LatencyStats stats = summarize(rtt);
  const nlohmann::json doc = {{"chip", params.chip},
                              {"count", params.count},
                              {"payload_bytes", params.payload_bytes},
                              {"wait", opts.wait},
                              {"interval_us", params.interval_us},
                              {"lost", ping.lost},
                              {"rtt_ns", rtt},
                              {"stats", to_json(stats)}};
  if (opts.json) {
    print_json(doc);
  } else {
    std::cout << "chip " << params.chip << ": " << stats.count << " replies, " << ping.lost << " lost, "
              << params.payload_bytes << " B payload, wait " << opts.wait << "\n";
    if (stats.count > 0)
      std::cout << "rtt min " << format_ns(stats.min_ns) << ", median " << format_ns(stats.median_ns)
                << ", mean " << format_ns(stats.mean_ns) << ", p99 " << format_ns(stats.p99_ns) << ", max "
                << format_ns(stats.max_ns) << "\n";
  }
  if (stats.count == 0)
    throw CliError(Exit::kTimeout, "chip " + std::to_string(params.chip) + " answered none of " +
                                       std::to_string(params.count) + " pings");
}

}  // namespace

void add_ping_command(CLI::App& app, Action* action) {
  auto opts = std::make_shared<PingOptions>();
  CLI::App* sub = app.add_subcommand("ping", "Measure control-queue round trips to a chip");
  sub->add_option("chip", opts->params.chip, "Chip id")->required()->check(chip_id_validator());
  sub->add_option("-c,--count", opts->params.count, "Number of pings")->check(CLI::Range(1u, 100000u));
  sub->add_option("-s,--size", opts->params.payload_bytes, "Payload bytes per ping")
      ->check(CLI::Range(0u, 1024u));
  sub->add_option("--wait", opts->wait, "How vtrnd waits for the answer: block (epoll) or spin (spin, then block)")
      ->check(CLI::IsMember({"block", "spin"}));
  sub->add_option("-i,--interval-us", opts->params.interval_us, "Pause between pings")
      ->check(CLI::Range(0u, 10000000u));
  sub->add_flag("--json", opts->json, "Print one JSON document instead of text");
  sub->callback([opts, action] { *action = [opts] { run_ping(*opts); }; });
}

}  // namespace tools
