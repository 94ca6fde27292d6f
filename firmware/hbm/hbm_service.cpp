// The firmware side of the HBM service: the metadata arena, boot-time setup,
// and the log lines and Events of the ECC model. See fw/hbm_service.h.
//
// The arena is a fixed .bss array rather than memory carved from RAM at
// boot, so no other service can be handed the
// same bytes and the image's size says what HBM management costs.
// kArenaBytes covers the allocator's published bound
// (common/hbm/include/vtrn/hbm.h) with kLimits and a remap window of 4x the
// HBM (capped at 1 GiB, whose index is 16 Ki pages of 64 KiB or 256 Ki
// pages of 4 KiB): up to about 380 Ki pages of 64 KiB (23 GiB of HBM), or
// 136 Ki pages of 4 KiB (530 MiB). A board asking for more stops the boot
// with a message saying so.
//
// Stitching maps through fw::mmu's remap window (see vtrn/hbm.h for when
// an allocation is stitched).
#include "fw/hbm_service.h"

#include "fw/ctrl_service.h"
#include "fw/dma_service.h"
#include "fw/engines_service.h"
#include "fw/host_interface.h"
#include "fw/log.h"
#include "fw/mmu.h"
#include "fw/panic.h"
#include "vtrn/board.h"

namespace fw::hbm {
namespace {

bool mmu_map(void*, uint64_t va, uint64_t pa, uint64_t bytes) { return mmu::remap(va, pa, bytes); }
void mmu_unmap(void*, uint64_t va, uint64_t bytes) { mmu::unmap_remap(va, bytes); }
const vtrn::hbm::Mapper kMapper{nullptr, &mmu_map, &mmu_unmap};

// Zeroes a new allocation through the address it is used by (HBM is Normal
// memory; a stitched allocation's remap-window pages are mapped by the time
// the allocator returns). Allocations are whole pages, so 64 B steps cover
// them exactly. Plain stores: under TCG four STPs of zeros per 64 B ran ~3x
// faster than DC ZVA (a helper call per block): a 4 MiB allocation took
// 1-3 ms more than a one-page one (asan vtrnd, load 2.5), ~10 ms with DC ZVA.
void zero_hbm(uint64_t addr, uint64_t bytes) {
#if !defined(__aarch64__)
  // Host builds of the service (fuzzers): no HBM behind the address.
  (void)addr;
  (void)bytes;
#else
  auto* p = reinterpret_cast<uint8_t*>(uintptr_t(addr));
  for (uint64_t off = 0; off + 64 <= bytes; off += 64)
    asm volatile("stp xzr, xzr, [%0]\n\tstp xzr, xzr, [%0, #16]\n\tstp xzr, xzr, [%0, #32]\n\tstp xzr, xzr, [%0, #48]"
                 : : "r"(p + off) : "memory");
  for (uint64_t off = bytes & ~uint64_t(63); off < bytes; ++off) p[off] = 0;
  // Complete before the answer (and the engines) see the allocation.
  asm volatile("dsb ish" : : : "memory");
#endif
}

// The allocator's metadata: memory the service owns, outside the service
// object so that it stays in .bss while the object (constant-initialized,
// with its vtable) is in .data.
constexpr size_t kArenaBytes = 2u << 20;
alignas(64) uint8_t g_arena[kArenaBytes];

constinit HbmService g_service;

const char* owner_kind_name(uint64_t owner) {
  switch (uint32_t(owner >> 32)) {
    case kOwnerKindFirmware: return "firmware";
    case kOwnerKindClient: return "client";
    case kOwnerKindJob: return "job";
    case kOwnerKindTenant: return "tenant";
  }
  return "owner";
}

void log_ecc(const EccRecord& r) {
  if (!r.uncorrectable) {
    log(kLogWarn, "hbm: correctable ECC error at 0x%llx (stack %u, %llu on this stack)",
        (unsigned long long)r.addr, unsigned(r.stack), (unsigned long long)r.correctable_on_stack);
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
}

}  // namespace

HbmService& service() { return g_service; }

Access check(uint64_t addr, uint64_t len, uint64_t owner) { return g_service.check(addr, len, owner); }

void HbmService::init(const Boot& boot) {
  const vtrn::board::HbmGeometry& g = boot.chip->hbm;
  const dma::HbmRange& range = dma::service().hbm();
  if (g.total_bytes() != range.size) {
    panic(vtrn::hostif::kPanicBoard, "hbm: the board gives %llu MiB but the DMA range is %llu MiB",
          (unsigned long long)(g.total_bytes() >> 20), (unsigned long long)(range.size >> 20));
  }
  // 4x the HBM, within what the static tables hold, whole 2 MiB.
  uint64_t window = 4 * g.total_bytes();
  if (window > mmu::kRemapMaxBytes) window = mmu::kRemapMaxBytes;
  window &= ~((2ull << 20) - 1);
  const Remap remap{&kMapper, kRemapBase, window};
  const size_t need = Manager::arena_bytes(g, range.base, remap);
  if (need == 0) {
    panic(vtrn::hostif::kPanicBoard,
          "hbm: %u stacks x %llu MiB in %u KiB pages at 0x%llx is not a geometry the allocator "
          "accepts",
          unsigned(g.stacks), (unsigned long long)(g.bytes_per_stack >> 20),
          unsigned(g.page_bytes >> 10), (unsigned long long)range.base);
  }
  if (need > kArenaBytes) {
    panic(vtrn::hostif::kPanicBoard,
          "hbm: %llu MiB of HBM in %u KiB pages needs %zu KiB of allocator metadata, the "
          "firmware reserves %zu KiB (use larger vtrn,page-bytes)",
          (unsigned long long)(g.total_bytes() >> 20), unsigned(g.page_bytes >> 10), need >> 10,
          kArenaBytes >> 10);
  }
  mmu::reserve_remap(kRemapBase, window);
  const Status s = Manager::init(g, range.base, g_arena, kArenaBytes, remap);
  if (s != Status::kOk) {
    panic(vtrn::hostif::kPanicBoard, "hbm: allocator init failed: %s", vtrn::hbm::error_name(s));
  }
  set_scrub(&zero_hbm);
  vtrn::hostif::FwHeader* header = boot.hostif->header();
  header->capabilities = header->capabilities | vtrn::hostif::kCapHbm;
  // From now on DMA reaches only live, unpoisoned allocations, and the
  // stitched allocations' device addresses.
  dma::service().set_hbm_policy(&policy_);
  dma::service().set_remap_window(kRemapBase, window);
  // And the engines reach only allocations (none yet) from the start.
  engines::service().sync_mpu(allocator(), dma_unchecked());
  mpu_layout_ = layout_generation();
  mpu_unchecked_ = dma_unchecked();
  log(kLogInfo,
      "hbm: %u stacks x %llu MiB (%u ch each) at 0x%llx, %u KiB pages, metadata %zu KiB; "
      "limits %u allocations, %u owners, %u retired pages; remap window 0x%llx + %llu MiB",
      unsigned(g.stacks), (unsigned long long)(g.bytes_per_stack >> 20), unsigned(g.channels),
      (unsigned long long)range.base, unsigned(g.page_bytes >> 10), need >> 10,
      unsigned(kLimits.max_allocations), unsigned(kLimits.max_owners),
      unsigned(kLimits.max_retired_pages), (unsigned long long)kRemapBase,
      (unsigned long long)(window >> 20));
}

void HbmService::served(uint64_t) {
  if (layout_generation() == mpu_layout_ && dma_unchecked() == mpu_unchecked_) return;
  engines::service().sync_mpu(allocator(), dma_unchecked());
  mpu_layout_ = layout_generation();
  mpu_unchecked_ = dma_unchecked();
}

Vectors HbmService::poll(Turn&) {
  // The ECC records the last requests produced: logged, and an Event each.
  uint32_t n = 0;
  EccRecord r;
  while (take_ecc(&r)) {
    ++n;
    log_ecc(r);
    Vtrn__Ctrl__HbmEccEvent body = VTRN__CTRL__HBM_ECC_EVENT__INIT;
    fill_ecc_event(r, &body);
    Vtrn__Ctrl__Event ev = VTRN__CTRL__EVENT__INIT;
    ev.body_case = VTRN__CTRL__EVENT__BODY_HBM_ECC;
    ev.hbm_ecc = &body;
    if (!ctrl::send_event(ev)) {
      log(kLogWarn, "hbm: ECC event for 0x%llx not sent (response ring full)",
          (unsigned long long)r.addr);
    }
  }
  return n > 0 ? vector(vtrn::hostif::kVectorControl) : 0;
}

void HbmService::fill_telemetry(vtrn::hostif::Telemetry* t) const {
  const Totals x = totals();
  t->hbm_total_bytes = x.total_bytes;
  t->hbm_used_bytes = x.used_bytes;
  t->hbm_alloc_failures = x.alloc_failures;
  t->hbm_retired_pages = x.retired_pages;
  t->ecc_correctable = x.ecc_correctable;
  t->ecc_uncorrectable = x.ecc_uncorrectable;
}

}  // namespace fw::hbm
