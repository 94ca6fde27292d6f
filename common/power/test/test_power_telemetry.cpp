// Host unit tests of the telemetry snapshot: every field has the unit and
// range its name promises and agrees with the others. The seqlock it is
// published under is tested with it in common/hostif/test/test_seqlock.cpp.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include "vtrn/power.h"

using namespace vtrn::power;

namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kS = 1000000000;

uint64_t diff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

void test_snapshot_fields_have_their_units_and_ranges(void**) {
  const PowerConfig cfg = dev_board_config(2, 4);
  PowerManager pm;
  const uint64_t start = 3 * kS;
  assert_true(pm.init(cfg, nullptr, start).ok());
  uint64_t now = start;
  assert_int_equal(pm.set_core_state(0, CoreState::kRunning, now), Status::kOk);
  assert_int_equal(pm.set_core_intensity(0, 700, now), Status::kOk);
  assert_int_equal(pm.set_core_intensity(0, 1001, now), Status::kOutOfRange);
  assert_int_equal(pm.set_link_state(0, LinkPowerState::kL0, now), Status::kOk);
  assert_int_equal(pm.set_link_state(1, LinkPowerState::kL1, now), Status::kOk);
  assert_int_equal(pm.set_link_state(4, LinkPowerState::kL1, now), Status::kOutOfRange);
  for (int i = 0; i < 50; ++i) {
    now += 100 * kMs;
    // Core 1 alternates running and WFI; link 0 dips into L0s.
    assert_int_equal(pm.set_core_state(1, i % 2 ? CoreState::kIdle : CoreState::kRunning, now - 40 * kMs), Status::kOk);
    assert_int_equal(pm.set_link_state(0, i % 2 ? LinkPowerState::kL0s : LinkPowerState::kL0, now - 30 * kMs), Status::kOk);
    pm.add_hbm_bytes(64 << 20);
    assert_int_equal(pm.add_link_bytes(0, 1 << 20), Status::kOk);
    pm.step(now);
  }
  PowerTelemetry t;
  pm.snapshot(&t);
  const uint64_t elapsed = now - start;

  assert_int_equal(t.seq, 0);
  assert_int_equal(t.version, kPowerTelemetryVersion);
  assert_int_equal(t.timestamp_ns, now);
  assert_int_equal(t.device_state, static_cast<uint32_t>(DeviceState::kD0));
  assert_int_equal(t.d0_ns + t.d3hot_ns + t.transition_ns, elapsed);

  assert_true(t.pstate < t.pstate_count);
  assert_int_equal(t.pstate_count, cfg.opp_count);
  assert_int_equal(t.frequency_mhz, cfg.opps[t.pstate].frequency_mhz);
  assert_int_equal(t.voltage_mv, cfg.opps[t.pstate].voltage_mv);
  assert_int_equal(t.max_frequency_mhz, 1400);
  assert_int_equal(t.clock_duty_ppm, uint64_t{t.frequency_mhz} * 1000000 / 1400);
  assert_int_equal(t.clock_event_reasons & ~kReasonMask, 0);

  // Powers in mW: components add up (each rounded down once), within sane bounds.
  const uint64_t parts = uint64_t{t.core_power_mw} + t.uncore_power_mw + t.hbm_power_mw + t.link_power_mw;
  assert_true(diff(t.power_mw, parts) <= 4);
  assert_true(t.power_mw > 10000 && t.power_mw < 200000);
  assert_int_equal(t.uncore_power_mw, cfg.model.uncore_mw);
  assert_true(t.power_average_mw > 10000 && t.power_average_mw < 200000);
  assert_true(t.hbm_power_mw >= cfg.model.hbm_stacks * cfg.model.hbm_background_mw);

  // Energies in uJ: parts add up, and the total is about power x time.
  const uint64_t eparts = t.core_energy_uj + t.uncore_energy_uj + t.hbm_energy_uj + t.link_energy_uj;
  assert_true(diff(t.energy_uj, eparts) <= 4);
  assert_int_equal(t.uncore_energy_uj, uint64_t{cfg.model.uncore_mw} * elapsed / 1000000);
  const uint64_t avg_mw = t.energy_uj * 1000000 / elapsed;
  assert_true(avg_mw > 10000 && avg_mw < 200000);
  // Each accumulator floors its own femtojoule remainder: parts may sum 1 uJ short.
  assert_true(diff(t.core_energy_uj, t.cores[0].energy_uj + t.cores[1].energy_uj) <= 1);

  assert_int_equal(t.core_count, 2);
  assert_int_equal(t.zone_count, 2);
  assert_int_equal(t.port_count, 4);
  for (uint32_t c = 0; c < t.core_count; ++c) {
    const PowerTelemetryCore& k = t.cores[c];
    assert_int_equal(k.running_ns + k.idle_ns + k.gated_ns, elapsed);
    assert_true(k.utilization_permille <= 1000);
    assert_true(k.state < kCoreStateCount);
    assert_true(k.power_mw < 100000);
  }
  assert_int_equal(t.cores[0].utilization_permille, 1000);
  assert_int_equal(t.cores[0].intensity_permille, 700);
  // Last window: running until 40 ms before its end, then WFI.
  assert_int_equal(t.cores[1].utilization_permille, 600);
  assert_true(t.cores[1].idle_entries >= 24);
  for (uint32_t z = 0; z < t.zone_count; ++z) {
    const PowerTelemetryZone& zt = t.zones[z];
    assert_true(zt.temperature_mc >= zt.ambient_mc);
    assert_true(zt.temperature_mc < zt.critical_mc);
    assert_true(zt.max_temperature_mc >= zt.temperature_mc);
    assert_int_equal(zt.throttle_mc, cfg.zones[z].throttle_mc);
    assert_int_equal(zt.critical_mc, cfg.zones[z].critical_mc);
    assert_int_equal(zt.hysteresis_mc, cfg.zones[z].hysteresis_mc);
    assert_int_equal(zt.sources, cfg.zones[z].sources);
  }
  assert_true(diff(t.zones[1].power_mw, t.hbm_power_mw) <= 1);
  for (uint32_t p = 0; p < t.port_count; ++p) {
    const PowerTelemetryLink& l = t.links[p];
    assert_int_equal(l.down_ns + l.l0_ns + l.l0s_ns + l.l1_ns, elapsed);
    assert_true(l.state < kLinkStateCount);
  }
  assert_true(t.links[0].l0s_entries >= 24);
  assert_int_equal(t.links[1].l1_entries, 1);
  assert_int_equal(t.links[1].power_mw, cfg.model.link_l1_mw);
  assert_int_equal(t.links[2].down_ns, elapsed);
  assert_int_equal(t.links[2].energy_uj, 0);

  // Entries past the counts are zero.
  PowerTelemetryCore zc{};
  PowerTelemetryZone zz{};
  PowerTelemetryLink zl{};
  for (uint32_t c = t.core_count; c < kMaxCores; ++c) assert_memory_equal(&t.cores[c], &zc, sizeof zc);
  for (uint32_t z = t.zone_count; z < kMaxThermalZones; ++z) assert_memory_equal(&t.zones[z], &zz, sizeof zz);
  for (uint32_t p = t.port_count; p < kMaxPorts; ++p) assert_memory_equal(&t.links[p], &zl, sizeof zl);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_snapshot_fields_have_their_units_and_ranges),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
