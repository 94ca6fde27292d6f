// Shared support of the bare-metal test images (tests/baremetal): console,
// timer, identity MMU and power-off. Each image (copy_check.cpp,
// copy_bench.cpp) defines bm_run(); bm.cpp's bm_main brings the platform up,
// calls it and powers the machine off with PSCI SYSTEM_OFF, which ends QEMU.
//
// Platform assumptions (QEMU 7.2 `-M virt`, no DTB parsing on purpose: the
// images are test fixtures, not firmware, and these addresses are fixed by
// QEMU's virt board):
//  - PL011 UART at 0x09000000 with a 24 MHz reference clock;
//  - RAM at 0x40000000, at least kRamBytes (the ctest passes -m 256M);
//  - EL1 virtual timer (CNTVCT_EL0, CNTFRQ_EL0), PPI 27;
//  - PSCI through HVC (virt without EL2/EL3).
// Not a firmware runtime: no interrupts, no heap, no stdio.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace bm {

inline constexpr uintptr_t kUartBase = 0x09000000;
inline constexpr uint32_t kUartClockHz = 24000000;
inline constexpr uint32_t kTimerPpi = 27;
inline constexpr uintptr_t kRamBase = 0x40000000;
inline constexpr size_t kRamBytes = 256u << 20;

void print(const char* s);
void print_u64(uint64_t v);
void print_hex(uint64_t v);
// `milli` / 1000 with three decimals ("1.234").
void print_milli(uint64_t milli);

// Generic timer.
uint64_t now_ticks();
uint64_t ticks_to_ns(uint64_t ticks);

// Arms the EL1 virtual timer (PPI kTimerPpi) to fire after `ns`, so a WFI
// has a bounded wait; disarm_wakeup() clears it (the PPI is level-triggered).
void arm_wakeup_ns(uint64_t ns);
void disarm_wakeup();

// MIDR_EL1 of the core (which -cpu QEMU emulates).
uint64_t midr();

}  // namespace bm

// Defined by each image: its test or benchmark. Runs with the MMU on (RAM
// and the first GiB of the 64-bit PCI window Normal write-back, the first
// GiB and the high ECAM Device), FP/SIMD enabled.
void bm_run();

namespace bm {
// Powers the machine off (PSCI SYSTEM_OFF); QEMU exits.
[[noreturn]] void power_off();
}  // namespace bm
