// Unit tests for the board wiring: /switches and /links (parse_topology and
// the per-port wiring parse_chip fills in).
//
// Good inputs are the shipped boards (vtrn-dev2 by hand, the ring, torus,
// switch and 144-chip boards from board/gen_board.py); bad ones are made from
// vtrn-dev2 in memory, as board_parser_test does. Messages are compared
// exactly: the firmware panics with them and vtrnd prints them.

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <memory>

extern "C" {
#include <cmocka.h>
}
#include <libfdt.h>

#include "vtrn/board.h"

#ifndef VTRN_TEST_BOARD_DIR
#error "VTRN_TEST_BOARD_DIR must name the directory holding the compiled board DTBs"
#endif

namespace {

using vtrn::board::Chip;
using vtrn::board::EndKind;
// The parser fails with a vtrn::Error carrying one of the board codes.
using Error = vtrn::Code;
using Result = vtrn::Error;
using vtrn::board::Topology;

alignas(8) uint8_t g_file[256 * 1024];
alignas(8) uint8_t g_work[256 * 1024];
alignas(8) uint8_t g_out[256 * 1024];
Chip g_chip;
std::unique_ptr<Topology> g_topo;

size_t load(const char* name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", VTRN_TEST_BOARD_DIR, name);
  FILE* f = fopen(path, "rb");
  if (f == nullptr) fail_msg("cannot open %s", path);
  size_t n = fread(g_file, 1, sizeof(g_file), f);
  fclose(f);
  assert_int_equal(fdt_open_into(g_file, g_work, sizeof(g_work)), 0);
  return n;
}

int setup(void**) {
  load("vtrn-dev2.dtb");
  g_chip = Chip{};
  g_topo = std::make_unique<Topology>();
  return 0;
}

int node(const char* path) {
  int off = fdt_path_offset(g_work, path);
  if (off < 0) fail_msg("no node %s: %s", path, fdt_strerror(off));
  return off;
}

void set_pair(const char* path, const char* prop, uint32_t a, uint32_t b) {
  fdt32_t v[2] = {cpu_to_fdt32(a), cpu_to_fdt32(b)};
  assert_int_equal(fdt_setprop(g_work, node(path), prop, v, sizeof(v)), 0);
}

Result topo() { return vtrn::board::parse_topology(g_work, fdt_totalsize(g_work), g_topo.get()); }
Result chip(uint32_t id) { return vtrn::board::parse_chip(g_work, fdt_totalsize(g_work), id, &g_chip); }

void expect(const Result& r, Error e, const char* message) {
  assert_string_equal(r.detail(), message);
  assert_int_equal(static_cast<uint32_t>(r.code()), static_cast<uint32_t>(e));
}

void test_default_board_is_a_ring_of_two(void**) {
  assert_true(topo().ok());
  assert_int_equal(g_topo->link_count, 2);
  assert_int_equal(g_topo->switch_count, 0);
  assert_int_equal(static_cast<uint32_t>(g_topo->links[1].a.kind), 1);
  assert_int_equal(g_topo->links[1].a.id, 1);
  assert_int_equal(g_topo->links[1].b.port, 1);
  assert_true(chip(1).ok());
  assert_true(g_chip.ports[1].connected);
  assert_int_equal(g_chip.ports[1].side, 1);
  assert_int_equal(g_chip.ports[1].link, 0);
  assert_int_equal(g_chip.ports[1].peer.id, 0);
  assert_int_equal(g_chip.ports[1].peer.port, 0);
  assert_true(g_chip.ports[1].peer_on_board);
  assert_true(g_chip.ports[0].connected);
  assert_int_equal(g_chip.ports[0].side, 0);
  assert_false(g_chip.ports[2].connected);
  assert_false(g_chip.ports[3].connected);
}

void test_ring4_has_a_faulty_lane_and_a_slow_chip(void**) {
  load("vtrn-ring4.dtb");
  assert_true(topo().ok());
  assert_int_equal(g_topo->link_count, 4);
  assert_true(chip(2).ok());
  assert_int_equal(g_chip.ports[1].faulty_lane_mask, 0x8000);
  assert_int_equal(g_chip.ports[1].peer.id, 1);
  assert_true(chip(3).ok());
  assert_int_equal(g_chip.ports[0].max_speed_gtps, 16);
  assert_int_equal(g_chip.ports[0].peer.id, 0);
}

void test_torus16_wires_every_port_once(void**) {
  load("vtrn-torus16.dtb");
  assert_true(topo().ok());
  assert_int_equal(g_topo->link_count, 32);
  for (uint32_t id = 0; id < 16; ++id) {
    assert_true(chip(id).ok());
    assert_int_equal(g_chip.port_count, 4);
    for (uint32_t p = 0; p < 4; ++p) assert_true(g_chip.ports[p].connected);
  }
  // Chip 3 (x=3, y=0): east wraps to chip 0, north wraps to chip 15... (x=3, y=3).
  assert_true(chip(3).ok());
  assert_int_equal(g_chip.ports[0].peer.id, 0);
  assert_int_equal(g_chip.ports[3].peer.id, 15);
}

void test_switch_boards_connect_chips_to_switch_ports(void**) {
  load("vtrn-ultra144.dtb");
  assert_true(topo().ok());
  assert_int_equal(g_topo->switch_count, 2);
  assert_int_equal(g_topo->switches[1].ports, 144);
  assert_int_equal(g_topo->link_count, 288);
  assert_true(chip(143).ok());
  assert_true(g_chip.ports[1].connected);
  assert_int_equal(static_cast<uint32_t>(g_chip.ports[1].peer.kind),
                   static_cast<uint32_t>(EndKind::kSwitch));
  assert_int_equal(g_chip.ports[1].peer.id, 1);
  assert_int_equal(g_chip.ports[1].peer.port, 143);
  load("vtrn-switch.dtb");
  assert_true(topo().ok());
  assert_int_equal(g_topo->switch_count, 1);
  assert_int_equal(g_topo->link_count, 4);
}

void test_link_to_undefined_port_is_rejected(void**) {
  set_pair("/links/link@0", "vtrn,b-chip", 1, 9);
  expect(topo(), Error::kBadProperty, "/links/link@0: vtrn,b-chip: chip 1 has no port 9");
  expect(chip(1), Error::kBadProperty, "/links/link@0: vtrn,b-chip: chip 1 has no port 9");
}

void test_port_wired_twice_is_rejected(void**) {
  set_pair("/links/link@1", "vtrn,b-chip", 1, 1);
  expect(topo(), Error::kDuplicate, "/links/link@1: vtrn,b-chip: chip 1 port 1 is wired twice");
  expect(chip(1), Error::kDuplicate, "/links/link@1: chip 1 port 1 is already wired by link 0");
}

void test_end_with_chip_and_switch_is_rejected(void**) {
  set_pair("/links/link@0", "vtrn,a-switch", 0, 0);
  expect(topo(), Error::kBadProperty,
         "/links/link@0: vtrn,a-chip: and vtrn,a-switch both given, exactly one allowed");
}

void test_link_without_end_is_rejected(void**) {
  assert_int_equal(fdt_delprop(g_work, node("/links/link@1"), "vtrn,b-chip"), 0);
  expect(topo(), Error::kMissingProperty, "/links/link@1: vtrn,b-chip: missing (or vtrn,b-switch)");
}

void test_switch_end_needs_a_switch_node(void**) {
  assert_int_equal(fdt_delprop(g_work, node("/links/link@1"), "vtrn,b-chip"), 0);
  set_pair("/links/link@1", "vtrn,b-switch", 0, 3);
  expect(topo(), Error::kBadProperty, "/links/link@1: vtrn,b-switch: no switch 0");
}

void test_switch_port_beyond_its_count_is_rejected(void**) {
  load("vtrn-switch.dtb");
  set_pair("/links/link@2", "vtrn,b-switch", 0, 4);
  expect(topo(), Error::kBadProperty, "/links/link@2: vtrn,b-switch: switch 0 has 4 ports, no port 4");
}

void test_both_ends_on_one_port_is_rejected(void**) {
  set_pair("/links/link@0", "vtrn,b-chip", 0, 0);
  expect(topo(), Error::kBadProperty, "/links/link@0: both ends name the same port");
}

void test_link_unit_address_must_match_reg(void**) {
  assert_int_equal(fdt_setprop_u32(g_work, node("/links/link@1"), "reg", 5), 0);
  expect(topo(), Error::kBadProperty, "/links/link@1: reg: 5 requires node name link@5");
}

void test_resized_board_keeps_links_to_absent_chips(void**) {
  Result r = vtrn::board::resize_board(g_work, fdt_totalsize(g_work), 1, g_out, sizeof(g_out));
  assert_true(r.ok());
  r = vtrn::board::parse_topology(g_out, fdt_totalsize(g_out), g_topo.get());
  assert_true(r.ok());
  assert_int_equal(g_topo->link_count, 2);
  assert_true(g_topo->links[0].a_on_board);
  assert_false(g_topo->links[0].b_on_board);
  r = vtrn::board::parse_chip(g_out, fdt_totalsize(g_out), 0, &g_chip);
  assert_true(r.ok());
  assert_true(g_chip.ports[0].connected);
  assert_false(g_chip.ports[0].peer_on_board);
}

void test_board_without_links_has_unwired_ports(void**) {
  load("vtrn-dev1.dtb");
  assert_true(topo().ok());
  assert_int_equal(g_topo->link_count, 0);
  assert_true(chip(0).ok());
  for (uint32_t p = 0; p < g_chip.port_count; ++p) assert_false(g_chip.ports[p].connected);
}

}  // namespace

#define TOPO_TEST(f) cmocka_unit_test_setup(f, setup)

int main() {
  const struct CMUnitTest tests[] = {
      TOPO_TEST(test_default_board_is_a_ring_of_two),
      TOPO_TEST(test_ring4_has_a_faulty_lane_and_a_slow_chip),
      TOPO_TEST(test_torus16_wires_every_port_once),
      TOPO_TEST(test_switch_boards_connect_chips_to_switch_ports),
      TOPO_TEST(test_link_to_undefined_port_is_rejected),
      TOPO_TEST(test_port_wired_twice_is_rejected),
      TOPO_TEST(test_end_with_chip_and_switch_is_rejected),
      TOPO_TEST(test_link_without_end_is_rejected),
      TOPO_TEST(test_switch_end_needs_a_switch_node),
      TOPO_TEST(test_switch_port_beyond_its_count_is_rejected),
      TOPO_TEST(test_both_ends_on_one_port_is_rejected),
      TOPO_TEST(test_link_unit_address_must_match_reg),
      TOPO_TEST(test_resized_board_keeps_links_to_absent_chips),
      TOPO_TEST(test_board_without_links_has_unwired_ports),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
