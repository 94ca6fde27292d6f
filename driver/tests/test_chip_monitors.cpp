// Unit tests of the two pure parts Chip watches its firmware with, alone on
// a made-up clock: drv::HeartbeatWatchdog (heartbeat_watchdog.h) fires only
// after the counter stood still for the whole timeout, re-arms when it moves
// and never fires with the timeout off; its timeout follows the telemetry
// period within its floor and ceiling. drv::TelemetryHistory
// (telemetry_history.h) keeps the last two distinct blocks and gives the idle
// share between them, falling back to the share since boot.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include "vtrn/drv/heartbeat_watchdog.h"
#include "vtrn/drv/telemetry_history.h"

namespace {

constexpr uint64_t kMs = 1'000'000;

void test_watchdog_fires_only_after_the_whole_timeout_of_silence(void**) {
  drv::HeartbeatWatchdog w;
  w.rearm(7, 1000 * kMs);
  assert_false(w.expired(7, 1999 * kMs, 1000 * kMs));
  assert_int_equal(w.silent_ns(1999 * kMs), 999 * kMs);
  assert_true(w.expired(7, 2000 * kMs, 1000 * kMs));
  assert_int_equal(w.beat(), 7);
}

void test_watchdog_rearms_when_the_counter_moves(void**) {
  drv::HeartbeatWatchdog w;
  w.rearm(7, 0);
  assert_false(w.expired(8, 900 * kMs, 1000 * kMs));  // moved: counting from 900 ms
  assert_false(w.expired(8, 1800 * kMs, 1000 * kMs));
  assert_int_equal(w.silent_ns(1800 * kMs), 900 * kMs);
  assert_true(w.expired(8, 1900 * kMs, 1000 * kMs));
  // Any change counts, a counter that went backwards (a reboot) too.
  assert_false(w.expired(3, 5000 * kMs, 1000 * kMs));
  assert_int_equal(w.beat(), 3);
}

void test_watchdog_with_the_timeout_off_never_fires(void**) {
  drv::HeartbeatWatchdog w;
  w.rearm(1, 0);
  assert_false(w.expired(1, 3'600'000 * kMs, 0));
  assert_int_equal(w.silent_ns(3'600'000 * kMs), 3'600'000 * kMs);
  // A clock reading before the last beat is no silence at all.
  w.rearm(1, 10 * kMs);
  assert_int_equal(w.silent_ns(5 * kMs), 0);
}

void test_watchdog_timeout_follows_the_telemetry_period_within_its_bounds(void**) {
  using W = drv::HeartbeatWatchdog;
  assert_int_equal(W::timeout_ms(250, 1000, 10, 500), 250);     // fixed wins
  assert_int_equal(W::timeout_ms(0, 1000, 10, 500), 5000);      // 10 periods
  assert_int_equal(W::timeout_ms(0, 1000, 10, 50), 1000);       // the floor
  assert_int_equal(W::timeout_ms(0, 1000, 10, 0), 1000);        // no sample yet: 100 ms periods
  assert_int_equal(W::timeout_ms(0, 0, 10, 0), 1000);
  assert_int_equal(W::timeout_ms(0, 1000, 10, 10'000'000), 3'600'000);  // the ceiling
}

vtrn::hostif::Telemetry block(uint64_t uptime_ms, uint64_t idle_ms, uint32_t seq = 2) {
  vtrn::hostif::Telemetry t{};
  t.uptime_ns = uptime_ms * kMs;
  t.idle_ns = idle_ms * kMs;
  t.seq = seq;
  return t;
}

void test_history_idle_ratio_is_between_the_last_two_distinct_blocks(void**) {
  drv::TelemetryHistory h;
  assert_true(h.empty());
  h.add(block(1000, 900));
  assert_false(h.empty());
  // One block: the share since boot.
  assert_float_equal(h.idle_ratio(h.last()), 0.9, 1e-12);
  h.add(block(1100, 925));
  assert_float_equal(h.idle_ratio(h.last()), 0.25, 1e-12);
  // The same block read again is not a new one: the pair stays.
  h.add(block(1100, 925));
  assert_float_equal(h.idle_ratio(h.last()), 0.25, 1e-12);
  h.add(block(1300, 1125));
  assert_float_equal(h.idle_ratio(h.last()), 1.0, 1e-12);
  assert_int_equal(h.last().uptime_ns, 1300 * kMs);
}

void test_history_falls_back_to_the_share_since_boot_and_clamps(void**) {
  drv::TelemetryHistory h;
  h.add(block(1000, 500));
  h.add(block(2000, 400));  // idle went backwards: no pair ratio
  assert_float_equal(h.idle_ratio(h.last()), 0.2, 1e-12);
  h.clear();
  assert_true(h.empty());
  assert_float_equal(h.idle_ratio(block(0, 0)), 0.0, 1e-12);
  assert_float_equal(h.idle_ratio(block(100, 150)), 1.0, 1e-12);  // a lying block is clamped
  h.add(block(100, 50));
  h.add(block(200, 300));  // idle grew more than uptime
  assert_float_equal(h.idle_ratio(h.last()), 1.0, 1e-12);
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_watchdog_fires_only_after_the_whole_timeout_of_silence),
      cmocka_unit_test(test_watchdog_rearms_when_the_counter_moves),
      cmocka_unit_test(test_watchdog_with_the_timeout_off_never_fires),
      cmocka_unit_test(test_watchdog_timeout_follows_the_telemetry_period_within_its_bounds),
      cmocka_unit_test(test_history_idle_ratio_is_between_the_last_two_distinct_blocks),
      cmocka_unit_test(test_history_falls_back_to_the_share_since_boot_and_clamps),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
