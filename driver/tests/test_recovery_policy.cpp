// Unit tests of drv::RecoveryPolicy (recovery_policy.h) alone, on a made-up
// clock: the first automatic reset goes at once, later ones inside the
// window back off 250 ms doubling to 4 s, one more than the limit gives up,
// resets that age out of the window stop counting, and an operator's reset
// starts the window over.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include "vtrn/drv/recovery_policy.h"

namespace {

constexpr uint64_t kMs = 1'000'000;

void test_first_reset_goes_at_once_and_later_ones_back_off_doubling(void**) {
  drv::RecoveryPolicy p(3, 60'000);
  p.record(1000 * kMs);
  assert_false(p.exhausted());
  assert_int_equal(p.backoff_ns(), 0);
  p.record(2000 * kMs);
  assert_int_equal(p.backoff_ns(), 250 * kMs);
  p.record(3000 * kMs);
  assert_int_equal(p.backoff_ns(), 500 * kMs);
  assert_false(p.exhausted());
  assert_int_equal(p.recent(), 3);
}

void test_one_reset_more_than_the_limit_inside_the_window_gives_up(void**) {
  drv::RecoveryPolicy p(3, 60'000);
  for (uint64_t i = 0; i < 3; ++i) p.record((1 + i) * 1000 * kMs);
  assert_false(p.exhausted());
  p.record(59'000 * kMs);
  assert_true(p.exhausted());
  assert_int_equal(p.recent(), 4);
}

void test_resets_older_than_the_window_stop_counting(void**) {
  drv::RecoveryPolicy p(2, 10'000);
  p.record(0);
  p.record(5'000 * kMs);
  p.record(10'000 * kMs);  // the first is exactly a window old: still in
  assert_true(p.exhausted());
  drv::RecoveryPolicy q(2, 10'000);
  q.record(0);
  q.record(5'000 * kMs);
  q.record(10'001 * kMs);  // the first has aged out
  assert_false(q.exhausted());
  assert_int_equal(q.recent(), 2);
  assert_int_equal(q.backoff_ns(), 250 * kMs);
}

void test_backoff_stops_growing_at_four_seconds(void**) {
  drv::RecoveryPolicy p(100, 600'000);
  for (uint64_t i = 0; i < 7; ++i) p.record(i * kMs);
  assert_int_equal(p.backoff_ns(), 4000 * kMs);  // 250 << 5 = 8000 ms, capped
  for (uint64_t i = 7; i < 40; ++i) p.record(i * kMs);
  assert_int_equal(p.backoff_ns(), 4000 * kMs);
}

void test_operator_reset_starts_a_fresh_window(void**) {
  drv::RecoveryPolicy p(1, 60'000);
  p.record(0);
  p.record(kMs);
  assert_true(p.exhausted());
  p.restart();
  assert_false(p.exhausted());
  assert_int_equal(p.recent(), 0);
  assert_int_equal(p.backoff_ns(), 0);
  p.record(2 * kMs);
  assert_false(p.exhausted());
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first_reset_goes_at_once_and_later_ones_back_off_doubling),
      cmocka_unit_test(test_one_reset_more_than_the_limit_inside_the_window_gives_up),
      cmocka_unit_test(test_resets_older_than_the_window_stop_counting),
      cmocka_unit_test(test_backoff_stops_growing_at_four_seconds),
      cmocka_unit_test(test_operator_reset_starts_a_fresh_window),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
