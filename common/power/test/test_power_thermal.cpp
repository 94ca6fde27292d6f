// Host unit tests of the RC thermal zone: it follows the analytic solution of
// a power step for any step size, and large steps neither overshoot nor
// diverge (where explicit Euler would).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <cmath>

#include "vtrn/thermal.h"

using namespace vtrn::power;

namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kS = 1000000000;

// R = 0.8 K/W, C = 5 J/K: tau = 4 s. 50 W from 35 C: steady state 75 C.
ThermalZoneConfig zone_config() {
  ThermalZoneConfig z;
  z.ambient_mc = 35000;
  z.resistance_mc_per_w = 800;
  z.capacitance_mj_per_c = 5000;
  return z;
}

double analytic_mc(double t0_mc, double ss_mc, double t_s, double tau_s) {
  return ss_mc + (t0_mc - ss_mc) * std::exp(-t_s / tau_s);
}

void check_against_analytic(uint64_t step_ns, int32_t start_mc, uint64_t power_mw) {
  ThermalZone z;
  z.init(zone_config());
  z.set_temperature_mc(start_mc);
  assert_int_equal(z.tau_ns(), 4 * kS);
  const double ss = 35000.0 + power_mw * 0.8;
  const uint64_t checkpoints[] = {1 * kS, 2 * kS, 4 * kS, 8 * kS, 20 * kS, 40 * kS};
  uint64_t t = 0;
  for (uint64_t cp : checkpoints) {
    while (t < cp) {
      const uint64_t d = (cp - t) < step_ns ? (cp - t) : step_ns;
      z.step(power_mw, d);
      t += d;
    }
    const double want = analytic_mc(start_mc, ss, static_cast<double>(t) / kS, 4.0);
    const double got = z.temperature_mc();
    if (std::fabs(got - want) > 2.0) {
      fail_msg("step %llu ns, t=%llu ns: got %.0f mC, analytic %.1f mC",
               static_cast<unsigned long long>(step_ns), static_cast<unsigned long long>(t), got,
               want);
    }
  }
}

void test_heating_step_matches_analytic_solution_for_any_step_size(void**) {
  const uint64_t steps[] = {1 * kMs, 10 * kMs, 100 * kMs, 1 * kS, 3 * kS, 7 * kS};
  for (uint64_t s : steps) check_against_analytic(s, 35000, 50000);
}

void test_cooling_step_matches_analytic_solution(void**) {
  const uint64_t steps[] = {1 * kMs, 250 * kMs, 5 * kS};
  for (uint64_t s : steps) check_against_analytic(s, 100000, 0);
}

void test_huge_step_lands_on_steady_state_without_overshoot(void**) {
  ThermalZone z;
  z.init(zone_config());
  z.step(50000, 1000 * kS);
  assert_int_equal(z.temperature_mc(), 75000);
  assert_int_equal(z.steady_state_mc(50000), 75000);
  // Steps of 3 tau: explicit Euler would swing past the steady state and
  // diverge (dt > 2 RC); the exact solution approaches it monotonically.
  z.init(zone_config());
  int32_t prev = z.temperature_mc();
  for (int i = 0; i < 10; ++i) {
    z.step(50000, 12 * kS);
    const int32_t t = z.temperature_mc();
    assert_true(t >= prev);
    assert_true(t <= 75000);
    prev = t;
  }
  assert_int_equal(prev, 75000);
  assert_int_equal(z.max_temperature_mc(), 75000);
}

void test_zero_step_changes_nothing(void**) {
  ThermalZone z;
  z.init(zone_config());
  z.step(50000, 0);
  assert_int_equal(z.temperature_mc(), 35000);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_heating_step_matches_analytic_solution_for_any_step_size),
      cmocka_unit_test(test_cooling_step_matches_analytic_solution),
      cmocka_unit_test(test_huge_step_lands_on_steady_state_without_overshoot),
      cmocka_unit_test(test_zero_step_changes_nothing),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
