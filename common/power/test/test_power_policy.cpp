// Host unit tests of the DVFS policies on the whole PowerManager with a
// simulated clock: sustained load throttles and releases with hysteresis,
// the critical temperature forces the lowest point, a power cap holds on
// average (also with a model that is wrong), the host limit binds, and the
// clock budget follows the point.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <vector>

#include "vtrn/power.h"

using namespace vtrn::power;

namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kS = 1000000000;
constexpr uint64_t kTick = 10 * kMs;

struct Sample {
  uint64_t t_ns;
  int32_t die_mc;
  uint32_t pstate;
  uint64_t reasons;
};

void load(PowerManager& pm, CoreState s, uint64_t now) {
  for (uint32_t c = 0; c < pm.config().core_count; ++c) {
    assert_int_equal(pm.set_core_state(c, s, now), Status::kOk);
  }
}

void run(PowerManager& pm, uint64_t* now, uint64_t duration, std::vector<Sample>* trace) {
  const uint64_t end = *now + duration;
  while (*now < end) {
    *now += kTick;
    pm.step(*now);
    if (trace) trace->push_back({*now, pm.temperature_mc(0), pm.pstate(), pm.clock_event_reasons()});
  }
}

void test_sustained_load_throttles_then_releases_with_hysteresis(void**) {
  const PowerConfig cfg = dev_board_config(2, 0);
  const ThermalZoneConfig& die = cfg.zones[0];
  PowerManager pm;
  assert_true(pm.init(cfg, nullptr, 0).ok());
  uint64_t now = 0;
  std::vector<Sample> trace;
  load(pm, CoreState::kRunning, now);
  run(pm, &now, 60 * kS, &trace);
  const size_t load_end = trace.size();
  load(pm, CoreState::kIdle, now);
  run(pm, &now, 60 * kS, &trace);

  int32_t peak = 0;
  for (size_t i = 0; i < load_end; ++i) peak = trace[i].die_mc > peak ? trace[i].die_mc : peak;
  assert_true(peak >= die.throttle_mc);  // the trace crosses the throttle point
  assert_true(peak < die.critical_mc);
  assert_false(pm.governor().critical());

  size_t downs = 0, ups = 0;
  uint64_t last_change = 0;
  int32_t min_since_down = INT32_MAX;
  uint32_t prev = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const Sample& s = trace[i];
    if (s.die_mc < min_since_down) min_since_down = s.die_mc;
    if (s.pstate > prev) {
      ++downs;
      // Down only while at or above the throttle point.
      assert_true(s.die_mc >= die.throttle_mc);
      assert_true(s.reasons & kReasonSwThermalSlowdown);
      min_since_down = s.die_mc;
    } else if (s.pstate < prev) {
      ++ups;
      // Up only after falling below throttle - hysteresis since the last
      // step down: no oscillation faster than the band allows.
      assert_true(s.die_mc < die.throttle_mc - die.hysteresis_mc);
      assert_true(min_since_down < die.throttle_mc - die.hysteresis_mc);
    }
    if (s.pstate != prev) {
      assert_true(last_change == 0 || s.t_ns - last_change >= cfg.governor_interval_ms * kMs);
      last_change = s.t_ns;
    }
    prev = s.pstate;
  }
  assert_true(downs >= 1);
  assert_true(ups >= 1);
  // Once the load dropped, the point came back all the way and the
  // thermal reason cleared.
  assert_int_equal(pm.pstate(), 0);
  assert_int_equal(pm.clock_event_reasons() & kReasonSwThermalSlowdown, 0);
  assert_true(pm.temperature_mc(0) < die.throttle_mc - die.hysteresis_mc);
  PowerTelemetry t;
  pm.snapshot(&t);
  assert_true(t.thermal_throttle_ns > 0);
  assert_true(t.zones[0].max_temperature_mc >= die.throttle_mc);
  assert_int_equal(t.pstate_changes, downs + ups);
}

void test_critical_temperature_forces_lowest_point_and_flags(void**) {
  PowerConfig cfg = dev_board_config(2, 0);
  cfg.zones[0].resistance_mc_per_w = 3000;  // steady state far above critical
  cfg.zones[0].capacitance_mj_per_c = 100;  // tau = 0.3 s
  PowerManager pm;
  assert_true(pm.init(cfg, nullptr, 0).ok());
  uint64_t now = 0;
  load(pm, CoreState::kRunning, now);
  bool hit = false;
  for (int i = 0; i < 1000 && !hit; ++i) {
    run(pm, &now, kTick, nullptr);
    hit = pm.governor().critical();
  }
  assert_true(hit);
  assert_true(pm.temperature_mc(0) >= cfg.zones[0].critical_mc);
  assert_int_equal(pm.pstate(), cfg.opp_count - 1);
  const uint64_t want = kReasonHwThermalSlowdown | kReasonHwSlowdown;
  assert_int_equal(pm.clock_event_reasons() & want, want);
  assert_int_equal(pm.governor().critical_events(), 1);
  // Cooling releases the emergency below critical - hysteresis.
  load(pm, CoreState::kGated, now);
  run(pm, &now, 10 * kS, nullptr);
  assert_false(pm.governor().critical());
  assert_int_equal(pm.clock_event_reasons() & kReasonHwThermalSlowdown, 0);
  assert_int_equal(pm.pstate(), 0);
  assert_int_equal(pm.governor().critical_events(), 1);
}

uint64_t average_mw(uint64_t e0_uj, uint64_t e1_uj, uint64_t dt_ns) {
  return (e1_uj - e0_uj) * 1000000 / dt_ns;  // uJ/ns = 1e6 mW
}

void test_power_cap_is_respected_on_average_and_raising_it_raises_the_point(void**) {
  PowerConfig cfg = dev_board_config(2, 0);
  cfg.zones[0].resistance_mc_per_w = 500;  // keep thermal out of the way
  PowerManager pm;
  assert_true(pm.init(cfg, nullptr, 0).ok());
  uint64_t now = 0;
  load(pm, CoreState::kRunning, now);
  run(pm, &now, 2 * kS, nullptr);
  const uint32_t uncapped_mw = pm.power_mw();
  assert_true(uncapped_mw > 55000);

  assert_int_equal(pm.set_power_cap_mw(40000, now), Status::kOk);
  run(pm, &now, 10 * kS, nullptr);  // settle
  uint64_t e0 = pm.energy_uj(), t0 = now;
  run(pm, &now, 20 * kS, nullptr);
  const uint64_t avg40 = average_mw(e0, pm.energy_uj(), now - t0);
  assert_true(avg40 <= 40000 * 102 / 100);
  assert_true(avg40 > 20000);  // not simply parked at the lowest point
  const uint32_t p40 = pm.pstate();
  assert_true(p40 > 0);
  assert_true(pm.clock_event_reasons() & kReasonSwPowerCap);

  assert_int_equal(pm.set_power_cap_mw(52000, now), Status::kOk);
  run(pm, &now, 10 * kS, nullptr);
  e0 = pm.energy_uj();
  t0 = now;
  run(pm, &now, 20 * kS, nullptr);
  const uint64_t avg52 = average_mw(e0, pm.energy_uj(), now - t0);
  assert_true(avg52 <= 52000 * 102 / 100);
  assert_true(pm.pstate() < p40);
  assert_true(avg52 > avg40);

  assert_int_equal(pm.set_power_cap_mw(0, now), Status::kOk);
  run(pm, &now, 1 * kS, nullptr);
  assert_int_equal(pm.pstate(), 0);
  assert_int_equal(pm.clock_event_reasons() & kReasonSwPowerCap, 0);
}

// The governor alone against a plant whose real power is 25% above the
// model plus 3 W the model does not know about: the correction must learn
// the error, and the settled point must be the fastest one that really fits.
void test_power_cap_loop_corrects_model_error(void**) {
  PowerConfig cfg = dev_board_config(2, 0);
  Governor g;
  g.init(cfg);
  const uint64_t predicted[] = {60000, 48000, 38000, 30000, 23000, 17000};
  auto real = [&](uint32_t p) { return predicted[p] * 125 / 100 + 3000; };
  constexpr uint32_t kCap = 45000;
  assert_int_equal(g.set_power_cap_mw(kCap), Status::kOk);
  uint64_t sum = 0;
  uint32_t settled = 0;
  for (int i = 0; i < 200; ++i) {
    GovernorInput in;
    in.temperature_mc[0] = 40000;
    in.temperature_mc[1] = 40000;
    for (uint32_t p = 0; p < 6; ++p) in.predicted_mw[p] = predicted[p];
    in.measured_mw = real(g.pstate());
    g.evaluate(in);
    if (i >= 100) {
      sum += real(g.pstate());
      ++settled;
    }
  }
  // real(): 78000, 63000, 50500, 40500, 31750, 24250 -> pstate 3 fits.
  assert_int_equal(g.pstate(), 3);
  assert_true(sum / settled <= kCap);
  assert_true(g.cap_correction_mw() > 5000);
  assert_true(g.reasons() & kReasonSwPowerCap);
}

// A load whose power rises above the model under the cap: the very next
// evaluation takes the whole error into account and steps down (fast
// attack); a lighter window afterwards releases the correction at gain 1/4.
void test_power_cap_reacts_to_a_rising_load_at_once(void**) {
  PowerConfig cfg = dev_board_config(2, 0);
  Governor g;
  g.init(cfg);
  const uint64_t predicted[] = {60000, 48000, 38000, 30000, 23000, 17000};
  constexpr uint32_t kCap = 45000;
  assert_int_equal(g.set_power_cap_mw(kCap), Status::kOk);
  GovernorInput in;
  in.temperature_mc[0] = in.temperature_mc[1] = 40000;
  for (uint32_t p = 0; p < 6; ++p) in.predicted_mw[p] = predicted[p];
  for (int i = 0; i < 20; ++i) {  // the model is right: pstate 2 (38 W) fits
    in.measured_mw = predicted[g.pstate()];
    g.evaluate(in);
  }
  assert_int_equal(g.pstate(), 2);
  in.measured_mw = predicted[2] + 9000;  // 47 W at pstate 2: over the cap
  g.evaluate(in);
  assert_int_equal(g.pstate(), 3);  // 30 + 9 = 39 W fits; 38 + 9 does not
  assert_int_equal(g.cap_correction_mw(), 9000);
  in.measured_mw = predicted[3];  // the extra load goes away: released at gain 1/4
  g.evaluate(in);
  assert_int_equal(g.cap_correction_mw(), 9000 - 9000 / 4);
  assert_int_equal(g.pstate(), 2);  // 38 + 6.75 = 44.75 W fits again
}

void test_host_pstate_limit_binds_immediately_and_is_range_checked(void**) {
  const PowerConfig cfg = dev_board_config(2, 0);
  PowerManager pm;
  assert_true(pm.init(cfg, nullptr, 0).ok());
  assert_int_equal(pm.set_pstate_limit(3, 0), Status::kOk);
  assert_int_equal(pm.pstate(), 3);
  assert_int_equal(pm.operating_point().frequency_mhz, 800);
  assert_true(pm.clock_event_reasons() & kReasonHostRequest);
  assert_int_equal(pm.set_pstate_limit(cfg.opp_count, 0), Status::kOutOfRange);
  assert_int_equal(pm.pstate(), 3);
  uint64_t now = 0;
  run(pm, &now, 1 * kS, nullptr);
  PowerTelemetry t;
  pm.snapshot(&t);
  assert_int_equal(t.pstate_limit, 3);
  assert_int_equal(t.host_limit_ns, 1 * kS);
  assert_int_equal(pm.set_pstate_limit(0, now), Status::kOk);
  assert_int_equal(pm.pstate(), 0);
  assert_int_equal(pm.clock_event_reasons() & kReasonHostRequest, 0);
}

void test_clock_budget_scales_with_the_operating_point(void**) {
  PowerManager pm;
  assert_true(pm.init(dev_board_config(2, 0), nullptr, 0).ok());
  ClockBudget b = pm.clock_budget();
  assert_int_equal(b.frequency_mhz, 1400);
  assert_int_equal(b.duty_ppm, 1000000);
  assert_int_equal(b.cycles_per_tick(1 * kMs), 1400000);
  assert_int_equal(b.run_ns_per_tick(1 * kMs), 1 * kMs);
  assert_int_equal(pm.set_pstate_limit(5, 0), Status::kOk);
  b = pm.clock_budget();
  assert_int_equal(b.frequency_mhz, 400);
  assert_int_equal(b.duty_ppm, 285714);
  assert_int_equal(b.cycles_per_tick(1 * kMs), 400000);
  assert_int_equal(b.run_ns_per_tick(1 * kMs), 285714);
  assert_int_equal(b.run_ns_per_tick(10 * kS), 2857140000ull);
}

void test_idle_reason_reported_when_no_core_ran(void**) {
  PowerManager pm;
  assert_true(pm.init(dev_board_config(2, 0), nullptr, 0).ok());
  uint64_t now = 0;
  run(pm, &now, 200 * kMs, nullptr);
  assert_true(pm.clock_event_reasons() & kReasonIdle);
  assert_int_equal(pm.set_core_state(1, CoreState::kRunning, now), Status::kOk);
  run(pm, &now, 200 * kMs, nullptr);
  assert_int_equal(pm.clock_event_reasons() & kReasonIdle, 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sustained_load_throttles_then_releases_with_hysteresis),
      cmocka_unit_test(test_critical_temperature_forces_lowest_point_and_flags),
      cmocka_unit_test(test_power_cap_is_respected_on_average_and_raising_it_raises_the_point),
      cmocka_unit_test(test_power_cap_loop_corrects_model_error),
      cmocka_unit_test(test_power_cap_reacts_to_a_rising_load_at_once),
      cmocka_unit_test(test_host_pstate_limit_binds_immediately_and_is_range_checked),
      cmocka_unit_test(test_clock_budget_scales_with_the_operating_point),
      cmocka_unit_test(test_idle_reason_reported_when_no_core_ran),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
