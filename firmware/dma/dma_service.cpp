// The chip's DMA service: boot-time publication of the DMA region and the
// per-turn scheduler pass. See fw/dma_service.h.
//
// The region table is republished here, after the board DTB was parsed,
// because only the board says how many queues there are; HostInterface::init
// published the table without DMA earlier so that a bad board still reaches
// the host. The host reads the table only after READY (the state store is a
// release), so the rewrite is invisible to it.
//
// The copier is hal::copy::CpuDmaCopier, straight to hal_copy_memcpy:
// Queue::poll has already validated every range, so going through
// hal::copy::Engine (DmaCopier + CpuEngine) would only repeat its checks and
// add four virtual calls per descriptor, which under TCG was most of a 64 B
// descriptor's cost. A hardware engine would come in through DmaCopier.
#include "fw/dma_service.h"

#include <string.h>

#include "fw/arch.h"
#include "fw/exceptions.h"
#include "fw/log.h"
#include "fw/mmu.h"
#include "fw/panic.h"
#include "fw/platform.h"
#include "fw/power_service.h"
#include "vtrn/board.h"
#include "vtrn/layout.h"

namespace fw::dma {
namespace {

using namespace vtrn::hostif;

// Per queue per pass; see Budget. 32 descriptors is one host batch of small
// transfers; 2 MiB bounds how long a control request can wait per queue.
constexpr Budget kBudget{32, 8, 2u << 20};

constinit DmaService g_service;

uint64_t clock_ns() { return arch::now_ns(); }

const Region* find_region(const FwHeader& h, RegionType type) {
  for (uint32_t i = 0; i < h.region_count && i < kMaxRegions; ++i) {
    if (h.regions[i].type == type) return &h.regions[i];
  }
  return nullptr;
}

}  // namespace

DmaService& service() { return g_service; }



void DmaService::on_latched(uint32_t queue, vtrn::dma::QueueError error) {
  log(kLogWarn, "dma: queue %u latched error %u (%s); waiting for a host reset", unsigned(queue),
      unsigned(error), queue_error_name(error));
}

void DmaService::on_reset(uint32_t queue) {
  log(kLogInfo, "dma: queue %u reset by the host", unsigned(queue));
}

void DmaService::set_remap_window(uint64_t base, uint64_t size) {
  map_.remap = reinterpret_cast<uint8_t*>(uintptr_t(base));
  map_.remap_base = base;
  map_.remap_size = size;
  if (region_ != nullptr) {
    // Before READY: the host reads the header only after the release store
    // of the firmware state.
    region_->remap_base = base;
    region_->remap_size = size;
  }
}

void DmaService::init(const Boot& boot) {
  const vtrn::board::Chip& chip = *boot.chip;
  const uint32_t queues = chip.dma_queues, depth = chip.dma_queue_depth;
  vtrn::Error e = check_geometry(queues, depth);
  if (!e.ok()) panic(kPanicBoard, "%s", e.detail());
  HbmInputs in;
  in.ram_base = boot.platform->ram.base;
  in.ram_size = boot.platform->ram.size;
  in.hbm_bytes = chip.hbm.total_bytes();
  in.firmware_end = boot.firmware_end;
  e = derive_hbm(in, &hbm_);
  if (!e.ok()) panic(kPanicPlatform, "%s", e.detail());
  // Already Normal as part of RAM; mapping it by name makes the dependency
  // explicit (same attributes: a no-op) and panics if RAM was mapped otherwise.
  mmu::map(hbm_.base, hbm_.size, mmu::Memory::kNormal, "hbm");

  auto* header = reinterpret_cast<FwHeader*>(boot.bar2);
  FwHeader h;
  memcpy(&h, header, sizeof h);
  if (!publish_layout(&h, boot.bar2_size, queues, depth)) {
    panic(kPanicBoard,
          "dma: BAR2 of %llu MiB cannot hold %u queues of depth %u (%llu KiB) plus a 1 MiB host "
          "window",
          (unsigned long long)(boot.bar2_size >> 20), unsigned(queues), unsigned(depth),
          (unsigned long long)(vtrn::dma::dma_region_bytes(queues, depth) >> 10));
  }
  const Region* dma = find_region(h, kRegionDma);
  const Region* window = find_region(h, kRegionHostWindow);
  FW_CHECK(dma && window, "dma: publish_layout left out the dma or host-window region");

  e = sched_.init(boot.bar2 + dma->offset, dma->size, queues, depth, hbm_, kBudget, clock_ns,
                  this);
  if (!e.ok()) panic(kPanicBoard, "%s", e.detail());
  map_.host_window = boot.bar2 + window->offset;
  map_.host_window_size = window->size;
  map_.hbm = reinterpret_cast<uint8_t*>(uintptr_t(hbm_.base));
  map_.hbm_base = hbm_.base;
  map_.hbm_size = hbm_.size;
  map_.policy = nullptr;
  region_ = reinterpret_cast<vtrn::dma::DmaRegionHeader*>(boot.bar2 + dma->offset);

  // Region table, then the capability; READY (a release store) publishes both.
  memcpy(header->regions, h.regions, sizeof h.regions);
  header->region_count = h.region_count;
  header->capabilities = header->capabilities | kCapDma;
  enabled_ = true;
  log(kLogInfo,
      "dma: %u queues x %u descriptors, HBM %llu MiB at 0x%llx, host window %llu KiB at "
      "bar2+0x%llx, copy engine: cpu (hal_copy_memcpy)",
      unsigned(queues), unsigned(depth), (unsigned long long)(hbm_.size >> 20),
      (unsigned long long)hbm_.base, (unsigned long long)(window->size >> 10),
      (unsigned long long)window->offset);
}

Vectors DmaService::poll(Turn&) {
  if (!enabled_) return 0;
  // Queued descriptors are a resume trigger; a pass runs only in D0.
  if (!sched_.wants_run(irq::count())) return 0;
  power::note_activity();
  if (!power::device_active()) return 0;
  // The CPU copy cannot fail, so every descriptor the queue completes as
  // moved was moved.
  const PassResult r = sched_.run_pass(map_, copier_, irq::count());
  return r.irq ? vector(kVectorDma) : 0;
}

bool DmaService::has_work() {
  return enabled_ && power::device_active() && sched_.wants_run(irq::count());
}

void DmaService::fill_telemetry(Telemetry* t) const {
  const Totals& d = sched_.totals();
  t->dma_descriptors = d.descriptors;
  t->dma_completions = d.completions;
  t->dma_bytes = d.bytes;
  t->dma_busy_ns = d.busy_ns;
}

}  // namespace fw::dma
