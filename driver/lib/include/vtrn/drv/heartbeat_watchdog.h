// drv::HeartbeatWatchdog: whether a chip's heartbeat counter has stood
// still for longer than the timeout, and the timeout itself. The firmware
// bumps the counter in shared memory on every loop turn and at least once
// per telemetry period; a counter that stops is a hung chip.
//
// What it is not: the reading of the counter or the reset (Chip does both),
// nor a clock (the caller passes CLOCK_MONOTONIC nanoseconds), so the
// watchdog is pure logic, unit tested alone (driver/tests).
#pragma once

#include <stdint.h>

#include <algorithm>

namespace drv {

class HeartbeatWatchdog {
 public:
  static constexpr uint64_t kMs = 1'000'000;
  static constexpr uint64_t kMaxTimeoutMs = 3'600'000;
  static constexpr uint64_t kDefaultPeriodMs = 100;  // before the first telemetry sample says otherwise

  // The timeout in force: `fixed_ms` when set, else `periods` telemetry
  // periods but at least `min_ms`, at most an hour.
  [[nodiscard]] static uint32_t timeout_ms(uint32_t fixed_ms, uint32_t min_ms, uint32_t periods, uint64_t period_ms) {
    if (fixed_ms != 0) return fixed_ms;
    const uint64_t period = period_ms != 0 ? period_ms : kDefaultPeriodMs;
    return uint32_t(std::min<uint64_t>(std::max<uint64_t>(min_ms, period * periods), kMaxTimeoutMs));
  }

  // Counting starts over from this reading (the chip just became READY).
  void rearm(uint64_t beat, uint64_t now_ns) {
    beat_ = beat;
    beat_ns_ = now_ns;
  }

  // A new reading of the counter. True when it has not moved for at least
  // `limit_ns` (0: never fires); a moving counter re-arms.
  [[nodiscard]] bool expired(uint64_t beat, uint64_t now_ns, uint64_t limit_ns) {
    if (beat != beat_) {
      rearm(beat, now_ns);
      return false;
    }
    return limit_ns != 0 && silent_ns(now_ns) >= limit_ns;
  }

  // How long the counter has stood at `beat()` as of now_ns.
  [[nodiscard]] uint64_t silent_ns(uint64_t now_ns) const { return now_ns >= beat_ns_ ? now_ns - beat_ns_ : 0; }
  [[nodiscard]] uint64_t beat() const { return beat_; }

 private:
  uint64_t beat_ = 0;
  uint64_t beat_ns_ = 0;
};

}  // namespace drv
