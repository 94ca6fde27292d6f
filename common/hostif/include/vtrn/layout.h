// The BAR2 region table: the firmware publishes it (publish_layout), the host
// checks it (validate_layout) before touching any region. Validation is
// strict: every required region present once, inside BAR2, aligned, sized as
// the ABI requires, not overlapping another.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/error.h"
#include "vtrn/hostif.h"

namespace vtrn::hostif {

struct Layout {
  uint64_t bar2_size = 0;
  Region regions[kRegionTypeCount] = {};  // indexed by RegionType; size 0 = absent
  [[nodiscard]] const Region& at(RegionType t) const { return regions[t]; }
};

// Fills the region table of `hdr` with the default layout for a BAR2 of
// `bar2_size` bytes (>= kMinBar2Size). With dma_queues > 0 a DMA region of
// dma::dma_region_bytes(dma_queues, dma_depth) follows the fixed regions at
// kDmaOffset; the host window starts at the next 1 MiB boundary after the
// last region and runs to the end of BAR2. Returns false (table untouched)
// when that leaves less than 1 MiB of host window.
bool publish_layout(FwHeader* hdr, uint64_t bar2_size, uint32_t dma_queues = 0, uint32_t dma_depth = 0);

// Checks a copy of the firmware header against the BAR2 size the host
// mapped; fills *out (when given) on success. A failure is kBadHardware with
// one line naming the problem.
[[nodiscard]] vtrn::Error validate_layout(const FwHeader& copy, uint64_t bar2_size, Layout* out);

}  // namespace vtrn::hostif
