// The firmware side of the HBM service: the static metadata arena, boot-time
// setup and the log lines of the ECC model. See fw/hbm_service.h.
//
// The arena is a fixed .bss array rather than memory carved from RAM at
// boot, so no other service can be handed the same bytes and the image's
// size says what HBM management costs. kArenaBytes covers the allocator's
// published bound (common/hbm/include/vtrn/hbm.h) with kLimits and a remap
// window of 4x the HBM (capped at 1 GiB, whose index is 16 Ki pages of
// 64 KiB or 256 Ki pages of 4 KiB): up to about 380 Ki pages of 64 KiB
// (23 GiB of HBM), or 136 Ki pages of 4 KiB (530 MiB). A board asking for
// more stops the boot with a message saying so.
//
// Stitching maps through fw::mmu's remap window (see vtrn/hbm.h for when
// an allocation is stitched).
#include "fw/hbm_service.h"

#include "fw/log.h"
#include "fw/mmu.h"
#include "fw/panic.h"

namespace fw::hbm {
namespace {

constexpr size_t kArenaBytes = 2u << 20;
alignas(64) uint8_t g_arena[kArenaBytes];

bool mmu_map(void*, uint64_t va, uint64_t pa, uint64_t bytes) { return mmu::remap(va, pa, bytes); }
void mmu_unmap(void*, uint64_t va, uint64_t bytes) { mmu::unmap_remap(va, bytes); }
const vtrn::hbm::Mapper g_mapper{nullptr, &mmu_map, &mmu_unmap};
uint64_t g_remap_bytes = 0;

const char* owner_kind_name(uint64_t owner) {
  switch (uint32_t(owner >> 32)) {
    case kOwnerKindFirmware: return "firmware";
    case kOwnerKindClient: return "client";
    case kOwnerKindJob: return "job";
  }
  return "owner";
}

}  // namespace

void init(const vtrn::board::Chip& chip, uint64_t hbm_base, uint64_t hbm_size,
          vtrn::hostif::FwHeader* header) {
  const vtrn::board::HbmGeometry& g = chip.hbm;
  if (g.total_bytes() != hbm_size) {
    panic(vtrn::hostif::kPanicBoard, "hbm: the board gives %llu MiB but the DMA range is %llu MiB",
          (unsigned long long)(g.total_bytes() >> 20), (unsigned long long)(hbm_size >> 20));
  }
  // 4x the HBM, within what the static tables hold, whole 2 MiB.
  uint64_t window = 4 * g.total_bytes();
  if (window > mmu::kRemapMaxBytes) window = mmu::kRemapMaxBytes;
  window &= ~((2ull << 20) - 1);
  const Remap remap{&g_mapper, kRemapBase, window};
  const size_t need = Manager::arena_bytes(g, hbm_base, remap);
  if (need == 0) {
    panic(vtrn::hostif::kPanicBoard,
          "hbm: %u stacks x %llu MiB in %u KiB pages at 0x%llx is not a geometry the allocator "
          "accepts",
          unsigned(g.stacks), (unsigned long long)(g.bytes_per_stack >> 20),
          unsigned(g.page_bytes >> 10), (unsigned long long)hbm_base);
  }
  if (need > kArenaBytes) {
    panic(vtrn::hostif::kPanicBoard,
          "hbm: %llu MiB of HBM in %u KiB pages needs %zu KiB of allocator metadata, the "
          "firmware reserves %zu KiB (use larger vtrn,page-bytes)",
          (unsigned long long)(g.total_bytes() >> 20), unsigned(g.page_bytes >> 10), need >> 10,
          kArenaBytes >> 10);
  }
  mmu::reserve_remap(kRemapBase, window);
  const Status s = manager().init(g, hbm_base, g_arena, kArenaBytes, remap);
  if (s != Status::kOk) {
    panic(vtrn::hostif::kPanicBoard, "hbm: allocator init failed: %s", vtrn::hbm::error_name(s));
  }
  g_remap_bytes = window;
  header->capabilities = header->capabilities | vtrn::hostif::kCapHbm;
  log(kLogInfo,
      "hbm: %u stacks x %llu MiB (%u ch each) at 0x%llx, %u KiB pages, metadata %zu KiB; "
      "limits %u allocations, %u owners, %u retired pages; remap window 0x%llx + %llu MiB",
      unsigned(g.stacks), (unsigned long long)(g.bytes_per_stack >> 20), unsigned(g.channels),
      (unsigned long long)hbm_base, unsigned(g.page_bytes >> 10), need >> 10,
      unsigned(kLimits.max_allocations), unsigned(kLimits.max_owners),
      unsigned(kLimits.max_retired_pages), (unsigned long long)kRemapBase,
      (unsigned long long)(window >> 20));
}

void remap_window(uint64_t* base, uint64_t* bytes) {
  *base = g_remap_bytes != 0 ? kRemapBase : 0;
  *bytes = g_remap_bytes;
}

uint32_t service_events(bool (*send)(const EccRecord& r)) {
  uint32_t n = 0;
  EccRecord r;
  while (manager().take_ecc(&r)) {
    ++n;
    if (!r.uncorrectable) {
      log(kLogWarn, "hbm: correctable ECC error at 0x%llx (stack %u, %llu on this stack)",
          (unsigned long long)r.addr, unsigned(r.stack),
          (unsigned long long)r.correctable_on_stack);
    } else if (r.page_retired && r.allocation_poisoned) {
      log(kLogErr,
          "hbm: uncorrectable ECC error at 0x%llx: page +0x%llx retired, allocation 0x%llx of "
          "%s %llu poisoned",
          (unsigned long long)r.addr, (unsigned long long)r.page_offset,
          (unsigned long long)r.allocation_addr, owner_kind_name(r.owner),
          (unsigned long long)(r.owner & 0xffffffffu));
    } else if (r.page_retired) {
      log(kLogErr, "hbm: uncorrectable ECC error at 0x%llx: free page +0x%llx retired",
          (unsigned long long)r.addr, (unsigned long long)r.page_offset);
    } else {
      log(kLogErr, "hbm: uncorrectable ECC error at 0x%llx: page +0x%llx not retired (%s)",
          (unsigned long long)r.addr, (unsigned long long)r.page_offset,
          vtrn::hbm::error_name(r.result));
    }
    if (send != nullptr && !send(r)) {
      log(kLogWarn, "hbm: ECC event for 0x%llx not sent (response ring full)",
          (unsigned long long)r.addr);
    }
  }
  return n;
}

}  // namespace fw::hbm
