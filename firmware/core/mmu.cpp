// Identity page tables and MMU enable. See fw/mmu.h for the policy. The one
// place finer than 2 MiB is the image: its two stack guard pages are left
// unmapped (level-3 table), so a stack overflow is a data abort.
//
// Descriptor formats follow the Arm ARM (VMSAv8-64, 4 KiB granule): level 0
// and 1 table descriptors point to the next level; level 1 and 2 block
// descriptors map 1 GiB / 2 MiB. Attributes come from MAIR_EL1 indexes set
// below. Tables are written while the MMU may already be on, so every update
// ends with DSB (the walker sees the store), TLBI (no stale negative entry),
// DSB, ISB.
#include "fw/mmu.h"

#include <stddef.h>

#include "fw/panic.h"
#include "fw/smp.h"

extern "C" char __image_start[];  // boot/firmware.ld
extern "C" char __boot_stack_guard[];
extern "C" char __exception_stack_guard[];

namespace fw::mmu {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t k2MiB = 2ull << 20;
constexpr uint64_t kVaBits = 40;
constexpr uint64_t kVaLimit = 1ull << kVaBits;
constexpr unsigned kEntries = 512;
constexpr unsigned kL0Entries = 2;   // 40-bit VA: bit 39 selects the L0 entry
constexpr unsigned kMaxL2Tables = 8; // GiBs mapped with 2 MiB granularity
constexpr unsigned kMaxL3Tables = 4; // 2 MiB blocks split for stack guard pages
constexpr uint64_t kPage = 4096;

// MAIR_EL1 attribute indexes.
constexpr uint64_t kAttrDevice = 0;  // 0x00 Device-nGnRnE
constexpr uint64_t kAttrNormal = 1;  // 0xff Normal, inner/outer write-back RW-allocate
constexpr uint64_t kMair = (0x00ull << (8 * kAttrDevice)) | (0xffull << (8 * kAttrNormal));

constexpr uint64_t kDescValid = 1ull << 0;
constexpr uint64_t kDescTable = 1ull << 1;  // table (levels 0-2) vs block; page at level 3
constexpr uint64_t kDescLowMask = 3;
constexpr uint64_t kDescAttrShift = 2;
constexpr uint64_t kDescShInner = 3ull << 8;
constexpr uint64_t kDescAf = 1ull << 10;
constexpr uint64_t kDescPxn = 1ull << 53;
constexpr uint64_t kDescUxn = 1ull << 54;
constexpr uint64_t kDescAddrMask = 0x0000fffffffff000ull;

// TCR_EL1: T0SZ = 24, inner/outer write-back walks, inner shareable, 4 KiB
// granule, TTBR1 walks disabled (EPD1), IPS = 40 bits.
constexpr uint64_t kTcr = (64 - kVaBits) | (1ull << 8) | (1ull << 10) | (3ull << 12) |
                          (0ull << 14) | (1ull << 23) | (2ull << 32);

// SCTLR_EL1 bits.
constexpr uint64_t kSctlrM = 1ull << 0;
constexpr uint64_t kSctlrA = 1ull << 1;
constexpr uint64_t kSctlrC = 1ull << 2;
constexpr uint64_t kSctlrI = 1ull << 12;
constexpr uint64_t kSctlrWxn = 1ull << 19;

// The remap window's tables (see fw/mmu.h): one level-2 table per GiB and
// one level-3 table per 2 MiB of kRemapMaxBytes.
constexpr unsigned kRemapL2Tables = unsigned((kRemapMaxBytes + kGiB - 1) / kGiB);
constexpr unsigned kRemapL3Tables = unsigned(kRemapMaxBytes / k2MiB);
alignas(4096) uint64_t g_remap_l2[kRemapL2Tables][kEntries];
alignas(4096) uint64_t g_remap_l3[kRemapL3Tables][kEntries];
uint64_t g_remap_base = 0;
uint64_t g_remap_size = 0;

alignas(4096) uint64_t g_l0[kEntries];
alignas(4096) uint64_t g_l1[kL0Entries][kEntries];
alignas(4096) uint64_t g_l2[kMaxL2Tables][kEntries];
alignas(4096) uint64_t g_l3[kMaxL3Tables][kEntries];
unsigned g_l2_used = 0;
unsigned g_l3_used = 0;
bool g_enabled = false;
uint32_t g_shared = 0;  // set before the first secondary core starts

// Which region claimed each mapped 2 MiB block / GiB, for conflict messages.
struct Claim {
  uint64_t base;
  uint64_t size;
  Memory type;
  const char* what;
};
Claim g_claims[24];
unsigned g_claim_count = 0;

uint64_t block_attrs(Memory type) {
  switch (type) {
    case Memory::kDevice:
      return (kAttrDevice << kDescAttrShift) | kDescAf | kDescPxn | kDescUxn;
    case Memory::kNormal:
      return (kAttrNormal << kDescAttrShift) | kDescAf | kDescShInner | kDescUxn;
    case Memory::kNormalNoExec:
      return (kAttrNormal << kDescAttrShift) | kDescAf | kDescShInner | kDescPxn | kDescUxn;
  }
  return 0;
}

void sync_tables() {
  if (!g_enabled) return;
  if (__atomic_load_n(&g_shared, __ATOMIC_ACQUIRE)) {
    // Secondary cores walk the same tables: broadcast to the inner
    // shareable domain.
    asm volatile(
        "dsb ishst\n"
        "tlbi vmalle1is\n"
        "dsb ish\n"
        "isb" ::: "memory");
  } else {
    // Only this core has the MMU on. The local form matters under TCG:
    // a broadcast TLBI stops every vCPU of the machine, halted ones included.
    asm volatile(
        "dsb ishst\n"
        "tlbi vmalle1\n"
        "dsb ish\n"
        "isb" ::: "memory");
  }
}

const Claim* claim_at(uint64_t addr) {
  for (unsigned i = 0; i < g_claim_count; ++i) {
    const Claim& c = g_claims[i];
    if (addr >= c.base && addr - c.base < c.size) return &c;
  }
  return nullptr;
}

[[noreturn]] void conflict(uint64_t addr, const char* what) {
  const Claim* c = claim_at(addr);
  panic(vtrn::hostif::kPanicPlatform, "mmu: %s at 0x%llx overlaps %s with other attributes",
        what, (unsigned long long)addr, c ? c->what : "an earlier mapping");
}

uint64_t* l1_entry(uint64_t addr) {
  const unsigned i0 = unsigned(addr >> 39) & 1;
  if (!(g_l0[i0] & kDescValid)) {
    g_l0[i0] = uint64_t(reinterpret_cast<uintptr_t>(g_l1[i0])) | kDescValid | kDescTable;
  }
  return &g_l1[i0][(addr >> 30) & (kEntries - 1)];
}

void map_2mib(uint64_t addr, Memory type, const char* what);

void map_gib(uint64_t addr, Memory type, const char* what) {
  uint64_t* e = l1_entry(addr);
  if ((*e & kDescValid) && (*e & kDescTable)) {
    // Already mapped at a finer granularity (the image's GiB): go down.
    for (uint64_t a = addr; a < addr + kGiB; a += k2MiB) map_2mib(a, type, what);
    return;
  }
  const uint64_t want = (addr & kDescAddrMask) | block_attrs(type) | kDescValid;
  if (*e & kDescValid) {
    if (*e != want) conflict(addr, what);
    return;
  }
  *e = want;
}

void map_2mib(uint64_t addr, Memory type, const char* what) {
  uint64_t* e1 = l1_entry(addr);
  if ((*e1 & kDescValid) && !(*e1 & kDescTable)) {
    // Already inside a GiB block: fine only with the same attributes.
    if ((*e1 & ~kDescAddrMask) != (block_attrs(type) | kDescValid)) conflict(addr, what);
    return;
  }
  if (!(*e1 & kDescValid)) {
    if (g_l2_used == kMaxL2Tables) {
      panic(vtrn::hostif::kPanicPlatform, "mmu: %s needs more than %u level-2 tables", what,
            kMaxL2Tables);
    }
    // Tables are in .bss, zeroed by start.S: every entry starts invalid.
    uint64_t* t = g_l2[g_l2_used++];
    *e1 = uint64_t(reinterpret_cast<uintptr_t>(t)) | kDescValid | kDescTable;
  }
  uint64_t* l2 = reinterpret_cast<uint64_t*>(uintptr_t(*e1 & kDescAddrMask));
  uint64_t* e = &l2[(addr >> 21) & (kEntries - 1)];
  const uint64_t want = (addr & kDescAddrMask) | block_attrs(type) | kDescValid;
  if ((*e & kDescValid) && (*e & kDescTable)) {
    // Split into pages around a guard page: same attributes required.
    const uint64_t* l3 = reinterpret_cast<const uint64_t*>(uintptr_t(*e & kDescAddrMask));
    for (unsigned i = 0; i < kEntries; ++i) {
      if ((l3[i] & kDescValid) && (l3[i] & ~kDescAddrMask & ~kDescLowMask) != block_attrs(type)) {
        conflict(addr, what);
      }
    }
    return;
  }
  if (*e & kDescValid) {
    if (*e != want) conflict(addr, what);
    return;
  }
  *e = want;
}


void map_range(uint64_t base, uint64_t size, Memory type, const char* what, bool allow_gib);

// Unmaps the 4 KiB page at `addr` (inside a 2 MiB block mapped earlier) by
// splitting that block into a level-3 table of pages with the block's
// attributes. Only before the MMU is on: splitting a live block would need
// a break-before-make sequence.
void unmap_page(uint64_t addr, const char* what) {
  if (g_enabled) panic(vtrn::hostif::kPanicAssert, "mmu: %s: pages can only be unmapped before the MMU is on", what);
  uint64_t* e1 = l1_entry(addr);
  if (!(*e1 & kDescValid) || !(*e1 & kDescTable)) {
    panic(vtrn::hostif::kPanicAssert, "mmu: %s: 0x%llx is not in a 2 MiB mapping", what,
          (unsigned long long)addr);
  }
  uint64_t* l2 = reinterpret_cast<uint64_t*>(uintptr_t(*e1 & kDescAddrMask));
  uint64_t* e2 = &l2[(addr >> 21) & (kEntries - 1)];
  if (!(*e2 & kDescValid)) {
    panic(vtrn::hostif::kPanicAssert, "mmu: %s: 0x%llx is not mapped", what, (unsigned long long)addr);
  }
  if (!(*e2 & kDescTable)) {
    if (g_l3_used == kMaxL3Tables) {
      panic(vtrn::hostif::kPanicAssert, "mmu: %s needs more than %u level-3 tables", what,
            kMaxL3Tables);
    }
    uint64_t* l3 = g_l3[g_l3_used++];
    const uint64_t block = *e2 & kDescAddrMask;
    const uint64_t attrs = *e2 & ~kDescAddrMask & ~kDescLowMask;
    for (unsigned i = 0; i < kEntries; ++i) {
      l3[i] = (block + i * kPage) | attrs | kDescValid | kDescTable;
    }
    *e2 = uint64_t(reinterpret_cast<uintptr_t>(l3)) | kDescValid | kDescTable;
  }
  uint64_t* l3 = reinterpret_cast<uint64_t*>(uintptr_t(*e2 & kDescAddrMask));
  l3[(addr >> 12) & (kEntries - 1)] = 0;
}

}  // namespace

void map(uint64_t base, uint64_t size, Memory type, const char* what) {
  map_range(base, size, type, what, true);
}

namespace {
void map_range(uint64_t base, uint64_t size, Memory type, const char* what, bool allow_gib) {
  if (size == 0) return;
  if (base >= kVaLimit || size > kVaLimit - base) {
    panic(vtrn::hostif::kPanicPlatform, "mmu: %s [0x%llx, +0x%llx) beyond the 40-bit address map",
          what, (unsigned long long)base, (unsigned long long)size);
  }
  uint64_t addr = base & ~(k2MiB - 1);
  const uint64_t end = (base + size + k2MiB - 1) & ~(k2MiB - 1);
  while (addr < end) {
    if (allow_gib && (addr & (kGiB - 1)) == 0 && end - addr >= kGiB) {
      map_gib(addr, type, what);
      addr += kGiB;
    } else {
      map_2mib(addr, type, what);
      addr += k2MiB;
    }
  }
  if (g_claim_count < sizeof g_claims / sizeof g_claims[0]) {
    g_claims[g_claim_count++] = Claim{base, size, type, what};
  }
  sync_tables();
}
}  // namespace

namespace {
// Programs this core's translation registers with the shared tables and
// turns the MMU and caches on (core 0 from init_early, secondaries from
// enable_this_core).
void enable_mmu() {
  uint64_t sctlr;
  asm volatile(
      "msr mair_el1, %1\n"
      "msr tcr_el1, %2\n"
      "msr ttbr0_el1, %3\n"
      "dsb ish\n"
      "isb\n"
      "tlbi vmalle1\n"
      "dsb ish\n"
      "isb\n"
      "mrs %0, sctlr_el1"
      : "=r"(sctlr)
      : "r"(kMair), "r"(kTcr), "r"(uint64_t(reinterpret_cast<uintptr_t>(g_l0)))
      : "memory");
  sctlr |= kSctlrM | kSctlrC | kSctlrI;
  sctlr &= ~(kSctlrA | kSctlrWxn);
  asm volatile(
      "msr sctlr_el1, %0\n"
      "isb" ::"r"(sctlr)
      : "memory");
}
}  // namespace

void init_early(uint64_t platform_dtb_address) {
  // The image's GiB in 2 MiB blocks, so the stack guard pages can be cut out.
  const uint64_t image = reinterpret_cast<uintptr_t>(__image_start);
  map_range(image & ~(kGiB - 1), kGiB, Memory::kNormal, "firmware image", false);
  map(platform_dtb_address & ~(kGiB - 1), kGiB, Memory::kNormal, "platform dtb");
  unmap_page(reinterpret_cast<uintptr_t>(__boot_stack_guard), "boot stack guard");
  unmap_page(reinterpret_cast<uintptr_t>(__exception_stack_guard), "exception stack guard");
  // Every secondary core's two guard pages (fw::smp), cut out now because
  // splitting a live block would need break-before-make.
  uint64_t guards[2 * smp::kMaxCores];
  const uint32_t n = smp::guard_pages(guards, 2 * smp::kMaxCores);
  for (uint32_t i = 0; i < n; ++i) unmap_page(guards[i], "secondary stack guard");
  enable_mmu();
  g_enabled = true;
}

void share_with_secondaries() { __atomic_store_n(&g_shared, 1u, __ATOMIC_RELEASE); }

void reserve_remap(uint64_t base, uint64_t size) {
  if (g_remap_size != 0 || size == 0 || size > kRemapMaxBytes || (base & (kGiB - 1)) != 0 ||
      (size & (k2MiB - 1)) != 0 || base >= kVaLimit || size > kVaLimit - base) {
    panic(vtrn::hostif::kPanicPlatform,
          "mmu: remap window [0x%llx, +0x%llx) is not one the tables can hold",
          (unsigned long long)base, (unsigned long long)size);
  }
  for (unsigned i = 0; i < g_claim_count; ++i) {
    const Claim& c = g_claims[i];
    if (c.base < base + size && base < c.base + c.size) conflict(base, "remap window");
  }
  for (uint64_t g = 0; g < (size + kGiB - 1) / kGiB; ++g) {
    uint64_t* e1 = l1_entry(base + g * kGiB);
    if (*e1 & kDescValid) conflict(base + g * kGiB, "remap window");
    uint64_t* l2 = g_remap_l2[g];
    for (uint64_t b = 0; b < kEntries && g * kGiB + b * k2MiB < size; ++b) {
      l2[b] = uint64_t(reinterpret_cast<uintptr_t>(g_remap_l3[g * kEntries + b])) | kDescValid |
              kDescTable;
    }
    // The walker must see the level-2 table complete before the level-1
    // entry that points to it.
    asm volatile("dsb ishst" ::: "memory");
    *e1 = uint64_t(reinterpret_cast<uintptr_t>(l2)) | kDescValid | kDescTable;
  }
  if (g_claim_count < sizeof g_claims / sizeof g_claims[0]) {
    g_claims[g_claim_count++] = Claim{base, size, Memory::kNormalNoExec, "remap window"};
  }
  g_remap_base = base;
  g_remap_size = size;
  sync_tables();
}

uint64_t remap_base() { return g_remap_base; }
uint64_t remap_size() { return g_remap_size; }

namespace {
uint64_t* remap_entry(uint64_t va) {
  const uint64_t off = va - g_remap_base;
  return &g_remap_l3[off >> 21][(off >> 12) & (kEntries - 1)];
}
}  // namespace

bool remap(uint64_t va, uint64_t pa, uint64_t bytes) {
  if (bytes == 0 || ((va | pa | bytes) & (kPage - 1)) != 0 || va < g_remap_base ||
      va - g_remap_base > g_remap_size || bytes > g_remap_size - (va - g_remap_base) ||
      pa >= kVaLimit || bytes > kVaLimit - pa)
    return false;
  for (uint64_t off = 0; off < bytes; off += kPage)
    if (*remap_entry(va + off) & kDescValid) return false;
  const uint64_t attrs = block_attrs(Memory::kNormalNoExec) | kDescValid | kDescTable;  // page
  for (uint64_t off = 0; off < bytes; off += kPage) *remap_entry(va + off) = (pa + off) | attrs;
  // Invalid entries are never cached in a TLB, so publishing the stores
  // to the walkers of every core is enough.
  asm volatile(
      "dsb ish\n"
      "isb" ::: "memory");
  return true;
}

void unmap_remap(uint64_t va, uint64_t bytes) {
  if (bytes == 0 || va < g_remap_base || va - g_remap_base > g_remap_size ||
      bytes > g_remap_size - (va - g_remap_base))
    panic(vtrn::hostif::kPanicAssert, "mmu: unmap of [0x%llx, +0x%llx) outside the remap window",
          (unsigned long long)va, (unsigned long long)bytes);
  for (uint64_t off = 0; off < bytes; off += kPage) *remap_entry(va + off) = 0;
  // Break before the pages are made again: the invalid entries reach the
  // walkers, then every core drops what it cached for them.
  asm volatile("dsb ishst" ::: "memory");
  const uint64_t pages = bytes / kPage;
  if (!g_enabled) return;
  if (pages > 64) {
    asm volatile("tlbi vmalle1is" ::: "memory");
  } else {
    for (uint64_t off = 0; off < bytes; off += kPage) {
      const uint64_t arg = (va + off) >> 12;  // VA[55:12], ASID 0
      asm volatile("tlbi vae1is, %0" ::"r"(arg) : "memory");
    }
  }
  asm volatile(
      "dsb ish\n"
      "isb" ::: "memory");
}

void enable_this_core() {
  FW_CHECK(g_enabled, "mmu: a secondary core started before core 0 built the tables");
  enable_mmu();
}

}  // namespace fw::mmu
