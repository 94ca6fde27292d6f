// One DMA queue, device side. See dma_queue.h for the trust model.
#include "vtrn/dma_queue.h"

#include <string.h>

#include "vtrn/ctrl_ring.h"

namespace vtrn::dma {

using hostif::load_acquire;
using hostif::store_release;

namespace {

// Descriptors at least this long publish the completions before them first.
constexpr uint32_t kPublishBeforeCopy = 4096;

struct Resolved {
  Status status;
  uint8_t* ptr;
};

// Inlined: it runs twice per descriptor, and the call was a third of it.
[[gnu::always_inline]] inline Resolved resolve(uint64_t addr, uint32_t length, bool host, const AddressMap& map,
                                               Status range_err) {
  if (addr > UINT64_MAX - length) return {kErrAddrOverflow, nullptr};
  if (host) {
    if (addr > map.host_window_size || length > map.host_window_size - addr) return {range_err, nullptr};
    return {kOk, map.host_window + addr};
  }
  // A stitched allocation's device addresses: only through
  // the policy, which knows what is mapped there.
  if (map.remap_size != 0 && map.policy && addr >= map.remap_base &&
      addr - map.remap_base < map.remap_size) {
    if (length > map.remap_size - (addr - map.remap_base)) return {range_err, nullptr};
    const Status s = map.policy->check(addr, length);
    if (s != kOk) return {s, nullptr};
    return {kOk, map.remap + (addr - map.remap_base)};
  }
  if (addr < map.hbm_base || addr - map.hbm_base > map.hbm_size ||
      length > map.hbm_size - (addr - map.hbm_base))
    return {range_err, nullptr};
  if (map.policy) {
    const Status s = map.policy->check(addr, length);
    if (s != kOk) return {s, nullptr};
  }
  return {kOk, map.hbm + (addr - map.hbm_base)};
}

}  // namespace

Status validate(const Descriptor& d, const AddressMap& map, const uint8_t** src, uint8_t** dst) {
  if (d.flags & ~uint32_t(kDescKnownFlags)) return kErrBadFlags;
  if (d.length == 0) return kErrZeroLength;
  if (d.length > kMaxDescBytes) return kErrTooLong;
  const bool src_host = d.flags & kDescSrcHost;
  const bool dst_host = d.flags & kDescDstHost;
  const Resolved s = resolve(d.src, d.length, src_host, map, kErrSrcRange);
  if (s.status != kOk) return s.status;
  const Resolved t = resolve(d.dst, d.length, dst_host, map, kErrDstRange);
  if (t.status != kOk) return t.status;
  if (src_host == dst_host && d.src < d.dst + d.length && d.dst < d.src + d.length) return kErrOverlap;
  *src = s.ptr;
  *dst = t.ptr;
  return kOk;
}

Queue::Queue(QueueControl* ctl, Descriptor* sq, Completion* cq, uint32_t depth, QueueStats* stats)
    : ctl_(ctl), sq_(sq), cq_(cq), depth_(depth) {
  stats_.attach(stats);
  reset_seen_ = load_acquire(&ctl_->reset_req);
  restart();
  store_release(&ctl_->reset_ack, reset_seen_);
}

void Queue::restart() {
  sq_cons_ = sq_prod_seen_ = cq_prod_ = cq_published_ = cq_cons_seen_ = 0;
  cq_cons_fresh_ = irq_unpublished_ = false;
  error_ = kQueueOk;
  in_chain_ = false;
  store_release(&ctl_->sq_cons, 0);
  store_release(&ctl_->cq_prod, 0);
  store_release(&ctl_->error, kQueueOk);
}

void Queue::latch(QueueError e) {
  if (error_ != kQueueOk) return;
  error_ = e;
  store_release(&ctl_->error, e);
}

bool Queue::has_work() const {
  if (load_acquire(&ctl_->reset_req) != reset_seen_) return true;
  return error_ == kQueueOk && load_acquire(&ctl_->sq_prod) != sq_cons_;
}

bool Queue::cq_space(uint32_t needed) {
  // The host's consumer index is read once per poll, and again only when
  // the copy read then leaves too little room: every read of it pulls its
  // cache line from the host's core. An older value can only understate
  // the room.
  if (cq_cons_fresh_ && depth_ - (cq_prod_ - cq_cons_seen_) >= needed) return true;
  const uint32_t cons = load_acquire(&ctl_->cq_cons);
  const uint32_t used = cq_prod_ - cons;
  if (used > depth_) {
    latch(kQueueCqConsumerAhead);
    return false;
  }
  cq_cons_seen_ = cons;
  cq_cons_fresh_ = true;
  return depth_ - used >= needed;
}

void Queue::publish_completions(PollResult* r) {
  if (cq_published_ == cq_prod_) return;
  cq_published_ = cq_prod_;
  // Release: the entries are visible before the index that publishes them.
  store_release(&ctl_->cq_prod, cq_prod_);
  if (!irq_unpublished_) return;
  irq_unpublished_ = false;
  // Full fence: the index is visible before irq_armed is read. A host that
  // arms, fences and then reads cq_prod before it sleeps either sees these
  // completions or is seen armed; no wake-up falls between the two.
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (load_acquire(&ctl_->irq_armed)) r->irq = true;
}

void Queue::bump(uint64_t QueueStats::*field, uint64_t by) {
  counts_.*field += by;
  stats_.put(&(stats_.shared()->*field), counts_.*field);
}

void Queue::bump_status(uint32_t status) {
  if (status >= kStatusCount) return;
  ++counts_.errors_by_status[status];
  stats_.put(&stats_.shared()->errors_by_status[status], counts_.errors_by_status[status]);
}

void Queue::add_busy_ns(uint64_t ns) {
  if (!stats_.attached()) return;
  stats_.begin();
  bump(&QueueStats::busy_ns, ns);
  stats_.end();
}

void Queue::complete(uint64_t cookie, Status status, uint32_t bytes, bool irq, PollResult* r) {
  cq_[cq_prod_ & (depth_ - 1)] = Completion{cookie, status, bytes};
  ++cq_prod_;
  ++r->completions;
  if (irq) irq_unpublished_ = true;
  if (stats_.attached()) {
    bump(&QueueStats::chains, 1);
    bump(&QueueStats::bytes, bytes);
    if (status != kOk) bump(&QueueStats::errors, 1);
    bump_status(status);
    if (irq) bump(&QueueStats::irqs, 1);
  }
}

PollResult Queue::poll(const AddressMap& map, Copier& copier, uint32_t budget, uint64_t byte_budget) {
  PollResult r;
  cq_cons_fresh_ = false;
  const uint32_t req = load_acquire(&ctl_->reset_req);
  if (req != reset_seen_) {
    // The host zeroed sq_prod and cq_cons before asking; restart at 0.
    restart();
    reset_seen_ = req;
    store_release(&ctl_->reset_ack, req);
  }
  if (error_ != kQueueOk) return r;

  const uint32_t prod = load_acquire(&ctl_->sq_prod);
  if (int32_t(prod - sq_prod_seen_) < 0) {
    latch(kQueueSqIndexBackward);
  } else if (prod - sq_cons_ > depth_) {
    latch(kQueueSqIndexJump);
  }
  if (error_ != kQueueOk) {
    // Whatever chain was open can never finish: say so rather than drop it.
    if (in_chain_ && cq_space(1)) {
      if (stats_.attached()) stats_.begin();
      complete(chain_cookie_, kErrQueueBroken, uint32_t(chain_bytes_), chain_irq_, &r);
      if (stats_.attached()) stats_.end();
    }
    in_chain_ = false;
    publish_completions(&r);
    return r;
  }
  sq_prod_seen_ = prod;
  if (prod == sq_cons_) return r;

  if (stats_.attached()) stats_.begin();
  uint64_t copied = 0;
  while (sq_cons_ != prod && r.descriptors < budget && copied < byte_budget) {
    Descriptor d;
    memcpy(&d, &sq_[sq_cons_ & (depth_ - 1)], sizeof d);
    const bool first = d.flags & kDescFirst;
    const bool last = d.flags & kDescLast;
    const uint32_t needed = (first && in_chain_ ? 1 : 0) + (last || (!first && !in_chain_) ? 1 : 0);
    if (!cq_space(needed)) break;
    ++sq_cons_;
    ++r.descriptors;
    if (stats_.attached()) bump(&QueueStats::descriptors, 1);

    if (first) {
      if (in_chain_) complete(chain_cookie_, kErrChainUnterminated, uint32_t(chain_bytes_), chain_irq_, &r);
      in_chain_ = true;
      chain_len_ = 0;
      chain_status_ = kOk;
      chain_bytes_ = 0;
      chain_irq_ = false;
    } else if (!in_chain_) {
      complete(d.cookie, kErrChainNoFirst, 0, d.flags & kDescIrq, &r);
      continue;
    }
    ++chain_len_;
    chain_cookie_ = d.cookie;
    chain_irq_ = chain_irq_ || (d.flags & kDescIrq);
    if (chain_status_ == kOk) {
      if (chain_len_ > kMaxChainDescs) {
        chain_status_ = kErrChainTooLong;
      } else if (fail_next_ != kOk) {
        chain_status_ = fail_next_;
        fail_next_ = kOk;
      } else {
        const uint8_t* src;
        uint8_t* dst;
        chain_status_ = validate(d, map, &src, &dst);
        if (chain_status_ == kOk) {
          // Completions wait for the end of the poll (one index store for a
          // batch of small chains), but not behind a copy long enough to
          // delay them noticeably.
          if (d.length >= kPublishBeforeCopy) publish_completions(&r);
          copier.copy(dst, src, d.length);
          chain_bytes_ += d.length;
          copied += d.length;
        }
      }
      if (chain_status_ != kOk && hook_) hook_->on_descriptor_error(d, chain_status_);
    }
    if (last) {
      complete(chain_cookie_, chain_status_, uint32_t(chain_bytes_), chain_irq_, &r);
      in_chain_ = false;
    }
  }
  if (stats_.attached()) stats_.end();
  publish_completions(&r);
  // Release: our reads of the consumed descriptors are done before the host
  // may reuse their slots.
  store_release(&ctl_->sq_cons, sq_cons_);
  return r;
}

}  // namespace vtrn::dma
