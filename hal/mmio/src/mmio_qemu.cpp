// QEMU/AArch64 backend of hal/mmio.h: real device accesses.
//
// Each access is one ldr/str of exactly the requested width written in
// inline asm with a plain [reg] address, so the compiler cannot merge, split
// or reorder it and never emits a write-back addressing mode (which a
// hypervisor cannot emulate for an MMIO fault; TCG does not care, KVM does).
// Ordering follows Linux's readl/writel: a store is preceded by
// `dmb oshst` so prior normal-memory writes (a ring slot in BAR2) are
// observable before the device sees the store (the doorbell); a load is
// followed by `dmb oshld` so later normal-memory reads cannot be satisfied
// before it (read a status register, then the data it describes). The
// "memory" clobbers stop the compiler from moving memory accesses across.
#include "hal/mmio.h"

#if !defined(__aarch64__)
#error "mmio_qemu.cpp is the AArch64 firmware backend; host builds link mmio_fake.cpp"
#endif

namespace hal::mmio {

uint8_t read8(const volatile uint8_t* reg) {
  uint32_t v;
  asm volatile("ldrb %w0, [%1]\n\tdmb oshld" : "=r"(v) : "r"(reg) : "memory");
  return static_cast<uint8_t>(v);
}

uint16_t read16(const volatile uint16_t* reg) {
  uint32_t v;
  asm volatile("ldrh %w0, [%1]\n\tdmb oshld" : "=r"(v) : "r"(reg) : "memory");
  return static_cast<uint16_t>(v);
}

uint32_t read32(const volatile uint32_t* reg) {
  uint32_t v;
  asm volatile("ldr %w0, [%1]\n\tdmb oshld" : "=r"(v) : "r"(reg) : "memory");
  return v;
}

uint64_t read64(const volatile uint64_t* reg) {
  uint64_t v;
  asm volatile("ldr %0, [%1]\n\tdmb oshld" : "=r"(v) : "r"(reg) : "memory");
  return v;
}

void write8(volatile uint8_t* reg, uint8_t value) {
  asm volatile("dmb oshst\n\tstrb %w0, [%1]" : : "r"(static_cast<uint32_t>(value)), "r"(reg) : "memory");
}

void write16(volatile uint16_t* reg, uint16_t value) {
  asm volatile("dmb oshst\n\tstrh %w0, [%1]" : : "r"(static_cast<uint32_t>(value)), "r"(reg) : "memory");
}

void write32(volatile uint32_t* reg, uint32_t value) {
  asm volatile("dmb oshst\n\tstr %w0, [%1]" : : "r"(value), "r"(reg) : "memory");
}

void write64(volatile uint64_t* reg, uint64_t value) {
  asm volatile("dmb oshst\n\tstr %0, [%1]" : : "r"(value), "r"(reg) : "memory");
}

void data_sync_barrier() { asm volatile("dsb sy" : : : "memory"); }

void instruction_sync_barrier() { asm volatile("isb" : : : "memory"); }

}  // namespace hal::mmio
