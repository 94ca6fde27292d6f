// Host unit tests of the firmware power service's portable half
// (fw/power_controller.h, fw/power_shared.h): board -> configuration, the
// optional board properties, replay of core activity into the model, the
// D0/D3hot transitions with quiesce and autosuspend, throttling and the
// power cap over simulated time, the control requests through the firmware's
// dispatcher, and the pace delay.
// Time is simulated: every call takes now_ns, nothing sleeps.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <libfdt.h>

#include <vector>

#include "fw/ctrl_dispatch.h"
#include "fw/pb_arena.h"
#include "fw/power_controller.h"
#include "fw/power_shared.h"
#include "vtrn_ctrl.pb-c.h"

using fw::power::BoardPowerExtras;
using fw::power::Controller;
using fw::power::CoreSample;
using vtrn::power::DeviceState;

namespace {

constexpr uint64_t kMs = 1000000ull;

vtrn::board::Chip two_core_chip() {
  vtrn::board::Chip c;
  c.id = 0;
  c.neuron_cores = 2;
  c.telemetry_period_ms = 100;
  c.bar2_mib = 16;
  c.hbm.stacks = 2;
  c.port_count = 4;
  c.thermal_zone_count = 2;
  c.thermal_zones[0].index = 0;
  strcpy(c.thermal_zones[0].name, "die");
  c.thermal_zones[0].throttle_mc = 95000;
  c.thermal_zones[0].critical_mc = 105000;
  c.thermal_zones[1].index = 1;
  strcpy(c.thermal_zones[1].name, "hbm");
  c.thermal_zones[1].throttle_mc = 85000;
  c.thermal_zones[1].critical_mc = 95000;
  return c;
}

// A fast, low-limit die zone: throttles within seconds of sustained load.
vtrn::power::PowerConfig hot_config() {
  BoardPowerExtras e;
  vtrn::board::Chip chip = two_core_chip();
  chip.thermal_zones[0].throttle_mc = 55000;
  chip.thermal_zones[0].critical_mc = 90000;
  e.zones[0].capacitance_mj_per_c = 500;  // tau 0.5 s at 1 C/W
  return fw::power::config_from_chip(chip, e);
}

// Cumulative counters of the simulated cores.
struct Sim {
  CoreSample s[2];
  uint64_t now = 0;
  void run(Controller& c, uint64_t window_ns, uint32_t busy_permille_core0,
           uint32_t busy_permille_core1 = 0) {
    const uint32_t pm[2] = {busy_permille_core0, busy_permille_core1};
    for (int i = 0; i < 2; ++i) {
      const uint64_t busy = window_ns * pm[i] / 1000;
      s[i].busy_ns += busy;
      s[i].idle_ns += window_ns - busy;
      s[i].state = 1;
      s[i].intensity_permille = 1000;
    }
    now += window_ns;
    c.refresh(s, 2, now);
    c.complete(now);
  }
};

struct Served {
  Vtrn__Ctrl__Response resp;
  char error[160];
  bool handled;
};

alignas(16) uint8_t g_arena_buf[8192];

Served serve(Controller& c, const Vtrn__Ctrl__Request& req, uint64_t now) {
  static fw::pb::Arena arena(g_arena_buf, sizeof g_arena_buf);
  arena.reset();
  Served s{};
  vtrn__ctrl__response__init(&s.resp);
  s.handled = fw::ctrl::serve(c, req, now, arena, &s.resp, s.error, sizeof s.error);
  return s;
}

Served request_state(Controller& c, Vtrn__Ctrl__PowerDeviceState st, uint64_t now) {
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  Vtrn__Ctrl__PowerSetStateRequest body = VTRN__CTRL__POWER_SET_STATE_REQUEST__INIT;
  body.state = st;
  req.body_case = VTRN__CTRL__REQUEST__BODY_POWER_SET_STATE;
  req.power_set_state = &body;
  return serve(c, req, now);
}

void test_config_from_chip_heats_hbm_zone_from_hbm_only(void**) {
  const vtrn::power::PowerConfig c = fw::power::config_from_chip(two_core_chip(), BoardPowerExtras{});
  assert_true(vtrn::power::validate(c).ok());
  assert_int_equal(c.core_count, 2);
  assert_int_equal(c.port_count, 4);
  assert_int_equal(c.zone_count, 2);
  assert_int_equal(c.zones[0].sources & vtrn::power::kHeatHbm, 0);
  assert_int_not_equal(c.zones[0].sources & vtrn::power::kHeatCores, 0);
  assert_int_equal(c.zones[1].sources, vtrn::power::kHeatHbm);
  assert_int_equal(c.zones[1].throttle_mc, 85000);
  assert_int_equal(c.governor_interval_ms, 100);
}

void test_config_extras_override_operating_points_and_zone_parameters(void**) {
  BoardPowerExtras e;
  e.opp_count = 2;
  e.opps[0] = {1000, 800};
  e.opps[1] = {500, 700};
  e.autosuspend_delay_ms = 250;
  e.zones[0].has_ambient = true;
  e.zones[0].ambient_mc = 25000;
  e.zones[0].capacitance_mj_per_c = 300;
  const vtrn::power::PowerConfig c = fw::power::config_from_chip(two_core_chip(), e);
  assert_true(vtrn::power::validate(c).ok());
  assert_int_equal(c.opp_count, 2);
  assert_int_equal(c.opps[1].frequency_mhz, 500);
  assert_int_equal(c.autosuspend_delay_ms, 250);
  assert_int_equal(c.zones[0].ambient_mc, 25000);
  assert_int_equal(c.zones[0].capacitance_mj_per_c, 300);
  assert_int_equal(c.zones[1].ambient_mc, 35000);
}

// A board tree with chip@0 carrying the optional power properties.
std::vector<uint8_t> board_tree(bool bad_opps) {
  std::vector<uint8_t> buf(4096);
  void* f = buf.data();
  assert_int_equal(fdt_create(f, int(buf.size())), 0);
  assert_int_equal(fdt_finish_reservemap(f), 0);
  assert_int_equal(fdt_begin_node(f, ""), 0);
  assert_int_equal(fdt_begin_node(f, "chips"), 0);
  assert_int_equal(fdt_begin_node(f, "chip@0"), 0);
  assert_int_equal(fdt_property_u32(f, "reg", 0), 0);
  const fdt32_t opps[] = {cpu_to_fdt32(1200), cpu_to_fdt32(850), cpu_to_fdt32(600),
                          cpu_to_fdt32(700)};
  assert_int_equal(fdt_property(f, "vtrn,operating-points", opps, bad_opps ? 12 : 16), 0);
  assert_int_equal(fdt_property_u32(f, "vtrn,autosuspend-delay-ms", 500), 0);
  assert_int_equal(fdt_begin_node(f, "thermal-zones"), 0);
  assert_int_equal(fdt_begin_node(f, "zone@0"), 0);
  assert_int_equal(fdt_property_u32(f, "reg", 0), 0);
  assert_int_equal(fdt_property_u32(f, "vtrn,hysteresis-millicelsius", 3000), 0);
  assert_int_equal(fdt_property_u32(f, "vtrn,capacitance-millijoules-per-celsius", 250), 0);
  assert_int_equal(fdt_end_node(f), 0);
  assert_int_equal(fdt_end_node(f), 0);
  assert_int_equal(fdt_end_node(f), 0);
  assert_int_equal(fdt_end_node(f), 0);
  assert_int_equal(fdt_end_node(f), 0);
  assert_int_equal(fdt_finish(f), 0);
  buf.resize(fdt_totalsize(f));
  return buf;
}

void test_board_extras_are_read_from_the_chip_node(void**) {
  const std::vector<uint8_t> t = board_tree(false);
  BoardPowerExtras e;
  vtrn::Error err;
  assert_true((err = fw::power::read_board_extras(t.data(), t.size(), 0, &e)).ok());
  assert_int_equal(e.opp_count, 2);
  assert_int_equal(e.opps[0].frequency_mhz, 1200);
  assert_int_equal(e.opps[1].voltage_mv, 700);
  assert_int_equal(e.autosuspend_delay_ms, 500);
  assert_true(e.zones[0].has_hysteresis);
  assert_int_equal(e.zones[0].hysteresis_mc, 3000);
  assert_int_equal(e.zones[0].capacitance_mj_per_c, 250);
  assert_false(e.zones[0].has_ambient);
}

void test_board_extras_reject_a_truncated_operating_point_table(void**) {
  const std::vector<uint8_t> t = board_tree(true);
  BoardPowerExtras e;
  vtrn::Error err;
  assert_false((err = fw::power::read_board_extras(t.data(), t.size(), 0, &e)).ok());
  assert_non_null(strstr(err.detail(), "vtrn,operating-points"));
  assert_false((err = fw::power::read_board_extras(t.data(), t.size(), 7, &e)).ok());
  assert_non_null(strstr(err.detail(), "no chip with reg 7"));
}

// A board tree whose chip@0 sets the three link power properties.
std::vector<uint8_t> link_power_tree(uint32_t l0_mw, uint32_t l0s_mw, uint32_t l1_mw) {
  std::vector<uint8_t> buf(2048);
  void* f = buf.data();
  assert_int_equal(fdt_create(f, int(buf.size())), 0);
  assert_int_equal(fdt_finish_reservemap(f), 0);
  assert_int_equal(fdt_begin_node(f, ""), 0);
  assert_int_equal(fdt_begin_node(f, "chips"), 0);
  assert_int_equal(fdt_begin_node(f, "chip@0"), 0);
  assert_int_equal(fdt_property_u32(f, "reg", 0), 0);
  assert_int_equal(fdt_property_u32(f, "vtrn,link-l0-milliwatts", l0_mw), 0);
  assert_int_equal(fdt_property_u32(f, "vtrn,link-l0s-milliwatts", l0s_mw), 0);
  assert_int_equal(fdt_property_u32(f, "vtrn,link-l1-milliwatts", l1_mw), 0);
  assert_int_equal(fdt_end_node(f), 0);
  assert_int_equal(fdt_end_node(f), 0);
  assert_int_equal(fdt_end_node(f), 0);
  assert_int_equal(fdt_finish(f), 0);
  buf.resize(fdt_totalsize(f));
  return buf;
}

void test_board_link_power_per_state_reaches_the_model(void**) {
  const std::vector<uint8_t> t = link_power_tree(2000, 900, 50);
  BoardPowerExtras e;
  vtrn::Error err;
  assert_true((err = fw::power::read_board_extras(t.data(), t.size(), 0, &e)).ok());
  const vtrn::power::PowerConfig c = fw::power::config_from_chip(two_core_chip(), e);
  assert_true(vtrn::power::validate(c).ok());
  assert_int_equal(c.model.link_l0_mw, 2000);
  assert_int_equal(c.model.link_l0s_mw, 900);
  assert_int_equal(c.model.link_l1_mw, 50);
  // Absent properties keep the binding's defaults.
  const vtrn::power::PowerConfig d = fw::power::config_from_chip(two_core_chip(), BoardPowerExtras{});
  assert_int_equal(d.model.link_l0_mw, 1200);
  assert_int_equal(d.model.link_l0s_mw, 600);
  assert_int_equal(d.model.link_l1_mw, 100);
}

void test_board_link_power_out_of_range_or_out_of_order_is_refused(void**) {
  std::vector<uint8_t> t = link_power_tree(100001, 600, 100);
  BoardPowerExtras e;
  vtrn::Error err;
  assert_false((err = fw::power::read_board_extras(t.data(), t.size(), 0, &e)).ok());
  assert_string_equal(err.detail(), "chip 0: vtrn,link-l0-milliwatts: 100001 out of range 0..100000");
  // L1 above L0s: readable, but the configuration is refused naming the field.
  t = link_power_tree(1200, 600, 700);
  assert_true((err = fw::power::read_board_extras(t.data(), t.size(), 0, &e)).ok());
  const vtrn::power::ConfigError ce = vtrn::power::validate(fw::power::config_from_chip(two_core_chip(), e));
  assert_false(ce.ok());
  assert_string_equal(ce.field, "model.link_l1_mw");
}

void test_ltssm_states_map_to_link_power_states(void**) {
  using vtrn::power::LinkPowerState;
  // vtrn::link::LinkState values: 0 Detect .. 8 Loopback.
  const LinkPowerState want[] = {LinkPowerState::kDown, LinkPowerState::kL0, LinkPowerState::kL0,
                                 LinkPowerState::kL0,   LinkPowerState::kL0, LinkPowerState::kL0s,
                                 LinkPowerState::kL1,   LinkPowerState::kDown, LinkPowerState::kL0};
  for (uint32_t s = 0; s < sizeof want / sizeof want[0]; ++s) {
    assert_int_equal(uint32_t(fw::power::link_power_state(s)), uint32_t(want[s]));
  }
  assert_int_equal(uint32_t(fw::power::link_power_state(200)), uint32_t(LinkPowerState::kDown));
}

// Link changes inside a window are charged from their own timestamps, and
// the cores' replay of the same window stays exact.
void test_link_states_are_replayed_in_time_within_the_window(void**) {
  using vtrn::power::LinkPowerState;
  Controller c;
  assert_true(c.configure(hot_config(), 0).ok());
  Sim sim;
  c.set_baseline(sim.s, 2);
  c.note_link(0, LinkPowerState::kL0, 0, 10 * kMs);
  c.note_link(0, LinkPowerState::kL0, 0, 20 * kMs);  // a repeat: no event
  c.note_link(0, LinkPowerState::kL0s, 0, 30 * kMs);
  c.note_link(0, LinkPowerState::kL1, 0, 60 * kMs);
  c.note_link(0, LinkPowerState::kL1, 0, 90 * kMs);
  c.note_link(9, LinkPowerState::kL0, 0, 90 * kMs);  // no such port: ignored
  sim.run(c, 100 * kMs, 500, 250);
  vtrn::power::PowerTelemetry t;
  c.snapshot(&t);
  assert_int_equal(t.cores[0].running_ns, 50 * kMs);
  assert_int_equal(t.cores[1].running_ns, 25 * kMs);
  const vtrn::power::PowerTelemetryLink& l = t.links[0];
  assert_int_equal(l.state, uint32_t(LinkPowerState::kL1));
  assert_int_equal(l.down_ns, 10 * kMs);
  assert_int_equal(l.l0_ns, 20 * kMs);
  assert_int_equal(l.l0s_ns, 30 * kMs);
  assert_int_equal(l.l1_ns, 40 * kMs);
  assert_int_equal(l.l0s_entries, 1);
  assert_int_equal(l.l1_entries, 1);
  // 1.2 W x 20 ms + 0.6 W x 30 ms + 0.1 W x 40 ms = 46 mJ over 100 ms.
  assert_int_equal(l.energy_uj, 46000);
  assert_int_equal(l.power_mw, 460);
  assert_int_equal(t.links[1].down_ns, 100 * kMs);
  // The next window in L1 alone draws the L1 power; sent bytes add energy.
  c.note_link(0, LinkPowerState::kL1, 1000000, 150 * kMs);  // 40 pJ/B -> 40 uJ
  sim.run(c, 100 * kMs, 0, 0);
  c.snapshot(&t);
  assert_int_equal(t.links[0].energy_uj, 46000 + 10000 + 40);
  assert_int_equal(t.links[0].power_mw, 100);  // 10.04 mJ over 100 ms, truncated to mW
  assert_int_equal(t.link_power_mw, t.links[0].power_mw);
}

void test_link_change_queue_overflow_catches_up_at_the_next_report(void**) {
  using vtrn::power::LinkPowerState;
  Controller c;
  assert_true(c.configure(hot_config(), 0).ok());
  Sim sim;
  c.set_baseline(sim.s, 2);
  // Far more changes than the queue holds within one window.
  for (uint32_t i = 0; i <= 200; ++i) {
    c.note_link(1, i % 2 ? LinkPowerState::kL0s : LinkPowerState::kL0, 0, i * 100000);
  }
  sim.run(c, 100 * kMs, 0, 0);
  vtrn::power::PowerTelemetry t;
  c.snapshot(&t);
  assert_true(t.links[1].l0s_entries >= 1);
  assert_true(t.links[1].l0s_entries <= 64);
  assert_int_equal(t.links[1].down_ns + t.links[1].l0_ns + t.links[1].l0s_ns, 100 * kMs);
  // The queue kept the first 64 changes (the last of them L0s); the port
  // really ended in L0 (i = 200), which the next report records.
  assert_int_equal(t.links[1].state, uint32_t(LinkPowerState::kL0s));
  c.note_link(1, LinkPowerState::kL0, 0, 110 * kMs);
  sim.run(c, 100 * kMs, 0, 0);
  c.snapshot(&t);
  assert_int_equal(t.links[1].state, uint32_t(LinkPowerState::kL0));
}

void test_replayed_activity_gives_window_utilization(void**) {
  Controller c;
  assert_true(c.configure(hot_config(), 0).ok());
  Sim sim;
  c.set_baseline(sim.s, 2);
  sim.run(c, 100 * kMs, 500, 250);
  vtrn::power::PowerTelemetry t;
  c.snapshot(&t);
  assert_int_equal(t.cores[0].utilization_permille, 500);
  assert_int_equal(t.cores[1].utilization_permille, 250);
  assert_int_equal(t.cores[0].running_ns, 50 * kMs);
  assert_int_equal(t.cores[0].idle_ns, 50 * kMs);
  assert_int_equal(t.cores[1].running_ns, 25 * kMs);
}

void test_d3hot_request_quiesces_after_in_flight_work_and_d0_restores(void**) {
  Controller c;
  assert_true(c.configure(hot_config(), 0).ok());
  Sim sim;
  c.set_baseline(sim.s, 2);
  sim.run(c, 100 * kMs, 100);
  c.set_work_in_flight(true);
  Served s = request_state(c, VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_D3HOT, sim.now);
  assert_true(s.handled);
  assert_int_equal(s.resp.status, VTRN__CTRL__STATUS__STATUS_OK);
  assert_int_equal(s.resp.power_set_state->state,
                   VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_QUIESCING);
  assert_false(c.active());
  // Still draining: stays quiescing however often it is polled.
  c.complete(sim.now + kMs);
  assert_int_equal(uint32_t(c.manager().device().state()), uint32_t(DeviceState::kQuiescing));
  c.set_work_in_flight(false);
  c.complete(sim.now + 2 * kMs);
  assert_int_equal(uint32_t(c.manager().device().state()), uint32_t(DeviceState::kD3hot));
  assert_int_equal(c.clock().frequency_mhz, 0);
  // Activity while the host holds D3hot does not wake the device.
  c.note_activity(sim.now + 3 * kMs);
  c.complete(sim.now + 3 * kMs);
  assert_false(c.active());
  s = request_state(c, VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_D0, sim.now + 4 * kMs);
  assert_int_equal(s.resp.power_set_state->state, VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_D0);
  assert_true(c.active());
  assert_int_equal(c.clock().frequency_mhz, 1400);
}

void test_autosuspend_after_idle_and_transparent_resume(void**) {
  Controller c;
  assert_true(c.configure(hot_config(), 0).ok());
  Sim sim;
  c.set_baseline(sim.s, 2);
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  Vtrn__Ctrl__PowerSetAutosuspendRequest body = VTRN__CTRL__POWER_SET_AUTOSUSPEND_REQUEST__INIT;
  body.delay_ms = 300;
  req.body_case = VTRN__CTRL__REQUEST__BODY_POWER_SET_AUTOSUSPEND;
  req.power_set_autosuspend = &body;
  assert_int_equal(serve(c, req, 0).resp.power_set_autosuspend->autosuspend_delay_ms, 300);
  // Activity every window keeps it up.
  for (int i = 0; i < 5; ++i) {
    c.note_activity(sim.now + 50 * kMs);
    sim.run(c, 100 * kMs, 0);
  }
  assert_true(c.active());
  // Three idle windows: suspended.
  for (int i = 0; i < 4; ++i) sim.run(c, 100 * kMs, 0);
  assert_int_equal(uint32_t(c.manager().device().state()), uint32_t(DeviceState::kD3hot));
  vtrn::power::PowerTelemetry t;
  c.snapshot(&t);
  assert_int_equal(t.autosuspend_count, 1);
  // In D3hot the cores count as gated.
  sim.run(c, 100 * kMs, 0);
  c.snapshot(&t);
  assert_int_equal(t.cores[0].state, uint32_t(vtrn::power::CoreState::kGated));
  // The next request resumes it.
  c.note_activity(sim.now);
  c.complete(sim.now);
  assert_true(c.active());
}

void test_sustained_load_throttles_then_releases_with_hysteresis(void**) {
  Controller c;
  assert_true(c.configure(hot_config(), 0).ok());
  Sim sim;
  c.set_baseline(sim.s, 2);
  bool throttled = false;
  for (int i = 0; i < 100 && !throttled; ++i) {
    sim.run(c, 100 * kMs, 1000, 1000);
    throttled = (c.manager().clock_event_reasons() & vtrn::power::kReasonSwThermalSlowdown) != 0;
  }
  assert_true(throttled);
  assert_true(c.manager().pstate() > 0);
  assert_true(c.manager().temperature_mc(0) >= 50000);
  bool released = false;
  for (int i = 0; i < 200 && !released; ++i) {
    sim.run(c, 100 * kMs, 0, 0);
    released = c.manager().pstate() == 0;
  }
  assert_true(released);
  // Released only once below throttle - hysteresis.
  assert_true(c.manager().temperature_mc(0) < 55000 - 5000);
}

void test_power_cap_holds_average_power_under_the_cap(void**) {
  Controller c;
  assert_true(c.configure(fw::power::config_from_chip(two_core_chip(), BoardPowerExtras{}), 0).ok());
  Sim sim;
  c.set_baseline(sim.s, 2);
  for (int i = 0; i < 20; ++i) sim.run(c, 100 * kMs, 1000, 1000);
  const uint32_t uncapped = c.manager().power_mw();
  const uint32_t cap = uncapped * 6 / 10;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  Vtrn__Ctrl__PowerSetCapRequest body = VTRN__CTRL__POWER_SET_CAP_REQUEST__INIT;
  body.cap_mw = cap;
  req.body_case = VTRN__CTRL__REQUEST__BODY_POWER_SET_CAP;
  req.power_set_cap = &body;
  assert_int_equal(serve(c, req, sim.now).resp.status, VTRN__CTRL__STATUS__STATUS_OK);
  for (int i = 0; i < 100; ++i) sim.run(c, 100 * kMs, 1000, 1000);
  assert_true(c.manager().power_average_mw() <= cap);
  assert_true(c.manager().pstate() > 0);
  assert_int_not_equal(c.manager().clock_event_reasons() & vtrn::power::kReasonSwPowerCap, 0);
}

void test_requests_out_of_range_are_refused_naming_the_field(void**) {
  Controller c;
  assert_true(c.configure(hot_config(), 0).ok());
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  Vtrn__Ctrl__PowerSetPstateLimitRequest lim = VTRN__CTRL__POWER_SET_PSTATE_LIMIT_REQUEST__INIT;
  lim.pstate = 6;
  req.body_case = VTRN__CTRL__REQUEST__BODY_POWER_SET_PSTATE_LIMIT;
  req.power_set_pstate_limit = &lim;
  Served s = serve(c, req, 0);
  assert_int_equal(s.resp.status, VTRN__CTRL__STATUS__STATUS_BAD_REQUEST);
  assert_non_null(strstr(s.error, "power_set_pstate_limit.pstate"));
  s = request_state(c, VTRN__CTRL__POWER_DEVICE_STATE__POWER_DEVICE_STATE_QUIESCING, 0);
  assert_int_equal(s.resp.status, VTRN__CTRL__STATUS__STATUS_BAD_REQUEST);
  Vtrn__Ctrl__PowerSetAutosuspendRequest as = VTRN__CTRL__POWER_SET_AUTOSUSPEND_REQUEST__INIT;
  as.delay_ms = 3600001;
  req.body_case = VTRN__CTRL__REQUEST__BODY_POWER_SET_AUTOSUSPEND;
  req.power_set_autosuspend = &as;
  assert_int_equal(serve(c, req, 0).resp.status, VTRN__CTRL__STATUS__STATUS_BAD_REQUEST);
  // Other services' requests are not ours.
  Vtrn__Ctrl__PingRequest ping = VTRN__CTRL__PING_REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_PING;
  req.ping = &ping;
  assert_false(serve(c, req, 0).handled);
  // A valid limit is applied at once.
  lim.pstate = 3;
  req.body_case = VTRN__CTRL__REQUEST__BODY_POWER_SET_PSTATE_LIMIT;
  req.power_set_pstate_limit = &lim;
  s = serve(c, req, 0);
  assert_int_equal(s.resp.power_set_pstate_limit->pstate, 3);
  assert_int_equal(s.resp.power_set_pstate_limit->frequency_mhz, 800);
}

void test_pace_delay_scales_with_the_clock_ratio(void**) {
  assert_int_equal(fw::power::delay_for(1000, 1400, 1400), 0);
  assert_int_equal(fw::power::delay_for(1000, 700, 1400), 1000);
  assert_int_equal(fw::power::delay_for(1000, 400, 1400), 2500);
  assert_int_equal(fw::power::delay_for(1000, 0, 1400), 0);
  assert_int_equal(fw::power::delay_for(1000, 700, 0), 0);
  assert_int_equal(fw::power::delay_for(UINT64_MAX, 1, 10000), UINT64_MAX);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_from_chip_heats_hbm_zone_from_hbm_only),
      cmocka_unit_test(test_config_extras_override_operating_points_and_zone_parameters),
      cmocka_unit_test(test_board_extras_are_read_from_the_chip_node),
      cmocka_unit_test(test_board_extras_reject_a_truncated_operating_point_table),
      cmocka_unit_test(test_board_link_power_per_state_reaches_the_model),
      cmocka_unit_test(test_board_link_power_out_of_range_or_out_of_order_is_refused),
      cmocka_unit_test(test_ltssm_states_map_to_link_power_states),
      cmocka_unit_test(test_link_states_are_replayed_in_time_within_the_window),
      cmocka_unit_test(test_link_change_queue_overflow_catches_up_at_the_next_report),
      cmocka_unit_test(test_replayed_activity_gives_window_utilization),
      cmocka_unit_test(test_d3hot_request_quiesces_after_in_flight_work_and_d0_restores),
      cmocka_unit_test(test_autosuspend_after_idle_and_transparent_resume),
      cmocka_unit_test(test_sustained_load_throttles_then_releases_with_hysteresis),
      cmocka_unit_test(test_power_cap_holds_average_power_under_the_cap),
      cmocka_unit_test(test_requests_out_of_range_are_refused_naming_the_field),
      cmocka_unit_test(test_pace_delay_scales_with_the_clock_ratio),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
