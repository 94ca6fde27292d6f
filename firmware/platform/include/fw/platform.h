// What the firmware learns from QEMU's platform DTB (the "virt" machine's
// own device tree, at the start of RAM): where the UART, GIC, GICv2m frame,
// PCIe host bridge and RAM are, which PPI the virtual timer uses, how many
// cores there are, and the vtrn boot arguments from /chosen/bootargs.
//
// Every value is read from the tree, never assumed; a missing or malformed
// node stops boot with kPanicPlatform and a reason naming the node and
// property. Not a general DT library: it reads exactly these nodes.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/error.h"

namespace fw::platform {

// QEMU virt puts its DTB at the start of RAM when the image is linked above
// it (see boot/firmware.ld); this address is part of the launch contract.
inline constexpr uint64_t kPlatformDtbAddress = 0x40000000;

struct Range {
  uint64_t base = 0;
  uint64_t size = 0;
};

struct PciWindow {
  uint64_t cpu_base = 0;
  uint64_t pci_base = 0;
  uint64_t size = 0;
};

inline constexpr uint32_t kMaxCpus = 8;  // vtrn,neuron-cores binding limit

// How PSCI calls reach the firmware below us (/psci "method"): QEMU virt
// without EL2/EL3 emulates PSCI itself and takes them as HVC.
enum class PsciMethod : uint8_t { kNone = 0, kHvc = 1, kSmc = 2 };

struct Platform {
  Range dtb;  // the platform DTB itself (totalsize)
  Range ram;  // /memory reg
  uint32_t cpu_count = 0;
  // MPIDR affinity of each cpu node (its reg), in document order; what
  // PSCI CPU_ON takes as target_cpu. Only the first kMaxCpus are kept.
  uint64_t cpu_mpidr[kMaxCpus] = {};
  // True when every kept cpu node says enable-method = "psci".
  bool cpus_use_psci = false;
  PsciMethod psci_method = PsciMethod::kNone;
  uint64_t uart_base = 0;
  uint32_t uart_clock_hz = 0;
  uint64_t gicd_base = 0;
  uint64_t gicc_base = 0;
  uint64_t gicd_size = 0;
  uint64_t gicc_size = 0;
  uint64_t v2m_base = 0;
  uint64_t v2m_size = 0;
  uint32_t virt_timer_intid = 0;
  Range ecam;
  uint8_t bus_start = 0;
  uint8_t bus_end = 0;
  PciWindow mmio32;
  PciWindow mmio64;  // size 0 if the bridge has no 64-bit window
  char bootargs[256] = {};
  uint32_t chip_id = 0;
  uint64_t board_address = 0;
  uint64_t board_size = 0;
};

// One pass over the tree's structure block, recording the nodes the
// firmware needs (first match for each, in document order, as
// fdt_node_offset_by_compatible would give) with their parents' cell counts.
// Portable (libfdt only, no panic), so the host tests run it on a QEMU virt
// tree. It exists because every libfdt lookup (by compatible, path, phandle,
// or fdt_parent_offset) walks the tree from the root and re-reads every node
// name one byte per call: the lookup-per-property parser this replaced cost
// about 4 million guest instructions, most of the boot under TCG.
struct ScanNode {
  int offset = -1;        // -1: not found
  int parent_address_cells = 2;
  int parent_size_cells = 1;
  int size_cells = 1;     // the node's own #size-cells (PCI ranges need it)
};

struct PhandleNode {
  uint32_t phandle = 0;
  int offset = -1;
};

struct Scan {
  static constexpr unsigned kMaxPhandles = 64;
  ScanNode uart;      // first "arm,pl011"
  ScanNode gic;       // first "arm,cortex-a15-gic"
  ScanNode v2m;       // first "arm,gic-v2m-frame"
  ScanNode timer;     // first "arm,armv8-timer"
  ScanNode pci;       // first "pci-host-ecam-generic"
  ScanNode memory;    // /memory (or memory@...), else the first device_type "memory"
  int chosen = -1;    // /chosen
  bool have_cpus = false;
  uint32_t cpu_count = 0;  // children of /cpus with device_type "cpu"
  ScanNode cpus[kMaxCpus];  // the first kMaxCpus of them
  ScanNode psci;      // first "arm,psci-0.2" / "arm,psci-1.0" / "arm,psci"
  PhandleNode phandles[kMaxPhandles];  // nodes with a phandle, in document order
  unsigned phandle_count = 0;
  bool phandles_overflow = false;  // more than kMaxPhandles: fall back to libfdt
};

// Walks `fdt` (header already checked) once. Fails (kBadHardware, one line)
// only if the structure block itself is broken or nests deeper than
// supported.
vtrn::Error scan_tree(const void* fdt, Scan* out);

// The console from a scan: PL011 base and UARTCLK frequency.
vtrn::Error resolve_console(const void* fdt, const Scan& scan, uint64_t* uart_base,
                            uint32_t* uart_clock_hz);

// Everything else from a scan (bootargs included); fails with one line naming
// the node and property that is missing or malformed.
vtrn::Error resolve_platform(const void* fdt, const Scan& scan, Platform* out);

// Finds just the console (the "arm,pl011" node and its clock) so the UART
// can report whatever the full parse finds wrong. Panics on a bad tree.
void parse_console(uint64_t address, uint64_t* uart_base, uint32_t* uart_clock_hz);

// Parses the DTB at `address` (panics on any problem). Call with the MMU on:
// libfdt and picolibc's string routines issue unaligned accesses.
void parse(uint64_t address, Platform* out);

// Parses "vtrn.chip=<id> vtrn.board=<addr> vtrn.board_size=<bytes>" (other
// words ignored). Fails (kInvalidArgument) with one line naming the missing
// or bad key. Portable (no libfdt), kept separate for that reason.
vtrn::Error parse_bootargs(const char* args, uint32_t* chip_id, uint64_t* board_address,
                           uint64_t* board_size);
// True when the word `key`=`value` is in `args` (e.g. vtrn.copy_engine=engines).
bool bootarg_is(const char* args, const char* key, const char* value);

}  // namespace fw::platform
