// fw::reliability::ReliabilityService: faults the host can ask the firmware
// to commit, so the watchdog, panic and reset paths of vtrnd are tested
// against the real failure and not a simulation of it (vtrn inject
// hang|stall|panic).
//
// The handler only validates and arms the fault and answers OK: the
// response must reach the host before the firmware breaks, otherwise the
// host would see a control-request timeout instead of the failure under
// test. poll() is the last row of the service table, so it runs after the
// control service has served the request and rung the host in the same
// turn, and commits the armed fault:
//  - HANG: IRQs masked, spin forever (no heartbeat, no doorbells);
//  - STALL: IRQs enabled, sleep in WFI forever (interrupts are taken, the
//    loop that beats the heartbeat never runs);
//  - PANIC: a load from an address the MMU does not map, which takes the
//    real synchronous-exception path into fw::panic.
// Only a reset ends a committed fault. This is not a general fault
// framework: DMA ring corruption and QEMU death are done by the host.
// TENSOR_ENGINE is not a break of the firmware: it is handed to the engine
// region at once (fw::engines, kInjectTensor), and the engine fails its
// next command, which ends the job that sent it naming the fault.
// DMA_ENGINE likewise (kInjectDmaFail / kInjectDma): a DMA engine serving
// the host queues fails the next descriptor it takes (the client's chain
// completes with kErrEngine; fw::engines logs the record) or halts until the
// chip reset (queued work stays queued and ends with the reset).
// JOB_STUCK is armed, not committed here: fw::jobs (JobsService::arm_stuck)
// makes the next chunk an executor core runs loop in WFI, ignoring stop;
// once that job's stop is requested (cancel, timeout), the jobs service's
// stuck bound panics the chip (kPanicJobStuck) naming the job and cores.
#pragma once

#include <stdint.h>

#include "fw/service.h"
#include "vtrn_ctrl.pb-c.h"

namespace fw::reliability {

class ReliabilityService final : public Service {
 public:
  constexpr ReliabilityService() : Service("reliability") {}
  [[nodiscard]] std::span<const Route> routes() const override;

  // Keeps the host interface, whose heartbeat the response echoes.
  void init(const Boot& boot) override;
  // Commits an armed fault; returns at once when none is armed.
  Vectors poll(Turn& turn) override;
  // A fault is armed: the loop must not sleep before committing it.
  [[nodiscard]] bool has_work() override;

  vtrn::Error inject(const Vtrn__Ctrl__ReliabilityInjectRequest& r,
                     Vtrn__Ctrl__ReliabilityInjectResponse& out, Call& c);

 private:
  vtrn::Error inject_tensor(uint32_t engine, Vtrn__Ctrl__ReliabilityInjectResponse& out);
  vtrn::Error inject_dma(uint32_t engine, bool halt, Vtrn__Ctrl__ReliabilityInjectResponse& out);
  vtrn::Error inject_job_stuck(Vtrn__Ctrl__ReliabilityInjectResponse& out);

  const hostif::HostInterface* hostif_ = nullptr;
  volatile uint32_t armed_ = VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_NONE;
};

ReliabilityService& service();

}  // namespace fw::reliability
