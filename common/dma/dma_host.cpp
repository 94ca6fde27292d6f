// Host side of one DMA queue. See dma_host.h.
#include "vtrn/dma_host.h"

#include <string.h>

#include "vtrn/ctrl_ring.h"

namespace vtrn::dma {

using hostif::load_acquire;
using hostif::store_release;

HostQueue::HostQueue(QueueControl* ctl, Descriptor* sq, Completion* cq, uint32_t depth)
    : ctl_(ctl), sq_(sq), cq_(cq), depth_(depth) {
  sq_prod_ = load_acquire(&ctl_->sq_prod);
  cq_cons_ = load_acquire(&ctl_->cq_cons);
  cq_prod_seen_ = cq_cons_;
  reset_req_ = load_acquire(&ctl_->reset_req);
}

bool HostQueue::check_sq_cons(uint32_t cons) {
  if (uint32_t(sq_prod_ - cons) > depth_) {
    if (host_error_ == HostError::kNone) host_error_ = HostError::kSqConsumerAhead;
    return false;
  }
  return true;
}

uint32_t HostQueue::free_slots() {
  const uint32_t cons = load_acquire(&ctl_->sq_cons);
  if (!check_sq_cons(cons)) return 0;
  return depth_ - (sq_prod_ - cons);
}

bool HostQueue::submit(const Descriptor* d, uint32_t n) {
  if (host_error_ != HostError::kNone || n > free_slots()) return false;
  for (uint32_t i = 0; i < n; ++i) sq_[(sq_prod_ + i) & (depth_ - 1)] = d[i];
  sq_prod_ += n;
  submitted_ += n;
  // Release: the descriptors are visible before the index that publishes them.
  store_release(&ctl_->sq_prod, sq_prod_);
  return true;
}

uint32_t HostQueue::reap(Completion* out, uint32_t max) {
  if (host_error_ != HostError::kNone) return 0;
  const uint32_t prod = load_acquire(&ctl_->cq_prod);
  if (int32_t(prod - cq_prod_seen_) < 0) {
    host_error_ = HostError::kCqIndexBackward;
    return 0;
  }
  const uint32_t avail = prod - cq_cons_;
  if (avail > depth_) {
    host_error_ = HostError::kCqIndexJump;
    return 0;
  }
  if (reaped_ + avail > submitted_) {
    host_error_ = HostError::kTooManyCompletions;
    return 0;
  }
  cq_prod_seen_ = prod;
  const uint32_t n = avail < max ? avail : max;
  for (uint32_t i = 0; i < n; ++i) memcpy(&out[i], &cq_[(cq_cons_ + i) & (depth_ - 1)], sizeof *out);
  cq_cons_ += n;
  reaped_ += n;
  // Release: our reads of the entries finish before the device may reuse them.
  store_release(&ctl_->cq_cons, cq_cons_);
  return n;
}

QueueError HostQueue::device_error() const {
  return QueueError(load_acquire(&ctl_->error));
}

void HostQueue::begin_reset() {
  sq_prod_ = cq_cons_ = cq_prod_seen_ = 0;
  submitted_ = reaped_ = 0;
  host_error_ = HostError::kNone;
  store_release(&ctl_->sq_prod, 0);
  store_release(&ctl_->cq_cons, 0);
  // Release: the zeroed indexes are visible before the request that relies on them.
  store_release(&ctl_->reset_req, ++reset_req_);
}

bool HostQueue::reset_done() const { return load_acquire(&ctl_->reset_ack) == reset_req_; }

void HostQueue::arm_irq(bool on) { store_release(&ctl_->irq_armed, on ? 1 : 0); }

}  // namespace vtrn::dma
