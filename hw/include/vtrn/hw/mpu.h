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
// Translation (ABI 1.2, the IOMMU half): an engine given a remap window
// (set_remap) reserves that much address space (PROT_NONE) and maps every
// translated window of the snapshot onto the chip's RAM memfd there
// (MAP_SHARED | MAP_FIXED at phys), so remap_view() + (addr - remap_base) is
// the engine-side pointer of a stitched allocation's device address and one
// memcpy covers a range across its extents, as the firmware's MMU gives the
// cores. Only the mappings that changed are redone, in refresh(), on the
// engine's own thread: no other thread sees this view. Unmapped parts of
// the view stay PROT_NONE, and check() admits a remap address only inside
// translated windows that are mapped. Without set_remap translated windows
// are ignored (an engine given no remap window in its DmaConfig or, ABI
// 1.3, its TensorConfig), so their addresses reach nothing. DMA and tensor
// engines share this code: each owns one Mpu and its view.
//
// It is the dma::HbmPolicy the common/dma queue logic calls, so descriptor
// statuses keep their dma_abi.h meaning: a range in a poisoned window is
// kErrEcc, one not inside one live window (or one allocation's adjacent
// translated windows) kErrNotAllocated. The last refusal is kept (address,
// length, status) for the error record.
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

// Where translated windows may point, and the memory behind them.
struct RemapTarget {
  int ram_fd = -1;          // the chip's RAM memfd (offset 0 = ram_base)
  uint64_t ram_base = 0;
  uint64_t ram_size = 0;
  uint64_t hbm_base = 0;    // phys of every translated window lies in [hbm_base, + hbm_size)
  uint64_t hbm_size = 0;
  uint64_t remap_base = 0;  // device addresses of translated windows
  uint64_t remap_size = 0;
};

class Mpu final : public dma::HbmPolicy {
 public:
  Mpu() = default;
  ~Mpu();
  Mpu(const Mpu&) = delete;
  Mpu& operator=(const Mpu&) = delete;

  // Re-reads `block` if its generation moved. Returns the generation the
  // snapshot now reflects (0: MPU off, every HBM range allowed).
  uint32_t refresh(const engine::MpuBlock* block);
  // Forgets the snapshot (chip reset): generation 0. The remap window, if
  // any, stays reserved but every translation is removed.
  void clear();

  // Turns translation on for `t` (replacing an earlier window). The next
  // refresh() rebuilds the snapshot. False, translation off, when `t` is
  // malformed (no fd, remap window unaligned, wrapping, over RAM, larger
  // than kMaxRemapBytes) or the address space cannot be reserved.
  bool set_remap(const RemapTarget& t);
  // Translation off; the view is released.
  void clear_remap();
  [[nodiscard]] uint8_t* remap_view() const { return view_; }
  [[nodiscard]] const RemapTarget& remap() const { return remap_; }

  [[nodiscard]] dma::Status check(uint64_t addr, uint64_t length) const override;

  [[nodiscard]] uint32_t generation() const { return generation_; }
  [[nodiscard]] bool refused() const { return refused_; }
  [[nodiscard]] uint32_t windows() const { return alloc_count_; }
  [[nodiscard]] uint32_t translated_windows() const { return mapped_count_; }
  [[nodiscard]] const MpuFault& last_fault() const { return fault_; }

 private:
  struct Range {
    uint64_t base;
    uint64_t end;   // exclusive; base < end
    uint64_t phys;  // translated: chip physical address of base
    uint32_t tag;
    bool translated;
  };
  bool build(const engine::MpuWindow* bank, uint32_t count);
  // Makes the view's mappings those of the translated ranges in alloc_.
  bool sync_view();
  void unmap_view();
  [[nodiscard]] bool in_remap(uint64_t addr, uint64_t end) const {
    return view_ != nullptr && addr < remap_.remap_base + remap_.remap_size && end > remap_.remap_base;
  }

  uint32_t generation_ = 0;
  bool refused_ = false;
  engine::MpuWindow copy_[engine::kMpuWindows];
  Range alloc_[engine::kMpuWindows];
  uint32_t alloc_count_ = 0;
  Range poison_[engine::kMpuWindows];
  uint32_t poison_count_ = 0;
  mutable uint32_t hit_ = 0;  // alloc_ index of the last window a check passed in
  mutable MpuFault fault_;

  RemapTarget remap_;
  uint8_t* view_ = nullptr;       // remap_.remap_size bytes reserved, or null
  Range mapped_[engine::kMpuWindows];  // translated windows mapped in the view, by base
  uint32_t mapped_count_ = 0;
};

}  // namespace vtrn::hw
