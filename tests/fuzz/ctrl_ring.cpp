// Fuzzes the control-ring logic (common/hostif/ctrl_ring.cpp) against a peer
// that writes anything it likes into the shared slots and indexes.
//
// The input is a script: a small ring geometry, then ops that either act as
// the hostile peer (move the producer index of the ring we consume or the
// consumer index of the ring we produce, scribble slot bytes, publish a
// correctly CRC'd slot) or call our side (pop, push, has_pending, in_flight,
// reset). Slots and buffers are exact-size heap blocks so ASan sees any
// access outside them. It is not a concurrency test: the peer only acts
// between our calls; the single-read-per-index rule is reviewed, not fuzzed.
//
// Invariants: pop returns kOk only for a slot that is inside the ring,
// carries an accepted kind, fits the caller's buffer and whose CRC matches
// the bytes returned; a ring that returned kBroken stays broken with the
// same error (published in its error word) until reset(); push writes a
// valid slot and never runs more than slot_count ahead of the consumer.
#include <memory>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "vtrn/crc32.h"
#include "vtrn/ctrl_ring.h"

using namespace vtrn::hostif;

namespace {

constexpr uint32_t kSlotSizes[4] = {kCtrlSlotHeader, 40, 256, kCtrlSlotSize};
constexpr uint32_t kMaxBuf = 8192;

struct Ring {
  uint32_t count;
  uint32_t size;
  std::unique_ptr<uint8_t[]> slots;
  uint8_t* slot(uint32_t index) { return slots.get() + size_t(index & (count - 1)) * size; }
  size_t bytes() const { return size_t(count) * size; }
};

Ring make_ring(uint8_t cfg) {
  Ring r{1u << (cfg & 3), kSlotSizes[(cfg >> 2) & 3], nullptr};
  r.slots = std::make_unique<uint8_t[]>(r.bytes());
  return r;
}

// The peer's honest publish: header, payload, CRC, then the index.
void peer_publish(Ring& r, CacheLineIndex* prod, vtrn::fuzz::Input& in) {
  const uint32_t kind = in.u8();
  const uint32_t seq = in.u32();
  const uint32_t max = r.size - kCtrlSlotHeader;
  uint32_t length = in.u16();
  if (length > max) length = max;
  uint8_t* s = r.slot(prod->value);
  in.bytes(s + kCtrlSlotHeader, length);
  const SlotHeader h{seq, kind, length, slot_crc(seq, kind, s + kCtrlSlotHeader, length)};
  memcpy(s, &h, sizeof h);
  ++prod->value;
}

void check_pop(Ring& r, RingConsumer& c, CtrlIndexes& idx, uint32_t kinds, uint32_t buf_size) {
  const CtrlError err_before = c.error();
  const uint32_t index_before = c.index();
  auto buf = std::make_unique<uint8_t[]>(buf_size);
  SlotHeader h{};
  const RingStatus st = c.pop(&h, buf.get(), buf_size);
  const uint32_t prod = idx.req_prod.value;
  if (err_before != kCtrlOk) {
    FUZZ_CHECK(st == RingStatus::kBroken && c.error() == err_before,
               "latched ring (error %u) returned %u / error %u", err_before, unsigned(st),
               c.error());
  }
  switch (st) {
    case RingStatus::kOk: {
      FUZZ_CHECK(c.error() == kCtrlOk, "kOk with error %u", c.error());
      FUZZ_CHECK(c.index() == index_before + 1, "index %u -> %u", index_before, c.index());
      FUZZ_CHECK(idx.req_cons.value == c.index(), "published cons %u, own %u",
                 idx.req_cons.value, c.index());
      FUZZ_CHECK(prod != index_before && uint32_t(prod - index_before) <= r.count,
                 "popped slot %u outside [cons, prod=%u)", index_before, prod);
      FUZZ_CHECK(h.length <= buf_size && h.length <= r.size - kCtrlSlotHeader,
                 "length %u, buffer %u, slot %u", h.length, buf_size, r.size);
      FUZZ_CHECK(h.kind < 32 && (kinds & (1u << h.kind)), "kind %u not in mask 0x%x", h.kind,
                 kinds);
      FUZZ_CHECK(slot_crc(h.seq, h.kind, buf.get(), h.length) == h.crc32,
                 "returned slot with a CRC that does not match its bytes");
      const uint8_t* s = r.slot(index_before);
      FUZZ_CHECK(memcmp(s, &h, sizeof h) == 0 &&
                     memcmp(s + kCtrlSlotHeader, buf.get(), h.length) == 0,
                 "returned bytes differ from slot %u", index_before);
      break;
    }
    case RingStatus::kEmpty:
      FUZZ_CHECK(c.error() == kCtrlOk && prod == index_before && c.index() == index_before,
                 "empty with prod %u cons %u error %u", prod, index_before, c.error());
      break;
    case RingStatus::kTooLarge: {
      SlotHeader sh;
      memcpy(&sh, r.slot(index_before), sizeof sh);
      FUZZ_CHECK(c.error() == kCtrlOk && sh.length > buf_size && c.index() == index_before,
                 "too-large for length %u into %u", sh.length, buf_size);
      break;
    }
    case RingStatus::kBroken:
      FUZZ_CHECK(c.error() != kCtrlOk && c.index() == index_before,
                 "broken without a latched error");
      FUZZ_CHECK(idx.fw_error.value == c.error(), "error word %u, latched %u",
                 idx.fw_error.value, c.error());
      break;
    default:
      FUZZ_CHECK(false, "pop returned %u", unsigned(st));
  }
}

void check_push(Ring& r, RingProducer& p, CtrlIndexes& idx, vtrn::fuzz::Input& in) {
  const uint32_t kind = in.u8();
  const uint32_t seq = in.u32();
  const uint32_t length = in.u16() % (kCtrlSlotSize + 64);
  auto payload = std::make_unique<uint8_t[]>(length);
  in.bytes(payload.get(), length);
  const CtrlError err_before = p.error();
  const uint32_t index_before = p.index();
  const RingStatus st = p.push(kind, seq, payload.get(), length);
  const uint32_t cons = idx.resp_cons.value;
  if (err_before != kCtrlOk) {
    FUZZ_CHECK(st == RingStatus::kBroken && p.error() == err_before, "latched producer moved");
  }
  switch (st) {
    case RingStatus::kOk: {
      FUZZ_CHECK(uint32_t(index_before - cons) < r.count,
                 "pushed into a slot in use: prod %u cons %u", index_before, cons);
      FUZZ_CHECK(p.index() == index_before + 1 && idx.resp_prod.value == p.index(),
                 "producer index not published");
      SlotHeader h;
      const uint8_t* s = r.slot(index_before);
      memcpy(&h, s, sizeof h);
      FUZZ_CHECK(h.seq == seq && h.kind == kind && h.length == length &&
                     h.crc32 == slot_crc(seq, kind, payload.get(), length) &&
                     memcmp(s + kCtrlSlotHeader, payload.get(), length) == 0,
                 "pushed slot does not hold what was pushed");
      break;
    }
    case RingStatus::kFull:
      FUZZ_CHECK(p.error() == kCtrlOk && uint32_t(index_before - cons) == r.count,
                 "full with prod %u cons %u count %u", index_before, cons, r.count);
      break;
    case RingStatus::kTooLarge:
      FUZZ_CHECK(length > p.max_payload() && p.error() == err_before, "too large for %u", length);
      break;
    case RingStatus::kBroken:
      FUZZ_CHECK(p.error() != kCtrlOk && idx.host_error.value == p.error(),
                 "broken without a published error");
      break;
    default:
      FUZZ_CHECK(false, "push returned %u", unsigned(st));
  }
  FUZZ_CHECK(st == RingStatus::kOk || p.index() == index_before, "index moved on failure");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vtrn::fuzz::Input in(data, size);
  Ring cring = make_ring(in.u8());
  Ring pring = make_ring(in.u8());
  const uint32_t kinds = in.u8();
  auto idx = std::make_unique<CtrlIndexes>();
  idx->req_cons.value = idx->req_prod.value = in.u32();
  idx->resp_prod.value = idx->resp_cons.value = in.u32();

  RingConsumer c(RingMemory{cring.slots.get(), cring.count, cring.size, &idx->req_prod,
                            &idx->req_cons, &idx->fw_error},
                 kinds);
  RingProducer p(RingMemory{pring.slots.get(), pring.count, pring.size, &idx->resp_prod,
                            &idx->resp_cons, &idx->host_error});

  for (int ops = 0; !in.empty() && ops < 256; ++ops) {
    const CtrlError cerr = c.error();
    const CtrlError perr = p.error();
    bool creset = false, preset = false;
    switch (in.u8() % 14) {
      case 0:
        check_pop(cring, c, *idx, kinds, in.u16() % (kMaxBuf + 1));
        break;
      case 1:
        idx->req_prod.value = in.u32();
        break;
      case 2:
        idx->req_prod.value += in.u8();
        break;
      case 3:
        idx->req_prod.value -= in.u8();
        break;
      case 4: {
        const size_t off = in.u16() % cring.bytes();
        size_t len = in.u8();
        if (len > cring.bytes() - off) len = cring.bytes() - off;
        in.bytes(cring.slots.get() + off, len);
        break;
      }
      case 5:
        peer_publish(cring, &idx->req_prod, in);
        break;
      case 6: {
        const bool pending = c.has_pending();
        FUZZ_CHECK(!pending || c.error() == kCtrlOk, "latched ring reports pending work");
        break;
      }
      case 7:
        c.reset(in.u32());
        FUZZ_CHECK(c.error() == kCtrlOk && idx->req_cons.value == c.index() &&
                       idx->fw_error.value == kCtrlOk,
                   "consumer reset did not publish");
        idx->req_prod.value = c.index();
        creset = true;
        break;
      case 8:
        check_push(pring, p, *idx, in);
        break;
      case 9:
        idx->resp_cons.value = in.u32();
        break;
      case 10:
        idx->resp_cons.value += in.u8() % (pring.count + 1);
        break;
      case 11: {
        const uint32_t n = p.in_flight();
        FUZZ_CHECK(p.error() != kCtrlOk || n <= pring.count, "in flight %u of %u", n,
                   pring.count);
        break;
      }
      case 12:
        p.reset(in.u32());
        FUZZ_CHECK(p.error() == kCtrlOk && idx->resp_prod.value == p.index(),
                   "producer reset did not publish");
        idx->resp_cons.value = p.index();
        preset = true;
        break;
      case 13: {
        // The peer consumes everything we produced, as a healthy host would.
        idx->resp_cons.value = idx->resp_prod.value;
        break;
      }
    }
    FUZZ_CHECK(creset || cerr == kCtrlOk || c.error() == cerr, "consumer error %u became %u",
               cerr, c.error());
    FUZZ_CHECK(preset || perr == kCtrlOk || p.error() == perr, "producer error %u became %u",
               perr, p.error());
  }
  return 0;
}
