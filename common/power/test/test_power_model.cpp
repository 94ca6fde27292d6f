// Host unit tests of the power model arithmetic: the fixed-point exp against
// libm, the core/uncore/HBM/link formulas against hand-computed values, and
// energy accounting (exact integral of power, monotonic counters).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <cmath>
#include <cstdlib>

#include "vtrn/power.h"

using namespace vtrn::power;

namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kS = 1000000000;

void test_exp_q30_matches_libm_over_the_supported_range(void**) {
  for (double x = -30.0; x <= 8.0; x += 0.0137) {
    const int64_t xq = static_cast<int64_t>(std::llround(x * 1073741824.0));
    const double exact = std::exp(static_cast<double>(xq) / 1073741824.0) * 1073741824.0;
    const double got = static_cast<double>(exp_q30(xq));
    const double tol = exact * 4e-9 + 2.0;
    if (std::fabs(got - exact) > tol) fail_msg("exp(%f): got %f want %f", x, got, exact);
  }
  assert_int_equal(exp_q30(0), kOneQ30);
  assert_int_equal(exp_q30(-45ll << 30), 0);
}

void test_exp_neg_ratio_is_exact_at_limits_and_never_overflows(void**) {
  assert_int_equal(exp_neg_ratio_q30(0, 123), kOneQ30);
  assert_int_equal(exp_neg_ratio_q30(1000ull * kS, 1), 0);
  assert_int_equal(exp_neg_ratio_q30(5, 0), 0);
  // A denominator above 2^34 (a 100 s time constant in ns) and a huge numerator.
  const uint64_t tau = 100 * kS;
  const double want = std::exp(-0.37) * 1073741824.0;
  const double got = static_cast<double>(exp_neg_ratio_q30(37 * kS, tau));
  assert_true(std::fabs(got - want) < 8.0);
  const double want2 = std::exp(-30.5) * 1073741824.0;
  assert_true(std::fabs(static_cast<double>(exp_neg_ratio_q30(61ull * kS * 50, tau)) - want2) < 2.0);
}

void test_exp2_ratio_doubles_per_unit_and_clamps(void**) {
  assert_int_equal(exp2_ratio_q30(0, 25000), kOneQ30);
  assert_true(llabs(static_cast<long long>(exp2_ratio_q30(25000, 25000)) - (2ll << 30)) < 8);
  assert_true(llabs(static_cast<long long>(exp2_ratio_q30(-50000, 25000)) - (1ll << 28)) < 8);
  const double want = std::pow(2.0, 0.3) * 1073741824.0;
  assert_true(std::fabs(static_cast<double>(exp2_ratio_q30(3, 10)) - want) < 8.0);
  assert_int_equal(exp2_ratio_q30(1000000, 1), kOneQ30 << 5);
  assert_int_equal(exp2_ratio_q30(-1000000, 1), kOneQ30 >> 20);
}

void test_core_dynamic_power_is_ceff_v_squared_f(void**) {
  PowerModelConfig m;
  m.core_ceff_pf = 20000;
  // 20 nF * 0.81 V^2 * 1.4 GHz = 22.68 W.
  assert_int_equal(core_dynamic_uw(m, OperatingPoint{1400, 900}), 22680000);
  // 20 nF * 0.4225 V^2 * 0.4 GHz = 3.38 W.
  assert_int_equal(core_dynamic_uw(m, OperatingPoint{400, 650}), 3380000);
}

void test_leakage_grows_linearly_with_voltage_and_doubles_per_interval(void**) {
  PowerModelConfig m;  // 3000 mW at 900 mV and 85 C, doubling every 25 C
  assert_int_equal(core_leakage_uw(m, 900, 85000), 3000000);
  assert_true(llabs(static_cast<long long>(core_leakage_uw(m, 900, 110000)) - 6000000) <= 2);
  assert_true(llabs(static_cast<long long>(core_leakage_uw(m, 900, 35000)) - 750000) <= 2);
  assert_int_equal(core_leakage_uw(m, 450, 85000), 1500000);
  assert_true(core_leakage_uw(m, 900, 86000) > core_leakage_uw(m, 900, 85000));
}

void test_core_state_rates_follow_the_documented_formulas(void**) {
  PowerModelConfig m;
  const OperatingPoint op{1400, 900};
  const CoreRates r = core_rates(m, op, 85000, 500);
  assert_int_equal(r.running_uw, 22680000 / 2 + 3000000);
  assert_int_equal(r.idle_uw, 22680000 * 30 / 1000 + 3000000);
  assert_int_equal(r.gated_uw, 3000000 * 20 / 1000);
  assert_int_equal(uncore_uw(m, false), 8000000);
  assert_int_equal(uncore_uw(m, true), 500000);
  assert_int_equal(hbm_background_uw(m, false), 3000000);
  assert_int_equal(hbm_background_uw(m, true), 300000);
  assert_int_equal(link_uw(m, LinkPowerState::kL0), 1200000);
  assert_int_equal(link_uw(m, LinkPowerState::kL0s), 600000);
  assert_int_equal(link_uw(m, LinkPowerState::kL1), 100000);
  assert_int_equal(link_uw(m, LinkPowerState::kDown), 0);
}

void test_energy_accumulator_splits_are_exact(void**) {
  EnergyAccumulator many, one;
  for (int i = 0; i < 1000; ++i) many.add_power(3, 333333333);
  one.add_power(3, 333333333000ull);
  assert_int_equal(many.microjoules(), one.microjoules());
  assert_int_equal(many.femtojoules_remainder(), one.femtojoules_remainder());
  assert_int_equal(one.microjoules(), 999);  // 3 uW * 333.333333 s
  // 100 W for an hour in one call: no overflow.
  EnergyAccumulator big;
  big.add_power(100000000, 3600 * kS);
  assert_int_equal(big.microjoules(), 360000000000ull);
}

// One operating point, no leakage, no WFI clock power: a running core at
// 1000 MHz / 800 mV with 10 nF draws exactly 6400 mW, uncore 1000 mW, two
// HBM stacks 500 mW each, the gated core nothing. 8400 mW for 10 s is
// 84 J = 84,000,000 uJ.
PowerConfig constant_power_config() {
  PowerConfig c = dev_board_config(2, 0);
  c.opp_count = 1;
  c.opps[0] = OperatingPoint{1000, 800};
  c.model.core_ceff_pf = 10000;
  c.model.core_leakage_mw = 0;
  c.model.core_wfi_dynamic_permille = 0;
  c.model.uncore_mw = 1000;
  c.model.hbm_stacks = 2;
  c.model.hbm_background_mw = 500;
  return c;
}

void test_energy_equals_hand_computed_integral_of_constant_power(void**) {
  PowerManager pm;
  assert_true(pm.init(constant_power_config(), nullptr, 5 * kS).ok());
  assert_int_equal(pm.set_core_state(0, CoreState::kRunning, 5 * kS), Status::kOk);
  assert_int_equal(pm.set_core_state(1, CoreState::kGated, 5 * kS), Status::kOk);
  // Irregular steps that add up to exactly 10 s.
  const uint64_t steps[] = {1, 999, 7 * kMs, 333 * kMs, 1 * kS, 2500 * kMs - 1000, 6160 * kMs};
  uint64_t now = 5 * kS;
  uint64_t last = 0;
  for (uint64_t d : steps) {
    now += d;
    pm.step(now);
    assert_true(pm.energy_uj() >= last);
    last = pm.energy_uj();
  }
  assert_int_equal(now, 15 * kS);
  assert_int_equal(pm.energy_uj(), 84000000);
  PowerTelemetry t;
  pm.snapshot(&t);
  assert_int_equal(t.cores[0].energy_uj, 64000000);
  assert_int_equal(t.cores[1].energy_uj, 0);
  assert_int_equal(t.uncore_energy_uj, 10000000);
  assert_int_equal(t.hbm_energy_uj, 10000000);
  assert_int_equal(t.power_mw, 8400);
}

void test_state_change_between_steps_is_charged_at_the_old_rate(void**) {
  PowerManager pm;
  assert_true(pm.init(constant_power_config(), nullptr, 0).ok());
  assert_int_equal(pm.set_core_state(0, CoreState::kRunning, 0), Status::kOk);
  // Running 250 ms, then gated 750 ms, one step at the end.
  assert_int_equal(pm.set_core_state(0, CoreState::kGated, 250 * kMs), Status::kOk);
  pm.step(1 * kS);
  PowerTelemetry t;
  pm.snapshot(&t);
  assert_int_equal(t.cores[0].energy_uj, 1600000);  // 6.4 W * 0.25 s
  assert_int_equal(t.cores[0].running_ns, 250 * kMs);
  assert_int_equal(t.cores[0].utilization_permille, 250);
  assert_int_equal(t.energy_uj, 1600000 + 2000000);
}

void test_hbm_and_link_traffic_add_transfer_energy(void**) {
  PowerConfig c = constant_power_config();
  c.port_count = 1;
  PowerManager pm;
  assert_true(pm.init(c, nullptr, 0).ok());
  pm.add_hbm_bytes(1000000);  // 30 pJ/B -> 30 uJ
  assert_int_equal(pm.add_link_bytes(0, 2000000), Status::kOk);  // 40 pJ/B -> 80 uJ
  assert_int_equal(pm.add_link_bytes(1, 1), Status::kOutOfRange);
  pm.step(0);
  PowerTelemetry t;
  pm.snapshot(&t);
  assert_int_equal(t.hbm_energy_uj, 30);
  assert_int_equal(t.link_energy_uj, 80);
  assert_int_equal(t.links[0].energy_uj, 80);
  assert_int_equal(t.energy_uj, 110);
}

void test_validate_names_the_offending_field(void**) {
  PowerConfig c = dev_board_config(2, 4);
  assert_true(validate(c).ok());
  c.opps[2].voltage_mv = 950;  // higher than the faster point's 850
  ConfigError e = validate(c);
  assert_int_equal(e.status, Status::kBadConfig);
  assert_string_equal(e.field, "opps.voltage_mv");
  assert_int_equal(e.index, 2);
  c = dev_board_config(2, 4);
  c.zones[1].critical_mc = c.zones[1].throttle_mc;
  e = validate(c);
  assert_string_equal(e.field, "zones.critical_mc");
  assert_int_equal(e.index, 1);
  // A deeper link power state may not draw more than a shallower one.
  c = dev_board_config(2, 4);
  c.model.link_l0s_mw = c.model.link_l0_mw + 1;
  assert_string_equal(validate(c).field, "model.link_l0s_mw");
  c = dev_board_config(2, 4);
  c.model.link_l1_mw = c.model.link_l0s_mw + 1;
  assert_string_equal(validate(c).field, "model.link_l1_mw");
  c.model.link_l1_mw = c.model.link_l0s_mw;
  assert_true(validate(c).ok());
  c = dev_board_config(0, 4);
  assert_string_equal(validate(c).field, "core_count");
  PowerManager pm;
  assert_false(pm.init(c, nullptr, 0).ok());
  assert_int_equal(pm.set_core_state(0, CoreState::kRunning, 0), Status::kNotInitialized);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exp_q30_matches_libm_over_the_supported_range),
      cmocka_unit_test(test_exp_neg_ratio_is_exact_at_limits_and_never_overflows),
      cmocka_unit_test(test_exp2_ratio_doubles_per_unit_and_clamps),
      cmocka_unit_test(test_core_dynamic_power_is_ceff_v_squared_f),
      cmocka_unit_test(test_leakage_grows_linearly_with_voltage_and_doubles_per_interval),
      cmocka_unit_test(test_core_state_rates_follow_the_documented_formulas),
      cmocka_unit_test(test_energy_accumulator_splits_are_exact),
      cmocka_unit_test(test_energy_equals_hand_computed_integral_of_constant_power),
      cmocka_unit_test(test_state_change_between_steps_is_charged_at_the_old_rate),
      cmocka_unit_test(test_hbm_and_link_traffic_add_transfer_energy),
      cmocka_unit_test(test_validate_names_the_offending_field),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
