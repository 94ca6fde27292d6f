// engines_check.elf: the chip side of the vtrn-hw integration test
// (hw/test/hw_chip_test.cpp). A bare-metal image, not the firmware: it finds
// the engine function (00:02.0) and the host interface (00:01.0) on QEMU
// virt's PCIe, routes the engine function's MSI-X through the GICv2m frame,
// discovers the engines from the ID block, and then, with the HAL drivers
// the firmware will use (hal/copy_engine.h, hal/tensor.h):
//  - resets the engines and programs the MPU;
//  - copies 1 MiB HBM -> HBM on a DMA engine's firmware queue, waiting for
//    its completion interrupt, and checks the bytes;
//  - copies to HBM outside every MPU window: kErrNotAllocated and an error
//    interrupt whose record names the address;
//  - configures the host's DMA queues in BAR2 and lets the harness (the
//    host) copy through them;
//  - runs a GEMM per dtype split across every tensor engine, waiting for
//    their interrupts, beside the same GEMM on this core (common/kernels);
//    the harness verifies both against the double reference;
//  - injects a tensor engine fault, then resets with GEMMs in flight and
//    checks that nothing lands after the reset.
// Crash mode (mailbox mode 1): starts GEMMs, asks the harness to kill
// vtrn-hw, and reports the frozen heartbeat. Every step prints one line;
// "engines-check: PASS" / "engines-crash: DETECTED" end a good run, any
// "FAIL" line a bad one.
#include <stdint.h>
#include <string.h>

#include "bm.h"
#include "engines_mailbox.h"
#include "hal/copy_engine.h"
#include "hal/gic.h"
#include "hal/ivshmem.h"
#include "hal/pcie.h"
#include "hal/tensor.h"
#include "vtrn/dma_abi.h"
#include "vtrn/engine_abi.h"
#include "vtrn/kernels.h"
#include "vtrn/numerics.h"

namespace {

using namespace vtrn::engine;
namespace mb = bm::mailbox;

// QEMU 7.2 virt, gic-version=2, highmem (fixed by the machine; see bm.h).
constexpr uintptr_t kGicd = 0x08000000;
constexpr uintptr_t kGicc = 0x08010000;
constexpr uintptr_t kV2m = 0x08020000;
constexpr uintptr_t kEcam = 0x4010000000ull;
constexpr uint64_t kEcamSize = 0x10000000;

// Test HBM inside the image's 256 MiB of RAM.
constexpr uint64_t kHbm = 0x44000000;
constexpr uint64_t kHbmSize = 0x0C000000;      // 192 MiB, to the end of RAM
constexpr uint64_t kMpuWindow = 0x08000000;    // the first 128 MiB are "allocated"
constexpr uint64_t kOutside = kHbm + kMpuWindow + 0x100000;

hal::pcie::Ecam g_ecam;
hal::pcie::Topology g_topo;
hal::gic::Gic g_gic;
hal::gic::Gicv2m g_v2m;
hal::ivshmem::IvshmemDoorbell g_engfn;
hal::ivshmem::IvshmemDoorbell g_hostfn;
hal::copy::EngineRegion g_region;
uint32_t g_first_spi = 0;
uint32_t g_irq_seen[kVectorCount];
bool g_failed = false;

alignas(64) float g_scratch[vtrn::kern::kGemmScratchMaxBytes / sizeof(float) + 16];

void fail(const char* what, uint64_t v = 0) {
  bm::print("engines-check: FAIL ");
  bm::print(what);
  bm::print(" ");
  bm::print_hex(v);
  bm::print("\n");
  g_failed = true;
}

[[noreturn]] void fatal(const char* what, uint64_t v = 0) {
  fail(what, v);
  bm::power_off();
}

uint64_t now_ns() { return bm::ticks_to_ns(bm::now_ticks()); }

// Takes interrupts until `vector`'s has been seen (counted in g_irq_seen),
// or `timeout_ms` passed. WFI with interrupts masked still wakes on a
// pending one; the timer bounds the wait.
bool wait_irq(uint16_t vector, uint64_t timeout_ms) {
  const uint64_t deadline = now_ns() + timeout_ms * 1000000;
  for (;;) {
    if (g_irq_seen[vector]) {
      --g_irq_seen[vector];
      return true;
    }
    hal::gic::Irq irq = g_gic.acknowledge();
    if (!irq.spurious) {
      if (irq.intid == bm::kTimerPpi) {
        bm::disarm_wakeup();
      } else if (irq.intid >= g_first_spi && irq.intid < g_first_spi + kVectorCount) {
        ++g_irq_seen[irq.intid - g_first_spi];
      }
      (void)g_gic.end_of_interrupt(irq);
      continue;
    }
    if (now_ns() > deadline) return false;
    bm::arm_wakeup_ns(1000000);
    asm volatile("wfi");
  }
}

void print_kv(const char* k, uint64_t v) {
  bm::print(" ");
  bm::print(k);
  bm::print("=");
  bm::print_u64(v);
}

mb::Mailbox* mailbox() { return reinterpret_cast<mb::Mailbox*>(g_hostfn.shm_base()); }

void platform() {
  if (g_ecam.init(kEcam, kEcamSize, 0, 255) != hal::Status::kOk) fatal("ecam init");
  hal::pcie::Windows w;
  w.mmio32 = hal::pcie::Window{0x10000000, 0x10000000, 0x2eff0000};
  w.mmio64 = hal::pcie::Window{0x8000000000ull, 0x8000000000ull, 0x40000000};
  if (hal::pcie::enumerate(g_ecam, w, &g_topo) != hal::Status::kOk) fatal("pcie enumerate");
  const hal::pcie::Function* host = nullptr;
  const hal::pcie::Function* eng = nullptr;
  for (uint32_t i = 0; i < g_topo.count; ++i) {
    const hal::pcie::Function& f = g_topo.functions[i];
    if (!hal::ivshmem::is_ivshmem(f)) continue;
    if (f.bdf.dev == 1) host = &f;
    if (f.bdf.dev == kEnginePciDevice) eng = &f;
  }
  if (!host || !eng) fatal("ivshmem functions 00:01.0 and 00:02.0 not both found");
  if (g_hostfn.init(g_ecam, *host) != hal::Status::kOk) fatal("host function init");
  if (g_engfn.init(g_ecam, *eng) != hal::Status::kOk) fatal("engine function init");
  hal::gic::GicConfig gc;
  gc.dist_base = kGicd;
  gc.cpu_base = kGicc;
  if (g_gic.init(gc) != hal::Status::kOk) fatal("gic init");
  if (g_v2m.init(kV2m, g_gic.line_count()) != hal::Status::kOk) fatal("v2m init");
  if (g_engfn.vector_count() < kVectorCount) fatal("engine function vectors", g_engfn.vector_count());
  if (g_engfn.route_to_v2m(g_v2m, 0, &g_first_spi) != hal::Status::kOk) fatal("msi-x routing");
  for (uint32_t v = 0; v < kVectorCount; ++v) {
    (void)g_gic.set_trigger(g_first_spi + v, hal::gic::Trigger::kEdge);
    (void)g_gic.enable(g_first_spi + v);
  }
  (void)g_gic.enable(bm::kTimerPpi);
  (void)g_engfn.enable_msix();
  const uint64_t regs = eng->bars[hal::ivshmem::kRegsBar].cpu_base;
  const hal::Status st = g_region.init(g_engfn.shm_base(), g_engfn.shm_size(),
                                       regs + offsetof(hal::ivshmem::IvshmemRegs, Doorbell));
  if (st != hal::Status::kOk) fatal("engine region: no engines published (status)", uint64_t(st));
  bm::print("engines: found");
  print_kv("dma", g_region.dma_engines());
  print_kv("tensor", g_region.tensor_engines());
  print_kv("dma_gbps", g_region.id().dma_bytes_per_s / 1000000000ull);
  print_kv("fp32_gflops", g_region.id().tensor_flops_per_s[0] / 1000000000ull);
  print_kv("fp4_gflops", g_region.id().tensor_flops_per_s[4] / 1000000000ull);
  print_kv("first_spi", g_first_spi);
  bm::print(" build=");
  bm::print(g_region.id().hw_build);
  bm::print("\n");
  if (g_region.dma_engines() == 0 || g_region.tensor_engines() == 0) fatal("no engines");
}

// Waits up to 2 s for `done`, ringing `vector` again every 10 ms: a doorbell
// is a wake-up hint, and one rung before QEMU has processed all of vtrn-hw's
// eventfds (the ivshmem handshake finishes asynchronously in QEMU's main
// loop) is dropped.
template <typename Done>
void wait_ack(Done done, uint16_t vector, const char* what) {
  const uint64_t deadline = now_ns() + 2000000000ull;
  uint64_t next_ring = now_ns() + 10000000ull;
  while (!done()) {
    if (now_ns() > deadline) fatal(what);
    if (now_ns() > next_ring) {
      (void)g_region.ring(vector);
      next_ring = now_ns() + 10000000ull;
    }
  }
}

void reset_engines() {
  if (g_region.begin_reset() != hal::Status::kOk) fatal("begin_reset");
  wait_ack([] { return g_region.reset_done(); }, kVectorControl, "engine reset not acknowledged");
}

void program_mpu() {
  MpuWindow w{kHbm, kMpuWindow, kMpuValid, 1, 0};
  uint32_t gen = 0;
  if (g_region.mpu_program(&w, 1, &gen) != hal::Status::kOk) fatal("mpu program");
  wait_ack([gen] { return g_region.mpu_acked(gen); }, kVectorControl, "mpu generation not acknowledged");
  bm::print("mpu: window [");
  bm::print_hex(kHbm);
  bm::print(", +");
  bm::print_hex(kMpuWindow);
  bm::print(") acknowledged by every engine");
  print_kv("generation", gen);
  bm::print("\n");
}

hal::copy::HwEngine g_dma;

void dma_config(uint32_t host_mask) {
  DmaConfig c{};
  c.host_queue_mask = host_mask;
  c.dma_region_offset = mb::kDmaRegionOffset;
  c.queue_count = mb::kQueues;
  c.depth = mb::kDepth;
  c.host_window_offset = mb::kWindowOffset;
  c.host_window_size = g_hostfn.shm_size() - mb::kWindowOffset;
  c.hbm_base = kHbm;
  c.hbm_size = kHbmSize;
  c.host_irq_armed = host_mask ? 1 : 0;
  if (g_dma.configure(c) != hal::Status::kOk) fatal("dma configure");
  uint32_t st = 0;
  wait_ack([&st] { return g_dma.config_done(&st); }, uint16_t(kVectorDma0), "dma config not acknowledged");
  if (st != kEngineOk) fatal("dma config refused", st);
}

void dma_fw_copy() {
  if (g_dma.init(g_region, 0) != hal::Status::kOk) fatal("dma engine init");
  dma_config(0);
  g_dma.arm_irq(true);
  g_region.arm_errors(true);
  const uint32_t n = 1u << 20;
  uint8_t* src = reinterpret_cast<uint8_t*>(kHbm + 0x100000);
  uint8_t* dst = reinterpret_cast<uint8_t*>(kHbm + 0x300000 + 3);
  for (uint32_t i = 0; i < n; ++i) src[i] = uint8_t(i * 131 + 7);
  const uint64_t t0 = now_ns();
  if (g_dma.start(dst, src, n) != hal::Status::kOk) fatal("dma start");
  if (!wait_irq(uint16_t(kVectorDma0), 5000)) fatal("no DMA completion interrupt");
  hal::copy::Completion c;
  if (g_dma.poll_done(&c) != hal::copy::Progress::kDone) fatal("interrupt before the completion");
  const uint64_t t1 = now_ns();
  if (c.status != hal::Status::kOk || c.bytes != n) fatal("dma copy status", uint64_t(g_dma.last_status()));
  for (uint32_t i = 0; i < n; ++i) {
    if (dst[i] != src[i]) fatal("dma copy byte differs at", i);
  }
  bm::print("dma-copy: ok engine=0 fw-queue");
  print_kv("bytes", n);
  print_kv("us", (t1 - t0) / 1000);
  print_kv("irq_spi", g_first_spi + kVectorDma0);
  bm::print("\n");

  // Outside every MPU window (but inside HBM): refused, reported.
  if (g_dma.start(reinterpret_cast<void*>(kOutside), src, 4096) != hal::Status::kOk) fatal("dma start");
  if (!wait_irq(kVectorControl, 5000)) fatal("no error interrupt for an MPU fault");
  if (!wait_irq(uint16_t(kVectorDma0), 5000)) fatal("no completion interrupt for the refused copy");
  (void)g_dma.poll_done(&c);
  if (g_dma.last_status() != vtrn::dma::kErrNotAllocated) fatal("mpu fault status", g_dma.last_status());
  ErrorRecord rec;
  uint32_t lost = 0;
  if (g_region.next_error(&rec, &lost) != hal::Status::kOk) fatal("no error record");
  if (rec.code != kEngineMpuFault || rec.address != kOutside || rec.length != 4096 || rec.source != kSourceDma)
    fatal("error record", rec.address);
  bm::print("dma-mpu-fault: ok status=not-allocated record: code=mpu-fault address=");
  bm::print_hex(rec.address);
  print_kv("length", rec.length);
  print_kv("generation", rec.mpu_generation);
  bm::print("\n");
}

void host_queues() {
  mb::Mailbox* m = mailbox();
  uint8_t* bar2 = reinterpret_cast<uint8_t*>(g_hostfn.shm_base());
  memset(bar2 + mb::kDmaRegionOffset, 0, vtrn::dma::dma_region_bytes(mb::kQueues, mb::kDepth));
  vtrn::dma::DmaRegionHeader h{};
  h.version = vtrn::dma::kDmaRegionVersion;
  h.queue_count = mb::kQueues;
  h.depth = mb::kDepth;
  h.max_desc_bytes = vtrn::dma::kMaxDescBytes;
  h.queue_stride = vtrn::dma::queue_stride(mb::kDepth);
  h.hbm_base = kHbm;
  h.hbm_size = kHbmSize;
  h.max_chain_descs = vtrn::dma::kMaxChainDescs;
  memcpy(bar2 + mb::kDmaRegionOffset, &h, sizeof h);
  dma_config((1u << mb::kQueues) - 1);
  m->dma_region_offset = mb::kDmaRegionOffset;
  m->window_offset = mb::kWindowOffset;
  m->window_size = g_hostfn.shm_size() - mb::kWindowOffset;
  m->queues = mb::kQueues;
  m->depth = mb::kDepth;
  m->hbm_dst = kHbm + 0x1000000;
  m->host_bytes = 4u << 20;
  __atomic_store_n(&m->state, uint32_t(mb::kHostTurn), __ATOMIC_RELEASE);
  const uint64_t deadline = now_ns() + 30000000000ull;
  uint32_t irqs = 0;
  while (__atomic_load_n(&m->host_state, __ATOMIC_ACQUIRE) != mb::kHostDone) {
    if (now_ns() > deadline) fatal("host did not finish its DMA");
    if (wait_irq(uint16_t(kVectorDma0), 10)) ++irqs;
  }
  if (m->host_status != 0) fatal("host DMA through the engine", m->host_status);
  const EngineStats& s = g_region.dma(0)->stats;
  bm::print("host-dma: ok the engine served the host's BAR2 queues");
  print_kv("bytes_seen", s.bytes);
  print_kv("modeled_us", s.modeled_ns / 1000);
  print_kv("accounting_irqs", irqs);
  bm::print("\n");
}

// A small LCG: the same data on every run.
uint32_t g_seed = 12345;
float rnd() {
  g_seed = g_seed * 1664525u + 1013904223u;
  return float(int32_t(g_seed >> 8) % 4096) / 1024.0f;
}

hal::tensor::TensorEngine g_tensor[kMaxTensorEngines];

void init_tensors() {
  for (uint32_t j = 0; j < g_region.tensor_engines(); ++j) {
    if (g_tensor[j].init(g_region, j) != hal::Status::kOk) fatal("tensor engine init", j);
    g_tensor[j].arm_irq(true);
  }
}

// Splits rows across every tensor engine and waits for each interrupt.
void engine_gemm(const mb::GemmRecord& r, uint64_t* wall, uint64_t* modeled, uint32_t* status) {
  const vtrn::num::DType dt = vtrn::num::DType(r.dtype);
  const uint32_t engines = g_region.tensor_engines();
  const uint32_t rows = (r.m + engines - 1) / engines;
  uint32_t used = 0;
  for (uint32_t j = 0; j < engines; ++j) {
    const uint32_t r0 = j * rows;
    if (r0 >= r.m) break;
    const uint32_t mr = r.m - r0 < rows ? r.m - r0 : rows;
    hal::tensor::Gemm g;
    g.dtype = r.dtype;
    g.m = mr;
    g.n = r.n;
    g.k = r.k;
    g.a = r.a + vtrn::num::operand_bytes(dt, r0, r.k);
    g.b = r.b;
    g.c = r.c_engine + uint64_t(r0) * r.n * 4;
    if (dt == vtrn::num::DType::kMXFP4) {
      g.a_scales = r.a_scales + vtrn::num::scale_bytes(dt, r0, r.k);
      g.b_scales = r.b_scales;
    }
    g.cookie = 1000 + j;
    if (g_tensor[j].submit(g) != hal::Status::kOk || g_tensor[j].ring() != hal::Status::kOk) fatal("tensor submit");
    ++used;
  }
  *wall = *modeled = 0;
  *status = 0;
  for (uint32_t j = 0; j < used; ++j) {
    if (!wait_irq(uint16_t(kVectorTensor0 + j), 20000)) fatal("no tensor completion interrupt from engine", j);
    TensorCompletion c;
    if (g_tensor[j].poll(&c) != hal::Status::kOk) fatal("interrupt before the tensor completion", j);
    if (c.cookie != 1000 + j || c.engine != j) fatal("tensor completion cookie", c.cookie);
    if (c.status != kTensorOk) *status = c.status;
    *wall += c.wall_ns;
    if (c.modeled_ns > *modeled) *modeled = c.modeled_ns;
  }
}

void gemms() {
  init_tensors();
  mb::Mailbox* m = mailbox();
  const vtrn::num::DType all[] = {vtrn::num::DType::kF32, vtrn::num::DType::kBF16, vtrn::num::DType::kFP8E4M3,
                                  vtrn::num::DType::kFP8E5M2, vtrn::num::DType::kMXFP4};
  const uint32_t M = 64, N = 48, K = 96;
  static float fa[M * K], fb[N * K];
  uint64_t next = kHbm + 0x2000000;
  auto take = [&](uint64_t bytes) {
    const uint64_t a = next;
    next = (next + bytes + 4095) & ~uint64_t(4095);
    return a;
  };
  m->gemm_count = 0;
  for (vtrn::num::DType dt : all) {
    for (float& x : fa) x = rnd() - 2.0f;
    for (float& x : fb) x = rnd() - 2.0f;
    mb::GemmRecord r{};
    r.dtype = uint32_t(dt);
    r.m = M;
    r.n = N;
    r.k = K;
    r.a = take(vtrn::num::operand_bytes(dt, M, K));
    r.b = take(vtrn::num::operand_bytes(dt, N, K));
    const bool mx = dt == vtrn::num::DType::kMXFP4;
    r.a_scales = mx ? take(vtrn::num::scale_bytes(dt, M, K)) : 0;
    r.b_scales = mx ? take(vtrn::num::scale_bytes(dt, N, K)) : 0;
    r.c_engine = take(uint64_t(M) * N * 4);
    r.c_core = take(uint64_t(M) * N * 4);
    vtrn::num::quantize_operand(dt, fa, M, K, reinterpret_cast<void*>(r.a), reinterpret_cast<uint8_t*>(r.a_scales));
    vtrn::num::quantize_operand(dt, fb, N, K, reinterpret_cast<void*>(r.b), reinterpret_cast<uint8_t*>(r.b_scales));
    vtrn::kern::GemmArgs args{dt, M, N, K, reinterpret_cast<const void*>(r.a),
                              reinterpret_cast<const uint8_t*>(r.a_scales), reinterpret_cast<const void*>(r.b),
                              reinterpret_cast<const uint8_t*>(r.b_scales), reinterpret_cast<float*>(r.c_core)};
    const uint64_t c0 = now_ns();
    if (!vtrn::kern::gemm_rows(args, 0, M, g_scratch, sizeof g_scratch)) fatal("on-core gemm");
    const uint64_t core_ns = now_ns() - c0;
    uint32_t status = 0;
    const uint64_t e0 = now_ns();
    engine_gemm(r, &r.wall_ns, &r.modeled_ns, &status);
    const uint64_t engine_ns = now_ns() - e0;
    if (status != kTensorOk) fatal("tensor gemm status", status);
    // Cheap sanity here (the harness applies the documented bound): the
    // engine and the core agree to a relative 1e-3 of the row's scale.
    const float* ce = reinterpret_cast<const float*>(r.c_engine);
    const float* cc = reinterpret_cast<const float*>(r.c_core);
    for (uint32_t i = 0; i < M * N; ++i) {
      const float d = ce[i] - cc[i];
      const float s = (cc[i] < 0 ? -cc[i] : cc[i]) + 1.0f;
      if (d > 1e-3f * s * K || -d > 1e-3f * s * K) fatal("engine and core results differ at", i);
    }
    m->gemms[m->gemm_count++] = r;
    bm::print("gemm: ok dtype=");
    bm::print(vtrn::num::dtype_name(dt));
    print_kv("engines", g_region.tensor_engines());
    print_kv("engine_wall_ns", engine_ns);
    print_kv("engine_busy_ns", r.wall_ns);
    print_kv("modeled_ns", r.modeled_ns);
    print_kv("core_ns", core_ns);
    bm::print("\n");
  }
}

void inject_and_reset() {
  // An injected fault fails exactly the next command of that engine.
  const mb::GemmRecord& r = mailbox()->gemms[0];
  if (g_region.inject(kInjectTensor, 0) != hal::Status::kOk) fatal("inject");
  hal::tensor::Gemm g;
  g.dtype = r.dtype;
  g.m = r.m;
  g.n = r.n;
  g.k = r.k;
  g.a = r.a;
  g.b = r.b;
  g.c = kHbm + 0x4000000;
  g.cookie = 77;
  if (g_tensor[0].submit(g) != hal::Status::kOk || g_tensor[0].ring() != hal::Status::kOk) fatal("submit");
  if (!wait_irq(uint16_t(kVectorTensor0), 5000)) fatal("no completion for the injected fault");
  TensorCompletion c;
  if (g_tensor[0].poll(&c) != hal::Status::kOk || c.status != kTensorInjected) fatal("injected status", c.status);
  ErrorRecord rec;
  uint32_t lost;
  bool seen = false;
  while (g_region.next_error(&rec, &lost) == hal::Status::kOk) seen = seen || rec.code == kEngineInjected;
  if (!seen || !g_region.injected()) fatal("injected fault not recorded");
  bm::print("tensor-inject: ok status=injected record=injected\n");

  // Reset with work in flight: 16 GEMMs of 384^3 queued on engine 0, reset
  // right away; afterwards their C must stay untouched.
  const uint32_t S = 384;
  uint64_t a = kHbm + 0x4000000, b = a + uint64_t(S) * S * 4, cbase = b + uint64_t(S) * S * 4;
  for (uint32_t i = 0; i < 16; ++i) {
    hal::tensor::Gemm big;
    big.dtype = uint32_t(vtrn::num::DType::kF32);
    big.m = big.n = big.k = S;
    big.a = a;
    big.b = b;
    big.c = cbase + uint64_t(i) * S * S * 4;
    big.cookie = 2000 + i;
    big.irq = false;
    if (g_tensor[0].submit(big) != hal::Status::kOk) fatal("big submit", i);
  }
  (void)g_tensor[0].ring();
  reset_engines();
  volatile uint32_t* cw = reinterpret_cast<volatile uint32_t*>(cbase);
  const uint64_t words = uint64_t(16) * S * S;
  for (uint64_t i = 0; i < words; i += 97) cw[i] = 0xDEADBEEF;
  const uint64_t until = now_ns() + 200000000ull;
  while (now_ns() < until) {
  }
  for (uint64_t i = 0; i < words; i += 97) {
    if (cw[i] != 0xDEADBEEF) fatal("an engine wrote C after the reset completed, word", i);
  }
  const TensorEngineBlock* tb = g_region.tensor(0);
  if (tb->sq_prod.value != 0 || tb->cq_prod.value != 0) fatal("queue not at index 0 after reset");
  bm::print("reset: ok 16 GEMMs in flight, nothing landed after reset_ack, queues at 0\n");
  // Everything works again after the reset (new MPU, fresh queues).
  program_mpu();
  init_tensors();
}

void crash_mode() {
  init_tensors();
  mb::Mailbox* m = mailbox();
  const uint32_t S = 512;
  const uint64_t a = kHbm + 0x4000000, b = a + uint64_t(S) * S * 4, c = b + uint64_t(S) * S * 4;
  for (uint32_t i = 0; i < 32; ++i) {
    hal::tensor::Gemm g;
    g.dtype = uint32_t(vtrn::num::DType::kF32);
    g.m = g.n = g.k = S;
    g.a = a;
    g.b = b;
    g.c = c;
    g.cookie = i;
    if (g_tensor[0].submit(g) != hal::Status::kOk) fatal("crash submit");
  }
  (void)g_tensor[0].ring();
  __atomic_store_n(&m->state, uint32_t(mb::kKillNow), __ATOMIC_RELEASE);
  // A live vtrn-hw beats every kHeartbeatMs; a frozen beat for 10 periods
  // while completions are owed is a dead engine block.
  uint32_t beat = g_region.heartbeat();
  uint64_t since = now_ns();
  uint32_t done = 0;
  for (;;) {
    TensorCompletion tc;
    while (g_tensor[0].poll(&tc) == hal::Status::kOk) ++done;
    if (done == 32) fatal("every GEMM completed: vtrn-hw was not killed");
    (void)wait_irq(uint16_t(kVectorTensor0), 50);
    const uint32_t now_beat = g_region.heartbeat();
    if (now_beat != beat) {
      beat = now_beat;
      since = now_ns();
    } else if (now_ns() - since > 10ull * kHeartbeatMs * 1000000ull) {
      break;
    }
  }
  bm::print("engines-crash: DETECTED heartbeat frozen at ");
  bm::print_u64(beat);
  print_kv("completed", done);
  print_kv("owed", 32 - done);
  bm::print("\n");
}

}  // namespace

void bm_run() {
  mb::Mailbox* m;
  platform();
  m = mailbox();
  m->magic = mb::kMagic;
  reset_engines();
  program_mpu();
  if (m->mode == mb::kModeCrash) {
    crash_mode();
    return;
  }
  dma_fw_copy();
  host_queues();
  gemms();
  inject_and_reset();
  __atomic_store_n(&m->state, uint32_t(mb::kDone), __ATOMIC_RELEASE);
  if (!g_failed) bm::print("engines-check: PASS\n");
}
