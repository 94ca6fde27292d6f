// Identity-mapped MMU shared by every core: 4 KiB granule, 40-bit VA = PA
// (T0SZ = 24, walks start at level 0 with 2 entries, each to a level-1 table
// of 1 GiB entries). Regions are mapped with the largest block that fits:
// 1 GiB where a region covers a whole aligned GiB, else 2 MiB blocks in a
// level-2 table; a range is rounded out to 2 MiB, so two regions of
// different types must not share a 2 MiB block (map() panics naming both).
//
// Mappings are only ever added (invalid -> valid), never changed, so no
// break-before-make sequence is needed with the MMU on. Tables live in .bss.
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

}  // namespace fw::mmu
