// fw::engines MPU table: the windows the chip's engines may touch in HBM,
// built from the HBM allocator (include/vtrn/engine_abi.h, MpuBlock). It has
// no hardware in it and is built into a host unit test as well as the image.
//
// What goes in, in order of priority, sorted by address:
//  - one poison window (kMpuPoison) per run of adjacent retired pages, so an
//    engine access over a retired page fails with kErrEcc whether or not it
//    is inside an allocation, and one over each poisoned allocation (all of
//    it is refused, as the CPU path's fw::hbm::check does);
//  - one valid window per run of adjacent live allocations in the identity
//    window (tag = the first allocation's page index + 1);
//  - with `translate` (engine ABI 1.2, DMA engines given the remap
//    window): one kMpuTranslate window per physical extent of each live
//    stitched allocation, device address -> physical pages, all of one
//    allocation under one tag (1, 2, ... in address order), so a range may
//    cross its extents and never into a neighbour. Translated windows take
//    at most half the bank; a stitched allocation that does not fit, or
//    any without `translate`, gets no window (an engine refuses its
//    addresses) and is counted in stitched_skipped. A poisoned stitched
//    allocation gets a poison window over its device addresses instead.
// The ABI has kMpuWindows (256) windows and the allocator up to 4096 live
// allocations. When the valid windows do not fit beside the poison ones,
// the smallest gaps between neighbouring valid windows are closed first,
// until they fit: the table then lets engines reach those gaps (free HBM,
// never a retired page, which keeps its poison window). The bytes exposed
// that way are reported (MpuTableStats::merged_gap_bytes) and logged.
#pragma once

#include <stdint.h>

#include "vtrn/engine_abi.h"
#include "vtrn/error.h"
#include "vtrn/hbm.h"

namespace fw::engines {

struct MpuTableStats {
  uint32_t valid_windows = 0;
  uint32_t poison_windows = 0;
  uint32_t allocations = 0;         // identity-window allocations covered
  uint32_t stitched = 0;            // stitched allocations with translated windows
  uint32_t translated_windows = 0;  // their windows (one per extent)
  uint32_t stitched_skipped = 0;    // stitched allocations left without a window
  uint32_t merged_gaps = 0;         // gaps closed to fit kMpuWindows
  uint64_t merged_gap_bytes = 0;    // free HBM the closed gaps expose
};

// Fills out[0..*count) (cap >= 1, at most kMpuWindows used) from `a`.
// `whole_hbm`: one valid window over all of HBM instead of the identity
// allocations (poison and translated windows still). `translate`: stitched
// allocations get translated windows (above). kCapacity when the poison
// windows alone do not fit `cap`.
[[nodiscard]] vtrn::Error build_mpu_table(const vtrn::hbm::Allocator& a, bool whole_hbm, bool translate,
                                          vtrn::engine::MpuWindow* out, uint32_t cap, uint32_t* count,
                                          MpuTableStats* stats);

}  // namespace fw::engines
