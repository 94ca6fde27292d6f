// Bump allocator behind protobuf-c's ProtobufCAllocator. See fw/pb_arena.h.
// Allocations are 16-byte aligned, the strictest alignment any protobuf-c
// structure (or a SIMD copy into it) needs on AArch64 and x86-64.
#include "fw/pb_arena.h"

namespace fw::pb {
namespace {
constexpr size_t kAlign = 16;
}

Arena::Arena(void* buffer, size_t size)
    : base_(static_cast<uint8_t*>(buffer)), size_(size) {
  allocator_.alloc = &Arena::do_alloc;
  allocator_.free = &Arena::do_free;
  allocator_.allocator_data = this;
  // The buffer itself may start unaligned: skip to the first aligned byte.
  const size_t mis = reinterpret_cast<uintptr_t>(base_) & (kAlign - 1);
  if (mis) {
    const size_t skip = kAlign - mis;
    base_ += skip < size_ ? skip : size_;
    size_ -= skip < size_ ? skip : size_;
  }
}

void Arena::reset() {
  used_ = 0;
  exhausted_ = false;
}

void* Arena::do_alloc(void* self, size_t size) {
  Arena* a = static_cast<Arena*>(self);
  const size_t rounded = (size + kAlign - 1) & ~(kAlign - 1);
  if (rounded < size || rounded > a->size_ - a->used_) {
    a->exhausted_ = true;
    return nullptr;
  }
  void* p = a->base_ + a->used_;
  a->used_ += rounded;
  if (a->used_ > a->high_water_) a->high_water_ = a->used_;
  return p;
}

void Arena::do_free(void*, void*) {}

}  // namespace fw::pb
