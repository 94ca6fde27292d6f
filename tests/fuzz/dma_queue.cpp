// Fuzzes the DMA queue engine (common/dma/dma_queue.cpp) and the host side of
// a queue (common/dma/dma_host.cpp) over shared rings the other party writes.
//
// The first input byte picks one of three scripts:
//  0  hostile host: the fuzzer writes raw or plausible descriptors, moves
//     sq_prod and cq_cons anywhere, asks for resets, and the engine polls;
//  1  well-formed: a correct HostQueue submits FIRST..LAST chains whose
//     descriptors are valid or broken in ways this file predicts on its own,
//     the engine polls, the host reaps, and at the end everything drains;
//  2  hostile device: the fuzzer writes cq_prod, sq_cons and completion
//     entries at will while a HostQueue submits and reaps.
// Rings, windows and output arrays are exact-size heap blocks, so ASan flags
// any access outside them; the Copier additionally checks every range it is
// handed against the host window and HBM before copying.
//
// Invariants: the Copier only sees ranges inside one of the two buffers and
// never overlapping ones; every completion status is inside the Status enum;
// a latched error stays until a reset. In the well-formed script: exactly
// one completion per chain, in submission order, carrying the chain's last
// cookie, with kOk exactly when every descriptor was valid and then the
// chain's byte count, and no side ever latches an error.
#include <deque>
#include <memory>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "vtrn/dma_host.h"
#include "vtrn/dma_queue.h"

using namespace vtrn::dma;

namespace {

struct Buffers {
  uint64_t hw_size;
  std::unique_ptr<uint8_t[]> hw;
  uint64_t hbm_base;
  uint64_t hbm_size;
  std::unique_ptr<uint8_t[]> hbm;
};

class RangeCheckingCopier final : public Copier {
 public:
  explicit RangeCheckingCopier(const Buffers& b) : b_(b) {}
  void copy(void* dst, const void* src, size_t length) override {
    FUZZ_CHECK(length > 0 && length <= kMaxDescBytes, "copy of %zu bytes", length);
    FUZZ_CHECK(inside(src, length), "copy source %p+%zu outside host window and HBM", src, length);
    FUZZ_CHECK(inside(dst, length), "copy destination %p+%zu outside host window and HBM", dst,
               length);
    const auto s = reinterpret_cast<uintptr_t>(src);
    const auto d = reinterpret_cast<uintptr_t>(dst);
    FUZZ_CHECK(s + length <= d || d + length <= s, "overlapping copy");
    memcpy(dst, src, length);
    bytes += length;
  }
  uint64_t bytes = 0;

 private:
  bool inside(const void* p, size_t n) const {
    return within(p, n, b_.hw.get(), b_.hw_size) || within(p, n, b_.hbm.get(), b_.hbm_size);
  }
  static bool within(const void* p, size_t n, const uint8_t* base, uint64_t size) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    const auto lo = reinterpret_cast<uintptr_t>(base);
    return a >= lo && a - lo <= size && n <= size - (a - lo);
  }
  const Buffers& b_;
};

// Rejects any HBM range touching [bad, bad + 64): stands in for a retired page.
class RetiredPagePolicy final : public HbmPolicy {
 public:
  explicit RetiredPagePolicy(uint64_t bad) : bad_(bad) {}
  Status check(uint64_t addr, uint64_t length) const override {
    return addr < bad_ + 64 && bad_ < addr + length ? kErrEcc : kOk;
  }

 private:
  uint64_t bad_;
};

Buffers make_buffers(vtrn::fuzz::Input& in) {
  Buffers b;
  b.hw_size = 1 + in.u16() % 1024;
  b.hbm_size = 1 + in.u16() % 1024;
  b.hbm_base = in.u64();
  b.hw = std::make_unique<uint8_t[]>(b.hw_size);
  b.hbm = std::make_unique<uint8_t[]>(b.hbm_size);
  return b;
}

AddressMap map_of(const Buffers& b, const HbmPolicy* policy) {
  return AddressMap{b.hw.get(), b.hw_size, b.hbm.get(), b.hbm_base, b.hbm_size, policy};
}

struct Rings {
  uint32_t depth;
  std::unique_ptr<QueueControl> ctl = std::make_unique<QueueControl>();
  std::unique_ptr<Descriptor[]> sq;
  std::unique_ptr<Completion[]> cq;
  QueueStats stats{};
  explicit Rings(uint32_t d)
      : depth(d), sq(std::make_unique<Descriptor[]>(d)), cq(std::make_unique<Completion[]>(d)) {}
};

// A descriptor whose fields are drawn from small ranges around the buffers,
// so most are near the edge of valid. Flags come from `flag_bits`:
// bit 0 FIRST, 1 LAST, 2 IRQ, 3 FENCE, 4 src host, 5 dst host, 6 an unknown bit.
Descriptor plausible(vtrn::fuzz::Input& in, const Buffers& b, uint8_t flag_bits) {
  Descriptor d{};
  d.flags = (flag_bits & 0xf) | (flag_bits & 0x10 ? kDescSrcHost : 0) |
            (flag_bits & 0x20 ? kDescDstHost : 0) | (flag_bits & 0x40 ? 1u << 20 : 0);
  const uint16_t src = in.u16() % 1100;
  const uint16_t dst = in.u16() % 1100;
  d.src = (d.flags & kDescSrcHost) ? src : b.hbm_base + src;
  d.dst = (d.flags & kDescDstHost) ? dst : b.hbm_base + dst;
  d.length = in.u8();
  d.cookie = in.u32();
  return d;
}

// Computed here, not by validate(): is `d` a descriptor the engine must copy?
bool expect_valid(const Descriptor& d, const Buffers& b) {
  if (d.flags & ~uint32_t(kDescKnownFlags)) return false;
  if (d.length == 0) return false;
  auto in_space = [&](uint64_t a, bool host) {
    if (host) return a + d.length <= b.hw_size;  // a < 1100: no wrap
    if (a < b.hbm_base) return false;
    return a - b.hbm_base + d.length <= b.hbm_size;
  };
  // hbm_base + 1100 may wrap; such an address is below hbm_base and rejected.
  const bool sh = d.flags & kDescSrcHost, dh = d.flags & kDescDstHost;
  if (!in_space(d.src, sh) || !in_space(d.dst, dh)) return false;
  if (sh == dh && d.src < d.dst + d.length && d.dst < d.src + d.length) return false;
  return true;
}

void check_completion(const Completion& c) {
  FUZZ_CHECK(c.status < kStatusCount, "completion status %u outside the enum", c.status);
  FUZZ_CHECK(uint64_t(c.bytes) <= uint64_t(kMaxDescBytes) * kMaxChainDescs, "completion bytes %u",
             c.bytes);
}

// Script 0: hostile host, device engine under test.
void hostile_host(vtrn::fuzz::Input& in, uint32_t depth) {
  Buffers b = make_buffers(in);
  const uint8_t pol = in.u8();
  RetiredPagePolicy policy(b.hbm_base + in.u16() % 1024);
  const AddressMap map = map_of(b, pol & 1 ? &policy : nullptr);
  RangeCheckingCopier copier(b);
  Rings r(depth);
  Queue q(r.ctl.get(), r.sq.get(), r.cq.get(), depth, &r.stats);

  for (int ops = 0; !in.empty() && ops < 256; ++ops) {
    const QueueError err = q.error();
    const bool reset_pending = r.ctl->reset_req.value != r.ctl->reset_ack.value;
    switch (in.u8() % 10) {
      case 0:
        in.bytes(&r.sq[in.u8() & (depth - 1)], sizeof(Descriptor));
        break;
      case 1: {
        const uint32_t slot = in.u8() & (depth - 1);
        r.sq[slot] = plausible(in, b, in.u8());
        break;
      }
      case 2:
        r.ctl->sq_prod.value = in.u32();
        break;
      case 3:
        r.ctl->sq_prod.value += in.u8() % (depth + 2);
        break;
      case 4:
        r.ctl->cq_cons.value = in.u32();
        break;
      case 5:
        r.ctl->cq_cons.value = r.ctl->cq_prod.value;
        break;
      case 6:
        if (in.u8() & 1) r.ctl->sq_prod.value = r.ctl->cq_cons.value = 0;
        ++r.ctl->reset_req.value;
        break;
      case 7:
        r.ctl->irq_armed.value = in.u8() & 1;
        break;
      case 8: {
        const uint32_t budget = in.u8() % (2 * depth + 2);
        const bool resetting = r.ctl->reset_req.value != r.ctl->reset_ack.value;
        const uint32_t cq_before = resetting ? 0 : r.ctl->cq_prod.value;
        const PollResult p = q.poll(map, copier, budget);
        FUZZ_CHECK(p.descriptors <= budget, "consumed %u with budget %u", p.descriptors, budget);
        FUZZ_CHECK(r.ctl->reset_ack.value == r.ctl->reset_req.value, "reset not acknowledged");
        FUZZ_CHECK(r.ctl->cq_prod.value - cq_before == p.completions,
                   "cq_prod moved %u for %u completions", r.ctl->cq_prod.value - cq_before,
                   p.completions);
        FUZZ_CHECK(p.completions <= depth, "%u completions in a ring of %u", p.completions, depth);
        for (uint32_t i = 0; i < p.completions; ++i) {
          check_completion(r.cq[(cq_before + i) & (depth - 1)]);
        }
        FUZZ_CHECK(r.ctl->error.value == q.error(), "published error %u, latched %u",
                   r.ctl->error.value, q.error());
        if (err != kQueueOk && !resetting) {
          FUZZ_CHECK(p.descriptors == 0 && p.completions == 0,
                     "latched queue moved data (%u descriptors)", p.descriptors);
        }
        break;
      }
      case 9:
        (void)q.has_work();
        break;
    }
    const bool reset_asked = r.ctl->reset_req.value != r.ctl->reset_ack.value;
    if (!reset_pending && !reset_asked && err != kQueueOk) {
      FUZZ_CHECK(q.error() == err, "latched error %u became %u", err, q.error());
    }
  }
}

// Script 1: a correct host, the whole queue end to end.
struct Expected {
  uint64_t cookie;
  bool ok;
  uint32_t bytes;
};

void reap_and_check(HostQueue& h, std::deque<Expected>& fifo, uint32_t max) {
  auto out = std::make_unique<Completion[]>(max);
  const uint32_t n = h.reap(out.get(), max);
  FUZZ_CHECK(n <= max, "reaped %u into %u", n, max);
  for (uint32_t i = 0; i < n; ++i) {
    check_completion(out[i]);
    FUZZ_CHECK(!fifo.empty(), "completion with no chain outstanding");
    const Expected e = fifo.front();
    fifo.pop_front();
    FUZZ_CHECK(out[i].cookie == e.cookie, "cookie %llu, expected %llu (order or count wrong)",
               (unsigned long long)out[i].cookie, (unsigned long long)e.cookie);
    FUZZ_CHECK((out[i].status == kOk) == e.ok, "status %u for a chain expected %s", out[i].status,
               e.ok ? "valid" : "invalid");
    if (e.ok) FUZZ_CHECK(out[i].bytes == e.bytes, "bytes %u, expected %u", out[i].bytes, e.bytes);
  }
}

void well_formed(vtrn::fuzz::Input& in, uint32_t depth) {
  Buffers b = make_buffers(in);
  // Keep HBM clear of the top of the address space here: the expectations
  // above assume hbm_base + offsets do not wrap.
  b.hbm_base &= 0x0000ffffffffffffull;
  const AddressMap map = map_of(b, nullptr);
  RangeCheckingCopier copier(b);
  Rings r(depth);
  Queue q(r.ctl.get(), r.sq.get(), r.cq.get(), depth, &r.stats);
  HostQueue h(r.ctl.get(), r.sq.get(), r.cq.get(), depth);
  std::deque<Expected> fifo;

  for (int ops = 0; !in.empty() && ops < 256; ++ops) {
    switch (in.u8() % 5) {
      case 0: {
        const uint32_t n = 1 + in.u8() % depth;
        Descriptor chain[16];
        bool ok = true;
        uint32_t bytes = 0;
        for (uint32_t i = 0; i < n; ++i) {
          uint8_t bits = in.u8() & 0x34;  // IRQ, src host, dst host; never unknown
          if (i == 0) bits |= 1;
          if (i == n - 1) bits |= 2;
          chain[i] = plausible(in, b, bits);
          ok = ok && expect_valid(chain[i], b);
          bytes += chain[i].length;
        }
        const uint32_t free_before = h.free_slots();
        const uint32_t prod_before = r.ctl->sq_prod.value;
        if (h.submit(chain, n)) {
          FUZZ_CHECK(n <= free_before, "submitted %u into %u free slots", n, free_before);
          fifo.push_back({chain[n - 1].cookie, ok, bytes});
        } else {
          FUZZ_CHECK(n > free_before && r.ctl->sq_prod.value == prod_before,
                     "refused %u with %u free, or published a partial batch", n, free_before);
        }
        break;
      }
      case 1:
        (void)q.poll(map, copier, 1 + in.u8() % (2 * depth));
        break;
      case 2:
        reap_and_check(h, fifo, 1 + in.u8() % (depth + 1));
        break;
      case 3:
        h.arm_irq(in.u8() & 1);
        break;
      case 4:
        h.begin_reset();
        (void)q.poll(map, copier, 0);
        FUZZ_CHECK(h.reset_done(), "engine did not acknowledge the reset");
        fifo.clear();  // chains in flight are the caller's to fail with kErrReset
        break;
    }
    FUZZ_CHECK(q.error() == kQueueOk && h.host_error() == HostError::kNone &&
                   h.device_error() == kQueueOk,
               "well-formed traffic latched engine %u / host %u", q.error(),
               unsigned(h.host_error()));
  }
  // Drain: every chain submitted gets exactly one completion.
  for (uint32_t i = 0; i < 4 * depth + 4 && !fifo.empty(); ++i) {
    (void)q.poll(map, copier, depth);
    reap_and_check(h, fifo, depth);
  }
  FUZZ_CHECK(fifo.empty(), "%zu chains never completed", fifo.size());
  Completion extra;
  FUZZ_CHECK(h.reap(&extra, 1) == 0, "a completion beyond the chains submitted");
}

// Script 2: hostile device, host queue under test.
void hostile_device(vtrn::fuzz::Input& in, uint32_t depth) {
  Rings r(depth);
  HostQueue h(r.ctl.get(), r.sq.get(), r.cq.get(), depth);
  uint64_t submitted = 0, reaped = 0;

  for (int ops = 0; !in.empty() && ops < 256; ++ops) {
    const HostError err = h.host_error();
    bool reset = false;
    switch (in.u8() % 9) {
      case 0: {
        const uint32_t n = in.u8() % (depth + 2);
        auto d = std::make_unique<Descriptor[]>(n);
        for (uint32_t i = 0; i < n; ++i) d[i].cookie = submitted + i;
        const uint32_t prod = r.ctl->sq_prod.value;
        if (h.submit(d.get(), n)) {
          FUZZ_CHECK(h.host_error() == HostError::kNone, "submit of %u succeeded on a queue "
                     "that latched host error %u", n, unsigned(h.host_error()));
          FUZZ_CHECK(r.ctl->sq_prod.value == prod + n, "sq_prod %u after %u from %u",
                     r.ctl->sq_prod.value, n, prod);
          FUZZ_CHECK(uint32_t(r.ctl->sq_prod.value - r.ctl->sq_cons.value) <= depth,
                     "submitted over unconsumed slots");
          submitted += n;
        } else {
          FUZZ_CHECK(r.ctl->sq_prod.value == prod, "refused submit moved sq_prod");
        }
        break;
      }
      case 1:
        r.ctl->cq_prod.value = in.u32();
        break;
      case 2:
        r.ctl->cq_prod.value += in.u8() % (depth + 2);
        break;
      case 3:
        r.ctl->sq_cons.value = in.u32();
        break;
      case 4:
        r.ctl->sq_cons.value += in.u8() % (depth + 2);
        break;
      case 5:
        in.bytes(&r.cq[in.u8() & (depth - 1)], sizeof(Completion));
        break;
      case 6: {
        const uint32_t max = in.u8() % (depth + 2);
        auto out = std::make_unique<Completion[]>(max);
        const uint32_t cons = r.ctl->cq_cons.value;
        const uint32_t n = h.reap(out.get(), max);
        FUZZ_CHECK(n <= max && n <= depth, "reaped %u (max %u, depth %u)", n, max, depth);
        FUZZ_CHECK(err == HostError::kNone || n == 0, "latched host queue reaped %u", n);
        FUZZ_CHECK(r.ctl->cq_cons.value == cons + n, "cq_cons not advanced by %u", n);
        for (uint32_t i = 0; i < n; ++i) {
          FUZZ_CHECK(memcmp(&out[i], &r.cq[(cons + i) & (depth - 1)], sizeof out[i]) == 0,
                     "reaped entry %u is not the ring's", i);
        }
        reaped += n;
        FUZZ_CHECK(reaped <= submitted, "reaped %llu completions for %llu descriptors",
                   (unsigned long long)reaped, (unsigned long long)submitted);
        break;
      }
      case 7: {
        const uint32_t f = h.free_slots();
        FUZZ_CHECK(f <= depth, "%u free slots of %u", f, depth);
        break;
      }
      case 8:
        h.begin_reset();
        FUZZ_CHECK(r.ctl->sq_prod.value == 0 && r.ctl->cq_cons.value == 0 &&
                       h.host_error() == HostError::kNone && h.outstanding() == 0,
                   "reset left state behind");
        submitted = reaped = 0;
        if (in.u8() & 1) r.ctl->reset_ack.value = r.ctl->reset_req.value;
        reset = true;
        break;
    }
    if (!reset && err != HostError::kNone) {
      FUZZ_CHECK(h.host_error() == err, "host error %u became %u", unsigned(err),
                 unsigned(h.host_error()));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vtrn::fuzz::Input in(data, size);
  const uint8_t mode = in.u8();
  const uint32_t depth = 1u << (in.u8() % 5);  // 1..16
  switch (mode % 3) {
    case 0:
      hostile_host(in, depth);
      break;
    case 1:
      well_formed(in, depth);
      break;
    case 2:
      hostile_device(in, depth);
      break;
  }
  return 0;
}
