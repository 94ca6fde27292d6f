// DMA region setup, HBM range derivation and the round-robin queue
// scheduler. See fw/dma_sched.h.
#include "fw/dma_sched.h"

#include <stdio.h>
#include <string.h>

#include "vtrn/ctrl_ring.h"

namespace fw::dma {

using namespace vtrn::dma;
using vtrn::hostif::load_acquire;

namespace {

using vtrn::Code;
using vtrn::Error;

// Counts the bytes the queues hand to the real copier.
class CountingCopier final : public Copier {
 public:
  explicit CountingCopier(Copier& inner) : inner_(inner) {}
  void copy(void* dst, const void* src, size_t length) override {
    bytes_ += length;
    inner_.copy(dst, src, length);
  }
  [[nodiscard]] uint64_t bytes() const { return bytes_; }

 private:
  Copier& inner_;
  uint64_t bytes_ = 0;
};

}  // namespace

Error derive_hbm(const HbmInputs& in, HbmRange* out) {
  if (in.hbm_bytes == 0) return Error(Code::kBadProperty, "hbm: the board gives this chip no HBM");
  if (in.ram_base > UINT64_MAX - kFirmwareRamBytes ||
      in.ram_base + kFirmwareRamBytes > UINT64_MAX - in.hbm_bytes) {
    return Error(Code::kNoSpace, "hbm: %llu MiB above RAM base 0x%llx wraps the address space",
                 (unsigned long long)(in.hbm_bytes >> 20), (unsigned long long)in.ram_base);
  }
  const uint64_t base = in.ram_base + kFirmwareRamBytes;
  const uint64_t need = kFirmwareRamBytes + in.hbm_bytes;
  if (in.ram_size < need) {
    return Error(Code::kNoSpace,
                 "hbm: RAM is %llu MiB, the firmware's 64 MiB plus %llu MiB of HBM need %llu MiB "
                 "(QEMU -m too small for this board)",
                 (unsigned long long)(in.ram_size >> 20), (unsigned long long)(in.hbm_bytes >> 20),
                 (unsigned long long)(need >> 20));
  }
  if (in.firmware_end > base) {
    return Error(Code::kNoSpace, "hbm: firmware memory ends at 0x%llx, inside HBM starting at 0x%llx",
                 (unsigned long long)in.firmware_end, (unsigned long long)base);
  }
  out->base = base;
  out->size = in.hbm_bytes;
  return Error();
}

const char* queue_error_name(uint32_t e) {
  switch (e) {
    case kQueueOk: return "ok";
    case kQueueSqIndexJump: return "sq index jump";
    case kQueueSqIndexBackward: return "sq index backward";
    case kQueueCqConsumerAhead: return "cq consumer ahead";
    default: return "unknown";
  }
}

Error check_geometry(uint32_t queues, uint32_t depth) {
  if (queues == 0 || queues > kMaxQueues) {
    return Error(Code::kBadProperty, "dma: %u queues, the ABI allows 1..%u", unsigned(queues),
                 unsigned(kMaxQueues));
  }
  if (depth < kMinDepth || depth > kMaxDepth || (depth & (depth - 1))) {
    return Error(Code::kBadProperty, "dma: queue depth %u is not a power of two in %u..%u",
                 unsigned(depth), unsigned(kMinDepth), unsigned(kMaxDepth));
  }
  return Error();
}

Error Scheduler::init(uint8_t* region, uint64_t region_size, uint32_t queues, uint32_t depth,
                      const HbmRange& hbm, const Budget& budget, Clock clock, Observer* observer) {
  VTRN_TRY(check_geometry(queues, depth));
  const uint64_t need = dma_region_bytes(queues, depth);
  if (region_size < need) {
    return Error(Code::kNoSpace, "dma: region of %llu bytes, %u queues need %llu",
                 (unsigned long long)region_size, unsigned(queues), (unsigned long long)need);
  }
  if (budget.descriptors == 0 || budget.chunk == 0 || budget.chunk > budget.descriptors ||
      budget.bytes == 0) {
    return Error(Code::kInvalidArgument, "dma: budget of %u descriptors in chunks of %u, %llu bytes",
                 unsigned(budget.descriptors), unsigned(budget.chunk),
                 (unsigned long long)budget.bytes);
  }
  memset(region, 0, need);

  DmaRegionHeader h{};
  h.version = kDmaRegionVersion;
  h.queue_count = queues;
  h.depth = depth;
  h.max_desc_bytes = kMaxDescBytes;
  h.queue_stride = queue_stride(depth);
  h.hbm_base = hbm.base;
  h.hbm_size = hbm.size;
  h.max_chain_descs = kMaxChainDescs;
  memcpy(region, &h, sizeof h);

  for (uint32_t i = 0; i < queues; ++i) {
    uint8_t* blk = region + kDmaQueuesOffset + uint64_t(i) * queue_stride(depth);
    Slot& s = slots_[i];
    s = Slot{};
    s.ctl = reinterpret_cast<QueueControl*>(blk);
    s.queue = Queue(s.ctl, reinterpret_cast<Descriptor*>(blk + kQueueSqOffset),
                    reinterpret_cast<Completion*>(blk + cq_offset(depth)), depth,
                    reinterpret_cast<QueueStats*>(blk + kQueueStatsOffset));
    s.reset_ack_seen = load_acquire(&s.ctl->reset_ack);
  }
  count_ = queues;
  depth_ = depth;
  budget_ = budget;
  next_ = 0;
  wake_gen_seen_ = 0;
  clock_ = clock;
  observer_ = observer;
  totals_ = Totals{};
  return Error();
}

bool Scheduler::runnable(const Slot& s, uint64_t wake_gen) const {
  if (!s.queue.has_work()) return false;
  if (!s.stalled || wake_gen != wake_gen_seen_) return true;
  return load_acquire(&s.ctl->cq_cons) != s.stall_cq_cons ||
         load_acquire(&s.ctl->sq_prod) != s.stall_sq_prod ||
         load_acquire(&s.ctl->reset_req) != s.stall_reset_req;
}

void Scheduler::note_stall(Slot& s, bool budget_hit) {
  s.stalled = false;
  if (budget_hit || s.queue.error() != kQueueOk || !s.queue.has_work()) return;
  // Work left and budget left: poll stopped for completion-ring space (it
  // needs at most two slots: an unterminated chain's error plus this one).
  const uint32_t cons = load_acquire(&s.ctl->cq_cons);
  const uint32_t used = load_acquire(&s.ctl->cq_prod) - cons;
  if (used + 2 <= depth_) return;
  s.stalled = true;
  s.stall_cq_cons = cons;
  s.stall_sq_prod = load_acquire(&s.ctl->sq_prod);
  s.stall_reset_req = load_acquire(&s.ctl->reset_req);
}

PassResult Scheduler::run_pass(const AddressMap& map, Copier& copier, uint64_t wake_gen) {
  PassResult r;
  if (count_ == 0) return r;
  if (wake_gen != wake_gen_seen_) {
    // Something woke us (a doorbell, a tick): stalled queues get another try.
    for (uint32_t i = 0; i < count_; ++i) slots_[i].stalled = false;
    wake_gen_seen_ = wake_gen;
  }
  CountingCopier counting(copier);
  const uint32_t start = next_;
  next_ = (next_ + 1) % count_;
  for (uint32_t k = 0; k < count_; ++k) {
    const uint32_t i = (start + k) % count_;
    Slot& s = slots_[i];
    if (!runnable(s, wake_gen_seen_)) continue;

    const QueueError before = s.queue.error();
    const uint64_t bytes0 = counting.bytes();
    const uint64_t t0 = clock_ ? clock_() : 0;
    uint32_t taken = 0;
    uint32_t completed = 0;
    bool budget_hit = false;
    for (;;) {
      const uint32_t left = budget_.descriptors - taken;
      const uint32_t chunk = left < budget_.chunk ? left : budget_.chunk;
      const PollResult p = s.queue.poll(map, counting, chunk);
      taken += p.descriptors;
      completed += p.completions;
      r.irq = r.irq || p.irq;
      // Fewer than asked: the ring ran dry, the completion ring filled or
      // the queue latched. Either way this turn is over.
      if (p.descriptors < chunk) break;
      if (taken >= budget_.descriptors || counting.bytes() - bytes0 >= budget_.bytes) {
        budget_hit = true;
        break;
      }
    }
    const uint64_t t1 = clock_ ? clock_() : 0;
    ++r.queues_polled;
    if (taken || completed) {
      s.queue.add_busy_ns(t1 - t0);
      totals_.busy_ns += t1 - t0;
      r.progress = true;
    }
    r.descriptors += taken;
    r.completions += completed;

    // reset_ack is engine-written; the host rewriting it only costs a line.
    const uint32_t ack = load_acquire(&s.ctl->reset_ack);
    const bool was_reset = ack != s.reset_ack_seen;
    if (was_reset) {
      s.reset_ack_seen = ack;
      ++totals_.resets;
      r.progress = true;
      if (observer_) observer_->on_reset(i);
    }
    const QueueError after = s.queue.error();
    if (after != kQueueOk && (before == kQueueOk || was_reset)) {
      ++totals_.latches;
      if (observer_) observer_->on_latched(i, after);
    }
    note_stall(s, budget_hit);
  }
  totals_.descriptors += r.descriptors;
  totals_.completions += r.completions;
  totals_.bytes += counting.bytes();
  if (r.irq) ++totals_.irq_passes;
  return r;
}

bool Scheduler::wants_run(uint64_t wake_gen) const {
  for (uint32_t i = 0; i < count_; ++i) {
    if (runnable(slots_[i], wake_gen)) return true;
  }
  return false;
}

bool Scheduler::stalled() const {
  for (uint32_t i = 0; i < count_; ++i) {
    if (slots_[i].stalled && slots_[i].queue.has_work()) return true;
  }
  return false;
}

}  // namespace fw::dma
