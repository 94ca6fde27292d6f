// vtrn::hw::DmaEngine: one DMA engine of a chip, as vtrn-hw runs it. It
// fetches descriptors itself from the rings it was given (its firmware queue
// in the engine region, and the host's submission rings in BAR2 that its
// DmaConfig names), validates and completes them with the common/dma queue
// logic (so every dma_abi.h status keeps its meaning), moves the bytes with
// the host's memcpy, and checks every HBM range against the firmware's MPU
// snapshot.
//
// Interrupts: an IRQ chain on a host queue (irq_armed) goes straight to the
// host's DMA completion vector; an IRQ chain on the firmware queue raises
// the engine's vector; host-queue activity raises it too when the firmware
// asked (host_irq_armed, at most once per pass). A descriptor refused for an
// address (range, wrap, MPU, poison) also posts an error record, as does
// one failed by an injected fault (kInjectDmaFail: dma::kErrEngine).
//
// Not a thread: run_pass() does one bounded round and returns; the engine
// thread (chip.cpp) loops, spins briefly after work and blocks when idle.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/dma_queue.h"
#include "vtrn/engine_abi.h"
#include "vtrn/hw/engine_context.h"
#include "vtrn/hw/engine_props.h"
#include "vtrn/hw/mpu.h"

namespace vtrn::hw {

struct DmaPass {
  uint32_t descriptors = 0;
  uint32_t completions = 0;
  bool worked = false;  // descriptors, completions, a config or a queue reset
};

// Per queue per pass: 64 B descriptors go in batches (a default ring of
// 256 in one pass, some 20 us: one completion interrupt for all of them),
// 1 MiB ones a few at a time, so one busy queue never holds the others for
// longer than its 8 MiB take (about 1 ms).
struct DmaBudget {
  uint32_t descriptors = 256;
  uint64_t bytes = 8u << 20;
};

class DmaEngine final : private dma::ErrorHook {
 public:
  DmaEngine(const ChipMemory& mem, uint32_t index, const EngineProps& props, Signals& signals,
            ErrorLog& errors, Clock clock);
  DmaEngine(const DmaEngine&) = delete;
  DmaEngine& operator=(const DmaEngine&) = delete;

  // Chip reset: no config, firmware queue at index 0, not halted, MPU off.
  void reset();
  DmaPass run_pass();
  // True when a pass would find something: a config to apply, a
  // descriptor or a queue reset on any ring it serves, a fault to inject.
  [[nodiscard]] bool has_work() const;
  [[nodiscard]] bool serves_host() const { return host_mask_ != 0; }
  [[nodiscard]] bool halted() const { return halted_; }
  [[nodiscard]] uint32_t mpu_generation() const { return mpu_.generation(); }

 private:
  struct Counting final : dma::Copier {
    void copy(void* dst, const void* src, size_t length) override;
    uint64_t bytes = 0;
    uint64_t copies = 0;
  };

  void on_descriptor_error(const dma::Descriptor& d, dma::Status status) override;
  void apply_config();
  bool check_inject();
  void publish_stats(uint64_t busy_ns, uint64_t bytes, uint32_t descriptors, uint32_t chains,
                     uint32_t errors, uint32_t fw_irqs, uint32_t host_irqs);

  const ChipMemory& mem_;
  const uint32_t index_;
  const EngineProps& props_;
  Signals& signals_;
  ErrorLog& errors_;
  Clock clock_;
  engine::DmaEngineBlock* blk_;
  StatsWriter stats_;
  DmaBudget budget_;

  Mpu mpu_;
  dma::AddressMap map_;
  dma::Queue fw_queue_;
  dma::Queue host_[dma::kMaxQueues];
  uint32_t host_mask_ = 0;
  bool paused_ = false;             // kDmaConfigPaused: host queues kept, not served
  engine::DmaConfig applied_{};     // the host-queue config in force (host_mask_ != 0)
  uint32_t config_seen_ = 0;
  uint32_t inject_seen_ = 0;
  bool halted_ = false;
  bool fail_armed_ = false;  // kInjectDmaFail: the next descriptor copied fails (kErrEngine)
  uint32_t fail_seq_ = 0;    // its inject_seq, acked when it fired
  uint32_t current_queue_ = engine::kQueueFirmware;
  uint32_t pass_errors_ = 0;
};

}  // namespace vtrn::hw
