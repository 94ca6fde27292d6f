// DmaCopier (hal/copy_dma.h): Copier calls become Engine::copy calls, split
// only when the engine cannot take the whole length at once.
#include "hal/copy_dma.h"

namespace hal::copy {

void DmaCopier::copy(void* dst, const void* src, size_t length) {
  const Capabilities caps = engine_.capabilities();
  // Largest piece the engine accepts that keeps later pieces aligned.
  const size_t piece_max = caps.max_length & ~(caps.alignment - 1);
  if (piece_max == 0) {
    // Capabilities that admit no copy at all: an engine defect.
    ++failures_;
    if (error_ == Status::kOk)
      error_ = Status::kBadHardware;
    return;
  }
  auto* d = static_cast<uint8_t*>(dst);
  auto* s = static_cast<const uint8_t*>(src);
  size_t left = length;
  do {
    const size_t n = left < piece_max ? left : piece_max;
    const Status st = engine_.copy(d, s, n, poll_limit_);
    if (st != Status::kOk) {
      ++failures_;
      if (error_ == Status::kOk)
        error_ = st;
      return;
    }
    d += n;
    s += n;
    left -= n;
  } while (left != 0);
}

Status DmaCopier::take_error() {
  const Status e = error_;
  error_ = Status::kOk;
  return e;
}

}  // namespace hal::copy
