// The host side of one DMA queue: writes descriptors into the submission
// ring, reaps completions from the completion ring, and drives the reset
// handshake. Plain portable C++ over the shared QueueControl block; the host
// driver (libvtrn) owns one per queue and adds cookie tracking, buffers and
// waiting on top.
//
// It trusts nothing the device writes: the completion producer index is read
// once per reap and checked (it may not run more than a ring ahead, nor move
// backwards, nor produce more completions than descriptors were submitted),
// and entries are copied out before they are returned.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/dma_abi.h"
#include "vtrn/error.h"

namespace vtrn::dma {

enum class HostError : uint32_t {
  kNone = 0,
  kCqIndexJump = 1,      // cq_prod more than depth ahead of our consumer
  kCqIndexBackward = 2,  // cq_prod moved backwards
  kTooManyCompletions = 3,  // more completions than descriptors submitted
  kSqConsumerAhead = 4,  // sq_cons beyond what we produced
};

// Checks a copy of the firmware's DMA region header against the region size
// the host validated from the BAR2 region table. A failure is kBadHardware
// with one line naming the problem.
[[nodiscard]] vtrn::Error validate_dma_region(const DmaRegionHeader& copy, uint64_t region_size);

class HostQueue {
 public:
  HostQueue() = default;
  HostQueue(QueueControl* ctl, Descriptor* sq, Completion* cq, uint32_t depth);

  // Free submission slots as of the device's last published consumer index.
  [[nodiscard]] uint32_t free_slots();
  // Writes n descriptors and publishes them with one index store. All or
  // nothing: false when fewer than n slots are free or the queue is broken.
  [[nodiscard]] bool submit(const Descriptor* d, uint32_t n);
  // Copies up to `max` new completions into `out`; returns how many.
  uint32_t reap(Completion* out, uint32_t max);
  // Descriptors submitted whose completion (if any) has not been reaped.
  [[nodiscard]] uint64_t outstanding() const { return submitted_ - reaped_; }

  // The device's latched error (QueueControl::error), or kQueueOk.
  [[nodiscard]] QueueError device_error() const;
  // What this side found wrong with the device, or kNone.
  [[nodiscard]] HostError host_error() const { return host_error_; }

  // Starts the reset handshake: zeroes our indexes, bumps reset_req. Poll
  // reset_done() until true; descriptors in flight are lost to the device
  // and the caller completes them itself (with kErrReset).
  void begin_reset();
  [[nodiscard]] bool reset_done() const;

  void arm_irq(bool on);

 private:
  bool check_sq_cons(uint32_t cons);

  QueueControl* ctl_ = nullptr;
  Descriptor* sq_ = nullptr;
  Completion* cq_ = nullptr;
  uint32_t depth_ = 0;
  uint32_t sq_prod_ = 0;
  uint32_t cq_cons_ = 0;
  uint32_t cq_prod_seen_ = 0;
  uint32_t reset_req_ = 0;
  uint64_t submitted_ = 0;
  uint64_t reaped_ = 0;
  HostError host_error_ = HostError::kNone;
};

}  // namespace vtrn::dma
