// Generic-timer driver logic: tick/ns conversions and the one-shot arming
// sequence, over the sysreg backend (timer_qemu.cpp or timer_fake.cpp).
//
// Arming writes CVAL before CTL: enabling first with a stale CVAL in the
// past would raise the interrupt at once for a deadline nobody asked for.
#include "hal/timer.h"

namespace hal::timer {
namespace {

constexpr uint64_t kU64Max = ~0ull;
constexpr uint64_t kMaxFreq = 1ull << 32;  // CNTFRQ_EL0 holds a 32-bit value
constexpr uint32_t kFirstPpi = 16;
constexpr uint32_t kFirstSpi = 32;

}  // namespace

uint64_t ticks_to_ns(uint64_t ticks, uint64_t freq_hz) {
  if (freq_hz == 0 || freq_hz >= kMaxFreq)
    return 0;
  const uint64_t secs = ticks / freq_hz;
  const uint64_t rem = ticks % freq_hz;  // < 2^32, so rem * 1e9 < 2^62
  if (secs > kU64Max / kNsPerSecond)
    return kU64Max;
  const uint64_t whole = secs * kNsPerSecond;
  const uint64_t frac = rem * kNsPerSecond / freq_hz;
  return whole > kU64Max - frac ? kU64Max : whole + frac;
}

uint64_t ns_to_ticks(uint64_t ns, uint64_t freq_hz) {
  if (freq_hz == 0 || freq_hz >= kMaxFreq)
    return 0;
  const uint64_t secs = ns / kNsPerSecond;
  const uint64_t rem = ns % kNsPerSecond;  // < 1e9, so rem * freq < 2^62
  if (secs != 0 && secs > kU64Max / freq_hz)
    return kU64Max;
  const uint64_t whole = secs * freq_hz;
  const uint64_t frac = (rem * freq_hz + kNsPerSecond - 1) / kNsPerSecond;  // round up
  return whole > kU64Max - frac ? kU64Max : whole + frac;
}

Status Timer::init(uint32_t intid) {
  if (intid < kFirstPpi || intid >= kFirstSpi)
    return Status::kInvalidArgument;  // the generic timer is always a PPI
  const uint64_t freq = sysreg::read_cntfrq();
  if (freq == 0 || freq >= kMaxFreq)
    return Status::kBadHardware;
  sysreg::write_cntv_ctl(kCtlImask);
  freq_ = freq;
  intid_ = intid;
  return Status::kOk;
}

uint64_t Timer::now() const { return sysreg::read_cntvct(); }

uint64_t Timer::now_ns() const { return ticks_to_ns(now()); }

uint64_t Timer::ticks_to_ns(uint64_t ticks) const { return timer::ticks_to_ns(ticks, freq_); }

uint64_t Timer::ns_to_ticks(uint64_t ns) const { return timer::ns_to_ticks(ns, freq_); }

Status Timer::arm_at(uint64_t deadline_ticks) {
  if (freq_ == 0)
    return Status::kNotReady;
  sysreg::write_cntv_cval(deadline_ticks);
  sysreg::write_cntv_ctl(kCtlEnable);
  return Status::kOk;
}

Status Timer::arm_after_ns(uint64_t ns) {
  if (freq_ == 0)
    return Status::kNotReady;
  const uint64_t delta = ns_to_ticks(ns);
  const uint64_t start = now();
  const uint64_t deadline = start > kU64Max - delta ? kU64Max : start + delta;
  return arm_at(deadline);
}

void Timer::disarm() { sysreg::write_cntv_ctl(kCtlImask); }

bool Timer::fired() const { return (sysreg::read_cntv_ctl() & kCtlIstatus) != 0; }

bool Timer::armed() const {
  const uint32_t ctl = sysreg::read_cntv_ctl();
  return (ctl & kCtlEnable) != 0 && (ctl & kCtlImask) == 0;
}

}  // namespace hal::timer
