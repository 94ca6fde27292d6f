// Internals of the power service shared between its files (the boot core's
// service and the cross-core pace()/device_active() in power_pace.cpp).
// Not for other services: they use fw/power_service.h.
#pragma once

#include <stdint.h>

namespace hal::gic {
class Gic;
}

namespace fw::power {

// n * (max / cur - 1) in ns, rounded down; 0 when the clock is unknown
// (max == 0) or at full speed. cur == 0 (not clocked) also gives 0: the
// caller waits for D0 first. Saturates instead of overflowing.
[[nodiscard]] inline uint64_t delay_for(uint64_t busy_ns, uint32_t cur_mhz, uint32_t max_mhz) {
  if (max_mhz == 0 || cur_mhz == 0 || cur_mhz >= max_mhz) return 0;
  const uint64_t extra = max_mhz - cur_mhz;
  // busy_ns * extra / cur without overflow: split busy_ns by cur.
  const uint64_t q = busy_ns / cur_mhz;
  const uint64_t r = busy_ns % cur_mhz;
  if (q != 0 && extra > UINT64_MAX / q) return UINT64_MAX;
  return q * extra + r * extra / cur_mhz;
}

// Boot core only.
void publish_clock(uint32_t frequency_mhz, uint32_t max_frequency_mhz);
void publish_active(bool active);
void attach_wakeup(const hal::gic::Gic* gic, uint32_t timer_intid);
// Time pace() has delayed `core` since boot (its own calls only).
[[nodiscard]] uint64_t paced_ns(uint32_t core);

}  // namespace fw::power
