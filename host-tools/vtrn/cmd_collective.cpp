// `vtrn run allreduce|allgather --bytes N`: one ring collective over every
// chip of the board (proto/vtrn_api_jobs.proto CollectiveRequest), on seeded
// random data, verified on the host.
//
// The CLI generates each chip's input, sends them all, and checks what vtrnd
// read back from every chip against its own reference. The reference adds
// in the order the firmware documents (firmware/collectives/include/fw/
// collective.h): block c of the all-reduce is summed along the ring starting
// at the chip of rank c, one fp32 rounding per addition, so the comparison is
// bit for bit, not within a tolerance. All-gather output block k is the
// input of the chip at rank k. Outputs come back as a CRC-32 each (and their
// bytes when they fit one frame, which lets a mismatch name its element).
//
// Figures follow NCCL's definitions: algorithm bandwidth = S / t with t the
// slowest chip's run time and S the per-chip buffer (all-reduce) or the
// gathered output (all-gather); bus bandwidth = algBW * 2(n-1)/n for
// all-reduce and algBW * (n-1)/n for all-gather.
#include <stdio.h>
#include <string.h>

#include <iostream>
#include <memory>
#include <random>
#include <vector>

#include "cli_error.h"
#include "commands.h"
#include "daemon.h"
#include "render.h"
#include "vtrn/crc32.h"
#include "vtrn/proto_names.h"

namespace tools {
namespace {

using nlohmann::json;

struct CollectiveOptions {
  std::string op;  // "allreduce" or "allgather"
  uint64_t bytes = 1 << 20;
  uint64_t seed = 1;
  uint32_t timeout_ms = 60000;
  uint32_t step_timeout_ms = 0;
  bool json = false;
};

// Seeded inputs: per chip a different stream; values mixed in magnitude so
// that an order of additions other than the documented one shows up.
std::vector<std::vector<float>> collective_inputs(uint64_t seed, size_t chips, uint64_t floats) {
  std::vector<std::vector<float>> in(chips);
  for (size_t c = 0; c < chips; ++c) {
    std::mt19937_64 rng(seed * 1000003u + c);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const float scale = (c % 2 == 0) ? 1.0e4f : 1.0e-3f;
    in[c].resize(floats);
    for (auto& v : in[c]) v = u(rng) * scale;
  }
  return in;
}

// Reference outputs, the same for every chip. `ring`: chip index per rank.
std::vector<float> collective_reference(bool allreduce, const std::vector<std::vector<float>>& in,
                                        const std::vector<size_t>& ring) {
  const size_t n = ring.size();
  const uint64_t nf = in[0].size();
  std::vector<float> out;
  if (!allreduce) {
    for (size_t k = 0; k < n; ++k) out.insert(out.end(), in[ring[k]].begin(), in[ring[k]].end());
    return out;
  }
  out.resize(nf);
  for (size_t c = 0; c < n; ++c) {
    const uint64_t b = nf * c / n, e = nf * (c + 1) / n;
    for (uint64_t i = b; i < e; ++i) {
      float s = in[ring[c]][i];
      for (size_t k = 1; k < n; ++k) s = s + in[ring[(c + k) % n]][i];
      out[i] = s;
    }
  }
  return out;
}

size_t board_chip_count(DaemonConnection& conn) {
  Vtrn__Api__ListRequest lr = VTRN__API__LIST_REQUEST__INIT;
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  req.body_case = VTRN__API__REQUEST__BODY_LIST;
  req.list = &lr;
  drv::ResponsePtr r = conn.call(&req, VTRN__API__RESPONSE__BODY_LIST);
  return r->list->n_chips;
}

// "DONE", "FAILED", ... (vtrn/proto_names.h); "state N" for a value the enum lacks.
std::string collective_state_text(Vtrn__Types__JobState s) {
  const char* name = vtrn::proto::enum_suffix(vtrn__types__job_state__descriptor, s, "JOB_STATE_", nullptr);
  return name != nullptr ? name : "state " + std::to_string(int(s));
}

std::string gbps_text(double bytes_per_s) {
  char b[32];
  if (bytes_per_s >= 1e9) snprintf(b, sizeof b, "%.2f GB/s", bytes_per_s / 1e9);
  else snprintf(b, sizeof b, "%.2f MB/s", bytes_per_s / 1e6);
  return b;
}

void run_collective(const CollectiveOptions& o) {
  const bool allreduce = o.op == "allreduce";
  if (o.bytes == 0 || o.bytes % 4 != 0) throw CliError(Exit::kUsage, "--bytes must be a positive multiple of 4");
  DaemonConnection conn = DaemonConnection::open();
  const size_t chips = board_chip_count(conn);
  if (chips * o.bytes > (3u << 20) + (512u << 10)) {
    throw CliError(Exit::kUsage, "--bytes " + std::to_string(o.bytes) + " x " + std::to_string(chips) +
                                     " chips does not fit one request (3.5 MiB of inputs)");
  }
  const uint64_t floats = o.bytes / 4;
  const std::vector<std::vector<float>> in = collective_inputs(o.seed, chips, floats);

  Vtrn__Api__CollectiveRequest cr = VTRN__API__COLLECTIVE_REQUEST__INIT;
  cr.op = allreduce ? VTRN__TYPES__COLLECTIVE_OP__COLLECTIVE_OP_ALL_REDUCE
                    : VTRN__TYPES__COLLECTIVE_OP__COLLECTIVE_OP_ALL_GATHER;
  cr.bytes = o.bytes;
  std::vector<ProtobufCBinaryData> inputs(chips);
  for (size_t c = 0; c < chips; ++c) {
    inputs[c].data = reinterpret_cast<uint8_t*>(const_cast<float*>(in[c].data()));
    inputs[c].len = o.bytes;
  }
  cr.n_inputs = chips;
  cr.inputs = inputs.data();
  cr.timeout_ms = o.timeout_ms;
  cr.step_timeout_ms = o.step_timeout_ms;
  cr.return_outputs = true;
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  req.body_case = VTRN__API__REQUEST__BODY_COLLECTIVE;
  req.collective = &cr;
  drv::ResponsePtr resp =
      conn.call(&req, VTRN__API__RESPONSE__BODY_COLLECTIVE, int(o.timeout_ms) + 30000);
  const Vtrn__Api__CollectiveResponse& r = *resp->collective;
  if (r.n_ring != chips || r.n_chips != chips) {
    throw CliError(Exit::kFailed, "vtrnd answered for " + std::to_string(r.n_chips) + " chips, the board has " +
                                      std::to_string(chips));
  }
  std::vector<size_t> ring(chips);
  for (size_t k = 0; k < chips; ++k) {
    if (r.ring[k] >= chips) throw CliError(Exit::kFailed, "vtrnd named chip " + std::to_string(r.ring[k]) + " in the ring");
    ring[k] = r.ring[k];
  }
  const std::vector<float> ref = collective_reference(allreduce, in, ring);
  const uint64_t out_bytes = ref.size() * 4;
  const uint32_t ref_crc = vtrn::crc32(ref.data(), out_bytes);

  uint64_t slowest = 0;
  std::vector<std::string> mismatches;
  json jchips = json::array();
  Table t({"chip", "rank", "send", "recv", "state", "time", "verify", "reason"});
  for (size_t i = 0; i < r.n_chips; ++i) {
    const Vtrn__Api__CollectiveChipResult& c = *r.chips[i];
    std::string verify = "-";
    if (c.state == VTRN__TYPES__JOB_STATE__JOB_STATE_DONE) {
      slowest = std::max<uint64_t>(slowest, c.chip_run_ns);
      bool ok = c.output_bytes == out_bytes && c.output_crc32 == ref_crc;
      std::string where;
      if (c.output.len == out_bytes) {
        ok = memcmp(c.output.data, ref.data(), out_bytes) == 0;
        for (uint64_t e = 0; !ok && e < ref.size(); ++e) {
          float got;
          memcpy(&got, c.output.data + e * 4, 4);
          if (memcmp(&got, &ref[e], 4) != 0) {
            char b[96];
            snprintf(b, sizeof b, " (element %llu: %.9g, expected %.9g)", (unsigned long long)e, double(got),
                     double(ref[e]));
            where = b;
            break;
          }
        }
      }
      verify = ok ? "ok" : "MISMATCH";
      if (!ok) mismatches.push_back("chip " + std::to_string(c.chip) + where);
    }
    const std::string state = collective_state_text(c.state);
    t.add({std::to_string(c.chip), std::to_string(c.rank), std::to_string(c.send_port), std::to_string(c.recv_port),
           state, c.chip_run_ns ? format_ns(c.chip_run_ns) : "-", verify, c.reason[0] ? c.reason : "-"});
    jchips.push_back({{"chip", c.chip},
                      {"rank", c.rank},
                      {"send_port", c.send_port},
                      {"recv_port", c.recv_port},
                      {"state", state},
                      {"reason", c.reason},
                      {"job_id", c.job_id},
                      {"chip_run_ns", c.chip_run_ns},
                      {"frames_rejected", c.frames_rejected},
                      {"verified", verify == "ok"}});
  }
  const double n = double(chips);
  const double s_bytes = double(out_bytes);
  const double alg = slowest ? s_bytes / (double(slowest) / 1e9) : 0;
  const double bus = alg * (allreduce ? 2 * (n - 1) / n : (n - 1) / n);
  const bool done = r.state == VTRN__TYPES__JOB_STATE__JOB_STATE_DONE;
  std::string failure;
  if (!done) {
    failure = o.op + " failed: " + std::string(r.reason);
  } else if (!mismatches.empty()) {
    failure = o.op + ": output differs from the host reference on ";
    for (size_t i = 0; i < mismatches.size(); ++i) failure += (i ? ", " : "") + mismatches[i];
  }
  if (o.json) {
    const nlohmann::json doc = {{"op", o.op},
                {"bytes", o.bytes},
                {"chips", chips},
                {"seed", o.seed},
                {"collective_id", r.collective_id},
                {"state", collective_state_text(r.state)},
                {"reason", r.reason},
                {"ring", std::vector<uint32_t>(r.ring, r.ring + r.n_ring)},
                {"time_ns", slowest},
                {"host_ns", r.host_ns},
                {"alg_bw_bytes_per_s", alg},
                {"bus_bw_bytes_per_s", bus},
                {"verified", done && mismatches.empty()},
                {"per_chip", jchips}};
    if (!failure.empty()) throw CliError(Exit::kFailed, failure).with_context(doc);
    print_json(doc);
  } else {
    std::cout << t.render();
    if (done) {
      std::cout << o.op << " of " << format_bytes(o.bytes) << " per chip over " << chips << " chips: "
                << format_ns(slowest) << ", algorithm bandwidth " << gbps_text(alg) << ", bus bandwidth "
                << gbps_text(bus) << (mismatches.empty() ? ", every chip verified\n" : "\n");
    }
  }
  if (!failure.empty()) throw CliError(Exit::kFailed, failure);
}

}  // namespace

void add_collective_commands(CLI::App& app, Action* action) {
  // `vtrn run` belongs to the jobs commands; collectives are two more kinds.
  CLI::App* run = app.get_subcommand("run");
  for (const char* op : {"allreduce", "allgather"}) {
    auto co = std::make_shared<CollectiveOptions>();
    co->op = op;
    const bool ar = co->op == "allreduce";
    CLI::App* r = run->add_subcommand(op, ar ? "Ring all-reduce (fp32 sum) over every chip of the board, verified"
                                             : "Ring all-gather over every chip of the board, verified");
    r->add_option("--bytes", co->bytes, "Input bytes per chip (a multiple of 4; K, M suffixes)")
        ->required()
        ->transform(size_validator(4, uint64_t(64) << 20));
    r->add_option("--seed", co->seed, "Random seed of the inputs");
    r->add_option("--timeout-ms", co->timeout_ms, "Whole collective")->check(CLI::Range(1000u, 600000u));
    r->add_option("--step-timeout-ms", co->step_timeout_ms, "No progress in one ring step (0: the firmware's 5 s)")
        ->check(CLI::Range(0u, 600000u));
    r->add_flag("--json", co->json, "Print one JSON document instead of text");
    r->callback([co, action] { *action = [co] { run_collective(*co); }; });
  }
}

}  // namespace tools
