// Generic-timer tests over the fake sysreg backend: exact conversions at
// 62.5 MHz and 1 GHz, saturation instead of overflow, and the arming
// sequence (CVAL before CTL, ISTATUS following the counter).
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

extern "C" {  // cmocka 1.1 headers carry no C++ linkage of their own
#include <cmocka.h>
}

#include "hal/fake_timer.h"
#include "hal/timer.h"

using hal::Status;
using namespace hal::timer;

namespace {

constexpr uint64_t k62_5MHz = 62500000;
constexpr uint64_t k1GHz = 1000000000;
constexpr uint64_t kMax = ~0ull;
constexpr uint32_t kVirtTimerPpi = 27;

int setup(void**) {
  fake::reset();
  return 0;
}

void test_conversions_are_exact_at_62_5mhz(void**) {
  assert_true(ticks_to_ns(1, k62_5MHz) == 16);
  assert_true(ticks_to_ns(k62_5MHz, k62_5MHz) == 1000000000ull);
  assert_true(ticks_to_ns(k62_5MHz * 3600 + 7, k62_5MHz) == 3600ull * 1000000000ull + 112);
  assert_true(ns_to_ticks(16, k62_5MHz) == 1);
  assert_true(ns_to_ticks(1000000000ull, k62_5MHz) == k62_5MHz);
  assert_true(ns_to_ticks(32000, k62_5MHz) == 2000);
}

void test_ns_to_ticks_rounds_up_so_deadlines_are_never_early(void**) {
  assert_true(ns_to_ticks(1, k62_5MHz) == 1);
  assert_true(ns_to_ticks(17, k62_5MHz) == 2);
  assert_true(ns_to_ticks(0, k62_5MHz) == 0);
  assert_true(ticks_to_ns(ns_to_ticks(17, k62_5MHz), k62_5MHz) >= 17);
}

void test_conversions_are_identity_at_1ghz(void**) {
  const uint64_t values[] = {0, 1, 999999999, 1000000000, 123456789012345ull, kMax};
  for (uint64_t v : values) {
    assert_true(ticks_to_ns(v, k1GHz) == v);
    assert_true(ns_to_ticks(v, k1GHz) == v);
  }
}

void test_large_values_do_not_overflow(void**) {
  // 2^64 - 1 ns at 62.5 MHz is ceil((2^64 - 1) / 16) = 2^60 ticks.
  assert_true(ns_to_ticks(kMax, k62_5MHz) == (1ull << 60));
  assert_true(ticks_to_ns((1ull << 60) - 1, k62_5MHz) == kMax - 15);
  // Beyond the representable range the result saturates.
  assert_true(ticks_to_ns(1ull << 60, k62_5MHz) == kMax);
  assert_true(ticks_to_ns(kMax, k62_5MHz) == kMax);
  assert_true(ns_to_ticks(kMax, 4000000000ull) == kMax);
  // A frequency that does not divide 1 GHz: 19.2 MHz, one second.
  assert_true(ticks_to_ns(19200000, 19200000) == 1000000000ull);
  assert_true(ns_to_ticks(1000000000ull, 19200000) == 19200000);
}

void test_invalid_frequency_converts_to_zero(void**) {
  assert_true(ticks_to_ns(100, 0) == 0);
  assert_true(ns_to_ticks(100, 1ull << 32) == 0);
}

void test_init_reads_frequency_and_masks_timer(void**) {
  fake::state().cntv_ctl = kCtlEnable;
  Timer t;
  assert_int_equal(t.init(kVirtTimerPpi), Status::kOk);
  assert_true(t.frequency() == k62_5MHz);
  assert_int_equal(t.intid(), kVirtTimerPpi);
  assert_int_equal(fake::state().cntv_ctl, kCtlImask);
  assert_false(t.armed());
}

void test_init_rejects_zero_frequency_and_non_ppi(void**) {
  Timer t;
  assert_int_equal(t.init(15), Status::kInvalidArgument);
  assert_int_equal(t.init(32), Status::kInvalidArgument);
  fake::state().cntfrq = 0;
  assert_int_equal(t.init(kVirtTimerPpi), Status::kBadHardware);
  fake::state().cntfrq = 1ull << 32;
  assert_int_equal(t.init(kVirtTimerPpi), Status::kBadHardware);
  assert_int_equal(t.arm_at(5), Status::kNotReady);
  assert_int_equal(fake::state().cval_writes, 0);
}

void test_arm_at_writes_cval_before_enabling(void**) {
  Timer t;
  assert_int_equal(t.init(kVirtTimerPpi), Status::kOk);
  assert_int_equal(t.arm_at(123456), Status::kOk);
  assert_true(fake::state().cntv_cval == 123456);
  assert_int_equal(fake::state().cntv_ctl, kCtlEnable);
  assert_true(fake::state().cval_before_ctl);
  assert_true(t.armed());
}

void test_arm_after_ns_adds_ticks_to_now(void**) {
  fake::state().cntvct = 1000;
  Timer t;
  assert_int_equal(t.init(kVirtTimerPpi), Status::kOk);
  assert_int_equal(t.arm_after_ns(1600), Status::kOk);  // 100 ticks of 16 ns
  assert_true(fake::state().cntv_cval == 1100);
  fake::state().cntvct = kMax - 10;
  assert_int_equal(t.arm_after_ns(1000000), Status::kOk);
  assert_true(fake::state().cntv_cval == kMax);  // saturated, not wrapped into the past
}

void test_fired_follows_counter_and_disarm_drops_it(void**) {
  fake::state().cntvct = 1000;
  Timer t;
  assert_int_equal(t.init(kVirtTimerPpi), Status::kOk);
  assert_int_equal(t.arm_at(1100), Status::kOk);
  fake::state().cntvct = 1099;
  assert_false(t.fired());
  fake::state().cntvct = 1100;
  assert_true(t.fired());
  t.disarm();
  assert_false(t.fired());
  assert_false(t.armed());
  assert_int_equal(fake::state().cntv_ctl, kCtlImask);
}

void test_now_reads_counter_and_converts(void**) {
  fake::state().cntvct = k62_5MHz * 2;
  fake::state().vct_step = 1;
  Timer t;
  assert_int_equal(t.init(kVirtTimerPpi), Status::kOk);
  assert_true(t.now() == k62_5MHz * 2);
  assert_true(t.now_ns() == 2000000016ull);  // the counter moved by one tick
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_conversions_are_exact_at_62_5mhz, setup),
      cmocka_unit_test_setup(test_ns_to_ticks_rounds_up_so_deadlines_are_never_early, setup),
      cmocka_unit_test_setup(test_conversions_are_identity_at_1ghz, setup),
      cmocka_unit_test_setup(test_large_values_do_not_overflow, setup),
      cmocka_unit_test_setup(test_invalid_frequency_converts_to_zero, setup),
      cmocka_unit_test_setup(test_init_reads_frequency_and_masks_timer, setup),
      cmocka_unit_test_setup(test_init_rejects_zero_frequency_and_non_ppi, setup),
      cmocka_unit_test_setup(test_arm_at_writes_cval_before_enabling, setup),
      cmocka_unit_test_setup(test_arm_after_ns_adds_ticks_to_now, setup),
      cmocka_unit_test_setup(test_fired_follows_counter_and_disarm_drops_it, setup),
      cmocka_unit_test_setup(test_now_reads_counter_and_converts, setup),
  };
  return cmocka_run_group_tests_name("hal_timer", tests, nullptr, nullptr);
}
