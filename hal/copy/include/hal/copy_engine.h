// hal::copy engine backend: the firmware's driver for the chip's hardware
// engines (vtrn-hw, engine_abi.h). Two pieces:
//  - EngineRegion: the engine function's shared region (BAR2 of PCI 00:02.0)
//    and its Doorbell register (BAR0 + 0x0C): the ID block the engines are
//    discovered from, the chip-wide reset handshake, the MPU table, the error
//    ring and fault injection. hal/tensor drives the tensor engines through
//    it too.
//  - HwEngine: a hal::copy::Engine on one DMA engine's firmware queue. An
//    asynchronous engine: start() writes one descriptor (a whole chain) and
//    rings the engine's vector, poll_done() reaps its completion. Also the
//    engine's host-queue configuration (DmaConfig).
//
// Access rules (as the ABI documents): index words and the doorbell go
// through hal::mmio (a barrier orders the entry before the index, and the
// index before the doorbell); entries are written before the index that
// publishes them and copied out after the index that covers them. Nothing
// read from the region is trusted beyond what the ABI guarantees: counts
// and depths from the ID block are checked against the ABI limits at init.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hal/copy.h"
#include "hal/status.h"
#include "vtrn/dma_abi.h"
#include "vtrn/engine_abi.h"

namespace hal::copy {

class EngineRegion {
 public:
  EngineRegion() = default;
  EngineRegion(const EngineRegion&) = delete;
  EngineRegion& operator=(const EngineRegion&) = delete;

  // `region`/`size`: the function's BAR2; `doorbell`: its BAR0 Doorbell
  // register. kNotFound: magic mismatch (not an engine function, or vtrn-hw
  // has not published it); kBadHardware: another ABI major, a region smaller
  // than the ABI's, or engine counts / depths outside the ABI (link ports:
  // at most kMaxLinkPorts, and none without kCapLinkEngines).
  Status init(uintptr_t region, uint64_t size, uintptr_t doorbell);

  [[nodiscard]] const vtrn::engine::IdBlock& id() const { return id_; }
  [[nodiscard]] uint32_t dma_engines() const { return id_.dma_engines; }
  [[nodiscard]] uint32_t tensor_engines() const { return id_.tensor_engines; }
  // ABI 1.4: link engines (0 without kCapLinkEngines).
  [[nodiscard]] uint32_t link_ports() const { return id_.link_ports; }
  [[nodiscard]] uintptr_t base() const { return base_; }

  // Doorbell = vtrn-hw's peer id << 16 | vector.
  Status ring(uint16_t vector);

  // Chip-wide engine reset: bumps reset_req and rings kVectorControl; done
  // once reset_done(). Every queue restarts at index 0; work in flight is
  // the caller's to complete (it never lands after reset_done()).
  Status begin_reset();
  [[nodiscard]] bool reset_done();

  // Programs the next MPU generation with `count` windows (all of them, the
  // bank is replaced) and rings kVectorControl. kOutOfRange: more than
  // kMpuWindows. *generation gets the new generation.
  Status mpu_program(const vtrn::engine::MpuWindow* windows, uint32_t count, uint32_t* generation);
  // True once every engine has acknowledged `generation` (an engine that is
  // idle acknowledges on its next pass; the doorbell above wakes it); the
  // link engines too (LinkEngineBlock::mpu_ack) with kCapLinkEngines.
  [[nodiscard]] bool mpu_acked(uint32_t generation) const;

  void arm_errors(bool on);
  // Copies the next error record since the last call; kNotFound if none.
  // A reader that fell more than kErrorRecords behind skips to the oldest
  // record still there (*lost counts the skipped ones).
  Status next_error(vtrn::engine::ErrorRecord* out, uint32_t* lost);
  // True when next_error() has a record (one index read).
  [[nodiscard]] bool errors_pending() const;
  // Fault injection (engine_abi.h ControlBlock); injected() once it fired.
  Status inject(uint32_t kind, uint32_t engine);
  [[nodiscard]] bool injected() const;

  [[nodiscard]] uint32_t heartbeat() const;

  [[nodiscard]] vtrn::engine::ControlBlock* control() const;
  [[nodiscard]] vtrn::engine::DmaEngineBlock* dma(uint32_t i) const;
  [[nodiscard]] vtrn::engine::TensorEngineBlock* tensor(uint32_t j) const;
  [[nodiscard]] vtrn::engine::LinkEngineBlock* link(uint32_t p) const;

 private:
  uintptr_t base_ = 0;
  uintptr_t doorbell_ = 0;
  vtrn::engine::IdBlock id_{};
  uint32_t reset_req_ = 0;
  uint32_t mpu_gen_ = 0;
  uint32_t error_cursor_ = 0;
  uint32_t inject_seq_ = 0;
};

class HwEngine final : public Engine {
 public:
  HwEngine() = default;

  // kNotReady: the region is not initialised; kOutOfRange: no DMA engine
  // `index`. Restarts this side of the firmware queue at index 0 (call after
  // a chip engine reset).
  Status init(EngineRegion& region, uint32_t index);

  // Writes the host-queue configuration and rings the engine; config_done()
  // tells when it was applied (*status: EngineError | ConfigField << 8).
  Status configure(const vtrn::engine::DmaConfig& config);
  [[nodiscard]] bool config_done(uint32_t* status) const;

  // 1 = the engine interrupts on each completed copy.
  void arm_irq(bool on);
  // The dma_abi.h status of the last completed copy (kBadHardware in the
  // Completion maps to this for anything but kOk).
  [[nodiscard]] vtrn::dma::Status last_status() const { return last_status_; }

 private:
  Capabilities do_capabilities() const override;
  Status do_start(void* dst, const void* src, size_t length) override;
  bool do_poll(Completion* out) override;

  EngineRegion* region_ = nullptr;
  vtrn::engine::DmaEngineBlock* blk_ = nullptr;
  uint32_t index_ = 0;
  uint32_t sq_prod_ = 0;
  uint32_t cq_cons_ = 0;
  uint32_t config_gen_ = 0;
  uint64_t cookie_ = 0;
  vtrn::dma::Status last_status_ = vtrn::dma::kOk;
};

}  // namespace hal::copy
