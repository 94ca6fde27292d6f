// ECAM, capability walk, BAR sizing and enumeration tests against the
// FakeEcam config-space model (BAR sizing semantics included).
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

extern "C" {  // cmocka 1.1 headers carry no C++ linkage of their own
#include <cmocka.h>
}

#include "hal/fake_ecam.h"
#include "hal/fake_mmio.h"
#include "hal/pcie.h"

using hal::Status;
using namespace hal::pcie;
using hal::pcie::fake::FakeBar;
using hal::pcie::fake::FakeEcam;

namespace {

// An address range nobody dereferences (FakeEcam's region is unbacked).
constexpr uintptr_t kEcamBase = 0x3f000000;
constexpr uint64_t kMmio32Base = 0x10000000;
constexpr uint64_t kMmio32Size = 0x2eff0000;
constexpr uint64_t kMmio64Base = 0x8000000000ull;
constexpr uint64_t kMmio64Size = 0x8000000000ull;

const Bdf kHost{0, 0, 0};
const Bdf kIvshmem{0, 1, 0};
const Bdf kMulti0{0, 2, 0};
const Bdf kMulti1{0, 2, 1};  // absent
const Bdf kMulti3{0, 2, 3};
const Bdf kSingle{0, 3, 0};
const Bdf kGhost{0, 3, 1};   // modelled, but fn0 is not multi-function

struct Fixture {
  FakeEcam model{kEcamBase, 0, 1};
  Ecam ecam;
  Topology topo;
};

// The board: a host bridge, ivshmem-doorbell, a multi-function device with
// functions 0 and 3, and a single-function device whose function 1 must not
// be probed.
int setup(void** state) {
  hal::fake::reset();
  auto* f = new Fixture;
  f->model.add_function(kHost, 0x1b36, 0x0008, 0x060000);
  f->model.add_function(kIvshmem, 0x1af4, 0x1110, 0x050000);
  f->model.set_bar(kIvshmem, 0, FakeBar{256, false, false, false});
  f->model.set_bar(kIvshmem, 1, FakeBar{4096, false, false, false});
  f->model.set_bar(kIvshmem, 2, FakeBar{16u << 20, false, true, true});
  f->model.add_function(kMulti0, 0x8086, 0x100e, 0x020000, kHeaderTypeEndpoint, true);
  f->model.set_bar(kMulti0, 0, FakeBar{128u << 10, false, false, false});
  f->model.set_bar(kMulti0, 1, FakeBar{64, true, false, false});
  f->model.add_function(kMulti3, 0x8086, 0x1234, 0x010802);
  f->model.set_bar(kMulti3, 0, FakeBar{8192, false, true, false});
  f->model.set_bar(kMulti3, 2, FakeBar{64u << 10, false, false, true});
  f->model.add_function(kSingle, 0x1234, 0x5678, 0x030000);
  f->model.set_bar(kSingle, 0, FakeBar{1u << 20, false, false, true});
  f->model.add_function(kGhost, 0x1234, 0x5679, 0x030000);
  assert_int_equal(f->ecam.init(kEcamBase, f->model.size(), 0, 0), Status::kOk);
  *state = f;
  return 0;
}

int teardown(void** state) {
  hal::fake::reset();
  delete static_cast<Fixture*>(*state);
  return 0;
}

Windows virt_windows() {
  Windows w;
  w.mmio32 = Window{kMmio32Base, kMmio32Base, kMmio32Size};
  w.mmio64 = Window{kMmio64Base, kMmio64Base, kMmio64Size};
  return w;
}

const Function* find_bdf(const Topology& t, const Bdf& bdf) {
  for (uint32_t i = 0; i < t.count; ++i)
    if (t.functions[i].bdf == bdf)
      return &t.functions[i];
  return nullptr;
}

bool inside(const Window& w, const Bar& b) {
  return b.pci_base >= w.pci_base && b.pci_base + b.size <= w.pci_base + w.size;
}

void test_enumerate_finds_present_functions_only(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  assert_int_equal(enumerate(f->ecam, virt_windows(), &f->topo), Status::kOk);
  assert_int_equal(f->topo.count, 5);
  assert_non_null(find_bdf(f->topo, kHost));
  assert_non_null(find_bdf(f->topo, kIvshmem));
  assert_non_null(find_bdf(f->topo, kMulti0));
  assert_non_null(find_bdf(f->topo, kMulti3));
  assert_non_null(find_bdf(f->topo, kSingle));
  assert_null(find_bdf(f->topo, kMulti1));
  assert_null(find_bdf(f->topo, kGhost));
  const Function* iv = f->topo.find(0x1af4, 0x1110);
  assert_non_null(iv);
  assert_int_equal(iv->class_code, 0x050000);
  assert_int_equal(iv->revision, 1);
  assert_null(f->topo.find(0x1af4, 0x1110, 1));
}

void test_bars_are_sized_with_type_and_prefetch_flags(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  assert_int_equal(enumerate(f->ecam, virt_windows(), &f->topo), Status::kOk);
  const Function* iv = find_bdf(f->topo, kIvshmem);
  assert_true(iv->bars[0].size == 256 && !(iv->bars[0].flags & kBar64));
  assert_true(iv->bars[1].size == 4096);
  assert_true(iv->bars[2].size == (16u << 20));
  assert_true((iv->bars[2].flags & (kBar64 | kBarPrefetchable)) == (kBar64 | kBarPrefetchable));
  assert_true(iv->bars[3].flags == kBarUpperHalf);
  const Function* m0 = find_bdf(f->topo, kMulti0);
  assert_true(m0->bars[1].flags & kBarIo);
  assert_true(m0->bars[1].size == 64);
  assert_false(m0->bars[1].assigned());  // I/O BARs are never assigned
  assert_true(m0->bars[2].flags == 0);   // unimplemented
}

void test_bars_are_aligned_non_overlapping_and_inside_windows(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const Windows w = virt_windows();
  assert_int_equal(enumerate(f->ecam, w, &f->topo), Status::kOk);
  const Bar* all[32];
  Bdf owner[32];
  uint32_t idx[32];
  uint32_t n = 0;
  for (uint32_t i = 0; i < f->topo.count; ++i) {
    const Function& fn = f->topo.functions[i];
    for (uint32_t b = 0; b < kBarCount; ++b) {
      if (!fn.bars[b].assigned())
        continue;
      all[n] = &fn.bars[b];
      owner[n] = fn.bdf;
      idx[n++] = b;
    }
  }
  assert_int_equal(n, 7);  // 3 ivshmem + 1 multi0 + 2 multi3 + 1 single
  for (uint32_t i = 0; i < n; ++i) {
    const Bar& b = *all[i];
    assert_true(b.pci_base % b.size == 0);
    assert_true(b.cpu_base == b.pci_base);  // virt: identity ranges
    const bool in64 = (b.flags & kBar64) && (b.flags & kBarPrefetchable);
    assert_true(inside(in64 ? w.mmio64 : w.mmio32, b));
    // The device decodes exactly what the topology reports.
    assert_true(f->model.bar_address(owner[i], idx[i]) == b.pci_base);
    for (uint32_t j = i + 1; j < n; ++j) {
      const Bar& c = *all[j];
      assert_true(b.pci_base + b.size <= c.pci_base || c.pci_base + c.size <= b.pci_base);
    }
  }
}

void test_64bit_prefetchable_bar_goes_to_64bit_window(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  assert_int_equal(enumerate(f->ecam, virt_windows(), &f->topo), Status::kOk);
  const Bar& shm = find_bdf(f->topo, kIvshmem)->bars[2];
  assert_true(shm.pci_base == kMmio64Base);
  assert_int_equal(f->model.cfg32(kIvshmem, 0x14 + 8), 0x80);  // upper dword written
  // A 64-bit BAR that is not prefetchable stays in the 32-bit window.
  const Bar& np = find_bdf(f->topo, kMulti3)->bars[0];
  assert_true(np.pci_base >= kMmio32Base && np.pci_base < kMmio32Base + kMmio32Size);
}

void test_without_64bit_window_everything_uses_32bit_window(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Windows w = virt_windows();
  w.mmio64 = Window{};
  assert_int_equal(enumerate(f->ecam, w, &f->topo), Status::kOk);
  const Bar& shm = find_bdf(f->topo, kIvshmem)->bars[2];
  assert_true(inside(w.mmio32, shm));
  assert_true(shm.pci_base % shm.size == 0);
  assert_true(shm.pci_base == kMmio32Base);  // largest first
}

void test_cpu_addresses_follow_the_window_translation(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Windows w = virt_windows();
  w.mmio32.cpu_base = 0x4010000000ull;  // CPU sees the window elsewhere
  assert_int_equal(enumerate(f->ecam, w, &f->topo), Status::kOk);
  const Bar& b = find_bdf(f->topo, kSingle)->bars[0];
  assert_true(b.cpu_base - b.pci_base == 0x4010000000ull - kMmio32Base);
  assert_true(f->model.bar_address(kSingle, 0) == b.pci_base);
}

void test_enumerate_enables_memory_and_bus_master_after_sizing(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  assert_int_equal(enumerate(f->ecam, virt_windows(), &f->topo), Status::kOk);
  const Bdf endpoints[] = {kHost, kIvshmem, kMulti0, kMulti3, kSingle};
  for (const Bdf& bdf : endpoints) {
    const uint16_t cmd = f->model.cfg16(bdf, 0x04);
    assert_true((cmd & (kCommandMemorySpace | kCommandBusMaster)) ==
                (kCommandMemorySpace | kCommandBusMaster));
  }
  assert_int_equal(f->model.bar_writes_while_decoding(), 0);
}

void test_exhausted_window_fails_cleanly(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Windows w = virt_windows();
  w.mmio32.size = 1u << 20;  // the 1 MiB BAR fits, then nothing else does
  assert_int_equal(enumerate(f->ecam, w, &f->topo), Status::kNoSpace);
  assert_true(f->topo.failed_bdf == kMulti0);  // the next largest: 128 KiB
  assert_int_equal(f->topo.failed_bar, 0);
  const Bdf endpoints[] = {kHost, kIvshmem, kMulti0, kMulti3, kSingle};
  for (const Bdf& bdf : endpoints)
    assert_int_equal(f->model.cfg16(bdf, 0x04) & kCommandMemorySpace, 0);
}

void test_missing_window_is_reported_as_no_space(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Windows w;
  w.mmio64 = Window{kMmio64Base, kMmio64Base, kMmio64Size};
  assert_int_equal(enumerate(f->ecam, w, &f->topo), Status::kNoSpace);
}

void test_invalid_windows_are_rejected(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Windows w = virt_windows();
  w.mmio32 = Window{0xF0000000, 0xF0000000, 0x20000000};  // crosses 4 GiB
  assert_int_equal(enumerate(f->ecam, w, &f->topo), Status::kInvalidArgument);
  w = virt_windows();
  w.mmio64 = Window{~0ull - 10, ~0ull - 10, 0x100};  // wraps
  assert_int_equal(enumerate(f->ecam, w, &f->topo), Status::kInvalidArgument);
}

void test_size_bar_restores_bar_and_command(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->ecam.write32(kSingle, 0x10, 0x20100000);
  f->ecam.write16(kSingle, 0x04, kCommandMemorySpace | kCommandBusMaster);
  Bar b;
  assert_int_equal(size_bar(f->ecam, kSingle, 0, &b), Status::kOk);
  assert_true(b.size == (1u << 20));
  assert_true(b.flags == (kBarImplemented | kBarPrefetchable));
  assert_int_equal(f->model.cfg32(kSingle, 0x10), 0x20100000 | kBarMemPrefetchable);
  assert_int_equal(f->model.cfg16(kSingle, 0x04), kCommandMemorySpace | kCommandBusMaster);
  assert_int_equal(f->model.bar_writes_while_decoding(), 0);
}

void test_size_bar_rejects_non_contiguous_mask(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  // A broken device whose BAR reads back a mask with a hole in it.
  const uintptr_t bar0 = kEcamBase + (3u << 15) + 0x10;
  hal::fake::add_region(bar0, 4, [](uintptr_t, unsigned, uint64_t& v) { v = 0xFFF0F000; },
                        [](uintptr_t, unsigned, uint64_t) { return true; }, false);
  Bar b;
  assert_int_equal(size_bar(f->ecam, kSingle, 0, &b), Status::kBadHardware);
  assert_true(b.size == 0 && b.flags == 0);
  assert_int_equal(enumerate(f->ecam, virt_windows(), &f->topo), Status::kBadHardware);
  assert_true(f->topo.failed_bdf == kSingle);
  assert_int_equal(f->topo.failed_bar, 0);
}

void test_capability_walk_finds_msix_behind_other_caps(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const uint8_t vendor_body[2] = {0, 0};
  f->model.add_capability(kIvshmem, 0x09, vendor_body, sizeof(vendor_body));
  const uint8_t msi_body[8] = {};
  f->model.add_capability(kIvshmem, kCapIdMsi, msi_body, sizeof(msi_body));
  const uint8_t msix = f->model.add_msix(kIvshmem, 4, 1, 0, 1, 0x800);
  uint8_t off = 0;
  assert_int_equal(f->ecam.find_capability(kIvshmem, kCapIdMsix, &off), Status::kOk);
  assert_int_equal(off, msix);
  assert_true(off >= kFirstCapOffset);
}

void test_capability_walk_reports_absence(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint8_t off = 0;
  assert_int_equal(f->ecam.find_capability(kSingle, kCapIdMsix, &off), Status::kNotFound);
  assert_int_equal(f->ecam.find_capability(kMulti1, kCapIdMsix, &off), Status::kNotFound);
  const uint8_t body[2] = {};
  f->model.add_capability(kSingle, 0x09, body, sizeof(body));
  assert_int_equal(f->ecam.find_capability(kSingle, kCapIdMsix, &off), Status::kNotFound);
}

void test_capability_walk_detects_a_loop(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const uint8_t body[2] = {};
  const uint8_t cap = f->model.add_capability(kSingle, 0x09, body, sizeof(body));
  f->model.set_cap_next(kSingle, cap, cap);
  uint8_t off = 0;
  assert_int_equal(f->ecam.find_capability(kSingle, kCapIdMsix, &off), Status::kBadHardware);
  f->model.set_cap_next(kSingle, cap, 0x20);  // into the header
  assert_int_equal(f->ecam.find_capability(kSingle, kCapIdMsix, &off), Status::kBadHardware);
}

void test_out_of_range_config_access_reads_all_ones(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  hal::fake::clear_log();
  assert_int_equal(f->ecam.read32(Bdf{1, 0, 0}, 0), 0xFFFFFFFFu);  // bus beyond bus-range
  assert_int_equal(f->ecam.read16(kIvshmem, 1), 0xFFFF);            // misaligned
  assert_int_equal(f->ecam.read8(Bdf{0, 32, 0}, 0), 0xFF);          // device 32
  assert_int_equal(f->ecam.read32(kIvshmem, 4096), 0xFFFFFFFFu);    // beyond 4 KiB
  f->ecam.write32(Bdf{1, 0, 0}, 0x04, 0);
  assert_int_equal(hal::fake::log().size(), 0);  // nothing reached the bus
  assert_int_equal(f->ecam.read16(kIvshmem, 0), 0x1af4);
  assert_int_equal(f->ecam.read16(kMulti1, 0), kVendorAbsent);
}

void test_ecam_addresses_follow_bus_dev_fn_layout(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  hal::fake::clear_log();
  (void)f->ecam.read32(kMulti3, 0x10);
  const auto& log = hal::fake::log();
  assert_int_equal(log.size(), 1);
  assert_true(log[0].addr == kEcamBase + (2u << 15) + (3u << 12) + 0x10);
  // A window starting at bus 16: bus 16 is at offset 0.
  Ecam high;
  assert_int_equal(high.init(0x4010000000ull, 16u << 20, 16, 31), Status::kOk);
  assert_false(high.contains(Bdf{0, 0, 0}));
  assert_true(high.contains(Bdf{16, 0, 0}));
}

void test_ecam_init_validates_region(void**) {
  Ecam e;
  assert_int_equal(e.init(0, 1u << 20, 0, 0), Status::kInvalidArgument);
  assert_int_equal(e.init(kEcamBase, 1u << 20, 0, 1), Status::kInvalidArgument);  // 2 buses need 2 MiB
  assert_int_equal(e.init(kEcamBase, 1u << 20, 5, 4), Status::kInvalidArgument);
  assert_int_equal(e.init(kEcamBase, 256u << 20, 0, 255), Status::kOk);
}

void test_more_functions_than_capacity_is_reported(void**) {
  hal::fake::reset();
  FakeEcam model(kEcamBase, 0, 1);
  for (uint8_t dev = 0; dev < Topology::kMaxFunctions + 1; ++dev)
    model.add_function(Bdf{0, dev, 0}, 0x1234, dev, 0);
  Ecam ecam;
  assert_int_equal(ecam.init(kEcamBase, model.size(), 0, 0), Status::kOk);
  Topology topo;
  assert_int_equal(enumerate(ecam, virt_windows(), &topo), Status::kCapacity);
  hal::fake::reset();
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_enumerate_finds_present_functions_only, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bars_are_sized_with_type_and_prefetch_flags, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bars_are_aligned_non_overlapping_and_inside_windows, setup, teardown),
      cmocka_unit_test_setup_teardown(test_64bit_prefetchable_bar_goes_to_64bit_window, setup, teardown),
      cmocka_unit_test_setup_teardown(test_without_64bit_window_everything_uses_32bit_window, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cpu_addresses_follow_the_window_translation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_enumerate_enables_memory_and_bus_master_after_sizing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_exhausted_window_fails_cleanly, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_window_is_reported_as_no_space, setup, teardown),
      cmocka_unit_test_setup_teardown(test_invalid_windows_are_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(test_size_bar_restores_bar_and_command, setup, teardown),
      cmocka_unit_test_setup_teardown(test_size_bar_rejects_non_contiguous_mask, setup, teardown),
      cmocka_unit_test_setup_teardown(test_capability_walk_finds_msix_behind_other_caps, setup, teardown),
      cmocka_unit_test_setup_teardown(test_capability_walk_reports_absence, setup, teardown),
      cmocka_unit_test_setup_teardown(test_capability_walk_detects_a_loop, setup, teardown),
      cmocka_unit_test_setup_teardown(test_out_of_range_config_access_reads_all_ones, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ecam_addresses_follow_bus_dev_fn_layout, setup, teardown),
      cmocka_unit_test(test_ecam_init_validates_region),
      cmocka_unit_test(test_more_functions_than_capacity_is_reported),
  };
  return cmocka_run_group_tests_name("hal_pcie", tests, nullptr, nullptr);
}
