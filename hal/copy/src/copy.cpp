// Engine facade logic (hal/copy.h) and the CPU backend. Backend independent:
// the same object code sequences a fake engine in host tests and CpuEngine
// in the firmware; only hal_copy_memcpy differs (assembly on the chip, the C
// library's memcpy on the host).
//
// Range checks are done in uintptr_t arithmetic, never by forming
// `p + length` pointers, so a hostile length cannot make the check itself
// undefined behaviour.
#include "hal/copy.h"

namespace hal::copy {
namespace {

bool wraps(uintptr_t base, size_t length) { return base + length < base; }

bool overlaps(uintptr_t a, uintptr_t b, size_t length) {
  return a < b + length && b < a + length;
}

}  // namespace

Status Engine::start(void* dst, const void* src, size_t length) {
  if (outstanding_) {
    ++stats_.rejected;
    return Status::kCapacity;
  }
  if (length == 0) {
    outstanding_ = true;
    zero_length_ = true;
    ++stats_.started;
    return Status::kOk;
  }
  const Capabilities caps = do_capabilities();
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst);
  const uintptr_t s = reinterpret_cast<uintptr_t>(src);
  const size_t mask = caps.alignment - 1;
  if (dst == nullptr || src == nullptr || ((d | s | length) & mask) != 0 || wraps(d, length) ||
      wraps(s, length) || overlaps(d, s, length)) {
    ++stats_.rejected;
    return Status::kInvalidArgument;
  }
  if (length > caps.max_length) {
    ++stats_.rejected;
    return Status::kOutOfRange;
  }
  const Status st = do_start(dst, src, length);
  if (st != Status::kOk) {
    ++stats_.rejected;
    return st;
  }
  outstanding_ = true;
  zero_length_ = false;
  ++stats_.started;
  return Status::kOk;
}

Progress Engine::poll_done(Completion* out) {
  if (!outstanding_)
    return Progress::kIdle;
  Completion c;
  if (zero_length_) {
    zero_length_ = false;
  } else if (!do_poll(&c)) {
    return Progress::kInFlight;
  }
  outstanding_ = false;
  ++stats_.completed;
  if (c.status != Status::kOk)
    ++stats_.failed;
  stats_.bytes += c.bytes;
  if (out != nullptr)
    *out = c;
  return Progress::kDone;
}

Status Engine::copy(void* dst, const void* src, size_t length, uint32_t poll_limit) {
  HAL_TRY(start(dst, src, length));
  Completion c;
  for (uint32_t polls = 0; polls < poll_limit; ++polls) {
    if (poll_done(&c) == Progress::kDone) {
      if (c.status == Status::kOk && c.bytes != length)
        return Status::kBadHardware;
      return c.status;
    }
  }
  return Status::kTimeout;
}

Capabilities CpuEngine::do_capabilities() const {
  return Capabilities{.alignment = 1, .max_length = SIZE_MAX, .synchronous = true};
}

Status CpuEngine::do_start(void* dst, const void* src, size_t length) {
  hal_copy_memcpy(dst, src, length);
  last_length_ = length;
  return Status::kOk;
}

bool CpuEngine::do_poll(Completion* out) {
  out->status = Status::kOk;
  out->bytes = last_length_;
  return true;
}

}  // namespace hal::copy
