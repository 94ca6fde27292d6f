// vtrn::hw::Mpu: an engine's private snapshot of the MPU table the firmware
// programs in the engine region (engine_abi.h MpuBlock), and the check every
// HBM range of a descriptor or tensor operand goes through.
//
// The snapshot is taken per unit of work: refresh() re-reads the shared
// table only when its generation changed (one acquire load otherwise), copies
// the published bank between two reads of the generation, and sorts it, so a
// check is a binary search and never reads shared memory the firmware may be
// rewriting. A bank whose valid windows overlap is refused whole (every HBM
// check fails) rather than guessed at.
//
// It is the dma::HbmPolicy the common/dma queue logic calls, so descriptor
// statuses keep their dma_abi.h meaning: a range in a poisoned window is
// kErrEcc, one not inside one live window kErrNotAllocated. The last refusal
// is kept (address, length, window tag) for the error record.
//
// Not thread safe: each engine thread owns one.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/dma_queue.h"
#include "vtrn/engine_abi.h"

namespace vtrn::hw {

struct MpuFault {
  uint64_t address = 0;
  uint64_t length = 0;
  dma::Status status = dma::kOk;
};

class Mpu final : public dma::HbmPolicy {
 public:
  Mpu() = default;
  Mpu(const Mpu&) = delete;
  Mpu& operator=(const Mpu&) = delete;

  // Re-reads `block` if its generation moved. Returns the generation the
  // snapshot now reflects (0: MPU off, every HBM range allowed).
  uint32_t refresh(const engine::MpuBlock* block);
  // Forgets the snapshot (chip reset): generation 0.
  void clear();

  [[nodiscard]] dma::Status check(uint64_t addr, uint64_t length) const override;

  [[nodiscard]] uint32_t generation() const { return generation_; }
  [[nodiscard]] bool refused() const { return refused_; }
  [[nodiscard]] uint32_t windows() const { return alloc_count_; }
  [[nodiscard]] const MpuFault& last_fault() const { return fault_; }

 private:
  struct Range {
    uint64_t base;
    uint64_t end;  // exclusive; base < end
  };
  bool build(const engine::MpuWindow* bank, uint32_t count);

  uint32_t generation_ = 0;
  bool refused_ = false;
  engine::MpuWindow copy_[engine::kMpuWindows];
  Range alloc_[engine::kMpuWindows];
  uint32_t alloc_count_ = 0;
  Range poison_[engine::kMpuWindows];
  uint32_t poison_count_ = 0;
  mutable MpuFault fault_;
};

}  // namespace vtrn::hw
