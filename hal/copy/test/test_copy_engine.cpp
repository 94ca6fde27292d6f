// hal/copy engine backend tests: EngineRegion and HwEngine over the fake
// register backend (a RAM engine region and doorbell register, with the
// access log), and end to end against vtrn-hw's engine models driving the
// same bytes, so the driver and the hardware are checked against one ABI.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <vector>

#include "hal/copy_engine.h"
#include "hal/fake_mmio.h"
#include "vtrn/hw/dma_engine.h"

using hal::Status;
using namespace vtrn::engine;

namespace {

constexpr uint64_t kRamBase = 0x40000000ull;
constexpr uint64_t kRamSize = 8ull << 20;

struct Nothing final : vtrn::hw::Signals {
  void chip_irq(uint16_t v) override { ++irqs[v]; }
  void host_irq() override {}
  uint32_t irqs[kVectorCount] = {};
};

struct Rig {
  std::vector<uint8_t> region = std::vector<uint8_t>(kRegionBytes + 4096);
  std::vector<uint8_t> ram = std::vector<uint8_t>(kRamSize);
  uint32_t doorbell = 0;
  vtrn::hw::ChipMemory mem;
  Nothing sig;
  vtrn::hw::ErrorLog log{mem, sig};
  vtrn::hw::EngineProps props;
  Rig() {
    hal::fake::reset();
    mem.region = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(region.data()) + 4095) & ~uintptr_t(4095));
    mem.ram = ram.data();
    mem.ram_base = kRamBase;
    mem.ram_size = kRamSize;
    props.dma_engines = 2;
    props.tensor_engines = 1;
    props.dma_bytes_per_s = 1000000000;
    IdBlock id{};
    id.magic = kMagic;
    id.abi_major = kAbiMajor;
    id.region_bytes = kRegionBytes;
    id.vector_count = kVectorCount;
    id.dma_engines = 2;
    id.tensor_engines = 1;
    id.mpu_windows = kMpuWindows;
    id.dma_fw_depth = kDmaFwDepth;
    id.tensor_depth = kTensorDepth;
    memcpy(mem.region, &id, sizeof id);
  }
  uintptr_t base() const { return reinterpret_cast<uintptr_t>(mem.region); }
  uintptr_t bell() const { return reinterpret_cast<uintptr_t>(&doorbell); }
};

void test_region_init_checks_magic_major_and_counts(void**) {
  Rig r;
  hal::copy::EngineRegion reg;
  assert_int_equal(reg.init(r.base(), kRegionBytes / 2, r.bell()), Status::kBadHardware);
  r.mem.id()->magic = 0;
  assert_int_equal(reg.init(r.base(), kRegionBytes, r.bell()), Status::kNotFound);
  r.mem.id()->magic = kMagic;
  r.mem.id()->abi_major = kAbiMajor + 1;
  assert_int_equal(reg.init(r.base(), kRegionBytes, r.bell()), Status::kBadHardware);
  r.mem.id()->abi_major = kAbiMajor;
  r.mem.id()->dma_engines = kMaxDmaEngines + 1;
  assert_int_equal(reg.init(r.base(), kRegionBytes, r.bell()), Status::kBadHardware);
  r.mem.id()->dma_engines = 2;
  assert_int_equal(reg.init(r.base(), kRegionBytes, r.bell()), Status::kOk);
  assert_int_equal(reg.dma_engines(), 2);
  assert_int_equal(reg.tensor_engines(), 1);
}

void test_ring_writes_peer_and_vector_to_the_doorbell(void**) {
  Rig r;
  hal::copy::EngineRegion reg;
  assert_int_equal(reg.init(r.base(), kRegionBytes, r.bell()), Status::kOk);
  hal::fake::clear_log();
  assert_int_equal(reg.ring(kVectorDma0 + 1), Status::kOk);
  assert_int_equal(r.doorbell, (uint32_t(kEngineHwPeerId) << 16) | (kVectorDma0 + 1));
  assert_int_equal(reg.ring(kVectorCount), Status::kOutOfRange);
  const auto w = hal::fake::writes();
  assert_int_equal(w.size(), 1);
  assert_true(w[0].addr == r.bell());
}

void test_mpu_program_writes_the_bank_before_the_generation(void**) {
  Rig r;
  hal::copy::EngineRegion reg;
  assert_int_equal(reg.init(r.base(), kRegionBytes, r.bell()), Status::kOk);
  MpuWindow w[2] = {{kRamBase + 0x100000, 0x1000, kMpuValid, 1, 0}, {kRamBase + 0x200000, 0x1000, kMpuValid, 2, 0}};
  hal::fake::clear_log();
  uint32_t gen = 0;
  assert_int_equal(reg.mpu_program(w, 2, &gen), Status::kOk);
  assert_int_equal(gen, 1);
  MpuBlock* mpu = r.mem.mpu();
  assert_memory_equal(mpu->bank[1], w, sizeof w);
  assert_int_equal(mpu->bank_count[1], 2);
  const auto log = hal::fake::writes();
  // bank count, header count, generation, doorbell: in that order.
  assert_int_equal(log.size(), 4);
  assert_true(log[2].addr == hal::fake::addr_of(&mpu->header.generation.value));
  assert_int_equal(log[2].value, 1);
  assert_true(log[3].addr == r.bell());
  assert_false(reg.mpu_acked(1));
  assert_int_equal(reg.mpu_program(w, kMpuWindows + 1, &gen), Status::kOutOfRange);
  // The model picks the table up and acknowledges it.
  vtrn::hw::DmaEngine e0(r.mem, 0, r.props, r.sig, r.log, vtrn::hw::monotonic_ns);
  vtrn::hw::DmaEngine e1(r.mem, 1, r.props, r.sig, r.log, vtrn::hw::monotonic_ns);
  r.mem.tensor(0)->sq_prod.value = 0;
  e0.run_pass();
  e1.run_pass();
  assert_int_equal(e0.mpu_generation(), 1);
  r.mem.mpu()->header.tensor_ack[0].value = 1;
  assert_true(reg.mpu_acked(1));
}

void test_hw_engine_copies_through_the_model_and_reports_statuses(void**) {
  Rig r;
  hal::copy::EngineRegion reg;
  assert_int_equal(reg.init(r.base(), kRegionBytes, r.bell()), Status::kOk);
  vtrn::hw::DmaEngine model(r.mem, 1, r.props, r.sig, r.log, vtrn::hw::monotonic_ns);
  hal::copy::HwEngine eng;
  assert_int_equal(eng.init(reg, 5), Status::kOutOfRange);
  assert_int_equal(eng.init(reg, 1), Status::kOk);
  DmaConfig cfg{};
  cfg.hbm_base = kRamBase + 0x100000;
  cfg.hbm_size = 0x400000;
  assert_int_equal(eng.configure(cfg), Status::kOk);
  uint32_t st = 99;
  assert_false(eng.config_done(&st));
  model.run_pass();
  assert_true(eng.config_done(&st));
  assert_int_equal(st, kEngineOk);
  assert_false(eng.capabilities().synchronous);
  eng.arm_irq(true);
  uint8_t* src = r.ram.data() + 0x100000;
  uint8_t* dst = r.ram.data() + 0x300000;
  for (int i = 0; i < 5000; ++i) src[i] = uint8_t(i * 3);
  // The fw's pointers are chip physical addresses.
  void* pdst = reinterpret_cast<void*>(kRamBase + 0x300000);
  const void* psrc = reinterpret_cast<const void*>(kRamBase + 0x100000);
  assert_int_equal(eng.start(pdst, psrc, 5000), Status::kOk);
  assert_int_equal(r.doorbell, kVectorDma0 + 1u);
  hal::copy::Completion c;
  assert_int_equal(int(eng.poll_done(&c)), int(hal::copy::Progress::kInFlight));
  model.run_pass();
  assert_int_equal(int(eng.poll_done(&c)), int(hal::copy::Progress::kDone));
  assert_int_equal(c.status, Status::kOk);
  assert_int_equal(c.bytes, 5000);
  assert_memory_equal(src, dst, 5000);
  assert_int_equal(r.sig.irqs[kVectorDma0 + 1], 1);
  // Outside the configured HBM: the engine refuses, the driver says so.
  assert_int_equal(eng.start(reinterpret_cast<void*>(kRamBase + 0x600000), psrc, 64), Status::kOk);
  model.run_pass();
  assert_int_equal(int(eng.poll_done(&c)), int(hal::copy::Progress::kDone));
  assert_int_equal(c.status, Status::kBadHardware);
  assert_int_equal(eng.last_status(), vtrn::dma::kErrDstRange);
  vtrn::engine::ErrorRecord rec;
  uint32_t lost = 0;
  assert_int_equal(reg.next_error(&rec, &lost), Status::kOk);
  assert_int_equal(rec.code, kEngineBadAddress);
  assert_int_equal(rec.address, kRamBase + 0x600000);
  assert_int_equal(reg.next_error(&rec, &lost), Status::kNotFound);
}

void test_reset_and_injection_handshakes(void**) {
  Rig r;
  hal::copy::EngineRegion reg;
  assert_int_equal(reg.init(r.base(), kRegionBytes, r.bell()), Status::kOk);
  assert_int_equal(reg.begin_reset(), Status::kOk);
  assert_int_equal(r.mem.control()->reset_req.value, 1);
  assert_int_equal(r.doorbell, uint32_t(kVectorControl));
  assert_false(reg.reset_done());
  r.mem.control()->reset_ack.value = 1;
  assert_true(reg.reset_done());
  assert_int_equal(reg.inject(kInjectDma, 2), Status::kOutOfRange);
  assert_int_equal(reg.inject(7, 0), Status::kOutOfRange);
  vtrn::hw::DmaEngine model(r.mem, 1, r.props, r.sig, r.log, vtrn::hw::monotonic_ns);
  assert_int_equal(reg.inject(kInjectDma, 1), Status::kOk);
  assert_false(reg.injected());
  model.run_pass();
  assert_true(reg.injected());
  assert_true(model.halted());
}

void test_error_reader_skips_what_was_overwritten(void**) {
  Rig r;
  hal::copy::EngineRegion reg;
  assert_int_equal(reg.init(r.base(), kRegionBytes, r.bell()), Status::kOk);
  for (uint32_t i = 0; i < kErrorRecords + 5; ++i) {
    ErrorRecord e{};
    e.code = kEngineMpuFault;
    e.address = i;
    r.log.post(e);
  }
  ErrorRecord rec;
  uint32_t lost = 0;
  assert_int_equal(reg.next_error(&rec, &lost), Status::kOk);
  assert_int_equal(lost, 5);
  assert_int_equal(rec.address, 5);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_region_init_checks_magic_major_and_counts),
      cmocka_unit_test(test_ring_writes_peer_and_vector_to_the_doorbell),
      cmocka_unit_test(test_mpu_program_writes_the_bank_before_the_generation),
      cmocka_unit_test(test_hw_engine_copies_through_the_model_and_reports_statuses),
      cmocka_unit_test(test_reset_and_injection_handshakes),
      cmocka_unit_test(test_error_reader_skips_what_was_overwritten),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
