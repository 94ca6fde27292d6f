// How host readers retry a seqlocked block in BAR2 (telemetry, power, link
// status, DMA queue statistics). The writer is a QEMU vCPU thread: on a
// loaded host it can be descheduled for milliseconds in the middle of an
// update, holding the sequence odd, so a reader that only spins a fixed
// number of times reports a failure that is not one. SeqlockRetry spins a
// little (the normal case: an update takes microseconds), then yields the
// CPU so the vCPU can finish, then naps, and gives up only after a time
// bound, so a firmware that is really stuck mid-update is still reported.
//
// It is not the read itself: each block has its own layout and checks.
#pragma once

#include <sched.h>
#include <stdint.h>
#include <time.h>

namespace drv {

class SeqlockRetry {
 public:
  // budget_ns: how long a reader may wait for the writer to hold still.
  explicit SeqlockRetry(uint64_t budget_ns = 50'000'000) : budget_ns_(budget_ns) {}

  // Call after an attempt that saw the block change or held odd; true when
  // the caller should try again.
  bool again() {
    ++attempts_;
    if (attempts_ <= kSpins) return true;
    const uint64_t now = now_ns();
    if (start_ns_ == 0) start_ns_ = now;
    if (now - start_ns_ >= budget_ns_) return false;
    if (attempts_ <= kSpins + kYields) {
      sched_yield();
    } else {
      timespec nap{0, 100'000};
      nanosleep(&nap, nullptr);
    }
    return true;
  }

 private:
  static constexpr uint32_t kSpins = 200;
  static constexpr uint32_t kYields = 200;
  static uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
  }
  uint64_t budget_ns_;
  uint64_t start_ns_ = 0;
  uint32_t attempts_ = 0;
};

}  // namespace drv
