// Identity-mapped MMU shared by every core: 4 KiB granule, 40-bit VA = PA
// (T0SZ = 24, walks start at level 0 with 2 entries, each to a level-1 table
// of 1 GiB entries). Regions are mapped with the largest block that fits:
// 1 GiB where a region covers a whole aligned GiB, else 2 MiB blocks in a
// level-2 table; a range is rounded out to 2 MiB, so two regions of
// different types must not share a 2 MiB block (map() panics naming both).
//
// Identity mappings are only ever added (invalid -> valid), never changed,
// so no break-before-make sequence is needed with the MMU on. Tables live
// in .bss.
//
// The remap window is the one non-identity part: device addresses of
// stitched HBM allocations (common/hbm), mapped page by page onto HBM
// pages with the HBM's attributes. Its level-2 and level-3 tables are
// static, sized for kRemapMaxBytes and linked in at reserve time, so
// map/unmap only write level-3 entries: map turns invalid entries valid
// (nothing can be cached for them), unmap turns them invalid and then
// invalidates the TLBs of every core (TLBI VAE1IS per page, VMALLE1IS for
// large ranges, DSB ISH, ISB) before returning, so the physical pages can
// be reused right after. An entry never changes from one valid mapping to
// another, which is what break-before-make requires.
#pragma once

#include <stdint.h>

namespace fw::mmu {

enum class Memory : uint8_t {
  kDevice,       // Device-nGnRnE, never executable: MMIO, ECAM
  kNormal,       // normal write-back, executable: RAM holding the image
  kNormalNoExec, // normal write-back, never executable: RAM data, BAR2 (host-written)
};

// Maps the GiB that holds the image and the platform DTB (the image's GiB
// in 2 MiB blocks, with the stack guard pages of boot/firmware.ld, the
// secondary cores' included, left unmapped), then turns the MMU and caches on. Called once, before any code that may issue unaligned
// accesses (picolibc's string routines, libfdt).
void init_early(uint64_t platform_dtb_address);

// fw::smp, before the first CPU_ON: from now on table updates are made
// visible to every core (broadcast TLB maintenance).
void share_with_secondaries();

// Secondary cores: the same tables and attributes, MMU and caches on. Call
// after core 0's init_early, before any unaligned access on that core.
void enable_this_core();

// Adds an identity mapping for [base, base + size); `what` names the region
// in the panic message on a conflict.
void map(uint64_t base, uint64_t size, Memory type, const char* what);

// The remap window: at most kRemapMaxBytes at a 1 GiB-aligned base that
// no identity mapping touches (checked; panics otherwise). Once, at boot.
inline constexpr uint64_t kRemapMaxBytes = 1ull << 30;
void reserve_remap(uint64_t base, uint64_t size);
// The window reserve_remap gave (0/0 before): the range the engines are
// given for stitched allocations too (engine ABI remap windows).
[[nodiscard]] uint64_t remap_base();
[[nodiscard]] uint64_t remap_size();
// Maps [va, va + bytes) of the window onto [pa, pa + bytes) (4 KiB-aligned,
// normal write-back memory, not executable). False when the range leaves
// the window or an entry is already valid (nothing is changed then).
[[nodiscard]] bool remap(uint64_t va, uint64_t pa, uint64_t bytes);
// Removes the window mappings of [va, va + bytes); when it returns no core
// can reach the old pages through them.
void unmap_remap(uint64_t va, uint64_t bytes);

}  // namespace fw::mmu
