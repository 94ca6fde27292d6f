// drv::RecoveryPolicy: when a chip's automatic reset may go ahead, and after
// how long. At most `limit` automatic resets inside a sliding window; the
// second reset inside the window waits 250 ms, each further one twice as
// long up to 4 s; one reset more than the limit gives up (the chip stays
// FAILED). An operator's reset starts a fresh window.
//
// What it is not: the reset itself (Chip does that: QMP system_reset or a
// new QEMU), nor a clock (the caller passes CLOCK_MONOTONIC nanoseconds), so
// the policy is pure logic, unit tested alone (driver/tests).
#pragma once

#include <stdint.h>

#include <algorithm>
#include <deque>

namespace drv {

class RecoveryPolicy {
 public:
  static constexpr uint64_t kBackoffNs = 250'000'000;     // the second reset in the window
  static constexpr uint64_t kBackoffMaxNs = 4'000'000'000;

  RecoveryPolicy(uint32_t limit, uint32_t window_ms) : limit_(limit), window_ns_(uint64_t(window_ms) * 1'000'000) {}

  // An automatic reset at now_ns: counted, and the ones that fell out of
  // the window forgotten.
  void record(uint64_t now_ns) {
    times_.push_back(now_ns);
    while (!times_.empty() && now_ns - times_.front() > window_ns_) times_.pop_front();
  }
  // More automatic resets inside the window than allowed.
  [[nodiscard]] bool exhausted() const { return times_.size() > limit_; }
  // How long the next reset waits.
  [[nodiscard]] uint64_t backoff_ns() const {
    if (times_.size() < 2) return 0;
    return std::min(kBackoffMaxNs, kBackoffNs << std::min<size_t>(times_.size() - 2, 8));
  }
  // An operator's reset: the window starts over.
  void restart() { times_.clear(); }
  // Automatic resets inside the window.
  [[nodiscard]] uint32_t recent() const { return uint32_t(times_.size()); }

 private:
  uint32_t limit_;
  uint64_t window_ns_;
  std::deque<uint64_t> times_;
};

}  // namespace drv
