// Host side of a chip's DMA (see vtrn/drv/dma_engine.h for the trust and
// threading model).
#include "vtrn/drv/dma_engine.h"
#include "vtrn/seqlock.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "vtrn/ctrl_ring.h"
#include "vtrn/drv/fd.h"

namespace drv {

using namespace vtrn::dma;

namespace {

constexpr uint32_t kReapBatch = 64;
constexpr uint32_t kSpinsBeforeYield = 256;

std::string hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
  return b;
}

DmaFault fault_of(HostError e) {
  switch (e) {
    case HostError::kCqIndexJump: return DmaFault::kCqIndexJump;
    case HostError::kCqIndexBackward: return DmaFault::kCqIndexBackward;
    case HostError::kTooManyCompletions: return DmaFault::kTooManyCompletions;
    case HostError::kSqConsumerAhead: return DmaFault::kSqConsumerAhead;
    default: return DmaFault::kNone;
  }
}

// `pending` and `done` are ascending by handle (see Queue): binary search.
template <typename Fifo>
auto find_handle(Fifo& d, uint64_t h) {
  // The usual case: the device completes in order, so it is the oldest.
  if (!d.empty() && d.front().handle == h) return d.begin();
  auto it = std::lower_bound(d.begin(), d.end(), h,
                             [](const auto& e, uint64_t v) { return e.handle < v; });
  return it != d.end() && it->handle == h ? it : d.end();
}

const char* queue_error_name(uint32_t e) {
  switch (e) {
    case kQueueOk: return "ok";
    case kQueueSqIndexJump: return "sq index jump";
    case kQueueSqIndexBackward: return "sq index moved backwards";
    case kQueueCqConsumerAhead: return "cq consumer ahead of producer";
    default: return "unknown queue error";
  }
}

}  // namespace

const char* dma_error_name(DmaError e) {
  switch (e) {
    case DmaError::kOk: return "ok";
    case DmaError::kNotAttached: return "no DMA on this chip";
    case DmaError::kBadQueue: return "no such DMA queue";
    case DmaError::kInvalidChain: return "invalid chain";
    case DmaError::kQueueFull: return "DMA queue full";
    case DmaError::kQueueBroken: return "DMA queue broken";
    case DmaError::kResetting: return "DMA queue resetting";
    case DmaError::kNoMemory: return "host DMA window full";
    case DmaError::kTimeout: return "timed out";
    case DmaError::kUnknownHandle: return "unknown DMA handle";
    case DmaError::kBadArgument: return "bad argument";
  }
  return "unknown DMA error";
}

const char* dma_status_name(uint32_t s) {
  switch (s) {
    case kOk: return "ok";
    case kErrZeroLength: return "zero length";
    case kErrTooLong: return "descriptor too long";
    case kErrAddrOverflow: return "address + length overflows";
    case kErrSrcRange: return "src out of range";
    case kErrDstRange: return "dst out of range";
    case kErrBadFlags: return "unknown flags";
    case kErrChainTooLong: return "chain too long";
    case kErrChainUnterminated: return "chain unterminated";
    case kErrChainNoFirst: return "descriptor outside a chain";
    case kErrNotAllocated: return "HBM range not allocated";
    case kErrEcc: return "HBM range has a retired page";
    case kErrOverlap: return "src and dst overlap";
    case kErrQueueBroken: return "queue broken";
    case kErrReset: return "queue reset";
    case kErrEngine: return "DMA engine fault";
    default: return "unknown status";
  }
}

const char* dma_fault_name(DmaFault f) {
  switch (f) {
    case DmaFault::kNone: return "none";
    case DmaFault::kUnknownCookie: return "completion for an unknown cookie";
    case DmaFault::kDuplicateCompletion: return "duplicate completion";
    case DmaFault::kCqIndexJump: return "completion index jumped";
    case DmaFault::kCqIndexBackward: return "completion index moved backwards";
    case DmaFault::kTooManyCompletions: return "more completions than descriptors";
    case DmaFault::kSqConsumerAhead: return "submission consumer beyond producer";
    case DmaFault::kDeviceLatched: return "device latched an error";
  }
  return "unknown fault";
}

DmaEngine::~DmaEngine() { detach(); }

Error DmaEngine::attach(uint8_t* bar2, const vtrn::hostif::Layout& layout, Hooks hooks) {
  detach();
  const vtrn::hostif::Region& dr = layout.at(vtrn::hostif::kRegionDma);
  const vtrn::hostif::Region& wr = layout.at(vtrn::hostif::kRegionHostWindow);
  if (bar2 == nullptr || dr.size < sizeof(DmaRegionHeader))
    return Error(Code::kNotFound, "no DMA region in the BAR2 layout");
  // Copy first: the firmware (or anything in the guest) may rewrite it.
  DmaRegionHeader h;
  memcpy(&h, bar2 + dr.offset, sizeof h);
  if (const vtrn::Error e = validate_dma_region(h, dr.size); !e.ok())
    return Error(e).prefix("invalid DMA region: ");
  // The window is what host-side addresses are relative to; the allocator
  // hands out whole granules of it.
  const uint64_t wsize = wr.size & ~(kDmaBufferGranule - 1);
  if (wsize < kDmaBufferGranule) return Error(Code::kBadHardware, "host DMA window missing or smaller than 4 KiB");
  vtrn::hbm::Config cfg;
  cfg.geometry.stacks = 1;
  cfg.geometry.bytes_per_stack = wsize;
  cfg.geometry.page_bytes = uint32_t(kDmaBufferGranule);
  cfg.geometry.channels = 1;
  cfg.base = 0;
  cfg.limits.max_allocations = uint32_t(std::min<uint64_t>(wsize / kDmaBufferGranule, 1u << 16));
  cfg.limits.max_owners = 1;
  cfg.limits.max_retired_pages = 1;
  const size_t arena = vtrn::hbm::Allocator::arena_bytes(cfg);
  if (arena == 0)
    return Error(Code::kCapacity, "host DMA window of " + std::to_string(wsize) + " bytes cannot be managed");
  arena_.assign((arena + 7) / 8, 0);
  if (alloc_.init(cfg, arena_.data(), arena_.size() * 8) != vtrn::hbm::Error::kOk)
    return Error(Code::kInternal, "host DMA window allocator refused the window");

  hdr_ = h;
  window_ = bar2 + wr.offset;
  window_size_ = wsize;
  hooks_ = std::move(hooks);
  queues_.clear();
  for (uint32_t i = 0; i < h.queue_count; ++i) {
    uint8_t* qb = bar2 + dr.offset + kDmaQueuesOffset + uint64_t(i) * h.queue_stride;
    auto q = std::make_unique<Queue>();
    q->ctl = reinterpret_cast<QueueControl*>(qb);
    q->stats = reinterpret_cast<const QueueStats*>(qb + kQueueStatsOffset);
    q->hq = HostQueue(q->ctl, reinterpret_cast<Descriptor*>(qb + kQueueSqOffset),
                      reinterpret_cast<Completion*>(qb + cq_offset(h.depth)), h.depth);
    q->hq.arm_irq(false);
    irq_on_ = false;
    q->scratch.reserve(h.depth);
    queues_.push_back(std::move(q));
  }
  attached_ = true;
  // A queue the previous host left with chains in flight (vtrnd restarted
  // against a running chip) starts from a clean handshake, not its indexes.
  for (uint32_t i = 0; i < h.queue_count; ++i) {
    Queue& q = *queues_[i];
    const QueueControl* c = q.ctl;
    if (__atomic_load_n(&c->sq_prod.value, __ATOMIC_ACQUIRE) != 0 ||
        __atomic_load_n(&c->cq_cons.value, __ATOMIC_ACQUIRE) != 0 || q.hq.device_error() != kQueueOk)
      (void)begin_reset(i);
  }
  return Error();
}

void DmaEngine::detach() {
  if (!attached_) return;
  for (auto& q : queues_) {
    std::lock_guard<std::mutex> l(q->mu);
    fail_pending_locked(*q, kErrReset);
  }
  attached_ = false;
  window_ = nullptr;
  window_size_ = 0;
  {
    std::lock_guard<std::mutex> l(wait_mu_);
    ++wake_gen_;
  }
  wait_cv_.notify_all();
}

// Window buffers.

DmaError DmaEngine::alloc(uint64_t bytes, DmaBuffer* out) {
  if (!attached_) return DmaError::kNotAttached;
  if (bytes == 0 || bytes > window_size_) return bytes == 0 ? DmaError::kBadArgument : DmaError::kNoMemory;
  std::lock_guard<std::mutex> l(alloc_mu_);
  uint64_t off = 0;
  vtrn::hbm::Error e = alloc_.allocate(1, vtrn::hbm::Category::kDmaBuffers, bytes, 0, &off);
  if (e != vtrn::hbm::Error::kOk) return DmaError::kNoMemory;
  out->offset = off;
  out->ptr = window_ + off;
  out->bytes = (bytes + kDmaBufferGranule - 1) & ~(kDmaBufferGranule - 1);
  return DmaError::kOk;
}

DmaError DmaEngine::free(const DmaBuffer& b) {
  if (!attached_) return DmaError::kNotAttached;
  std::lock_guard<std::mutex> l(alloc_mu_);
  return alloc_.free(b.offset) == vtrn::hbm::Error::kOk ? DmaError::kOk : DmaError::kBadArgument;
}

uint64_t DmaEngine::window_free_bytes() const {
  if (!attached_) return 0;
  std::lock_guard<std::mutex> l(alloc_mu_);
  vtrn::hbm::Stats s;
  alloc_.stats(&s);
  return s.free_bytes;
}

// Validation and submission.

inline bool DmaEngine::check_range(uint64_t addr, uint32_t len, bool host) const {
  if (host) return addr <= window_size_ && len <= window_size_ - addr;
  return hbm_contains(addr, len);
}

uint32_t DmaEngine::check_chain(const DmaChain& c, uint32_t* segment) const {
  if (segment) *segment = 0;
  if (c.count > hdr_.max_chain_descs) {
    if (segment) *segment = hdr_.max_chain_descs;
    return kErrChainTooLong;
  }
  for (uint32_t i = 0; i < c.count; ++i) {
    if (segment) *segment = i;
    const DmaSegment& s = c.segs[i];
    // Same order as the device's validate(), so both name the same fault.
    if (s.length == 0) return kErrZeroLength;
    if (s.length > hdr_.max_desc_bytes) return kErrTooLong;
    if (s.src > UINT64_MAX - s.length || s.dst > UINT64_MAX - s.length) return kErrAddrOverflow;
    if (!check_range(s.src, s.length, s.src_host)) return kErrSrcRange;
    if (!check_range(s.dst, s.length, s.dst_host)) return kErrDstRange;
    if (s.src_host == s.dst_host && s.src < s.dst + s.length && s.dst < s.src + s.length)
      return kErrOverlap;
  }
  return kOk;
}

DmaError DmaEngine::submit_locked(Queue& q, uint32_t qi, Descriptor* d, uint32_t ndesc) {
  (void)qi;
  if (q.resetting) return DmaError::kResetting;
  if (q.fault != DmaFault::kNone) return DmaError::kQueueBroken;
  if (ndesc > q.hq.free_slots()) {
    // free_slots() may have found the device lying about sq_cons.
    if (q.hq.host_error() != HostError::kNone) {
      latch_locked(q, fault_of(q.hq.host_error()), "");
      return DmaError::kQueueBroken;
    }
    return DmaError::kQueueFull;
  }
  if (!q.hq.submit(d, ndesc)) {
    if (q.hq.host_error() != HostError::kNone) latch_locked(q, fault_of(q.hq.host_error()), "");
    return q.fault != DmaFault::kNone ? DmaError::kQueueBroken : DmaError::kQueueFull;
  }
  return DmaError::kOk;
}

DmaError DmaEngine::submit(uint32_t qi, const DmaChain* chains, uint32_t n, uint64_t* handles,
                           DmaInvalid* bad) {
  if (!attached_) return DmaError::kNotAttached;
  Queue* q = queue(qi);
  if (q == nullptr) return DmaError::kBadQueue;
  if (n == 0) return DmaError::kBadArgument;
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (chains[i].count == 0 || chains[i].segs == nullptr) return DmaError::kBadArgument;
    uint32_t seg = 0;
    const uint32_t st = check_chain(chains[i], &seg);
    if (st != kOk) {
      if (bad) *bad = DmaInvalid{i, seg, st};
      return DmaError::kInvalidChain;
    }
    total += chains[i].count;
  }
  if (total > hdr_.depth) return DmaError::kQueueFull;
  {
    std::lock_guard<std::mutex> l(q->mu);
    q->scratch.clear();
    uint64_t seq = q->next_seq;
    for (uint32_t i = 0; i < n; ++i) {
      const DmaChain& c = chains[i];
      const uint64_t cookie = (uint64_t(qi) << kQueueShift) | seq++;
      for (uint32_t s = 0; s < c.count; ++s) {
        const DmaSegment& g = c.segs[s];
        Descriptor d{};
        d.src = g.src;
        d.dst = g.dst;
        d.length = g.length;
        d.cookie = cookie;
        uint32_t fl = 0;
        if (g.src_host) fl |= kDescSrcHost;
        if (g.dst_host) fl |= kDescDstHost;
        if (s == 0) fl |= kDescFirst | (c.fence ? uint32_t(kDescFence) : 0u);
        if (s + 1 == c.count) fl |= kDescLast | (c.irq ? uint32_t(kDescIrq) : 0u);
        d.flags = fl;
        q->scratch.push_back(d);
      }
    }
    DmaError e = submit_locked(*q, qi, q->scratch.data(), uint32_t(q->scratch.size()));
    if (e != DmaError::kOk) return e;
    const uint64_t now = monotonic_ns();
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t h = (uint64_t(qi) << kQueueShift) | (q->next_seq + i);
      q->pending.push_back(Pending{h, now});
      handles[i] = h;
    }
    q->next_seq += n;
    q->chains_submitted += n;
    q->descs_submitted += total;
  }
  // The index store inside HostQueue::submit was a release; the doorbell is
  // a syscall after it.
  ring_chip();
  return DmaError::kOk;
}

DmaError DmaEngine::submit_raw(uint32_t qi, const Descriptor* descs, uint32_t n, uint64_t* handles) {
  if (!attached_) return DmaError::kNotAttached;
  Queue* q = queue(qi);
  if (q == nullptr) return DmaError::kBadQueue;
  if (n == 0 || n > hdr_.depth) return n == 0 ? DmaError::kBadArgument : DmaError::kQueueFull;
  {
    std::lock_guard<std::mutex> l(q->mu);
    q->scratch.assign(descs, descs + n);
    for (uint32_t i = 0; i < n; ++i) q->scratch[i].cookie = (uint64_t(qi) << kQueueShift) | (q->next_seq + i);
    DmaError e = submit_locked(*q, qi, q->scratch.data(), n);
    if (e != DmaError::kOk) return e;
    const uint64_t now = monotonic_ns();
    for (uint32_t i = 0; i < n; ++i) {
      q->pending.push_back(Pending{q->scratch[i].cookie, now});
      handles[i] = q->scratch[i].cookie;
    }
    q->next_seq += n;
    q->chains_submitted += n;
    q->descs_submitted += n;
  }
  ring_chip();
  return DmaError::kOk;
}

void DmaEngine::ring_chip() {
  if (!hooks_.ring_chip) return;
  // Note first, then look for a hold: a release that ends the hold at the
  // same time either sees the note or this side sees no hold (seq_cst), so
  // the doorbell is never lost, at worst rung twice.
  db_pending_.store(true);
  if (db_hold_.load() != 0) return;
  if (db_pending_.exchange(false)) hooks_.ring_chip();
}

void DmaEngine::hold_doorbell() { db_hold_.fetch_add(1); }

void DmaEngine::release_doorbell() {
  if (db_hold_.fetch_sub(1) != 1) return;
  if (db_pending_.exchange(false) && hooks_.ring_chip) hooks_.ring_chip();
}

uint32_t DmaEngine::free_slots(uint32_t qi) {
  Queue* q = queue(qi);
  if (q == nullptr) return 0;
  std::lock_guard<std::mutex> l(q->mu);
  if (q->resetting || q->fault != DmaFault::kNone) return 0;
  return q->hq.free_slots();
}

// Completion.

void DmaEngine::finish_locked(Queue& q, uint64_t handle, uint32_t status, uint32_t bytes, bool local,
                              uint64_t now) {
  auto it = find_handle(q.pending, handle);
  if (it != q.pending.end()) finish_at_locked(q, it, status, bytes, local, now);
}

void DmaEngine::finish_at_locked(Queue& q, Pending* it, uint32_t status, uint32_t bytes,
                                 bool local, uint64_t now) {
  const uint64_t handle = it->handle;
  DmaResult r;
  r.handle = handle;
  r.status = status;
  r.bytes = bytes;
  r.latency_ns = now - it->t_submit_ns;
  r.local = local;
  if (it == q.pending.begin()) {
    q.pending.pop_front();
  } else {
    q.pending.erase(it);
  }
  // Results finish in handle order (the front of `pending`), so this is
  // an append; the search only guards the order for any other caller.
  if (q.done.empty() || q.done.back().handle < handle) {
    q.done.push_back(r);
  } else {
    q.done.insert(std::lower_bound(q.done.begin(), q.done.end(), handle,
                                   [](const DmaResult& e, uint64_t v) { return e.handle < v; }),
                  r);
  }
  ++q.chains_completed;
  q.bytes_completed += bytes;
  if (status < kStatusCount) ++q.by_status[status];
}

void DmaEngine::fail_pending_locked(Queue& q, uint32_t status) {
  const uint64_t now = monotonic_ns();
  while (!q.pending.empty()) finish_locked(q, q.pending.front().handle, status, 0, true, now);
}

void DmaEngine::latch_locked(Queue& q, DmaFault f, const std::string& text) {
  if (q.fault != DmaFault::kNone) return;
  q.fault = f;
  q.fault_text = dma_fault_name(f);
  if (!text.empty()) q.fault_text += ": " + text;
  // Nothing more will be reaped from this queue until a reset: whatever is
  // in flight will never complete through the ring, so say so now.
  fail_pending_locked(q, kErrQueueBroken);
}

uint32_t DmaEngine::reap_locked(Queue& q, uint32_t qi) {
  if (q.resetting) {
    if (!q.hq.reset_done()) return 0;
    q.resetting = false;
    q.fault = DmaFault::kNone;
    q.fault_text.clear();
  }
  if (q.fault != DmaFault::kNone) return 0;
  uint32_t total = 0;
  Completion c[kReapBatch];
  for (;;) {
    const uint32_t n = q.hq.reap(c, kReapBatch);
    if (n == 0) break;
    const uint64_t now = monotonic_ns();
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t h = c[i].cookie;
      auto it = find_handle(q.pending, h);
      if (it != q.pending.end()) {
        // Older descriptors still pending were the non-final descriptors of
        // this chain (raw submissions give each descriptor a handle): the
        // device never completes them individually. Usually there are none
        // (a 64 B benchmark reaps millions a second through here).
        if (it != q.pending.begin()) it = q.pending.erase(q.pending.begin(), it);
        finish_at_locked(q, it, c[i].status, c[i].bytes, false, now);
        continue;
      }
      const uint64_t seq = h & ((uint64_t(1) << kQueueShift) - 1);
      const bool ours = handle_queue(h) == qi && seq >= q.floor_seq && seq < q.next_seq;
      latch_locked(q, ours ? DmaFault::kDuplicateCompletion : DmaFault::kUnknownCookie,
                   "cookie " + hex(h) + " (status " + std::to_string(c[i].status) + ")");
      return total + i;
    }
    total += n;
    if (n < kReapBatch) break;
  }
  if (q.hq.host_error() != HostError::kNone) {
    latch_locked(q, fault_of(q.hq.host_error()), "");
  } else if (uint32_t de = q.hq.device_error(); de != kQueueOk) {
    latch_locked(q, DmaFault::kDeviceLatched, queue_error_name(de));
  }
  return total;
}

uint32_t DmaEngine::poll(uint32_t qi) {
  Queue* q = queue(qi);
  if (q == nullptr) return 0;
  std::lock_guard<std::mutex> l(q->mu);
  return reap_locked(*q, qi);
}

uint32_t DmaEngine::poll_all() {
  uint32_t n = 0;
  for (uint32_t i = 0; attached_ && i < queues_.size(); ++i) n += poll(i);
  return n;
}

DmaError DmaEngine::try_take(uint64_t handle, DmaResult* out) {
  const uint32_t qi = handle_queue(handle);
  if (qi >= queues_.size()) return DmaError::kUnknownHandle;
  Queue& q = *queues_[qi];
  std::lock_guard<std::mutex> l(q.mu);
  auto it = find_handle(q.done, handle);
  if (it != q.done.end()) {
    *out = *it;
    q.done.erase(it);
    return DmaError::kOk;
  }
  return find_handle(q.pending, handle) != q.pending.end() ? DmaError::kTimeout : DmaError::kUnknownHandle;
}

size_t DmaEngine::collect(std::vector<DmaResult>* out) {
  size_t n = 0;
  for (auto& q : queues_) {
    std::lock_guard<std::mutex> l(q->mu);
    out->insert(out->end(), q->done.begin(), q->done.end());
    n += q->done.size();
    q->done.clear();
  }
  return n;
}

void DmaEngine::sleep_for_doorbell(uint64_t deadline_ns) {
  const uint64_t now = monotonic_ns();
  uint64_t slice = deadline_ns > now ? deadline_ns - now : 0;
  if (slice > kWaitSliceNs) slice = kWaitSliceNs;
  timespec ts{time_t(slice / 1'000'000'000), long(slice % 1'000'000'000)};
  if (hooks_.irq_fd < 0) {
    // No interrupt to sleep on: a short nap keeps the wait off the CPU.
    timespec nap{0, long(std::min<uint64_t>(slice, 100'000))};
    nanosleep(&nap, nullptr);
    return;
  }
  pollfd p{hooks_.irq_fd, POLLIN, 0};
  if (ppoll(&p, 1, &ts, nullptr) > 0 && (p.revents & POLLIN)) {
    uint64_t v;
    // Non-blocking (ivshmem eventfds are): a concurrent drain elsewhere
    // only makes this read fail with EAGAIN.
    (void)!read(hooks_.irq_fd, &v, sizeof v);
  }
}

DmaError DmaEngine::wait(uint64_t handle, DmaResult* out, DmaWait mode, uint64_t timeout_ns) {
  const uint32_t qi = handle_queue(handle);
  if (!attached_ && qi < queues_.size()) return try_take(handle, out);
  if (queue(qi) == nullptr) return DmaError::kUnknownHandle;
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  uint32_t spins = 0;
  for (;;) {
    poll(qi);
    DmaError e = try_take(handle, out);
    if (e != DmaError::kTimeout) return e;  // done, or never ours
    if (monotonic_ns() >= deadline || !attached_) return DmaError::kTimeout;
    if (mode == DmaWait::kPoll) {
      if (++spins % kSpinsBeforeYield == 0) {
        sched_yield();
      } else {
        cpu_relax();
      }
      continue;
    }
    std::unique_lock<std::mutex> l(wait_mu_);
    if (!leader_) {
      // Leader: sleep on the doorbell, reap everything, wake the others.
      leader_ = true;
      l.unlock();
      if (!irq_on_.load(std::memory_order_relaxed)) arm_irq(true);
      sleep_for_doorbell(deadline);
      poll_all();
      l.lock();
      leader_ = false;
      ++wake_gen_;
      l.unlock();
      wait_cv_.notify_all();
    } else {
      const uint64_t gen = wake_gen_;
      const uint64_t now = monotonic_ns();
      const uint64_t until = std::min(deadline, now + kWaitSliceNs);
      wait_cv_.wait_for(l, std::chrono::nanoseconds(until > now ? until - now : 0),
                        [&] { return wake_gen_ != gen || !leader_; });
    }
  }
}

uint32_t DmaEngine::in_flight(uint32_t qi) {
  Queue* q = queue(qi);
  if (q == nullptr) return 0;
  std::lock_guard<std::mutex> l(q->mu);
  return uint32_t(q->pending.size());
}

uint32_t DmaEngine::in_flight_all() {
  uint32_t n = 0;
  for (uint32_t i = 0; attached_ && i < queues_.size(); ++i) n += in_flight(i);
  return n;
}

// Interrupts, errors, reset.

void DmaEngine::arm_irq(bool on) {
  irq_on_ = on;
  for (uint32_t i = 0; attached_ && i < queues_.size(); ++i) {
    // irq_armed is host-written only, so no lock is needed against the device;
    // the queue lock orders it against a concurrent reset of the same queue.
    std::lock_guard<std::mutex> l(queues_[i]->mu);
    queues_[i]->hq.arm_irq(on);
  }
}

DmaFault DmaEngine::fault(uint32_t qi, std::string* text) {
  Queue* q = queue(qi);
  if (q == nullptr) return DmaFault::kNone;
  std::lock_guard<std::mutex> l(q->mu);
  if (text) *text = q->fault_text;
  return q->fault;
}

DmaError DmaEngine::begin_reset(uint32_t qi) {
  Queue* q = queue(qi);
  if (q == nullptr) return attached_ ? DmaError::kBadQueue : DmaError::kNotAttached;
  std::lock_guard<std::mutex> l(q->mu);
  fail_pending_locked(*q, kErrReset);
  q->hq.begin_reset();
  q->resetting = true;
  // Whatever the device completes from before the reset is stale: it can
  // only arrive before the acknowledgement, which we do not reap across.
  q->floor_seq = q->next_seq;
  ++q->resets;
  ring_chip();
  return DmaError::kOk;
}

DmaError DmaEngine::inject_sq_index_fault(uint32_t qi, bool backward) {
  Queue* q = queue(qi);
  if (q == nullptr) return attached_ ? DmaError::kBadQueue : DmaError::kNotAttached;
  {
    std::lock_guard<std::mutex> l(q->mu);
    const uint32_t prod = vtrn::hostif::load_acquire(&q->ctl->sq_prod);
    const uint32_t bad = backward ? prod - 1 : prod + hdr_.depth + 1;
    vtrn::hostif::store_release(&q->ctl->sq_prod, bad);
  }
  ring_chip();
  return DmaError::kOk;
}

DmaError DmaEngine::inject_cq_consumer_fault(uint32_t qi) {
  Queue* q = queue(qi);
  if (q == nullptr) return attached_ ? DmaError::kBadQueue : DmaError::kNotAttached;
  std::lock_guard<std::mutex> l(q->mu);
  const uint32_t produced = vtrn::hostif::load_acquire(&q->ctl->cq_prod);
  vtrn::hostif::store_release(&q->ctl->cq_cons, produced + 1);
  return DmaError::kOk;
}

bool DmaEngine::reset_done(uint32_t qi) {
  Queue* q = queue(qi);
  if (q == nullptr) return false;
  std::lock_guard<std::mutex> l(q->mu);
  if (q->resetting && q->hq.reset_done()) {
    q->resetting = false;
    q->fault = DmaFault::kNone;
    q->fault_text.clear();
  }
  return !q->resetting;
}

DmaError DmaEngine::reset(uint32_t qi, uint64_t timeout_ns) {
  DmaError e = begin_reset(qi);
  if (e != DmaError::kOk) return e;
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  while (!reset_done(qi)) {
    if (monotonic_ns() >= deadline) return DmaError::kTimeout;
    timespec nap{0, 1'000'000};
    nanosleep(&nap, nullptr);
  }
  return DmaError::kOk;
}

bool DmaEngine::snapshot(uint32_t qi, DmaQueueSnapshot* out) {
  Queue* q = queue(qi);
  if (q == nullptr) return false;
  *out = DmaQueueSnapshot{};
  // Seqlock: the device holds it odd while it updates a few counters.
  vtrn::hostif::SeqlockRetry retry;
  out->device_stats_valid = vtrn::hostif::seqlock_read(q->stats, &out->device, retry);
  std::lock_guard<std::mutex> l(q->mu);
  out->device_error = q->hq.device_error();
  out->fault = q->fault;
  out->fault_text = q->fault_text;
  out->resetting = q->resetting;
  out->in_flight = uint32_t(q->pending.size());
  out->free_slots = q->resetting || q->fault != DmaFault::kNone ? 0 : q->hq.free_slots();
  out->chains_submitted = q->chains_submitted;
  out->descs_submitted = q->descs_submitted;
  out->chains_completed = q->chains_completed;
  out->bytes_completed = q->bytes_completed;
  out->resets = q->resets;
  memcpy(out->host_by_status, q->by_status, sizeof q->by_status);
  return true;
}

}  // namespace drv
