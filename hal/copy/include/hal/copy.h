// hal::copy: the copy-engine facade the DMA service moves bytes through.
//
// An Engine copies one range at a time: start() submits (dst, src, length),
// poll_done() reports when it has finished and with what outcome, copy()
// does both with a bounded wait. A hardware engine is asynchronous (start
// programs registers and returns, poll_done reads a status register); the
// chip's own backend, CpuEngine, is the firmware copying with the CPU, so
// its start() has finished the copy before it returns and the first
// poll_done() reports it. Callers written against start/poll_done work with
// either.
//
// The public methods are non-virtual and do the checks every engine needs
// (argument validation against the engine's Capabilities, one copy in
// flight, completion accounting); a backend implements only the private
// do_* hooks (Pigweed style), so a test double cannot skip the checks.
//
// Not a DMA queue: descriptors, chains, address windows and completion rings
// are vtrn::dma::Queue's business (common/dma). hal/copy_dma.h adapts an
// Engine to the queue's Copier interface. Not memmove: overlapping ranges are
// rejected, as the DMA ABI rejects them (kErrOverlap).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hal/status.h"

// The optimised AArch64 copy (hal/copy/src/memcpy_aarch64.S), with the C
// memcpy contract: copies `length` bytes, ranges must not overlap, returns
// dst. On the host (fake backend) it is the C library's memcpy, so CpuEngine
// is testable there. It is exported under its own name so the firmware can
// keep picolibc's memcpy or alias memcpy to it (see memcpy_aarch64.S for the
// how and the preconditions: MMU on, RAM mapped Normal, SCTLR_EL1.A = 0).
extern "C" void* hal_copy_memcpy(void* dst, const void* src, size_t length);

namespace hal::copy {

// What an engine can do; fixed for the engine's lifetime.
struct Capabilities {
  // dst, src and length must all be multiples of this (a power of two;
  // 1 = byte granular).
  size_t alignment = 1;
  // Longest single copy in bytes (>= alignment).
  size_t max_length = SIZE_MAX;
  // True when start() has completed the copy before it returns.
  bool synchronous = true;
};

// Outcome of one finished copy.
struct Completion {
  // kOk, or what the engine reported (a hardware engine's bus error would be
  // kBadHardware). Never kCapacity/kInvalidArgument: those are refused at
  // start() and never become a copy.
  Status status = Status::kOk;
  // Bytes the engine reports as moved; equals the length on kOk.
  size_t bytes = 0;
};

// What poll_done() found.
enum class Progress : uint8_t {
  kIdle = 0,      // nothing outstanding: no start() since the last kDone
  kInFlight = 1,  // started, not finished yet; poll again
  kDone = 2,      // finished; *out holds the outcome and the engine is idle
};

// Counters since construction, for telemetry and tests.
struct Stats {
  uint64_t started = 0;    // copies accepted by start()
  uint64_t completed = 0;  // completions returned by poll_done(), any status
  uint64_t failed = 0;     // of those, status != kOk
  uint64_t rejected = 0;   // start() calls refused before reaching the engine
  uint64_t bytes = 0;      // sum of Completion::bytes
};

class Engine {
 public:
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Capabilities capabilities() const { return do_capabilities(); }

  // Submits one copy. Refused (nothing reaches the engine, nothing in
  // flight) with:
  //  - kCapacity: a copy is outstanding (its completion not yet collected
  //    by poll_done); this facade keeps one copy in flight;
  //  - kInvalidArgument: a null pointer with length > 0; dst, src or length
  //    not a multiple of Capabilities::alignment; a range that wraps the
  //    address space; overlapping ranges;
  //  - kOutOfRange: length > Capabilities::max_length.
  // A zero-length copy is accepted (null pointers allowed) and completes
  // with 0 bytes without involving the engine. Any other status comes from
  // the engine refusing the submission; nothing is in flight then either.
  Status start(void* dst, const void* src, size_t length);

  // Reports on the outstanding copy; see Progress. `out` may be null when
  // the caller only needs to know whether it finished.
  Progress poll_done(Completion* out);

  // start(), then poll_done() until kDone, at most `poll_limit` polls.
  // Returns the start() refusal, the completion's status, kBadHardware when
  // the engine reports kOk with a byte count other than `length`, or
  // kTimeout when the copy is still in flight after poll_limit polls (it
  // stays outstanding: a later poll_done() collects it).
  Status copy(void* dst, const void* src, size_t length, uint32_t poll_limit = 1u << 20);

  bool busy() const { return outstanding_; }
  const Stats& stats() const { return stats_; }

 protected:
  Engine() = default;
  ~Engine() = default;

 private:
  virtual Capabilities do_capabilities() const = 0;
  // Arguments already validated; length > 0.
  virtual Status do_start(void* dst, const void* src, size_t length) = 0;
  // Called only while a copy is outstanding. Returns true and fills *out
  // when it has finished.
  virtual bool do_poll(Completion* out) = 0;

  bool outstanding_ = false;
  bool zero_length_ = false;  // the outstanding copy is a zero-length no-op
  Stats stats_;
};

// The firmware-driven backend: the CPU copies with hal_copy_memcpy inside
// start(). Byte granular, no length limit, synchronous, never fails.
class CpuEngine final : public Engine {
 public:
  CpuEngine() = default;

 private:
  Capabilities do_capabilities() const override;
  Status do_start(void* dst, const void* src, size_t length) override;
  bool do_poll(Completion* out) override;

  size_t last_length_ = 0;
};

}  // namespace hal::copy
