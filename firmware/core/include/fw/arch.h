// AArch64 system-register helpers for every core: interrupt masking, WFI,
// identification registers, PSCI calls and the generic-timer clock.
//
// Not a HAL: these are CPU instructions, not devices, and only the firmware
// image uses them (the portable code never includes this header). The clock
// reads CNTVCT through hal/timer.h's sysreg backend so it agrees with the
// timer driver to the tick. A hosted build of the services (the
// control-request fuzzer, tests/fuzz) gets the same declarations without the
// instructions and links its own fake core.
#pragma once

#include <stdint.h>

namespace fw::arch {

#if !__STDC_HOSTED__
// DAIF.I: IRQs masked. Returns the previous DAIF so a caller can restore it.
inline uint64_t irq_save() {
  uint64_t daif;
  asm volatile("mrs %0, daif\n msr daifset, #2" : "=r"(daif)::"memory");
  return daif;
}
inline void irq_restore(uint64_t daif) { asm volatile("msr daif, %0" ::"r"(daif) : "memory"); }
inline void irq_enable() { asm volatile("msr daifclr, #2" ::: "memory"); }
inline void irq_disable() { asm volatile("msr daifset, #2" ::: "memory"); }
// WFI after a DSB: every earlier store (a doorbell, a ring index) has left
// the core before it sleeps. Wakes on a pending IRQ even while DAIF.I masks it.
inline void wait_for_interrupt() { asm volatile("dsb sy\n wfi" ::: "memory"); }
#else
uint64_t irq_save();
void irq_restore(uint64_t daif);
void irq_enable();
void irq_disable();
void wait_for_interrupt();
#endif

uint64_t read_midr();
uint32_t current_cpu();  // MPIDR_EL1.Aff0

// "cortex-a53 r0p4" style name of the boot core, from MIDR_EL1.
void cpu_name(char* out, unsigned cap);

// Generic timer: frequency (CNTFRQ) cached at first use, and time since the
// counter started (QEMU starts it at machine reset).
uint64_t counter_hz();
uint64_t now_ticks();
uint64_t now_ns();
uint64_t ticks_to_ns(uint64_t ticks);

// PSCI over HVC (the platform DTB's psci node says method = "hvc").
inline constexpr uint32_t kPsciSystemOff = 0x84000008;
[[noreturn]] void psci_system_off();

}  // namespace fw::arch
