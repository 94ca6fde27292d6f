// fw::engines: the firmware's owner of the chip's hardware engines (the
// engine function at PCI 00:02.0, served by the board's vtrn-hw;
// include/vtrn/engine_abi.h, hal/copy/copy_engine.h). At boot it finds the
// function, routes its 17 MSI-X vectors through GICv2m, discovers the
// engines from the ID block (never from the board DT), resets them (a warm
// reset may leave work from the boot that went down), arms error
// interrupts and programs the MPU with the HBM allocator's live allocations
// and retired pages (fw/mpu_table.h). The HBM service asks for a new MPU
// table after every request that changed the allocator and gets its answer
// only once every engine acknowledged it, so HBM that was freed is never
// handed out again while an engine may still use the old table. In the loop
// it drains the error ring (each record logged and counted by code).
//
// Not a data path itself: the DMA service and the job service drive the
// engines and take them from here (region()). The tensor engines' remap
// window (set_tensor_remap) is given here, at their bring-up by the job
// service, and tensor_reach() says whether stitched operands are in reach.
//
// Absent or refused (no function at 00:02.0, no ID block, a reset that is
// never acknowledged): the chip boots without engines, says why in the log
// and present() is false. Nothing here panics for the engines' sake: the
// cores can do all the work.
//
// Every wait for an engine acknowledgement re-rings its doorbell every
// 10 ms: QEMU finishes the ivshmem handshake asynchronously, so a doorbell
// rung right after boot can be lost (hw/README.md).
#pragma once

#include <stdint.h>

#include "fw/mpu_table.h"
#include "fw/service.h"
#include "hal/copy_engine.h"
#include "hal/tensor.h"
#include "vtrn/hbm.h"

namespace fw::engines {

class EnginesService final : public Service {
 public:
  constexpr EnginesService() : Service("engines") {}

  void init(const Boot& boot) override;
  Vectors poll(Turn& turn) override;
  [[nodiscard]] bool has_work() override;

  [[nodiscard]] bool present() const { return present_; }
  [[nodiscard]] hal::copy::EngineRegion& region() { return region_; }

  // Programs the MPU from `a` and waits (bounded) until every engine
  // acknowledged it. A no-op without engines. `whole_hbm`: DMA may reach
  // HBM outside allocations (vtrnd's --hbm-dma-unchecked; retired pages
  // stay poisoned).
  void sync_mpu(const vtrn::hbm::Allocator& a, bool whole_hbm);

  // Error records seen since boot, by EngineError code, and lost (ring overrun).
  [[nodiscard]] uint64_t errors(uint32_t code) const {
    return code < vtrn::engine::kEngineErrorCount ? errors_[code] : 0;
  }
  [[nodiscard]] uint64_t errors_lost() const { return errors_lost_; }
  [[nodiscard]] uint32_t mpu_generation() const { return mpu_gen_; }
  [[nodiscard]] const MpuTableStats& mpu_stats() const { return mpu_stats_; }

  // Tensor engine e's statistics (EngineStats, copied under its seqlock)
  // and whether it is working now; false without engines, for an engine
  // beyond them, or while the engine keeps rewriting the block.
  bool tensor_stats(uint32_t e, vtrn::engine::EngineStats* out, bool* busy) const;

  // Gives each of the `n` tensor engines the remap window [base, +size) of
  // stitched HBM allocations (engine ABI 1.3, kCapTensorRemap; the same
  // window the DMA engines get) and waits for each answer (bounded). True
  // when every one applied it. False, logged, when the engines lack the
  // capability or one refused or did not answer: those that applied it are
  // set back to no window, and stitched buffers stay out of the engines' reach.
  bool set_tensor_remap(hal::tensor::TensorEngine* engines, uint32_t n, uint64_t base, uint64_t size);
  // Where the tensor engines' reach ends for a GEMM operand: the end of the
  // remap window after set_tensor_remap succeeded, while every stitched
  // allocation has its translated MPU windows (mpu_stats().stitched_skipped
  // is 0); else `remap_base` (no stitched allocation is reachable).
  [[nodiscard]] uint64_t tensor_reach(uint64_t remap_base) const;

  // SPI of engine vector v (valid once present()).
  [[nodiscard]] uint32_t spi(uint16_t vector) const { return first_spi_ + vector; }

 private:
  bool probe(const Boot& boot);
  void drain_errors();

  hal::copy::EngineRegion region_;
  bool present_ = false;
  uint32_t first_spi_ = 0;
  uint32_t mpu_gen_ = 0;
  MpuTableStats mpu_stats_{};
  uint64_t errors_[vtrn::engine::kEngineErrorCount] = {};
  uint64_t errors_lost_ = 0;
  uint64_t mpu_timeouts_ = 0;
  uint64_t tensor_remap_end_ = 0;  // base + size once every tensor engine applied it
};

EnginesService& service();

// Waits until done() for at most `limit_ns`, ringing `vector` again every
// 10 ms (a doorbell is a hint and can be lost). False on timeout.
template <typename Done>
bool wait_ack(hal::copy::EngineRegion& r, Done done, uint16_t vector, uint64_t limit_ns);
bool wait_ack_impl(hal::copy::EngineRegion& r, bool (*done)(void*), void* ctx, uint16_t vector, uint64_t limit_ns);
template <typename Done>
bool wait_ack(hal::copy::EngineRegion& r, Done done, uint16_t vector, uint64_t limit_ns) {
  return wait_ack_impl(r, [](void* c) { return (*static_cast<Done*>(c))(); }, &done, vector, limit_ns);
}

// The engine function's interrupt handler counts here (any vector).
uint64_t irq_count();

}  // namespace fw::engines
