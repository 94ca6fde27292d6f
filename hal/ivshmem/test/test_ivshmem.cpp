// ivshmem driver tests: a FakeEcam config space with one ivshmem-doorbell
// (MSI-X in BAR1) and one ivshmem-plain function, enumerated into windows
// backed by host buffers, so BAR0 registers and the MSI-X table are RAM the
// test can read back.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

extern "C" {  // cmocka 1.1 headers carry no C++ linkage of their own
#include <cmocka.h>
}

#include "hal/fake_ecam.h"
#include "hal/fake_mmio.h"
#include "hal/gic.h"
#include "hal/ivshmem.h"
#include "hal/pcie.h"

using hal::Status;
using namespace hal::pcie;
using hal::pcie::fake::FakeBar;
using hal::pcie::fake::FakeEcam;
namespace ivs = hal::ivshmem;

namespace {

constexpr uintptr_t kEcamBase = 0x3f000000;
constexpr uint32_t kVectors = 4;
constexpr uint32_t kPbaOffset = 0x800;
const Bdf kDoorbell{0, 1, 0};
const Bdf kPlain{0, 2, 0};

alignas(4096) uint8_t mmio32_ram[64 << 10];
uint8_t mmio64_ram[4 << 20];
hal::gic::V2mRegs v2m_frame;

struct Fixture {
  FakeEcam model{kEcamBase, 0, 1};
  Ecam ecam;
  Topology topo;
  const Function* doorbell = nullptr;
  const Function* plain = nullptr;
};

Fixture* build(void** state, uint32_t table_offset) {
  hal::fake::reset();
  memset(mmio32_ram, 0, sizeof(mmio32_ram));
  memset(&v2m_frame, 0, sizeof(v2m_frame));
  auto* f = new Fixture;
  *state = f;
  f->model.add_function(kDoorbell, ivs::kVendorId, ivs::kDeviceId, 0x050000);
  f->model.set_bar(kDoorbell, 0, FakeBar{256, false, false, false});
  f->model.set_bar(kDoorbell, 1, FakeBar{4096, false, false, false});
  f->model.set_bar(kDoorbell, 2, FakeBar{1u << 20, false, true, true});
  f->model.add_msix(kDoorbell, kVectors, ivs::kMsixBar, table_offset, ivs::kMsixBar, kPbaOffset);
  f->model.add_function(kPlain, ivs::kVendorId, ivs::kDeviceId, 0x050000);
  f->model.set_bar(kPlain, 2, FakeBar{1u << 20, false, true, true});
  assert_int_equal(f->ecam.init(kEcamBase, f->model.size(), 0, 0), Status::kOk);
  Windows w;
  w.mmio32 = Window{reinterpret_cast<uintptr_t>(mmio32_ram), 0x10000000, sizeof(mmio32_ram)};
  w.mmio64 = Window{reinterpret_cast<uintptr_t>(mmio64_ram), 0x8000000000ull, sizeof(mmio64_ram)};
  assert_int_equal(enumerate(f->ecam, w, &f->topo), Status::kOk);
  f->doorbell = f->topo.find(ivs::kVendorId, ivs::kDeviceId, 0);
  f->plain = f->topo.find(ivs::kVendorId, ivs::kDeviceId, 1);
  assert_non_null(f->doorbell);
  assert_non_null(f->plain);
  assert_true(f->doorbell->bdf == kDoorbell);
  return f;
}

int setup(void** state) {
  build(state, 0);
  return 0;
}

int teardown(void** state) {
  hal::fake::reset();
  delete static_cast<Fixture*>(*state);
  return 0;
}

volatile MsixEntry* table_entry(const ivs::IvshmemDoorbell& dev, uint32_t v) {
  return reinterpret_cast<volatile MsixEntry*>(static_cast<uintptr_t>(dev.msix_table())) + v;
}

uint16_t msix_control(Fixture* f) {
  uint8_t cap = 0;
  assert_int_equal(f->ecam.find_capability(kDoorbell, kCapIdMsix, &cap), Status::kOk);
  return f->model.cfg16(kDoorbell, cap + 2);
}

void init_v2m(hal::gic::Gicv2m* v2m) {
  v2m_frame.MSI_TYPER = (80u << hal::gic::kV2mTyperBaseShift) | 64;
  assert_int_equal(v2m->init(reinterpret_cast<uintptr_t>(&v2m_frame), 288), Status::kOk);
}

void test_classify_tells_doorbell_from_plain(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  ivs::Kind kind{};
  assert_int_equal(ivs::classify(f->ecam, *f->doorbell, &kind), Status::kOk);
  assert_int_equal(static_cast<int>(kind), static_cast<int>(ivs::Kind::kDoorbell));
  assert_int_equal(ivs::classify(f->ecam, *f->plain, &kind), Status::kOk);
  assert_int_equal(static_cast<int>(kind), static_cast<int>(ivs::Kind::kPlain));
  Function other = *f->doorbell;
  other.device_id = 0x1111;
  assert_false(ivs::is_ivshmem(other));
  assert_int_equal(ivs::classify(f->ecam, other, &kind), Status::kNotFound);
}

void test_doorbell_init_reads_msix_geometry_and_masks_vectors(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  ivs::IvshmemDoorbell dev;
  assert_int_equal(dev.init(f->ecam, *f->doorbell), Status::kOk);
  assert_int_equal(dev.vector_count(), kVectors);
  assert_true(dev.msix_table() == f->doorbell->bars[1].cpu_base);
  assert_true(dev.msix_pba() == f->doorbell->bars[1].cpu_base + kPbaOffset);
  assert_true(dev.shm_base() == f->doorbell->bars[2].cpu_base);
  assert_true(dev.shm_size() == (1u << 20));
  assert_true(dev.shm_base() >= reinterpret_cast<uintptr_t>(mmio64_ram));
  for (uint32_t v = 0; v < kVectors; ++v)
    assert_int_equal(table_entry(dev, v)->vector_control, kMsixVectorMasked);
  assert_false(dev.msix_enabled());
}

void test_route_to_v2m_programs_each_entry_exactly(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  ivs::IvshmemDoorbell dev;
  assert_int_equal(dev.init(f->ecam, *f->doorbell), Status::kOk);
  hal::gic::Gicv2m v2m;
  init_v2m(&v2m);
  hal::fake::clear_log();
  uint32_t first_spi = 0;
  assert_int_equal(dev.route_to_v2m(v2m, 2, &first_spi), Status::kOk);
  assert_int_equal(first_spi, 82);
  const uint64_t doorbell = reinterpret_cast<uintptr_t>(&v2m_frame) + 0x40;
  for (uint32_t v = 0; v < kVectors; ++v) {
    volatile MsixEntry* e = table_entry(dev, v);
    assert_int_equal(e->msg_addr_lo, static_cast<uint32_t>(doorbell));
    assert_int_equal(e->msg_addr_hi, static_cast<uint32_t>(doorbell >> 32));
    assert_int_equal(e->msg_data, 82 + v);
    assert_int_equal(e->vector_control, 0);
  }
  // Per entry: address lo, address hi, data, then unmask.
  const auto w = hal::fake::writes();
  assert_int_equal(w.size(), 4 * kVectors);
  for (uint32_t v = 0; v < kVectors; ++v) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(table_entry(dev, v));
    assert_true(w[4 * v + 0].addr == base + 0x0);
    assert_true(w[4 * v + 1].addr == base + 0x4);
    assert_true(w[4 * v + 2].addr == base + 0x8);
    assert_true(w[4 * v + 3].addr == base + 0xC);
  }
}

void test_route_rejects_frame_with_too_few_spis(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  ivs::IvshmemDoorbell dev;
  assert_int_equal(dev.init(f->ecam, *f->doorbell), Status::kOk);
  hal::gic::Gicv2m v2m;
  init_v2m(&v2m);
  hal::fake::clear_log();
  uint32_t first_spi = 0;
  assert_int_equal(dev.route_to_v2m(v2m, 61, &first_spi), Status::kOutOfRange);  // needs 61..64
  assert_int_equal(hal::fake::writes().size(), 0);  // table untouched
  hal::gic::Gicv2m not_ready;
  assert_int_equal(dev.route_to_v2m(not_ready, 0, &first_spi), Status::kNotReady);
}

void test_set_vector_rejects_vector_beyond_table(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  ivs::IvshmemDoorbell dev;
  assert_int_equal(dev.set_vector(0, hal::gic::MsiMessage{0x1000, 1}), Status::kNotReady);
  assert_int_equal(dev.init(f->ecam, *f->doorbell), Status::kOk);
  assert_int_equal(dev.set_vector(kVectors, hal::gic::MsiMessage{0x1000, 1}), Status::kOutOfRange);
  assert_int_equal(dev.mask_vector(kVectors), Status::kOutOfRange);
  assert_int_equal(dev.set_vector(3, hal::gic::MsiMessage{0x123456789ull, 99}), Status::kOk);
  assert_int_equal(table_entry(dev, 3)->msg_addr_hi, 0x1);
  assert_int_equal(dev.mask_vector(3), Status::kOk);
  assert_int_equal(table_entry(dev, 3)->vector_control, kMsixVectorMasked);
}

void test_enable_msix_sets_enable_and_clears_function_mask(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  ivs::IvshmemDoorbell dev;
  assert_int_equal(dev.init(f->ecam, *f->doorbell), Status::kOk);
  uint8_t cap = 0;
  assert_int_equal(f->ecam.find_capability(kDoorbell, kCapIdMsix, &cap), Status::kOk);
  f->ecam.write16(kDoorbell, cap + 2, kMsixCtrlFunctionMask);
  assert_int_equal(dev.enable_msix(), Status::kOk);
  const uint16_t ctrl = msix_control(f);
  assert_true(ctrl & kMsixCtrlEnable);
  assert_false(ctrl & kMsixCtrlFunctionMask);
  assert_int_equal(ctrl & kMsixCtrlTableSizeMask, kVectors - 1);
  assert_true(dev.msix_enabled());
  assert_int_equal(dev.disable_msix(), Status::kOk);
  assert_false(msix_control(f) & kMsixCtrlEnable);
}

void test_position_reads_ivposition(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  ivs::IvshmemDoorbell dev;
  assert_int_equal(dev.init(f->ecam, *f->doorbell), Status::kOk);
  auto* regs = reinterpret_cast<ivs::IvshmemRegs*>(static_cast<uintptr_t>(f->doorbell->bars[0].cpu_base));
  regs->IVPosition = 1;
  assert_int_equal(dev.position(), 1);
}

void test_ring_writes_peer_and_vector_to_doorbell(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  ivs::IvshmemDoorbell dev;
  assert_int_equal(dev.init(f->ecam, *f->doorbell), Status::kOk);
  const uintptr_t regs = static_cast<uintptr_t>(f->doorbell->bars[0].cpu_base);
  hal::fake::clear_log();
  assert_int_equal(dev.ring(0, 3), Status::kOk);
  assert_int_equal(dev.ring(5, 1), Status::kOk);
  const auto w = hal::fake::writes();
  assert_int_equal(w.size(), 2);
  assert_true(w[0].addr == regs + 0x0C && w[0].value == 0x00000003);
  assert_true(w[1].addr == regs + 0x0C && w[1].value == 0x00050001);
}

void test_plain_function_reports_bar2_and_is_no_doorbell(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  ivs::IvshmemPlain plain;
  assert_int_equal(plain.init(*f->plain), Status::kOk);
  assert_true(plain.shm_size() == (1u << 20));
  assert_true(plain.shm_base() == f->plain->bars[2].cpu_base);
  assert_true(plain.shm_base() != f->doorbell->bars[2].cpu_base);
  ivs::IvshmemDoorbell dev;
  assert_int_equal(dev.init(f->ecam, *f->plain), Status::kNotFound);
}

void test_unassigned_shared_memory_is_not_found(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Function fn = *f->plain;
  fn.bars[2].flags &= ~kBarAssigned;
  ivs::SharedMemory shm;
  assert_int_equal(ivs::shared_memory(fn, &shm), Status::kNotFound);
  ivs::IvshmemPlain plain;
  assert_int_equal(plain.init(fn), Status::kNotFound);
}

void test_init_rejects_table_outside_its_bar(void** state) {
  teardown(state);
  auto* f = build(state, 0xFF8);  // 4 entries from 0xFF8 overrun the 4 KiB BAR
  ivs::IvshmemDoorbell dev;
  assert_int_equal(dev.init(f->ecam, *f->doorbell), Status::kBadHardware);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_classify_tells_doorbell_from_plain, setup, teardown),
      cmocka_unit_test_setup_teardown(test_doorbell_init_reads_msix_geometry_and_masks_vectors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_route_to_v2m_programs_each_entry_exactly, setup, teardown),
      cmocka_unit_test_setup_teardown(test_route_rejects_frame_with_too_few_spis, setup, teardown),
      cmocka_unit_test_setup_teardown(test_set_vector_rejects_vector_beyond_table, setup, teardown),
      cmocka_unit_test_setup_teardown(test_enable_msix_sets_enable_and_clears_function_mask, setup, teardown),
      cmocka_unit_test_setup_teardown(test_position_reads_ivposition, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ring_writes_peer_and_vector_to_doorbell, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plain_function_reports_bar2_and_is_no_doorbell, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unassigned_shared_memory_is_not_found, setup, teardown),
      cmocka_unit_test_setup_teardown(test_init_rejects_table_outside_its_bar, setup, teardown),
  };
  return cmocka_run_group_tests_name("hal_ivshmem", tests, nullptr, nullptr);
}
