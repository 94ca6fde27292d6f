// The control queue logic over BAR2 shared memory: one producer and one
// consumer of a ring of fixed-size slots (include/vtrn/hostif.h). The same
// code runs in the firmware (request consumer, response producer) and in the
// host driver (request producer, response consumer).
//
// Neither side trusts the other. The consumer copies the peer's index once,
// checks it against its own, copies the slot out of shared memory, and checks
// the copy (length, CRC, kind) before returning it. The producer checks the
// peer's consumer index the same way before reusing a slot. The first
// violation latches the ring broken with a CtrlError, published in the side's
// own error word; a broken ring moves no more data until reset().
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/hostif.h"

namespace vtrn::hostif {

enum class RingStatus : uint32_t {
  kOk = 0,
  kEmpty = 1,     // consumer: nothing to pop
  kFull = 2,      // producer: no free slot
  kTooLarge = 3,  // producer: payload larger than the slot / consumer: buffer too small
  kBroken = 4,    // the ring has latched an error; see error()
};

// Reads and writes one shared index word with the ordering the ABI requires.
inline uint32_t load_acquire(const CacheLineIndex* idx) {
  return __atomic_load_n(&idx->value, __ATOMIC_ACQUIRE);
}
inline void store_release(CacheLineIndex* idx, uint32_t v) {
  __atomic_store_n(&idx->value, v, __ATOMIC_RELEASE);
}

// CRC over the slot header fields (crc32 field excluded) and the payload.
[[nodiscard]] uint32_t slot_crc(uint32_t seq, uint32_t kind, const void* payload, uint32_t length);

struct RingMemory {
  uint8_t* slots = nullptr;   // kSlots consecutive slots of slot_size bytes
  uint32_t slot_count = 0;    // power of two
  uint32_t slot_size = 0;     // >= kCtrlSlotHeader
  CacheLineIndex* prod = nullptr;
  CacheLineIndex* cons = nullptr;
  CacheLineIndex* my_error = nullptr;  // this side's error word (may be null)
};

class RingProducer {
 public:
  RingProducer() = default;
  explicit RingProducer(const RingMemory& mem);

  // Copies the payload into the next slot and publishes it. kFull leaves the
  // ring untouched (retry after the consumer advances).
  [[nodiscard]] RingStatus push(uint32_t kind, uint32_t seq, const void* payload, uint32_t length);
  // Slots the consumer has not yet released, as far as this side can tell.
  [[nodiscard]] uint32_t in_flight();
  [[nodiscard]] CtrlError error() const { return error_; }
  [[nodiscard]] uint32_t index() const { return prod_; }
  [[nodiscard]] uint32_t max_payload() const { return mem_.slot_size - kCtrlSlotHeader; }
  // Adopts `index` as both producer and consumer position and clears the error.
  void reset(uint32_t index);

 private:
  bool refresh_consumer();
  void latch(CtrlError e);

  RingMemory mem_{};
  uint32_t prod_ = 0;
  uint32_t cons_seen_ = 0;
  CtrlError error_ = kCtrlOk;
};

class RingConsumer {
 public:
  RingConsumer() = default;
  // `expected_kinds` is a bit mask of 1 << SlotKind accepted in this ring.
  RingConsumer(const RingMemory& mem, uint32_t expected_kinds);

  // Copies the oldest slot into `hdr` and `buf` (validated), then releases it.
  [[nodiscard]] RingStatus pop(SlotHeader* hdr, void* buf, uint32_t buf_size);
  // True when the producer index says a slot is waiting (does not validate it).
  [[nodiscard]] bool has_pending();
  [[nodiscard]] CtrlError error() const { return error_; }
  [[nodiscard]] uint32_t index() const { return cons_; }
  void reset(uint32_t index);

 private:
  void latch(CtrlError e);

  RingMemory mem_{};
  uint32_t kinds_ = 0;
  uint32_t cons_ = 0;
  uint32_t prod_seen_ = 0;
  CtrlError error_ = kCtrlOk;
};

// The one name table of CtrlError, host and firmware: a short phrase
// ("slot CRC mismatch"); "unknown ring error"
// outside the closed list.
const char* ring_error_name(uint32_t e);

}  // namespace vtrn::hostif
