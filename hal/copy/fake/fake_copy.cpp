// FakeEngine (hal/fake_copy.h): records submissions and plays back the
// behaviour a test scripted. A refused start is recorded too (the facade
// passed it to the engine), so a test can tell "refused by the facade"
// (not recorded) from "refused by the engine" (recorded).
#include "hal/fake_copy.h"

#include <string.h>

namespace hal::copy::fake {

Status FakeEngine::do_start(void* dst, const void* src, size_t length) {
  submissions_.push_back(Submission{dst, src, length});
  if (fail_start_ != Status::kOk) {
    const Status s = fail_start_;
    fail_start_ = Status::kOk;
    return s;
  }
  if (perform_)
    memcpy(dst, src, length);
  current_length_ = length;
  polls_left_ = polls_before_done_;
  return Status::kOk;
}

bool FakeEngine::do_poll(Completion* out) {
  ++poll_calls_;
  if (polls_left_ > 0) {
    --polls_left_;
    return false;
  }
  if (fail_completion_armed_) {
    fail_completion_armed_ = false;
    out->status = fail_completion_;
    out->bytes = fail_bytes_;
  } else if (short_armed_) {
    short_armed_ = false;
    out->status = Status::kOk;
    out->bytes = short_bytes_;
  } else {
    out->status = Status::kOk;
    out->bytes = current_length_;
  }
  return true;
}

}  // namespace hal::copy::fake
