// The chip's DMA service: boot-time publication of the DMA region and the
// per-iteration scheduler pass. See fw/dma_service.h.
//
// The region table is republished here, after the board DTB was parsed,
// because only the board says how many queues there are; HostInterface::init
// published the table without DMA earlier so that a bad board still reaches
// the host. The host reads the table only after READY (the state store is a
// release), so the rewrite is invisible to it.
#include "fw/dma_service.h"

#include <string.h>

#include "fw/arch.h"
#include "fw/log.h"
#include "fw/mmu.h"
#include "fw/panic.h"
#include "hal/copy.h"
#include "hal/copy_dma.h"
#include "vtrn/layout.h"

namespace fw::dma {
namespace {

using namespace vtrn::hostif;

// Per queue per pass; see Budget. 32 descriptors is one host batch of small
// transfers; 2 MiB bounds how long a control request can wait per queue.
constexpr Budget kBudget{32, 8, 2u << 20};

class LogObserver final : public Observer {
 public:
  void on_latched(uint32_t queue, vtrn::dma::QueueError error) override {
    log(kLogWarn, "dma: queue %u latched error %u (%s); waiting for a host reset", unsigned(queue),
        unsigned(error), queue_error_name(error));
  }
  void on_reset(uint32_t queue) override {
    log(kLogInfo, "dma: queue %u reset by the host", unsigned(queue));
  }
};

LogObserver g_observer;
// The chip's copy engine is its CPU: CpuDmaCopier calls hal_copy_memcpy
// directly. Queue::poll has already validated every range, so going through
// hal::copy::Engine (DmaCopier + CpuEngine) would only repeat its checks and
// add four virtual calls per descriptor, which under TCG was most of a 64 B
// descriptor's cost. A hardware engine would come in through DmaCopier.
hal::copy::CpuDmaCopier g_copier;

uint64_t clock_ns() { return arch::now_ns(); }

const Region* find_region(const FwHeader& h, RegionType type) {
  for (uint32_t i = 0; i < h.region_count && i < kMaxRegions; ++i) {
    if (h.regions[i].type == type) return &h.regions[i];
  }
  return nullptr;
}

}  // namespace

// ---- HBM ----
void Service::set_remap_window(uint64_t base, uint64_t size) {
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
// ---- end HBM ----

void Service::init(const ServiceConfig& cfg) {
  char err[160];
  if (!check_geometry(cfg.queues, cfg.depth, err, sizeof err)) panic(kPanicBoard, "%s", err);
  HbmRange hbm;
  if (!derive_hbm(cfg.hbm, &hbm, err, sizeof err)) panic(kPanicPlatform, "%s", err);
  // Already Normal as part of RAM; mapping it by name makes the dependency
  // explicit (same attributes: a no-op) and panics if RAM was mapped otherwise.
  mmu::map(hbm.base, hbm.size, mmu::Memory::kNormal, "hbm");

  auto* header = reinterpret_cast<FwHeader*>(cfg.bar2);
  FwHeader h;
  memcpy(&h, header, sizeof h);
  if (!publish_layout(&h, cfg.bar2_size, cfg.queues, cfg.depth)) {
    panic(kPanicBoard,
          "dma: BAR2 of %llu MiB cannot hold %u queues of depth %u (%llu KiB) plus a 1 MiB host "
          "window",
          (unsigned long long)(cfg.bar2_size >> 20), unsigned(cfg.queues), unsigned(cfg.depth),
          (unsigned long long)(vtrn::dma::dma_region_bytes(cfg.queues, cfg.depth) >> 10));
  }
  const Region* dma = find_region(h, kRegionDma);
  const Region* window = find_region(h, kRegionHostWindow);
  FW_CHECK(dma && window, "dma: publish_layout left out the dma or host-window region");

  if (!sched_.init(cfg.bar2 + dma->offset, dma->size, cfg.queues, cfg.depth, hbm, kBudget,
                   clock_ns, &g_observer, err, sizeof err)) {
    panic(kPanicBoard, "%s", err);
  }
  map_.host_window = cfg.bar2 + window->offset;
  map_.host_window_size = window->size;
  map_.hbm = reinterpret_cast<uint8_t*>(uintptr_t(hbm.base));
  map_.hbm_base = hbm.base;
  map_.hbm_size = hbm.size;
  map_.policy = nullptr;
  region_ = reinterpret_cast<vtrn::dma::DmaRegionHeader*>(cfg.bar2 + dma->offset);  // ---- HBM ----

  // Region table, then the capability; READY (a release store) publishes both.
  memcpy(header->regions, h.regions, sizeof h.regions);
  header->region_count = h.region_count;
  header->capabilities = header->capabilities | kCapDma;
  enabled_ = true;
  log(kLogInfo,
      "dma: %u queues x %u descriptors, HBM %llu MiB at 0x%llx, host window %llu KiB at "
      "bar2+0x%llx, copy engine: cpu (hal_copy_memcpy)",
      unsigned(cfg.queues), unsigned(cfg.depth), (unsigned long long)(hbm.size >> 20),
      (unsigned long long)hbm.base, (unsigned long long)(window->size >> 10),
      (unsigned long long)window->offset);
}

bool Service::run(uint64_t wake_gen) {
  if (!enabled_) return false;
  // The CPU copy cannot fail, so every descriptor the queue completes as
  // moved was moved.
  const PassResult r = sched_.run_pass(map_, g_copier, wake_gen);
  return r.irq;
}

bool Service::wants_run(uint64_t wake_gen) const {
  return enabled_ && sched_.wants_run(wake_gen);
}

}  // namespace fw::dma
