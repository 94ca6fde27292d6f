// An in-process stand-in for a chip's DMA firmware, for host unit tests: a
// BAR2 in ordinary memory with the layout and DMA region the real firmware
// publishes (publish_layout + DmaRegionHeader), an HBM array, and the real
// device-side engine (vtrn::dma::Queue) polling every queue, either on
// demand (serve()) or from its own thread (start()). It rings the host's
// eventfd the way the firmware must: once per pass in which an IRQ-flagged
// chain completed while irq_armed.
//
// It is not the firmware: no copy engine HAL, no coalescing timer, no
// allocation policy (any HBM address in range is allowed).
#pragma once

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "vtrn/dma_abi.h"
#include "vtrn/dma_queue.h"
#include "vtrn/hostif.h"
#include "vtrn/layout.h"

namespace fake {

class FakeDmaChip {
 public:
  static constexpr uint64_t kBar2 = 16u << 20;
  static constexpr uint64_t kHbmBase = 0x8000000000ull;

  FakeDmaChip(uint32_t queues, uint32_t depth, uint64_t hbm_bytes) : depth_(depth) {
    bar2_ = static_cast<uint8_t*>(aligned_alloc(4096, kBar2));
    memset(bar2_, 0, kBar2);
    hbm_.assign(hbm_bytes, 0);
    efd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    auto* hdr = reinterpret_cast<vtrn::hostif::FwHeader*>(bar2_);
    hdr->magic = vtrn::hostif::kMagic;
    hdr->abi_major = vtrn::hostif::kAbiMajor;
    hdr->capabilities = vtrn::hostif::kCapDma;
    (void)vtrn::hostif::publish_layout(hdr, kBar2, queues, depth);
    (void)vtrn::hostif::validate_layout(*hdr, kBar2, &layout_);
    const auto& dr = layout_.at(vtrn::hostif::kRegionDma);
    const auto& wr = layout_.at(vtrn::hostif::kRegionHostWindow);
    region_ = reinterpret_cast<vtrn::dma::DmaRegionHeader*>(bar2_ + dr.offset);
    region_->version = vtrn::dma::kDmaRegionVersion;
    region_->queue_count = queues;
    region_->depth = depth;
    region_->max_desc_bytes = vtrn::dma::kMaxDescBytes;
    region_->queue_stride = vtrn::dma::queue_stride(depth);
    region_->hbm_base = kHbmBase;
    region_->hbm_size = hbm_bytes;
    region_->max_chain_descs = vtrn::dma::kMaxChainDescs;
    map_.host_window = bar2_ + wr.offset;
    map_.host_window_size = wr.size;
    map_.hbm = hbm_.data();
    map_.hbm_base = kHbmBase;
    map_.hbm_size = hbm_bytes;
    for (uint32_t i = 0; i < queues; ++i) {
      queues_.emplace_back(ctl(i), sq(i), cq(i), depth, stats(i));
    }
  }
  ~FakeDmaChip() {
    stop();
    close(efd_);
    ::free(bar2_);
  }
  FakeDmaChip(const FakeDmaChip&) = delete;
  FakeDmaChip& operator=(const FakeDmaChip&) = delete;

  uint8_t* bar2() { return bar2_; }
  // FwHeader::state = READY, as the firmware publishes it once serving.
  void set_ready() {
    __atomic_store_n(&reinterpret_cast<vtrn::hostif::FwHeader*>(bar2_)->state, uint32_t(vtrn::hostif::kStateReady),
                     __ATOMIC_RELEASE);
  }
  const vtrn::hostif::Layout& layout() const { return layout_; }
  vtrn::dma::DmaRegionHeader* region() { return region_; }
  uint8_t* hbm() { return hbm_.data(); }
  int irq_fd() const { return efd_; }
  uint64_t irqs() const { return irqs_.load(); }

  uint8_t* queue_base(uint32_t q) {
    return reinterpret_cast<uint8_t*>(region_) + vtrn::dma::kDmaQueuesOffset +
           uint64_t(q) * vtrn::dma::queue_stride(depth_);
  }
  vtrn::dma::QueueControl* ctl(uint32_t q) { return reinterpret_cast<vtrn::dma::QueueControl*>(queue_base(q)); }
  vtrn::dma::QueueStats* stats(uint32_t q) {
    return reinterpret_cast<vtrn::dma::QueueStats*>(queue_base(q) + vtrn::dma::kQueueStatsOffset);
  }
  vtrn::dma::Descriptor* sq(uint32_t q) {
    return reinterpret_cast<vtrn::dma::Descriptor*>(queue_base(q) + vtrn::dma::kQueueSqOffset);
  }
  vtrn::dma::Completion* cq(uint32_t q) {
    return reinterpret_cast<vtrn::dma::Completion*>(queue_base(q) + vtrn::dma::cq_offset(depth_));
  }

  // One pass over every queue; true when anything moved.
  bool serve() {
    bool work = false, irq = false;
    for (auto& q : queues_) {
      vtrn::dma::PollResult r = q.poll(map_, copier_, 256);
      work |= r.descriptors != 0 || r.completions != 0;
      irq |= r.irq;
    }
    if (irq) {
      ++irqs_;
      uint64_t one = 1;
      (void)!write(efd_, &one, sizeof one);
    }
    return work;
  }

  // The host's doorbell (DmaEngine::Hooks::ring_chip).
  void ring() {
    {
      std::lock_guard<std::mutex> l(mu_);
      ++doorbells_;
    }
    cv_.notify_one();
  }
  uint64_t doorbells() {
    std::lock_guard<std::mutex> l(mu_);
    return doorbells_;
  }

  void start() {
    running_ = true;
    thread_ = std::thread([this] {
      uint64_t seen = 0;
      while (running_) {
        if (serve()) continue;
        std::unique_lock<std::mutex> l(mu_);
        // Doorbells are hints: a short timeout covers one that raced us.
        cv_.wait_for(l, std::chrono::microseconds(200), [&] { return doorbells_ != seen || !running_; });
        seen = doorbells_;
      }
    });
  }
  void stop() {
    if (!running_) return;
    running_ = false;
    cv_.notify_all();
    thread_.join();
  }

 private:
  struct MemcpyCopier final : vtrn::dma::Copier {
    void copy(void* d, const void* s, size_t n) override { memcpy(d, s, n); }
  };

  uint32_t depth_;
  uint8_t* bar2_ = nullptr;
  std::vector<uint8_t> hbm_;
  int efd_ = -1;
  vtrn::hostif::Layout layout_{};
  vtrn::dma::DmaRegionHeader* region_ = nullptr;
  vtrn::dma::AddressMap map_{};
  MemcpyCopier copier_;
  std::vector<vtrn::dma::Queue> queues_;
  std::atomic<uint64_t> irqs_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t doorbells_ = 0;
  std::atomic<bool> running_{false};
  std::thread thread_;
};

}  // namespace fake
