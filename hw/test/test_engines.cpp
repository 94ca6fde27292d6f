// Host unit tests of the engine models (hw/): the MPU snapshot, a DMA engine
// serving its firmware queue and the host's BAR2 queues, a tensor engine's
// GEMM per dtype against the double reference, every refusal with its
// status and error record, fault injection, reset, and the board DT
// properties. The engine region, BAR2 and RAM are ordinary host buffers;
// Signals records the interrupts instead of writing eventfds.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <libfdt.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <vector>

#include "vtrn/ctrl_ring.h"
#include "vtrn/dma_host.h"
#include "vtrn/engine_abi.h"
#include "vtrn/hw/dma_engine.h"
#include "vtrn/hw/engine_props.h"
#include "vtrn/hw/mpu.h"
#include "vtrn/hw/tensor_engine.h"
#include "vtrn/kernels.h"
#include "vtrn/kernels_reference.h"

using namespace vtrn;
using namespace vtrn::engine;
using namespace vtrn::hw;

namespace {

constexpr uint64_t kRamBase = 0x40000000ull;
constexpr uint64_t kRamSize = 64ull << 20;
constexpr uint64_t kHbmBase = kRamBase + (16ull << 20);
constexpr uint64_t kHbmSize = 48ull << 20;
constexpr uint64_t kBar2Size = 4ull << 20;
constexpr uint64_t kDmaRegion = 0x100000;
constexpr uint32_t kQueues = 2;
constexpr uint32_t kDepth = 64;
constexpr uint64_t kWindowOffset = 0x200000;
constexpr uint64_t kWindowSize = 0x200000;

struct Recorder final : Signals {
  void chip_irq(uint16_t v) override { ++chip[v]; }
  void host_irq() override { ++host; }
  uint32_t chip[kVectorCount] = {};
  uint32_t host = 0;
};

uint64_t fake_ns = 0;
uint64_t fake_clock() { return fake_ns += 1000; }

struct Rig {
  std::vector<uint8_t> region_buf = std::vector<uint8_t>(kRegionBytes + 4096);
  std::vector<uint8_t> bar2_buf = std::vector<uint8_t>(kBar2Size + 4096);
  ChipMemory mem;
  Recorder sig;
  ErrorLog log{mem, sig};
  EngineProps props;
  uint32_t err_cursor = 0;

  static uint8_t* page(std::vector<uint8_t>& v) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(v.data()) + 4095) & ~uintptr_t(4095));
  }
  Rig() {
    mem.region = page(region_buf);
    mem.bar2 = page(bar2_buf);
    mem.bar2_size = kBar2Size;
    // RAM is a memfd, as in vtrn-hw: the DMA engines' remap views map it again.
    mem.ram_fd = memfd_create("rig-ram", MFD_CLOEXEC);
    assert_true(mem.ram_fd >= 0);
    assert_int_equal(ftruncate(mem.ram_fd, off_t(kRamSize)), 0);
    void* ram = mmap(nullptr, kRamSize, PROT_READ | PROT_WRITE, MAP_SHARED, mem.ram_fd, 0);
    assert_true(ram != MAP_FAILED);
    mem.ram = static_cast<uint8_t*>(ram);
    mem.ram_base = kRamBase;
    mem.ram_size = kRamSize;
    props.dma_engines = 2;
    props.tensor_engines = 2;
    props.dma_bytes_per_s = 100ull * 1000000000ull;
    const uint64_t tera = 1000000000000ull;
    props.tensor_flops_per_s[uint32_t(num::DType::kF32)] = 1 * tera;
    props.tensor_flops_per_s[uint32_t(num::DType::kBF16)] = 4 * tera;
    props.tensor_flops_per_s[uint32_t(num::DType::kFP8E4M3)] = 8 * tera;
    props.tensor_flops_per_s[uint32_t(num::DType::kFP8E5M2)] = 8 * tera;
    props.tensor_flops_per_s[uint32_t(num::DType::kMXFP4)] = 16 * tera;
  }
  ~Rig() {
    munmap(mem.ram, kRamSize);
    close(mem.ram_fd);
  }
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;
  uint8_t* hbm(uint64_t addr) { return mem.ram + (addr - kRamBase); }
  void mpu(std::initializer_list<MpuWindow> windows) {
    MpuBlock* b = mem.mpu();
    const uint32_t gen = b->header.generation.value + 1;
    uint32_t n = 0;
    for (const MpuWindow& w : windows) b->bank[gen & 1][n++] = w;
    b->bank_count[gen & 1] = n;
    b->header.count.value = n;
    hostif::store_release(&b->header.generation, gen);
  }
  bool next_error(ErrorRecord* r) {
    ErrorBlock* e = mem.errors();
    if (e->prod.value == err_cursor) return false;
    *r = e->records[err_cursor++ % kErrorRecords];
    return true;
  }
};

MpuWindow win(uint64_t base, uint64_t size, uint32_t flags = kMpuValid, uint32_t tag = 0) {
  return MpuWindow{base, size, flags, tag, 0};
}

// A stitched allocation's extent: device `base` in the remap window onto `phys`.
constexpr uint64_t kRemapBase = 0x1000000000ull;
constexpr uint64_t kRemapSize = 64ull << 20;
MpuWindow xlat(uint64_t base, uint64_t size, uint64_t phys, uint32_t tag) {
  return MpuWindow{base, size, kMpuValid | kMpuTranslate, tag, phys};
}

RemapTarget remap_target(const Rig& r) {
  RemapTarget t;
  t.ram_fd = r.mem.ram_fd;
  t.ram_base = kRamBase;
  t.ram_size = kRamSize;
  t.hbm_base = kHbmBase;
  t.hbm_size = kHbmSize;
  t.remap_base = kRemapBase;
  t.remap_size = kRemapSize;
  return t;
}

// The MPU.

void test_mpu_off_allows_everything_and_on_allows_only_windows(void**) {
  Rig r;
  Mpu m;
  assert_int_equal(m.refresh(r.mem.mpu()), 0);
  assert_int_equal(m.check(kHbmBase, 1 << 20), dma::kOk);
  r.mpu({win(kHbmBase, 0x10000), win(kHbmBase + 0x20000, 0x10000)});
  assert_int_equal(m.refresh(r.mem.mpu()), 1);
  assert_int_equal(m.check(kHbmBase, 0x10000), dma::kOk);
  assert_int_equal(m.check(kHbmBase + 0x20000 + 5, 100), dma::kOk);
  assert_int_equal(m.check(kHbmBase + 0xfff0, 0x20), dma::kErrNotAllocated);
  assert_int_equal(m.last_fault().address, kHbmBase + 0xfff0);
  assert_int_equal(m.last_fault().length, 0x20);
  // Spanning two windows is not "inside one allocation".
  assert_int_equal(m.check(kHbmBase, 0x30000), dma::kErrNotAllocated);
  assert_int_equal(m.check(kHbmBase + 0x10000, 1), dma::kErrNotAllocated);
}

void test_mpu_poison_wins_over_a_live_window(void**) {
  Rig r;
  Mpu m;
  r.mpu({win(kHbmBase, 0x100000), win(kHbmBase + 0x40000, 0x10000, kMpuValid | kMpuPoison)});
  m.refresh(r.mem.mpu());
  assert_int_equal(m.check(kHbmBase, 0x40000), dma::kOk);
  assert_int_equal(m.check(kHbmBase + 0x3ff00, 0x200), dma::kErrEcc);
  assert_int_equal(m.check(kHbmBase + 0x50000, 0x100), dma::kOk);
}

void test_mpu_window_of_the_last_pass_never_admits_what_the_table_does_not(void**) {
  Rig r;
  Mpu m;
  r.mpu({win(kHbmBase, 0x10000), win(kHbmBase + 0x20000, 0x10000),
         win(kHbmBase + 0x8000, 0x1000, kMpuValid | kMpuPoison)});
  m.refresh(r.mem.mpu());
  assert_int_equal(m.check(kHbmBase + 0x20000, 0x100), dma::kOk);
  // Past the end of the window that just passed, and before its start.
  assert_int_equal(m.check(kHbmBase + 0x2ff00, 0x200), dma::kErrNotAllocated);
  assert_int_equal(m.check(kHbmBase + 0x1fff0, 0x20), dma::kErrNotAllocated);
  assert_int_equal(m.check(kHbmBase, 0x100), dma::kOk);
  // Poison inside the window that just passed still wins.
  assert_int_equal(m.check(kHbmBase + 0x8000, 0x10), dma::kErrEcc);
  assert_int_equal(m.check(kHbmBase + 0x100, 0x100), dma::kOk);
  // A new table without that window refuses what it admitted.
  r.mpu({win(kHbmBase + 0x20000, 0x10000)});
  m.refresh(r.mem.mpu());
  assert_int_equal(m.check(kHbmBase + 0x100, 0x100), dma::kErrNotAllocated);
  assert_int_equal(m.check(kHbmBase + 0x20000, 0x100), dma::kOk);
  r.mpu({});
  m.refresh(r.mem.mpu());
  assert_int_equal(m.check(kHbmBase + 0x20000, 0x100), dma::kErrNotAllocated);
}

void test_mpu_refuses_a_bank_with_overlapping_or_malformed_windows(void**) {
  Rig r;
  Mpu m;
  r.mpu({win(kHbmBase, 0x20000), win(kHbmBase + 0x10000, 0x20000)});
  m.refresh(r.mem.mpu());
  assert_true(m.refused());
  assert_int_equal(m.check(kHbmBase, 16), dma::kErrNotAllocated);
  r.mpu({win(kHbmBase, 0x20000, kMpuValid | (1u << 7))});
  m.refresh(r.mem.mpu());
  assert_true(m.refused());
  r.mpu({win(kHbmBase, 0x20000)});
  m.refresh(r.mem.mpu());
  assert_false(m.refused());
  assert_int_equal(m.check(kHbmBase, 16), dma::kOk);
  // An invalid entry is skipped, not refused.
  r.mpu({win(kHbmBase, 0x20000), win(kHbmBase + 0x10000, 0x20000, 0)});
  m.refresh(r.mem.mpu());
  assert_false(m.refused());
}

void test_mpu_refresh_copies_the_published_bank_only(void**) {
  Rig r;
  Mpu m;
  r.mpu({win(kHbmBase, 0x1000)});  // generation 1: bank 1
  m.refresh(r.mem.mpu());
  // The fw writing generation 2 into bank 0 does not affect the snapshot
  // until it publishes.
  r.mem.mpu()->bank[0][0] = win(kHbmBase + 0x5000, 0x1000);
  r.mem.mpu()->bank_count[0] = 1;
  assert_int_equal(m.refresh(r.mem.mpu()), 1);
  assert_int_equal(m.check(kHbmBase + 0x5000, 16), dma::kErrNotAllocated);
  hostif::store_release(&r.mem.mpu()->header.generation, 2);
  assert_int_equal(m.refresh(r.mem.mpu()), 2);
  assert_int_equal(m.check(kHbmBase + 0x5000, 16), dma::kOk);
  assert_int_equal(m.check(kHbmBase, 16), dma::kErrNotAllocated);
}

void test_mpu_translated_windows_map_one_allocations_extents_in_device_order(void**) {
  Rig r;
  Mpu m;
  assert_true(m.set_remap(remap_target(r)));
  // Allocation 7: 8 KiB at remap+0 from two pages far apart in HBM, backwards;
  // allocation 8 right after it; one identity window.
  const uint64_t p0 = kHbmBase + 0x300000, p1 = kHbmBase + 0x100000, p2 = kHbmBase + 0x500000;
  r.mpu({xlat(kRemapBase, 0x1000, p0, 7), xlat(kRemapBase + 0x1000, 0x1000, p1, 7),
         xlat(kRemapBase + 0x2000, 0x1000, p2, 8), win(kHbmBase, 0x1000)});
  assert_int_equal(m.refresh(r.mem.mpu()), 1);
  assert_false(m.refused());
  assert_int_equal(m.translated_windows(), 3);
  // Across the two extents of one allocation: allowed, and the view is the pages.
  assert_int_equal(m.check(kRemapBase + 0xff0, 0x20), dma::kOk);
  memset(r.hbm(p0 + 0xff0), 0x11, 16);
  memset(r.hbm(p1), 0x22, 16);
  const uint8_t* v = m.remap_view() + 0xff0;
  assert_int_equal(v[0], 0x11);
  assert_int_equal(v[16], 0x22);
  m.remap_view()[0x2000] = 0x33;  // a write lands in the physical page
  assert_int_equal(*r.hbm(p2), 0x33);
  // Into the neighbour allocation, or past the last extent: not allocated.
  assert_int_equal(m.check(kRemapBase + 0x1ff0, 0x20), dma::kErrNotAllocated);
  assert_int_equal(m.check(kRemapBase + 0x2ff0, 0x20), dma::kErrNotAllocated);
  assert_int_equal(m.check(kRemapBase + 0x3000, 1), dma::kErrNotAllocated);
  assert_int_equal(m.check(kHbmBase, 0x1000), dma::kOk);

  // The next table moves extent 1 elsewhere and drops allocation 8: the view follows.
  const uint64_t p3 = kHbmBase + 0x700000;
  memset(r.hbm(p3), 0x44, 16);
  r.mpu({xlat(kRemapBase, 0x1000, p0, 7), xlat(kRemapBase + 0x1000, 0x1000, p3, 7)});
  assert_int_equal(m.refresh(r.mem.mpu()), 2);
  assert_int_equal(m.remap_view()[0x1000], 0x44);
  assert_int_equal(m.check(kRemapBase + 0x2000, 1), dma::kErrNotAllocated);
  assert_int_equal(m.translated_windows(), 2);

  // MPU off: the remap window reaches nothing (nothing is mapped there).
  hostif::store_release(&r.mem.mpu()->header.generation, 0);
  assert_int_equal(m.refresh(r.mem.mpu()), 0);
  assert_int_equal(m.translated_windows(), 0);
  assert_int_equal(m.check(kRemapBase, 1), dma::kErrNotAllocated);
  assert_int_equal(m.check(kHbmBase + 0x800000, 1), dma::kOk);
}

void test_mpu_refuses_malformed_translated_windows_and_ignores_them_without_a_remap_window(void**) {
  Rig r;
  const MpuWindow bad[] = {
      xlat(kRemapBase + 0x800, 0x1000, kHbmBase, 1),           // device address not page-aligned
      xlat(kRemapBase, 0x1000, kHbmBase + 0x10, 1),            // phys not page-aligned
      xlat(kRemapBase - 0x1000, 0x2000, kHbmBase, 1),          // starts before the remap window
      xlat(kRemapBase + kRemapSize - 0x1000, 0x2000, kHbmBase, 1),  // ends after it
      xlat(kRemapBase, 0x2000, kHbmBase + kHbmSize - 0x1000, 1),    // pages past HBM
      xlat(kRemapBase, 0x1000, kRamBase, 1),                   // pages below HBM (firmware RAM)
      xlat(kRemapBase, 0x1000, kHbmBase, 0),                   // no tag
      MpuWindow{kRemapBase, 0x1000, kMpuValid | kMpuTranslate | kMpuPoison, 1, kHbmBase},
      win(kRemapBase, 0x1000),                                 // identity window over the remap window
  };
  for (const MpuWindow& w : bad) {
    Mpu m;
    assert_true(m.set_remap(remap_target(r)));
    r.mpu({w, win(kHbmBase + 0x100000, 0x1000)});
    m.refresh(r.mem.mpu());
    assert_true(m.refused());
    assert_int_equal(m.check(kHbmBase + 0x100000, 1), dma::kErrNotAllocated);
    assert_int_equal(m.check(kRemapBase, 1), dma::kErrNotAllocated);
  }
  // A tensor engine's MPU has no remap window: translated windows are skipped.
  Mpu t;
  r.mpu({xlat(kRemapBase, 0x1000, kHbmBase, 1), win(kHbmBase + 0x100000, 0x1000)});
  t.refresh(r.mem.mpu());
  assert_false(t.refused());
  assert_int_equal(t.windows(), 1);
  assert_int_equal(t.check(kRemapBase, 1), dma::kErrNotAllocated);
  // set_remap refuses windows over RAM, unaligned, too large or without an fd.
  Mpu m;
  RemapTarget x = remap_target(r);
  x.remap_base = kRamBase;
  assert_false(m.set_remap(x));
  x = remap_target(r);
  x.remap_size = 0x1800;
  assert_false(m.set_remap(x));
  x = remap_target(r);
  x.remap_size = kMaxRemapBytes + 0x1000;
  assert_false(m.set_remap(x));
  x = remap_target(r);
  x.ram_fd = -1;
  assert_false(m.set_remap(x));
  assert_null(m.remap_view());
}

// The DMA engine.

void configure(Rig& r, uint32_t engine, uint32_t mask, uint64_t hbm_base = kHbmBase, uint64_t hbm_size = kHbmSize) {
  DmaConfig& c = r.mem.dma(engine)->config;
  c.host_queue_mask = mask;
  c.dma_region_offset = kDmaRegion;
  c.queue_count = kQueues;
  c.depth = kDepth;
  c.host_window_offset = kWindowOffset;
  c.host_window_size = kWindowSize;
  c.hbm_base = hbm_base;
  c.hbm_size = hbm_size;
  __atomic_store_n(&c.config_gen, c.config_gen + 1, __ATOMIC_RELEASE);
}

void fw_submit(Rig& r, uint32_t engine, const dma::Descriptor& d) {
  DmaEngineBlock* b = r.mem.dma(engine);
  b->fw_sq[b->fw_queue.sq_prod.value % kDmaFwDepth] = d;
  hostif::store_release(&b->fw_queue.sq_prod, b->fw_queue.sq_prod.value + 1);
}

dma::Completion fw_pop(Rig& r, uint32_t engine) {
  DmaEngineBlock* b = r.mem.dma(engine);
  assert_true(b->fw_queue.cq_prod.value != b->fw_queue.cq_cons.value);
  dma::Completion c = b->fw_cq[b->fw_queue.cq_cons.value % kDmaFwDepth];
  b->fw_queue.cq_cons.value++;
  return c;
}

constexpr uint32_t kOne = dma::kDescFirst | dma::kDescLast;

void test_dma_fw_queue_copies_hbm_to_hbm_and_interrupts_the_fw(void**) {
  Rig r;
  DmaEngine e(r.mem, 1, r.props, r.sig, r.log, fake_clock);
  configure(r, 1, 0);
  for (uint32_t i = 0; i < 100000; ++i) r.hbm(kHbmBase)[i] = uint8_t(i * 13 + 1);
  hostif::store_release(&r.mem.dma(1)->fw_queue.irq_armed, 1);
  fw_submit(r, 1, dma::Descriptor{kHbmBase, kHbmBase + 0x200000, 100000, kOne | dma::kDescIrq, 77});
  assert_true(e.has_work());
  DmaPass p = e.run_pass();
  assert_int_equal(p.descriptors, 1);
  assert_int_equal(r.mem.dma(1)->config_status, kEngineOk);
  dma::Completion c = fw_pop(r, 1);
  assert_int_equal(c.cookie, 77);
  assert_int_equal(c.status, dma::kOk);
  assert_int_equal(c.bytes, 100000);
  assert_memory_equal(r.hbm(kHbmBase), r.hbm(kHbmBase + 0x200000), 100000);
  assert_int_equal(r.sig.chip[kVectorDma0 + 1], 1);
  assert_int_equal(r.sig.host, 0);
  EngineStats& s = r.mem.dma(1)->stats;
  assert_int_equal(s.bytes, 100000);
  assert_int_equal(s.units, 1);
  // 100000 bytes at 100 GB/s: 1 us modeled.
  assert_int_equal(s.modeled_ns, 1000);
  assert_false(e.has_work());
}

void test_dma_mpu_fault_completes_not_allocated_and_posts_a_record_naming_it(void**) {
  Rig r;
  DmaEngine e(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  configure(r, 0, 0);
  hostif::store_release(&r.mem.control()->error_irq_armed, 1);
  r.mpu({win(kHbmBase, 0x10000, kMpuValid, 5), win(kHbmBase + 0x100000, 0x10000, kMpuValid, 6)});
  memset(r.hbm(kHbmBase + 0x100000), 0x5a, 64);
  fw_submit(r, 0, dma::Descriptor{kHbmBase, kHbmBase + 0x100000, 64, kOne, 1});
  fw_submit(r, 0, dma::Descriptor{kHbmBase, kHbmBase + 0x80000, 64, kOne, 2});
  e.run_pass();
  assert_int_equal(fw_pop(r, 0).status, dma::kOk);
  dma::Completion bad = fw_pop(r, 0);
  assert_int_equal(bad.status, dma::kErrNotAllocated);
  assert_int_equal(bad.bytes, 0);
  ErrorRecord rec;
  assert_true(r.next_error(&rec));
  assert_int_equal(rec.code, kEngineMpuFault);
  assert_int_equal(rec.source, kSourceDma);
  assert_int_equal(rec.queue, kQueueFirmware);
  assert_int_equal(rec.address, kHbmBase + 0x80000);
  assert_int_equal(rec.length, 64);
  assert_int_equal(rec.cookie, 2);
  assert_int_equal(rec.mpu_generation, 1);
  assert_int_equal(r.sig.chip[kVectorControl], 1);
  assert_int_equal(r.mem.mpu()->header.dma_ack[0].value, 1);
}

void test_dma_engine_copies_across_the_extents_of_a_stitched_allocation(void**) {
  Rig r;
  DmaEngine e(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  r.mem.dma(0)->config.remap_base = kRemapBase;
  r.mem.dma(0)->config.remap_size = kRemapSize;
  configure(r, 0, 0);
  // 12 KiB at remap+0x10000: three pages scattered through HBM.
  const uint64_t dev = kRemapBase + 0x10000;
  const uint64_t phys[3] = {kHbmBase + 0x900000, kHbmBase + 0x200000, kHbmBase + 0x600000};
  r.mpu({xlat(dev, 0x1000, phys[0], 3), xlat(dev + 0x1000, 0x1000, phys[1], 3), xlat(dev + 0x2000, 0x1000, phys[2], 3),
         win(kHbmBase, 0x10000, kMpuValid, 1)});
  for (uint32_t i = 0; i < 0x3000; ++i) r.hbm(kHbmBase)[i] = uint8_t(i * 7 + 3);
  // HBM -> stitched (all three extents), then stitched -> HBM back.
  fw_submit(r, 0, dma::Descriptor{kHbmBase, dev, 0x3000, kOne, 1});
  fw_submit(r, 0, dma::Descriptor{dev + 0x800, kHbmBase + 0x8000, 0x2000, kOne, 2});
  // Past the allocation's end, and from the remap window into firmware RAM's range.
  fw_submit(r, 0, dma::Descriptor{kHbmBase, dev + 0x2800, 0x1000, kOne, 3});
  fw_submit(r, 0, dma::Descriptor{kHbmBase, kRemapBase + kRemapSize - 0x800, 0x1000, kOne, 4});
  e.run_pass();
  assert_int_equal(r.mem.dma(0)->config_status, kEngineOk);
  for (uint32_t i = 0; i < 3; ++i) assert_memory_equal(r.hbm(phys[i]), r.hbm(kHbmBase) + i * 0x1000, 0x1000);
  assert_memory_equal(r.hbm(kHbmBase + 0x8000), r.hbm(kHbmBase) + 0x800, 0x2000);
  assert_int_equal(fw_pop(r, 0).status, dma::kOk);
  assert_int_equal(fw_pop(r, 0).status, dma::kOk);
  assert_int_equal(fw_pop(r, 0).status, dma::kErrNotAllocated);
  assert_int_equal(fw_pop(r, 0).status, dma::kErrDstRange);
  // A reset forgets the translation: the same address reaches nothing.
  e.reset();
  configure(r, 0, 0);
  e.run_pass();
  fw_submit(r, 0, dma::Descriptor{kHbmBase, dev, 16, kOne, 5});
  e.run_pass();
  assert_int_equal(fw_pop(r, 0).status, dma::kErrDstRange);
}

void test_dma_bad_address_and_malformed_descriptors_keep_their_statuses(void**) {
  Rig r;
  DmaEngine e(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  configure(r, 0, 0);
  fw_submit(r, 0, dma::Descriptor{kHbmBase, kHbmBase + kHbmSize - 8, 64, kOne, 1});
  fw_submit(r, 0, dma::Descriptor{kHbmBase, kHbmBase + 64, 0, kOne, 2});
  fw_submit(r, 0, dma::Descriptor{kWindowSize, kHbmBase, 64, kOne | dma::kDescSrcHost, 3});
  fw_submit(r, 0, dma::Descriptor{kHbmBase, kHbmBase + 32, 64, kOne, 4});
  e.run_pass();
  assert_int_equal(fw_pop(r, 0).status, dma::kErrDstRange);
  assert_int_equal(fw_pop(r, 0).status, dma::kErrZeroLength);
  assert_int_equal(fw_pop(r, 0).status, dma::kErrSrcRange);
  assert_int_equal(fw_pop(r, 0).status, dma::kErrOverlap);
  ErrorRecord rec;
  assert_true(r.next_error(&rec));
  assert_int_equal(rec.code, kEngineBadAddress);
  assert_int_equal(rec.address, kHbmBase + kHbmSize - 8);
  assert_true(r.next_error(&rec));
  assert_int_equal(rec.code, kEngineBadAddress);
  assert_int_equal(rec.address, kWindowSize);
  assert_false(r.next_error(&rec));
  assert_int_equal(r.sig.chip[kVectorControl], 0);  // not armed
}

void test_dma_unconfigured_engine_reaches_nothing(void**) {
  Rig r;
  DmaEngine e(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  fw_submit(r, 0, dma::Descriptor{kHbmBase, kHbmBase + 0x1000, 64, kOne, 1});
  e.run_pass();
  assert_int_equal(fw_pop(r, 0).status, dma::kErrSrcRange);
}

struct HostSide {
  dma::HostQueue q[kQueues];
  explicit HostSide(Rig& r) {
    memset(r.mem.bar2 + kDmaRegion, 0, dma::dma_region_bytes(kQueues, kDepth));
    for (uint32_t i = 0; i < kQueues; ++i) {
      uint8_t* b = r.mem.bar2 + kDmaRegion + dma::kDmaQueuesOffset + i * dma::queue_stride(kDepth);
      q[i] = dma::HostQueue(reinterpret_cast<dma::QueueControl*>(b),
                            reinterpret_cast<dma::Descriptor*>(b + dma::kQueueSqOffset),
                            reinterpret_cast<dma::Completion*>(b + dma::cq_offset(kDepth)), kDepth);
    }
  }
};

void test_dma_serves_the_hosts_bar2_queues_and_interrupts_the_host(void**) {
  Rig r;
  HostSide host(r);
  DmaEngine e(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  configure(r, 0, 0x3);
  r.mem.dma(0)->config.host_irq_armed = 1;
  e.run_pass();
  assert_int_equal(r.mem.dma(0)->config_ack, 1);
  assert_int_equal(r.mem.dma(0)->config_status, kEngineOk);
  assert_true(e.serves_host());
  uint8_t* window = r.mem.bar2 + kWindowOffset;
  for (uint32_t i = 0; i < 4096; ++i) window[i] = uint8_t(i ^ 0x3c);
  host.q[1].arm_irq(true);
  dma::Descriptor d[32];
  for (uint32_t i = 0; i < 32; ++i) d[i] = dma::Descriptor{i * 64u, kHbmBase + 0x10000 + i * 64u, 64,
                                                          kOne | dma::kDescSrcHost | (i == 31 ? dma::kDescIrq : 0u), i};
  assert_true(host.q[1].submit(d, 32));
  assert_true(e.has_work());
  DmaPass p = e.run_pass();
  assert_int_equal(p.descriptors, 32);
  dma::Completion got[32];
  assert_int_equal(host.q[1].reap(got, 32), 32);
  for (uint32_t i = 0; i < 32; ++i) assert_int_equal(got[i].status, dma::kOk);
  assert_memory_equal(window, r.hbm(kHbmBase + 0x10000), 2048);
  assert_int_equal(r.sig.host, 1);
  assert_int_equal(r.sig.chip[kVectorDma0], 1);  // host_irq_armed: accounting interrupt
  assert_int_equal(host.q[1].device_error(), dma::kQueueOk);
  // The host's queue reset handshake is served by the engine.
  host.q[1].begin_reset();
  assert_true(e.has_work());
  e.run_pass();
  assert_true(host.q[1].reset_done());
}

void test_dma_injected_failure_fails_one_host_descriptor_with_a_record_then_works(void**) {
  Rig r;
  HostSide host(r);
  DmaEngine e(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  configure(r, 0, 0x3);
  e.run_pass();
  ControlBlock* ctl = r.mem.control();
  hostif::store_release(&ctl->error_irq_armed, 1);
  ctl->inject_kind.value = kInjectDmaFail;
  ctl->inject_engine.value = 0;
  hostif::store_release(&ctl->inject_seq, 1);
  assert_true(e.has_work());
  e.run_pass();  // armed, nothing to fail yet: not acknowledged
  assert_int_equal(ctl->inject_ack.value, 0);
  assert_false(e.halted());
  // A chain of two on queue 1: its first descriptor fails, the second is
  // skipped (the chain has failed); the next chain is copied.
  uint8_t* window = r.mem.bar2 + kWindowOffset;
  memset(window, 0x5a, 256);
  memset(r.hbm(kHbmBase + 0x30000), 0, 256);
  dma::Descriptor d[3] = {
      {0, kHbmBase + 0x30000, 64, dma::kDescFirst | dma::kDescSrcHost, 1},
      {64, kHbmBase + 0x30040, 64, dma::kDescLast | dma::kDescSrcHost, 2},
      {128, kHbmBase + 0x30080, 64, kOne | dma::kDescSrcHost, 3},
  };
  assert_true(host.q[1].submit(d, 3));
  e.run_pass();
  dma::Completion got[2];
  assert_int_equal(host.q[1].reap(got, 2), 2);
  assert_int_equal(got[0].cookie, 2);
  assert_int_equal(got[0].status, dma::kErrEngine);
  assert_int_equal(got[0].bytes, 0);
  assert_int_equal(got[1].status, dma::kOk);
  assert_int_equal(r.hbm(kHbmBase + 0x30000)[0], 0);  // nothing of the failed chain moved
  assert_int_equal(r.hbm(kHbmBase + 0x30040)[0], 0);
  assert_int_equal(r.hbm(kHbmBase + 0x30080)[0], 0x5a);
  assert_int_equal(ctl->inject_ack.value, 1);
  ErrorRecord rec;
  assert_true(r.next_error(&rec));
  assert_int_equal(rec.code, kEngineInjected);
  assert_int_equal(rec.queue, 1);
  assert_int_equal(rec.status, dma::kErrEngine);
  assert_int_equal(rec.cookie, 1);
  assert_int_equal(rec.address, kHbmBase + 0x30000);
  assert_int_equal(r.sig.chip[kVectorControl], 1);
  assert_false(r.next_error(&rec));
  // Once only: the next descriptor is copied.
  dma::Descriptor again{0, kHbmBase + 0x30000, 64, kOne | dma::kDescSrcHost, 4};
  assert_true(host.q[1].submit(&again, 1));
  e.run_pass();
  assert_int_equal(host.q[1].reap(got, 1), 1);
  assert_int_equal(got[0].status, dma::kOk);
  assert_int_equal(host.q[1].device_error(), dma::kQueueOk);
  // Another engine's fault is not this engine's.
  ctl->inject_engine.value = 1;
  hostif::store_release(&ctl->inject_seq, 2);
  e.run_pass();
  assert_true(host.q[1].submit(&again, 1));
  e.run_pass();
  assert_int_equal(host.q[1].reap(got, 1), 1);
  assert_int_equal(got[0].status, dma::kOk);
}

void test_dma_paused_host_queues_keep_their_chains_and_resume_where_they_were(void**) {
  Rig r;
  HostSide host(r);
  DmaEngine e(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  configure(r, 0, 0x1);
  e.run_pass();
  assert_int_equal(r.mem.dma(0)->config_status, kEngineOk);
  // Two chains of two descriptors; the first descriptor of the second chain
  // is consumed before the pause only if the engine ignores it.
  dma::Descriptor d[4];
  for (uint32_t i = 0; i < 4; ++i)
    d[i] = dma::Descriptor{i * 64u, kHbmBase + 0x20000 + i * 64u, 64,
                           dma::kDescSrcHost | (i % 2 == 0 ? uint32_t(dma::kDescFirst) : uint32_t(dma::kDescLast)),
                           10u + i};
  r.mem.dma(0)->config.flags = kDmaConfigPaused;
  configure(r, 0, 0x1);  // the same queues, paused
  e.run_pass();
  assert_int_equal(r.mem.dma(0)->config_ack, 2);
  assert_int_equal(r.mem.dma(0)->config_status, kEngineOk);
  assert_true(host.q[0].submit(d, 4));
  assert_false(e.has_work());
  DmaPass p = e.run_pass();
  assert_int_equal(p.descriptors, 0);
  assert_int_equal(r.mem.bar2[kDmaRegion + dma::kDmaQueuesOffset + offsetof(dma::QueueControl, sq_cons)], 0);
  r.mem.dma(0)->config.flags = 0;
  configure(r, 0, 0x1);  // resumed: nothing was lost or restarted
  e.run_pass();
  dma::Completion got[2];
  assert_int_equal(host.q[0].reap(got, 2), 2);
  assert_int_equal(got[0].cookie, 11);
  assert_int_equal(got[1].cookie, 13);
  assert_int_equal(got[0].status, dma::kOk);
  assert_int_equal(host.q[0].device_error(), dma::kQueueOk);
}

void test_dma_interrupts_the_host_for_each_long_chain_as_it_completes(void**) {
  // Three 1 MiB chains, the first two flagged: one pass moves all three,
  // and the host hears of each flagged one on its own (not once at the end
  // of the pass, after the ring ran dry).
  Rig r;
  HostSide host(r);
  DmaEngine e(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  configure(r, 0, 0x1);
  e.run_pass();
  host.q[0].arm_irq(true);
  const uint32_t mib = 1u << 20;
  dma::Descriptor d[3];
  for (uint32_t i = 0; i < 3; ++i)
    d[i] = dma::Descriptor{0, kHbmBase + 0x100000 + i * mib, mib,
                           kOne | dma::kDescSrcHost | (i < 2 ? dma::kDescIrq : 0u), i};
  assert_true(host.q[0].submit(d, 3));
  const DmaPass p = e.run_pass();
  assert_int_equal(p.descriptors, 3);
  assert_int_equal(r.sig.host, 2);
  assert_int_equal(r.mem.dma(0)->stats.host_irqs, 2);
  dma::Completion got[3];
  assert_int_equal(host.q[0].reap(got, 3), 3);
  for (uint32_t i = 0; i < 3; ++i) assert_int_equal(got[i].status, dma::kOk);
}

void test_dma_config_refusals_name_the_field(void**) {
  struct Case {
    void (*edit)(DmaConfig&);
    uint32_t field;
  } cases[] = {
      {[](DmaConfig& c) { c.depth = 100; }, kFieldGeometry},
      {[](DmaConfig& c) { c.dma_region_offset = kBar2Size - 4096; }, kFieldRegion},
      {[](DmaConfig& c) { c.dma_region_offset = kDmaRegion + 8; }, kFieldRegion},
      {[](DmaConfig& c) { c.host_queue_mask = 0x4; }, kFieldQueueMask},
      {[](DmaConfig& c) { c.host_window_offset = kDmaRegion; }, kFieldWindow},
      {[](DmaConfig& c) { c.host_window_size = kBar2Size; }, kFieldWindow},
      {[](DmaConfig& c) { c.hbm_base = kRamBase + kRamSize - 4096; }, kFieldHbm},
      {[](DmaConfig& c) { c.remap_base = kRamBase, c.remap_size = kRemapSize; }, kFieldRemap},
      {[](DmaConfig& c) { c.remap_base = kRemapBase + 8, c.remap_size = kRemapSize; }, kFieldRemap},
      {[](DmaConfig& c) { c.remap_base = kRemapBase, c.remap_size = kMaxRemapBytes * 2; }, kFieldRemap},
  };
  for (const Case& k : cases) {
    Rig r;
    DmaEngine e(r.mem, 0, r.props, r.sig, r.log, fake_clock);
    configure(r, 0, 0x3);
    k.edit(r.mem.dma(0)->config);
    e.run_pass();
    assert_int_equal(r.mem.dma(0)->config_ack, 1);
    assert_int_equal(r.mem.dma(0)->config_status, kEngineBadConfig | (k.field << 8));
    assert_false(e.serves_host());
    ErrorRecord rec;
    assert_true(r.next_error(&rec));
    assert_int_equal(rec.code, kEngineBadConfig);
    assert_int_equal(rec.detail, k.field);
  }
}

void test_dma_injected_fault_halts_before_consuming_and_reset_recovers(void**) {
  Rig r;
  DmaEngine e(r.mem, 1, r.props, r.sig, r.log, fake_clock);
  configure(r, 1, 0);
  e.run_pass();
  ControlBlock* ctl = r.mem.control();
  ctl->inject_kind.value = kInjectDma;
  ctl->inject_engine.value = 1;
  hostif::store_release(&ctl->inject_seq, 1);
  fw_submit(r, 1, dma::Descriptor{kHbmBase, kHbmBase + 0x1000, 64, kOne, 9});
  e.run_pass();
  assert_true(e.halted());
  assert_int_equal(ctl->inject_ack.value, 1);
  assert_int_equal(r.mem.dma(1)->state, kEngineHalted);
  assert_int_equal(r.mem.dma(1)->fw_queue.sq_cons.value, 0);  // nothing consumed
  assert_false(e.has_work());
  ErrorRecord rec;
  assert_true(r.next_error(&rec));
  assert_int_equal(rec.code, kEngineInjected);
  assert_int_equal(rec.engine, 1);
  e.reset();
  assert_false(e.halted());
  assert_int_equal(r.mem.dma(1)->fw_queue.sq_prod.value, 0);
  configure(r, 1, 0);
  fw_submit(r, 1, dma::Descriptor{kHbmBase, kHbmBase + 0x1000, 64, kOne, 10});
  e.run_pass();
  assert_int_equal(fw_pop(r, 1).status, dma::kOk);
}

// The tensor engine.

struct Gemm {
  num::DType dt;
  uint32_t m, n, k;
  uint64_t a, as, b, bs, c;
};

// Random operands quantized into HBM at fixed offsets; returns the layout.
Gemm place_gemm(Rig& r, num::DType dt, uint32_t m, uint32_t n, uint32_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> fa(size_t(m) * k), fb(size_t(n) * k);
  for (float& x : fa) x = u(rng);
  for (float& x : fb) x = u(rng);
  Gemm g{dt, m, n, k, kHbmBase, kHbmBase + 0x400000, kHbmBase + 0x800000, kHbmBase + 0xc00000, kHbmBase + 0x1000000};
  num::quantize_operand(dt, fa.data(), m, k, r.hbm(g.a), dt == num::DType::kMXFP4 ? r.hbm(g.as) : nullptr);
  num::quantize_operand(dt, fb.data(), n, k, r.hbm(g.b), dt == num::DType::kMXFP4 ? r.hbm(g.bs) : nullptr);
  return g;
}

TensorCommand command(const Gemm& g, uint64_t cookie, uint32_t flags = kTensorIrq) {
  TensorCommand c{};
  c.opcode = kTensorOpGemm;
  c.dtype = uint32_t(g.dt);
  c.flags = flags;
  c.m = g.m;
  c.n = g.n;
  c.k = g.k;
  c.a = g.a;
  c.b = g.b;
  c.c = g.c;
  if (g.dt == num::DType::kMXFP4) {
    c.a_scales = g.as;
    c.b_scales = g.bs;
  }
  c.cookie = cookie;
  return c;
}

void t_submit(Rig& r, uint32_t j, const TensorCommand& c) {
  TensorEngineBlock* b = r.mem.tensor(j);
  b->sq[b->sq_prod.value % kTensorDepth] = c;
  hostif::store_release(&b->sq_prod, b->sq_prod.value + 1);
}

TensorCompletion t_pop(Rig& r, uint32_t j) {
  TensorEngineBlock* b = r.mem.tensor(j);
  assert_true(b->cq_prod.value != b->cq_cons.value);
  TensorCompletion c = b->cq[b->cq_cons.value % kTensorDepth];
  b->cq_cons.value++;
  return c;
}

bool verify(Rig& r, const Gemm& g) {
  kern::GemmArgs a{g.dt, g.m, g.n, g.k, r.hbm(g.a), r.hbm(g.as), r.hbm(g.b), r.hbm(g.bs),
                   reinterpret_cast<float*>(r.hbm(g.c))};
  kern::GemmCheck chk;
  return kern::gemm_verify(a, &chk);
}

void test_tensor_gemm_every_dtype_meets_the_reference_bound(void**) {
  blas_single_threaded();
  const num::DType all[] = {num::DType::kF32, num::DType::kBF16, num::DType::kFP8E4M3, num::DType::kFP8E5M2,
                            num::DType::kMXFP4};
  uint64_t modeled[5] = {};
  for (uint32_t i = 0; i < 5; ++i) {
    Rig r;
    TensorEngine t(r.mem, 1, r.props, r.sig, r.log, fake_clock);
    hostif::store_release(&r.mem.tensor(1)->irq_armed, 1);
    const Gemm g = place_gemm(r, all[i], 48, 40, 96, 100 + i);
    t_submit(r, 1, command(g, 500 + i));
    assert_true(t.has_work());
    assert_true(t.run_pass());
    TensorCompletion c = t_pop(r, 1);
    assert_int_equal(c.status, kTensorOk);
    assert_int_equal(c.cookie, 500 + i);
    assert_int_equal(c.engine, 1);
    assert_int_equal(c.flops, 2ull * 48 * 40 * 96);
    assert_true(c.modeled_ns > 0);
    modeled[i] = c.modeled_ns;
    assert_true(verify(r, g));
    assert_int_equal(r.sig.chip[kVectorTensor0 + 1], 1);
    assert_int_equal(r.mem.tensor(1)->stats.units, 1);
    assert_false(t.has_work());
  }
  // The Trainium shape: fp4 < fp8 < bf16 < fp32 in modeled time.
  assert_true(modeled[4] < modeled[2] && modeled[2] == modeled[3] && modeled[3] < modeled[1] &&
              modeled[1] < modeled[0]);
}

void test_tensor_row_tiles_with_ldc_compose_one_gemm(void**) {
  Rig r;
  TensorEngine t0(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  TensorEngine t1(r.mem, 1, r.props, r.sig, r.log, fake_clock);
  const Gemm g = place_gemm(r, num::DType::kBF16, 64, 48, 64, 7);
  // Rows 0..31 on engine 0, 32..63 on engine 1; then columns 0..23 | 24..47 of
  // a second C through ldc.
  TensorCommand top = command(g, 1, 0), bottom = command(g, 2, 0);
  top.m = bottom.m = 32;
  bottom.a += 32ull * g.k * 2;
  bottom.c += 32ull * g.n * 4;
  t_submit(r, 0, top);
  t_submit(r, 1, bottom);
  assert_true(t0.run_pass());
  assert_true(t1.run_pass());
  assert_int_equal(t_pop(r, 0).status, kTensorOk);
  assert_int_equal(t_pop(r, 1).status, kTensorOk);
  assert_true(verify(r, g));
  Gemm g2 = g;
  g2.c = kHbmBase + 0x1400000;
  TensorCommand left = command(g2, 3, 0), right = command(g2, 4, 0);
  left.n = right.n = 24;
  left.ldc = right.ldc = 48;
  right.b += 24ull * g.k * 2;
  right.c += 24 * 4;
  t_submit(r, 0, left);
  t_submit(r, 0, right);
  assert_true(t0.run_pass());
  assert_true(t0.run_pass());
  assert_int_equal(t_pop(r, 0).status, kTensorOk);
  assert_int_equal(t_pop(r, 0).status, kTensorOk);
  assert_true(verify(r, g2));
}

void test_tensor_refusals_have_their_status_and_write_nothing(void**) {
  Rig r;
  TensorEngine t(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  const Gemm g = place_gemm(r, num::DType::kF32, 16, 16, 32, 3);
  r.mpu({win(kHbmBase, 0x1400000)});
  struct Case {
    void (*edit)(TensorCommand&);
    TensorStatus status;
    uint32_t record;  // EngineError posted, 0 for none
  } cases[] = {
      {[](TensorCommand& c) { c.opcode = 9; }, kTensorBadOpcode, 0},
      {[](TensorCommand& c) { c.flags = 0x80; }, kTensorBadFlags, 0},
      {[](TensorCommand& c) { c.k = 0; }, kTensorBadShape, 0},
      {[](TensorCommand& c) { c.dtype = 7; }, kTensorBadShape, 0},
      {[](TensorCommand& c) { c.ldc = 8; }, kTensorBadShape, 0},
      {[](TensorCommand& c) { c.a += 2; }, kTensorMisaligned, 0},
      {[](TensorCommand& c) { c.b = UINT64_MAX - 63; }, kTensorAddrOverflow, 0},
      {[](TensorCommand& c) { c.c = kRamBase + kRamSize - 64; }, kTensorRange, kEngineBadAddress},
      {[](TensorCommand& c) { c.c = kHbmBase + 0x1400000; }, kTensorMpuFault, kEngineMpuFault},
      {[](TensorCommand& c) { c.c = c.a + 64; }, kTensorOverlap, 0},
  };
  uint64_t cookie = 1;
  for (const Case& k : cases) {
    TensorCommand c = command(g, cookie, 0);
    k.edit(c);
    memset(r.hbm(kHbmBase + 0x1000000), 0xEE, 4096);
    t_submit(r, 0, c);
    assert_true(t.run_pass());
    TensorCompletion done = t_pop(r, 0);
    assert_int_equal(done.cookie, cookie);
    assert_int_equal(done.status, k.status);
    assert_int_equal(done.flops, 0);
    ErrorRecord rec;
    if (k.record) {
      assert_true(r.next_error(&rec));
      assert_int_equal(rec.code, k.record);
      assert_int_equal(rec.source, kSourceTensor);
      assert_int_equal(rec.cookie, cookie);
    }
    assert_false(r.next_error(&rec));
    for (uint32_t i = 0; i < 4096; ++i) assert_int_equal(r.hbm(kHbmBase + 0x1000000)[i], 0xEE);
    ++cookie;
  }
  assert_int_equal(r.mem.tensor(0)->stats.errors, sizeof cases / sizeof cases[0]);
}

// Stitched operands (ABI 1.3): each operand of a placed GEMM copied into its
// own stitched allocation, one translated window per 4 KiB page, the pages
// shuffled through HBM above the identity operands.
struct StitchedGemm {
  TensorCommand cmd;                 // device addresses in the remap window
  std::vector<MpuWindow> windows;    // the translated windows of all operands
  std::vector<uint64_t> c_pages;     // C's physical pages, in device order
};

StitchedGemm stitch_gemm(Rig& r, const Gemm& g) {
  const bool mx = g.dt == num::DType::kMXFP4;
  const uint64_t src[5] = {g.a, g.b, g.c, g.as, g.bs};
  const uint64_t bytes[5] = {num::operand_bytes(g.dt, g.m, g.k), num::operand_bytes(g.dt, g.n, g.k),
                             uint64_t(g.m) * g.n * 4, mx ? num::scale_bytes(g.dt, g.m, g.k) : 0,
                             mx ? num::scale_bytes(g.dt, g.n, g.k) : 0};
  uint32_t total = 0;
  for (uint64_t b : bytes) total += uint32_t((b + 4095) / 4096);
  std::vector<uint32_t> pool(total);
  for (uint32_t i = 0; i < total; ++i) pool[i] = i;
  std::shuffle(pool.begin(), pool.end(), std::mt19937(77));
  StitchedGemm s;
  s.cmd = command(g, 0);
  uint64_t* dev[5] = {&s.cmd.a, &s.cmd.b, &s.cmd.c, &s.cmd.a_scales, &s.cmd.b_scales};
  uint32_t next = 0;
  for (uint32_t i = 0; i < 5; ++i) {
    if (bytes[i] == 0) continue;
    const uint64_t base = kRemapBase + 0x100000ull * (i + 1);
    *dev[i] = base;
    for (uint64_t off = 0; off < bytes[i]; off += 4096) {
      const uint64_t phys = kHbmBase + 0x1800000 + uint64_t(pool[next++]) * 4096;
      s.windows.push_back(xlat(base + off, 4096, phys, i + 1));
      memcpy(r.hbm(phys), r.hbm(src[i] + off), std::min<uint64_t>(4096, bytes[i] - off));
      if (i == 2) s.c_pages.push_back(phys);
    }
  }
  return s;
}

void t_config(Rig& r, uint32_t j, uint64_t base, uint64_t size) {
  TensorEngineBlock* b = r.mem.tensor(j);
  b->config.remap_base = base;
  b->config.remap_size = size;
  __atomic_store_n(&b->config.config_gen, b->config.config_gen + 1, __ATOMIC_RELEASE);
}

void test_tensor_gemm_on_stitched_operands_is_exact_and_mpu_checked(void**) {
  blas_single_threaded();
  for (num::DType dt : {num::DType::kF32, num::DType::kMXFP4}) {
    Rig r;
    TensorEngine t(r.mem, 1, r.props, r.sig, r.log, fake_clock);
    const Gemm g = place_gemm(r, dt, 64, 48, 256, 9);
    StitchedGemm s = stitch_gemm(r, g);
    std::vector<MpuWindow> all = s.windows;
    all.push_back(win(kHbmBase, 0x1400000, kMpuValid, 99));
    MpuBlock* mb = r.mem.mpu();
    const uint32_t gen = mb->header.generation.value + 1;
    for (size_t i = 0; i < all.size(); ++i) mb->bank[gen & 1][i] = all[i];
    mb->bank_count[gen & 1] = uint32_t(all.size());
    hostif::store_release(&mb->header.generation, gen);

    // No remap window yet: a remap-window operand is outside RAM.
    s.cmd.cookie = 1;
    t_submit(r, 1, s.cmd);
    assert_true(t.run_pass());
    assert_int_equal(t_pop(r, 1).status, kTensorRange);
    ErrorRecord rec;
    assert_true(r.next_error(&rec));
    assert_int_equal(rec.code, kEngineBadAddress);

    t_config(r, 1, kRemapBase, kRemapSize);
    assert_true(t.has_work());
    assert_false(t.run_pass());  // a config, no command
    assert_int_equal(r.mem.tensor(1)->config_ack, 1);
    assert_int_equal(r.mem.tensor(1)->config_status, kEngineOk);
    assert_true(t.has_remap());
    assert_false(t.has_work());

    // The reference: the same GEMM on the identity operands.
    t_submit(r, 1, command(g, 2));
    assert_true(t.run_pass());
    assert_int_equal(t_pop(r, 1).status, kTensorOk);
    assert_true(verify(r, g));
    std::vector<uint8_t> want(r.hbm(g.c), r.hbm(g.c) + size_t(g.m) * g.n * 4);

    s.cmd.cookie = 3;
    t_submit(r, 1, s.cmd);
    assert_true(t.run_pass());
    TensorCompletion done = t_pop(r, 1);
    assert_int_equal(done.status, kTensorOk);
    assert_int_equal(done.flops, 2ull * 64 * 48 * 256);
    for (size_t p = 0; p < s.c_pages.size(); ++p) {
      const size_t len = std::min<size_t>(4096, want.size() - p * 4096);
      assert_memory_equal(r.hbm(s.c_pages[p]), want.data() + p * 4096, len);
    }
    assert_false(r.next_error(&rec));

    // The MPU checks are the ones of any operand: C one float past the end of
    // its allocation, then A of a row tile from inside A into nothing.
    for (uint64_t p : s.c_pages) memset(r.hbm(p), 0xEE, 4096);
    TensorCommand past = s.cmd;
    past.cookie = 4;
    past.c += 4;
    TensorCommand tile = s.cmd;
    tile.cookie = 5;
    tile.a += 16ull * num::operand_bytes(dt, 1, g.k);
    t_submit(r, 1, past);
    t_submit(r, 1, tile);
    assert_true(t.run_pass());
    assert_true(t.run_pass());
    assert_int_equal(t_pop(r, 1).status, kTensorMpuFault);
    assert_int_equal(t_pop(r, 1).status, kTensorMpuFault);
    assert_true(r.next_error(&rec));
    assert_int_equal(rec.code, kEngineMpuFault);
    assert_int_equal(rec.address, s.cmd.c + 4);
    assert_int_equal(rec.cookie, 4);
    assert_true(r.next_error(&rec));
    assert_int_equal(rec.cookie, 5);
    for (uint64_t p : s.c_pages)
      for (uint32_t i = 0; i < 4096; ++i) assert_int_equal(r.hbm(p)[i], 0xEE);

    // A table without the translated windows: the same command reaches nothing.
    r.mpu({win(kHbmBase, 0x1400000, kMpuValid, 99)});
    s.cmd.cookie = 6;
    t_submit(r, 1, s.cmd);
    assert_true(t.run_pass());
    assert_int_equal(t_pop(r, 1).status, kTensorMpuFault);
    assert_true(r.next_error(&rec));
    assert_int_equal(rec.code, kEngineMpuFault);
    assert_int_equal(r.mem.mpu()->header.tensor_ack[1].value, r.mem.mpu()->header.generation.value);

    // A chip reset forgets the window.
    t.reset();
    assert_false(t.has_remap());
    assert_int_equal(r.mem.tensor(1)->config_ack, 0);
  }
}

void test_tensor_bad_remap_window_is_refused_naming_the_field(void**) {
  struct Case {
    uint64_t base, size;
  } cases[] = {
      {kRamBase, kRemapSize},                    // over the RAM vtrn-hw maps
      {kRamBase + kRamSize - 0x1000, 0x2000},    // its last page overlaps RAM
      {kRemapBase + 8, kRemapSize},              // unaligned base
      {kRemapBase, 0x1800},                      // unaligned size
      {kRemapBase, kMaxRemapBytes * 2},          // too large
      {0xfffffffffffff000ull, 0x2000},           // wraps
      {kRemapBase, 0},                           // no size
  };
  Rig r;
  TensorEngine t(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  uint32_t gen = 0;
  for (const Case& k : cases) {
    t_config(r, 0, kRemapBase, kRemapSize);
    t.run_pass();
    assert_true(t.has_remap());
    t_config(r, 0, k.base, k.size);
    gen += 2;
    t.run_pass();
    assert_int_equal(r.mem.tensor(0)->config_ack, gen);
    assert_int_equal(r.mem.tensor(0)->config_status, kEngineBadConfig | (kFieldRemap << 8));
    assert_false(t.has_remap());
    ErrorRecord rec;
    assert_true(r.next_error(&rec));
    assert_int_equal(rec.code, kEngineBadConfig);
    assert_int_equal(rec.source, kSourceTensor);
    assert_int_equal(rec.engine, 0);
    assert_int_equal(rec.detail, kFieldRemap);
    assert_int_equal(rec.address, k.base);
    assert_false(r.next_error(&rec));
  }
  // 0/0 is no window, and fine.
  t_config(r, 0, kRemapBase, kRemapSize);
  t.run_pass();
  t_config(r, 0, 0, 0);
  t.run_pass();
  assert_int_equal(r.mem.tensor(0)->config_status, kEngineOk);
  assert_false(t.has_remap());
  // Without a RAM memfd there is nothing to map a window onto.
  Rig nofd;
  const int fd = nofd.mem.ram_fd;
  nofd.mem.ram_fd = -1;
  TensorEngine u(nofd.mem, 0, nofd.props, nofd.sig, nofd.log, fake_clock);
  t_config(nofd, 0, kRemapBase, kRemapSize);
  u.run_pass();
  assert_int_equal(nofd.mem.tensor(0)->config_status, kEngineBadConfig | (kFieldRemap << 8));
  assert_false(u.has_remap());
  nofd.mem.ram_fd = fd;  // the Rig closes it
}

void test_tensor_injected_fault_fails_one_command_then_works(void**) {
  Rig r;
  TensorEngine t(r.mem, 1, r.props, r.sig, r.log, fake_clock);
  const Gemm g = place_gemm(r, num::DType::kFP8E4M3, 8, 8, 32, 4);
  ControlBlock* ctl = r.mem.control();
  ctl->inject_kind.value = kInjectTensor;
  ctl->inject_engine.value = 1;
  hostif::store_release(&ctl->inject_seq, 1);
  t_submit(r, 1, command(g, 1, 0));
  t_submit(r, 1, command(g, 2, 0));
  assert_true(t.run_pass());
  assert_true(t.run_pass());
  assert_int_equal(t_pop(r, 1).status, kTensorInjected);
  assert_int_equal(t_pop(r, 1).status, kTensorOk);
  assert_int_equal(ctl->inject_ack.value, 1);
  ErrorRecord rec;
  assert_true(r.next_error(&rec));
  assert_int_equal(rec.code, kEngineInjected);
  assert_true(verify(r, g));
}

void test_tensor_index_jump_latches_until_reset(void**) {
  Rig r;
  TensorEngine t(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  hostif::store_release(&r.mem.tensor(0)->sq_prod, kTensorDepth + 1);
  assert_false(t.run_pass());
  assert_int_equal(r.mem.tensor(0)->error.value, dma::kQueueSqIndexJump);
  assert_false(t.has_work());
  ErrorRecord rec;
  assert_true(r.next_error(&rec));
  assert_int_equal(rec.code, kEngineQueueBroken);
  t.reset();
  assert_int_equal(r.mem.tensor(0)->error.value, 0);
  const Gemm g = place_gemm(r, num::DType::kF32, 4, 4, 4, 1);
  t_submit(r, 0, command(g, 1, 0));
  assert_true(t.run_pass());
  assert_int_equal(t_pop(r, 0).status, kTensorOk);
}

void test_tensor_full_completion_ring_waits_for_the_consumer(void**) {
  Rig r;
  TensorEngine t(r.mem, 0, r.props, r.sig, r.log, fake_clock);
  const Gemm g = place_gemm(r, num::DType::kF32, 4, 4, 4, 1);
  for (uint32_t i = 0; i < kTensorDepth; ++i) t_submit(r, 0, command(g, i, 0));
  for (uint32_t i = 0; i < kTensorDepth; ++i) assert_true(t.run_pass());
  t_submit(r, 0, command(g, 99, 0));
  assert_false(t.run_pass());
  t_pop(r, 0);
  assert_true(t.run_pass());
}

// What the board DT says about the engines.

std::vector<uint8_t> board_with_engines(bool node, const uint32_t* gflops, uint32_t dma_engines) {
  std::vector<uint8_t> fdt(4096);
  assert_int_equal(fdt_create_empty_tree(fdt.data(), int(fdt.size())), 0);
  int chips = fdt_add_subnode(fdt.data(), 0, "chips");
  int chip = fdt_add_subnode(fdt.data(), chips, "chip@1");
  assert_true(chip >= 0);
  if (node) {
    int e = fdt_add_subnode(fdt.data(), chip, "engines");
    fdt_setprop_string(fdt.data(), e, "compatible", "vtrn,engines");
    fdt_setprop_u32(fdt.data(), e, "vtrn,dma-engines", dma_engines);
    fdt_setprop_u32(fdt.data(), e, "vtrn,dma-gbps", 50);
    fdt32_t v[4];
    for (int i = 0; i < 4; ++i) v[i] = cpu_to_fdt32(gflops[i]);
    fdt_setprop(fdt.data(), e, "vtrn,tensor-gflops", v, sizeof v);
  }
  return fdt;
}

void test_engine_props_defaults_and_values_from_the_board(void**) {
  char err[160];
  EngineProps p;
  std::vector<uint8_t> none = board_with_engines(false, nullptr, 0);
  assert_true(read_engine_props(none.data(), 1, 4, &p, err, sizeof err));
  assert_int_equal(p.dma_engines, kDefaultDmaEngines);
  assert_int_equal(p.tensor_engines, 4);
  assert_int_equal(p.dma_bytes_per_s, kDefaultDmaGbps * 1000000000ull);
  const uint32_t good[4] = {10, 20, 40, 80};
  std::vector<uint8_t> fdt = board_with_engines(true, good, 3);
  assert_true(read_engine_props(fdt.data(), 1, 2, &p, err, sizeof err));
  assert_int_equal(p.dma_engines, 3);
  assert_int_equal(p.dma_bytes_per_s, 50000000000ull);
  assert_int_equal(p.tensor_flops_per_s[uint32_t(num::DType::kF32)], 10000000000ull);
  assert_int_equal(p.tensor_flops_per_s[uint32_t(num::DType::kFP8E5M2)], 40000000000ull);
  assert_int_equal(p.tensor_flops_per_s[uint32_t(num::DType::kMXFP4)], 80000000000ull);
  const uint32_t flat[4] = {10, 20, 20, 80};
  fdt = board_with_engines(true, flat, 2);
  assert_false(read_engine_props(fdt.data(), 1, 2, &p, err, sizeof err));
  assert_non_null(strstr(err, "fp32 < bf16 < fp8 < fp4"));
  fdt = board_with_engines(true, good, 9);
  assert_false(read_engine_props(fdt.data(), 1, 2, &p, err, sizeof err));
  assert_non_null(strstr(err, "vtrn,dma-engines"));
  assert_false(read_engine_props(none.data(), 1, 9, &p, err, sizeof err));
  assert_int_equal(modeled_ns(100, 1000000000ull), 100);
  assert_int_equal(modeled_ns(1, 3000000000ull), 1);
  assert_int_equal(modeled_ns(0, 5), 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mpu_off_allows_everything_and_on_allows_only_windows),
      cmocka_unit_test(test_mpu_poison_wins_over_a_live_window),
      cmocka_unit_test(test_mpu_window_of_the_last_pass_never_admits_what_the_table_does_not),
      cmocka_unit_test(test_mpu_refuses_a_bank_with_overlapping_or_malformed_windows),
      cmocka_unit_test(test_mpu_refresh_copies_the_published_bank_only),
      cmocka_unit_test(test_mpu_translated_windows_map_one_allocations_extents_in_device_order),
      cmocka_unit_test(test_mpu_refuses_malformed_translated_windows_and_ignores_them_without_a_remap_window),
      cmocka_unit_test(test_dma_engine_copies_across_the_extents_of_a_stitched_allocation),
      cmocka_unit_test(test_dma_fw_queue_copies_hbm_to_hbm_and_interrupts_the_fw),
      cmocka_unit_test(test_dma_mpu_fault_completes_not_allocated_and_posts_a_record_naming_it),
      cmocka_unit_test(test_dma_bad_address_and_malformed_descriptors_keep_their_statuses),
      cmocka_unit_test(test_dma_unconfigured_engine_reaches_nothing),
      cmocka_unit_test(test_dma_serves_the_hosts_bar2_queues_and_interrupts_the_host),
      cmocka_unit_test(test_dma_injected_failure_fails_one_host_descriptor_with_a_record_then_works),
      cmocka_unit_test(test_dma_paused_host_queues_keep_their_chains_and_resume_where_they_were),
      cmocka_unit_test(test_dma_interrupts_the_host_for_each_long_chain_as_it_completes),
      cmocka_unit_test(test_dma_config_refusals_name_the_field),
      cmocka_unit_test(test_dma_injected_fault_halts_before_consuming_and_reset_recovers),
      cmocka_unit_test(test_tensor_gemm_every_dtype_meets_the_reference_bound),
      cmocka_unit_test(test_tensor_row_tiles_with_ldc_compose_one_gemm),
      cmocka_unit_test(test_tensor_refusals_have_their_status_and_write_nothing),
      cmocka_unit_test(test_tensor_gemm_on_stitched_operands_is_exact_and_mpu_checked),
      cmocka_unit_test(test_tensor_bad_remap_window_is_refused_naming_the_field),
      cmocka_unit_test(test_tensor_injected_fault_fails_one_command_then_works),
      cmocka_unit_test(test_tensor_index_jump_latches_until_reset),
      cmocka_unit_test(test_tensor_full_completion_ring_waits_for_the_consumer),
      cmocka_unit_test(test_engine_props_defaults_and_values_from_the_board),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
