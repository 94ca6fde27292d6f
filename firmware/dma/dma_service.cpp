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

#include <stdio.h>
#include <string.h>

#include "fw/arch.h"
#include "fw/engines_service.h"
#include "fw/exceptions.h"
#include "fw/log.h"
#include "fw/mmu.h"
#include "fw/panic.h"
#include "fw/platform.h"
#include "fw/power_service.h"
#include "vtrn/board.h"
#include "vtrn/layout.h"
#include "vtrn/seqlock.h"

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
  if (!engines_mode_) return;
  // The DMA engines reach stitched allocations through translated MPU
  // windows (engine ABI 1.2) inside this window. Before READY, so the
  // reconfiguration (which restarts the host queues) finds them empty.
  hal::copy::EngineRegion& region = engines::service().region();
  if (region.id().abi_minor < 2) {
    log(kLogWarn, "dma: DMA engines of ABI 1.%u do not translate: stitched allocations refused by them",
        unsigned(region.id().abi_minor));
    return;
  }
  for (uint32_t i = 0; i < hw_count_; ++i) {
    hw_config_[i].remap_base = base;
    hw_config_[i].remap_size = size;
    uint32_t st = 0;
    hal::copy::HwEngine& e = hw_[i];
    // Writes the engine's config and waits for its answer in st.
    auto configure = [&] {
      return e.configure(hw_config_[i]) == hal::Status::kOk &&
             engines::wait_ack(
                 region, [&e, &st] { return e.config_done(&st); }, uint16_t(vtrn::engine::kVectorDma0 + i),
                 2'000'000'000ull) &&
             st == vtrn::engine::kEngineOk;
    };
    if (!configure()) {
      // Still serving, without translation: their stitched addresses fail.
      log(kLogErr, "dma: DMA engine %u refused the remap window 0x%llx + %llu MiB (status 0x%x)", unsigned(i),
          (unsigned long long)base, (unsigned long long)(size >> 20), unsigned(st));
      hw_config_[i].remap_base = hw_config_[i].remap_size = 0;
      if (!configure())
        log(kLogErr, "dma: DMA engine %u no longer serves its host queues (status 0x%x)", unsigned(i),
            unsigned(st));
    }
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

  // The DMA engines serve the host queues unless vtrn.copy_engine=cpu asks
  // for the CPU copier (or the chip has no engines).
  if (!platform::bootarg_is(boot.platform->bootargs, "vtrn.copy_engine", "cpu")) {
    engines_mode_ = start_engines(dma->offset, window->offset, window->size, queues, depth);
  }

  // Region table, then the capabilities; READY (a release store) publishes them.
  memcpy(header->regions, h.regions, sizeof h.regions);
  header->region_count = h.region_count;
  header->capabilities = header->capabilities | kCapDma | (engines_mode_ ? kCapDmaEngines : 0);
  enabled_ = true;
  char engine[64];
  if (engines_mode_) {
    snprintf(engine, sizeof engine, "%u DMA engines (host queue q on engine q %% %u)", unsigned(hw_count_),
             unsigned(hw_count_));
  } else {
    snprintf(engine, sizeof engine, "cpu (hal_copy_memcpy)");
  }
  log(kLogInfo,
      "dma: %u queues x %u descriptors, HBM %llu MiB at 0x%llx, host window %llu KiB at "
      "bar2+0x%llx, copy engine: %s",
      unsigned(queues), unsigned(depth), (unsigned long long)(hbm_.size >> 20),
      (unsigned long long)hbm_.base, (unsigned long long)(window->size >> 10),
      (unsigned long long)window->offset, engine);
}

bool DmaService::start_engines(uint64_t dma_offset, uint64_t window_offset, uint64_t window_size,
                               uint32_t queues, uint32_t depth) {
  engines::EnginesService& eng = engines::service();
  if (!eng.present() || eng.region().dma_engines() == 0) {
    log(kLogWarn, "dma: the chip has no DMA engines: copy engine: cpu");
    return false;
  }
  hal::copy::EngineRegion& region = eng.region();
  const uint32_t n = region.dma_engines() < queues ? region.dma_engines() : queues;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t mask = 0;
    for (uint32_t q = i; q < queues; q += n) mask |= 1u << q;
    vtrn::engine::DmaConfig c{};
    c.host_queue_mask = mask;
    c.dma_region_offset = dma_offset;
    c.queue_count = queues;
    c.depth = depth;
    c.host_window_offset = window_offset;
    c.host_window_size = window_size;
    c.hbm_base = hbm_.base;
    c.hbm_size = hbm_.size;
    c.host_irq_armed = 0;
    uint32_t st = vtrn::engine::kEngineOk;
    hw_config_[i] = c;
    hal::copy::HwEngine& e = hw_[i];
    const bool ok = e.init(region, i) == hal::Status::kOk && e.configure(c) == hal::Status::kOk &&
                    engines::wait_ack(
                        region, [&e, &st] { return e.config_done(&st); },
                        uint16_t(vtrn::engine::kVectorDma0 + i), 2'000'000'000ull) &&
                    st == vtrn::engine::kEngineOk;
    if (!ok) {
      log(kLogErr, "dma: DMA engine %u refused the host queues (status 0x%x): copy engine: cpu", unsigned(i),
          unsigned(st));
      // Nothing keeps serving a queue this service is about to serve.
      (void)region.begin_reset();
      (void)engines::wait_ack(
          region, [&region] { return region.reset_done(); }, vtrn::engine::kVectorControl, 2'000'000'000ull);
      return false;
    }
  }
  hw_count_ = n;
  return true;
}

bool DmaService::host_work_waiting() const {
  const uint8_t* queues = reinterpret_cast<const uint8_t*>(region_) + vtrn::dma::kDmaQueuesOffset;
  for (uint32_t q = 0; q < sched_.queue_count(); ++q) {
    const auto* ctl = reinterpret_cast<const vtrn::dma::QueueControl*>(
        queues + uint64_t(q) * vtrn::dma::queue_stride(sched_.depth()));
    if (__atomic_load_n(&ctl->sq_prod.value, __ATOMIC_ACQUIRE) != __atomic_load_n(&ctl->sq_cons.value, __ATOMIC_ACQUIRE))
      return true;
  }
  return false;
}

void DmaService::pause_engines(bool paused) {
  engines_paused_ = paused;
  hal::copy::EngineRegion& region = engines::service().region();
  for (uint32_t i = 0; i < hw_count_; ++i) {
    vtrn::engine::DmaConfig c = hw_config_[i];
    c.flags = paused ? vtrn::engine::kDmaConfigPaused : 0;
    uint32_t st = 0;
    hal::copy::HwEngine& e = hw_[i];
    if (e.configure(c) != hal::Status::kOk ||
        !engines::wait_ack(
            region, [&e, &st] { return e.config_done(&st); }, uint16_t(vtrn::engine::kVectorDma0 + i),
            1'000'000'000ull) ||
        st != vtrn::engine::kEngineOk) {
      log(kLogErr, "dma: DMA engine %u did not %s its host queues (status 0x%x)", unsigned(i),
          paused ? "pause" : "resume", unsigned(st));
    }
  }
  log(kLogDebug, "dma: host queues %s on the DMA engines", paused ? "paused" : "resumed");
}

Vectors DmaService::poll(Turn&) {
  if (!enabled_) return 0;
  if (engines_mode_) {
    // The engines serve only in D0; work they did keeps the device awake,
    // and descriptors waiting in a paused queue wake it, as on the CPU path.
    const bool active = power::device_active();
    if (active == engines_paused_) pause_engines(!active);
    uint64_t units = 0;
    hal::copy::EngineRegion& region = engines::service().region();
    for (uint32_t i = 0; i < hw_count_; ++i) units += __atomic_load_n(&region.dma(i)->stats.units, __ATOMIC_RELAXED);
    if (units != engines_units_) {
      engines_units_ = units;
      power::note_activity();
    } else if (engines_paused_ && host_work_waiting()) {
      power::note_activity();
    }
    return 0;
  }
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
  return enabled_ && !engines_mode_ && power::device_active() && sched_.wants_run(irq::count());
}

DmaService::Activity DmaService::activity() const {
  Activity a;
  if (!engines_mode_) {
    const Totals& d = sched_.totals();
    a.descriptors = d.descriptors;
    a.completions = d.completions;
    a.bytes = d.bytes;
    a.busy_ns = d.busy_ns;
    return a;
  }
  hal::copy::EngineRegion& region = engines::service().region();
  for (uint32_t i = 0; i < hw_count_; ++i) {
    vtrn::engine::EngineStats copy;
    if (vtrn::hostif::seqlock_read(&region.dma(i)->stats, &copy, 8u)) hw_stats_[i] = copy;
    const vtrn::engine::EngineStats& s = hw_stats_[i];
    a.descriptors += s.descriptors;
    a.completions += s.units;
    a.bytes += s.bytes;
    a.busy_ns += s.busy_ns;
  }
  return a;
}

void DmaService::fill_telemetry(Telemetry* t) const {
  const Activity a = activity();
  t->dma_descriptors = a.descriptors;
  t->dma_completions = a.completions;
  t->dma_bytes = a.bytes;
  t->dma_busy_ns = a.busy_ns;
}

}  // namespace fw::dma
