// hal::timer: the ARM generic timer, EL1 virtual timer (CNTV_*).
//
// The counter (CNTVCT_EL0) and frequency (CNTFRQ_EL0) are system registers,
// not MMIO, so this driver has its own tiny backend interface (the sysreg
// functions below): the QEMU backend is mrs/msr inline asm (aarch64 only),
// the fake backend is a struct of variables a test controls
// (hal/fake_timer.h). The timer interrupt is a level-sensitive PPI (INTID 27
// on virt, but the firmware passes what the DT "arm,armv8-timer" node says);
// it stays asserted while CVAL <= CNTVCT and the timer is enabled and
// unmasked, so "acknowledging" it means re-arming or disabling it, never
// just an EOI.
//
// Conversions are exact for frequencies that divide 1 GHz (62.5 MHz: 16 ns
// per tick; 1 GHz: 1 ns) and never overflow: CNTFRQ is a 32-bit quantity
// (upper bits RES0), so products are split into whole seconds and a
// remainder that fits 64 bits. ns_to_ticks rounds up so a deadline never
// fires early; ticks_to_ns rounds down.
#pragma once

#include <stdint.h>

#include "hal/status.h"

namespace hal::timer {

// CNTV_CTL_EL0 bits.
inline constexpr uint32_t kCtlEnable = 1u << 0;
inline constexpr uint32_t kCtlImask = 1u << 1;
inline constexpr uint32_t kCtlIstatus = 1u << 2;  // read-only: condition met

// Backend: one function per system register access. The QEMU backend puts
// an ISB before reading CNTVCT (so the read is not speculated ahead of
// earlier instructions) and after writing CTL/CVAL (so the new state is in
// effect before the next instruction, e.g. a WFI).
namespace sysreg {
uint64_t read_cntfrq();
uint64_t read_cntvct();
uint32_t read_cntv_ctl();
void write_cntv_ctl(uint32_t value);
uint64_t read_cntv_cval();
void write_cntv_cval(uint64_t value);
}  // namespace sysreg

inline constexpr uint64_t kNsPerSecond = 1000000000ull;

// Pure conversions, usable without a Timer (host tools, tests).
// freq_hz must be non-zero and < 2^32. Saturate at UINT64_MAX.
uint64_t ticks_to_ns(uint64_t ticks, uint64_t freq_hz);
uint64_t ns_to_ticks(uint64_t ns, uint64_t freq_hz);

class Timer {
 public:
  Timer() = default;
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Reads CNTFRQ (kBadHardware if 0 or >= 2^32), disables and masks the
  // timer (CTL = IMASK), remembers the interrupt ID from the DT.
  Status init(uint32_t intid);

  uint32_t intid() const { return intid_; }
  uint64_t frequency() const { return freq_; }
  // Current virtual count.
  uint64_t now() const;
  uint64_t now_ns() const;
  uint64_t ticks_to_ns(uint64_t ticks) const;
  uint64_t ns_to_ticks(uint64_t ns) const;

  // One-shot at an absolute counter value: CVAL = deadline, then
  // CTL = ENABLE (unmasked). A deadline in the past fires immediately.
  Status arm_at(uint64_t deadline_ticks);
  // One-shot `ns` from now (rounded up to whole ticks, saturating).
  Status arm_after_ns(uint64_t ns);
  // CTL = IMASK (disabled and masked): drops the interrupt line. This is the
  // acknowledge for a one-shot; call it from the handler before EOI.
  void disarm();
  // ISTATUS: the deadline has passed while the timer is enabled.
  bool fired() const;
  bool armed() const;

 private:
  uint64_t freq_ = 0;
  uint32_t intid_ = 0;
};

}  // namespace hal::timer
