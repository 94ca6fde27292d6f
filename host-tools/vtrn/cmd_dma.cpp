// `vtrn dma copy|bench|stats|reset CHIP`: the chip's DMA through vtrnd.
//
// copy: a file (or generated data) goes to HBM with DmaWrite, optionally
// through an HBM -> HBM chain of N descriptors (DmaCopy), comes back with
// DmaRead and is compared byte for byte. bench: vtrnd drives the queues
// itself (DmaBench) so this process and the socket are not in the timing;
// a progress bar runs on stderr while a long run is in flight. The numbers
// are vtrnd's; the CLI only renders them.
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <random>
#include <thread>

#include "cli_error.h"
#include "commands.h"
#include "daemon.h"
#include "render.h"

namespace tools {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t since_ns(Clock::time_point t0) {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

std::string gbps(uint64_t bytes, uint64_t ns) {
  char b[32];
  snprintf(b, sizeof b, "%.3f GB/s", ns ? double(bytes) / double(ns) : 0.0);
  return b;
}

// HBM for a DMA command, owned by this connection: the chip lets DMA touch
// live allocations only, and vtrnd frees it when the command exits.
uint64_t alloc_dma_buffer(DaemonConnection& conn, uint32_t chip, uint64_t bytes) {
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__HbmAllocRequest ar = VTRN__API__HBM_ALLOC_REQUEST__INIT;
  ar.chip = chip;
  ar.bytes = bytes;
  ar.category = VTRN__API__HBM_CATEGORY__HBM_CATEGORY_DMA_BUFFERS;
  req.body_case = VTRN__API__REQUEST__BODY_HBM_ALLOC;
  req.hbm_alloc = &ar;
  return conn.call(&req, VTRN__API__RESPONSE__BODY_HBM_ALLOC)->hbm_alloc->addr;
}

drv::ResponsePtr dma_stats(DaemonConnection& conn, uint32_t chip) {
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__DmaStatsRequest s = VTRN__API__DMA_STATS_REQUEST__INIT;
  s.chip = chip;
  req.body_case = VTRN__API__REQUEST__BODY_DMA_STATS;
  req.dma_stats = &s;
  return conn.call(&req, VTRN__API__RESPONSE__BODY_DMA_STATS);
}

// Copy.

struct CopyOptions {
  uint32_t chip = 0;
  std::string file;
  uint64_t size = 1u << 20;
  std::string hbm_addr;  // empty: a buffer allocated for this command
  uint32_t chain = 1;
  bool json = false;
};

void run_copy(const CopyOptions& o) {
  std::vector<uint8_t> data;
  if (!o.file.empty()) {
    std::ifstream in(o.file, std::ios::binary | std::ios::ate);
    if (!in) throw CliError(Exit::kFailed, "cannot read " + o.file);
    if (uint64_t(in.tellg()) > kMaxCliBuffer)
      throw CliError(Exit::kUsage, "--file: " + o.file + " is larger than " + exact_size(kMaxCliBuffer));
    in.seekg(0);
    data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (data.empty()) throw CliError(Exit::kFailed, o.file + " is empty");
  } else {
    data.resize(o.size);
    std::mt19937_64 rng(std::random_device{}());
    for (size_t i = 0; i < data.size(); i += 8) {
      const uint64_t v = rng();
      memcpy(data.data() + i, &v, std::min<size_t>(8, data.size() - i));
    }
  }
  const uint64_t n = data.size();
  DaemonConnection conn = DaemonConnection::open();
  drv::ResponsePtr st = dma_stats(conn, o.chip);
  const uint64_t base = st->dma_stats->hbm_base, size = st->dma_stats->hbm_size;
  uint64_t addr = base;
  if (!o.hbm_addr.empty()) {
    try {
      size_t used = 0;
      addr = std::stoull(o.hbm_addr, &used, 0);
      if (used != o.hbm_addr.size()) throw std::invalid_argument("trailing characters");
    } catch (const std::exception&) {
      throw CliError(Exit::kUsage, "--hbm-addr " + o.hbm_addr + ": expected a number (0x... for hex)");
    }
  }
  const bool chained = o.chain > 1;
  // With a chain the data lands at addr, is copied to dst by one chain of
  // `chain` descriptors, and is read back from dst.
  const uint64_t footprint = chained ? 2 * ((n + 4095) & ~uint64_t(4095)) : n;
  if (addr < base || addr - base > size || footprint > size - (addr - base))
    throw CliError(Exit::kFailed, std::to_string(n) + " bytes" + (chained ? " (twice, for the chain)" : "") +
                                      " at " + hex(addr) + " do not fit in HBM [" + hex(base) + ", " +
                                      hex(base + size) + ")");
  // Without --hbm-addr the data goes to memory this command allocates (the
  // chip lets DMA touch only live allocations); it is freed as the command
  // exits. An explicit --hbm-addr must lie inside an allocation someone holds.
  if (o.hbm_addr.empty()) {
    addr = alloc_dma_buffer(conn, o.chip, footprint);
  }
  const uint64_t dst = chained ? addr + footprint / 2 : addr;
  if (chained && n > uint64_t(o.chain) * st->dma_stats->max_desc_bytes)
    throw CliError(Exit::kFailed, "a chain of " + std::to_string(o.chain) + " descriptors moves at most " +
                                      format_bytes(uint64_t(o.chain) * st->dma_stats->max_desc_bytes));
  if (chained && n > UINT32_MAX) throw CliError(Exit::kFailed, "a chained copy moves at most 4 GiB");

  const auto t0 = Clock::now();
  (void)dma_write_hbm(conn, o.chip, addr, data.data(), n);
  const uint64_t write_ns = since_ns(t0);
  uint64_t copy_ns = 0;
  if (chained) {
    const auto t1 = Clock::now();
    Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
    Vtrn__Api__DmaCopyRequest c = VTRN__API__DMA_COPY_REQUEST__INIT;
    c.chip = o.chip;
    c.src_addr = addr;
    c.dst_addr = dst;
    c.length = uint32_t(n);
    c.segments = o.chain;  // queue unset: vtrnd picks
    req.body_case = VTRN__API__REQUEST__BODY_DMA_COPY;
    req.dma_copy = &c;
    (void)conn.call(&req, VTRN__API__RESPONSE__BODY_DMA_COPY);
    copy_ns = since_ns(t1);
  }
  const auto t2 = Clock::now();
  const std::vector<uint8_t> back = dma_read_hbm(conn, o.chip, dst, n);
  const uint64_t read_ns = since_ns(t2);
  const uint64_t total_ns = since_ns(t0);
  uint64_t mismatch = n;
  for (uint64_t i = 0; i < n; ++i) {
    if (back[i] != data[i]) {
      mismatch = i;
      break;
    }
  }
  const bool ok = mismatch == n;
  nlohmann::json doc = {{"chip", o.chip},
                        {"bytes", n},
                        {"source", o.file.empty() ? "random" : o.file},
                        {"hbm_addr", addr},
                        {"chain", o.chain},
                        {"write_ns", write_ns},
                        {"copy_ns", copy_ns},
                        {"read_ns", read_ns},
                        {"total_ns", total_ns},
                        {"write_gbytes_per_s", write_ns ? double(n) / double(write_ns) : 0.0},
                        {"read_gbytes_per_s", read_ns ? double(n) / double(read_ns) : 0.0},
                        {"verified", ok}};
  if (chained) doc["dst_addr"] = dst;
  if (!ok) doc["first_mismatch"] = mismatch;
  if (o.json) {
    print_json(doc);
  } else {
    std::cout << "chip " << o.chip << ": " << n << " bytes (" << format_bytes(n) << ") to HBM " << hex(addr)
              << (chained ? ", chained copy (" + std::to_string(o.chain) + " descriptors) to " + hex(dst) : "")
              << " and back: " << (ok ? "verified" : "MISMATCH") << "\n";
    std::cout << "write " << format_ns(write_ns) << " (" << gbps(n, write_ns) << ")";
    if (chained) std::cout << ", copy " << format_ns(copy_ns) << " (" << gbps(n, copy_ns) << ")";
    std::cout << ", read " << format_ns(read_ns) << " (" << gbps(n, read_ns) << "), total "
              << format_ns(total_ns) << "\n";
  }
  if (!ok)
    throw CliError(Exit::kFailed, "data read back differs from what was written, first at byte " +
                                      std::to_string(mismatch));
}

// Bench.

struct BenchOptions {
  uint32_t chip = 0;
  std::string dir = "h2d";
  uint64_t size = 1u << 20;
  uint32_t depth = 32;
  uint32_t queues = 1;
  uint32_t batch = 0;
  double seconds = 3;
  uint64_t total = 0;
  uint64_t hbm_bytes = 64ull << 20;
  bool json = false;
};

const std::map<std::string, Vtrn__Api__DmaDirection> kDirs = {{"h2d", VTRN__API__DMA_DIRECTION__DMA_DIR_H2D},
                                                              {"d2h", VTRN__API__DMA_DIRECTION__DMA_DIR_D2H},
                                                              {"d2d", VTRN__API__DMA_DIRECTION__DMA_DIR_D2D}};

// A bar on stderr, redrawn from elapsed time while vtrnd runs the bench
// (the request is one call; vtrnd answers at the end).
class ProgressBar {
 public:
  ProgressBar(double seconds, bool enabled) : seconds_(seconds) {
    if (!enabled) return;
    thread_ = std::thread([this] {
      const auto t0 = Clock::now();
      while (!stop_) {
        const double el = double(since_ns(t0)) / 1e9;
        const double frac = std::min(1.0, el / seconds_);
        const int width = 30, filled = int(frac * width);
        fprintf(stderr, "\r[%s%s] %5.1f / %.1f s", std::string(size_t(filled), '#').c_str(),
                std::string(size_t(width - filled), ' ').c_str(), el, seconds_);
        fflush(stderr);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      fprintf(stderr, "\r%60s\r", "");
      fflush(stderr);
    });
  }
  ~ProgressBar() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  double seconds_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

void run_bench(const BenchOptions& o) {
  DaemonConnection conn = DaemonConnection::open();
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__DmaBenchRequest b = VTRN__API__DMA_BENCH_REQUEST__INIT;
  b.chip = o.chip;
  b.direction = kDirs.at(o.dir);
  b.transfer_bytes = uint32_t(o.size);
  b.depth = o.depth;
  b.queues = o.queues;
  b.batch = o.batch;
  b.total_bytes = o.total;
  b.duration_ms = o.total ? 0 : uint32_t(o.seconds * 1000);
  // The chip lets DMA touch live allocations only: the bench cycles through
  // one this connection holds (freed when the command exits).
  b.hbm_addr = alloc_dma_buffer(conn, o.chip, o.hbm_bytes);
  b.hbm_bytes = o.hbm_bytes;
  req.body_case = VTRN__API__REQUEST__BODY_DMA_BENCH;
  req.dma_bench = &b;
  // The device's busy time (QueueStats::busy_ns, summed over queues) before
  // and after says how much of the run the chip was copying and how much it
  // waited for the host: the first question when a figure is low.
  auto busy_now = [&conn, &o] {
    drv::ResponsePtr s = dma_stats(conn, o.chip);
    uint64_t busy = 0;
    for (size_t i = 0; i < s->dma_stats->n_queues; ++i) busy += s->dma_stats->queues[i]->busy_ns;
    return busy;
  };
  const uint64_t busy0 = busy_now();
  drv::ResponsePtr resp;
  {
    ProgressBar bar(o.seconds, !o.json && o.total == 0 && o.seconds >= 2 && isatty(STDERR_FILENO));
    // A total-bytes run has no known length: give it vtrnd's ten-minute cap.
    const int timeout = o.total ? 630000 : int(o.seconds * 1000) + 30000;
    resp = conn.call(&req, VTRN__API__RESPONSE__BODY_DMA_BENCH, timeout);
  }
  const Vtrn__Api__DmaBenchResponse& r = *resp->dma_bench;
  const uint64_t busy_ns = busy_now() - busy0;
  // elapsed_ns spans first submission to last completion; the stats calls
  // fall outside it, so the fraction is an upper bound on busy.
  const double busy_fraction = r.elapsed_ns ? std::min(1.0, double(busy_ns) / double(r.elapsed_ns)) : 0.0;
  const double ns_per_desc = r.descriptors ? double(busy_ns) / double(r.descriptors) : 0.0;
  const nlohmann::json doc = {{"chip", o.chip},
                              {"direction", o.dir},
                              {"transfer_bytes", b.transfer_bytes},
                              {"depth", r.depth},
                              {"queues", r.queues},
                              {"batch", r.batch},
                              {"bytes", r.bytes},
                              {"descriptors", r.descriptors},
                              {"elapsed_ns", r.elapsed_ns},
                              {"gbytes_per_s", r.gbytes_per_s},
                              {"descriptors_per_s", r.descriptors_per_s},
                              {"latency_ns",
                               {{"p50", r.latency_p50_ns},
                                {"p90", r.latency_p90_ns},
                                {"p99", r.latency_p99_ns},
                                {"max", r.latency_max_ns}}},
                              {"errors", r.errors},
                              {"chip_busy_ns", busy_ns},
                              {"chip_busy_fraction", busy_fraction},
                              {"chip_busy_ns_per_descriptor", ns_per_desc}};
  if (o.json) {
    print_json(doc);
    return;
  }
  std::cout << "chip " << o.chip << " DMA " << o.dir << ": " << format_bytes(b.transfer_bytes) << " x "
            << r.descriptors << " descriptors, " << r.queues << " queue(s), depth " << r.depth << ", batch "
            << r.batch << "\n";
  char line[160];
  snprintf(line, sizeof line, "%.3f GB/s, %.0f descriptors/s over %s", r.gbytes_per_s, r.descriptors_per_s,
           format_ns(r.elapsed_ns).c_str());
  std::cout << line << "\n";
  std::cout << "latency p50 " << format_ns(r.latency_p50_ns) << ", p90 " << format_ns(r.latency_p90_ns) << ", p99 "
            << format_ns(r.latency_p99_ns) << ", max " << format_ns(r.latency_max_ns) << "\n";
  snprintf(line, sizeof line, "chip busy %.0f%% of the run, %.0f ns per descriptor while busy", busy_fraction * 100,
           ns_per_desc);
  std::cout << line << "\n";
}

// Stats / reset.

struct DmaChipOptions {
  uint32_t chip = 0;
  int32_t queue = -1;
  bool json = false;
};

void run_dma_stats(const DmaChipOptions& o) {
  DaemonConnection conn = DaemonConnection::open();
  drv::ResponsePtr resp = dma_stats(conn, o.chip);
  const Vtrn__Api__DmaStatsResponse& s = *resp->dma_stats;
  nlohmann::json queues = nlohmann::json::array();
  Table t({"queue", "descriptors", "chains", "bytes", "errors", "busy", "irqs", "in flight", "state"});
  for (size_t i = 0; i < s.n_queues; ++i) {
    const Vtrn__Api__DmaQueueStats& q = *s.queues[i];
    std::string state = q.resetting ? "resetting"
                        : q.host_fault[0] ? std::string("broken: ") + q.host_fault
                                          : "ok";
    queues.push_back({{"queue", q.queue},
                      {"descriptors", q.descriptors},
                      {"chains", q.chains},
                      {"bytes", q.bytes},
                      {"errors", q.errors},
                      {"errors_by_status", std::vector<uint64_t>(q.errors_by_status, q.errors_by_status + q.n_errors_by_status)},
                      {"busy_ns", q.busy_ns},
                      {"irqs", q.irqs},
                      {"device_error", q.device_error},
                      {"host_fault", q.host_fault},
                      {"resetting", bool(q.resetting)},
                      {"in_flight", q.in_flight},
                      {"free_slots", q.free_slots},
                      {"resets", q.resets}});
    t.add({std::to_string(q.queue), std::to_string(q.descriptors), std::to_string(q.chains), format_bytes(q.bytes),
           std::to_string(q.errors), format_ns(q.busy_ns), std::to_string(q.irqs), std::to_string(q.in_flight), state});
  }
  const nlohmann::json doc = {{"chip", o.chip},
                              {"depth", s.depth},
                              {"hbm_base", s.hbm_base},
                              {"hbm_size", s.hbm_size},
                              {"window_bytes", s.window_bytes},
                              {"window_free_bytes", s.window_free_bytes},
                              {"max_desc_bytes", s.max_desc_bytes},
                              {"max_chain_descs", s.max_chain_descs},
                              {"queues", queues}};
  if (o.json) {
    print_json(doc);
    return;
  }
  std::cout << "chip " << o.chip << ": " << s.n_queues << " DMA queues of depth " << s.depth << ", HBM "
            << hex(s.hbm_base) << " + " << format_bytes(s.hbm_size) << ", host window "
            << format_bytes(s.window_bytes) << " (" << format_bytes(s.window_free_bytes) << " free)\n"
            << t.render();
}

void run_dma_reset(const DmaChipOptions& o) {
  DaemonConnection conn = DaemonConnection::open();
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__DmaResetRequest r = VTRN__API__DMA_RESET_REQUEST__INIT;
  r.chip = o.chip;
  r.queue = o.queue;
  req.body_case = VTRN__API__REQUEST__BODY_DMA_RESET;
  req.dma_reset = &r;
  drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_DMA_RESET);
  if (o.json) {
    print_json({{"chip", o.chip}, {"queue", o.queue}, {"queues_reset", resp->dma_reset->queues_reset}});
  } else {
    std::cout << "chip " << o.chip << ": reset " << resp->dma_reset->queues_reset << " DMA queue(s)\n";
  }
}

}  // namespace

void add_dma_command(CLI::App& app, Action* action) {
  CLI::App* dma = app.add_subcommand("dma", "Move data through a chip's DMA queues");
  dma->require_subcommand(1);

  auto copy = std::make_shared<CopyOptions>();
  CLI::App* c = dma->add_subcommand("copy", "Copy a file or generated data to HBM and back, verified");
  c->add_option("chip", copy->chip, "Chip id")->required()->check(chip_id_validator());
  auto* file = c->add_option("--file", copy->file, "Data to send (default: random bytes)")->check(CLI::ExistingFile);
  c->add_option("--size", copy->size, "Bytes of random data (K, M, G suffixes)")
      ->transform(size_validator(1, kMaxCliBuffer))
      ->excludes(file);
  c->add_option("--hbm-addr", copy->hbm_addr, "HBM address inside a live allocation (default: a buffer allocated for this copy)");
  c->add_option("--chain", copy->chain, "Also copy HBM -> HBM as one chain of N descriptors")
      ->check(CLI::Range(1u, 64u));
  c->add_flag("--json", copy->json, "Print one JSON document instead of text");
  c->callback([copy, action] { *action = [copy] { run_copy(*copy); }; });

  auto bench = std::make_shared<BenchOptions>();
  CLI::App* b = dma->add_subcommand("bench", "Measure DMA throughput, descriptor rate and latency");
  b->add_option("chip", bench->chip, "Chip id")->required()->check(chip_id_validator());
  b->add_option("--dir", bench->dir, "h2d (host to HBM), d2h or d2d")->check(CLI::IsMember({"h2d", "d2h", "d2d"}));
  b->add_option("--size", bench->size, "Bytes per descriptor (K, M suffixes)")->transform(size_validator(1, 1ull << 30));
  b->add_option("--depth", bench->depth, "Descriptors in flight per queue")->check(CLI::Range(1u, 4096u));
  b->add_option("--queues", bench->queues, "Queues used")->check(CLI::Range(1u, 16u));
  b->add_option("--batch", bench->batch, "Descriptors per submission (0: min(32, depth))")->check(CLI::Range(0u, 4096u));
  auto* secs = b->add_option("--seconds", bench->seconds, "Run time")->check(CLI::Range(0.01, 600.0));
  b->add_option("--total", bench->total, "Stop after this many bytes instead (K, M, G suffixes)")
      ->transform(size_validator(1, kMaxBenchTotal))
      ->excludes(secs);
  b->add_option("--hbm-bytes", bench->hbm_bytes, "HBM the bench allocates and cycles through (K, M suffixes)")
      ->transform(size_validator(1, kMaxHbmBytes));
  b->add_flag("--json", bench->json, "Print one JSON document instead of text");
  b->callback([bench, action] { *action = [bench] { run_bench(*bench); }; });

  auto st = std::make_shared<DmaChipOptions>();
  CLI::App* s = dma->add_subcommand("stats", "Per-queue DMA statistics and errors");
  s->add_option("chip", st->chip, "Chip id")->required()->check(chip_id_validator());
  s->add_flag("--json", st->json, "Print one JSON document instead of text");
  s->callback([st, action] { *action = [st] { run_dma_stats(*st); }; });

  auto rs = std::make_shared<DmaChipOptions>();
  CLI::App* r = dma->add_subcommand("reset", "Reset DMA queues (chains in flight fail)");
  r->add_option("chip", rs->chip, "Chip id")->required()->check(chip_id_validator());
  r->add_option("--queue", rs->queue, "Queue to reset (default: all)")->check(CLI::Range(-1, 15));
  r->add_flag("--json", rs->json, "Print one JSON document instead of text");
  r->callback([rs, action] { *action = [rs] { run_dma_reset(*rs); }; });
}

}  // namespace tools
