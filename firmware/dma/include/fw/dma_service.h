// fw::dma::Service: the chip's DMA service, the firmware glue around the
// portable scheduler (fw/dma_sched.h). At boot it derives HBM from the
// platform RAM and the board, republishes the BAR2 region table with the DMA
// region (the host window moves behind it), sets up the queues and sets
// kCapDma; in the event loop it runs one scheduler pass per iteration
// through the copy-engine HAL (hal/copy_dma.h over hal::copy::CpuEngine) and
// logs queue latches and resets.
//
// What the host can rely on, once the firmware is READY with kCapDma:
//  - the DMA region's DmaRegionHeader is final; every queue starts at index
//    0, error 0, reset_ack = reset_req = 0, irq_armed = 0;
//  - after publishing descriptors, one doorbell on kVectorDma gets them
//    served; doorbells coalesce, so the firmware re-reads every queue's
//    indexes on every wake-up, whatever woke it;
//  - the chip interrupts the host on kVectorDma at most once per scheduler
//    pass, when some queue completed a kDescIrq chain while irq_armed = 1;
//  - a queue whose completion ring is full waits for cq_cons to move; the
//    firmware notices that on its next wake-up (a doorbell on any vector, or
//    at the latest the next telemetry tick), so a host that consumes
//    completions while descriptors are still queued should ring kVectorDma.
//
// Not the HBM manager: the manager (firmware/hbm) supplies the HbmPolicy
// that decides which HBM ranges DMA may touch (set_hbm_policy); without one
// any range inside HBM is reachable.
#pragma once

#include <stdint.h>

#include "fw/dma_sched.h"
#include "vtrn/hostif.h"

namespace fw::dma {

struct ServiceConfig {
  uint8_t* bar2 = nullptr;  // the FwHeader is at offset 0, state BOOTING
  uint64_t bar2_size = 0;
  uint32_t queues = 0;      // board: vtrn,dma-queues
  uint32_t depth = 0;       // board: vtrn,dma-queue-depth
  HbmInputs hbm;
};

class Service {
 public:
  Service() = default;
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Boot-time setup (before READY). Panics: kPanicBoard when the board's
  // queues or HBM do not fit BAR2 / RAM, kPanicPlatform when RAM does not
  // cover HBM.
  void init(const ServiceConfig& cfg);
  // One scheduler pass. True when the host should get a kVectorDma interrupt.
  bool run(uint64_t wake_gen);
  [[nodiscard]] bool wants_run(uint64_t wake_gen) const;
  [[nodiscard]] bool stalled() const { return sched_.stalled(); }
  [[nodiscard]] bool enabled() const { return enabled_; }
  [[nodiscard]] const Totals& totals() const { return sched_.totals(); }
  // ---- HBM ----
  // Every HBM range of a descriptor is checked by `policy` (boot time, before READY).
  void set_hbm_policy(const vtrn::dma::HbmPolicy* policy) { map_.policy = policy; }
  // Descriptors may also address the remap window of stitched allocations
  // (mapped by fw::mmu, so addresses are usable as they are); published to
  // the host in the DMA region header. Boot time, before READY.
  void set_remap_window(uint64_t base, uint64_t size);
  // ---- end HBM ----

 private:
  Scheduler sched_;
  vtrn::dma::AddressMap map_;
  vtrn::dma::DmaRegionHeader* region_ = nullptr;  // ---- HBM ---- for set_remap_window
  bool enabled_ = false;
};

}  // namespace fw::dma
