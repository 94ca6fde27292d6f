// The device side of one DMA queue: consumes descriptors from the submission
// ring, validates each one, has a Copier move the bytes, and writes one
// completion per chain. Plain portable C++ with no hardware in it: the
// firmware runs it over BAR2 and HBM, host tests and fuzzers run it over
// ordinary memory.
//
// Every descriptor is copied out of shared memory before it is looked at;
// the host may rewrite it at any moment. Every index the host writes is read
// once per poll and checked; a violation latches the queue (QueueControl::
// error) until the host asks for a reset. Other queues are independent
// objects and keep working.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/dma_abi.h"
#include "vtrn/seqlock.h"

namespace vtrn::dma {

// Answers whether an HBM range may be used by DMA, e.g. "inside one live
// allocation and no retired page". Without a policy any range inside HBM is
// allowed.
class HbmPolicy {
 public:
  [[nodiscard]] virtual Status check(uint64_t addr, uint64_t length) const = 0;

 protected:
  ~HbmPolicy() = default;
};

// Moves bytes. The firmware's copy-engine backend implements it; a hardware
// engine could replace it.
class Copier {
 public:
  virtual void copy(void* dst, const void* src, size_t length) = 0;

 protected:
  ~Copier() = default;
};

// Told about every descriptor that fails validation (or ends a chain that
// grew too long), with the copy the queue validated, before its chain
// completes. A hardware engine reports these as error interrupts; the
// firmware's CPU copier has no use for it. Called from inside poll().
class ErrorHook {
 public:
  virtual void on_descriptor_error(const Descriptor& d, Status status) = 0;

 protected:
  ~ErrorHook() = default;
};

// What the engine may touch, as the engine sees it.
struct AddressMap {
  uint8_t* host_window = nullptr;  // engine-side mapping of the host window
  uint64_t host_window_size = 0;
  uint8_t* hbm = nullptr;          // engine-side mapping of HBM
  uint64_t hbm_base = 0;           // chip physical address of hbm[0]
  uint64_t hbm_size = 0;
  const HbmPolicy* policy = nullptr;
  // The remap window of stitched HBM allocations: device
  // addresses mapped onto HBM pages (the firmware's MMU does it, so the
  // engine-side pointer is the address itself); only with a policy.
  uint8_t* remap = nullptr;        // engine-side mapping of remap_base
  uint64_t remap_base = 0;
  uint64_t remap_size = 0;
};

// Resolves and checks one descriptor (already copied out of shared memory).
// On kOk, *src and *dst point at the bytes to move.
[[nodiscard]] Status validate(const Descriptor& d, const AddressMap& map, const uint8_t** src,
                              uint8_t** dst);

struct PollResult {
  uint32_t descriptors = 0;  // consumed from the submission ring
  uint32_t completions = 0;  // written to the completion ring
  bool irq = false;          // an IRQ-flagged chain completed while irq_armed
};

class Queue {
 public:
  Queue() = default;
  // `sq` and `cq` have `depth` entries (a power of two).
  Queue(QueueControl* ctl, Descriptor* sq, Completion* cq, uint32_t depth, QueueStats* stats);

  // Handles a pending reset request, then consumes up to `budget`
  // descriptors. Stops early when the completion ring has no room, or once
  // it has copied `byte_budget` bytes (checked before each descriptor, so
  // one long descriptor may pass it). Completions are published (cq_prod)
  // before it returns and before any copy of 4 KiB or more, so a batch of
  // small chains costs one index store.
  PollResult poll(const AddressMap& map, Copier& copier, uint32_t budget, uint64_t byte_budget = UINT64_MAX);
  // True when the host has published descriptors or a reset request.
  [[nodiscard]] bool has_work() const;
  void add_busy_ns(uint64_t ns);
  // Optional; null (the default) reports nothing.
  void set_error_hook(ErrorHook* hook) { hook_ = hook; }
  // The next descriptor this queue takes in a chain that has not failed
  // yet fails with `status` instead of being validated and copied, and goes
  // to the error hook like a refused one (a hardware engine's fault); kOk
  // cancels. fail_pending() until it happened.
  void fail_next(Status status) { fail_next_ = status; }
  [[nodiscard]] bool fail_pending() const { return fail_next_ != kOk; }

  [[nodiscard]] QueueError error() const { return error_; }
  [[nodiscard]] uint32_t depth() const { return depth_; }

 private:
  void latch(QueueError e);
  bool cq_space(uint32_t needed);
  void publish_completions(PollResult* r);
  void complete(uint64_t cookie, Status status, uint32_t bytes, bool irq, PollResult* r);
  void restart();
  // Adds to one statistic: our copy, then the shared word (inside
  // stats_.begin()/end()).
  void bump(uint64_t QueueStats::*field, uint64_t by);
  void bump_status(uint32_t status);

  QueueControl* ctl_ = nullptr;
  Descriptor* sq_ = nullptr;
  Completion* cq_ = nullptr;
  // The statistics in shared memory (not attached without any) and our own
  // counts: the shared words are host-writable, so they are never read back.
  hostif::SeqlockWriter<QueueStats> stats_;
  QueueStats counts_{};
  ErrorHook* hook_ = nullptr;
  uint32_t depth_ = 0;
  uint32_t sq_cons_ = 0;
  uint32_t sq_prod_seen_ = 0;
  uint32_t cq_prod_ = 0;
  uint32_t cq_published_ = 0;  // last cq_prod stored to the ring
  uint32_t cq_cons_seen_ = 0;  // the host's cq_cons as last read
  bool cq_cons_fresh_ = false;  // read during this poll
  bool irq_unpublished_ = false;  // an IRQ-flagged completion not yet published
  uint32_t reset_seen_ = 0;
  QueueError error_ = kQueueOk;
  Status fail_next_ = kOk;

  // The open chain.
  bool in_chain_ = false;
  uint32_t chain_len_ = 0;
  Status chain_status_ = kOk;
  uint64_t chain_bytes_ = 0;
  uint64_t chain_cookie_ = 0;
  bool chain_irq_ = false;
};

}  // namespace vtrn::dma
