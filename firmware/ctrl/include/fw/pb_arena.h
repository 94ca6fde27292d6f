// A bump allocator for protobuf-c: every allocation protobuf-c makes while
// unpacking one message comes from a fixed buffer, and reset() frees all of
// it at once before the next message. free() is a no-op.
//
// This is how the firmware decodes messages without a heap. An exhausted
// arena returns NULL, which protobuf-c reports as a failed unpack; the
// caller tells that apart from malformed bytes with exhausted(). Portable:
// built into the firmware and into host unit tests.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

namespace fw::pb {

class Arena {
 public:
  Arena(void* buffer, size_t size);
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  ProtobufCAllocator* allocator() { return &allocator_; }
  // Forgets every allocation and the exhausted flag.
  void reset();
  [[nodiscard]] bool exhausted() const { return exhausted_; }
  [[nodiscard]] size_t used() const { return used_; }
  // Largest used() seen since construction (sizing evidence for telemetry).
  [[nodiscard]] size_t high_water() const { return high_water_; }

 private:
  static void* do_alloc(void* self, size_t size);
  static void do_free(void* self, void* pointer);

  uint8_t* base_;
  size_t size_;
  size_t used_ = 0;
  size_t high_water_ = 0;
  bool exhausted_ = false;
  ProtobufCAllocator allocator_;
};

}  // namespace fw::pb
