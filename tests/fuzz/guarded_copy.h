// Copies a fuzz input to the very end of a mapping whose next page is
// PROT_NONE, for harnesses whose code under test calls into a distribution
// library (libfdt, libprotobuf-c) that is not built with ASan: a read past
// the input by that library faults instead of passing unnoticed.
//
// The end is rounded up to `align` bytes (libfdt rejects a tree that is not
// 8-byte aligned; protobuf-c needs no rounding), so an overread smaller than
// the rounding lands on 0xff padding instead of the guard page.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_check.h"

namespace vtrn::fuzz {

class GuardedCopy {
 public:
  GuardedCopy(const uint8_t* data, size_t size, size_t align) {
    page_ = size_t(sysconf(_SC_PAGESIZE));
    const size_t padded = (size + align - 1) / align * align;
    span_ = (padded + page_ - 1) / page_ * page_ + page_;
    void* m = mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    FUZZ_CHECK(m != MAP_FAILED, "mmap of %zu bytes", span_);
    base_ = static_cast<uint8_t*>(m);
    uint8_t* guard = base_ + span_ - page_;
    FUZZ_CHECK(mprotect(guard, page_, PROT_NONE) == 0, "mprotect");
    ptr_ = guard - padded;
    memset(ptr_, 0xff, padded);
    if (size) memcpy(ptr_, data, size);
  }
  ~GuardedCopy() { munmap(base_, span_); }
  GuardedCopy(const GuardedCopy&) = delete;
  GuardedCopy& operator=(const GuardedCopy&) = delete;
  const uint8_t* data() const { return ptr_; }

 private:
  size_t page_ = 0;
  size_t span_ = 0;
  uint8_t* base_ = nullptr;
  uint8_t* ptr_ = nullptr;
};

}  // namespace vtrn::fuzz
