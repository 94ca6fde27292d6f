// hal::copy::DmaCopier: adapts a copy Engine to vtrn::dma::Copier, the
// interface vtrn::dma::Queue::poll moves each validated descriptor through.
//
// The queue has already resolved and validated the descriptor (ranges inside
// the host window or HBM, no overlap, length within kMaxDescBytes), so the
// adapter passes (dst, src, length) to the engine unchanged; it only splits
// a copy that is longer than the engine's Capabilities::max_length into
// consecutive max_length pieces (rounded down to the engine's alignment).
//
// The quirk that shaped it: Copier::copy returns nothing, so the queue
// cannot learn that an engine failed and completes the descriptor as moved.
// The adapter therefore latches the first failure (the engine's status) and
// stops copying the rest of that descriptor; the DMA service must call
// take_error() after each Queue::poll and treat a non-kOk result as an
// engine fault (log it, stop the queue). A hardware engine that can fail
// needs Copier to return a status; the firmware-driven CpuEngine never fails.
//
// CpuDmaCopier is the lean path for the chip's own synchronous CPU copy: it
// calls hal_copy_memcpy directly. Going through DmaCopier + CpuEngine costs
// four virtual calls and the Engine's argument checks per descriptor, and
// those checks repeat what Queue::validate has just done; under QEMU TCG that
// overhead was most of the 0.7 us a 64 B descriptor took. An asynchronous
// (hardware) engine keeps using DmaCopier and the Engine interface.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hal/copy.h"
#include "hal/status.h"
#include "vtrn/dma_queue.h"

namespace hal::copy {

class DmaCopier final : public vtrn::dma::Copier {
 public:
  // `poll_limit` bounds the wait for each piece (Engine::copy).
  explicit DmaCopier(Engine& engine, uint32_t poll_limit = 1u << 20)
      : engine_(engine), poll_limit_(poll_limit) {}
  DmaCopier(const DmaCopier&) = delete;
  DmaCopier& operator=(const DmaCopier&) = delete;

  void copy(void* dst, const void* src, size_t length) override;

  // The first failure since the last call (kOk if none), then clears it.
  [[nodiscard]] Status take_error();
  // Failures since construction (not cleared by take_error).
  uint64_t failures() const { return failures_; }

 private:
  Engine& engine_;
  uint32_t poll_limit_;
  Status error_ = Status::kOk;
  uint64_t failures_ = 0;
};

// Copier for the firmware-driven backend: one hal_copy_memcpy per descriptor,
// no Engine in between. Only for ranges the queue has validated (inside the
// host window or HBM, non-overlapping); it never fails.
class CpuDmaCopier final : public vtrn::dma::Copier {
 public:
  CpuDmaCopier() = default;
  CpuDmaCopier(const CpuDmaCopier&) = delete;
  CpuDmaCopier& operator=(const CpuDmaCopier&) = delete;

  void copy(void* dst, const void* src, size_t length) override {
    hal_copy_memcpy(dst, src, length);
    ++copies_;
    bytes_ += length;
  }

  uint64_t copies() const { return copies_; }
  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t copies_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace hal::copy
