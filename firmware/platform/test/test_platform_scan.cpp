// Host unit tests of the firmware's one-pass platform DTB scan
// (firmware/platform/platform_scan.cpp, the same file the image compiles),
// run on QEMU's own virt tree (qemu-virt.dts, compiled by the build into
// VTRN_QEMU_VIRT_DTB). The scan replaced per-property libfdt lookups, so the
// first tests hold it to what those lookups return; the rest break the tree
// with libfdt's write API and check that the error names the node/property.
#include <libfdt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "fw/platform.h"

namespace {

using fw::platform::Platform;
using fw::platform::Scan;

std::vector<uint8_t> g_tree;
vtrn::Error g_err;

std::vector<uint8_t> load_fixture() {
  std::vector<uint8_t> out;
  FILE* f = fopen(VTRN_QEMU_VIRT_DTB, "rb");
  if (!f) return out;
  uint8_t buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  fclose(f);
  // Room for the edits the error tests make.
  out.resize(out.size() + 4096);
  return out;
}

int setup(void**) {
  g_tree = load_fixture();
  g_err = vtrn::Error();
  if (g_tree.empty()) return -1;
  return fdt_open_into(g_tree.data(), g_tree.data(), int(g_tree.size())) == 0 ? 0 : -1;
}

void* fdt() { return g_tree.data(); }

bool scan_and_resolve(Platform* p) {
  Scan s;
  if (!(g_err = fw::platform::scan_tree(fdt(), &s)).ok()) return false;
  return (g_err = fw::platform::resolve_platform(fdt(), s, p)).ok();
}

void test_scan_finds_the_same_nodes_as_libfdt_lookups(void**) {
  Scan s;
  assert_true((g_err = fw::platform::scan_tree(fdt(), &s)).ok());
  assert_int_equal(s.uart.offset, fdt_node_offset_by_compatible(fdt(), -1, "arm,pl011"));
  assert_int_equal(s.gic.offset, fdt_node_offset_by_compatible(fdt(), -1, "arm,cortex-a15-gic"));
  assert_int_equal(s.v2m.offset, fdt_node_offset_by_compatible(fdt(), -1, "arm,gic-v2m-frame"));
  assert_int_equal(s.timer.offset, fdt_node_offset_by_compatible(fdt(), -1, "arm,armv8-timer"));
  assert_int_equal(s.pci.offset,
                   fdt_node_offset_by_compatible(fdt(), -1, "pci-host-ecam-generic"));
  assert_int_equal(s.memory.offset, fdt_path_offset(fdt(), "/memory"));
  assert_int_equal(s.chosen, fdt_path_offset(fdt(), "/chosen"));
  // v2m sits under the GIC node: its reg uses the GIC's cells, not the root's.
  const int gic = fdt_parent_offset(fdt(), s.v2m.offset);
  assert_int_equal(s.v2m.parent_address_cells, fdt_address_cells(fdt(), gic));
  assert_int_equal(s.v2m.parent_size_cells, fdt_size_cells(fdt(), gic));
  assert_int_equal(s.pci.size_cells, fdt_size_cells(fdt(), s.pci.offset));
  assert_int_equal(s.cpu_count, 2);
}

void test_resolve_reads_every_qemu_virt_device(void**) {
  Platform p;
  assert_true(scan_and_resolve(&p));
  assert_int_equal(p.ram.base, 0x40000000u);
  assert_int_equal(p.ram.size, 320u << 20);
  assert_int_equal(p.cpu_count, 2);
  assert_int_equal(p.uart_base, 0x09000000u);
  assert_int_equal(p.uart_clock_hz, 24000000u);
  assert_int_equal(p.gicd_base, 0x08000000u);
  assert_int_equal(p.gicc_base, 0x08010000u);
  assert_int_equal(p.gicc_size, 0x10000u);
  assert_int_equal(p.v2m_base, 0x08020000u);
  assert_int_equal(p.v2m_size, 0x1000u);
  assert_int_equal(p.virt_timer_intid, 27);
  assert_int_equal(p.ecam.base, 0x4010000000ull);
  assert_int_equal(p.ecam.size, 0x10000000u);
  assert_int_equal(p.bus_start, 0);
  assert_int_equal(p.bus_end, 255);
  assert_int_equal(p.mmio32.cpu_base, 0x10000000u);
  assert_int_equal(p.mmio32.size, 0x2eff0000u);
  assert_int_equal(p.mmio64.cpu_base, 0x8000000000ull);
  assert_int_equal(p.mmio64.size, 0x8000000000ull);
  assert_int_equal(p.chip_id, 1);
  assert_int_equal(p.board_address, 0x40100000u);
  assert_int_equal(p.board_size, 2758);
}

void test_cpus_and_psci_conduit_are_read(void**) {
  Platform p;
  assert_true(scan_and_resolve(&p));
  assert_int_equal(p.cpu_mpidr[0], 0);
  assert_int_equal(p.cpu_mpidr[1], 1);
  assert_true(p.cpus_use_psci);
  assert_int_equal(int(p.psci_method), int(fw::platform::PsciMethod::kHvc));
}

void test_psci_smc_method_is_read(void**) {
  const int psci = fdt_node_offset_by_compatible(fdt(), -1, "arm,psci-0.2");
  assert_int_equal(fdt_setprop_string(fdt(), psci, "method", "smc"), 0);
  Platform p;
  assert_true(scan_and_resolve(&p));
  assert_int_equal(int(p.psci_method), int(fw::platform::PsciMethod::kSmc));
}

void test_unknown_psci_method_is_named(void**) {
  const int psci = fdt_node_offset_by_compatible(fdt(), -1, "arm,psci-0.2");
  assert_int_equal(fdt_setprop_string(fdt(), psci, "method", "mailbox"), 0);
  Platform p;
  assert_false(scan_and_resolve(&p));
  assert_string_equal(g_err.detail(), "platform dtb: psci: method: expected \"hvc\" or \"smc\"");
}

void test_cpu_without_psci_enable_method_is_noticed(void**) {
  const int cpu1 = fdt_path_offset(fdt(), "/cpus/cpu@1");
  assert_int_equal(fdt_setprop_string(fdt(), cpu1, "enable-method", "spin-table"), 0);
  Platform p;
  assert_true(scan_and_resolve(&p));
  assert_false(p.cpus_use_psci);
}

void test_console_alone_resolves_before_the_rest(void**) {
  // A tree without a GIC still gives the console, so the panic is printed.
  const int gic = fdt_node_offset_by_compatible(fdt(), -1, "arm,cortex-a15-gic");
  assert_int_equal(fdt_setprop_string(fdt(), gic, "compatible", "vendor,other-gic"), 0);
  Scan s;
  assert_true((g_err = fw::platform::scan_tree(fdt(), &s)).ok());
  uint64_t base = 0;
  uint32_t hz = 0;
  assert_true((g_err = fw::platform::resolve_console(fdt(), s, &base, &hz)).ok());
  assert_int_equal(base, 0x09000000u);
  Platform p;
  assert_false((g_err = fw::platform::resolve_platform(fdt(), s, &p)).ok());
  assert_non_null(strstr(g_err.detail(), "\"arm,cortex-a15-gic\""));
}

void test_missing_uart_is_named(void**) {
  const int uart = fdt_node_offset_by_compatible(fdt(), -1, "arm,pl011");
  assert_int_equal(fdt_del_node(fdt(), uart), 0);
  Scan s;
  assert_true((g_err = fw::platform::scan_tree(fdt(), &s)).ok());
  uint64_t base = 0;
  uint32_t hz = 0;
  assert_false((g_err = fw::platform::resolve_console(fdt(), s, &base, &hz)).ok());
  assert_string_equal(g_err.detail(), "platform dtb: no node compatible with \"arm,pl011\"");
}

void test_dangling_uart_clock_is_reported(void**) {
  const int uart = fdt_node_offset_by_compatible(fdt(), -1, "arm,pl011");
  assert_int_equal(fdt_setprop_u32(fdt(), uart, "clocks", 0x1234), 0);
  Platform p;
  assert_false(scan_and_resolve(&p));
  assert_string_equal(g_err.detail(), "platform dtb: pl011@9000000: clocks: dangling phandle");
}

void test_clock_without_frequency_names_the_clock_node(void**) {
  const int clk = fdt_path_offset(fdt(), "/apb-pclk");
  assert_true(clk >= 0);
  assert_int_equal(fdt_delprop(fdt(), clk, "clock-frequency"), 0);
  Platform p;
  assert_false(scan_and_resolve(&p));
  assert_string_equal(g_err.detail(), "platform dtb: apb-pclk: clock-frequency: missing or zero");
}

void test_missing_bootargs_is_reported(void**) {
  const int chosen = fdt_path_offset(fdt(), "/chosen");
  assert_int_equal(fdt_delprop(fdt(), chosen, "bootargs"), 0);
  Platform p;
  assert_false(scan_and_resolve(&p));
  assert_non_null(strstr(g_err.detail(), "/chosen/bootargs: missing"));
}

void test_unsupported_parent_cells_are_reported(void**) {
  // The GIC's children (the v2m frame) inherit #address-cells 3.
  const int gic = fdt_node_offset_by_compatible(fdt(), -1, "arm,cortex-a15-gic");
  assert_int_equal(fdt_setprop_u32(fdt(), gic, "#address-cells", 3), 0);
  Platform p;
  assert_false(scan_and_resolve(&p));
  assert_string_equal(g_err.detail(),
                      "platform dtb: v2m@8020000: parent #address-cells/#size-cells 3/2 "
                      "unsupported");
}

void test_cpus_without_cpu_nodes_are_reported(void**) {
  const int cpus = fdt_path_offset(fdt(), "/cpus");
  int child;
  // Retag every cpu node; the topology (cpu-map) stays.
  fdt_for_each_subnode(child, fdt(), cpus) {
    if (fdt_getprop(fdt(), child, "device_type", nullptr)) {
      assert_int_equal(fdt_setprop_string(fdt(), child, "device_type", "dsp"), 0);
    }
  }
  Platform p;
  assert_false(scan_and_resolve(&p));
  assert_string_equal(g_err.detail(), "platform dtb: /cpus: no cpu nodes");
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_scan_finds_the_same_nodes_as_libfdt_lookups, setup),
      cmocka_unit_test_setup(test_resolve_reads_every_qemu_virt_device, setup),
      cmocka_unit_test_setup(test_cpus_and_psci_conduit_are_read, setup),
      cmocka_unit_test_setup(test_psci_smc_method_is_read, setup),
      cmocka_unit_test_setup(test_unknown_psci_method_is_named, setup),
      cmocka_unit_test_setup(test_cpu_without_psci_enable_method_is_noticed, setup),
      cmocka_unit_test_setup(test_console_alone_resolves_before_the_rest, setup),
      cmocka_unit_test_setup(test_missing_uart_is_named, setup),
      cmocka_unit_test_setup(test_dangling_uart_clock_is_reported, setup),
      cmocka_unit_test_setup(test_clock_without_frequency_names_the_clock_node, setup),
      cmocka_unit_test_setup(test_missing_bootargs_is_reported, setup),
      cmocka_unit_test_setup(test_unsupported_parent_cells_are_reported, setup),
      cmocka_unit_test_setup(test_cpus_without_cpu_nodes_are_reported, setup),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
