// Host side of one DMA queue. See dma_host.h.
#include "vtrn/dma_host.h"

#include <stdio.h>
#include <string.h>

#include "vtrn/ctrl_ring.h"

namespace vtrn::dma {

using hostif::load_acquire;
using hostif::store_release;

vtrn::Error validate_dma_region(const DmaRegionHeader& h, uint64_t region_size) {
  auto fail = [](const char* fmt, auto... args) { return vtrn::Error(vtrn::Code::kBadHardware, fmt, args...); };
  if (h.version != kDmaRegionVersion) return fail("dma region version %u, host speaks %u", h.version, kDmaRegionVersion);
  if (h.queue_count == 0 || h.queue_count > kMaxQueues)
    return fail("dma queue count %u outside 1..%u", h.queue_count, kMaxQueues);
  if (h.depth < kMinDepth || h.depth > kMaxDepth || (h.depth & (h.depth - 1)))
    return fail("dma queue depth %u not a power of two in %u..%u", h.depth, kMinDepth, kMaxDepth);
  if (h.queue_stride != queue_stride(h.depth))
    return fail("dma queue stride %llu, expected %llu", (unsigned long long)h.queue_stride,
                (unsigned long long)queue_stride(h.depth));
  if (dma_region_bytes(h.queue_count, h.depth) > region_size)
    return fail("dma region holds %llu bytes, %u queues of depth %u need %llu",
                (unsigned long long)region_size, h.queue_count, h.depth,
                (unsigned long long)dma_region_bytes(h.queue_count, h.depth));
  if (h.max_desc_bytes == 0 || h.max_desc_bytes > kMaxDescBytes || h.max_chain_descs == 0 ||
      h.max_chain_descs > kMaxChainDescs)
    return fail("dma limits %u bytes / %u descriptors exceed the ABI", h.max_desc_bytes, h.max_chain_descs);
  if (h.hbm_size == 0 || h.hbm_base > UINT64_MAX - h.hbm_size)
    return fail("dma HBM range [0x%llx, +0x%llx) invalid", (unsigned long long)h.hbm_base,
                (unsigned long long)h.hbm_size);
  return {};
}

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
  // free_slots() may itself find the device misbehaving and latch: read it
  // before testing the error.
  const uint32_t free = free_slots();
  if (host_error_ != HostError::kNone || n > free) return false;
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
  // Nothing taken, nothing to tell the device: cq_cons is written only when
  // it moves (a store of the unchanged value would also overwrite whatever
  // else is there, e.g. a fault injected on purpose before the device saw it).
  if (n == 0) return 0;
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
