// vtrnd's round-robin DMA scheduler (see vtrn/drv/dma_scheduler.h).
#include "vtrn/drv/dma_scheduler.h"

#include <algorithm>

namespace drv {

void DmaScheduler::add(uint64_t client, uint64_t job, uint64_t chunks, uint32_t max_inflight) {
  auto& q = fifo_[client];
  if (q.empty()) {
    // Join just behind the cursor: the newcomer is served after everyone
    // already waiting has had one turn, never ahead of them.
    if (std::find(order_.begin(), order_.end(), client) == order_.end()) {
      const size_t at = order_.empty() ? 0 : cursor_;
      order_.insert(order_.begin() + ptrdiff_t(at), client);
      if (order_.size() > 1) ++cursor_;
      if (cursor_ >= order_.size()) cursor_ = 0;
    }
  }
  Job j;
  j.id = job;
  j.remaining = chunks;
  j.max_inflight = max_inflight == 0 ? 1 : max_inflight;
  q.push_back(j);
}

std::optional<DmaScheduler::Pick> DmaScheduler::next() {
  const size_t n = order_.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t idx = (cursor_ + k) % n;
    const uint64_t client = order_[idx];
    auto it = fifo_.find(client);
    if (it == fifo_.end() || it->second.empty()) continue;
    Job& j = it->second.front();
    if (j.remaining == 0 || j.inflight >= j.max_inflight) continue;
    if (j.remaining != kUnbounded) --j.remaining;
    ++j.inflight;
    cursor_ = (idx + 1) % n;
    return Pick{client, j.id, j.issued++};
  }
  return std::nullopt;
}

void DmaScheduler::unissue(const Pick& p) {
  Job* j = find(p.client, p.job);
  if (j == nullptr) return;
  if (j->remaining != kUnbounded) ++j->remaining;
  --j->inflight;
  --j->issued;
  auto pos = std::find(order_.begin(), order_.end(), p.client);
  if (pos != order_.end()) cursor_ = size_t(pos - order_.begin());
}

bool DmaScheduler::done(uint64_t client, uint64_t job) {
  Job* j = find(client, job);
  if (j == nullptr || j->inflight == 0) return false;
  --j->inflight;
  return j->remaining == 0 && j->inflight == 0;
}

bool DmaScheduler::close(uint64_t client, uint64_t job) {
  Job* j = find(client, job);
  if (j == nullptr) return false;
  j->remaining = 0;
  return j->inflight == 0;
}

void DmaScheduler::remove(uint64_t client, uint64_t job) {
  auto it = fifo_.find(client);
  if (it == fifo_.end()) return;
  auto& q = it->second;
  q.erase(std::remove_if(q.begin(), q.end(), [&](const Job& j) { return j.id == job; }), q.end());
  drop_if_empty(client);
}

void DmaScheduler::remove_client(uint64_t client) {
  fifo_.erase(client);
  drop_if_empty(client);
}

void DmaScheduler::drop_if_empty(uint64_t client) {
  auto it = fifo_.find(client);
  if (it != fifo_.end() && !it->second.empty()) return;
  if (it != fifo_.end()) fifo_.erase(it);
  auto pos = std::find(order_.begin(), order_.end(), client);
  if (pos == order_.end()) return;
  const size_t idx = size_t(pos - order_.begin());
  order_.erase(pos);
  if (idx < cursor_) --cursor_;
  if (cursor_ >= order_.size()) cursor_ = 0;
}

bool DmaScheduler::has_job(uint64_t client, uint64_t job) const { return find(client, job) != nullptr; }

uint32_t DmaScheduler::inflight(uint64_t client, uint64_t job) const {
  const Job* j = find(client, job);
  return j ? j->inflight : 0;
}

DmaScheduler::Job* DmaScheduler::find(uint64_t client, uint64_t job) {
  auto it = fifo_.find(client);
  if (it == fifo_.end()) return nullptr;
  for (Job& j : it->second)
    if (j.id == job) return &j;
  return nullptr;
}

const DmaScheduler::Job* DmaScheduler::find(uint64_t client, uint64_t job) const {
  return const_cast<DmaScheduler*>(this)->find(client, job);
}

}  // namespace drv
