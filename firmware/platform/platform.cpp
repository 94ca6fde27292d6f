// Platform DTB parsing on the chip: header check, one scan (platform_scan.cpp)
// shared by the console lookup and the full parse, and a panic naming the
// node and property for anything wrong. See fw/platform.h.
//
// The scan is kept between parse_console and parse: walking QEMU's tree is
// the expensive part under TCG, and the tree does not change during boot.
#include "fw/platform.h"

#include <libfdt.h>

#include "fw/panic.h"

namespace fw::platform {
namespace {

using vtrn::hostif::kPanicPlatform;

Scan g_scan;
uint64_t g_scanned_address = 0;  // 0: no scan yet (RAM never starts at 0 on virt)

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

const void* scanned_tree(uint64_t address) {
  const void* fdt = checked_tree(address);
  if (g_scanned_address != address) {
    const vtrn::Error e = scan_tree(fdt, &g_scan);
    if (!e.ok()) panic(kPanicPlatform, "%s", e.detail());
    g_scanned_address = address;
  }
  return fdt;
}

}  // namespace

void parse_console(uint64_t address, uint64_t* uart_base, uint32_t* uart_clock_hz) {
  const void* fdt = scanned_tree(address);
  const vtrn::Error e = resolve_console(fdt, g_scan, uart_base, uart_clock_hz);
  if (!e.ok()) panic(kPanicPlatform, "%s", e.detail());
}

void parse(uint64_t address, Platform* out) {
  const void* fdt = scanned_tree(address);
  const vtrn::Error e = resolve_platform(fdt, g_scan, out);
  if (!e.ok()) panic(kPanicPlatform, "%s", e.detail());
  out->dtb.base = address;
}

}  // namespace fw::platform
