// vtrnd reliability requests (see reliability_service.h).
#include "reliability_service.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "api_enums.h"
#include "vtrn/drv/log.h"

namespace drv {

Vtrn__Api__ResetHistory* reset_history_message(const ResetInfo& r, ProtoArena& a) {
  auto& m = *a.make(Vtrn__Api__ResetHistory(VTRN__API__RESET_HISTORY__INIT));
  m.count = r.count;
  m.last_cause = to_api(r.last_cause);
  m.last_reason = a.str(r.last_reason);
  m.last_unix_ms = r.last_unix_ms;
  m.last_detect_ns = r.last_detect_ns;
  m.last_recover_ns = r.last_recover_ns;
  m.last_panic = a.str(r.last_panic);
  m.n_last_log = r.last_log.size();
  m.last_log = a.strv(r.last_log);
  m.recent = r.recent;
  m.qemu_relaunches = r.qemu_relaunches;
  m.recovering = r.recovering;
  m.engines_quiesced = r.engines_quiesced;
  m.last_engines_quiesce_ns = r.last_engines_quiesce_ns;
  return &m;
}

const char* fault_kind_name(Vtrn__Api__FaultKind k) {
  switch (k) {
    case VTRN__API__FAULT_KIND__FAULT_KIND_HANG: return "hang";
    case VTRN__API__FAULT_KIND__FAULT_KIND_STALL: return "stall";
    case VTRN__API__FAULT_KIND__FAULT_KIND_PANIC: return "panic";
    case VTRN__API__FAULT_KIND__FAULT_KIND_DMA_CORRUPT: return "dma-corrupt";
    case VTRN__API__FAULT_KIND__FAULT_KIND_QEMU_KILL: return "qemu-kill";
    case VTRN__API__FAULT_KIND__FAULT_KIND_TENSOR_ENGINE: return "tensor-engine";
    case VTRN__API__FAULT_KIND__FAULT_KIND_DMA_ENGINE: return "dma-engine";
    case VTRN__API__FAULT_KIND__FAULT_KIND_JOB_STUCK: return "job-stuck";
    default: return "unknown";
  }
}

void ReliabilityService::reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st,
                                     const std::string& err) {
  drv::reply_error(reply_, cid, id, st, err);
}

void ReliabilityService::reply_inject(uint64_t cid, uint64_t id, const std::string& detail,
                                      uint64_t heartbeat, int32_t pid) {
  std::string d = detail;
  Vtrn__Api__FaultInjectResponse fr = VTRN__API__FAULT_INJECT_RESPONSE__INIT;
  fr.detail = d.data();
  fr.heartbeat = heartbeat;
  fr.qemu_pid = pid;
  reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_FAULT_INJECT, &fr.base);
}

void ReliabilityService::chip_reset(uint64_t cid, uint64_t id, Chip* chip) {
  const uint64_t t0 = monotonic_ns();
  DRV_LOGI("chip %u: reset requested by client %llu", chip->id(), (unsigned long long)cid);
  chip->reset(ResetCause::kManual, "manual reset (vtrn reset)",
              [this, cid, id, chip, t0](bool ok, const std::string& why) {
                if (!ok) {
                  reply_error(cid, id, VTRN__API__STATUS__STATUS_CHIP_NOT_READY, why);
                  return;
                }
                const ChipStatus s = chip->status();
                ProtoArena a;
                Vtrn__Api__ChipResetResponse rr = VTRN__API__CHIP_RESET_RESPONSE__INIT;
                rr.elapsed_ns = monotonic_ns() - t0;
                rr.boot_generation = s.header_valid ? s.header.boot_generation : 0;
                rr.history = reset_history_message(s.reset, a);
                reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_CHIP_RESET, &rr.base);
              });
}

void ReliabilityService::fault_inject(uint64_t cid, uint64_t id, Chip* chip,
                                      const Vtrn__Api__FaultInjectRequest& r) {
  const std::string label = "chip " + std::to_string(chip->id());
  if (chip->state() != ChipState::kReady) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_CHIP_NOT_READY,
                chip->not_ready_reason() + ": nothing to inject into");
    return;
  }
  const char* kind = fault_kind_name(r.kind);
  switch (r.kind) {
    case VTRN__API__FAULT_KIND__FAULT_KIND_HANG:
    case VTRN__API__FAULT_KIND__FAULT_KIND_STALL:
    case VTRN__API__FAULT_KIND__FAULT_KIND_PANIC: {
      Vtrn__Ctrl__ReliabilityInjectRequest ir = VTRN__CTRL__RELIABILITY_INJECT_REQUEST__INIT;
      ir.fault = r.kind == VTRN__API__FAULT_KIND__FAULT_KIND_HANG
                     ? VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_HANG
                 : r.kind == VTRN__API__FAULT_KIND__FAULT_KIND_STALL
                     ? VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_STALL
                     : VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_PANIC;
      DRV_LOGW("%s: injecting %s on request of client %llu", label.c_str(), kind,
               (unsigned long long)cid);
      fw_call(*chip, &Vtrn__Ctrl__Request::reliability_inject, ir, &Vtrn__Ctrl__Response::reliability_inject,
              kInjectTimeoutMs,
                   [this, cid, id, chip, label, kind](const FwReply<Vtrn__Ctrl__ReliabilityInjectResponse>& res) {
                     if (!res.ok()) {
                       reply_error(cid, id, to_api(res.error), label + ": inject " + kind + " not acknowledged: " + res.error.detail());
                       return;
                     }
                     chip->note_fault_injected();
                     const uint64_t hb = res.body->heartbeat;
                     const uint32_t wd = chip->watchdog_ms();
                     std::string detail = label + ": firmware accepted " + kind + " at heartbeat " +
                                          std::to_string(hb);
                     detail += std::string(kind) == "panic"
                                   ? "; vtrnd resets it once the panic is seen"
                                   : wd ? "; the watchdog resets it after " + std::to_string(wd) +
                                              " ms without a heartbeat"
                                        : "; the watchdog is off: reset it with vtrn reset";
                     reply_inject(cid, id, detail, hb, 0);
                   });
      return;
    }
    case VTRN__API__FAULT_KIND__FAULT_KIND_TENSOR_ENGINE: {
      // The firmware programs the engine; vtrnd never touches vtrn-hw.
      Vtrn__Ctrl__ReliabilityInjectRequest ir = VTRN__CTRL__RELIABILITY_INJECT_REQUEST__INIT;
      ir.fault = VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_TENSOR_ENGINE;
      ir.engine = uint32_t(r.engine < 0 ? 0 : r.engine);
      const uint32_t engine = ir.engine;
      DRV_LOGW("%s: injecting a fault into tensor engine %u on request of client %llu", label.c_str(),
               unsigned(engine), (unsigned long long)cid);
      fw_call(*chip, &Vtrn__Ctrl__Request::reliability_inject, ir, &Vtrn__Ctrl__Response::reliability_inject,
              kInjectTimeoutMs,
              [this, cid, id, label, engine](const FwReply<Vtrn__Ctrl__ReliabilityInjectResponse>& res) {
        if (!res.ok()) {
          reply_error(cid, id, to_api(res.error), label + ": tensor engine fault not taken: " + res.error.detail());
          return;
        }
        reply_inject(cid, id,
                     label + ": tensor engine " + std::to_string(engine) +
                         " fails its next command; the job that sent it fails naming the fault",
                     res.body->heartbeat, 0);
      });
      return;
    }
    case VTRN__API__FAULT_KIND__FAULT_KIND_DMA_ENGINE: {
      // As for a tensor engine: the firmware programs it, vtrnd never
      // touches vtrn-hw.
      Vtrn__Ctrl__ReliabilityInjectRequest ir = VTRN__CTRL__RELIABILITY_INJECT_REQUEST__INIT;
      ir.fault = VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_DMA_ENGINE;
      ir.engine = uint32_t(r.engine < 0 ? 0 : r.engine);
      ir.halt = r.halt;
      const uint32_t engine = ir.engine;
      const bool halt = r.halt != 0;
      DRV_LOGW("%s: injecting a %s into DMA engine %u on request of client %llu", label.c_str(),
               halt ? "halt" : "fault", unsigned(engine), (unsigned long long)cid);
      fw_call(*chip, &Vtrn__Ctrl__Request::reliability_inject, ir, &Vtrn__Ctrl__Response::reliability_inject,
              kInjectTimeoutMs,
              [this, cid, id, label, engine, halt](const FwReply<Vtrn__Ctrl__ReliabilityInjectResponse>& res) {
        if (!res.ok()) {
          reply_error(cid, id, to_api(res.error), label + ": DMA engine fault not taken: " + res.error.detail());
          return;
        }
        reply_inject(cid, id,
                     label + ": DMA engine " + std::to_string(engine) +
                         (halt ? " halts before its next descriptor until the chip is reset (vtrn reset)"
                               : " fails the next descriptor it takes; its chain ends with DMA engine fault"),
                     res.body->heartbeat, 0);
      });
      return;
    }
    case VTRN__API__FAULT_KIND__FAULT_KIND_JOB_STUCK: {
      // Armed in the firmware; nothing breaks until a job runs the stuck
      // chunk and is stopped, so the detection clock does not start here.
      Vtrn__Ctrl__ReliabilityInjectRequest ir = VTRN__CTRL__RELIABILITY_INJECT_REQUEST__INIT;
      ir.fault = VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_JOB_STUCK;
      DRV_LOGW("%s: injecting job-stuck on request of client %llu", label.c_str(), (unsigned long long)cid);
      fw_call(*chip, &Vtrn__Ctrl__Request::reliability_inject, ir, &Vtrn__Ctrl__Response::reliability_inject,
              kInjectTimeoutMs, [this, cid, id, label](const FwReply<Vtrn__Ctrl__ReliabilityInjectResponse>& res) {
        if (!res.ok()) {
          reply_error(cid, id, to_api(res.error), label + ": inject job-stuck not acknowledged: " + res.error.detail());
          return;
        }
        reply_inject(cid, id,
                     label + ": the next chunk a NeuronCore runs ignores stop and never returns; once its job "
                             "is cancelled or times out the firmware panics (job stuck) and vtrnd resets it",
                     res.body->heartbeat, 0);
      });
      return;
    }
    case VTRN__API__FAULT_KIND__FAULT_KIND_DMA_CORRUPT: {
      DmaEngine& e = chip->dma();
      if (!e.attached()) {
        reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST, label + " has no DMA queues");
        return;
      }
      const int32_t q = r.queue < 0 ? 0 : r.queue;
      if (uint32_t(q) >= e.queue_count()) {
        reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                    label + ": no DMA queue " + std::to_string(q) + " (chip has " +
                        std::to_string(e.queue_count()) + ")");
        return;
      }
      const DmaError err = e.inject_sq_index_fault(uint32_t(q), false);
      if (err != DmaError::kOk) {
        reply_error(cid, id, VTRN__API__STATUS__STATUS_INTERNAL,
                    label + ": DMA queue " + std::to_string(q) + ": " + dma_error_name(err));
        return;
      }
      DRV_LOGW("%s: DMA queue %d: submission index corrupted in BAR2 on request of client %llu",
               label.c_str(), int(q), (unsigned long long)cid);
      reply_inject(cid, id,
                   label + ": DMA queue " + std::to_string(q) +
                       " submission index pushed past the ring in BAR2; the firmware latches the "
                       "queue (vtrn dma stats), vtrn dma reset " + std::to_string(chip->id()) +
                       " clears it",
                   0, 0);
      return;
    }
    case VTRN__API__FAULT_KIND__FAULT_KIND_QEMU_KILL: {
      const pid_t pid = chip->pid();
      if (pid <= 0) {
        reply_error(cid, id, VTRN__API__STATUS__STATUS_CHIP_NOT_READY, label + " has no QEMU running");
        return;
      }
      DRV_LOGW("%s: SIGKILL to QEMU pid %d on request of client %llu", label.c_str(), int(pid),
               (unsigned long long)cid);
      chip->note_fault_injected();
      if (kill(pid, SIGKILL) != 0) {
        reply_error(cid, id, VTRN__API__STATUS__STATUS_INTERNAL,
                    label + ": kill QEMU pid " + std::to_string(pid) + ": " + strerror(errno));
        return;
      }
      reply_inject(cid, id,
                   label + ": sent SIGKILL to QEMU pid " + std::to_string(pid) +
                       "; vtrnd launches a new one",
                   0, int32_t(pid));
      return;
    }
    default:
      reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                  "unknown fault kind " + std::to_string(int(r.kind)));
      return;
  }
}

std::span<const Route> ReliabilityService::bodies() const {
  static constexpr Route kRoutes[] = {
      {VTRN__API__REQUEST__BODY_CHIP_RESET, true, true},
      {VTRN__API__REQUEST__BODY_FAULT_INJECT, true, true},
  };
  return kRoutes;
}

void ReliabilityService::handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) {
  switch (req.body_case) {
    case VTRN__API__REQUEST__BODY_CHIP_RESET: return chip_reset(cid, req.id, chip);
    case VTRN__API__REQUEST__BODY_FAULT_INJECT: return fault_inject(cid, req.id, chip, *req.fault_inject);
    default: return;
  }
}

}  // namespace drv
