// Unit tests for the board DTB parser (common/board/board.cpp).
//
// The good input is the shipped default board, compiled by the `boards`
// target; every bad input is made from it in memory (fdt_open_into into a
// roomy copy, then fdt_delprop/fdt_setprop/fdt_add_subnode), so the tests need
// no fixture files and a change to vtrn-dev2.dts that breaks the expected
// values shows up here first. Messages are compared exactly: the firmware
// prints them as its boot panic reason and vtrnd as its error line.
//
// Most mutations hit chip 1, so the expected paths also prove that the parser
// names the right chip and does not stop at chip 0.

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// cmocka.h declares print_error (used by fail_msg) without C linkage.
extern "C" {
#include <cmocka.h>
}
#include <libfdt.h>

#include <deque>
#include <string>
#include <vector>

#include "vtrn/board.h"

#ifndef VTRN_TEST_BOARD_DIR
#error "VTRN_TEST_BOARD_DIR must name the directory holding the compiled board DTBs"
#endif

namespace {

using vtrn::board::Board;
using vtrn::board::Chip;
// The parser fails with a vtrn::Error carrying one of the board codes.
using Error = vtrn::Code;
using Result = vtrn::Error;

constexpr uint64_t kMiB = 1024ull * 1024ull;

alignas(8) uint8_t g_good[16 * 1024];
size_t g_good_size = 0;
alignas(8) uint8_t g_work[64 * 1024];
alignas(8) uint8_t g_out[512 * 1024];
alignas(8) uint8_t g_out2[512 * 1024];
Board g_board;
Chip g_chip;

size_t load_dtb(const char* name, uint8_t* buf, size_t cap) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", VTRN_TEST_BOARD_DIR, name);
  FILE* f = fopen(path, "rb");
  if (f == nullptr) fail_msg("cannot open %s", path);
  size_t n = fread(buf, 1, cap, f);
  bool more = fgetc(f) != EOF;
  fclose(f);
  if (more) fail_msg("%s is larger than the %zu-byte test buffer", path, cap);
  return n;
}

// Every test starts from a fresh, writable copy of the default board with
// room to grow.
int fresh_copy(void**) {
  g_good_size = load_dtb("vtrn-dev2.dtb", g_good, sizeof(g_good));
  assert_int_equal(fdt_open_into(g_good, g_work, sizeof(g_work)), 0);
  g_board = Board{};
  g_chip = Chip{};
  return 0;
}

size_t work_size() { return fdt_totalsize(g_work); }

int node(const char* path) {
  int off = fdt_path_offset(g_work, path);
  if (off < 0) fail_msg("no node %s in the test tree: %s", path, fdt_strerror(off));
  return off;
}

void del_prop(const char* path, const char* prop) {
  assert_int_equal(fdt_delprop(g_work, node(path), prop), 0);
}

void set_u32(const char* path, const char* prop, uint32_t v) {
  assert_int_equal(fdt_setprop_u32(g_work, node(path), prop, v), 0);
}

void set_raw(const char* path, const char* prop, const void* data, int len) {
  assert_int_equal(fdt_setprop(g_work, node(path), prop, data, len), 0);
}

void set_string(const char* path, const char* prop, const char* s) {
  assert_int_equal(fdt_setprop_string(g_work, node(path), prop, s), 0);
}

void del_node(const char* path) { assert_int_equal(fdt_del_node(g_work, node(path)), 0); }

void expect(const Result& r, Error e, const char* message) {
  assert_string_equal(r.detail(), message);
  assert_int_equal(static_cast<uint32_t>(r.code()), static_cast<uint32_t>(e));
}

Result chip1() { return vtrn::board::parse_chip(g_work, work_size(), 1, &g_chip); }
Result board() { return vtrn::board::parse_board(g_work, work_size(), &g_board); }

// vtrn-dev2 chips have 4 NeuronCores (jobs: core 0 serves, 1..3 execute),
// all in the "soc" domain; vtrn-dev1's chip has 2.
void assert_default_chip(const Chip& c, uint32_t id, uint32_t cores = 4) {
  char name[16];
  snprintf(name, sizeof(name), "chip@%x", id);
  assert_int_equal(c.id, id);
  assert_string_equal(c.name, name);
  assert_int_equal(c.neuron_cores, cores);
  assert_int_equal(c.telemetry_period_ms, 100);
  assert_int_equal(c.bar2_mib, 16);
  assert_int_equal(c.hbm.stacks, 2);
  assert_int_equal(c.hbm.bytes_per_stack, 128 * kMiB);
  assert_int_equal(c.hbm.page_bytes, 64 * 1024);
  assert_int_equal(c.hbm.channels, 8);
  assert_int_equal(c.hbm.total_bytes(), 256 * kMiB);
  assert_int_equal(c.port_count, 4);
  for (uint32_t i = 0; i < 4; ++i) {
    assert_int_equal(c.ports[i].index, i);
    assert_int_equal(c.ports[i].max_speed_gtps, 32);
    assert_int_equal(c.ports[i].lanes, 16);
    assert_int_equal(c.ports[i].faulty_lane_mask, 0);
    assert_int_equal(c.ports[i].l0s_idle_us, vtrn::board::kDefaultL0sIdleUs);
    assert_int_equal(c.ports[i].l1_idle_us, vtrn::board::kDefaultL1IdleUs);
  }
  assert_int_equal(c.power_domain_count, 2);
  assert_int_equal(c.power_domains[0].index, 0);
  assert_string_equal(c.power_domains[0].name, "soc");
  assert_int_equal(c.power_domains[0].core_mask, (1u << cores) - 1);
  assert_int_equal(c.power_domains[1].index, 1);
  assert_string_equal(c.power_domains[1].name, "hbm");
  assert_int_equal(c.power_domains[1].core_mask, 0x0);
  assert_int_equal(c.thermal_zone_count, 2);
  assert_int_equal(c.thermal_zones[0].index, 0);
  assert_string_equal(c.thermal_zones[0].name, "die");
  assert_int_equal(c.thermal_zones[0].throttle_mc, 95000);
  assert_int_equal(c.thermal_zones[0].critical_mc, 105000);
  assert_int_equal(c.thermal_zones[1].index, 1);
  assert_string_equal(c.thermal_zones[1].name, "hbm");
  assert_int_equal(c.thermal_zones[1].throttle_mc, 85000);
  assert_int_equal(c.thermal_zones[1].critical_mc, 95000);
}

// the shipped boards

void test_default_board_parses_to_expected_values(void**) {
  Result r = vtrn::board::parse_board(g_good, g_good_size, &g_board);
  assert_true(r.ok());
  assert_string_equal(r.detail(), "");
  assert_string_equal(g_board.model, "vtrn-dev2");
  assert_int_equal(g_board.chip_count, 2);
  assert_int_equal(g_board.chip_ids[0], 0);
  assert_int_equal(g_board.chip_ids[1], 1);
  for (uint32_t id = 0; id < 2; ++id) {
    r = vtrn::board::parse_chip(g_good, g_good_size, id, &g_chip);
    assert_true(r.ok());
    assert_default_chip(g_chip, id);
  }
}

void test_single_chip_board_parses(void**) {
  static uint8_t dev1[16 * 1024];
  size_t n = load_dtb("vtrn-dev1.dtb", dev1, sizeof(dev1));
  assert_true(vtrn::board::parse_board(dev1, n, &g_board).ok());
  assert_string_equal(g_board.model, "vtrn-dev1");
  assert_int_equal(g_board.chip_count, 1);
  assert_true(vtrn::board::parse_chip(dev1, n, 0, &g_chip).ok());
  assert_default_chip(g_chip, 0, 2);
  expect(vtrn::board::parse_chip(dev1, n, 1, &g_chip), Error::kNoSuchChip,
         "/chips: no chip 1 (the board has chips 0..0)");
}

void test_unknown_chip_id_is_reported(void**) {
  Result r = vtrn::board::parse_chip(g_work, work_size(), 2, &g_chip);
  expect(r, Error::kNoSuchChip, "/chips: no chip 2 (the board has chips 0..1)");
  assert_int_equal(g_chip.neuron_cores, 0);
}

// required properties, one generated test per (node, property)

struct Required {
  const char* path;
  const char* prop;
  bool board_level;  // checked by parse_board too (root, /chips, chip compatible and reg)
};

const Required kRequired[] = {
    {"/", "compatible", true},
    {"/", "model", true},
    {"/chips", "#address-cells", true},
    {"/chips", "#size-cells", true},
    {"/chips/chip@1", "compatible", true},
    {"/chips/chip@1", "reg", true},
    {"/chips/chip@1", "vtrn,neuron-cores", false},
    {"/chips/chip@1", "vtrn,telemetry-period-ms", false},
    {"/chips/chip@1", "vtrn,bar2-mib", false},
    {"/chips/chip@1/hbm", "compatible", false},
    {"/chips/chip@1/hbm", "vtrn,stacks", false},
    {"/chips/chip@1/hbm", "vtrn,stack-bytes", false},
    {"/chips/chip@1/hbm", "vtrn,page-bytes", false},
    {"/chips/chip@1/hbm", "vtrn,channels", false},
    {"/chips/chip@1/ports", "#address-cells", false},
    {"/chips/chip@1/ports", "#size-cells", false},
    {"/chips/chip@1/ports/port@2", "compatible", false},
    {"/chips/chip@1/ports/port@2", "reg", false},
    {"/chips/chip@1/ports/port@2", "vtrn,max-speed-gtps", false},
    {"/chips/chip@1/ports/port@2", "vtrn,lanes", false},
    {"/chips/chip@1/power-domains", "#address-cells", false},
    {"/chips/chip@1/power-domains", "#size-cells", false},
    {"/chips/chip@1/power-domains/domain@1", "compatible", false},
    {"/chips/chip@1/power-domains/domain@1", "reg", false},
    {"/chips/chip@1/power-domains/domain@1", "vtrn,name", false},
    {"/chips/chip@1/thermal-zones", "#address-cells", false},
    {"/chips/chip@1/thermal-zones", "#size-cells", false},
    {"/chips/chip@1/thermal-zones/zone@1", "compatible", false},
    {"/chips/chip@1/thermal-zones/zone@1", "reg", false},
    {"/chips/chip@1/thermal-zones/zone@1", "vtrn,name", false},
    {"/chips/chip@1/thermal-zones/zone@1", "vtrn,throttle-millicelsius", false},
    {"/chips/chip@1/thermal-zones/zone@1", "vtrn,critical-millicelsius", false},
};

void test_missing_required_property_is_named(void** state) {
  const Required& c = *static_cast<const Required*>(*state);
  del_prop(c.path, c.prop);
  std::string want = std::string(c.path) + ": " + c.prop + ": missing";
  expect(chip1(), Error::kMissingProperty, want.c_str());
  if (c.board_level) {
    expect(board(), Error::kMissingProperty, want.c_str());
  } else {
    // A fault inside chip 1 is chip 1's: the board and chip 0 still parse.
    assert_true(board().ok());
    assert_true(vtrn::board::parse_chip(g_work, work_size(), 0, &g_chip).ok());
  }
}

// nodes

void test_missing_chips_node_is_named(void**) {
  del_node("/chips");
  expect(board(), Error::kMissingNode, "/chips: missing");
}

void test_empty_chips_node_is_rejected(void**) {
  del_node("/chips/chip@0");
  del_node("/chips/chip@1");
  expect(board(), Error::kMissingNode, "/chips: no chip nodes");
}

void test_missing_hbm_node_is_named(void**) {
  del_node("/chips/chip@1/hbm");
  expect(chip1(), Error::kMissingNode, "/chips/chip@1/hbm: missing");
}

void test_gap_in_chip_ids_is_rejected(void**) {
  del_node("/chips/chip@0");
  expect(board(), Error::kMissingNode,
         "/chips/chip@0: missing (chip ids must run 0..0 without gaps)");
}

void test_optional_containers_may_be_absent(void**) {
  del_node("/links");  // it names chip 1's ports, which go next
  del_node("/chips/chip@1/ports");
  del_node("/chips/chip@1/power-domains");
  del_node("/chips/chip@1/thermal-zones");
  assert_true(chip1().ok());
  assert_int_equal(g_chip.port_count, 0);
  assert_int_equal(g_chip.power_domain_count, 0);
  assert_int_equal(g_chip.thermal_zone_count, 0);
  assert_int_equal(g_chip.hbm.stacks, 2);
}

void test_optional_properties_take_their_defaults(void**) {
  del_prop("/chips/chip@1/power-domains/domain@0", "vtrn,cores");
  assert_true(chip1().ok());
  assert_int_equal(g_chip.power_domains[0].core_mask, 0);
  assert_int_equal(g_chip.ports[2].faulty_lane_mask, 0);
  assert_int_equal(g_chip.dma_queues, vtrn::board::kDefaultDmaQueues);
  assert_int_equal(g_chip.dma_queue_depth, vtrn::board::kDefaultDmaQueueDepth);
  set_u32("/chips/chip@1", "vtrn,dma-queues", 16);
  set_u32("/chips/chip@1", "vtrn,dma-queue-depth", 4096);
  assert_true(chip1().ok());
  assert_int_equal(g_chip.dma_queues, 16);
  assert_int_equal(g_chip.dma_queue_depth, 4096);
}

void test_wrong_compatible_is_rejected(void**) {
  set_string("/chips/chip@1/hbm", "compatible", "vtrn,ddr");
  expect(chip1(), Error::kBadProperty, "/chips/chip@1/hbm: compatible: must contain \"vtrn,hbm\"");
}

void test_compatible_list_containing_ours_is_accepted(void**) {
  static const char list[] = "acme,hbm3e\0vtrn,hbm";
  set_raw("/chips/chip@1/hbm", "compatible", list, sizeof(list));
  assert_true(chip1().ok());
}

// lengths and encodings

void test_u32_property_with_eight_bytes_is_rejected(void**) {
  static const uint8_t two_cells[8] = {0, 0, 0, 0, 0, 0, 0, 2};
  set_raw("/chips/chip@1", "vtrn,neuron-cores", two_cells, sizeof(two_cells));
  expect(chip1(), Error::kBadProperty,
         "/chips/chip@1: vtrn,neuron-cores: length 8, expected 4 (one u32 cell)");
}

void test_empty_reg_is_rejected(void**) {
  set_raw("/chips/chip@1/ports/port@2", "reg", nullptr, 0);
  expect(chip1(), Error::kBadProperty,
         "/chips/chip@1/ports/port@2: reg: length 0, expected 4 (one u32 cell)");
}

void test_stack_bytes_as_one_cell_is_rejected(void**) {
  set_u32("/chips/chip@1/hbm", "vtrn,stack-bytes", 128 * 1024 * 1024);
  expect(chip1(), Error::kBadProperty,
         "/chips/chip@1/hbm: vtrn,stack-bytes: length 4, expected 8 (one u64, /bits/ 64 or two "
         "cells)");
}

void test_unterminated_model_is_rejected(void**) {
  set_raw("/", "model", "vtrn", 4);
  expect(board(), Error::kBadProperty, "/: model: not a NUL-terminated string");
}

void test_empty_model_is_rejected(void**) {
  set_raw("/", "model", "", 1);
  expect(board(), Error::kBadProperty, "/: model: empty string");
}

void test_overlong_model_is_rejected(void**) {
  std::string longest(vtrn::board::kNameLen - 1, 'm');
  set_string("/", "model", longest.c_str());
  assert_true(board().ok());
  assert_string_equal(g_board.model, longest.c_str());
  std::string too_long(vtrn::board::kNameLen, 'm');
  set_string("/", "model", too_long.c_str());
  expect(board(), Error::kBadProperty, "/: model: 48 characters, at most 47 allowed");
}

void test_name_with_embedded_nul_is_rejected(void**) {
  set_raw("/chips/chip@1/power-domains/domain@0", "vtrn,name", "so\0c", 5);
  expect(chip1(), Error::kBadProperty,
         "/chips/chip@1/power-domains/domain@0: vtrn,name: byte 2 is 0x00: one printable ASCII "
         "string expected");
}

void test_unterminated_compatible_is_rejected(void**) {
  set_raw("/chips/chip@1", "compatible", "vtrn,chip", 9);
  expect(board(), Error::kBadProperty,
         "/chips/chip@1: compatible: not a NUL-terminated string list");
}

// value ranges, one generated test per case

struct BadValue {
  const char* path;
  const char* prop;
  uint32_t value;
  Error error;
  const char* message;
};

const BadValue kBadValues[] = {
    {"/chips/chip@1", "vtrn,neuron-cores", 0, Error::kBadProperty,
     "/chips/chip@1: vtrn,neuron-cores: 0 out of range 1..8"},
    {"/chips/chip@1", "vtrn,neuron-cores", 9, Error::kBadProperty,
     "/chips/chip@1: vtrn,neuron-cores: 9 out of range 1..8"},
    {"/chips/chip@1", "vtrn,telemetry-period-ms", 9, Error::kBadProperty,
     "/chips/chip@1: vtrn,telemetry-period-ms: 9 out of range 10..10000"},
    {"/chips/chip@1", "vtrn,telemetry-period-ms", 10001, Error::kBadProperty,
     "/chips/chip@1: vtrn,telemetry-period-ms: 10001 out of range 10..10000"},
    {"/chips/chip@1", "vtrn,bar2-mib", 2, Error::kBadProperty,
     "/chips/chip@1: vtrn,bar2-mib: 2 out of range 4..1024"},
    {"/chips/chip@1", "vtrn,bar2-mib", 24, Error::kBadProperty,
     "/chips/chip@1: vtrn,bar2-mib: 24 is not a power of two"},
    {"/chips/chip@1", "vtrn,bar2-mib", 2048, Error::kBadProperty,
     "/chips/chip@1: vtrn,bar2-mib: 2048 out of range 4..1024"},
    {"/chips/chip@1", "vtrn,dma-queues", 0, Error::kBadProperty,
     "/chips/chip@1: vtrn,dma-queues: 0 outside 1..16"},
    {"/chips/chip@1", "vtrn,dma-queues", 17, Error::kBadProperty,
     "/chips/chip@1: vtrn,dma-queues: 17 outside 1..16"},
    {"/chips/chip@1", "vtrn,dma-queue-depth", 100, Error::kBadProperty,
     "/chips/chip@1: vtrn,dma-queue-depth: 100 is not a power of two in 16..4096"},
    {"/chips/chip@1", "vtrn,dma-queue-depth", 8192, Error::kBadProperty,
     "/chips/chip@1: vtrn,dma-queue-depth: 8192 is not a power of two in 16..4096"},
    {"/chips/chip@1", "reg", 256, Error::kBadProperty,
     "/chips/chip@1: reg: 256 out of range 0..255"},
    {"/chips/chip@1", "reg", 2, Error::kBadProperty,
     "/chips/chip@1: reg: 2 requires node name chip@2"},
    {"/chips/chip@1", "reg", 0, Error::kDuplicate,
     "/chips/chip@1: reg: chip 0 is already defined"},
    {"/chips/chip@1/hbm", "vtrn,stacks", 0, Error::kBadProperty,
     "/chips/chip@1/hbm: vtrn,stacks: 0 out of range 1..8"},
    {"/chips/chip@1/hbm", "vtrn,stacks", 9, Error::kBadProperty,
     "/chips/chip@1/hbm: vtrn,stacks: 9 out of range 1..8"},
    {"/chips/chip@1/hbm", "vtrn,page-bytes", 2048, Error::kBadProperty,
     "/chips/chip@1/hbm: vtrn,page-bytes: 2048 out of range 4096..2097152"},
    {"/chips/chip@1/hbm", "vtrn,page-bytes", 4 * 1024 * 1024, Error::kBadProperty,
     "/chips/chip@1/hbm: vtrn,page-bytes: 4194304 out of range 4096..2097152"},
    {"/chips/chip@1/hbm", "vtrn,page-bytes", 12288, Error::kBadProperty,
     "/chips/chip@1/hbm: vtrn,page-bytes: 12288 is not a power of two"},
    {"/chips/chip@1/hbm", "vtrn,channels", 0, Error::kBadProperty,
     "/chips/chip@1/hbm: vtrn,channels: 0 out of range 1..32"},
    {"/chips/chip@1/hbm", "vtrn,channels", 33, Error::kBadProperty,
     "/chips/chip@1/hbm: vtrn,channels: 33 out of range 1..32"},
    {"/chips/chip@1/ports/port@2", "reg", 16, Error::kBadProperty,
     "/chips/chip@1/ports/port@2: reg: 16 out of range 0..15"},
    {"/chips/chip@1/ports/port@2", "reg", 5, Error::kBadProperty,
     "/chips/chip@1/ports/port@2: reg: 5 requires node name port@5"},
    {"/chips/chip@1/ports/port@2", "reg", 0, Error::kDuplicate,
     "/chips/chip@1/ports/port@2: reg: port 0 is already defined"},
    {"/chips/chip@1/ports/port@2", "vtrn,max-speed-gtps", 0, Error::kBadProperty,
     "/chips/chip@1/ports/port@2: vtrn,max-speed-gtps: 0 out of range 1..128"},
    {"/chips/chip@1/ports/port@2", "vtrn,max-speed-gtps", 129, Error::kBadProperty,
     "/chips/chip@1/ports/port@2: vtrn,max-speed-gtps: 129 out of range 1..128"},
    {"/chips/chip@1/ports/port@2", "vtrn,lanes", 3, Error::kBadProperty,
     "/chips/chip@1/ports/port@2: vtrn,lanes: 3, must be 1, 2, 4, 8 or 16"},
    {"/chips/chip@1/ports/port@2", "vtrn,lanes", 32, Error::kBadProperty,
     "/chips/chip@1/ports/port@2: vtrn,lanes: 32, must be 1, 2, 4, 8 or 16"},
    {"/chips/chip@1/ports/port@2", "vtrn,faulty-lanes", 0x10000, Error::kBadProperty,
     "/chips/chip@1/ports/port@2: vtrn,faulty-lanes: 0x10000 names lanes beyond the 16 of "
     "vtrn,lanes"},
    {"/chips/chip@1/ports/port@2", "vtrn,l0s-idle-us", 10000001, Error::kBadProperty,
     "/chips/chip@1/ports/port@2: vtrn,l0s-idle-us: 10000001 out of range 0..10000000"},
    {"/chips/chip@1/ports/port@2", "vtrn,l1-idle-us", 10000001, Error::kBadProperty,
     "/chips/chip@1/ports/port@2: vtrn,l1-idle-us: 10000001 out of range 0..10000000"},
    {"/chips/chip@1/ports/port@2", "vtrn,l1-idle-us", 999, Error::kBadProperty,
     "/chips/chip@1/ports/port@2: vtrn,l1-idle-us: 999 is shorter than vtrn,l0s-idle-us (1000)"},
    {"/chips/chip@1/power-domains/domain@1", "reg", 8, Error::kBadProperty,
     "/chips/chip@1/power-domains/domain@1: reg: 8 out of range 0..7"},
    {"/chips/chip@1/power-domains/domain@1", "vtrn,cores", 0x10, Error::kBadProperty,
     "/chips/chip@1/power-domains/domain@1: vtrn,cores: 0x10 names cores beyond the chip's 4 "
     "NeuronCores"},
    {"/chips/chip@1/power-domains/domain@1", "vtrn,cores", 0x2, Error::kBadProperty,
     "/chips/chip@1/power-domains/domain@1: vtrn,cores: 0x2 overlaps domain@0 (0xf): a core "
     "belongs to one domain"},
    {"/chips/chip@1/thermal-zones/zone@1", "reg", 0, Error::kDuplicate,
     "/chips/chip@1/thermal-zones/zone@1: reg: zone 0 is already defined"},
    {"/chips/chip@1/thermal-zones/zone@1", "vtrn,throttle-millicelsius", 150001,
     Error::kBadProperty,
     "/chips/chip@1/thermal-zones/zone@1: vtrn,throttle-millicelsius: 150001 out of range "
     "0..150000"},
    {"/chips/chip@1/thermal-zones/zone@1", "vtrn,critical-millicelsius", 0xffffd8f0,
     Error::kBadProperty,
     "/chips/chip@1/thermal-zones/zone@1: vtrn,critical-millicelsius: 4294957296 out of range "
     "0..150000"},
    {"/chips/chip@1/thermal-zones/zone@1", "vtrn,critical-millicelsius", 85000,
     Error::kBadProperty,
     "/chips/chip@1/thermal-zones/zone@1: vtrn,critical-millicelsius: 85000 must be above "
     "vtrn,throttle-millicelsius (85000)"},
};

void test_bad_value_is_rejected_with_reason(void** state) {
  const BadValue& c = *static_cast<const BadValue*>(*state);
  set_u32(c.path, c.prop, c.value);
  expect(chip1(), c.error, c.message);
  assert_int_equal(g_chip.neuron_cores, 0);  // no half-filled output on error
}

void test_boundary_values_are_accepted(void**) {
  set_u32("/chips/chip@1", "vtrn,neuron-cores", 8);
  set_u32("/chips/chip@1", "vtrn,telemetry-period-ms", 10);
  set_u32("/chips/chip@1", "vtrn,bar2-mib", 1024);
  set_u32("/chips/chip@1/hbm", "vtrn,stacks", 8);
  set_u32("/chips/chip@1/hbm", "vtrn,channels", 32);
  set_u32("/chips/chip@1/hbm", "vtrn,page-bytes", 4096);
  assert_int_equal(fdt_setprop_u64(g_work, node("/chips/chip@1/hbm"), "vtrn,stack-bytes",
                                   64ull * 1024 * kMiB),
                   0);
  set_u32("/chips/chip@1/ports/port@2", "vtrn,max-speed-gtps", 128);
  set_u32("/chips/chip@1/ports/port@2", "vtrn,lanes", 1);
  set_u32("/chips/chip@1/ports/port@2", "vtrn,faulty-lanes", 0x1);
  set_u32("/chips/chip@1/power-domains/domain@1", "vtrn,cores", 0xf0);
  set_u32("/chips/chip@1/thermal-zones/zone@1", "vtrn,throttle-millicelsius", 0);
  set_u32("/chips/chip@1/thermal-zones/zone@1", "vtrn,critical-millicelsius", 150000);
  Result r = chip1();
  assert_string_equal(r.detail(), "");
  assert_int_equal(g_chip.neuron_cores, 8);
  assert_int_equal(g_chip.hbm.total_bytes(), 8ull * 64 * 1024 * kMiB);
  assert_int_equal(g_chip.ports[2].faulty_lane_mask, 0x1);
  assert_int_equal(g_chip.power_domains[1].core_mask, 0xf0);
  assert_int_equal(g_chip.thermal_zones[1].critical_mc, 150000);
}

// Link idle timers are per port: 0 turns a state off, L1 may equal L0s
// (and may be on with L0s off), and the limits themselves are accepted.
void test_link_idle_timers_are_set_per_port_and_zero_turns_them_off(void**) {
  set_u32("/chips/chip@1/ports/port@1", "vtrn,l0s-idle-us", 0);
  set_u32("/chips/chip@1/ports/port@1", "vtrn,l1-idle-us", 0);
  set_u32("/chips/chip@1/ports/port@2", "vtrn,l0s-idle-us", 10000000);
  set_u32("/chips/chip@1/ports/port@2", "vtrn,l1-idle-us", 10000000);
  set_u32("/chips/chip@1/ports/port@3", "vtrn,l0s-idle-us", 0);
  set_u32("/chips/chip@1/ports/port@3", "vtrn,l1-idle-us", 1);
  Result r = chip1();
  assert_string_equal(r.detail(), "");
  assert_int_equal(g_chip.ports[0].l0s_idle_us, vtrn::board::kDefaultL0sIdleUs);
  assert_int_equal(g_chip.ports[0].l1_idle_us, vtrn::board::kDefaultL1IdleUs);
  assert_int_equal(g_chip.ports[1].l0s_idle_us, 0);
  assert_int_equal(g_chip.ports[1].l1_idle_us, 0);
  assert_int_equal(g_chip.ports[2].l0s_idle_us, 10000000);
  assert_int_equal(g_chip.ports[2].l1_idle_us, 10000000);
  assert_int_equal(g_chip.ports[3].l0s_idle_us, 0);
  assert_int_equal(g_chip.ports[3].l1_idle_us, 1);
}

void test_link_idle_timer_with_two_cells_is_rejected(void**) {
  const uint32_t two[2] = {0, 0};
  set_raw("/chips/chip@1/ports/port@2", "vtrn,l0s-idle-us", two, sizeof(two));
  expect(chip1(), Error::kBadProperty,
         "/chips/chip@1/ports/port@2: vtrn,l0s-idle-us: length 8, expected 4 (one u32 cell)");
}

void test_stack_bytes_must_be_a_page_multiple(void**) {
  assert_int_equal(fdt_setprop_u64(g_work, node("/chips/chip@1/hbm"), "vtrn,stack-bytes",
                                   128 * kMiB + 4096),
                   0);
  expect(chip1(), Error::kBadProperty,
         "/chips/chip@1/hbm: vtrn,stack-bytes: must be a multiple of vtrn,page-bytes (65536)");
}

void test_stack_bytes_out_of_range_is_rejected(void**) {
  int hbm = node("/chips/chip@1/hbm");
  assert_int_equal(fdt_setprop_u64(g_work, hbm, "vtrn,stack-bytes", 8 * kMiB), 0);
  expect(chip1(), Error::kBadProperty,
         "/chips/chip@1/hbm: vtrn,stack-bytes: 8388608 out of range 16 MiB..64 GiB");
  assert_int_equal(fdt_setprop_u64(g_work, hbm, "vtrn,stack-bytes", 0xffffffffffff0000ull), 0);
  expect(chip1(), Error::kBadProperty,
         "/chips/chip@1/hbm: vtrn,stack-bytes: 18446744073709486080 out of range 16 MiB..64 GiB");
}

// duplicates and capacity

void test_duplicate_domain_name_is_rejected(void**) {
  set_string("/chips/chip@1/power-domains/domain@1", "vtrn,name", "soc");
  expect(chip1(), Error::kDuplicate,
         "/chips/chip@1/power-domains/domain@1: vtrn,name: \"soc\" is already used by domain@0");
}

void test_duplicate_zone_name_is_rejected(void**) {
  set_string("/chips/chip@1/thermal-zones/zone@1", "vtrn,name", "die");
  expect(chip1(), Error::kDuplicate,
         "/chips/chip@1/thermal-zones/zone@1: vtrn,name: \"die\" is already used by zone@0");
}

// dtc cannot emit a property twice; a hand-made blob can. Point the name of
// vtrn,bar2-mib at the string "vtrn,neuron-cores".
void test_duplicate_property_is_rejected(void**) {
  int chip = node("/chips/chip@1");
  int len = 0;
  const struct fdt_property* cores = fdt_get_property(g_work, chip, "vtrn,neuron-cores", &len);
  struct fdt_property* bar2 = fdt_get_property_w(g_work, chip, "vtrn,bar2-mib", &len);
  assert_non_null(cores);
  assert_non_null(bar2);
  bar2->nameoff = cores->nameoff;
  expect(chip1(), Error::kDuplicate, "/chips/chip@1: vtrn,neuron-cores: appears twice");
}

void test_duplicate_child_node_is_rejected(void**) {
  int chip = node("/chips/chip@1");
  int extra = fdt_add_subnode(g_work, chip, "hbm-spare");
  assert_true(extra >= 0);
  assert_int_equal(fdt_set_name(g_work, extra, "hbm"), 0);
  expect(chip1(), Error::kDuplicate, "/chips/chip@1: two \"hbm\" nodes");
}

void add_port(uint32_t index) {
  char name[16];
  snprintf(name, sizeof(name), "port@%x", index);
  int off = fdt_add_subnode(g_work, node("/chips/chip@1/ports"), name);
  assert_true(off >= 0);
  assert_int_equal(fdt_setprop_string(g_work, off, "compatible", "vtrn,link-port"), 0);
  assert_int_equal(fdt_setprop_u32(g_work, off, "reg", index), 0);
  assert_int_equal(fdt_setprop_u32(g_work, off, "vtrn,max-speed-gtps", 16), 0);
  assert_int_equal(fdt_setprop_u32(g_work, off, "vtrn,lanes", 4), 0);
}

void test_sixteen_ports_fit_and_come_out_sorted(void**) {
  for (uint32_t i = 4; i < vtrn::board::kMaxPorts; ++i) add_port(i);
  Result r = chip1();
  assert_string_equal(r.detail(), "");
  assert_int_equal(g_chip.port_count, 16);
  for (uint32_t i = 0; i < 16; ++i) assert_int_equal(g_chip.ports[i].index, i);
  assert_int_equal(g_chip.ports[15].lanes, 4);
}

void test_too_many_ports_are_rejected(void**) {
  for (uint32_t i = 4; i <= vtrn::board::kMaxPorts; ++i) add_port(i);
  expect(chip1(), Error::kTooMany, "/chips/chip@1/ports: more than 16 ports");
}

void test_too_many_power_domains_are_rejected(void**) {
  int domains = node("/chips/chip@1/power-domains");
  for (uint32_t i = 2; i <= vtrn::board::kMaxPowerDomains; ++i) {
    char name[16];
    snprintf(name, sizeof(name), "domain@%x", i);
    int off = fdt_add_subnode(g_work, domains, name);
    assert_true(off >= 0);
    char label[16];
    snprintf(label, sizeof(label), "pd%u", i);
    assert_int_equal(fdt_setprop_string(g_work, off, "compatible", "vtrn,power-domain"), 0);
    assert_int_equal(fdt_setprop_u32(g_work, off, "reg", i), 0);
    assert_int_equal(fdt_setprop_string(g_work, off, "vtrn,name", label), 0);
    domains = node("/chips/chip@1/power-domains");
  }
  expect(chip1(), Error::kTooMany, "/chips/chip@1/power-domains: more than 8 power domains");
}

// hostile bytes

void test_null_and_tiny_buffers_are_rejected(void**) {
  expect(vtrn::board::parse_board(nullptr, 4096, &g_board), Error::kBadTree, "board: no buffer");
  expect(vtrn::board::parse_board(g_good, 0, &g_board), Error::kBadTree,
         "board: 0 bytes, smaller than a DTB header");
  expect(vtrn::board::parse_chip(g_good, 39, 0, &g_chip), Error::kBadTree,
         "board: 39 bytes, smaller than a DTB header");
}

void test_truncated_buffer_is_rejected(void**) {
  char want[160];
  snprintf(want, sizeof(want), "board: DTB totalsize %zu exceeds the %zu-byte buffer", g_good_size,
           g_good_size - 1);
  expect(vtrn::board::parse_board(g_good, g_good_size - 1, &g_board), Error::kBadTree, want);
  snprintf(want, sizeof(want), "board: DTB totalsize %zu exceeds the %zu-byte buffer", g_good_size,
           g_good_size / 2);
  expect(vtrn::board::parse_chip(g_good, g_good_size / 2, 0, &g_chip), Error::kBadTree, want);
}

void test_garbage_bytes_are_rejected(void**) {
  static uint8_t junk[4096];
  uint32_t x = 0x12345678;
  for (uint8_t& b : junk) {
    x = x * 1664525u + 1013904223u;  // LCG: deterministic noise
    b = static_cast<uint8_t>(x >> 24);
  }
  expect(vtrn::board::parse_board(junk, sizeof(junk), &g_board), Error::kBadTree,
         "board: bad DTB header: FDT_ERR_BADMAGIC");
  // Right magic, nonsense after it.
  junk[0] = 0xd0;
  junk[1] = 0x0d;
  junk[2] = 0xfe;
  junk[3] = 0xed;
  Result r = vtrn::board::parse_board(junk, sizeof(junk), &g_board);
  assert_int_equal(static_cast<uint32_t>(r.code()), static_cast<uint32_t>(Error::kBadTree));
  assert_true(strncmp(r.detail(), "board: ", 7) == 0);
}

// libfdt 1.6.1's fdt_check_full crashes on pre-16 blobs; the parser must
// refuse them before it gets there.
void test_old_dtb_version_is_rejected(void**) {
  memcpy(g_out, g_good, g_good_size);
  fdt_set_version(g_out, 2);
  fdt_set_last_comp_version(g_out, 1);
  expect(vtrn::board::parse_board(g_out, g_good_size, &g_board), Error::kBadTree,
         "board: DTB version 2, 17 required");
}

void test_corrupt_structure_block_is_rejected(void**) {
  memcpy(g_out, g_good, g_good_size);
  // Overwrite the first tag of the structure block (the root's BEGIN_NODE).
  uint32_t off = fdt_off_dt_struct(g_out);
  g_out[off] = 0xde;
  g_out[off + 1] = 0xad;
  expect(vtrn::board::parse_board(g_out, g_good_size, &g_board), Error::kBadTree,
         "board: corrupt DTB: FDT_ERR_BADSTRUCTURE");
}

// Every single-byte corruption of the default board either still parses or
// fails with a message; none may crash or read out of bounds (run under ASan
// with -DVTRN_SANITIZE=ON to make the second half of that claim bite).
void test_every_single_byte_corruption_is_survived(void**) {
  static const uint8_t kPatterns[] = {0x00, 0xff, 0x01, 0x80};
  uint32_t failures = 0;
  for (size_t i = 0; i < g_good_size; ++i) {
    for (uint8_t p : kPatterns) {
      memcpy(g_out, g_good, g_good_size);
      if (g_out[i] == p) continue;
      g_out[i] = p;
      for (uint32_t id = 0; id < 2; ++id) {
        Result r = vtrn::board::parse_chip(g_out, g_good_size, id, &g_chip);
        if (!r.ok()) {
          ++failures;
          if (r.detail()[0] == '\0') fail_msg("byte %zu = 0x%02x: error without message", i, p);
          if (g_chip.neuron_cores != 0) fail_msg("byte %zu: output left half-filled", i);
        }
      }
    }
  }
  // Most corruptions hit something the parser checks.
  assert_true(failures > g_good_size);
}

// resize_board

void parse_out(uint32_t chips) {
  Result r = vtrn::board::parse_board(g_out, sizeof(g_out), &g_board);
  assert_string_equal(r.detail(), "");
  assert_int_equal(g_board.chip_count, chips);
  for (uint32_t id = 0; id < chips; ++id) {
    assert_int_equal(g_board.chip_ids[id], id);
    r = vtrn::board::parse_chip(g_out, sizeof(g_out), id, &g_chip);
    assert_string_equal(r.detail(), "");
    assert_default_chip(g_chip, id);
  }
}

void test_resize_up_clones_the_last_chip(void**) {
  Result r = vtrn::board::resize_board(g_good, g_good_size, 5, g_out, sizeof(g_out));
  assert_string_equal(r.detail(), "");
  assert_true(r.ok());
  assert_true(fdt_totalsize(g_out) < sizeof(g_out));
  parse_out(5);
  assert_string_equal(g_board.model, "vtrn-dev2");
  // Source order is kept and clones follow the originals.
  int chips = fdt_path_offset(g_out, "/chips");
  assert_true(chips >= 0);
  const char* expected[] = {"chip@0", "chip@1", "chip@2", "chip@3", "chip@4"};
  int i = 0;
  int child;
  fdt_for_each_subnode(child, g_out, chips) {
    assert_true(i < 5);
    assert_string_equal(fdt_get_name(g_out, child, nullptr), expected[i]);
    ++i;
  }
  assert_int_equal(i, 5);
}

void test_resize_carries_chip_1_changes_into_clones(void**) {
  set_u32("/chips/chip@1", "vtrn,telemetry-period-ms", 250);
  set_u32("/chips/chip@1/ports/port@3", "vtrn,faulty-lanes", 0x8001);
  Result r = vtrn::board::resize_board(g_work, work_size(), 4, g_out, sizeof(g_out));
  assert_string_equal(r.detail(), "");
  for (uint32_t id = 1; id < 4; ++id) {
    assert_true(vtrn::board::parse_chip(g_out, sizeof(g_out), id, &g_chip).ok());
    assert_int_equal(g_chip.telemetry_period_ms, 250);
    assert_int_equal(g_chip.ports[3].faulty_lane_mask, 0x8001);
  }
  assert_true(vtrn::board::parse_chip(g_out, sizeof(g_out), 0, &g_chip).ok());
  assert_int_equal(g_chip.telemetry_period_ms, 100);
}

void test_resize_down_keeps_the_first_chips(void**) {
  Result r = vtrn::board::resize_board(g_good, g_good_size, 1, g_out, sizeof(g_out));
  assert_string_equal(r.detail(), "");
  parse_out(1);
  assert_true(fdt_path_offset(g_out, "/chips/chip@1") < 0);
  assert_true(fdt_totalsize(g_out) < g_good_size);
}

void test_resize_to_same_count_is_identity(void**) {
  Result r = vtrn::board::resize_board(g_good, g_good_size, 2, g_out, sizeof(g_out));
  assert_string_equal(r.detail(), "");
  parse_out(2);
}

void test_resize_uses_hex_unit_addresses(void**) {
  Result r = vtrn::board::resize_board(g_good, g_good_size, 12, g_out, sizeof(g_out));
  assert_string_equal(r.detail(), "");
  int off = fdt_path_offset(g_out, "/chips/chip@b");
  assert_true(off >= 0);
  assert_true(vtrn::board::parse_chip(g_out, sizeof(g_out), 11, &g_chip).ok());
  assert_string_equal(g_chip.name, "chip@b");
}

void test_resize_to_the_maximum_and_one_more_node_is_too_many(void**) {
  Result r = vtrn::board::resize_board(g_good, g_good_size, vtrn::board::kMaxChips, g_out,
                                       sizeof(g_out));
  assert_string_equal(r.detail(), "");
  parse_out(vtrn::board::kMaxChips);
  // One chip node beyond the capacity is refused before its reg is read.
  assert_int_equal(fdt_open_into(g_out, g_out2, sizeof(g_out2)), 0);
  int chips = fdt_path_offset(g_out2, "/chips");
  int extra = fdt_add_subnode(g_out2, chips, "chip@100");
  assert_true(extra >= 0);
  assert_int_equal(fdt_setprop_string(g_out2, extra, "compatible", "vtrn,chip"), 0);
  assert_int_equal(fdt_setprop_u32(g_out2, extra, "reg", 256), 0);
  expect(vtrn::board::parse_board(g_out2, sizeof(g_out2), &g_board), Error::kTooMany,
         "/chips: more than 256 chips");
}

void test_resize_drops_phandles_from_clones(void**) {
  assert_int_equal(fdt_setprop_u32(g_work, node("/chips/chip@1/ports/port@0"), "phandle", 7), 0);
  Result r = vtrn::board::resize_board(g_work, work_size(), 3, g_out, sizeof(g_out));
  assert_string_equal(r.detail(), "");
  assert_int_equal(fdt_node_offset_by_phandle(g_out, 7),
                   fdt_path_offset(g_out, "/chips/chip@1/ports/port@0"));
  int len = 0;
  assert_null(fdt_getprop(g_out, fdt_path_offset(g_out, "/chips/chip@2/ports/port@0"), "phandle",
                          &len));
}

void test_resize_rejects_bad_counts_and_small_buffers(void**) {
  expect(vtrn::board::resize_board(g_good, g_good_size, 0, g_out, sizeof(g_out)),
         Error::kBadProperty, "resize: 0 chips requested, must be 1..256");
  expect(vtrn::board::resize_board(g_good, g_good_size, 257, g_out, sizeof(g_out)),
         Error::kBadProperty, "resize: 257 chips requested, must be 1..256");
  expect(vtrn::board::resize_board(g_good, g_good_size, 5, g_out, 1024), Error::kTooMany,
         "resize: output buffer of 1024 bytes is too small");
  expect(vtrn::board::resize_board(g_good, g_good_size, 5, g_good, sizeof(g_good)),
         Error::kBadTree, "resize: output buffer overlaps the input");
}

void test_resize_refuses_an_invalid_board(void**) {
  del_prop("/chips/chip@1", "reg");
  expect(vtrn::board::resize_board(g_work, work_size(), 3, g_out, sizeof(g_out)),
         Error::kMissingProperty, "/chips/chip@1: reg: missing");
}

}  // namespace

#define BOARD_TEST(f) cmocka_unit_test_setup(f, fresh_copy)

int main() {
  std::vector<CMUnitTest> tests = {
      BOARD_TEST(test_default_board_parses_to_expected_values),
      BOARD_TEST(test_single_chip_board_parses),
      BOARD_TEST(test_unknown_chip_id_is_reported),
      BOARD_TEST(test_missing_chips_node_is_named),
      BOARD_TEST(test_empty_chips_node_is_rejected),
      BOARD_TEST(test_missing_hbm_node_is_named),
      BOARD_TEST(test_gap_in_chip_ids_is_rejected),
      BOARD_TEST(test_optional_containers_may_be_absent),
      BOARD_TEST(test_optional_properties_take_their_defaults),
      BOARD_TEST(test_wrong_compatible_is_rejected),
      BOARD_TEST(test_compatible_list_containing_ours_is_accepted),
      BOARD_TEST(test_u32_property_with_eight_bytes_is_rejected),
      BOARD_TEST(test_empty_reg_is_rejected),
      BOARD_TEST(test_stack_bytes_as_one_cell_is_rejected),
      BOARD_TEST(test_unterminated_model_is_rejected),
      BOARD_TEST(test_empty_model_is_rejected),
      BOARD_TEST(test_overlong_model_is_rejected),
      BOARD_TEST(test_name_with_embedded_nul_is_rejected),
      BOARD_TEST(test_unterminated_compatible_is_rejected),
      BOARD_TEST(test_boundary_values_are_accepted),
    BOARD_TEST(test_link_idle_timers_are_set_per_port_and_zero_turns_them_off),
    BOARD_TEST(test_link_idle_timer_with_two_cells_is_rejected),
      BOARD_TEST(test_stack_bytes_must_be_a_page_multiple),
      BOARD_TEST(test_stack_bytes_out_of_range_is_rejected),
      BOARD_TEST(test_duplicate_domain_name_is_rejected),
      BOARD_TEST(test_duplicate_zone_name_is_rejected),
      BOARD_TEST(test_duplicate_property_is_rejected),
      BOARD_TEST(test_duplicate_child_node_is_rejected),
      BOARD_TEST(test_sixteen_ports_fit_and_come_out_sorted),
      BOARD_TEST(test_too_many_ports_are_rejected),
      BOARD_TEST(test_too_many_power_domains_are_rejected),
      BOARD_TEST(test_null_and_tiny_buffers_are_rejected),
      BOARD_TEST(test_truncated_buffer_is_rejected),
      BOARD_TEST(test_garbage_bytes_are_rejected),
      BOARD_TEST(test_old_dtb_version_is_rejected),
      BOARD_TEST(test_corrupt_structure_block_is_rejected),
      BOARD_TEST(test_every_single_byte_corruption_is_survived),
      BOARD_TEST(test_resize_up_clones_the_last_chip),
      BOARD_TEST(test_resize_carries_chip_1_changes_into_clones),
      BOARD_TEST(test_resize_down_keeps_the_first_chips),
      BOARD_TEST(test_resize_to_same_count_is_identity),
      BOARD_TEST(test_resize_uses_hex_unit_addresses),
      BOARD_TEST(test_resize_to_the_maximum_and_one_more_node_is_too_many),
      BOARD_TEST(test_resize_drops_phandles_from_clones),
      BOARD_TEST(test_resize_rejects_bad_counts_and_small_buffers),
      BOARD_TEST(test_resize_refuses_an_invalid_board),
  };
  // One named test per table row, so a failure names the node and property.
  std::deque<std::string> names;
  for (const Required& c : kRequired) {
    names.push_back(std::string("test_missing_required_property_is_named ") + c.path + " " +
                    c.prop);
    tests.push_back({names.back().c_str(), test_missing_required_property_is_named, fresh_copy,
                     nullptr, const_cast<Required*>(&c)});
  }
  for (const BadValue& c : kBadValues) {
    names.push_back(std::string("test_bad_value_is_rejected_with_reason ") + c.path + " " +
                    c.prop + "=" + std::to_string(c.value));
    tests.push_back({names.back().c_str(), test_bad_value_is_rejected_with_reason, fresh_copy,
                     nullptr, const_cast<BadValue*>(&c)});
  }
  return _cmocka_run_group_tests("board_parser", tests.data(), tests.size(), nullptr, nullptr);
}
