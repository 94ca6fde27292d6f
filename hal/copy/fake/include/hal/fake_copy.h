// hal::copy::fake::FakeEngine: a scriptable copy engine for host tests of
// code that drives a hal::copy::Engine (the DMA service, DmaCopier).
//
// It records every submission that reached it (after the facade's checks),
// optionally performs the copy with the C library's memcpy so data can be
// compared, and lets a test shape its behaviour: capabilities (alignment,
// max length, asynchronous), a number of in-flight polls before a copy
// finishes, a status that refuses the next start, and a status or short
// byte count for the next completion. Each injection applies once.
//
// Host only (std::vector). Not thread safe.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <vector>

#include "hal/copy.h"

namespace hal::copy::fake {

struct Submission {
  void* dst;
  const void* src;
  size_t length;
};

class FakeEngine final : public Engine {
 public:
  explicit FakeEngine(Capabilities caps = {}) : caps_(caps) {}

  // Whether start() really copies the bytes (default true).
  void set_perform(bool perform) { perform_ = perform; }
  // do_poll reports "in flight" this many times before each completion.
  void set_polls_before_done(uint32_t n) { polls_before_done_ = n; }
  // The next submission that reaches the engine is refused with `s`.
  void fail_next_start(Status s) { fail_start_ = s; }
  // The next completion carries `s` (and only `bytes` moved).
  void fail_next_completion(Status s, size_t bytes) {
    fail_completion_ = s;
    fail_bytes_ = bytes;
    fail_completion_armed_ = true;
  }
  // The next kOk completion reports `bytes` instead of the length.
  void short_next_completion(size_t bytes) {
    short_bytes_ = bytes;
    short_armed_ = true;
  }

  const std::vector<Submission>& submissions() const { return submissions_; }
  uint32_t poll_calls() const { return poll_calls_; }

 private:
  Capabilities do_capabilities() const override { return caps_; }
  Status do_start(void* dst, const void* src, size_t length) override;
  bool do_poll(Completion* out) override;

  Capabilities caps_;
  bool perform_ = true;
  uint32_t polls_before_done_ = 0;
  uint32_t polls_left_ = 0;
  Status fail_start_ = Status::kOk;
  bool fail_completion_armed_ = false;
  Status fail_completion_ = Status::kOk;
  size_t fail_bytes_ = 0;
  bool short_armed_ = false;
  size_t short_bytes_ = 0;
  size_t current_length_ = 0;
  std::vector<Submission> submissions_;
  uint32_t poll_calls_ = 0;
};

}  // namespace hal::copy::fake
