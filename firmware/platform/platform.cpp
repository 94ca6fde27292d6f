// Platform DTB parsing with libfdt. See fw/platform.h.
//
// Address/size cell counts are taken from each node's parent, as the DT spec
// requires, instead of assuming QEMU's 2/2; PCI ranges use 3 child address
// cells (phys.hi space code, then a 64-bit address) per the PCI bus binding.
#include "fw/platform.h"

#include <libfdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw/panic.h"

namespace fw::platform {
namespace {

using vtrn::hostif::kPanicPlatform;

uint64_t read_cells(const fdt32_t* p, int cells) {
  uint64_t v = 0;
  for (int i = 0; i < cells; ++i) v = (v << 32) | fdt32_to_cpu(p[i]);
  return v;
}

int node_by_compatible(const void* fdt, const char* compatible) {
  const int node = fdt_node_offset_by_compatible(fdt, -1, compatible);
  if (node < 0) {
    panic(kPanicPlatform, "platform dtb: no node compatible with \"%s\"", compatible);
  }
  return node;
}

const char* node_name(const void* fdt, int node) {
  const char* name = fdt_get_name(fdt, node, nullptr);
  return name ? name : "?";
}

// Entry `index` of a node's reg property, cells per its parent.
Range reg_entry(const void* fdt, int node, int index) {
  const int parent = fdt_parent_offset(fdt, node);
  const int ac = fdt_address_cells(fdt, parent);
  const int sc = fdt_size_cells(fdt, parent);
  if (ac < 1 || ac > 2 || sc < 1 || sc > 2) {
    panic(kPanicPlatform, "platform dtb: %s: parent #address-cells/#size-cells %d/%d unsupported",
          node_name(fdt, node), ac, sc);
  }
  int len = 0;
  const fdt32_t* reg = static_cast<const fdt32_t*>(fdt_getprop(fdt, node, "reg", &len));
  const int entry = (ac + sc) * 4;
  if (!reg || len < entry * (index + 1)) {
    panic(kPanicPlatform, "platform dtb: %s: reg: missing entry %d", node_name(fdt, node), index);
  }
  const fdt32_t* p = reg + (ac + sc) * index;
  Range r{read_cells(p, ac), read_cells(p + ac, sc)};
  if (r.size == 0) {
    panic(kPanicPlatform, "platform dtb: %s: reg entry %d has size 0", node_name(fdt, node), index);
  }
  return r;
}

uint32_t uart_clock(const void* fdt, int uart) {
  int len = 0;
  const fdt32_t* clocks = static_cast<const fdt32_t*>(fdt_getprop(fdt, uart, "clocks", &len));
  if (!clocks || len < 4) panic(kPanicPlatform, "platform dtb: %s: clocks: missing", node_name(fdt, uart));
  // The first clock is UARTCLK (clock-names "uartclk", "apb_pclk").
  const int clk = fdt_node_offset_by_phandle(fdt, fdt32_to_cpu(clocks[0]));
  if (clk < 0) panic(kPanicPlatform, "platform dtb: %s: clocks: dangling phandle", node_name(fdt, uart));
  const fdt32_t* hz = static_cast<const fdt32_t*>(fdt_getprop(fdt, clk, "clock-frequency", &len));
  if (!hz || len != 4 || fdt32_to_cpu(*hz) == 0) {
    panic(kPanicPlatform, "platform dtb: %s: clock-frequency: missing or zero", node_name(fdt, clk));
  }
  return fdt32_to_cpu(*hz);
}

uint32_t virt_timer_intid(const void* fdt) {
  const int node = node_by_compatible(fdt, "arm,armv8-timer");
  int len = 0;
  const fdt32_t* irqs = static_cast<const fdt32_t*>(fdt_getprop(fdt, node, "interrupts", &len));
  // Four GIC specifiers of 3 cells: secure phys, non-secure phys, virtual, hyp.
  constexpr int kVirt = 2;
  if (!irqs || len < (kVirt + 1) * 12) {
    panic(kPanicPlatform, "platform dtb: timer: interrupts: no virtual timer entry");
  }
  const uint32_t type = fdt32_to_cpu(irqs[kVirt * 3]);
  const uint32_t num = fdt32_to_cpu(irqs[kVirt * 3 + 1]);
  if (type != 1 || num > 15) {
    panic(kPanicPlatform, "platform dtb: timer: interrupts: virtual timer is not a PPI (%u %u)",
          unsigned(type), unsigned(num));
  }
  return 16 + num;  // PPI n is INTID 16 + n
}

void parse_pci(const void* fdt, Platform* p) {
  const int node = node_by_compatible(fdt, "pci-host-ecam-generic");
  const Range ecam = reg_entry(fdt, node, 0);
  p->ecam = ecam;
  int len = 0;
  const fdt32_t* br = static_cast<const fdt32_t*>(fdt_getprop(fdt, node, "bus-range", &len));
  if (!br || len != 8 || fdt32_to_cpu(br[0]) > fdt32_to_cpu(br[1]) || fdt32_to_cpu(br[1]) > 255) {
    panic(kPanicPlatform, "platform dtb: %s: bus-range: missing or invalid", node_name(fdt, node));
  }
  p->bus_start = uint8_t(fdt32_to_cpu(br[0]));
  p->bus_end = uint8_t(fdt32_to_cpu(br[1]));

  const int pac = fdt_address_cells(fdt, fdt_parent_offset(fdt, node));
  const int sc = fdt_size_cells(fdt, node);
  const fdt32_t* ranges = static_cast<const fdt32_t*>(fdt_getprop(fdt, node, "ranges", &len));
  const int entry = 3 + pac + sc;
  if (!ranges || pac < 1 || pac > 2 || sc < 1 || sc > 2 || len % (entry * 4) != 0 || len == 0) {
    panic(kPanicPlatform, "platform dtb: %s: ranges: missing or malformed", node_name(fdt, node));
  }
  for (int i = 0; i < len / (entry * 4); ++i) {
    const fdt32_t* e = ranges + i * entry;
    const uint32_t space = (fdt32_to_cpu(e[0]) >> 24) & 3;  // 1 I/O, 2 mem32, 3 mem64
    PciWindow w{read_cells(e + 3, pac), read_cells(e + 1, 2), read_cells(e + 3 + pac, sc)};
    if (space == 2 && !p->mmio32.size) p->mmio32 = w;
    if (space == 3 && !p->mmio64.size) p->mmio64 = w;
  }
  if (!p->mmio32.size) {
    panic(kPanicPlatform, "platform dtb: %s: ranges: no 32-bit memory window", node_name(fdt, node));
  }
}

uint32_t count_cpus(const void* fdt) {
  const int cpus = fdt_path_offset(fdt, "/cpus");
  if (cpus < 0) panic(kPanicPlatform, "platform dtb: /cpus: missing");
  uint32_t n = 0;
  int child;
  fdt_for_each_subnode(child, fdt, cpus) {
    const char* type = static_cast<const char*>(fdt_getprop(fdt, child, "device_type", nullptr));
    if (type && strcmp(type, "cpu") == 0) ++n;
  }
  if (n == 0) panic(kPanicPlatform, "platform dtb: /cpus: no cpu nodes");
  return n;
}

}  // namespace

namespace {
const void* checked_tree(uint64_t address) {
  const void* fdt = reinterpret_cast<const void*>(uintptr_t(address));
  if (fdt_magic(fdt) != FDT_MAGIC) {
    panic(kPanicPlatform, "platform dtb: no FDT magic at 0x%llx (found 0x%08x)",
          (unsigned long long)address, unsigned(fdt_magic(fdt)));
  }
  const int rc = fdt_check_header(fdt);
  if (rc != 0) {
    panic(kPanicPlatform, "platform dtb at 0x%llx: bad header: %s", (unsigned long long)address,
          fdt_strerror(rc));
  }
  return fdt;
}

}  // namespace

void parse_console(uint64_t address, uint64_t* uart_base, uint32_t* uart_clock_hz) {
  const void* fdt = checked_tree(address);
  const int uart = node_by_compatible(fdt, "arm,pl011");
  *uart_base = reg_entry(fdt, uart, 0).base;
  *uart_clock_hz = uart_clock(fdt, uart);
}

void parse(uint64_t address, Platform* out) {
  const void* fdt = checked_tree(address);
  Platform& p = *out;
  p.dtb = Range{address, fdt_totalsize(fdt)};

  const int mem = fdt_path_offset(fdt, "/memory");
  int memnode = mem;
  if (memnode < 0) {
    // virt names it memory@<base>; find it by device_type.
    memnode = fdt_node_offset_by_prop_value(fdt, -1, "device_type", "memory", sizeof "memory");
  }
  if (memnode < 0) panic(kPanicPlatform, "platform dtb: /memory: missing");
  p.ram = reg_entry(fdt, memnode, 0);

  p.cpu_count = count_cpus(fdt);

  const int uart = node_by_compatible(fdt, "arm,pl011");
  p.uart_base = reg_entry(fdt, uart, 0).base;
  p.uart_clock_hz = uart_clock(fdt, uart);

  const int gic = node_by_compatible(fdt, "arm,cortex-a15-gic");
  const Range gicd = reg_entry(fdt, gic, 0);
  const Range gicc = reg_entry(fdt, gic, 1);
  p.gicd_base = gicd.base;
  p.gicd_size = gicd.size;
  p.gicc_base = gicc.base;
  p.gicc_size = gicc.size;
  const int v2m = node_by_compatible(fdt, "arm,gic-v2m-frame");
  const Range v2mr = reg_entry(fdt, v2m, 0);
  p.v2m_base = v2mr.base;
  p.v2m_size = v2mr.size;

  p.virt_timer_intid = virt_timer_intid(fdt);
  parse_pci(fdt, &p);

  const int chosen = fdt_path_offset(fdt, "/chosen");
  int len = 0;
  const char* args = chosen >= 0 ? static_cast<const char*>(fdt_getprop(fdt, chosen, "bootargs", &len))
                                 : nullptr;
  if (!args || len <= 0 || args[len - 1] != '\0') {
    panic(kPanicPlatform, "platform dtb: /chosen/bootargs: missing (launch with -append \"vtrn.chip=...\")");
  }
  snprintf(p.bootargs, sizeof p.bootargs, "%s", args);
  char err[128];
  if (!parse_bootargs(p.bootargs, &p.chip_id, &p.board_address, &p.board_size, err, sizeof err)) {
    panic(kPanicPlatform, "%s", err);
  }
}

}  // namespace fw::platform
