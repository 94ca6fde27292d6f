// CPU identification, the generic-timer clock and PSCI for the boot core.
// See fw/arch.h. MIDR decoding covers the cores QEMU's -cpu offers for this
// firmware; anything else is printed by its raw part number.
#include "fw/arch.h"

#include <stdio.h>

#include "hal/timer.h"

namespace fw::arch {
namespace {
uint64_t g_counter_hz = 0;

const char* part_name(uint32_t implementer, uint32_t part) {
  if (implementer != 0x41) return nullptr;  // Arm Ltd.
  switch (part) {
    case 0xd03: return "cortex-a53";
    case 0xd04: return "cortex-a35";
    case 0xd05: return "cortex-a55";
    case 0xd07: return "cortex-a57";
    case 0xd08: return "cortex-a72";
    case 0xd09: return "cortex-a73";
    case 0xd0b: return "cortex-a76";
    case 0xd0c: return "neoverse-n1";
    case 0xd40: return "neoverse-v1";
    case 0xd49: return "neoverse-n2";
    default: return nullptr;
  }
}
}  // namespace

uint64_t read_midr() {
  uint64_t v;
  asm volatile("mrs %0, midr_el1" : "=r"(v));
  return v;
}

uint32_t current_cpu() {
  uint64_t v;
  asm volatile("mrs %0, mpidr_el1" : "=r"(v));
  return uint32_t(v & 0xff);
}

void cpu_name(char* out, unsigned cap) {
  const uint64_t midr = read_midr();
  const uint32_t implementer = uint32_t(midr >> 24) & 0xff;
  const uint32_t variant = uint32_t(midr >> 20) & 0xf;
  const uint32_t part = uint32_t(midr >> 4) & 0xfff;
  const uint32_t revision = uint32_t(midr) & 0xf;
  const char* name = part_name(implementer, part);
  if (name) {
    snprintf(out, cap, "%s r%up%u", name, unsigned(variant), unsigned(revision));
  } else {
    snprintf(out, cap, "impl 0x%02x part 0x%03x r%up%u", unsigned(implementer), unsigned(part),
             unsigned(variant), unsigned(revision));
  }
}

uint64_t counter_hz() {
  if (g_counter_hz == 0) g_counter_hz = hal::timer::sysreg::read_cntfrq();
  return g_counter_hz;
}

uint64_t now_ticks() { return hal::timer::sysreg::read_cntvct(); }

uint64_t ticks_to_ns(uint64_t ticks) {
  const uint64_t hz = counter_hz();
  return hz ? hal::timer::ticks_to_ns(ticks, hz) : 0;
}

uint64_t now_ns() { return ticks_to_ns(now_ticks()); }

void psci_system_off() {
  register uint64_t x0 asm("x0") = kPsciSystemOff;
  asm volatile("hvc #0" : "+r"(x0)::"x1", "x2", "x3", "memory");
  // SYSTEM_OFF does not return on success; if the hypervisor refuses, stop
  // here without spinning.
  asm volatile("msr daifset, #0xf" ::: "memory");
  for (;;) asm volatile("wfi");
}

}  // namespace fw::arch
