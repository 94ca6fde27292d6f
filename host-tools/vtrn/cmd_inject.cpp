// `vtrn inject KIND CHIP ...`: break a chip on purpose, to see the board
// detect and recover it. Kinds: hang (firmware spins with IRQs masked),
// stall (firmware sleeps forever with IRQs on), panic (firmware takes a data
// abort), dma-corrupt (vtrnd pushes one DMA queue's submission index past
// the ring in BAR2), qemu-kill (SIGKILL to the chip's QEMU), tensor-engine
// (the firmware makes one tensor engine fail its next command: the job that
// sent it fails naming the fault; nothing reboots, so no --wait),
// dma-engine (the firmware makes one DMA engine fail the next descriptor it
// takes, or with --halt stop until the chip reset), job-stuck (the next
// chunk a NeuronCore runs ignores stop and never returns: the chip panics
// "job stuck" once that job is cancelled or times out; no --wait, since
// nothing happens before a job runs); `vtrn inject ecc` comes from the HBM
// commands (add_inject_ecc_subcommand).
//
// Without --wait the command returns once the fault is in. With --wait it
// follows the chip until vtrnd has detected the fault and the chip is READY
// again (or the DMA queue has latched, for dma-corrupt), and prints how long
// detection and recovery took, from vtrnd's reset history.
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "cli_error.h"
#include "commands.h"
#include "daemon.h"
#include "reliability_json.h"
#include "render.h"

namespace tools {
namespace {

struct InjectOptions {
  Vtrn__Api__FaultKind kind = VTRN__API__FAULT_KIND__FAULT_KIND_NONE;
  std::string name;
  uint32_t chip = 0;
  int32_t queue = 0;
  int32_t engine = 0;
  bool halt = false;  // dma-engine --halt
  bool wait = false;
  double timeout_s = 60;
  bool json = false;
};

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(50);

const Vtrn__Api__ChipSummary* find_summary(const Vtrn__Api__ListResponse& l, uint32_t chip) {
  for (size_t i = 0; i < l.n_chips; ++i)
    if (l.chips[i]->id == chip) return l.chips[i];
  return nullptr;
}

uint32_t resets_now(DaemonConnection& conn, uint32_t chip) {
  drv::ResponsePtr l = request_list(conn);
  const Vtrn__Api__ChipSummary* s = find_summary(*l->list, chip);
  if (s == nullptr) throw_unknown_chip(chip, l->list->n_chips);
  return s->resets;
}

// Waits until the chip has been reset at least once more than `before` and
// is READY again; returns its reset history.
nlohmann::json wait_recovered(DaemonConnection& conn, const InjectOptions& o, uint32_t before) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(o.timeout_s);
  for (;;) {
    drv::ResponsePtr l = request_list(conn);
    const Vtrn__Api__ChipSummary* s = find_summary(*l->list, o.chip);
    if (s == nullptr) throw_unknown_chip(o.chip, l->list->n_chips);
    const std::string reason = s->last_reset_reason ? s->last_reset_reason : "";
    if (s->resets > before && !s->recovering && s->state == VTRN__API__CHIP_STATE__CHIP_STATE_READY) break;
    if (s->state == VTRN__API__CHIP_STATE__CHIP_STATE_FAILED ||
        s->state == VTRN__API__CHIP_STATE__CHIP_STATE_PANIC || s->state == VTRN__API__CHIP_STATE__CHIP_STATE_HALTED)
      throw CliError(Exit::kChipNotReady, "chip " + std::to_string(o.chip) + " did not recover from " + o.name +
                                              ": " + state_name(s->state) + ": " + (s->error ? s->error : ""));
    if (Clock::now() >= deadline)
      throw CliError(Exit::kTimeout, "chip " + std::to_string(o.chip) + " not recovered from " + o.name + " within " +
                                         std::to_string(o.timeout_s) + " s (state " + state_name(s->state) +
                                         (s->resets > before ? ", reset: " + reason : ", not reset yet") + ")");
    std::this_thread::sleep_for(kPollInterval);
  }
  drv::ResponsePtr info = request_info(conn, o.chip);
  return reset_history_json(info->info->info->reset_history);
}

// Waits until the DMA queue reports a device latch or a host fault.
std::string wait_latched(DaemonConnection& conn, const InjectOptions& o) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(o.timeout_s);
  for (;;) {
    Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
    Vtrn__Api__DmaStatsRequest s = VTRN__API__DMA_STATS_REQUEST__INIT;
    s.chip = o.chip;
    req.body_case = VTRN__API__REQUEST__BODY_DMA_STATS;
    req.dma_stats = &s;
    drv::ResponsePtr r = conn.call(&req, VTRN__API__RESPONSE__BODY_DMA_STATS);
    for (size_t i = 0; i < r->dma_stats->n_queues; ++i) {
      const Vtrn__Api__DmaQueueStats* q = r->dma_stats->queues[i];
      if (int32_t(q->queue) != o.queue) continue;
      if (q->device_error != 0 || (q->host_fault && q->host_fault[0]))
        return q->host_fault && q->host_fault[0] ? q->host_fault
                                                 : "device error " + std::to_string(q->device_error);
    }
    if (Clock::now() >= deadline)
      throw CliError(Exit::kTimeout, "chip " + std::to_string(o.chip) + ": DMA queue " + std::to_string(o.queue) +
                                         " did not latch within " + std::to_string(o.timeout_s) + " s");
    std::this_thread::sleep_for(kPollInterval);
  }
}

void run_inject(const InjectOptions& o) {
  DaemonConnection conn = DaemonConnection::open();
  const bool reboots = o.kind != VTRN__API__FAULT_KIND__FAULT_KIND_DMA_CORRUPT &&
                       o.kind != VTRN__API__FAULT_KIND__FAULT_KIND_TENSOR_ENGINE &&
                       o.kind != VTRN__API__FAULT_KIND__FAULT_KIND_DMA_ENGINE &&
                       o.kind != VTRN__API__FAULT_KIND__FAULT_KIND_JOB_STUCK;
  const uint32_t before = o.wait && reboots ? resets_now(conn, o.chip) : 0;
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__FaultInjectRequest r = VTRN__API__FAULT_INJECT_REQUEST__INIT;
  r.chip = o.chip;
  r.kind = o.kind;
  r.queue = o.queue;
  r.engine = o.engine;
  r.halt = o.halt;
  req.body_case = VTRN__API__REQUEST__BODY_FAULT_INJECT;
  req.fault_inject = &r;
  drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_FAULT_INJECT);
  nlohmann::json doc = {{"chip", o.chip},
                        {"kind", o.name},
                        {"detail", resp->fault_inject->detail ? resp->fault_inject->detail : ""},
                        {"heartbeat", resp->fault_inject->heartbeat},
                        {"qemu_pid", resp->fault_inject->qemu_pid}};
  std::string outcome;
  if (o.wait && reboots) {
    nlohmann::json h = wait_recovered(conn, o, before);
    doc["reset_history"] = h;
    outcome = "chip " + std::to_string(o.chip) + ": " + o.name + " detected after " +
              format_ns(h["last_detect_ns"].get<uint64_t>()) + " (" + h["last_reason"].get<std::string>() +
              "), READY again " + format_ns(h["last_recover_ns"].get<uint64_t>()) + " later";
  } else if (o.wait) {
    const std::string fault = wait_latched(conn, o);
    doc["dma_fault"] = fault;
    outcome = "chip " + std::to_string(o.chip) + ": DMA queue " + std::to_string(o.queue) + " latched: " + fault;
  }
  if (o.json) {
    print_json(doc);
    return;
  }
  std::cout << doc["detail"].get<std::string>() << "\n";
  if (!outcome.empty()) std::cout << outcome << "\n";
}

}  // namespace

void add_inject_command(CLI::App& app, Action* action) {
  CLI::App* inject = app.add_subcommand("inject", "Inject a fault into a chip to exercise detection and recovery");
  inject->require_subcommand(1);
  struct Kind {
    const char* name;
    Vtrn__Api__FaultKind kind;
    const char* help;
  };
  static const Kind kKinds[] = {
      {"hang", VTRN__API__FAULT_KIND__FAULT_KIND_HANG, "Firmware spins with IRQs masked (the watchdog resets it)"},
      {"stall", VTRN__API__FAULT_KIND__FAULT_KIND_STALL, "Firmware sleeps forever with IRQs on (the watchdog resets it)"},
      {"panic", VTRN__API__FAULT_KIND__FAULT_KIND_PANIC, "Firmware takes a data abort and panics (vtrnd resets it)"},
      {"dma-corrupt", VTRN__API__FAULT_KIND__FAULT_KIND_DMA_CORRUPT,
       "Corrupt a DMA queue's submission index in BAR2 (the queue latches; vtrn dma reset clears it)"},
      {"qemu-kill", VTRN__API__FAULT_KIND__FAULT_KIND_QEMU_KILL, "SIGKILL the chip's QEMU (vtrnd launches a new one)"},
      {"tensor-engine", VTRN__API__FAULT_KIND__FAULT_KIND_TENSOR_ENGINE,
       "Make a tensor engine fail its next command (the job that sent it fails naming the fault)"},
      {"dma-engine", VTRN__API__FAULT_KIND__FAULT_KIND_DMA_ENGINE,
       "Make a DMA engine fail the next descriptor it takes (its chain ends with DMA engine fault), or halt it "
       "until the chip is reset"},
      {"job-stuck", VTRN__API__FAULT_KIND__FAULT_KIND_JOB_STUCK,
       "Make the next chunk a NeuronCore runs ignore stop and never return (once its job is cancelled or times "
       "out, the chip panics: job stuck)"},
  };
  for (const Kind& k : kKinds) {
    auto o = std::make_shared<InjectOptions>();
    o->kind = k.kind;
    o->name = k.name;
    CLI::App* c = inject->add_subcommand(k.name, k.help);
    c->add_option("chip", o->chip, "Chip id")->required()->check(chip_id_validator());
    if (k.kind == VTRN__API__FAULT_KIND__FAULT_KIND_DMA_CORRUPT)
      c->add_option("--queue", o->queue, "DMA queue to corrupt")->check(CLI::Range(0, 15));
    if (k.kind == VTRN__API__FAULT_KIND__FAULT_KIND_TENSOR_ENGINE) {
      c->add_option("--engine", o->engine, "Tensor engine (one per NeuronCore)")->check(CLI::Range(0, 7));
    } else if (k.kind == VTRN__API__FAULT_KIND__FAULT_KIND_DMA_ENGINE) {
      c->add_option("--engine", o->engine, "DMA engine (host queue q is served by engine q % engines)")
          ->check(CLI::Range(0, 7));
      c->add_flag("--halt", o->halt,
                  "Halt the engine before its next descriptor until the chip is reset, instead of failing one");
    } else if (k.kind == VTRN__API__FAULT_KIND__FAULT_KIND_JOB_STUCK) {
      // Nothing to wait for: the panic follows a job's stop, not the inject.
    } else {
      c->add_flag("--wait", o->wait,
                  k.kind == VTRN__API__FAULT_KIND__FAULT_KIND_DMA_CORRUPT
                      ? "Wait until the queue has latched"
                      : "Wait until the fault is detected and the chip is READY again; print the times");
      c->add_option("--timeout", o->timeout_s, "Seconds --wait waits")->check(CLI::Range(0.1, 600.0));
    }
    c->add_flag("--json", o->json, "Print one JSON document instead of text");
    c->callback([o, action] { *action = [o] { run_inject(*o); }; });
  }
  add_inject_ecc_subcommand(*inject, action);
}

}  // namespace tools
