// The MPU table from the HBM allocator (see fw/mpu_table.h).
#include "fw/mpu_table.h"

namespace fw::engines {
namespace {

using vtrn::engine::kMpuPoison;
using vtrn::engine::kMpuTranslate;
using vtrn::engine::kMpuValid;
using vtrn::engine::MpuWindow;

constexpr uint32_t kMaxRuns = 4096;  // kLimits.max_allocations and max_retired_pages are below

struct Run {
  uint64_t base;
  uint64_t end;
  uint32_t tag;
};

// Scratch for one build: the table is rebuilt on the boot core only.
Run g_valid[kMaxRuns];
uint64_t g_gaps[kMaxRuns];
uint64_t g_pages[kMaxRuns];
vtrn::hbm::Extent g_extents[vtrn::hbm::kMaxExtents];

}  // namespace

vtrn::Error build_mpu_table(const vtrn::hbm::Allocator& a, bool whole_hbm, bool translate, MpuWindow* out,
                            uint32_t cap, uint32_t* count, MpuTableStats* stats) {
  using vtrn::Code;
  *count = 0;
  *stats = MpuTableStats{};
  if (cap == 0 || cap > vtrn::engine::kMpuWindows) {
    return vtrn::Error(Code::kInvalidArgument, "mpu table: capacity %u outside 1..%u", unsigned(cap),
                       unsigned(vtrn::engine::kMpuWindows));
  }
  const uint64_t page = a.page_bytes();

  // Poison windows: runs of adjacent retired pages (ascending).
  uint32_t retired = 0;
  if (a.export_retired(g_pages, kMaxRuns, &retired) != vtrn::hbm::Error::kOk) {
    return vtrn::Error(Code::kCapacity, "mpu table: more than %u retired pages", unsigned(kMaxRuns));
  }
  uint32_t n = 0;
  for (uint32_t i = 0; i < retired; ++i) {
    if (n > 0 && out[n - 1].base + out[n - 1].size == g_pages[i]) {
      out[n - 1].size += page;
      continue;
    }
    if (n == cap) {
      return vtrn::Error(Code::kCapacity, "mpu table: %u retired pages need more than %u windows",
                         unsigned(retired), unsigned(cap));
    }
    out[n++] = MpuWindow{g_pages[i], page, kMpuValid | kMpuPoison, 0, 0};
  }
  stats->poison_windows = n;

  // Valid windows: runs of adjacent live identity-window allocations, and
  // one translated window per extent of each stitched allocation (at most
  // half the bank, so identity allocations always keep room: a stitched
  // allocation that does not fit gets no window and the engines refuse
  // its addresses).
  const uint32_t translate_cap = cap / 2;
  uint32_t runs = 0;
  uint32_t stitched_tag = 0;
  vtrn::hbm::AllocationInfo info;
  for (uint64_t from = 0; a.next_allocation(from, &info) == vtrn::hbm::Error::kOk; from = info.addr + 1) {
    if (info.poisoned) {
      // A poisoned allocation is refused whole (kErrEcc), as fw::hbm::check
      // does; a stitched one at its device addresses.
      if (n == cap) {
        return vtrn::Error(Code::kCapacity, "mpu table: poisoned allocations need more than %u windows",
                           unsigned(cap));
      }
      out[n++] = MpuWindow{info.addr, info.bytes, kMpuValid | kMpuPoison, 0, 0};
      ++stats->poison_windows;
      if (!info.stitched) ++stats->allocations;
      continue;
    }
    if (info.stitched) {
      uint32_t extents = 0;
      if (!translate || a.extents(info.addr, g_extents, vtrn::hbm::kMaxExtents, &extents) != vtrn::hbm::Error::kOk ||
          stats->translated_windows + extents > translate_cap || n + extents > cap) {
        ++stats->stitched_skipped;
        continue;
      }
      ++stitched_tag;
      for (uint32_t i = 0; i < extents; ++i) {
        out[n++] = MpuWindow{g_extents[i].device_addr, g_extents[i].bytes, kMpuValid | kMpuTranslate, stitched_tag,
                             g_extents[i].phys_addr};
      }
      stats->translated_windows += extents;
      ++stats->stitched;
      continue;
    }
    ++stats->allocations;
    if (whole_hbm) continue;
    if (runs > 0 && g_valid[runs - 1].end == info.addr) {
      g_valid[runs - 1].end = info.addr + info.bytes;
      continue;
    }
    if (runs == kMaxRuns) return vtrn::Error(Code::kCapacity, "mpu table: more than %u runs", unsigned(kMaxRuns));
    g_valid[runs++] = Run{info.addr, info.addr + info.bytes, uint32_t((info.addr - a.base()) / page + 1)};
  }

  if (whole_hbm) {
    if (n == cap) return vtrn::Error(Code::kCapacity, "mpu table: no room for the HBM window");
    out[n++] = MpuWindow{a.base(), a.total_bytes(), kMpuValid, 0, 0};
    stats->valid_windows = 1;
    *count = n;
    return vtrn::Error();
  }

  // Close the smallest gaps until the runs fit beside the poison windows.
  const uint32_t budget = cap - n;
  if (runs > budget) {
    if (budget == 0) {
      return vtrn::Error(Code::kCapacity, "mpu table: %u poison and translated windows leave no room for allocations",
                         unsigned(n));
    }
    const uint32_t to_close = runs - budget;
    uint64_t hi = 0;
    for (uint32_t i = 0; i + 1 < runs; ++i) {
      g_gaps[i] = g_valid[i + 1].base - g_valid[i].end;
      if (g_gaps[i] > hi) hi = g_gaps[i];
    }
    // The to_close-th smallest gap, by bisection on its value (no sort, no
    // heap: 64 counting passes at most).
    auto at_most = [&](uint64_t t) {
      uint32_t n_le = 0;
      for (uint32_t i = 0; i + 1 < runs; ++i) n_le += g_gaps[i] <= t ? 1 : 0;
      return n_le;
    };
    uint64_t lo = 0;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (at_most(mid) >= to_close) hi = mid;
      else lo = mid + 1;
    }
    const uint64_t threshold = lo;
    const uint32_t below = threshold == 0 ? 0 : at_most(threshold - 1);  // all closed
    uint32_t at_threshold = to_close - below;  // and this many equal to it, left to right
    uint32_t kept = 0;
    for (uint32_t i = 0; i < runs; ++i) {
      if (kept > 0) {
        const uint64_t gap = g_valid[i].base - g_valid[kept - 1].end;
        const bool close = gap < threshold || (gap == threshold && at_threshold > 0);
        if (close) {
          if (gap == threshold) --at_threshold;
          ++stats->merged_gaps;
          stats->merged_gap_bytes += gap;
          g_valid[kept - 1].end = g_valid[i].end;
          continue;
        }
      }
      g_valid[kept++] = g_valid[i];
    }
    runs = kept;
  }
  for (uint32_t i = 0; i < runs; ++i) {
    out[n++] = MpuWindow{g_valid[i].base, g_valid[i].end - g_valid[i].base, kMpuValid, g_valid[i].tag, 0};
  }
  stats->valid_windows = runs;
  *count = n;
  return vtrn::Error();
}

}  // namespace fw::engines
