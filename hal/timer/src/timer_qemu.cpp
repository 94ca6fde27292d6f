// QEMU/AArch64 backend of the generic-timer sysreg functions (hal/timer.h):
// mrs/msr on the EL1 virtual timer. The ISB before reading CNTVCT_EL0 keeps
// the counter read from being hoisted above earlier instructions (ARM ARM
// D11.2.2: reads of the counter may be speculated); the ISB after a CTL or
// CVAL write makes the new timer state effective before the next
// instruction, so "arm then WFI" cannot sleep on the old deadline.
#include "hal/timer.h"

#if !defined(__aarch64__)
#error "timer_qemu.cpp is the AArch64 firmware backend; host builds link timer_fake.cpp"
#endif

namespace hal::timer::sysreg {

uint64_t read_cntfrq() {
  uint64_t v;
  asm volatile("mrs %0, cntfrq_el0" : "=r"(v));
  return v;
}

uint64_t read_cntvct() {
  uint64_t v;
  asm volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
  return v;
}

uint32_t read_cntv_ctl() {
  uint64_t v;
  asm volatile("mrs %0, cntv_ctl_el0" : "=r"(v) : : "memory");
  return static_cast<uint32_t>(v);
}

void write_cntv_ctl(uint32_t value) {
  asm volatile("msr cntv_ctl_el0, %0\n\tisb" : : "r"(static_cast<uint64_t>(value)) : "memory");
}

uint64_t read_cntv_cval() {
  uint64_t v;
  asm volatile("mrs %0, cntv_cval_el0" : "=r"(v) : : "memory");
  return v;
}

void write_cntv_cval(uint64_t value) {
  asm volatile("msr cntv_cval_el0, %0\n\tisb" : : "r"(value) : "memory");
}

}  // namespace hal::timer::sysreg
