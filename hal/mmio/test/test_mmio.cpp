// Tests of the fake register backend itself: every other HAL test trusts its
// log and hook semantics, so they are pinned down here.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

extern "C" {  // cmocka 1.1 headers carry no C++ linkage of their own
#include <cmocka.h>
}

#include "hal/fake_mmio.h"
#include "hal/mmio.h"
#include "hal/status.h"

namespace {

struct Block {
  uint32_t a;
  uint32_t b;
  uint64_t wide;
  uint8_t bytes[4];
  uint16_t half;
};

Block regs;

int setup(void**) {
  hal::fake::reset();
  memset(&regs, 0, sizeof(regs));
  return 0;
}

void test_writes_reach_ram_and_are_logged_in_order(void**) {
  hal::mmio::write32(&regs.a, 0x11);
  hal::mmio::write64(&regs.wide, 0x1122334455667788ull);
  hal::mmio::write8(&regs.bytes[2], 0x7F);
  hal::mmio::write16(&regs.half, 0xBEEF);
  assert_int_equal(regs.a, 0x11);
  assert_true(regs.wide == 0x1122334455667788ull);
  assert_int_equal(regs.bytes[2], 0x7F);
  assert_int_equal(regs.half, 0xBEEF);
  const auto w = hal::fake::writes();
  assert_int_equal(w.size(), 4);
  assert_true(w[0].addr == hal::fake::addr_of(&regs.a) && w[0].width == 4);
  assert_true(w[1].addr == hal::fake::addr_of(&regs.wide) && w[1].width == 8);
  assert_true(w[2].addr == hal::fake::addr_of(&regs.bytes[2]) && w[2].width == 1);
  assert_true(w[3].addr == hal::fake::addr_of(&regs.half) && w[3].width == 2);
}

void test_reads_return_ram_and_are_logged(void**) {
  regs.b = 0xCAFE;
  assert_int_equal(hal::mmio::read32(&regs.b), 0xCAFE);
  const auto acc = hal::fake::accesses_to(hal::fake::addr_of(&regs.b));
  assert_int_equal(acc.size(), 1);
  assert_false(acc[0].is_write);
  assert_int_equal(acc[0].value, 0xCAFE);
}

void test_read_hook_replaces_value(void**) {
  int calls = 0;
  hal::fake::add_region(hal::fake::addr_of(&regs.a), 4,
                        [&](uintptr_t, unsigned, uint64_t& v) { v = 100 + calls++; }, nullptr);
  assert_int_equal(hal::mmio::read32(&regs.a), 100);
  assert_int_equal(hal::mmio::read32(&regs.a), 101);
  assert_int_equal(hal::mmio::read32(&regs.b), 0);  // outside the region: plain RAM
}

void test_write_hook_can_swallow_write(void**) {
  uint64_t seen = 0;
  hal::fake::add_region(hal::fake::addr_of(&regs.a), 8, nullptr,
                        [&](uintptr_t addr, unsigned, uint64_t v) {
                          seen = v;
                          return addr == hal::fake::addr_of(&regs.a);  // handle a only
                        });
  hal::mmio::write32(&regs.a, 5);
  hal::mmio::write32(&regs.b, 6);
  assert_int_equal(seen, 6);
  assert_int_equal(regs.a, 0);  // swallowed by the hook
  assert_int_equal(regs.b, 6);  // hook declined: stored
}

void test_unbacked_region_reads_all_ones_without_touching_memory(void**) {
  // An address range the test does not own: never dereferenced.
  const uintptr_t base = 0x1000;
  hal::fake::add_region(base, 0x1000, nullptr, nullptr, false);
  assert_int_equal(hal::mmio::read32(hal::mmio::reg_at<uint32_t>(base, 0x10)), 0xFFFFFFFFu);
  assert_int_equal(hal::mmio::read8(hal::mmio::reg_at<uint8_t>(base, 0x3)), 0xFF);
  hal::mmio::write32(hal::mmio::reg_at<uint32_t>(base, 0x10), 1);  // dropped
  assert_int_equal(hal::fake::writes().size(), 1);
}

void test_reset_forgets_regions_and_log(void**) {
  hal::fake::add_region(hal::fake::addr_of(&regs.a), 4,
                        [](uintptr_t, unsigned, uint64_t& v) { v = 9; }, nullptr);
  hal::mmio::data_sync_barrier();
  hal::fake::reset();
  regs.a = 3;
  assert_int_equal(hal::mmio::read32(&regs.a), 3);
  assert_int_equal(hal::fake::log().size(), 1);
  assert_int_equal(hal::fake::barrier_count(), 0);
}

void test_status_names_are_distinct(void**) {
  assert_string_equal(hal::status_name(hal::Status::kOk), "ok");
  assert_string_equal(hal::status_name(hal::Status::kNoSpace), "no-space");
  assert_string_equal(hal::status_name(hal::Status::kTimeout), "timeout");
  assert_string_not_equal(hal::status_name(hal::Status::kNotFound),
                          hal::status_name(hal::Status::kNotReady));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_writes_reach_ram_and_are_logged_in_order, setup),
      cmocka_unit_test_setup(test_reads_return_ram_and_are_logged, setup),
      cmocka_unit_test_setup(test_read_hook_replaces_value, setup),
      cmocka_unit_test_setup(test_write_hook_can_swallow_write, setup),
      cmocka_unit_test_setup(test_unbacked_region_reads_all_ones_without_touching_memory, setup),
      cmocka_unit_test_setup(test_reset_forgets_regions_and_log, setup),
      cmocka_unit_test_setup(test_status_names_are_distinct, setup),
  };
  return cmocka_run_group_tests_name("hal_mmio", tests, nullptr, nullptr);
}
