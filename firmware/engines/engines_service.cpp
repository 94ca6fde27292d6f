// The firmware's owner of the hardware engines (see fw/engines_service.h).
#include "fw/engines_service.h"

#include <stddef.h>

#include "fw/arch.h"
#include "fw/exceptions.h"
#include "fw/log.h"
#include "hal/gic.h"
#include "hal/ivshmem.h"
#include "hal/pcie.h"
#include "vtrn/seqlock.h"

namespace fw::engines {
namespace {

using namespace vtrn::engine;

constexpr uint64_t kReringNs = 10'000'000;      // a lost doorbell costs this much, never a hang
constexpr uint64_t kResetWaitNs = 2'000'000'000;
constexpr uint64_t kMpuWaitNs = 1'000'000'000;

constinit EnginesService g_service;
hal::ivshmem::IvshmemDoorbell g_function;
MpuWindow g_table[kMpuWindows];
volatile uint64_t g_irqs = 0;

void on_engine_irq(uint32_t, void*) {
  // A wake-up hint: the loop re-reads the error ring and the queues.
  g_irqs = g_irqs + 1;
}

const char* error_name(uint32_t code) {
  switch (code) {
    case kEngineOk: return "ok";
    case kEngineMpuFault: return "mpu fault";
    case kEngineBadAddress: return "bad address";
    case kEngineBadConfig: return "bad config";
    case kEngineQueueBroken: return "queue broken";
    case kEngineInjected: return "injected fault";
    case kEngineBadCommand: return "bad command";
    default: return "unknown";
  }
}

}  // namespace

bool wait_ack_impl(hal::copy::EngineRegion& r, bool (*done)(void*), void* ctx, uint16_t vector, uint64_t limit_ns) {
  const uint64_t t0 = arch::now_ns();
  uint64_t next_ring = t0 + kReringNs;
  while (!done(ctx)) {
    const uint64_t now = arch::now_ns();
    if (now - t0 > limit_ns) return false;
    if (now > next_ring) {
      (void)r.ring(vector);
      next_ring = now + kReringNs;
    }
  }
  return true;
}

EnginesService& service() { return g_service; }
uint64_t irq_count() { return g_irqs; }

bool EnginesService::probe(const Boot& boot) {
  const hal::pcie::Function* fn = nullptr;
  for (uint32_t i = 0; i < boot.topology->count; ++i) {
    const hal::pcie::Function& f = boot.topology->functions[i];
    if (hal::ivshmem::is_ivshmem(f) && f.bdf.bus == 0 && f.bdf.dev == kEnginePciDevice && f.bdf.fn == 0) fn = &f;
  }
  if (fn == nullptr) {
    log(kLogWarn, "engines: no engine function at 00:%02x.0: the cores do all the work",
        unsigned(kEnginePciDevice));
    return false;
  }
  hal::Status s = g_function.init(*boot.ecam, *fn);
  if (s != hal::Status::kOk) {
    log(kLogWarn, "engines: 00:%02x.0: %s: the cores do all the work", unsigned(kEnginePciDevice),
        hal::status_name(s));
    return false;
  }
  if (g_function.vector_count() < kVectorCount || boot.v2m == nullptr) {
    log(kLogWarn, "engines: 00:%02x.0 has %u MSI-X vectors, %u needed: the cores do all the work",
        unsigned(kEnginePciDevice), unsigned(g_function.vector_count()), unsigned(kVectorCount));
    return false;
  }
  s = g_function.route_to_v2m(*boot.v2m, boot.msi_first_free, &first_spi_);
  if (s != hal::Status::kOk) {
    log(kLogWarn, "engines: MSI-X routing: %s: the cores do all the work", hal::status_name(s));
    return false;
  }
  for (uint16_t v = 0; v < kVectorCount; ++v) {
    if (boot.gic->set_trigger(first_spi_ + v, hal::gic::Trigger::kEdge) != hal::Status::kOk) return false;
    irq::register_handler(first_spi_ + v, on_engine_irq, nullptr);
    if (boot.gic->enable(first_spi_ + v) != hal::Status::kOk) return false;
  }
  if (g_function.enable_msix() != hal::Status::kOk) return false;
  const uint64_t regs = fn->bars[hal::ivshmem::kRegsBar].cpu_base;
  s = region_.init(uintptr_t(g_function.shm_base()), g_function.shm_size(),
                   uintptr_t(regs + offsetof(hal::ivshmem::IvshmemRegs, Doorbell)));
  if (s != hal::Status::kOk) {
    log(kLogWarn, "engines: engine region at 0x%llx: %s (no vtrn-hw, or another ABI): the cores do all the work",
        (unsigned long long)g_function.shm_base(), hal::status_name(s));
    return false;
  }
  // Engines may still hold work of the boot that went down (a warm reset):
  // nothing is configured before they are idle at index 0.
  if (region_.begin_reset() != hal::Status::kOk ||
      !wait_ack(region_, [this] { return region_.reset_done(); }, kVectorControl, kResetWaitNs)) {
    log(kLogErr, "engines: reset not acknowledged within %llu ms: the cores do all the work",
        (unsigned long long)(kResetWaitNs / 1000000));
    return false;
  }
  return true;
}

void EnginesService::init(const Boot& boot) {
  present_ = probe(boot);
  if (!present_) return;
  region_.arm_errors(true);
  const IdBlock& id = region_.id();
  log(kLogInfo,
      "engines: %u DMA (%llu GB/s modeled each), %u tensor (fp32 %llu, bf16 %llu, fp8 %llu, mxfp4 %llu "
      "GFLOP/s modeled), MPU %u windows, MSI-X -> SPI %u..%u, %s",
      unsigned(id.dma_engines), (unsigned long long)(id.dma_bytes_per_s / 1000000000ull),
      unsigned(id.tensor_engines), (unsigned long long)(id.tensor_flops_per_s[0] / 1000000000ull),
      (unsigned long long)(id.tensor_flops_per_s[1] / 1000000000ull),
      (unsigned long long)(id.tensor_flops_per_s[2] / 1000000000ull),
      (unsigned long long)(id.tensor_flops_per_s[4] / 1000000000ull), unsigned(id.mpu_windows),
      unsigned(first_spi_), unsigned(first_spi_ + kVectorCount - 1), id.hw_build);
}

void EnginesService::sync_mpu(const vtrn::hbm::Allocator& a, bool whole_hbm) {
  if (!present_) return;
  uint32_t count = 0;
  MpuTableStats st;
  // Translated windows for stitched allocations from ABI 1.2 on (older
  // engines would refuse the flag, and the whole bank with it).
  const bool translate = region_.id().abi_minor >= 2;
  vtrn::Error e = build_mpu_table(a, whole_hbm, translate, g_table, kMpuWindows, &count, &st);
  if (!e.ok()) {
    // Keep the engines off HBM rather than give them a table that is wrong.
    log(kLogErr, "engines: %s: MPU left with no windows", e.detail());
    count = 0;
  }
  if (st.merged_gaps > mpu_stats_.merged_gaps || (st.merged_gaps && !mpu_stats_.merged_gaps)) {
    log(kLogWarn, "engines: %u allocations need more than %u MPU windows: %u gaps (%llu KiB of free HBM) "
        "made reachable",
        unsigned(st.allocations), unsigned(kMpuWindows - st.poison_windows), unsigned(st.merged_gaps),
        (unsigned long long)(st.merged_gap_bytes >> 10));
  }
  if (st.stitched_skipped > mpu_stats_.stitched_skipped) {
    log(kLogWarn, "engines: %u stitched allocations have no MPU windows (%u translated windows in use): the "
        "engines refuse their addresses", unsigned(st.stitched_skipped), unsigned(st.translated_windows));
  }
  mpu_stats_ = st;
  uint32_t gen = 0;
  if (region_.mpu_program(g_table, count, &gen) != hal::Status::kOk) return;
  mpu_gen_ = gen;
  log(kLogDebug, "engines: MPU generation %u: %u windows (%u poison, %u translated) for %u allocations + %u stitched",
      unsigned(gen), unsigned(count), unsigned(st.poison_windows), unsigned(st.translated_windows),
      unsigned(st.allocations), unsigned(st.stitched));
  if (!wait_ack(region_, [this, gen] { return region_.mpu_acked(gen); }, kVectorControl, kMpuWaitNs)) {
    ++mpu_timeouts_;
    log(kLogErr, "engines: MPU generation %u not acknowledged within %llu ms", unsigned(gen),
        (unsigned long long)(kMpuWaitNs / 1000000));
  }
}

void EnginesService::drain_errors() {
  ErrorRecord rec;
  uint32_t lost = 0;
  while (region_.next_error(&rec, &lost) == hal::Status::kOk) {
    errors_lost_ += lost;
    const uint32_t code = rec.code < kEngineErrorCount ? rec.code : 0;
    ++errors_[code];
    log(kLogWarn,
        "engines: %s engine %u queue %d: %s (status %u) at 0x%llx +%llu, cookie 0x%llx, MPU generation %u",
        rec.source == kSourceDma ? "DMA" : rec.source == kSourceTensor ? "tensor" : "?", unsigned(rec.engine),
        rec.queue == kQueueFirmware ? -1 : int(rec.queue), error_name(rec.code), unsigned(rec.status),
        (unsigned long long)rec.address, (unsigned long long)rec.length, (unsigned long long)rec.cookie,
        unsigned(rec.mpu_generation));
  }
}

bool EnginesService::tensor_stats(uint32_t e, EngineStats* out, bool* busy) const {
  if (!present_ || e >= region_.tensor_engines()) return false;
  const TensorEngineBlock* b = region_.tensor(e);
  vtrn::hostif::SeqlockAttempts tries(64);
  if (!vtrn::hostif::seqlock_read(&b->stats, out, tries)) return false;
  *busy = __atomic_load_n(&b->state.value, __ATOMIC_RELAXED) == kEngineBusy;
  return true;
}

bool EnginesService::set_tensor_remap(hal::tensor::TensorEngine* engines, uint32_t n, uint64_t base, uint64_t size) {
  tensor_remap_end_ = 0;
  if (!present_ || n == 0) return false;
  if (!(region_.id().capabilities & kCapTensorRemap)) {
    log(kLogWarn, "engines: tensor engines of ABI 1.%u have no remap window: GEMMs on stitched allocations run on "
        "the cores", unsigned(region_.id().abi_minor));
    return false;
  }
  TensorConfig c{};
  c.remap_base = base;
  c.remap_size = size;
  uint32_t applied = 0;
  for (; applied < n; ++applied) {
    hal::tensor::TensorEngine& e = engines[applied];
    uint32_t st = kEngineOk;
    const bool ok = e.configure(c) == hal::Status::kOk &&
                    wait_ack(
                        region_, [&e, &st] { return e.config_done(&st); }, uint16_t(kVectorTensor0 + e.index()),
                        2'000'000'000ull) &&
                    st == kEngineOk;
    if (!ok) {
      log(kLogErr, "engines: tensor engine %u refused the remap window 0x%llx + %llu MiB (status 0x%x): GEMMs on "
          "stitched allocations run on the cores", unsigned(e.index()), (unsigned long long)base,
          (unsigned long long)(size >> 20), unsigned(st));
      break;
    }
  }
  if (applied == n) {
    tensor_remap_end_ = base + size;
    log(kLogInfo, "engines: %u tensor engines reach stitched allocations (remap window 0x%llx + %llu MiB)",
        unsigned(n), (unsigned long long)base, (unsigned long long)(size >> 20));
    return true;
  }
  // All or none: a GEMM's tiles go to every engine.
  const TensorConfig none{};
  for (uint32_t i = 0; i < applied; ++i) {
    hal::tensor::TensorEngine& e = engines[i];
    uint32_t st = kEngineOk;
    if (e.configure(none) != hal::Status::kOk ||
        !wait_ack(
            region_, [&e, &st] { return e.config_done(&st); }, uint16_t(kVectorTensor0 + e.index()),
            2'000'000'000ull))
      log(kLogErr, "engines: tensor engine %u did not drop its remap window", unsigned(e.index()));
  }
  return false;
}

uint64_t EnginesService::tensor_reach(uint64_t remap_base) const {
  return tensor_remap_end_ != 0 && mpu_stats_.stitched_skipped == 0 ? tensor_remap_end_ : remap_base;
}

Vectors EnginesService::poll(Turn&) {
  if (present_) drain_errors();
  return 0;
}

bool EnginesService::has_work() {
  if (!present_) return false;
  // One index read of the error ring against our cursor.
  return region_.errors_pending();
}

}  // namespace fw::engines
