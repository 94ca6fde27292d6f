// Host unit tests of device power states through PowerManager: host D3hot
// and D0 requests, autosuspend after idle and transparent wake on the next
// request, requests that race a transition, failed quiesce, residency and
// the power drop in D3hot.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include "vtrn/power.h"

using namespace vtrn::power;

namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kS = 1000000000;

// Records the hook calls; optionally completes them synchronously, as a
// firmware with nothing in flight would.
struct FakeHooks final : DeviceHooks {
  void start_quiesce() override {
    ++quiesces;
    if (sync && pm) assert_int_equal(pm->quiesce_done(*now, true), Status::kOk);
  }
  void start_resume() override {
    ++resumes;
    if (sync && pm) assert_int_equal(pm->resume_done(*now), Status::kOk);
  }
  PowerManager* pm = nullptr;
  uint64_t* now = nullptr;
  bool sync = false;
  int quiesces = 0;
  int resumes = 0;
};

struct Rig {
  PowerManager pm;
  FakeHooks hooks;
  uint64_t now = 0;
  explicit Rig(uint32_t autosuspend_ms = 0, bool sync = false) {
    PowerConfig c = dev_board_config(2, 0);
    c.autosuspend_delay_ms = autosuspend_ms;
    hooks.pm = &pm;
    hooks.now = &now;
    hooks.sync = sync;
    assert_true(pm.init(c, &hooks, 0).ok());
  }
  void advance(uint64_t d) {
    const uint64_t end = now + d;
    while (now < end) {
      now += 10 * kMs;
      pm.step(now);
    }
  }
  DeviceState state() const { return pm.device().state(); }
};

void test_host_d3hot_then_d0_runs_the_full_sequence(void**) {
  Rig r;
  assert_int_equal(r.pm.request_device_state(DeviceState::kD3hot, r.now), Status::kOk);
  assert_int_equal(r.state(), DeviceState::kQuiescing);
  assert_int_equal(r.hooks.quiesces, 1);
  assert_int_equal(r.pm.device().suspend_cause(), SuspendCause::kHostRequest);
  // Quiescing still runs kernels to their safe point at the current clock.
  assert_int_equal(r.pm.clock_budget().frequency_mhz, 1400);
  r.advance(50 * kMs);
  assert_int_equal(r.pm.quiesce_done(r.now, true), Status::kOk);
  assert_int_equal(r.state(), DeviceState::kD3hot);
  assert_int_equal(r.pm.clock_budget().frequency_mhz, 0);
  assert_int_equal(r.pm.clock_budget().duty_ppm, 0);
  r.advance(1 * kS);
  assert_int_equal(r.pm.request_device_state(DeviceState::kD0, r.now), Status::kOk);
  assert_int_equal(r.state(), DeviceState::kResuming);
  assert_int_equal(r.hooks.resumes, 1);
  r.advance(20 * kMs);
  assert_int_equal(r.pm.resume_done(r.now), Status::kOk);
  assert_int_equal(r.state(), DeviceState::kD0);
  assert_int_equal(r.pm.clock_budget().frequency_mhz, 1400);
  const DeviceStateMachine& d = r.pm.device();
  assert_int_equal(d.entries(DeviceState::kD3hot), 1);
  assert_int_equal(d.residency_ns(DeviceState::kD3hot, r.now), 1 * kS);
  assert_int_equal(d.residency_ns(DeviceState::kQuiescing, r.now), 50 * kMs);
  assert_int_equal(d.residency_ns(DeviceState::kResuming, r.now), 20 * kMs);
  assert_int_equal(d.residency_ns(DeviceState::kD0, r.now), r.now - 1070 * kMs);
}

void test_completions_in_the_wrong_state_are_rejected(void**) {
  Rig r;
  assert_int_equal(r.pm.quiesce_done(0, true), Status::kBadState);
  assert_int_equal(r.pm.resume_done(0), Status::kBadState);
  assert_int_equal(r.pm.request_device_state(DeviceState::kQuiescing, 0), Status::kOutOfRange);
  assert_int_equal(r.state(), DeviceState::kD0);
}

void test_autosuspend_after_idle_delay_and_wake_on_next_request(void**) {
  Rig r(500, true);
  r.pm.get(r.now);
  r.advance(2 * kS);  // busy: never suspends
  assert_int_equal(r.state(), DeviceState::kD0);
  r.pm.put(r.now);
  const uint64_t idle_from = r.now;
  r.advance(490 * kMs);
  assert_int_equal(r.state(), DeviceState::kD0);
  r.advance(10 * kMs);
  assert_int_equal(r.state(), DeviceState::kD3hot);
  assert_int_equal(r.now - idle_from, 500 * kMs);
  assert_int_equal(r.pm.device().autosuspends(), 1);
  assert_int_equal(r.hooks.quiesces, 1);
  r.advance(1 * kS);
  // The next request resumes transparently.
  r.pm.get(r.now);
  assert_int_equal(r.state(), DeviceState::kD0);
  assert_int_equal(r.hooks.resumes, 1);
  r.pm.put(r.now);
  r.advance(400 * kMs);
  assert_int_equal(r.state(), DeviceState::kD0);  // idle timer restarted at put
  r.advance(100 * kMs);
  assert_int_equal(r.state(), DeviceState::kD3hot);
  assert_int_equal(r.pm.device().autosuspends(), 2);
}

void test_request_during_autosuspend_quiesce_resumes_after_it(void**) {
  Rig r(100, false);
  r.advance(100 * kMs);
  assert_int_equal(r.state(), DeviceState::kQuiescing);
  r.pm.get(r.now);  // a job arrives while the firmware is quiescing
  assert_int_equal(r.state(), DeviceState::kQuiescing);
  assert_int_equal(r.pm.quiesce_done(r.now, true), Status::kOk);
  assert_int_equal(r.state(), DeviceState::kResuming);
  assert_int_equal(r.hooks.resumes, 1);
  assert_int_equal(r.pm.resume_done(r.now), Status::kOk);
  assert_int_equal(r.state(), DeviceState::kD0);
  assert_int_equal(r.pm.device().usage(), 1);
}

void test_work_queued_in_host_d3hot_waits_for_host_d0(void**) {
  Rig r(0, true);
  assert_int_equal(r.pm.request_device_state(DeviceState::kD3hot, r.now), Status::kOk);
  assert_int_equal(r.state(), DeviceState::kD3hot);
  r.pm.get(r.now);
  r.advance(1 * kS);
  assert_int_equal(r.state(), DeviceState::kD3hot);
  assert_int_equal(r.pm.device().usage(), 1);
  assert_int_equal(r.pm.request_device_state(DeviceState::kD0, r.now), Status::kOk);
  assert_int_equal(r.state(), DeviceState::kD0);
  assert_int_equal(r.pm.device().usage(), 1);
}

void test_failed_quiesce_returns_to_d0_and_is_counted(void**) {
  Rig r;
  assert_int_equal(r.pm.request_device_state(DeviceState::kD3hot, r.now), Status::kOk);
  assert_int_equal(r.pm.quiesce_done(r.now, false), Status::kOk);
  assert_int_equal(r.state(), DeviceState::kD0);
  assert_int_equal(r.pm.device().failed_suspends(), 1);
  assert_int_equal(r.pm.device().suspend_cause(), SuspendCause::kNone);
}

void test_d3_request_during_resume_suspends_again(void**) {
  Rig r;
  assert_int_equal(r.pm.request_device_state(DeviceState::kD3hot, r.now), Status::kOk);
  assert_int_equal(r.pm.quiesce_done(r.now, true), Status::kOk);
  assert_int_equal(r.pm.request_device_state(DeviceState::kD0, r.now), Status::kOk);
  assert_int_equal(r.pm.request_device_state(DeviceState::kD3hot, r.now), Status::kOk);
  assert_int_equal(r.state(), DeviceState::kResuming);
  assert_int_equal(r.pm.resume_done(r.now), Status::kOk);
  assert_int_equal(r.state(), DeviceState::kQuiescing);
  assert_int_equal(r.hooks.quiesces, 2);
}

void test_d3hot_draws_only_always_on_and_self_refresh_power(void**) {
  Rig r(0, true);
  for (uint32_t c = 0; c < 2; ++c) {
    assert_int_equal(r.pm.set_core_state(c, CoreState::kGated, r.now), Status::kOk);
  }
  r.advance(1 * kS);
  const uint32_t d0_mw = r.pm.power_mw();
  assert_int_equal(r.pm.request_device_state(DeviceState::kD3hot, r.now), Status::kOk);
  r.advance(1 * kS);
  const PowerModelConfig& m = r.pm.config().model;
  const uint32_t d3_mw = r.pm.power_mw();
  assert_true(d3_mw < d0_mw);
  // Always-on + HBM self refresh + the gated cores' residual leakage.
  const uint32_t floor_mw = m.d3hot_mw + m.hbm_stacks * m.hbm_self_refresh_mw;
  assert_true(d3_mw >= floor_mw);
  assert_true(d3_mw <= floor_mw + 200);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_d3hot_then_d0_runs_the_full_sequence),
      cmocka_unit_test(test_completions_in_the_wrong_state_are_rejected),
      cmocka_unit_test(test_autosuspend_after_idle_delay_and_wake_on_next_request),
      cmocka_unit_test(test_request_during_autosuspend_quiesce_resumes_after_it),
      cmocka_unit_test(test_work_queued_in_host_d3hot_waits_for_host_d0),
      cmocka_unit_test(test_failed_quiesce_returns_to_d0_and_is_counted),
      cmocka_unit_test(test_d3_request_during_resume_suspends_again),
      cmocka_unit_test(test_d3hot_draws_only_always_on_and_self_refresh_power),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
