// The second reference of hbm_bench: a power-of-two segregated free list
// over the same HBM range as vtrn::hbm (host-only benchmark code, not an
// allocator the firmware could use).
//
// It is the simplest allocator with constant-time operations: a request
// is rounded up to 2^k pages, served from the head of list k, or carved
// from the top of the never-used part of the range when list k is empty;
// free pushes the block back on its list. Nothing is split or coalesced,
// so a block of 2^k pages only ever serves requests of class k, and no
// owner, quota, category, lookup, retirement or stitching exists. Its
// metadata is out of band like vtrn::hbm's (the memory is device memory):
// a page-indexed table of next links and of classes. What it costs per
// operation is the floor of this design space; what vtrn::hbm spends above
// it pays for the features, and the churn shows what the rounding and the
// missing coalescing cost in memory (failures where vtrn::hbm has none).
#pragma once

#include <stdint.h>

#include <vector>

namespace vtrn::hbm::bench {

class Pow2Lists {
 public:
  Pow2Lists(uint64_t base, uint64_t bytes, uint64_t page)
      : base_(base), shift_(uint32_t(__builtin_ctzll(page))), pages_(uint32_t(bytes / page)),
        next_(pages_), cls_(pages_) {}

  // 0 when the class list is empty and the untouched range cannot hold it.
  uint64_t allocate(uint64_t size) {
    uint64_t pages = (size + (1ull << shift_) - 1) >> shift_;
    uint32_t k = pages <= 1 ? 0 : 64 - uint32_t(__builtin_clzll(pages - 1));
    uint32_t p = head_[k];
    if (p != 0) {
      head_[k] = next_[p - 1];
    } else {
      if (top_ + (uint64_t(1) << k) > pages_) return 0;
      p = top_ + 1;
      top_ += uint32_t(1) << k;
      cls_[p - 1] = uint8_t(k);
    }
    return base_ + (uint64_t(p - 1) << shift_);
  }

  void free(uint64_t addr) {
    uint32_t p = uint32_t((addr - base_) >> shift_);
    uint32_t k = cls_[p];
    next_[p] = head_[k];
    head_[k] = p + 1;
  }

 private:
  uint64_t base_;
  uint32_t shift_;
  uint32_t pages_;
  uint32_t top_ = 0;          // pages below it have been handed out at least once
  uint32_t head_[33] = {};    // first free block of each class, page + 1; 0 = empty
  std::vector<uint32_t> next_;  // per page: the next free block of its class, page + 1
  std::vector<uint8_t> cls_;    // per page: the class of the block that starts there
};

}  // namespace vtrn::hbm::bench
