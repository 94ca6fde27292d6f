// hal::mmio: the register-access facade every HAL driver goes through.
//
// Drivers describe a register block as a struct (fields named as the hardware
// manual names them, static_assert(offsetof) on every offset, bit masks as
// named constants, never bitfields), cast the base address the caller got
// from the device tree to a pointer to that struct, and touch registers only
// through the functions below: mmio::write32(&regs->CR, v). PCI configuration
// space is reached the same way, with 8/16/32-bit accesses inside the ECAM
// window (hal/pcie.h builds its config accessors on these).
//
// Two backends, chosen at link time (hal/sources.cmake):
//  - QEMU (mmio_qemu.cpp, firmware only): one single-copy-atomic load/store
//    instruction of exactly the requested width (inline asm, so the compiler
//    can neither merge, split nor use a write-back addressing mode), ordered
//    the way Linux's readl/writel are: `dmb oshst` before a store so earlier
//    normal-memory writes (e.g. a BAR2 ring slot) are visible before a device
//    sees the write (a doorbell), `dmb oshld` after a load so later
//    normal-memory reads cannot pass it (status register, then data).
//  - fake (mmio_fake.cpp, host tests): plain RAM plus a recorded access log
//    and per-range hooks that emulate device behaviour (see hal/fake_mmio.h).
//
// This is not a memory-mapping layer: addresses are already usable (the
// firmware runs identity-mapped, device memory attributes for MMIO).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace hal::mmio {

uint8_t read8(const volatile uint8_t* reg);
uint16_t read16(const volatile uint16_t* reg);
uint32_t read32(const volatile uint32_t* reg);
uint64_t read64(const volatile uint64_t* reg);

void write8(volatile uint8_t* reg, uint8_t value);
void write16(volatile uint16_t* reg, uint16_t value);
void write32(volatile uint32_t* reg, uint32_t value);
void write64(volatile uint64_t* reg, uint64_t value);

// DSB SY: completes every outstanding memory access before the next
// instruction. Needed before WFI/WFE when a preceding MMIO write must have
// reached the device, and around system-register changes with side effects.
void data_sync_barrier();
// ISB: discards prefetched instructions so a system-register write (timer
// CTL, DAIF) takes effect before the next instruction.
void instruction_sync_barrier();

// Typed pointer to a register block at `base` (an address from the DT).
template <typename Block>
inline volatile Block* block_at(uintptr_t base) {
  return reinterpret_cast<volatile Block*>(base);
}

// Register at byte offset `offset` from `base`, for address spaces that are
// indexed rather than laid out as one struct (PCI config space, MSI-X table).
template <typename T>
inline volatile T* reg_at(uintptr_t base, size_t offset) {
  return reinterpret_cast<volatile T*>(base + offset);
}

}  // namespace hal::mmio
