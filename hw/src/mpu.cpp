// The MPU snapshot and check. See vtrn/hw/mpu.h.
#include "vtrn/hw/mpu.h"

#include <string.h>

#include <algorithm>

#include "vtrn/ctrl_ring.h"

namespace vtrn::hw {

using hostif::load_acquire;

void Mpu::clear() {
  generation_ = 0;
  refused_ = false;
  alloc_count_ = poison_count_ = 0;
  fault_ = MpuFault{};
}

bool Mpu::build(const engine::MpuWindow* bank, uint32_t count) {
  alloc_count_ = poison_count_ = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const engine::MpuWindow& w = bank[i];
    if (!(w.flags & engine::kMpuValid)) continue;
    if ((w.flags & ~uint32_t(engine::kMpuKnownFlags)) || w.size == 0 || w.base > UINT64_MAX - w.size)
      return false;
    const Range r{w.base, w.base + w.size};
    if (w.flags & engine::kMpuPoison) {
      poison_[poison_count_++] = r;
    } else {
      alloc_[alloc_count_++] = r;
    }
  }
  auto by_base = [](const Range& a, const Range& b) { return a.base < b.base; };
  std::sort(alloc_, alloc_ + alloc_count_, by_base);
  std::sort(poison_, poison_ + poison_count_, by_base);
  for (uint32_t i = 1; i < alloc_count_; ++i) {
    if (alloc_[i].base < alloc_[i - 1].end) return false;
  }
  return true;
}

uint32_t Mpu::refresh(const engine::MpuBlock* block) {
  uint32_t gen = load_acquire(&block->header.generation);
  if (gen == generation_) return generation_;
  for (;;) {
    if (gen == 0) {
      clear();
      return 0;
    }
    const uint32_t b = gen & 1;
    uint32_t count = __atomic_load_n(&block->bank_count[b], __ATOMIC_ACQUIRE);
    if (count > engine::kMpuWindows) count = engine::kMpuWindows + 1;
    const uint32_t n = count > engine::kMpuWindows ? 0 : count;
    memcpy(copy_, block->bank[b], n * sizeof(engine::MpuWindow));
    // Acquire: the copy above is complete before we look at the generation
    // again; a fw that started rewriting bank b has moved it by 2.
    const uint32_t again = load_acquire(&block->header.generation);
    if (uint32_t(again - gen) >= 2) {
      gen = again;
      continue;
    }
    refused_ = count > engine::kMpuWindows || !build(copy_, n);
    if (refused_) alloc_count_ = poison_count_ = 0;
    generation_ = gen;
    return generation_;
  }
}

dma::Status Mpu::check(uint64_t addr, uint64_t length) const {
  if (generation_ == 0) return dma::kOk;
  auto refuse = [&](dma::Status s) {
    fault_ = MpuFault{addr, length, s};
    return s;
  };
  if (length == 0 || addr > UINT64_MAX - length) return refuse(dma::kErrNotAllocated);
  const uint64_t end = addr + length;
  // Poison first: a retired page inside a live allocation is an ECC error,
  // not a missing allocation. Windows sorted by base; any overlap counts.
  for (uint32_t i = 0; i < poison_count_ && poison_[i].base < end; ++i) {
    if (poison_[i].end > addr) return refuse(dma::kErrEcc);
  }
  // The last window starting at or below addr is the only candidate.
  const Range* first = alloc_;
  const Range* last = alloc_ + alloc_count_;
  const Range* it = std::upper_bound(first, last, addr, [](uint64_t a, const Range& r) { return a < r.base; });
  if (it == first) return refuse(dma::kErrNotAllocated);
  --it;
  if (end > it->end) return refuse(dma::kErrNotAllocated);
  return dma::kOk;
}

}  // namespace vtrn::hw
