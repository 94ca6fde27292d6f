// `vtrn bench ping` and `vtrn bench boot`: the numbers issue 2 asks for.
//
// bench ping measures the control-queue round trip through vtrnd in both
// wait modes and, in the same run, a native eventfd ping-pong between two
// host processes (native_pingpong.h), and reports chip/native ratios: on a
// shared 2-core machine absolute microseconds drift from run to run, ratios
// much less. It also reports each chip's boot time (QEMU launch to READY).
// bench boot brings a board up and down R times and summarises boot times.
// Goals are reported as met or not; nothing here fails on a number.
#include <iostream>
#include <map>
#include <memory>

#include "board_control.h"
#include "cli_error.h"
#include "commands.h"
#include "daemon.h"
#include "native_pingpong.h"
#include "render.h"
#include "stats.h"

namespace tools {
namespace {

constexpr double kGoalMedianRatio = 1.5;
constexpr uint64_t kGoalBootNs = 150000000;
constexpr uint32_t kWarmup = 20;

struct BenchPingOptions {
  uint32_t chip = 0;
  uint32_t count = 1000;
  bool json = false;
};

struct BenchBootOptions {
  UpOptions up;
  uint32_t runs = 5;
  bool json = false;
};

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

nlohmann::json ratios(const LatencyStats& chip, const LatencyStats& native) {
  return {{"median", ratio(double(chip.median_ns), double(native.median_ns))},
          {"p99", ratio(double(chip.p99_ns), double(native.p99_ns))},
          {"p999", ratio(double(chip.p999_ns), double(native.p999_ns))}};
}

LatencyStats chip_pings(DaemonConnection& conn, uint32_t chip, uint32_t count, Vtrn__Api__WaitMode wait,
                        uint32_t* lost) {
  PingParams params;
  params.chip = chip;
  params.count = count;
  params.wait = wait;
  drv::ResponsePtr resp = request_ping(conn, params);
  *lost = resp->ping->lost;
  return summarize(std::vector<uint64_t>(resp->ping->rtt_ns, resp->ping->rtt_ns + resp->ping->n_rtt_ns));
}

nlohmann::json boot_times(const Vtrn__Api__ListResponse& list) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < list.n_chips; ++i) {
    const Vtrn__Api__ChipSummary& c = *list.chips[i];
    out.push_back({{"chip", c.id}, {"boot_ns", c.boot_ns}, {"goal_met", c.boot_ns > 0 && c.boot_ns < kGoalBootNs}});
  }
  return out;
}

void run_bench_ping(const BenchPingOptions& opts) {
  DaemonConnection conn = DaemonConnection::open();
  drv::ResponsePtr list = request_list(conn);
  const Vtrn__Api__ChipSummary* target = nullptr;
  for (size_t i = 0; i < list->list->n_chips; ++i)
    if (list->list->chips[i]->id == opts.chip) target = list->list->chips[i];
  if (target == nullptr) throw_unknown_chip(opts.chip, list->list->n_chips);
  if (target->state != VTRN__API__CHIP_STATE__CHIP_STATE_READY)
    throw CliError(Exit::kChipNotReady, "chip " + std::to_string(opts.chip) + " is " + state_name(target->state));

  uint32_t lost_warm = 0, lost_block = 0, lost_spin = 0;
  chip_pings(conn, opts.chip, kWarmup, VTRN__API__WAIT_MODE__WAIT_BLOCK, &lost_warm);
  const LatencyStats block = chip_pings(conn, opts.chip, opts.count, VTRN__API__WAIT_MODE__WAIT_BLOCK, &lost_block);
  const LatencyStats spin = chip_pings(conn, opts.chip, opts.count, VTRN__API__WAIT_MODE__WAIT_SPIN_BLOCK, &lost_spin);
  const drv::Result<std::vector<uint64_t>> native_rtt = native_eventfd_pingpong(opts.count, kWarmup);
  if (!native_rtt.ok()) throw CliError(Exit::kFailed, "native eventfd reference: " + native_rtt.error().detail());
  const LatencyStats native = summarize(native_rtt.value());

  nlohmann::json chip_block = to_json(block);
  chip_block["lost"] = lost_block;
  nlohmann::json chip_spin = to_json(spin);
  chip_spin["lost"] = lost_spin;
  const nlohmann::json block_ratio = ratios(block, native);
  const double median_ratio = block_ratio["median"].get<double>();
  const nlohmann::json doc = {{"chip", opts.chip},
                              {"count", opts.count},
                              {"chip_block", chip_block},
                              {"chip_spin", chip_spin},
                              {"native_block", to_json(native)},
                              {"ratio_block_vs_native", block_ratio},
                              {"ratio_spin_vs_native", ratios(spin, native)},
                              {"goal_median_ratio", kGoalMedianRatio},
                              {"goal_met", median_ratio > 0 && median_ratio <= kGoalMedianRatio},
                              {"boot", boot_times(*list->list)},
                              {"goal_boot_ns", kGoalBootNs}};
  if (opts.json) {
    print_json(doc);
    return;
  }
  std::cout << "control-queue round trip, chip " << opts.chip << ", " << opts.count << " round trips each\n";
  Table t({"", "MEDIAN", "P99", "P99.9", "MEAN", "MAX", "LOST"});
  auto add = [&t](const std::string& name, const LatencyStats& s, const std::string& lost) {
    t.add({name, format_ns(s.median_ns), format_ns(s.p99_ns), format_ns(s.p999_ns), format_ns(s.mean_ns),
           format_ns(s.max_ns), lost});
  };
  add("chip, wait block", block, std::to_string(lost_block));
  add("chip, wait spin-then-block", spin, std::to_string(lost_spin));
  add("native eventfd, block", native, "-");
  auto add_ratio = [&t](const std::string& name, const nlohmann::json& r) {
    t.add({name, format_ratio(r["median"].get<double>()), format_ratio(r["p99"].get<double>()),
           format_ratio(r["p999"].get<double>()), "", "", ""});
  };
  add_ratio("ratio block / native", block_ratio);
  add_ratio("ratio spin / native", doc["ratio_spin_vs_native"]);
  std::cout << t.render();
  std::cout << "goal: chip median (block) within " << format_ratio(kGoalMedianRatio) << " of native blocking: "
            << (doc["goal_met"].get<bool>() ? "met" : "not met") << " (" << format_ratio(median_ratio) << ")\n";
  std::cout << "boot, QEMU launch to READY (goal under " << format_ns(kGoalBootNs) << "):";
  for (const auto& b : doc["boot"])
    std::cout << " chip " << b["chip"].get<uint32_t>() << " " << format_ns(b["boot_ns"].get<uint64_t>());
  std::cout << "\n";
}

void run_bench_boot(const BenchBootOptions& opts) {
  std::map<uint32_t, std::vector<uint64_t>> per_chip;
  std::vector<uint64_t> wall;
  for (uint32_t run = 0; run < opts.runs; ++run) {
    BoardUp up = start_board(opts.up);
    wall.push_back(up.wall_ns);
    for (size_t i = 0; i < up.list->list->n_chips; ++i)
      per_chip[up.list->list->chips[i]->id].push_back(up.list->list->chips[i]->boot_ns);
    stop_board();
  }
  nlohmann::json chips = nlohmann::json::array();
  for (const auto& [id, samples] : per_chip) {
    const LatencyStats s = summarize(samples);
    chips.push_back({{"chip", id},
                     {"boot_ns", samples},
                     {"median_ns", s.median_ns},
                     {"max_ns", s.max_ns},
                     {"goal_met", s.max_ns > 0 && s.max_ns < kGoalBootNs}});
  }
  const LatencyStats w = summarize(wall);
  const nlohmann::json doc = {{"runs", opts.runs},
                              {"chips", chips},
                              {"up_wall_ns", wall},
                              {"up_wall_median_ns", w.median_ns},
                              {"goal_boot_ns", kGoalBootNs}};
  if (opts.json) {
    print_json(doc);
    return;
  }
  std::cout << "boot time, QEMU launch to READY, " << opts.runs << " runs (goal under " << format_ns(kGoalBootNs)
            << ")\n";
  Table t({"CHIP", "MEDIAN", "MAX", "GOAL"});
  for (const auto& c : chips)
    t.add({std::to_string(c["chip"].get<uint32_t>()), format_ns(c["median_ns"].get<uint64_t>()),
           format_ns(c["max_ns"].get<uint64_t>()), c["goal_met"].get<bool>() ? "met" : "not met"});
  std::cout << t.render() << "`vtrn up` wall time, median " << format_ns(w.median_ns) << "\n";
}

}  // namespace

void add_bench_command(CLI::App& app, Action* action) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: control-queue round trip, boot time");
  bench->require_subcommand(1);

  auto ping = std::make_shared<BenchPingOptions>();
  CLI::App* p = bench->add_subcommand("ping", "Chip round trip (block, spin) against a native eventfd ping-pong");
  p->add_option("--chip", ping->chip, "Chip id")->check(chip_id_validator());
  p->add_option("-c,--count", ping->count, "Round trips per measurement")->check(CLI::Range(10u, 100000u));
  p->add_flag("--json", ping->json, "Print one JSON document instead of a table");
  p->callback([ping, action] { *action = [ping] { run_bench_ping(*ping); }; });

  auto boot = std::make_shared<BenchBootOptions>();
  CLI::App* b = bench->add_subcommand("boot", "Bring a board up and down R times; boot time per chip");
  b->add_option("-r,--runs", boot->runs, "Number of up/down cycles")->check(CLI::Range(1u, 100u));
  b->add_option("--chips", boot->up.chips, "Resize the board to N chips")->check(CLI::Range(1u, 256u));
  b->add_option("--board", boot->up.board, "Board description (.dtb or .dts)")->check(CLI::ExistingFile);
  b->add_option("--boot-timeout-ms", boot->up.boot_timeout_ms, "How long each chip may take to reach READY")
      ->check(CLI::Range(100u, 600000u));
  b->add_flag("--json", boot->json, "Print one JSON document instead of a table");
  b->callback([boot, action] { *action = [boot] { run_bench_boot(*boot); }; });
}

}  // namespace tools
