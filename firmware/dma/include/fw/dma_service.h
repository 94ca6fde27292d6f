// fw::dma::DmaService: the chip's DMA service, the firmware glue around the
// portable scheduler (fw/dma_sched.h). At boot it derives HBM from the
// platform RAM and the board, republishes the BAR2 region table with the DMA
// region (the host window moves behind it), sets up the queues and sets
// kCapDma; in the event loop it runs one scheduler pass per turn through the
// CPU copy engine (hal/copy_dma.h) and logs queue latches and resets.
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
//    completions while descriptors are still queued should ring kVectorDma;
//  - no pass runs unless the power service says the device is active
//    (fw::power::device_active); queued descriptors are a resume trigger.
//
// Not the HBM manager: the HBM service hands this one the policy that
// decides which HBM ranges DMA may touch and the remap window of stitched
// allocations (set_hbm_policy, set_remap_window); without a policy any
// range inside HBM is reachable.
#pragma once

#include <stdint.h>

#include "fw/dma_sched.h"
#include "fw/service.h"
#include "hal/copy_dma.h"
#include "hal/copy_engine.h"
#include "vtrn/hostif.h"

namespace fw::dma {

class DmaService final : public Service, private Observer {
 public:
  constexpr DmaService() : Service("dma") {}

  // Panics: kPanicBoard when the board's queues or HBM do not fit BAR2 /
  // RAM, kPanicPlatform when RAM does not cover HBM.
  void init(const Boot& boot) override;
  Vectors poll(Turn& turn) override;
  [[nodiscard]] bool has_work() override;
  void fill_telemetry(vtrn::hostif::Telemetry* t) const override;

  // The HBM range derived at init (the HBM service manages it).
  [[nodiscard]] const HbmRange& hbm() const { return hbm_; }
  [[nodiscard]] const Totals& totals() const { return sched_.totals(); }
  // What the host queues have moved, whoever moved it: the CPU copier's
  // totals, or with the DMA engines the sum of their own counters (each
  // EngineStats block read under its seqlock). An engine whose block keeps
  // changing during the read counts with its last good copy, so the sums
  // only fall when an engine is reset (a chip reset starts them at 0).
  // The one reader for telemetry and the power model's HBM access energy.
  struct Activity {
    uint64_t descriptors = 0;
    uint64_t completions = 0;
    uint64_t bytes = 0;
    uint64_t busy_ns = 0;
  };
  [[nodiscard]] Activity activity() const;
  // DMA engines serving the host queues (0: the CPU copier serves them).
  [[nodiscard]] uint32_t dma_engines_serving() const { return engines_mode_ ? hw_count_ : 0; }
  // Every HBM range of a descriptor is checked by `policy` (boot, before READY).
  void set_hbm_policy(const vtrn::dma::HbmPolicy* policy) { map_.policy = policy; }
  // Descriptors may also address the remap window of stitched allocations
  // (mapped by fw::mmu, so addresses are usable as they are); published to
  // the host in the DMA region header. Boot, before READY.
  void set_remap_window(uint64_t base, uint64_t size);

 private:
  void on_latched(uint32_t queue, vtrn::dma::QueueError error) override;
  void on_reset(uint32_t queue) override;
  // Hands the host queues to the chip's DMA engines (queue q to engine
  // q % engines). False, with the engines reset and the reason logged,
  // when they are absent or refuse the configuration.
  bool start_engines(uint64_t dma_offset, uint64_t window_offset, uint64_t window_size, uint32_t queues,
                     uint32_t depth);
  // The device left or entered D0: the engines resume or pause the host
  // queues (kDmaConfigPaused), keeping what is in flight.
  void pause_engines(bool paused);
  // Some host queue holds descriptors nobody consumed yet (BAR2 indexes).
  [[nodiscard]] bool host_work_waiting() const;

  Scheduler sched_;
  vtrn::dma::AddressMap map_;
  HbmRange hbm_;
  vtrn::dma::DmaRegionHeader* region_ = nullptr;
  // The chip's copy engine is its CPU: CpuDmaCopier calls hal_copy_memcpy
  // directly (see dma_service.cpp).
  hal::copy::CpuDmaCopier copier_;
  bool enabled_ = false;
  // With vtrn.copy_engine=engines: the DMA engines serve the host queues
  // and this service only configured them (no pass runs here).
  hal::copy::HwEngine hw_[vtrn::engine::kMaxDmaEngines];
  uint32_t hw_count_ = 0;
  bool engines_mode_ = false;
  bool engines_paused_ = false;
  vtrn::engine::DmaConfig hw_config_[vtrn::engine::kMaxDmaEngines] = {};
  uint64_t engines_units_ = 0;  // chains the engines completed, at the last look
  // Each DMA engine's last consistent EngineStats (activity()).
  mutable vtrn::engine::EngineStats hw_stats_[vtrn::engine::kMaxDmaEngines] = {};
};

DmaService& service();

}  // namespace fw::dma
