// Platform DTB: one pass over QEMU's tree, then the lookups on what it found.
// See fw/platform.h. Portable (libfdt, <string.h>, snprintf; no panic), so the
// host tests run exactly this file on a QEMU virt tree.
//
// Why one pass: under TCG every guest instruction counts, and libfdt's
// lookups are linear walks from the root in which fdt_next_tag reads node
// names one byte per fdt_offset_ptr call. fdt_parent_offset (needed for a
// node's #address-cells) and fdt_node_offset_by_phandle walk the whole tree
// again each time. Here the walk happens once, keeping each depth's cell
// counts on a small stack, and only the handful of properties read
// afterwards use fdt_getprop on a known node.
//
// Cell counts follow the DT spec instead of assuming QEMU's 2/2: reg uses
// the parent's #address-cells/#size-cells (2 and 1 when absent, as libfdt's
// fdt_address_cells/fdt_size_cells), PCI ranges use 3 child address cells
// (phys.hi space code, then a 64-bit address) per the PCI bus binding.
#include <libfdt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fw/platform.h"

namespace fw::platform {
namespace {

constexpr int kMaxDepth = 16;
constexpr int kBadCells = -1;  // present but not one 32-bit cell

struct Cells {
  int address = 2;
  int size = 1;
};

using vtrn::Code;
using vtrn::Error;

// Every problem of QEMU's tree is a bad hardware description: the detail
// names the node and property.
__attribute__((format(printf, 2, 3))) bool fail(Error* err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  *err = Error::vformat(Code::kBadHardware, fmt, ap);
  va_end(ap);
  return false;
}

uint32_t cell(const void* p) { return fdt32_to_cpu(*static_cast<const fdt32_t*>(p)); }

uint64_t read_cells(const fdt32_t* p, int cells) {
  uint64_t v = 0;
  for (int i = 0; i < cells; ++i) v = (v << 32) | fdt32_to_cpu(p[i]);
  return v;
}

int cells_value(const void* val, int len) { return len == 4 ? int(cell(val)) : kBadCells; }

// libfdt's path rule: "memory" names memory and memory@<unit-address>.
bool name_is(const char* name, const char* want) {
  const size_t n = strlen(want);
  return strncmp(name, want, n) == 0 && (name[n] == '\0' || name[n] == '@');
}

bool string_is(const void* val, int len, const char* want) {
  const size_t n = strlen(want) + 1;
  return len == int(n) && memcmp(val, want, n) == 0;
}

const char* node_name(const void* fdt, int node) {
  const char* name = fdt_get_name(fdt, node, nullptr);
  return name ? name : "?";
}

void take(ScanNode* slot, int node, const Cells& parent, const Cells& own) {
  if (slot->offset >= 0) return;  // first match in document order wins
  slot->offset = node;
  slot->parent_address_cells = parent.address;
  slot->parent_size_cells = parent.size;
  slot->size_cells = own.size;
}

bool need(const ScanNode& n, const char* compatible, Error* err) {
  if (n.offset >= 0) return true;
  return fail(err, "platform dtb: no node compatible with \"%s\"", compatible);
}

// Entry `index` of a node's reg property, cells per its parent.
bool reg_entry(const void* fdt, const ScanNode& n, int index, Range* out, Error* err) {
  const int ac = n.parent_address_cells;
  const int sc = n.parent_size_cells;
  if (ac < 1 || ac > 2 || sc < 1 || sc > 2) {
    return fail(err, "platform dtb: %s: parent #address-cells/#size-cells %d/%d unsupported",
                node_name(fdt, n.offset), ac, sc);
  }
  int len = 0;
  const fdt32_t* reg = static_cast<const fdt32_t*>(fdt_getprop(fdt, n.offset, "reg", &len));
  const int entry = (ac + sc) * 4;
  if (!reg || len < entry * (index + 1)) {
    return fail(err, "platform dtb: %s: reg: missing entry %d", node_name(fdt, n.offset),
                index);
  }
  const fdt32_t* p = reg + (ac + sc) * index;
  *out = Range{read_cells(p, ac), read_cells(p + ac, sc)};
  if (out->size == 0) {
    return fail(err, "platform dtb: %s: reg entry %d has size 0", node_name(fdt, n.offset),
                index);
  }
  return true;
}

int phandle_node(const void* fdt, const Scan& scan, uint32_t phandle) {
  for (unsigned i = 0; i < scan.phandle_count; ++i) {
    if (scan.phandles[i].phandle == phandle) return scan.phandles[i].offset;
  }
  // More phandles than the table holds: the slow lookup, still correct.
  return scan.phandles_overflow ? fdt_node_offset_by_phandle(fdt, phandle) : -FDT_ERR_NOTFOUND;
}

bool uart_clock(const void* fdt, const Scan& scan, uint32_t* hz_out, Error* err) {
  const int uart = scan.uart.offset;
  int len = 0;
  const fdt32_t* clocks = static_cast<const fdt32_t*>(fdt_getprop(fdt, uart, "clocks", &len));
  if (!clocks || len < 4) {
    return fail(err, "platform dtb: %s: clocks: missing", node_name(fdt, uart));
  }
  // The first clock is UARTCLK (clock-names "uartclk", "apb_pclk").
  const int clk = phandle_node(fdt, scan, fdt32_to_cpu(clocks[0]));
  if (clk < 0) {
    return fail(err, "platform dtb: %s: clocks: dangling phandle", node_name(fdt, uart));
  }
  const fdt32_t* hz = static_cast<const fdt32_t*>(fdt_getprop(fdt, clk, "clock-frequency", &len));
  if (!hz || len != 4 || fdt32_to_cpu(*hz) == 0) {
    return fail(err, "platform dtb: %s: clock-frequency: missing or zero",
                node_name(fdt, clk));
  }
  *hz_out = fdt32_to_cpu(*hz);
  return true;
}

bool virt_timer_intid(const void* fdt, const Scan& scan, uint32_t* out, Error* err) {
  if (!need(scan.timer, "arm,armv8-timer", err)) return false;
  int len = 0;
  const fdt32_t* irqs =
      static_cast<const fdt32_t*>(fdt_getprop(fdt, scan.timer.offset, "interrupts", &len));
  // Four GIC specifiers of 3 cells: secure phys, non-secure phys, virtual, hyp.
  constexpr int kVirt = 2;
  if (!irqs || len < (kVirt + 1) * 12) {
    return fail(err, "platform dtb: timer: interrupts: no virtual timer entry");
  }
  const uint32_t type = fdt32_to_cpu(irqs[kVirt * 3]);
  const uint32_t num = fdt32_to_cpu(irqs[kVirt * 3 + 1]);
  if (type != 1 || num > 15) {
    return fail(err, "platform dtb: timer: interrupts: virtual timer is not a PPI (%u %u)",
                unsigned(type), unsigned(num));
  }
  *out = 16 + num;  // PPI n is INTID 16 + n
  return true;
}

bool parse_pci(const void* fdt, const Scan& scan, Platform* p, Error* err) {
  if (!need(scan.pci, "pci-host-ecam-generic", err)) return false;
  const int node = scan.pci.offset;
  if (!reg_entry(fdt, scan.pci, 0, &p->ecam, err)) return false;
  int len = 0;
  const fdt32_t* br = static_cast<const fdt32_t*>(fdt_getprop(fdt, node, "bus-range", &len));
  if (!br || len != 8 || fdt32_to_cpu(br[0]) > fdt32_to_cpu(br[1]) || fdt32_to_cpu(br[1]) > 255) {
    return fail(err, "platform dtb: %s: bus-range: missing or invalid", node_name(fdt, node));
  }
  p->bus_start = uint8_t(fdt32_to_cpu(br[0]));
  p->bus_end = uint8_t(fdt32_to_cpu(br[1]));

  const int pac = scan.pci.parent_address_cells;
  const int sc = scan.pci.size_cells;
  const fdt32_t* ranges = static_cast<const fdt32_t*>(fdt_getprop(fdt, node, "ranges", &len));
  const int entry = 3 + pac + sc;
  if (!ranges || pac < 1 || pac > 2 || sc < 1 || sc > 2 || len % (entry * 4) != 0 || len == 0) {
    return fail(err, "platform dtb: %s: ranges: missing or malformed", node_name(fdt, node));
  }
  for (int i = 0; i < len / (entry * 4); ++i) {
    const fdt32_t* e = ranges + i * entry;
    const uint32_t space = (fdt32_to_cpu(e[0]) >> 24) & 3;  // 1 I/O, 2 mem32, 3 mem64
    PciWindow w{read_cells(e + 3, pac), read_cells(e + 1, 2), read_cells(e + 3 + pac, sc)};
    if (space == 2 && !p->mmio32.size) p->mmio32 = w;
    if (space == 3 && !p->mmio64.size) p->mmio64 = w;
  }
  if (!p->mmio32.size) {
    return fail(err, "platform dtb: %s: ranges: no 32-bit memory window",
                node_name(fdt, node));
  }
  return true;
}

// Each kept cpu node's reg (its MPIDR affinity, #address-cells of /cpus, no
// size) and enable-method, and the /psci conduit. A tree without PSCI is
// valid (the chip then runs on core 0 alone); a malformed reg is not.
bool resolve_cpus(const void* fdt, const Scan& scan, Platform* p, Error* err) {
  const uint32_t kept = scan.cpu_count < kMaxCpus ? scan.cpu_count : kMaxCpus;
  bool all_psci = kept > 0;
  for (uint32_t i = 0; i < kept; ++i) {
    const ScanNode& n = scan.cpus[i];
    const int ac = n.parent_address_cells;
    if (ac < 1 || ac > 2) {
      return fail(err, "platform dtb: %s: parent #address-cells %d unsupported",
                  node_name(fdt, n.offset), ac);
    }
    int len = 0;
    const fdt32_t* reg = static_cast<const fdt32_t*>(fdt_getprop(fdt, n.offset, "reg", &len));
    if (!reg || len != ac * 4) {
      return fail(err, "platform dtb: %s: reg: expected %d cell(s)",
                  node_name(fdt, n.offset), ac);
    }
    p->cpu_mpidr[i] = read_cells(reg, ac);
    const void* method = fdt_getprop(fdt, n.offset, "enable-method", &len);
    if (!method || !string_is(method, len, "psci")) all_psci = false;
  }
  p->cpus_use_psci = all_psci;
  p->psci_method = PsciMethod::kNone;
  if (scan.psci.offset >= 0) {
    int len = 0;
    const void* m = fdt_getprop(fdt, scan.psci.offset, "method", &len);
    if (m && string_is(m, len, "hvc")) {
      p->psci_method = PsciMethod::kHvc;
    } else if (m && string_is(m, len, "smc")) {
      p->psci_method = PsciMethod::kSmc;
    } else {
      return fail(err, "platform dtb: %s: method: expected \"hvc\" or \"smc\"",
                  node_name(fdt, scan.psci.offset));
    }
  }
  return true;
}

}  // namespace

static bool scan_tree_into(const void* fdt, Scan* out, Error* err) {
  *out = Scan{};
  Cells cells[kMaxDepth + 1];
  ScanNode memory_by_type;
  bool in_cpus = false;
  int depth = -1;
  int node = fdt_next_node(fdt, -1, &depth);
  for (; node >= 0 && depth >= 0; node = fdt_next_node(fdt, node, &depth)) {
    if (depth > kMaxDepth) {
      return fail(err, "platform dtb: %s: nested deeper than %d levels",
                  node_name(fdt, node), kMaxDepth);
    }
    const Cells parent = depth > 0 ? cells[depth - 1] : Cells{};
    Cells own;
    const char* compatible = nullptr;
    int compatible_len = 0;
    bool is_cpu = false, is_memory = false, has_phandle = false;
    uint32_t phandle = 0;

    int prop;
    fdt_for_each_property_offset(prop, fdt, node) {
      const char* name = nullptr;
      int len = 0;
      const void* val = fdt_getprop_by_offset(fdt, prop, &name, &len);
      if (!val || !name) {
        return fail(err, "platform dtb: %s: unreadable property: %s",
                    node_name(fdt, node), fdt_strerror(len < 0 ? len : -FDT_ERR_BADSTRUCTURE));
      }
      if (strcmp(name, "compatible") == 0) {
        compatible = static_cast<const char*>(val);
        compatible_len = len;
      } else if (strcmp(name, "#address-cells") == 0) {
        own.address = cells_value(val, len);
      } else if (strcmp(name, "#size-cells") == 0) {
        own.size = cells_value(val, len);
      } else if (strcmp(name, "device_type") == 0) {
        is_cpu = string_is(val, len, "cpu");
        is_memory = string_is(val, len, "memory");
      } else if ((strcmp(name, "phandle") == 0 || strcmp(name, "linux,phandle") == 0) &&
                 len == 4) {
        has_phandle = true;
        phandle = cell(val);
      }
    }
    if (prop != -FDT_ERR_NOTFOUND) {
      return fail(err, "platform dtb: %s: properties: %s", node_name(fdt, node),
                  fdt_strerror(prop));
    }
    cells[depth] = own;

    if (compatible) {
      auto is = [&](const char* c) {
        return fdt_stringlist_contains(compatible, compatible_len, c) != 0;
      };
      if (is("arm,pl011")) take(&out->uart, node, parent, own);
      if (is("arm,cortex-a15-gic")) take(&out->gic, node, parent, own);
      if (is("arm,gic-v2m-frame")) take(&out->v2m, node, parent, own);
      if (is("arm,armv8-timer")) take(&out->timer, node, parent, own);
      if (is("pci-host-ecam-generic")) take(&out->pci, node, parent, own);
      if (is("arm,psci-1.0") || is("arm,psci-0.2") || is("arm,psci")) {
        take(&out->psci, node, parent, own);
      }
    }
    if (is_memory) take(&memory_by_type, node, parent, own);
    if (has_phandle) {
      if (out->phandle_count < Scan::kMaxPhandles) {
        out->phandles[out->phandle_count++] = PhandleNode{phandle, node};
      } else {
        out->phandles_overflow = true;
      }
    }
    if (depth == 1) {
      const char* name = node_name(fdt, node);
      in_cpus = name_is(name, "cpus");
      if (in_cpus) out->have_cpus = true;
      if (name_is(name, "chosen") && out->chosen < 0) out->chosen = node;
      if (name_is(name, "memory")) take(&out->memory, node, parent, own);
    } else if (depth == 2 && in_cpus && is_cpu) {
      if (out->cpu_count < kMaxCpus) take(&out->cpus[out->cpu_count], node, parent, own);
      ++out->cpu_count;
    }
  }
  if (node < 0 && node != -FDT_ERR_NOTFOUND) {
    return fail(err, "platform dtb: structure block: %s", fdt_strerror(node));
  }
  if (out->memory.offset < 0) out->memory = memory_by_type;
  return true;
}

static bool resolve_console_into(const void* fdt, const Scan& scan, uint64_t* uart_base,
                     uint32_t* uart_clock_hz, Error* err) {
  if (!need(scan.uart, "arm,pl011", err)) return false;
  Range r;
  if (!reg_entry(fdt, scan.uart, 0, &r, err)) return false;
  uint32_t hz = 0;
  if (!uart_clock(fdt, scan, &hz, err)) return false;
  *uart_base = r.base;
  *uart_clock_hz = hz;
  return true;
}

static bool resolve_platform_into(const void* fdt, const Scan& scan, Platform* out, Error* err) {
  Platform& p = *out;
  p.dtb = Range{0, fdt_totalsize(fdt)};
  if (scan.memory.offset < 0) return fail(err, "platform dtb: /memory: missing");
  if (!reg_entry(fdt, scan.memory, 0, &p.ram, err)) return false;

  if (!scan.have_cpus) return fail(err, "platform dtb: /cpus: missing");
  if (scan.cpu_count == 0) return fail(err, "platform dtb: /cpus: no cpu nodes");
  p.cpu_count = scan.cpu_count;
  if (!resolve_cpus(fdt, scan, &p, err)) return false;

  if (!resolve_console_into(fdt, scan, &p.uart_base, &p.uart_clock_hz, err)) return false;

  if (!need(scan.gic, "arm,cortex-a15-gic", err)) return false;
  Range gicd, gicc;
  if (!reg_entry(fdt, scan.gic, 0, &gicd, err)) return false;
  if (!reg_entry(fdt, scan.gic, 1, &gicc, err)) return false;
  p.gicd_base = gicd.base;
  p.gicd_size = gicd.size;
  p.gicc_base = gicc.base;
  p.gicc_size = gicc.size;
  if (!need(scan.v2m, "arm,gic-v2m-frame", err)) return false;
  Range v2m;
  if (!reg_entry(fdt, scan.v2m, 0, &v2m, err)) return false;
  p.v2m_base = v2m.base;
  p.v2m_size = v2m.size;

  if (!virt_timer_intid(fdt, scan, &p.virt_timer_intid, err)) return false;
  if (!parse_pci(fdt, scan, &p, err)) return false;

  int len = 0;
  const char* args = scan.chosen >= 0
                         ? static_cast<const char*>(fdt_getprop(fdt, scan.chosen, "bootargs", &len))
                         : nullptr;
  if (!args || len <= 0 || args[len - 1] != '\0') {
    return fail(err, "platform dtb: /chosen/bootargs: missing (launch with -append \"vtrn.chip=...\")");
  }
  snprintf(p.bootargs, sizeof p.bootargs, "%s", args);
  *err = parse_bootargs(p.bootargs, &p.chip_id, &p.board_address, &p.board_size);
  return err->ok();
}

Error scan_tree(const void* fdt, Scan* out) {
  Error e;
  (void)scan_tree_into(fdt, out, &e);
  return e;
}

Error resolve_console(const void* fdt, const Scan& scan, uint64_t* uart_base,
                      uint32_t* uart_clock_hz) {
  Error e;
  (void)resolve_console_into(fdt, scan, uart_base, uart_clock_hz, &e);
  return e;
}

Error resolve_platform(const void* fdt, const Scan& scan, Platform* out) {
  Error e;
  (void)resolve_platform_into(fdt, scan, out, &e);
  return e;
}

}  // namespace fw::platform
