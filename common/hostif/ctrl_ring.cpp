// Slot-ring producer and consumer over shared memory. See ctrl_ring.h for the
// trust model. The peer's index is read exactly once per operation into a
// local, so a peer that changes it concurrently cannot make one check pass
// and a later use see a different value.
#include "vtrn/ctrl_ring.h"

#include <string.h>

#include "vtrn/crc32.h"

namespace vtrn::hostif {

uint32_t slot_crc(uint32_t seq, uint32_t kind, const void* payload, uint32_t length) {
  uint8_t head[12];
  const uint32_t words[3] = {seq, kind, length};
  for (int i = 0; i < 3; ++i) {
    for (int b = 0; b < 4; ++b) head[i * 4 + b] = uint8_t(words[i] >> (8 * b));
  }
  uint32_t c = crc32(head, sizeof head);
  return crc32(payload, length, c);
}

RingProducer::RingProducer(const RingMemory& mem) : mem_(mem) {
  prod_ = load_acquire(mem_.prod);
  cons_seen_ = load_acquire(mem_.cons);
}

void RingProducer::latch(CtrlError e) {
  if (error_ != kCtrlOk) return;
  error_ = e;
  if (mem_.my_error) store_release(mem_.my_error, e);
}

bool RingProducer::refresh_consumer() {
  const uint32_t cons = load_acquire(mem_.cons);
  // The consumer may only move forward, and never past what we produced.
  if (uint32_t(prod_ - cons) > mem_.slot_count || uint32_t(cons - cons_seen_) > mem_.slot_count) {
    latch(kCtrlConsumerAhead);
    return false;
  }
  cons_seen_ = cons;
  return true;
}

uint32_t RingProducer::in_flight() {
  if (error_ == kCtrlOk) (void)refresh_consumer();
  return prod_ - cons_seen_;
}

RingStatus RingProducer::push(uint32_t kind, uint32_t seq, const void* payload, uint32_t length) {
  if (error_ != kCtrlOk) return RingStatus::kBroken;
  if (length > max_payload()) return RingStatus::kTooLarge;
  if (!refresh_consumer()) return RingStatus::kBroken;
  if (prod_ - cons_seen_ >= mem_.slot_count) return RingStatus::kFull;

  uint8_t* slot = mem_.slots + size_t(prod_ & (mem_.slot_count - 1)) * mem_.slot_size;
  SlotHeader h{seq, kind, length, slot_crc(seq, kind, payload, length)};
  memcpy(slot, &h, sizeof h);
  if (length) memcpy(slot + sizeof h, payload, length);
  // Release: the slot contents must be visible before the index that
  // publishes them.
  ++prod_;
  store_release(mem_.prod, prod_);
  return RingStatus::kOk;
}

void RingProducer::reset(uint32_t index) {
  prod_ = index;
  cons_seen_ = index;
  error_ = kCtrlOk;
  store_release(mem_.prod, index);
  if (mem_.my_error) store_release(mem_.my_error, kCtrlOk);
}

RingConsumer::RingConsumer(const RingMemory& mem, uint32_t expected_kinds)
    : mem_(mem), kinds_(expected_kinds) {
  cons_ = load_acquire(mem_.cons);
  prod_seen_ = cons_;
}

void RingConsumer::latch(CtrlError e) {
  if (error_ != kCtrlOk) return;
  error_ = e;
  if (mem_.my_error) store_release(mem_.my_error, e);
}

bool RingConsumer::has_pending() {
  if (error_ != kCtrlOk) return false;
  return load_acquire(mem_.prod) != cons_;
}

RingStatus RingConsumer::pop(SlotHeader* hdr, void* buf, uint32_t buf_size) {
  if (error_ != kCtrlOk) return RingStatus::kBroken;
  const uint32_t prod = load_acquire(mem_.prod);
  if (int32_t(prod - prod_seen_) < 0) {
    latch(kCtrlIndexBackward);
    return RingStatus::kBroken;
  }
  if (uint32_t(prod - cons_) > mem_.slot_count) {
    latch(kCtrlIndexJump);
    return RingStatus::kBroken;
  }
  prod_seen_ = prod;
  if (prod == cons_) return RingStatus::kEmpty;

  const uint8_t* slot = mem_.slots + size_t(cons_ & (mem_.slot_count - 1)) * mem_.slot_size;
  SlotHeader h;
  memcpy(&h, slot, sizeof h);
  const uint32_t max_payload = mem_.slot_size - kCtrlSlotHeader;
  if (h.length > max_payload) {
    latch(kCtrlBadLength);
    return RingStatus::kBroken;
  }
  if (h.kind >= 32 || !(kinds_ & (1u << h.kind))) {
    latch(kCtrlBadKind);
    return RingStatus::kBroken;
  }
  if (h.length > buf_size) return RingStatus::kTooLarge;
  // Copy first, then check the CRC on the copy: the producer could rewrite
  // the slot between a check on shared memory and our use of it.
  memcpy(buf, slot + sizeof h, h.length);
  if (slot_crc(h.seq, h.kind, buf, h.length) != h.crc32) {
    latch(kCtrlBadCrc);
    return RingStatus::kBroken;
  }
  *hdr = h;
  // Release: our reads of the slot complete before the producer may reuse it.
  ++cons_;
  store_release(mem_.cons, cons_);
  return RingStatus::kOk;
}

void RingConsumer::reset(uint32_t index) {
  cons_ = index;
  prod_seen_ = index;
  error_ = kCtrlOk;
  store_release(mem_.cons, index);
  if (mem_.my_error) store_release(mem_.my_error, kCtrlOk);
}

const char* ring_error_name(uint32_t e) {
  switch (e) {
    case kCtrlOk: return "ok";
    case kCtrlIndexJump: return "producer index jumped";
    case kCtrlIndexBackward: return "producer index moved backwards";
    case kCtrlBadLength: return "slot length too large";
    case kCtrlBadCrc: return "slot CRC mismatch";
    case kCtrlBadKind: return "unexpected slot kind";
    case kCtrlConsumerAhead: return "consumer index beyond producer";
  }
  return "unknown ring error";
}

}  // namespace vtrn::hostif
